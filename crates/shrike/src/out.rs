//! Where a command writes: data on stdout, logs on stderr, and what happens when whoever reads
//! them goes away (`shrike run | head -1`).
//!
//! Rust ignores SIGPIPE (the engine's sockets rely on it), so a closed pipe is an `EPIPE`
//! error on the next write, and `println!` turns that into a panic. Here instead:
//! - stdout carries the data a command exists for: when its reader is gone, the command ends
//!   quietly with status 141, what a process killed by SIGPIPE reports to its shell
//!   ([`ClosedPipe`], mapped in `main`). Files (`-o`) are written before stdout, so they are
//!   kept.
//! - stderr carries logs: a closed stderr loses the log lines, never the run or its result.

use std::io::{self, Write};

/// Standard output's reader went away: end quietly, as a process killed by SIGPIPE would.
#[derive(Debug)]
pub struct ClosedPipe;

impl std::fmt::Display for ClosedPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for ClosedPipe {}

/// The exit status of a process that SIGPIPE ended (128 + 13), as shells report it.
pub const CLOSED_PIPE_STATUS: u8 = 141;

/// Writes to stdout through `write` (buffered, flushed at the end).
pub fn stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(ClosedPipe.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to stdout")),
    }
}

/// `text` on stdout, as it is.
pub fn print(text: &str) -> anyhow::Result<()> {
    stdout(|w| w.write_all(text.as_bytes()))
}

/// `text` on stderr, as it is; lost if stderr is closed.
pub fn eprint(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// One line on stderr; lost if stderr is closed.
pub fn eprintln(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}").and_then(|()| err.flush());
}
