//! `--metrics-listen`: a Prometheus scrape endpoint (text format 0.0.4) live during the run.
//!
//! The collector-thread observer folds each tick into a shared snapshot; a tiny HTTP/1.1
//! responder on its own thread renders it per scrape (`GET /metrics`, one request per
//! connection). Counters are cumulative `_total`s, status codes one labelled counter, latency
//! a summary whose quantiles are the last interval's and whose `_sum`/`_count` are cumulative
//! (Prometheus' summary semantics), and gauges tell where the run is.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shrike_engine::{Observer, Sample};
use shrike_output::prometheus::counter_name;
use shrike_stats::duration::seconds_decimal;
use shrike_stats::{Counter, Counters, Statistic, StatusCodes};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];
/// A scrape request head larger than this is refused.
const MAX_HEAD: usize = 8192;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Latency {
    /// The last interval's values at [`QUANTILES`], in ns.
    quantiles: Option<Vec<u64>>,
    sum_ns: f64,
    count: u64,
}

impl Latency {
    fn add_tick(&mut self, s: &Statistic) {
        self.sum_ns += s.mean() * s.count() as f64;
        self.count += s.count();
    }
    fn set_interval(&mut self, s: &Statistic) {
        // Clamped, so quantile 1 is the exact max and no quantile exceeds it (the histogram
        // answers with a bucket's top edge).
        self.quantiles = Some(QUANTILES.iter().map(|&q| s.clamped_quantile(q)).collect());
    }
}

/// Everything a scrape shows.
#[derive(Default)]
pub(crate) struct Snapshot {
    counters: Counters,
    codes: StatusCodes,
    sched: Latency,
    service: Latency,
    elapsed: Duration,
    run_duration: Option<Duration>,
    interval_rps: f64,
    in_flight: u64,
    intervals: u64,
    finished: bool,
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn summary(out: &mut String, name: &str, help: &str, l: &Latency) {
    family(out, name, "summary", help);
    for (i, q) in QUANTILES.iter().enumerate() {
        match l.quantiles.as_ref().and_then(|v| v.get(i)) {
            Some(&ns) => {
                let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {}", seconds_decimal(ns));
            }
            None => {
                let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} NaN");
            }
        }
    }
    let _ = writeln!(out, "{name}_sum {}", seconds_decimal(l.sum_ns.round() as u64));
    let _ = writeln!(out, "{name}_count {}", l.count);
}

/// Renders the text exposition format, version 0.0.4.
pub(crate) fn render(s: &Snapshot) -> String {
    let mut out = String::with_capacity(8192);
    family(&mut out, "shrike_run_elapsed_seconds", "gauge", "Time since the run started.");
    let _ = writeln!(out, "shrike_run_elapsed_seconds {}", s.elapsed.as_secs_f64());
    if let Some(d) = s.run_duration {
        family(&mut out, "shrike_run_duration_seconds", "gauge", "The run's configured duration.");
        let _ = writeln!(out, "shrike_run_duration_seconds {}", d.as_secs_f64());
        family(&mut out, "shrike_run_progress_ratio", "gauge", "Elapsed over configured duration.");
        let ratio = (s.elapsed.as_secs_f64() / d.as_secs_f64().max(1e-9)).min(1.0);
        let _ = writeln!(out, "shrike_run_progress_ratio {ratio}");
    }
    family(&mut out, "shrike_run_finished", "gauge", "1 once the run has ended.");
    let _ = writeln!(out, "shrike_run_finished {}", u8::from(s.finished));
    family(&mut out, "shrike_intervals_total", "counter", "Completed sampling intervals.");
    let _ = writeln!(out, "shrike_intervals_total {}", s.intervals);
    family(
        &mut out,
        "shrike_interval_requests_per_second",
        "gauge",
        "Requests completed per second in the last interval.",
    );
    let _ = writeln!(out, "shrike_interval_requests_per_second {}", s.interval_rps);
    family(
        &mut out,
        "shrike_requests_in_flight",
        "gauge",
        "Requests released and not finished (in flight or queued), at the last tick.",
    );
    let _ = writeln!(out, "shrike_requests_in_flight {}", s.in_flight);
    for &c in Counter::ALL {
        let name = counter_name(c);
        family(&mut out, &name, "counter", &format!("Shrike counter {}.", c.name()));
        let _ = writeln!(out, "{name} {}", s.counters.get(c));
    }
    family(&mut out, "shrike_responses_total", "counter", "Responses by exact status code.");
    for (code, n) in s.codes.non_zero() {
        let _ = writeln!(out, "shrike_responses_total{{code=\"{code}\"}} {n}");
    }
    summary(
        &mut out,
        "shrike_scheduled_to_response_seconds",
        "Scheduled start to response end (coordinated-omission-free); quantiles over the last interval.",
        &s.sched,
    );
    summary(
        &mut out,
        "shrike_request_to_response_seconds",
        "Request start to response end (service time); quantiles over the last interval.",
        &s.service,
    );
    out
}

/// Feeds the snapshot from the collector thread.
pub struct MetricsObserver(Arc<Mutex<Snapshot>>);

