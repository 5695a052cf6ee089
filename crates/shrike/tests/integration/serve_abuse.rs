//! `shrike serve` under abuse, through the real binary and raw sockets: slowloris and idle
//! clients are cut off by the header and idle timeouts, header floods get 431, the request cap
//! closes connections as nginx's keepalive_requests does, and a connection flood past
//! --max-connections is refused without starving the connections being served. Every limit
//! must show in the stats endpoint's `limits` counters.
//!
//! Timeouts are short (300 ms) and timing checks tolerant: these machines are noisy.

use crate::support::h2_frames;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use h2_frames::{Frame, H2Client, GOAWAY, HEADERS, RST_STREAM};

const STATS: &str = "/.shrike/stats";
const LIMIT: Duration = Duration::from_secs(5);

fn connect(server: &Server) -> TcpStream {
    connect_unless_reset(server).expect("the server reset the connection")
}

/// `None` when the server refused the connection by resetting it, which can happen before
/// `connect` returns: the kernel completes the handshake, and the server's RST lands before
/// this thread runs again. Any other connect error fails the test.
fn connect_unless_reset(server: &Server) -> Option<TcpStream> {
    match TcpStream::connect(&server.addr) {
        Ok(s) => {
            s.set_read_timeout(Some(LIMIT)).unwrap();
            Some(s)
        }
        Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
        Err(e) => panic!("connect: {e}"),
    }
}

/// One HTTP/1.1 response: its head, and its body (by content-length).
fn response(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).unwrap();
        assert!(n > 0, "closed mid-head: {}", String::from_utf8_lossy(&buf));
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap().to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (head, body)
}

/// True when the peer has closed: EOF or a reset, with nothing more to read.
fn closed(s: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == ErrorKind::ConnectionReset,
    }
}

/// The stats document, fetched over `s` (which stays open).
fn stats_over(s: &mut TcpStream) -> serde_json::Value {
    write!(s, "GET {STATS} HTTP/1.1\r\nhost: t\r\n\r\n").unwrap();
    let (head, body) = response(s);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    serde_json::from_slice(&body).unwrap()
}

fn limits(server: &Server) -> serde_json::Value {
    stats_over(&mut connect(server))["limits"].clone()
}

/// Everything until the server closes, and when that was.
fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    (all, Instant::now())
}

#[test]
fn slowloris_is_cut_off_after_the_header_timeout() {
    let server = Server::start(&[
        "--stats-path",
        STATS,
        "--request-header-timeout",
        "300ms",
        "--idle-timeout",
        "600ms",
    ]);
    let mut s = connect(&server);
    let start = Instant::now();
    let mut writer = s.try_clone().unwrap();
    // A byte every 50 ms: each one arrives well within any per-read timeout, and the head
    // would take 10 s to complete.
    let dribble = std::thread::spawn(move || {
        let head = format!("GET / HTTP/1.1\r\nhost: t\r\nx-slow: {}\r\n\r\n", "a".repeat(170));
        let mut sent = 0;
        for byte in head.as_bytes() {
            if writer.write_all(&[*byte]).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        sent
    });
    let (got, at) = read_to_close(&mut s);
    let took = at - start;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.to_ascii_lowercase().contains("connection: close"), "{text}");
    assert!(took >= Duration::from_millis(250), "cut off early: {took:?}");
    assert!(took < Duration::from_secs(3), "cut off late: {took:?}");
    let sent = dribble.join().unwrap();
    assert!(sent < 150, "the whole head went through ({sent} bytes)");

    // A connection that says nothing at all is idle, not slow: closed after the idle timeout
    // (not the header timeout: load generators open connections ahead of their requests),
    // without an answer.
    let mut silent = connect(&server);
    let start = Instant::now();
    let (got, at) = read_to_close(&mut silent);
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert!((Duration::from_millis(550)..Duration::from_secs(3)).contains(&(at - start)));
    let l = limits(&server);
    assert_eq!((l["header_timeouts"].as_u64(), l["idle_timeouts"].as_u64()), (Some(1), Some(1)));
}

