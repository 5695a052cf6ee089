//! SIGINT and SIGTERM in every phase of a run, over HTTP/1.1, HTTP/2 and HTTP/3: resolving,
//! connecting (and prefetching), warm-up, the `--start-at` wait, running and draining. The
//! first signal ends the phase promptly (it never waits out a stalled handshake, a warm-up or
//! the scheduled start), writes what was measured and exits 130 (143 for SIGTERM); before
//! anything could be measured it exits so at once; a second signal always exits at once.

use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::*;

const PROTOCOLS: [&str; 3] = ["http1", "http2", "http3"];
const SIGNALS: [&str; 2] = ["INT", "TERM"];

/// What one interrupted run did.
struct Interrupted {
    out: Output,
    /// From the (first) signal to the process's exit.
    after_signal: Duration,
}

/// Spawns `cmd`, sends `signal` after `delay` (then again after `again`, if given), and waits.
fn interrupt(
    mut cmd: Command,
    delay: Duration,
    signal: &str,
    again: Option<Duration>,
) -> Interrupted {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(delay);
    let pid = child.id().to_string();
    let signalled = Instant::now();
    let kill = |sig: &str| {
        Command::new("kill").args([&format!("-{sig}"), &pid]).status().expect("kill");
    };
    kill(signal);
    if let Some(again) = again {
        std::thread::sleep(again);
        kill(signal);
    }
    let out = wait_limited(child, Duration::from_secs(40));
    Interrupted { out, after_signal: signalled.elapsed() }
}

/// The exit status a shell reports for a process the case's signal stopped: 143 for SIGTERM,
/// 130 for SIGINT.
fn status(case: &str) -> i32 {
    if case.contains("SIGTERM") {
        143
    } else {
        130
    }
}

/// Asserts the run exited 130 (143 for SIGTERM), promptly, and wrote its (JSON) result marked interrupted.
fn assert_interrupted_with_result(
    case: &str,
    r: &Interrupted,
    within: Duration,
) -> serde_json::Value {
    assert_eq!(r.out.code(), status(case), "{case}: stderr:\n{}", r.out.stderr);
    assert!(r.after_signal < within, "{case}: exited {:?} after the signal", r.after_signal);
    assert!(r.out.stderr.contains("interrupted"), "{case}: {}", r.out.stderr);
    let v = json(&r.out);
    assert_eq!(v["shrike"]["termination"]["kind"], "interrupted", "{case}");
    v
}

/// `shrike run` over `protocol` against the TLS server (h1 and h2 by ALPN, h3 over UDP).
fn run_cmd(protocol: &str, url: &str, ca: &str, extra: &[&str]) -> Command {
    let mut cmd = shrike();
    cmd.args(["run", url, "--protocol", protocol, "--output-format", "json"]);
    if !ca.is_empty() {
        cmd.args(["--tls-ca", ca]);
    }
    cmd.args(extra);
    cmd
}

/// Runs `case(protocol, signal)` for every protocol and signal at once, each in its own thread.
fn each(case: impl Fn(&'static str, &'static str) + Sync) {
    std::thread::scope(|s| {
        for p in PROTOCOLS {
            for sig in SIGNALS {
                let case = &case;
                s.spawn(move || case(p, sig));
            }
        }
    });
}

fn server() -> TlsServer {
    TlsServer::start(&["--tls", "--http3"])
}

const STALL: &str = r#"x-nighthawk-test-server-config: {"static_delay":"20s"}"#;

