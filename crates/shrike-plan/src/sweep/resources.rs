//! Server resource sampling from /proc: CPU, RSS, virtual size, open files and context
//! switches of a process and all its descendants, and the machine's CPU, over exactly one
//! point's measuring window (started when its load starts, finished when it ends).
//!
//! CPU times in /proc/PID/stat count clock ticks of USER_HZ, which Linux fixes at 100 for
//! /proc on every architecture; sizes come from /proc/PID/status in kB, so no page size is
//! assumed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const USER_HZ: f64 = 100.0;

/// One reading of a process tree.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// User + system CPU seconds of every process in the tree (alive at reading).
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub vms_bytes: u64,
    pub fds: u64,
    /// Voluntary + involuntary context switches of the tree's main threads.
    pub ctx_switches: u64,
    pub processes: usize,
}

/// User + system CPU seconds of one process (not its children), e.g. the client itself.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    read_one(pid).map(|u| u.cpu_seconds)
}

/// The CPUs a process may run on (its affinity), from /proc/PID/status: what its CPU use is
/// judged against.
pub fn allowed_cores(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim();
    let mut n = 0u32;
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => n += b.trim().parse::<u32>().ok()? - a.trim().parse::<u32>().ok()? + 1,
            None => n += 1,
        }
    }
    Some(f64::from(n))
}

/// Whether `pid` names a live process.
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
}

/// Reads `pid` and its descendants; `None` when `pid` itself is gone.
pub fn read_tree(pid: u32) -> Option<Usage> {
    let mut total = read_one(pid)?;
    let mut stack = children(pid);
    while let Some(child) = stack.pop() {
        if let Some(u) = read_one(child) {
            total.cpu_seconds += u.cpu_seconds;
            total.rss_bytes += u.rss_bytes;
            total.vms_bytes += u.vms_bytes;
            total.fds += u.fds;
            total.ctx_switches += u.ctx_switches;
            total.processes += 1;
        }
        stack.extend(children(child));
    }
    Some(total)
}

fn read_one(pid: u32) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command, may hold spaces and parentheses: the fixed fields follow its last ')'.
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let cpu_seconds = (tick(11) + tick(12)) / USER_HZ;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    Some(Usage {
        cpu_seconds,
        rss_bytes: field("VmRSS:") * 1024,
        vms_bytes: field("VmSize:") * 1024,
        fds,
        ctx_switches: field("voluntary_ctxt_switches:") + field("nonvoluntary_ctxt_switches:"),
        processes: 1,
    })
}

/// Direct children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let path = t.path().join("children");
        if let Ok(list) = std::fs::read_to_string(path) {
            out.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// The machine's busy and total CPU ticks (all CPUs), from /proc/stat's `cpu` line.
fn system_ticks() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: f64 = v.iter().take(8).sum();
    // idle and iowait are not busy.
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    Some((total - idle, total))
}

/// What one measuring window saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// The process whose tree was sampled (none: only the machine's CPU).
    pub pid: Option<u32>,
    /// Server CPU in cores (1.0 = one core busy for the whole window).
    pub cpu_cores: Option<f64>,
    /// The highest RSS and virtual size sampled, and the mean RSS.
    pub rss_max_bytes: Option<u64>,
    pub rss_mean_bytes: Option<f64>,
    pub vms_max_bytes: Option<u64>,
    pub fds_max: Option<u64>,
    /// Context switches per second over the window.
    pub ctx_switches_per_sec: Option<f64>,
    /// The machine's busy share of all its CPUs over the window (0..1).
    pub system_cpu: Option<f64>,
    pub samples: usize,
}

/// Samples a process tree on a thread while a window lasts.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Window>>,
}