impl MetricsObserver {
    fn with(&self, f: impl FnOnce(&mut Snapshot)) {
        // A poisoned lock means a scrape panicked mid-render; the data is still whole.
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g);
    }
}

impl Observer for MetricsObserver {
    fn tick(&mut self, t: &Sample) {
        self.with(|s| {
            s.counters.merge(&t.counters);
            s.codes.merge(&t.status_codes);
            s.sched.add_tick(&t.scheduled_to_response);
            s.service.add_tick(&t.request_to_response);
            s.elapsed = t.start + t.duration;
            s.in_flight = t.in_flight;
        });
    }
    fn interval(&mut self, i: &Sample) {
        self.with(|s| {
            s.sched.set_interval(&i.scheduled_to_response);
            s.service.set_interval(&i.request_to_response);
            let secs = i.duration.as_secs_f64();
            s.interval_rps =
                if secs > 0.0 { i.counters.get(Counter::RqTotal) as f64 / secs } else { 0.0 };
            s.intervals += 1;
        });
    }
    fn finish(&mut self) {
        self.with(|s| s.finished = true);
    }
}

/// The scrape endpoint's thread; stopped with [`Server::stop`] when the run ends.
pub struct Server {
    pub addr: SocketAddr,
    shutdown: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Server {
    /// Binds `addr` now (so a taken port is a usage error before the run) and serves on a
    /// thread of its own.
    pub fn start(
        addr: &str,
        run_duration: Option<Duration>,
    ) -> std::io::Result<(Server, MetricsObserver)> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let snapshot = Arc::new(Mutex::new(Snapshot { run_duration, ..Snapshot::default() }));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = snapshot.clone();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread =
            std::thread::Builder::new().name("shrike-metrics".into()).spawn(move || {
                rt.block_on(serve(listener, shared, rx));
            })?;
        Ok((Server { addr: bound, shutdown: tx, thread }, MetricsObserver(snapshot)))
    }

    pub fn stop(self) {
        let _ = self.shutdown.send(());
        let _ = self.thread.join();
    }
}

async fn serve(
    listener: std::net::TcpListener,
    snapshot: Arc<Mutex<Snapshot>>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                // Accept errors (e.g. out of descriptors) are transient: keep serving.
                let Ok((stream, _)) = accepted else { continue };
                let snapshot = snapshot.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(READ_TIMEOUT, respond(stream, snapshot)).await;
                });
            }
        }
    }
}

/// Reads one request head and answers it, then closes the connection.
async fn respond(
    mut stream: tokio::net::TcpStream,
    snapshot: Arc<Mutex<Snapshot>>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_HEAD {
            return reply(&mut stream, "431 Request Header Fields Too Large", "", false).await;
        }
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" && method != "HEAD" {
        return reply(&mut stream, "405 Method Not Allowed", "only GET /metrics\n", false).await;
    }
    if path != "/metrics" {
        return reply(&mut stream, "404 Not Found", "metrics are at /metrics\n", false).await;
    }
    let body = {
        let g = snapshot.lock().unwrap_or_else(|p| p.into_inner());
        render(&g)
    };
    reply(&mut stream, "200 OK", &body, method == "HEAD").await
}

async fn reply(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_conventions() {
        assert_eq!(counter_name(Counter::RqTotal), "shrike_upstream_rq_total");
        assert_eq!(counter_name(Counter::Http2xx), "shrike_benchmark_http_2xx_total");
        assert_eq!(counter_name(Counter::SslHandshake), "shrike_ssl_handshake_total");
    }

    /// One sample of 1_016_957 ns: the histogram's p99 and p100 are its bucket's top edge,
    /// 1_017_343 ns; the live summary must not report a quantile above the exact max.
    #[test]
    fn quantiles_never_exceed_the_exact_max() {
        let mut s = Snapshot::default();
        let mut st = Statistic::new();
        st.record(1_016_957);
        assert!(st.value_at_quantile(0.99) > st.max());
        s.sched.set_interval(&st);
        let text = render(&s);
        for q in ["0.5", "0.9", "0.99", "0.999", "1"] {
            let line =
                format!("shrike_scheduled_to_response_seconds{{quantile=\"{q}\"}} 0.001016957\n");
            assert!(text.contains(&line), "{line}{text}");
        }
    }

    #[test]
    fn renders_counters_codes_and_summaries() {
        let mut s = Snapshot::default();
        s.counters.add(Counter::RqTotal, 7);
        s.codes.add(503, 2);
        let mut st = Statistic::new();
        st.record(2_000_000);
        s.sched.add_tick(&st);
        s.sched.set_interval(&st);
        let text = render(&s);
        assert!(text.contains("\nshrike_upstream_rq_total 7\n"), "{text}");
        assert!(text.contains("shrike_responses_total{code=\"503\"} 2\n"));
        assert!(text.contains("shrike_scheduled_to_response_seconds{quantile=\"0.5\"} 0.002"));
        assert!(text.contains("shrike_scheduled_to_response_seconds_count 1\n"));
        assert!(text.contains("shrike_request_to_response_seconds{quantile=\"0.99\"} NaN\n"));
    }
}