#[test]
fn resolving_a_host_whose_dns_never_answers_exits_at_once() {
    // A network namespace of its own whose resolver (127.0.0.1:53) is a socket nobody reads,
    // handed down to shrike itself: resolution would take the 30 s timeout.
    let dir = scratch("silent-dns");
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, "nameserver 127.0.0.1\noptions timeout:30 attempts:1\n").unwrap();
    let script = format!(
        "ip link set lo up && mount --bind {} /etc/resolv.conf && exec python3 -c '{SILENT_DNS}' \"$@\"",
        resolv.display()
    );
    let bin = env!("CARGO_BIN_EXE_shrike");
    each(|protocol, signal| {
        let mut cmd = Command::new("unshare");
        cmd.args(["-mn", "sh", "-c", &script, "sh", bin]);
        cmd.args([
            "run",
            "https://no-such-host.shrike.test:8443/",
            "--protocol",
            protocol,
            "--duration",
            "2",
        ]);
        let case = format!("resolving {protocol} SIG{signal}");
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = child.spawn().expect("spawn");
        // The signal must reach shrike, not the shell or Python before it.
        let exe = format!("/proc/{}/exe", child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_link(&exe).ok().as_deref() != Some(std::path::Path::new(bin)) {
            assert!(Instant::now() < deadline, "{case}: shrike never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(1000));
        let signalled = Instant::now();
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let out = wait_limited(child, Duration::from_secs(40));
        assert_eq!(out.code(), status(&case), "{case}: stderr:\n{}", out.stderr);
        assert!(signalled.elapsed() < Duration::from_secs(3), "{case}: {:?}", signalled.elapsed());
        assert!(out.stderr.contains("before the load started"), "{case}: {}", out.stderr);
    });
}

/// Binds the namespace's DNS port, keeps the socket open across exec (unread, so no query is
/// ever answered) and becomes the command given.
const SILENT_DNS: &str = "import os,socket,sys; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); \
s.bind((\"127.0.0.1\",53)); os.set_inheritable(s.fileno(),True); os.execv(sys.argv[1],sys.argv[1:])";

#[test]
fn connecting_to_a_server_that_never_finishes_the_handshake() {
    // TCP connections are accepted (and held) but no TLS byte ever comes back; QUIC
    // datagrams are read by nobody.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    // The listener's own count of the connections it accepted: the TCP ones' witness.
    let accepted = std::sync::Arc::new(AtomicU64::new(0));
    let counted = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in tcp.incoming().take(64) {
            counted.fetch_add(1, Ordering::Relaxed);
            held.push(c);
        }
        std::thread::sleep(Duration::from_secs(30));
        drop(held);
    });
    // The TCP connections the HTTP/1.1 and HTTP/2 cases counted, all together.
    let opened = AtomicU64::new(0);
    let url = format!("https://localhost:{port}/");
    each(|protocol, signal| {
        // Connections opened ahead are HTTP/1.1's; HTTP/2 and HTTP/3 open theirs as streams
        // need them, which is the first request here.
        let prefetch: &[&str] = if protocol == "http1" { &["--prefetch-connections"] } else { &[] };
        let extra = [prefetch, &["--connections", "4", "--rps", "20", "--timeout", "30"]].concat();
        let cmd = run_cmd(protocol, &url, "", &extra);
        let r = interrupt(cmd, Duration::from_millis(1500), signal, None);
        let case = format!("connecting {protocol} SIG{signal}");
        let v = assert_interrupted_with_result(&case, &r, Duration::from_secs(4));
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 0, "{case}");
        // Giving up on a handshake because the user stopped is no failure of the server's.
        assert_eq!(counter(g, "upstream_cx_connect_fail"), 0, "{case}: {g}");
        assert_eq!(counter(g, "benchmark.pool_connection_failure"), 0, "{case}: {g}");
        if protocol != "http3" {
            opened.fetch_add(counter(g, "upstream_cx_total"), Ordering::Relaxed);
        }
    });
    // Every TCP connection was made (the listener accepted each the clients counted, and no
    // other): none failed, they were only left unfinished.
    assert_eq!(accepted.load(Ordering::Relaxed), opened.load(Ordering::Relaxed));
    drop(udp);
}

/// The connections a run over `protocol` counted, by the client's counter for the protocol.
fn connections(g: &serde_json::Value, protocol: &str) -> u64 {
    counter(g, &format!("upstream_cx_{protocol}_total"))
}