impl Sampler {
    /// Starts sampling `pid` (if any: without one only the machine's CPU is sampled) every
    /// `interval`. The first reading is taken now, so the window starts with the load.
    pub fn start(pid: Option<u32>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let first = (Instant::now(), pid.and_then(read_tree), system_ticks());
        let thread = std::thread::Builder::new()
            .name("shrike-sampler".into())
            .spawn(move || sample(pid, interval, first, &flag))
            .ok();
        Sampler { stop, thread }
    }

    /// Ends the window (a last reading is taken now) and returns what it saw.
    pub fn finish(mut self) -> Window {
        self.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

type Reading = (Instant, Option<Usage>, Option<(f64, f64)>);

fn sample(pid: Option<u32>, interval: Duration, first: Reading, stop: &AtomicBool) -> Window {
    let readings = Mutex::new(vec![first]);
    let push = |r: Reading| readings.lock().map(|mut v| v.push(r)).unwrap_or(());
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        // Short sleeps, so a finished window is noticed within a few ms.
        std::thread::sleep(Duration::from_millis(5).min(interval));
        if Instant::now() >= next {
            push((Instant::now(), pid.and_then(read_tree), system_ticks()));
            next += interval;
        }
    }
    push((Instant::now(), pid.and_then(read_tree), system_ticks()));
    let readings = readings.into_inner().unwrap_or_default();
    Window { pid, ..summarize(&readings) }
}

fn summarize(r: &[Reading]) -> Window {
    let (Some(first), Some(last)) = (r.first(), r.last()) else { return Window::default() };
    let secs = last.0.duration_since(first.0).as_secs_f64();
    let usages: Vec<&Usage> = r.iter().filter_map(|x| x.1.as_ref()).collect();
    let per_sec = |d: f64| (secs > 0.0).then(|| d / secs);
    let (u0, u1) = (first.1, last.1);
    let delta = |f: fn(&Usage) -> f64| u0.zip(u1).map(|(a, b)| f(&b) - f(&a));
    let cpu_cores = delta(|u| u.cpu_seconds).and_then(per_sec);
    let ctx = delta(|u| u.ctx_switches as f64).and_then(per_sec);
    let system_cpu = first
        .2
        .zip(last.2)
        .and_then(|((b0, t0), (b1, t1))| (t1 > t0).then(|| (b1 - b0) / (t1 - t0)));
    let rss_mean = (!usages.is_empty())
        .then(|| usages.iter().map(|u| u.rss_bytes as f64).sum::<f64>() / usages.len() as f64);
    Window {
        pid: None,
        cpu_cores,
        rss_max_bytes: usages.iter().map(|u| u.rss_bytes).max(),
        rss_mean_bytes: rss_mean,
        vms_max_bytes: usages.iter().map(|u| u.vms_bytes).max(),
        fds_max: usages.iter().map(|u| u.fds).max(),
        ctx_switches_per_sec: ctx,
        system_cpu,
        samples: r.len(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_as_proc_says() {
        let me = std::process::id();
        let u = read_tree(me).unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        // Read moments apart: RSS within 10%.
        let diff = (u.rss_bytes as f64 - rss_kb as f64 * 1024.0).abs();
        assert!(diff < 0.1 * rss_kb as f64 * 1024.0, "{u:?} vs {rss_kb} kB");
        assert!(u.fds >= 3 && u.vms_bytes >= u.rss_bytes, "{u:?}");
        assert!(read_tree(u32::MAX - 1).is_none());
    }

    #[test]
    fn a_busy_window_shows_its_cpu() {
        let s = Sampler::start(Some(std::process::id()), Duration::from_millis(20));
        let until = Instant::now() + Duration::from_millis(300);
        let mut x = 0u64;
        while Instant::now() < until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let w = s.finish();
        // One thread spinning: about one core, give or take the tick granularity.
        let cpu = w.cpu_cores.unwrap();
        assert!((0.6..=1.4).contains(&cpu), "{w:?}");
        assert!(w.samples >= 5, "{w:?}");
        assert!(w.system_cpu.unwrap() > 0.0);
    }
}
