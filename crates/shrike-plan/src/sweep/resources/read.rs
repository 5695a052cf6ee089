//! One reading of a server: every process of it and every thread of each, from /proc, and its
//! cgroup's own counters when it has one.
//!
//! CPU times in /proc/PID/stat count clock ticks of USER_HZ, which Linux fixes at 100 for
//! /proc on every architecture, and cover every thread of the process, including those that
//! have exited. Context switches are per thread (/proc/PID/task/TID/status): the process's
//! own status file counts only its main thread, which in a server whose work runs on worker
//! threads (tokio, Go, the JVM, Envoy) is nearly idle. Sizes come from /proc/PID/status in kB,
//! so no page size is assumed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const USER_HZ: f64 = 100.0;

/// Where a server's processes are found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A process and all its descendants.
    Tree(u32),
    /// The process a pid file names (re-read at every sample, so a server that daemonizes or
    /// restarts is followed) and its descendants.
    PidFile(PathBuf),
    /// Every process of a cgroup (v2), whose own counters give CPU and memory, including
    /// processes that exited within the window.
    Cgroup(PathBuf),
}

impl Source {
    /// The process a tree or pid file leads to now (a cgroup has no one process).
    pub fn root(&self) -> Option<u32> {
        match self {
            Source::Tree(pid) => Some(*pid),
            Source::PidFile(path) => pid_in(path),
            Source::Cgroup(_) => None,
        }
    }

    /// How a report names it.
    pub fn describe(&self) -> String {
        match self {
            Source::Tree(pid) => format!("pid {pid}"),
            Source::PidFile(p) => format!("pid file {}", p.display()),
            Source::Cgroup(p) => format!("cgroup {}", p.display()),
        }
    }

    /// Why it cannot be sampled now, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Source::Tree(pid) if !super::exists(*pid) => Err(format!("no such process {pid}")),
            Source::PidFile(p) => match std::fs::read_to_string(p) {
                Err(e) => Err(format!("{}: {e}", p.display())),
                Ok(text) => match text.trim().parse::<u32>() {
                    Ok(pid) if super::exists(pid) => Ok(()),
                    Ok(pid) => {
                        Err(format!("{} names pid {pid}, which is not running", p.display()))
                    }
                    Err(_) => Err(format!("{} does not hold a pid", p.display())),
                },
            },
            Source::Cgroup(p) if !p.join("cgroup.procs").exists() => {
                Err(format!("{} is not a cgroup (v2) directory: no cgroup.procs", p.display()))
            }
            _ => Ok(()),
        }
    }
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// One process as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Proc {
    /// Clock ticks since boot when it started: tells a reused pid from the process before.
    pub start: u64,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub vms_bytes: u64,
    pub fds: u64,
    /// Voluntary and involuntary context switches of each thread.
    pub threads: BTreeMap<u32, (u64, u64)>,
}

/// One reading of a whole server.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Reading {
    /// Seconds since boot when read (the clock process start times count on).
    pub uptime: f64,
    pub procs: BTreeMap<u32, Proc>,
    /// The cgroup's own CPU seconds and memory, when sampling one.
    pub cgroup_cpu_seconds: Option<f64>,
    pub cgroup_memory_bytes: Option<u64>,
}

/// Reads `source`; `None` when it names no process (a tree whose root is gone, a missing
/// pid file, an empty or missing cgroup).
pub(super) fn read(source: &Source) -> Option<Reading> {
    let uptime = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let mut reading = Reading { uptime, ..Reading::default() };
    match source {
        Source::Tree(_) | Source::PidFile(_) => {
            let root = source.root()?;
            reading.procs.insert(root, process(root)?);
            let mut stack = children(root);
            while let Some(child) = stack.pop() {
                if let Some(p) = process(child) {
                    reading.procs.insert(child, p);
                }
                stack.extend(children(child));
            }
        }
        Source::Cgroup(dir) => {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
            for pid in procs.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
                if let Some(p) = process(pid) {
                    reading.procs.insert(pid, p);
                }
            }
            let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok();
            reading.cgroup_cpu_seconds = stat.as_deref().and_then(|s| {
                let usec: f64 =
                    s.lines().find_map(|l| l.strip_prefix("usage_usec "))?.parse().ok()?;
                Some(usec / 1e6)
            });
            reading.cgroup_memory_bytes = std::fs::read_to_string(dir.join("memory.current"))
                .ok()
                .and_then(|m| m.trim().parse().ok());
            if reading.procs.is_empty() && reading.cgroup_cpu_seconds.is_none() {
                return None;
            }
        }
    }
    Some(reading)
}

/// The fixed fields of a stat line, after the command (field 2, which may hold spaces and
/// parentheses: they follow its last ')').
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.rsplit_once(')')?.1.split_whitespace().collect())
}

fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One process; `None` when it is gone.
pub(super) fn process(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&stat)?;
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime, stime and starttime are fields 14, 15 and 22: 11, 12 and 19 after the command.
    let cpu_seconds = (num(11) + num(12)) as f64 / USER_HZ;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let mut threads = BTreeMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(ts) = std::fs::read_to_string(t.path().join("status")) {
                let switches = (
                    status_field(&ts, "voluntary_ctxt_switches:"),
                    status_field(&ts, "nonvoluntary_ctxt_switches:"),
                );
                threads.insert(tid, switches);
            }
        }
    }
    Some(Proc {
        start: num(19),
        cpu_seconds,
        rss_bytes: status_field(&status, "VmRSS:") * 1024,
        vms_bytes: status_field(&status, "VmSize:") * 1024,
        fds,
        threads,
    })
}

/// Direct children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// What happened between two readings: CPU seconds and context switches (voluntary,
/// involuntary), each summed per process and per thread, so a process or thread that came or
/// went in between never makes a difference negative. One that appeared counts in full if it
/// started after the first reading, else not at all (its earlier use is unknown).
pub(super) fn between(a: &Reading, b: &Reading) -> (f64, u64, u64) {
    let mut cpu = 0.0;
    let (mut vol, mut invol) = (0u64, 0u64);
    for (pid, p) in &b.procs {
        let before = a.procs.get(pid).filter(|q| q.start == p.start);
        let new_since_a = (p.start as f64) / USER_HZ >= a.uptime;
        match before {
            Some(q) => cpu += (p.cpu_seconds - q.cpu_seconds).max(0.0),
            None if new_since_a => cpu += p.cpu_seconds,
            None => {}
        }
        for (tid, (v, n)) in &p.threads {
            match before.and_then(|q| q.threads.get(tid)) {
                Some((v0, n0)) => {
                    vol += v.saturating_sub(*v0);
                    invol += n.saturating_sub(*n0);
                }
                // A thread started in between (its process was there before, or is new).
                None if before.is_some() || new_since_a => {
                    vol += v;
                    invol += n;
                }
                None => {}
            }
        }
    }
    // A cgroup counts its own CPU, exited processes included: that figure wins.
    if let (Some(c0), Some(c1)) = (a.cgroup_cpu_seconds, b.cgroup_cpu_seconds) {
        cpu = (c1 - c0).max(0.0);
    }
    (cpu, vol, invol)
}
