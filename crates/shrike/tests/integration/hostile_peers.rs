//! The client against peers that misbehave on purpose (`support/hostile.rs`), through the real
//! binary. For every case, `shrike run` must count the failure under a named counter (which the
//! human report prints too), end within `--duration` + `--timeout`, keep going without the
//! default failure predicates, write its result file, and hold its memory bounded however much
//! the server sends.

use crate::support::hostile;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{counter, global, scratch, shrike};
use hostile::{Case, Close, Hostile, H1, H2};

/// Every run: one second of load, half a second for each request.
const DURATION: f64 = 1.0;
const TIMEOUT: f64 = 0.5;
/// Process start, result writing and a busy 2-core CI machine, on top of duration + timeout.
const SLACK: f64 = 1.5;
/// Peak resident memory a run may reach however much the server sends (a few MiB of binary,
/// buffers per connection, and h2's windows).
const MAX_RSS: u64 = 200 << 20;
/// The floods (endless bodies, trailers, h2 data) are judged by how much arrives in their
/// second; two at once on a 2-core machine take each other's share, and a CI run saw 49 MiB
/// where a lone run moves 800. One at a time, then.
static FLOOD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_flood_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    FLOOD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What one run of `shrike run` against a hostile server came to.
struct Run {
    code: i32,
    wall: Duration,
    /// The process's peak resident set (VmHWM), in bytes.
    peak_rss: u64,
    /// The human report on stdout.
    human: String,
    stderr: String,
    /// The `global` result of the JSON file written with `-o`.
    g: serde_json::Value,
    /// What the server counted of this run, once it had handled every connection to its end.
    served: hostile::Counts,
}

impl Run {
    fn count(&self, name: &str) -> u64 {
        counter(&self.g, name)
    }

    /// The counter is non-zero, named in the report, and (with the default predicates off)
    /// the run went on to its end.
    fn counted(&self, name: &str, at_least: u64) -> u64 {
        let n = self.count(name);
        assert!(n >= at_least, "{name} = {n}, expected at least {at_least}\n{self}");
        assert!(self.human.contains(name), "the report does not name {name}:\n{}", self.human);
        n
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:?}\ncounters: {}\nthe server's tally: {:?}\nstderr:\n{}",
            self.code, self.wall, self.g["counters"], self.served, self.stderr
        )
    }
}

/// The peak resident set of a live process, from `/proc`: sampled while the run goes on (the
/// peak only rises, so the last sample before exit is within one poll of the true one).
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `shrike run <server> --protocol <protocol> --duration 1 --timeout 0.5 -o result.json`,
/// without the default failure predicates, and `extra`; asserts it ended in time and wrote its
/// result.
fn run(name: &str, server: &Hostile, protocol: &str, extra: &[&str]) -> Run {
    let run =
        run_with(name, server, protocol, &[&["--no-default-failure-predicates"], extra].concat());
    assert_eq!(run.code, 0, "{run}");
    run
}

fn run_with(name: &str, server: &Hostile, protocol: &str, extra: &[&str]) -> Run {
    let dir = scratch(&format!("hostile-{name}"));
    let file = dir.join("result.json");
    let (duration, timeout) = (DURATION.to_string(), TIMEOUT.to_string());
    let mut child = shrike()
        .args(["run", &server.url(), "--protocol", protocol, "--duration", &duration])
        .args(["--timeout", &timeout, "--output-format", "human", "-o"])
        .arg(&file)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shrike");
    let before = server.tally.now();
    let started = Instant::now();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = [
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }),
    ];
    let limit = Duration::from_secs(20);
    let mut peak = 0;
    let status = loop {
        peak = peak.max(peak_rss(child.id()).unwrap_or(0));
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("shrike did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = started.elapsed();
    let served = server.settled().since(before);
    let [human, stderr] = readers.map(|r| r.join().unwrap_or_default());
    let json = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("no result file {} ({e}); stderr:\n{stderr}", file.display()));
    let v: serde_json::Value = serde_json::from_str(&json).expect("the result file is JSON");
    let g = global(&v).clone();
    let run =
        Run { code: status.code().unwrap_or(-1), wall, peak_rss: peak, human, stderr, g, served };
    let bound = Duration::from_secs_f64(DURATION + TIMEOUT + SLACK);
    assert!(
        run.wall < bound,
        "ran {:?}, past duration + timeout ({bound:?} with slack)\n{run}",
        run.wall
    );
    assert!(!run.stderr.contains("panicked"), "{run}");
    run.agrees_with_the_server();
    let _ = std::fs::remove_dir_all(dir);
    run
}