#[test]
fn slowloris_over_tls_is_cut_off_too() {
    let server = TlsServer::start(&["--tls", "--request-header-timeout", "300ms"]);
    let before = Witness::before(&server);
    // openssl s_client completes the handshake, sends the partial head and holds stdin open;
    // it exits when the server closes.
    let mut child = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{}", server.port)])
        .args(["-servername", "localhost"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n").unwrap();
    stdin.flush().unwrap();
    let start = Instant::now();
    let out = wait_limited(child, LIMIT);
    drop(stdin);
    assert!(out.stdout.starts_with("HTTP/1.1 408"), "{}", out.stdout);
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    // The server counted what openssl saw: one handshake, one connection cut off as a header
    // timeout, and nothing else.
    let w = Witness::since(&server, before);
    assert_eq!(w.count("/tls/handshakes"), 1);
    assert_eq!(w.count("/connections/http1"), 1);
    assert_eq!(w.count("/limits/header_timeouts"), 1);
    assert_eq!((w.count("/limits/idle_timeouts"), w.count("/requests")), (0, 0));
}

#[test]
fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let server = Server::start(&[
        "--stats-path",
        STATS,
        "--idle-timeout",
        "300ms",
        "--request-header-timeout",
        "20s",
    ]);
    let get = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n";
    let mut idle = connect(&server);
    idle.write_all(get).unwrap();
    let (head, _) = response(&mut idle);
    assert!(head.starts_with("http/1.1 200") && !head.contains("connection: close"), "{head}");
    let answered = Instant::now();

    // A connection that keeps asking is not idle: each request restarts the clock.
    let mut busy = connect(&server);
    for _ in 0..6 {
        busy.write_all(get).unwrap();
        assert!(response(&mut busy).0.starts_with("http/1.1 200"));
        std::thread::sleep(Duration::from_millis(150));
    }

    let (got, at) = read_to_close(&mut idle);
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    let after = at - answered;
    assert!(after >= Duration::from_millis(250), "closed early: {after:?}");
    assert!(after < Duration::from_secs(3), "closed late: {after:?}");
    // `busy` is still served after more than three idle timeouts.
    let s = stats_over(&mut busy);
    assert_eq!(s["limits"]["idle_timeouts"], 1);
    // The seven answers read above.
    assert_eq!((s["requests"].as_u64(), s["responses"]["2xx"].as_u64()), (Some(7), Some(7)));
    // Idle is not a header timeout, though the first request had 20 s.
    assert_eq!(s["limits"]["header_timeouts"], 0);
}

#[test]
fn http2_header_and_idle_timeouts_send_goaway() {
    let server = Server::start(&[
        "--stats-path",
        STATS,
        "--idle-timeout",
        "300ms",
        "--request-header-timeout",
        "300ms",
    ]);
    // The preface and SETTINGS, but never a request.
    let mut mute = H2Client::connect(&server.addr);
    let start = Instant::now();
    let frames = mute.frames_until_close(LIMIT);
    let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("a GOAWAY");
    assert_eq!(goaway.error_code(), 0, "NO_ERROR");
    assert!((Duration::from_millis(250)..Duration::from_secs(3)).contains(&start.elapsed()));
    assert_eq!(limits(&server)["header_timeouts"], 1);

    // One request, answered; then nothing.
    let mut idle = H2Client::connect(&server.addr);
    idle.get(1);
    let (status, _) = idle.response(1);
    assert_eq!(status, 200);
    let answered = Instant::now();
    let frames = idle.frames_until_close(LIMIT);
    let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("a GOAWAY");
    assert_eq!((goaway.last_stream(), goaway.error_code()), (1, 0));
    assert!((Duration::from_millis(250)..Duration::from_secs(3)).contains(&answered.elapsed()));
    let l = limits(&server);
    assert_eq!((l["idle_timeouts"].as_u64(), l["header_timeouts"].as_u64()), (Some(1), Some(1)));
}

#[test]
fn http1_header_caps_answer_431_and_close() {
    let server = Server::start(&[
        "--stats-path",
        STATS,
        "--max-request-headers",
        "10",
        "--max-request-header-bytes",
        "2048",
    ]);
    let fields = |n: usize| (1..n).map(|i| format!("x-{i}: 1\r\n")).collect::<String>();
    // Host plus nine: at the cap, served.
    let mut s = connect(&server);
    write!(s, "GET / HTTP/1.1\r\nhost: t\r\n{}\r\n", fields(10)).unwrap();
    assert!(response(&mut s).0.starts_with("http/1.1 200"));
    // One more: refused, and the connection closed.
    write!(s, "GET / HTTP/1.1\r\nhost: t\r\n{}\r\n", fields(11)).unwrap();
    let (head, body) = response(&mut s);
    assert!(head.starts_with("http/1.1 431 request header fields too large"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("more than 10 header fields"), "{body}");
    assert!(closed(&mut s));

    // Size: a 1.5 KiB head passes, a 3 KiB one does not.
    let mut s = connect(&server);
    write!(s, "GET / HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n", "a".repeat(1500)).unwrap();
    assert!(response(&mut s).0.starts_with("http/1.1 200"));
    write!(s, "GET / HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n", "a".repeat(3000)).unwrap();
    let (head, body) = response(&mut s);
    assert!(head.starts_with("http/1.1 431"), "{head}");
    assert!(String::from_utf8_lossy(&body).contains("exceeds 2048 bytes"));
    assert!(closed(&mut s));
    let l = limits(&server);
    assert_eq!(
        (l["too_many_headers"].as_u64(), l["headers_too_large"].as_u64()),
        (Some(1), Some(1))
    );
}

/// curl over HTTP/2 (prior knowledge) without its own user-agent and accept headers, so the
/// request carries exactly the headers given; returns the body and status.
fn curl_h2(url: &str, headers: &[String]) -> (String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--http2-prior-knowledge", "--max-time", "5", "-H", "User-Agent:"]).args([
        "-H",
        "Accept:",
        "-w",
        "\n%{http_code} %{http_version}",
    ]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd.arg(url).output().expect("curl runs");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (body.to_string(), status.to_string())
}

#[test]
fn http2_header_caps_answer_431_on_the_stream() {
    let server = Server::start(&[
        "--stats-path",
        STATS,
        "--max-request-headers",
        "10",
        "--max-request-header-bytes",
        "2048",
    ]);
    let url = server.url("/");
    let fields = |n: usize| (0..n).map(|i| format!("x-{i}: 1")).collect::<Vec<_>>();
    assert_eq!(curl_h2(&url, &fields(10)).1, "200 2");
    let (body, status) = curl_h2(&url, &fields(11));
    assert_eq!(status, "431 2");
    assert!(body.contains("11 header fields, more than 10"), "{body}");
    let (body, status) = curl_h2(&url, &[format!("x-big: {}", "a".repeat(3000))]);
    assert_eq!(status, "431 2");
    assert!(body.contains("more than 2048"), "{body}");
    // Far past the cap (twice it is what the server advertises), the server answers a bare
    // 431, without a body, and does not count it: the fields were not even kept.
    let (body, status) = curl_h2(&url, &[format!("x-huge: {}", "a".repeat(10_000))]);
    assert_eq!((body.as_str(), status.as_str()), ("", "431 2"));
    let l = limits(&server);
    assert_eq!(
        (l["too_many_headers"].as_u64(), l["headers_too_large"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn http1_request_cap_closes_after_the_nth_response() {
    let server = Server::start(&["--stats-path", STATS, "--max-requests-per-connection", "3"]);
    let get = "GET / HTTP/1.1\r\nhost: t\r\n\r\n";
    let mut s = connect(&server);
    for n in 1..=3 {
        s.write_all(get.as_bytes()).unwrap();
        let (head, _) = response(&mut s);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert_eq!(head.contains("connection: close"), n == 3, "response {n}: {head}");
    }
    assert!(closed(&mut s), "open after the third response");

    // Pipelined: five sent at once, three answered.
    let mut s = connect(&server);
    s.write_all(get.repeat(5).as_bytes()).unwrap();
    for _ in 0..3 {
        assert!(response(&mut s).0.starts_with("http/1.1 200"));
    }
    let (rest, _) = read_to_close(&mut s);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    let s = stats_over(&mut connect(&server));
    assert_eq!(s["limits"]["max_requests_reached"], 2);
    // The six answers read above, and not the two pipelined requests past the cap.
    assert_eq!((s["requests"].as_u64(), s["responses"]["2xx"].as_u64()), (Some(6), Some(6)));
}

#[test]
fn http2_request_cap_sends_goaway_and_refuses_later_streams() {
    let server = Server::start(&["--stats-path", STATS, "--max-requests-per-connection", "2"]);
    // Three requests in one write: the third was sent before the client could see GOAWAY.
    let mut c = H2Client::connect(&server.addr);
    c.get_many(&[1, 3, 5]);
    let frames = c.frames_until_close(LIMIT);
    let done = |id: u32| frames.iter().any(|f| f.kind == HEADERS && f.stream == id);
    assert!(done(1) && done(3), "{frames:?}");
    let refused = frames.iter().find(|f| f.kind == RST_STREAM && f.stream == 5);
    assert_eq!(refused.map(Frame::error_code), Some(0x7), "REFUSED_STREAM: {frames:?}");
    assert!(!done(5), "{frames:?}");
    // Graceful: GOAWAY(2^31-1), a PING, then the final GOAWAY. h2 names stream 5 in it as
    // received; the REFUSED_STREAM is what tells the client it was not processed.
    let goaways: Vec<_> = frames.iter().filter(|f| f.kind == GOAWAY).collect();
    assert_eq!(goaways.first().map(|f| f.error_code()), Some(0), "{frames:?}");
    assert_eq!(goaways.last().map(|f| f.last_stream()), Some(5), "{frames:?}");

    // One request at a time: the second response is followed by GOAWAY and the close, and a
    // new connection is served afresh. (curl 7.88 cannot show this: it fails to reuse a
    // prior-knowledge connection for a second URL even without a cap.)
    for _ in 0..2 {
        let mut c = H2Client::connect(&server.addr);
        c.get(1);
        assert_eq!(c.response(1).0, 200);
        c.get(3);
        assert_eq!(c.response(3).0, 200);
        let frames = c.frames_until_close(LIMIT);
        assert!(frames.iter().any(|f| f.kind == GOAWAY), "{frames:?}");
        assert!(!frames.iter().any(|f| f.kind == HEADERS), "{frames:?}");
    }
    let s = stats_over(&mut connect(&server));
    assert_eq!(s["limits"]["max_requests_reached"], 3);
    // Streams 1 and 3 of each connection; the refused stream 5 was never served.
    assert_eq!((s["requests"].as_u64(), s["responses"]["2xx"].as_u64()), (Some(6), Some(6)));
}

#[test]
fn a_connection_flood_is_refused_and_served_connections_stay_responsive() {
    const MAX: usize = 40;
    const EXCESS: usize = 100;
    let max = MAX.to_string();
    // A long idle timeout, so the flood's silent connections keep their slots.
    let server =
        Server::start(&["--stats-path", STATS, "--max-connections", &max, "--idle-timeout", "60s"]);
    let mut kept = connect(&server);
    kept.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n").unwrap();
    assert!(response(&mut kept).0.starts_with("http/1.1 200"));
    // A connection reset before `connect` returned was refused: it counts as reset.
    let flood: Vec<Option<TcpStream>> =
        (0..MAX - 1 + EXCESS).map(|_| connect_unless_reset(&server)).collect();
    for s in flood.iter().flatten() {
        s.set_nonblocking(true).unwrap();
    }
    // The server resets exactly the connections past the cap; the rest wait, unanswered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reset: Vec<bool> = flood.iter().map(Option::is_none).collect();
    while reset.iter().filter(|r| **r).count() < EXCESS && Instant::now() < deadline {
        for (s, r) in flood.iter().zip(reset.iter_mut()) {
            let Some(s) = s else { continue };
            let mut byte = [0u8; 1];
            match (&*s).read(&mut byte) {
                Ok(_) => *r = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => *r = true,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give a broken cap the chance to reset more than it should.
    std::thread::sleep(Duration::from_millis(200));
    for (s, r) in flood.iter().zip(reset.iter_mut()) {
        let Some(s) = s else { continue };
        let mut byte = [0u8; 1];
        if !matches!((&*s).read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock) {
            *r = true;
        }
    }
    assert_eq!(reset.iter().filter(|r| **r).count(), EXCESS);

    // The connection being served is answered at once, and the stats count the flood.
    let asked = Instant::now();
    let s = stats_over(&mut kept);
    assert!(asked.elapsed() < Duration::from_secs(1), "{:?}", asked.elapsed());
    assert_eq!(s["limits"]["connections_refused"], EXCESS);

    // Slots free up as the flood leaves.
    drop(flood);
    let deadline = Instant::now() + LIMIT;
    loop {
        // Until a slot is free this connection is refused.
        if let Some(mut s) = connect_unless_reset(&server) {
            if s.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n").is_ok() {
                let mut head = [0u8; 12];
                if s.read_exact(&mut head).is_ok() {
                    assert_eq!(&head, b"HTTP/1.1 200");
                    break;
                }
            }
        }
        assert!(Instant::now() < deadline, "no slot came free");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_limit_values_are_usage_errors() {
    for (flag, value) in [
        ("--request-header-timeout", "0s"),
        ("--idle-timeout", "soon"),
        ("--max-request-headers", "0"),
        ("--max-request-headers", "100000"),
        ("--max-request-header-bytes", "12"),
        ("--max-requests-per-connection", "0"),
    ] {
        let out = run(&["serve", "--listen", "127.0.0.1:0", flag, value], LIMIT);
        assert_eq!(out.code(), 2, "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(flag.trim_start_matches("--")), "{flag}: {}", out.stderr);
    }
}
