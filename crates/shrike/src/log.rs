//! Leveled logging to stderr (data goes to stdout, logs never do).
//!
//! Lines are plain `[shrike] …` text, with the level in colour when stderr is a terminal and
//! `NO_COLOR` is unset. When interval reports go to stderr as JSON lines, every log line is a
//! JSON object too (`{"log":"warn","message":"…"}`), so a file that captured stderr parses
//! line by line with `jq` instead of mixing two formats.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Critical,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JSON: AtomicBool = AtomicBool::new(false);

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Log lines become JSON objects (stderr carries JSON lines).
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// Whether colour is wanted on stderr: a terminal, and no `NO_COLOR` (https://no-color.org).
fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// How a line is marked: its JSON level name, and its text prefix with the ANSI colour used on
/// terminals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// `[shrike] …`
    Info,
    /// `[shrike] warning: …` in yellow.
    Warning,
    /// `error: …` in red.
    Error,
    /// `[shrike] …` in green: a run that ended as it should.
    Done,
}

/// Writes one log line to stderr.
pub fn line(tag: Tag, msg: &str) {
    let (json_level, prefix, ansi) = match tag {
        Tag::Info => ("info", "[shrike] ", ""),
        Tag::Warning => ("warn", "[shrike] warning: ", "33"),
        Tag::Error => ("error", "error: ", "31"),
        Tag::Done => ("info", "[shrike] ", "32"),
    };
    let line = if JSON.load(Ordering::Relaxed) {
        serde_json::json!({ "log": json_level, "message": msg }).to_string()
    } else if !ansi.is_empty() && colour() {
        format!("\x1b[{ansi}m{prefix}{msg}\x1b[0m")
    } else {
        format!("{prefix}{msg}")
    };
    crate::out::eprintln(&line);
}

macro_rules! info {
    ($($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Info) {
            $crate::log::line($crate::log::Tag::Info, &format!($($arg)*));
        }
    };
}
macro_rules! warning {
    ($($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Warn) {
            $crate::log::line($crate::log::Tag::Warning, &format!($($arg)*));
        }
    };
}
pub(crate) use {info, warning};
