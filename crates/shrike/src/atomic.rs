//! Files written whole or not at all: into a temporary file in the target's directory, then
//! renamed over the target, so a reader (or a crash, or a full disk) never sees half a result.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Makes sure `path` can be written, before a command spends anything on what it will hold
/// (a test's load): its missing parent directories are created (what a fresh Kubernetes
/// volume needs), and a file is created and removed beside it, as [`write`] will. A usage
/// error (exit 2) naming the path and why, if not.
pub fn ready(path: &Path, flag: &str) -> anyhow::Result<()> {
    let refuse = |why: String| {
        crate::args::usage(format!("{flag} {}: cannot be written: {why}", path.display()))
    };
    if path.is_dir() {
        return Err(refuse("it is a directory".into()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| refuse(format!("{}: {e}", dir.display())))?;
    let probe = temporary(path, dir);
    File::create(&probe).map_err(|e| refuse(e.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The temporary file `path` is written through, in `dir`.
fn temporary(path: &Path, dir: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `path` through `fill`. On any error the temporary file is removed and `path` is left
/// as it was.
pub fn write(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = temporary(path, dir);
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut out = BufWriter::new(file);
        fill(&mut out)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        // Durable before it takes the target's name.
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn whole_or_nothing() {
        let dir = std::env::temp_dir().join(format!("shrike-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        write(&path, |o| o.write_all(b"first")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        // A failing writer leaves the old file and no temporary behind.
        let e = write(&path, |o| {
            o.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // An unwritable directory is an error, not a panic.
        assert!(write(Path::new("/nonexistent-dir/r.json"), |o| o.write_all(b"x")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