#[test]
fn warm_up_is_abandoned_not_waited_for() {
    each(|protocol, signal| {
        // A server per case, so what it counted is this case's alone.
        let server = server();
        let before = Witness::before(&server);
        let extra =
            ["--simple-warmup", "--rps", "20", "--timeout", "30", "--request-header", STALL];
        let cmd = run_cmd(protocol, &server.url(), &server.ca, &extra);
        let r = interrupt(cmd, Duration::from_millis(1500), signal, None);
        let case = format!("warm-up {protocol} SIG{signal}");
        let v = assert_interrupted_with_result(&case, &r, Duration::from_secs(4));
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 0, "{case}");
        // The server got the warm-up request, on the connection the client counted, and held
        // it (it counts the 200 it planned on arrival, 20 s before it would send it). Nothing
        // else: the signal abandons the warm-up, and no request may leave after it.
        let w = Witness::since(&server, before);
        let protocol_connections = w.count(&format!("/connections/{protocol}"));
        assert_eq!(protocol_connections, connections(g, protocol), "{case}: {g}");
        assert_eq!(w.count("/requests"), 1, "{case}: the server's requests: {g}");
    });
}

#[test]
fn the_start_at_wait_ends_at_once() {
    let server = server();
    let before = Witness::before(&server);
    each(|protocol, signal| {
        let extra = ["--start-at", "+30s", "--rps", "20", "--duration", "2"];
        let cmd = run_cmd(protocol, &server.url(), &server.ca, &extra);
        let r = interrupt(cmd, Duration::from_millis(1500), signal, None);
        let case = format!("start-at {protocol} SIG{signal}");
        let v = assert_interrupted_with_result(&case, &r, Duration::from_secs(4));
        assert_eq!(counter(global(&v), "upstream_rq_total"), 0, "{case}");
    });
    // None of the six sent a request: the server saw none.
    let w = Witness::since(&server, before);
    assert_eq!(w.count("/requests"), 0);
}

#[test]
fn running_stops_and_keeps_what_was_measured() {
    each(|protocol, signal| {
        // A server per case, so what it counted is this case's alone.
        let server = server();
        let before = Witness::before(&server);
        let extra = ["--no-duration", "--rps", "50"];
        let cmd = run_cmd(protocol, &server.url(), &server.ca, &extra);
        let r = interrupt(cmd, Duration::from_millis(2000), signal, None);
        let case = format!("running {protocol} SIG{signal}");
        let v = assert_interrupted_with_result(&case, &r, Duration::from_secs(4));
        let g = global(&v);
        let ok = counter(g, "benchmark.http_2xx");
        // ~1.5 s of sending at 50/s after start-up; generous for a busy machine.
        assert!((15..=110).contains(&ok), "{case}: 2xx = {ok}");
        // The server saw every request the result counts (and answered each as it says), on
        // the connections it counts.
        let w = Witness::since(&server, before);
        w.agrees(g);
        assert_eq!(
            w.count(&format!("/connections/{protocol}")),
            connections(g, protocol),
            "{case}: {g}"
        );
    });
}

#[test]
fn draining_finishes_in_flight_requests_and_a_second_signal_exits_at_once() {
    let slow = r#"x-nighthawk-test-server-config: {"static_delay":"3s"}"#;
    each(|protocol, signal| {
        // A server per case, so what it counted is this case's alone.
        let server = server();
        let before = Witness::before(&server);
        // 20 requests sent in the first second, each answered 3 s later: at 2.5 s the run is
        // draining (even after a slow start-up), and the first signal lets the drain finish
        // and counts them all.
        let extra = ["--duration", "1", "--rps", "20", "--timeout", "10", "--request-header", slow];
        let cmd = run_cmd(protocol, &server.url(), &server.ca, &extra);
        let r = interrupt(cmd, Duration::from_millis(2500), signal, None);
        let case = format!("draining {protocol} SIG{signal}");
        let v = assert_interrupted_with_result(&case, &r, Duration::from_secs(6));
        assert_eq!(counter(global(&v), "benchmark.http_2xx"), 20, "{case}");
        // The server got the 20, and answered each, after the signal.
        Witness::since(&server, before).agrees(global(&v));

        // A second signal while draining: out at once, with no result.
        let cmd = run_cmd(protocol, &server.url(), &server.ca, &extra);
        let r =
            interrupt(cmd, Duration::from_millis(2500), signal, Some(Duration::from_millis(200)));
        assert_eq!(r.out.code(), status(&case), "{case} twice: {}", r.out.stderr);
        assert!(r.after_signal < Duration::from_millis(1500), "{case} twice: {:?}", r.after_signal);
        assert!(r.out.stdout.is_empty(), "{case} twice: {}", r.out.stdout);
    });
}
