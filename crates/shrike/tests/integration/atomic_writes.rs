//! Files Shrike writes are whole or absent: a reader polling the target never sees half of
//! one, a full or read-only file system fails the command with exit 1 and a message naming the
//! file, the old file stays, and the result still reaches the screen.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(60);
const OLD: &str = "OLD CONTENTS\n";

/// Reads `path` over and over until `done`; every read must be `OLD` or pass `whole`.
/// Returns how many reads saw new contents.
fn watch(path: &Path, done: &AtomicBool, whole: impl Fn(&str) -> bool) -> usize {
    let mut new = 0;
    while !done.load(Ordering::Relaxed) {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        if text != OLD {
            assert!(whole(&text), "a reader saw a partial file ({} bytes)", text.len());
            new += 1;
        }
    }
    new
}

/// A jobs file of `n` one-request jobs, 1 ms apart.
fn jobs(n: usize) -> String {
    let mut s = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n");
    for i in 0..n {
        let path = format!("/item/{i}?padding={}", "x".repeat(200));
        s.push_str(&format!(
            "{{\"job\": {i}, \"start\": {}, \"requests\": [{{\"at\": 0, \"method\": \"GET\", \"path\": \"{path}\"}}]}}\n",
            i as f64 / 1000.0
        ));
    }
    s
}

fn complete_jobs(text: &str, n: usize) -> bool {
    text.ends_with('\n')
        && text.lines().count() == n + 1
        && text.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
}

#[test]
fn readers_never_see_a_half_written_file() {
    let dir = scratch("atomic-readers");
    let input = dir.join("in.jobs");
    std::fs::write(&input, jobs(20_000)).unwrap();
    let out = dir.join("out.jobs");
    let result = dir.join("r.json");
    std::fs::write(&out, OLD).unwrap();
    std::fs::write(&result, OLD).unwrap();
    let server = Server::start(&[]);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let jobs_reads = s.spawn(|| watch(&out, &done, |t| complete_jobs(t, 20_000)));
        let result_reads = s.spawn(|| {
            watch(&result, &done, |t| serde_json::from_str::<serde_json::Value>(t).is_ok())
        });
        for _ in 0..3 {
            let o = run(
                &["jobs", "filter", input.to_str().unwrap(), "-o", out.to_str().unwrap()],
                LIMIT,
            );
            assert_eq!(o.code(), 0, "{}", o.stderr);
            let o = run(
                &[
                    "run",
                    &server.url("/"),
                    "-n",
                    "20",
                    "--rps",
                    "200",
                    "-o",
                    result.to_str().unwrap(),
                ],
                LIMIT,
            );
            assert_eq!(o.code(), 0, "{}", o.stderr);
        }
        done.store(true, Ordering::Relaxed);
        assert!(jobs_reads.join().unwrap() > 0, "the watcher never saw the jobs file written");
        assert!(result_reads.join().unwrap() > 0, "the watcher never saw the result written");
    });
    // No temporary file is left beside them.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["in.jobs", "out.jobs", "r.json"]);

    // Filtering a file onto itself: its input is read whole before it is replaced.
    let o = run(
        &["jobs", "filter", input.to_str().unwrap(), "--to", "5s", "-o", input.to_str().unwrap()],
        LIMIT,
    );
    assert_eq!(o.code(), 0, "{}", o.stderr);
    assert!(complete_jobs(&std::fs::read_to_string(&input).unwrap(), 5_000));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `script` (with `$D` a fresh tmpfs mounted with `mount_opts`, holding `r.json` = OLD)
/// in a mount namespace of its own, then prints the directory: the test sees what the
/// command left behind.
fn on_small_fs(mount_opts: &str, command: &str) -> Output {
    let bin = env!("CARGO_BIN_EXE_shrike");
    let script = format!(
        "D=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs \"$D\" && printf '{}' > \"$D/r.json\" \
         && mount -o remount,{mount_opts} \"$D\" && {command}; rc=$?; \
         echo '--- left:'; ls -A \"$D\"; echo '--- r.json:'; cat \"$D/r.json\"; exit $rc",
        OLD.trim_end().to_string() + "\\n"
    );
    let child = Command::new("unshare")
        .args(["-m", "sh", "-c", &script, "sh", bin])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unshare");
    wait_limited(child, LIMIT)
}

/// A disk that fills during the run fails the command after it (exit 1: the result did not
/// fit, the report still reached the screen); a read-only one is refused before any load
/// (exit 2: the check that the output can be written). Neither loses the old file.
#[test]
fn a_full_or_read_only_disk_fails_with_exit_1_and_loses_nothing_else() {
    let server = Server::start(&[]);
    let url = server.url("/");
    for (opts, says) in [
        // 64 KiB, filled up first: the result does not fit.
        ("rw", "No space left on device"),
        ("ro", "Read-only file system"),
    ] {
        let fill =
            if opts == "rw" { "head -c 60000 /dev/zero > \"$D/filler\" 2>/dev/null; " } else { "" };
        let command = format!(
            "{fill}\"$1\" run {url} -n 20 --rps 200 --request-header 'x-big: {}' -o \"$D/r.json\"",
            "y".repeat(4000)
        );
        let before = Witness::before(&server);
        let out = on_small_fs(opts, &command);
        let w = Witness::since(&server, before);
        let case = format!("{opts}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{case}");
        let (report, left) = out.stdout.split_once("--- left:").unwrap();
        if opts == "rw" {
            assert_eq!(out.code(), 1, "{case}");
            assert!(out.stderr.contains("cannot write the result to"), "{case}");
            // The human report still reached the screen, ahead of what the script printed.
            assert!(report.contains("20 of 20 requests succeeded"), "{report}");
            assert_eq!(w.count("/responses/2xx"), 20, "the server answered the 20 reported");
        } else {
            assert_eq!(out.code(), 2, "{case}");
            assert!(out.stderr.contains("r.json: cannot be written"), "{case}");
            assert!(!report.contains("requests succeeded"), "nothing ran: {report}");
            assert_eq!(w.count("/requests"), 0, "refused before any load");
        }
        // The old file is intact, and no temporary file is left.
        let (names, old) = left.split_once("--- r.json:").unwrap();
        let mut names: Vec<&str> = names.split_whitespace().collect();
        names.sort();
        let want: Vec<&str> = if opts == "rw" { vec!["filler", "r.json"] } else { vec!["r.json"] };
        assert_eq!(names, want, "{case}");
        assert_eq!(old.trim(), OLD.trim(), "{case}");
    }
}
