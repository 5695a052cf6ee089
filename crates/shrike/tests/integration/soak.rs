//! A shortened soak: `shrike serve` under a steady h1 and h2 load with interval stats, while
//! the server's and both clients' resident memory and open files are sampled from /proc.
//! Neither may trend upward: a leak per request or per connection shows as growth between the
//! second and the last quarter (the first is warm-up). `bench/soak.py` runs the 10-minute one.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const SECONDS: u64 = 16;
const RPS: u64 = 400;

/// RSS in KiB and open file descriptors of `pid`, or None once it has exited.
fn sample(pid: u32) -> Option<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib = rss.split_whitespace().nth(1)?.parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((kib, fds))
}

fn client(url: &str, protocol: &str) -> Child {
    shrike()
        .args(["run", url, "--protocol", protocol, "--rps", &RPS.to_string()])
        // Every connection opened before the clock starts: a lazily growing pool would add
        // open files whenever a stall on a busy machine needs more concurrency, which is no
        // leak; with the pool full from the start, any growth is one.
        .args(["--duration", &SECONDS.to_string(), "--connections", "20"])
        // HTTP/2 opens its connections as streams need them (ahead is HTTP/1.1's alone).
        .args(if protocol == "http1" { &["--prefetch-connections"][..] } else { &[] })
        .args(["--stats-interval", "1s", "--output-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

fn mean(xs: &[u64]) -> f64 {
    xs.iter().sum::<u64>() as f64 / xs.len().max(1) as f64
}

#[test]
fn memory_and_open_files_stay_flat_under_a_steady_load() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let before = Witness::before(&server);
    let clients = [("h1", client(&url, "http1")), ("h2", client(&url, "http2"))];
    let pids = [("server", server.pid()), ("h1", clients[0].1.id()), ("h2", clients[1].1.id())];
    let mut series: Vec<Vec<(u64, usize)>> = vec![Vec::new(); pids.len()];
    let start = Instant::now();
    // Sampling stops a little before the clients' end: their drain and result are not load.
    while start.elapsed() < Duration::from_secs(SECONDS - 1) {
        for (i, (_, pid)) in pids.iter().enumerate() {
            if let Some(s) = sample(*pid) {
                series[i].push(s);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let mut answered = 0;
    for (name, child) in clients {
        let out = wait_limited(child, Duration::from_secs(SECONDS + 30));
        assert_eq!(out.code(), 0, "{name}: {}", out.stderr);
        let v = json(&out);
        let ok = counter(global(&v), "benchmark.http_2xx");
        answered += ok;
        let planned = RPS * SECONDS;
        assert!(ok + planned / 50 >= planned && ok <= planned, "{name}: {ok} of {planned}");
        // Interval stats ran all along (one line a second).
        let intervals = out.stderr.lines().filter(|l| l.contains("interval")).count();
        assert!(intervals as u64 >= SECONDS - 3, "{name}: {intervals} intervals\n{}", out.stderr);
    }
    // The server answered what the two clients counted, over the whole soak.
    let w = Witness::since(&server, before);
    assert_eq!(w.count("/responses/2xx"), answered, "the server's 2xx against the clients'");
    // The h1 client's 20 connections were opened ahead (those it never needed sent nothing),
    // and none was opened again.
    let h1 = w.count("/connections/accepted") - w.count("/connections/http2");
    assert_eq!(h1, 20, "the h1 client's connections");
    for ((name, _), s) in pids.iter().zip(&series) {
        assert!(s.len() >= 40, "{name}: only {} samples", s.len());
        let q = s.len() / 4;
        let rss: Vec<u64> = s.iter().map(|x| x.0).collect();
        let fds: Vec<usize> = s[q..].iter().map(|x| x.1).collect();
        let (second, last) = (mean(&rss[q..2 * q]), mean(&rss[3 * q..]));
        // ~5k requests between the two quarters: 3 MiB is a leak of ~600 bytes a request.
        assert!(last - second < 3072.0, "{name}: RSS grew from {second:.0} to {last:.0} KiB");
        let (lo, hi) = (fds.iter().min().unwrap(), fds.iter().max().unwrap());
        eprintln!("{name}: RSS {second:.0} -> {last:.0} KiB, open files {lo}..{hi}");
        assert!(hi - lo <= 2, "{name}: open files went from {lo} to {hi}");
    }
}