impl Run {
    /// What every run's counts must say of the server's own tally: the client counted each
    /// TCP connection the server accepted (and no other), a 2xx for each whole answer the
    /// server sent (and for nothing else: every other thing it sends is broken or endless),
    /// received no byte the server did not send (fewer when it hung up on a flood or on a
    /// response it gave up on), and sent every byte the server read (more when the server
    /// stopped reading: a flood, a close).
    fn agrees_with_the_server(&self) {
        let s = &self.served;
        // A connection the stop found mid-connect was accepted by the server but never counted
        // by the client, whose request for it was cancelled instead.
        let (opened, cancelled) =
            (self.count("upstream_cx_total"), self.count("upstream_rq_cancelled"));
        assert!((opened..=opened + cancelled).contains(&s.connections), "connections\n{self}");
        assert_eq!(self.count("benchmark.http_2xx"), s.answers, "answers\n{self}");
        assert!(self.count("upstream_cx_rx_bytes_total") <= s.bytes_sent, "{self}");
        assert!(s.bytes_received <= self.count("upstream_cx_tx_bytes_total"), "{self}");
    }
}

fn none_succeeded(run: &Run) {
    assert_eq!(run.count("benchmark.http_2xx"), 0, "{run}");
}

fn bounded_memory(run: &Run, server: &Hostile) {
    assert!(run.peak_rss > 0, "no RSS was sampled from /proc\n{run}");
    assert!(
        run.peak_rss < MAX_RSS,
        "peak RSS {} MiB while the server sent {} MiB\n{run}",
        run.peak_rss >> 20,
        server.tally.bytes_sent() >> 20
    );
}

/// Requests the server never finishes are cut by `--timeout` (the HTTP/1.1 connection closed
/// by us, the HTTP/2 stream reset), and nothing else failed.
fn timed_out(run: &Run, at_least: u64) {
    run.counted("upstream_rq_timeout", at_least);
    none_succeeded(run);
    assert_eq!(run.count("benchmark.stream_resets"), 0, "{run}");
}

// HTTP/1.1

