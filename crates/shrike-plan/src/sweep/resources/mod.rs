//! Server resource sampling from /proc (and a cgroup's own counters): CPU, RSS, virtual
//! size, open files and context switches of every process of a server and every thread of
//! each, and the machine's CPU, over exactly one point's measuring window (started when its
//! load starts, finished when it ends). See [`read`] for what is read where.

mod read;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use read::Reading;
pub use read::Source;

/// User + system CPU seconds of one process (not its children), e.g. the client itself.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    read::process(pid).map(|p| p.cpu_seconds)
}

/// The CPUs a process may run on (its affinity), from /proc/PID/status: what its CPU use is
/// judged against.
pub fn allowed_cores(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim();
    cpu_list(list)
}

/// How many CPUs a list such as `0-3,6` names.
fn cpu_list(list: &str) -> Option<f64> {
    let mut n = 0u32;
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => n += b.trim().parse::<u32>().ok()? - a.trim().parse::<u32>().ok()? + 1,
            None => n += 1,
        }
    }
    (n > 0).then_some(f64::from(n))
}

/// The cores a server from `source` may use: its root's affinity, or a cgroup's CPU quota
/// (cpu.max), else its cpuset.
pub fn source_cores(source: &Source) -> Option<f64> {
    match source {
        Source::Cgroup(dir) => {
            let max = std::fs::read_to_string(dir.join("cpu.max")).ok();
            let quota = max.as_deref().and_then(|m| {
                let mut f = m.split_whitespace();
                let (q, period) = (f.next()?.parse::<f64>().ok()?, f.next()?.parse::<f64>().ok()?);
                (period > 0.0).then(|| q / period)
            });
            quota.or_else(|| {
                let cpus = std::fs::read_to_string(dir.join("cpuset.cpus.effective")).ok()?;
                cpu_list(cpus.trim())
            })
        }
        s => s.root().and_then(allowed_cores),
    }
}

/// Whether `pid` names a live process.
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
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
    /// How the server was found (`pid 123`, `pid file …`, `cgroup …`), if it was sampled.
    pub source: Option<String>,
    /// The server's root process at the last sample (none for a cgroup).
    pub pid: Option<u32>,
    /// Server CPU in cores (1.0 = one core busy for the whole window), every process and
    /// thread; never negative.
    pub cpu_cores: Option<f64>,
    /// The highest RSS (a cgroup's memory.current, for a cgroup) and virtual size sampled,
    /// and the mean RSS.
    pub rss_max_bytes: Option<u64>,
    pub rss_mean_bytes: Option<f64>,
    pub vms_max_bytes: Option<u64>,
    pub fds_max: Option<u64>,
    /// Context switches per second over the window, of every thread: all, and split into
    /// voluntary (the thread waited: I/O, locks) and involuntary (it was preempted).
    pub ctx_switches_per_sec: Option<f64>,
    pub voluntary_ctx_switches_per_sec: Option<f64>,
    pub involuntary_ctx_switches_per_sec: Option<f64>,
    /// The most processes and threads seen in one sample.
    pub processes_max: Option<usize>,
    pub threads_max: Option<usize>,
    /// The machine's busy share of all its CPUs over the window (0..1).
    pub system_cpu: Option<f64>,
    pub samples: usize,
    /// The seconds the readings summarized span (the run's window, to the sampling's step).
    pub window_s: Option<f64>,
}

/// Samples a server on a thread while a window lasts.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Sampled>>,
    /// The start, on both clocks: a run's window (wall clock, as results record it) maps to
    /// the readings' monotonic times through it.
    anchor: (Instant, SystemTime),
}

/// What the sampling thread read: every reading, and what it read them of.
struct Sampled {
    readings: Vec<Sample>,
    source: Option<String>,
    pid: Option<u32>,
}

impl Sampler {
    /// Starts sampling `source` (if any: without one only the machine's CPU is sampled) every
    /// `interval`. The first reading is taken now, so the window starts with the load.
    pub fn start(source: Option<Source>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let first = (Instant::now(), source.as_ref().and_then(read::read), system_ticks());
        let anchor = (first.0, SystemTime::now());
        let thread = std::thread::Builder::new()
            .name("shrike-sampler".into())
            .spawn(move || sample(source, interval, first, &flag))
            .ok();
        Sampler { stop, thread, anchor }
    }

    /// Ends the window (a last reading is taken now) and returns what it saw.
    pub fn finish(self) -> Window {
        self.finish_over(None)
    }