#[test]
fn h1_reset_mid_response_is_a_remote_destroy_with_a_request_in_flight() {
    let server = Hostile::start(Case::H1(H1::ResetMidResponse));
    let r = run("h1-reset", &server, "http1", &["--rps", "20", "--connections", "2"]);
    let resets = r.counted("benchmark.stream_resets", 10);
    assert_eq!(r.counted("upstream_cx_destroy_remote_with_active_rq", 10), resets, "{r}");
    assert_eq!(r.count("upstream_rq_total"), resets, "{r}");
    assert_eq!(r.count("upstream_cx_protocol_error"), 0, "{r}");
    none_succeeded(&r);
    // The server read each of those requests and reset its connection, one per connection.
    assert_eq!(r.served.requests, resets, "{r}");
    assert_eq!(r.served.connections, resets, "{r}");

    // With the default predicates the first reset ends the run (exit 1), result still written.
    let r = run_with("h1-reset-default", &server, "http1", &["--rps", "20"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.count("benchmark.stream_resets") >= 1, "{r}");
    // The server read every request the client counted; any it read besides were in flight
    // when the predicate stopped the run, and counted cancelled.
    let (sent, cancelled) = (r.count("upstream_rq_total"), r.count("upstream_rq_cancelled"));
    assert!((sent..=sent + cancelled).contains(&r.served.requests), "{r}");
    assert!(r.wall < Duration::from_secs_f64(DURATION + SLACK), "{r}");
}

#[test]
fn h1_idle_keep_alive_closed_unannounced_is_retried_not_failed() {
    idle_close_is_retried("h1-idle-fin", Close::Fin);
}

#[test]
fn h1_idle_keep_alive_reset_is_retried_not_failed() {
    idle_close_is_retried("h1-idle-rst", Close::Reset);
}

/// A connection closed while idle is found out on reuse; the request that found it had not
/// been processed, so it goes again on a new connection.
fn idle_close_is_retried(name: &str, how: Close) {
    let server = Hostile::start(Case::H1(H1::IdleClose(how)));
    // The default predicates stay on: a server closing idle connections is no failure.
    let r = run_with(name, &server, "http1", &["--rps", "20", "--connections", "1"]);
    assert_eq!(r.code, 0, "{r}");
    let ok = r.count("benchmark.http_2xx");
    assert!(ok >= 15, "{r}");
    assert_eq!(r.count("upstream_rq_total"), ok, "{r}");
    assert_eq!(r.count("benchmark.stream_resets"), 0, "{r}");
    // Nearly every reuse found the connection closed and reconnected.
    assert!(r.counted("upstream_cx_destroy_remote", ok / 2) < ok + 1, "{r}");
    assert!(r.count("upstream_cx_total") >= ok / 2, "{r}");
    // The server answered each request once. A resend's first send went to a connection the
    // server had already closed, unread: it is not among the server's requests, and each
    // resend needed a new connection. The server closed each connection at most once.
    let retried = r.count("upstream_rq_retry");
    assert_eq!(r.served.requests, ok, "{r}");
    assert!(r.served.connections > retried, "{r}");
    assert!(r.count("upstream_cx_destroy_remote") <= r.served.connections, "{r}");
    // Every answer was read whole. Onto a closed (FIN) connection a first send is still
    // written, and counted, though the server never reads it; onto a reset one the write
    // fails and counts nothing.
    assert_eq!(r.count("upstream_cx_rx_bytes_total"), r.served.bytes_sent, "{r}");
    let per_request = r.served.bytes_received / r.served.requests;
    let unread = match how {
        Close::Fin => retried * per_request,
        _ => 0,
    };
    assert_eq!(r.count("upstream_cx_tx_bytes_total"), r.served.bytes_received + unread, "{r}");
}

#[test]
fn h1_idle_keep_alive_closed_with_notice_is_a_close_notify() {
    let server = Hostile::start(Case::H1(H1::IdleClose(Close::Announced)));
    let r = run_with("h1-close", &server, "http1", &["--rps", "20", "--connections", "1"]);
    assert_eq!(r.code, 0, "{r}");
    let ok = r.count("benchmark.http_2xx");
    assert!(ok >= 15, "{r}");
    assert_eq!(r.counted("upstream_cx_close_notify", ok), ok, "{r}");
    assert_eq!(r.count("upstream_cx_destroy_remote_with_active_rq"), 0, "{r}");
    // The server announced its close on every connection it served, after one request each,
    // and every answer was read whole.
    assert_eq!(r.served.connections, ok, "{r}");
    assert_eq!(r.served.requests, ok, "{r}");
    assert_eq!(r.count("upstream_cx_rx_bytes_total"), r.served.bytes_sent, "{r}");
}

#[test]
fn h1_server_that_never_answers_times_out() {
    let server = Hostile::start(Case::H1(H1::Silent));
    let r = run("h1-silent", &server, "http1", &["--rps", "20", "--connections", "4"]);
    timed_out(&r, 4);
    assert_eq!(
        r.counted("upstream_cx_destroy_local_with_active_rq", 4),
        r.count("upstream_rq_timeout"),
        "{r}"
    );
    // The server read each request that timed out, one per connection, and said nothing.
    assert_eq!(r.served.requests, r.count("upstream_rq_timeout"), "{r}");
    assert_eq!(r.served.connections, r.count("upstream_rq_timeout"), "{r}");
    assert_eq!(r.served.bytes_sent, 0, "{r}");
    assert_eq!(r.served.bytes_received, r.count("upstream_cx_tx_bytes_total"), "{r}");
}

#[test]
fn h1_slowloris_is_cut_by_the_timeout() {
    let server = Hostile::start(Case::H1(H1::Drip(Duration::from_millis(100))));
    let r = run("h1-drip", &server, "http1", &["--rps", "20", "--connections", "2"]);
    timed_out(&r, 2);
    assert!(r.count("upstream_cx_rx_bytes_total") >= 2, "some bytes arrived\n{r}");
    // The server read every request that timed out, and had sent at least what arrived.
    assert_eq!(r.served.requests, r.count("upstream_rq_timeout"), "{r}");
    assert!(r.served.bytes_sent >= r.count("upstream_cx_rx_bytes_total"), "{r}");
}

/// A response the client cannot frame: a protocol error, its connection closed by us. The
/// server read each of those requests, one per connection (none other: the client closed each
/// after its first answer).
fn protocol_error(r: &Run, at_least: u64) -> u64 {
    let n = r.counted("upstream_cx_protocol_error", at_least);
    assert_eq!(r.count("benchmark.stream_resets"), n, "{r}");
    assert_eq!(r.count("upstream_cx_destroy_local_with_active_rq"), n, "{r}");
    none_succeeded(r);
    assert_eq!(r.served.requests, n, "{r}");
    assert_eq!(r.served.connections, n, "{r}");
    n
}

#[test]
fn h1_garbage_status_line_is_a_protocol_error() {
    let server = Hostile::start(Case::H1(H1::GarbageStatus));
    let r = run("h1-garbage", &server, "http1", &["--rps", "20"]);
    protocol_error(&r, 10);
    assert_eq!(r.count("upstream_cx_header_overflow"), 0, "{r}");
    assert!(r.human.contains("invalid HTTP/1.1 response"), "the report says why\n{}", r.human);
}

#[test]
fn h1_oversized_head_is_a_header_overflow() {
    let server = Hostile::start(Case::H1(H1::HugeHead));
    let r = run("h1-huge-head", &server, "http1", &["--rps", "20"]);
    let n = protocol_error(&r, 10);
    assert_eq!(r.counted("upstream_cx_header_overflow", 10), n, "{r}");
}

#[test]
fn h1_endless_head_is_a_header_overflow_in_bounded_memory() {
    let server = Hostile::start(Case::H1(H1::EndlessHead));
    let r = run("h1-endless-head", &server, "http1", &["--rps", "20"]);
    let n = protocol_error(&r, 10);
    assert_eq!(r.counted("upstream_cx_header_overflow", 10), n, "{r}");
    bounded_memory(&r, &server);
}

#[test]
fn h1_negative_content_length_is_a_protocol_error() {
    let server = Hostile::start(Case::H1(H1::NegativeLength));
    let r = run("h1-negative", &server, "http1", &["--rps", "20"]);
    protocol_error(&r, 10);
}

#[test]
fn h1_truncated_chunked_body_is_a_remote_destroy_with_a_request_in_flight() {
    let server = Hostile::start(Case::H1(H1::TruncatedChunked));
    let r = run("h1-truncated", &server, "http1", &["--rps", "20"]);
    let n = r.counted("benchmark.stream_resets", 10);
    assert_eq!(r.counted("upstream_cx_destroy_remote_with_active_rq", 10), n, "{r}");
    assert_eq!(r.count("upstream_cx_protocol_error"), 0, "{r}");
    none_succeeded(&r);
    // The server cut off each request it read, one per connection; its close came after all
    // it sent, so every byte of the broken bodies arrived.
    assert_eq!(r.served.requests, n, "{r}");
    assert_eq!(r.served.connections, n, "{r}");
    assert_eq!(r.count("upstream_cx_rx_bytes_total"), r.served.bytes_sent, "{r}");
}

/// An endless body is read and discarded until `--timeout`, on every connection: the client
/// must receive far more than it may hold.
fn endless(name: &str, case: H1) {
    let _flood = one_flood_at_a_time();
    let server = Hostile::start(Case::H1(case));
    let r = run(name, &server, "http1", &["--rps", "20", "--connections", "2"]);
    timed_out(&r, 2);
    bounded_memory(&r, &server);
    // Many times what the client holds arrived (gigabytes on a quiet machine): it was not kept.
    let rx = r.count("upstream_cx_rx_bytes_total");
    assert!(rx > 4 * r.peak_rss, "only {} MiB arrived: not a test of memory\n{r}", rx >> 20);
    // The server read every request that timed out, and sent at least what arrived.
    assert_eq!(r.served.requests, r.count("upstream_rq_timeout"), "{r}");
    assert!(r.served.bytes_sent >= rx, "{r}");
}

#[test]
fn h1_huge_content_length_with_an_endless_body_times_out_in_bounded_memory() {
    endless("h1-huge-length", H1::HugeLength);
}

#[test]
fn h1_endless_chunked_body_times_out_in_bounded_memory() {
    endless("h1-endless-chunked", H1::EndlessChunked);
}

#[test]
fn h1_endless_trailers_time_out_in_bounded_memory() {
    endless("h1-endless-trailers", H1::EndlessTrailers);
}

// HTTP/2

#[test]
fn h2_goaway_mid_stream_fails_that_stream_and_reconnects() {
    let server = Hostile::start(Case::H2(H2::GoawayMidStream));
    let r = run("h2-goaway", &server, "http2", &["--rps", "20"]);
    let resets = r.counted("benchmark.stream_resets", 5);
    let notices = r.counted("upstream_cx_close_notify", 5);
    let cut = r.counted("upstream_cx_destroy_remote_with_active_rq", 5);
    assert!(r.count("upstream_cx_http2_total") >= resets, "a connection per GOAWAY\n{r}");
    none_succeeded(&r);
    // The server sent one GOAWAY per connection, each cutting off the one stream it opened.
    assert_eq!(r.count("upstream_cx_http2_total"), r.served.connections, "{r}");
    assert_eq!(notices, r.served.connections, "{r}");
    assert_eq!(cut, r.served.connections, "{r}");
    assert_eq!(resets, r.served.requests, "{r}");
}

#[test]
fn h2_server_that_never_answers_times_out() {
    // It reads the connection preface as a request head, and never says a word.
    let server = Hostile::start(Case::H1(H1::Silent));
    let r = run("h2-silent", &server, "http2", &["--rps", "20"]);
    timed_out(&r, 10);
    // The HTTP/1.1 server took the preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`) for two
    // request heads on each connection, read every byte the timed-out requests were sent in,
    // and said nothing.
    assert_eq!(r.served.requests, 2 * r.served.connections, "{r}");
    assert_eq!(r.served.bytes_received, r.count("upstream_cx_tx_bytes_total"), "{r}");
    assert_eq!(r.served.bytes_sent, 0, "{r}");
}

#[test]
fn h2_reset_flood_counts_each_stream_once() {
    let server = Hostile::start(Case::H2(H2::ResetFlood));
    let r = run("h2-rst-flood", &server, "http2", &["--rps", "50"]);
    let resets = r.counted("benchmark.stream_resets", 25);
    assert!(resets <= r.count("upstream_rq_total"), "{r}");
    none_succeeded(&r);
    // The server opened every stream the client counted, and reset each 32 times: the
    // client counted each once at most.
    assert_eq!(r.served.requests, r.count("upstream_rq_total"), "{r}");
    assert!(resets <= r.served.requests, "{r}");
}

#[test]
fn h2_zero_initial_window_times_out_request_bodies() {
    let server = Hostile::start(Case::H2(H2::ZeroWindow));
    let extra = ["--rps", "20", "--request-method", "POST", "--request-body-size", "1024"];
    let r = run("h2-zero-window", &server, "http2", &extra);
    // The first body may go out on the default window, before the server's SETTINGS arrive.
    let n = r.counted("upstream_rq_timeout", 10);
    assert!(r.count("benchmark.http_2xx") <= 1, "{r}");
    assert_eq!(r.count("upstream_rq_total"), n + r.count("benchmark.http_2xx"), "{r}");
    // The server opened every stream, read every byte the client sent, and answered only
    // bodies that ended (the 2xx, checked in `run`).
    assert_eq!(r.served.requests, r.count("upstream_rq_total"), "{r}");
    assert_eq!(r.served.bytes_received, r.count("upstream_cx_tx_bytes_total"), "{r}");
}

#[test]
fn h2_server_that_never_opens_its_window_times_out_large_uploads() {
    let server = Hostile::start(Case::H2(H2::NoWindowUpdate));
    let extra = ["--rps", "20", "--request-method", "POST", "--request-body-size", "131072"];
    let r = run("h2-no-window-update", &server, "http2", &extra);
    timed_out(&r, 1);
    // The client kept to the window: one 65,535-byte window of body (and some frames) went out.
    assert!(r.count("upstream_cx_tx_bytes_total") < 80_000, "{r}");
    // The server read all the client sent (so no more than the window arrived), and opened
    // a stream for each request that timed out.
    assert_eq!(r.served.bytes_received, r.count("upstream_cx_tx_bytes_total"), "{r}");
    assert_eq!(r.served.requests, r.count("upstream_rq_timeout"), "{r}");
}

#[test]
fn h2_endless_data_holds_memory_to_the_windows() {
    let _flood = one_flood_at_a_time();
    let server = Hostile::start(Case::H2(H2::EndlessData));
    let r = run("h2-endless-data", &server, "http2", &["--rps", "20", "--connections", "2"]);
    none_succeeded(&r);
    // Depending on how far ahead of the window the server got: cut by the timeout, or a flow
    // control violation the client refused.
    let failed = r.count("upstream_rq_timeout") + r.count("upstream_cx_protocol_error");
    assert!(failed >= 1, "{r}");
    bounded_memory(&r, &server);
    let rx = r.count("upstream_cx_rx_bytes_total");
    assert!(rx > 4 * r.peak_rss, "only {} MiB arrived: not a test of memory\n{r}", rx >> 20);
    // The server read one stream per connection and then only wrote: the client's other
    // requests (all of which failed) never reached its reading, and it sent all that arrived.
    assert_eq!(r.served.requests, r.served.connections, "{r}");
    assert!(r.count("upstream_rq_total") >= r.served.requests, "{r}");
    assert!(r.served.bytes_sent >= rx, "{r}");
}

#[test]
fn h2_endless_continuation_is_refused_in_bounded_memory() {
    let server = Hostile::start(Case::H2(H2::EndlessContinuation));
    let r = run("h2-endless-continuation", &server, "http2", &["--rps", "20"]);
    // Each connection is refused once (`h2` counts the CONTINUATION frames a head may take
    // under SETTINGS_MAX_HEADER_LIST_SIZE: too many is ENHANCE_YOUR_CALM), and takes its
    // streams down with it.
    let refused = r.counted("upstream_cx_protocol_error", 1);
    assert_eq!(r.counted("upstream_cx_destroy_local_with_active_rq", 1), refused, "{r}");
    assert!(r.counted("benchmark.stream_resets", 1) >= refused, "{r}");
    none_succeeded(&r);
    bounded_memory(&r, &server);
    // Every connection the server served was refused, once; it read one stream on each
    // before it only wrote.
    assert_eq!(refused, r.served.connections, "{r}");
    assert_eq!(r.served.requests, r.served.connections, "{r}");
}