    /// Ends the sampling and returns what it saw over `window` only (wall clock, start and
    /// end): the run's own, not what came before it (a fleet's generators start together
    /// seconds after they are asked) or after it. The readings inside it when there are two
    /// or more, else the nearest around it; `None` takes every reading.
    pub fn finish_over(mut self, window: Option<(SystemTime, SystemTime)>) -> Window {
        self.stop.store(true, Ordering::Release);
        let Some(s) = self.thread.take().and_then(|t| t.join().ok()) else {
            return Window::default();
        };
        let (i0, w0) = self.anchor;
        let at = |t: SystemTime| match t.duration_since(w0) {
            Ok(d) => i0 + d,
            Err(e) => i0.checked_sub(e.duration()).unwrap_or(i0),
        };
        let kept: Vec<Sample> = match window {
            None => s.readings,
            Some((from, to)) => {
                let (from, to) = (at(from), at(to));
                let inside: Vec<Sample> =
                    s.readings.iter().filter(|r| r.0 >= from && r.0 <= to).cloned().collect();
                if inside.len() >= 2 {
                    inside
                } else {
                    let before = s.readings.iter().rposition(|r| r.0 <= from).unwrap_or(0);
                    let after = s
                        .readings
                        .iter()
                        .position(|r| r.0 >= to)
                        .unwrap_or(s.readings.len().saturating_sub(1));
                    s.readings
                        .get(before..=after.max(before))
                        .map(<[Sample]>::to_vec)
                        .unwrap_or_default()
                }
            }
        };
        let covered = match (kept.first(), kept.last()) {
            (Some(a), Some(b)) => Some(b.0.duration_since(a.0).as_secs_f64()),
            _ => None,
        };
        Window { source: s.source, pid: s.pid, window_s: covered, ..summarize(&kept) }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

type Sample = (Instant, Option<Reading>, Option<(f64, f64)>);

fn sample(source: Option<Source>, interval: Duration, first: Sample, stop: &AtomicBool) -> Sampled {
    let readings = Mutex::new(vec![first]);
    let push = |r: Sample| readings.lock().map(|mut v| v.push(r)).unwrap_or(());
    let read_now = || (Instant::now(), source.as_ref().and_then(read::read), system_ticks());
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        // Short sleeps, so a finished window is noticed within a few ms.
        std::thread::sleep(Duration::from_millis(5).min(interval));
        if Instant::now() >= next {
            push(read_now());
            next += interval;
        }
    }
    push(read_now());
    Sampled {
        readings: readings.into_inner().unwrap_or_default(),
        source: source.as_ref().map(Source::describe),
        pid: source.as_ref().and_then(Source::root),
    }
}

fn summarize(r: &[Sample]) -> Window {
    let (Some(first), Some(last)) = (r.first(), r.last()) else { return Window::default() };
    let secs = last.0.duration_since(first.0).as_secs_f64();
    let per_sec = |d: f64| (secs > 0.0).then(|| d / secs);
    // Usage between consecutive readings that both saw the server, summed: what a process
    // or thread used before it exited still counts, and no difference is ever negative.
    let mut sums: Option<(f64, u64, u64)> = None;
    for pair in r.windows(2) {
        if let (Some(a), Some(b)) = (&pair[0].1, &pair[1].1) {
            let (cpu, vol, invol) = read::between(a, b);
            let s = sums.get_or_insert((0.0, 0, 0));
            *s = (s.0 + cpu, s.1 + vol, s.2 + invol);
        }
    }
    let seen: Vec<&Reading> = r.iter().filter_map(|x| x.1.as_ref()).collect();
    let rss = |x: &Reading| {
        x.cgroup_memory_bytes.unwrap_or_else(|| x.procs.values().map(|p| p.rss_bytes).sum())
    };
    let max = |f: &dyn Fn(&Reading) -> u64| seen.iter().map(|x| f(x)).max();
    let system_cpu = first
        .2
        .zip(last.2)
        .and_then(|((b0, t0), (b1, t1))| (t1 > t0).then(|| (b1 - b0) / (t1 - t0)));
    let rss_mean = (!seen.is_empty())
        .then(|| seen.iter().map(|x| rss(x) as f64).sum::<f64>() / seen.len() as f64);
    Window {
        source: None,
        pid: None,
        cpu_cores: sums.and_then(|s| per_sec(s.0)),
        rss_max_bytes: max(&rss),
        rss_mean_bytes: rss_mean,
        vms_max_bytes: max(&|x| x.procs.values().map(|p| p.vms_bytes).sum()),
        fds_max: max(&|x| x.procs.values().map(|p| p.fds).sum()),
        ctx_switches_per_sec: sums.and_then(|s| per_sec((s.1 + s.2) as f64)),
        voluntary_ctx_switches_per_sec: sums.and_then(|s| per_sec(s.1 as f64)),
        involuntary_ctx_switches_per_sec: sums.and_then(|s| per_sec(s.2 as f64)),
        processes_max: seen.iter().map(|x| x.procs.len()).max(),
        threads_max: seen.iter().map(|x| x.procs.values().map(|p| p.threads.len()).sum()).max(),
        system_cpu,
        samples: r.len(),
        window_s: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_as_proc_says() {
        let me = std::process::id();
        let rss_kb = || -> f64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
            kb.split_whitespace().next().unwrap().parse().unwrap()
        };
        // Other tests allocate in this process meanwhile: the reading lies between the RSS
        // read just before and just after it, give or take 10%.
        let before = rss_kb() * 1024.0;
        let r = read::read(&Source::Tree(me)).unwrap();
        let after = rss_kb() * 1024.0;
        let p = &r.procs[&me];
        let (lo, hi) = (before.min(after) * 0.9, before.max(after) * 1.1);
        assert!((lo..=hi).contains(&(p.rss_bytes as f64)), "{p:?} vs {before}..{after}");
        assert!(p.fds >= 3 && p.vms_bytes >= p.rss_bytes, "{p:?}");
        // Every thread of this test binary, not only the main one.
        let tasks = std::fs::read_dir("/proc/self/task").unwrap().count();
        assert!(p.threads.len() >= tasks.min(2), "{p:?}");
        assert!(read::read(&Source::Tree(u32::MAX - 1)).is_none());
        assert!(read::read(&Source::PidFile("/nonexistent/x.pid".into())).is_none());
    }

    #[test]
    fn context_switches_of_every_thread_count() {
        // A thread that sleeps 40 times switches out voluntarily 40 times or more, while the
        // main thread waits in one join: the window sees the worker's switches (most of them:
        // those after the last sample before it exits are lost), which the main thread's own
        // status never shows.
        let began = Instant::now();
        let s = Sampler::start(Some(Source::Tree(std::process::id())), Duration::from_millis(10));
        let sleeper = std::thread::spawn(|| {
            for _ in 0..40 {
                std::thread::sleep(Duration::from_millis(3));
            }
            std::thread::sleep(Duration::from_millis(30));
        });
        sleeper.join().unwrap();
        let w = s.finish();
        let elapsed = began.elapsed().as_secs_f64();
        let voluntary = w.voluntary_ctx_switches_per_sec.unwrap() * elapsed;
        assert!(voluntary >= 30.0, "{voluntary} voluntary switches: {w:?}");
        assert!(w.threads_max.unwrap() >= 2, "{w:?}");
        assert!(w.cpu_cores.unwrap() >= 0.0);
    }

    #[test]
    fn cpu_lists_count_their_cpus() {
        assert_eq!(cpu_list("0-3,6"), Some(5.0));
        assert_eq!(cpu_list("1"), Some(1.0));
        assert_eq!(cpu_list(""), None);
    }

    /// `sh -c SCRIPT` in a process group of its own, ended (the whole group) when dropped.
    struct Group(std::process::Child);

    impl Group {
        fn start(script: &str) -> Group {
            use std::os::unix::process::CommandExt as _;
            let child = std::process::Command::new("sh")
                .args(["-c", script])
                .process_group(0)
                .spawn()
                .unwrap();
            Group(child)
        }

        fn id(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            let group = format!("-{}", self.0.id());
            let _ = std::process::Command::new("kill").args(["--", &group]).status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_busy_window_shows_its_cpu() {
        // A process of its own that spins, under a shell that waits for it: the tree is about
        // one core, whatever the other tests in this process do meanwhile.
        let spin = Group::start("sh -c 'while :; do :; done' & wait");
        std::thread::sleep(Duration::from_millis(50));
        let s = Sampler::start(Some(Source::Tree(spin.id())), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(400));
        let w = s.finish();
        drop(spin);
        // One process spinning: about one core, give or take the tick granularity.
        let cpu = w.cpu_cores.unwrap();
        assert!((0.6..=1.4).contains(&cpu), "{w:?}");
        assert_eq!(w.processes_max, Some(2), "the shell and its spinning child: {w:?}");
        assert!(w.samples >= 5, "{w:?}");
        assert!(w.system_cpu.unwrap() > 0.0);
    }

    #[test]
    fn a_window_of_the_run_leaves_out_what_came_before_it() {
        // A process that sleeps 400 ms, then spins: sampled from the start, it reads about
        // half a core over everything, but about one over the spinning window alone (what a
        // fleet's generators loaded after their start delay).
        let proc = Group::start("sleep 0.4; while :; do :; done");
        let s = Sampler::start(Some(Source::Tree(proc.id())), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(500));
        let from = SystemTime::now();
        std::thread::sleep(Duration::from_millis(400));
        let to = SystemTime::now();
        let w = s.finish_over(Some((from, to)));
        drop(proc);
        let covered = w.window_s.unwrap();
        assert!((0.3..=0.45).contains(&covered), "the spinning window only: {w:?}");
        let cpu = w.cpu_cores.unwrap();
        assert!((0.6..=1.4).contains(&cpu), "{w:?}");
    }
}
