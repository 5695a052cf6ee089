//! The schedule seam with hand-made sessions: each session's requests go out in order, at their
//! offsets, on one connection of its own; a slow answer delays its own session only.
//! An in-test HTTP/1.1 server records which connection each request arrived on, and when.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use shrike_engine::{Run, RunSpec, SessionPlan, StopHandle};
use shrike_stats::Counter;

/// (connection number, path, arrival time) of every request.
type Log = Arc<Mutex<Vec<(usize, String, Instant)>>>;

/// Answers every request with 200 after `slow` for paths in `slow_paths`, at once otherwise.
fn server(slow_paths: &'static [&'static str], slow: Duration) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log: Log = Arc::default();
    let l = log.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().take(16).enumerate() {
            let Ok(stream) = stream else { continue };
            let log = l.clone();
            std::thread::spawn(move || {
                let mut w = stream.try_clone().expect("clone");
                let mut r = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let at = Instant::now();
                    let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
                    // Skip the headers (no bodies in this test).
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    log.lock().unwrap().push((n, path.clone(), at));
                    if slow_paths.contains(&path.as_str()) {
                        std::thread::sleep(slow);
                    }
                    let _ = w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                }
            });
        }
    });
    (format!("http://{addr}/"), log)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The same over HTTP/2 (the `h2` crate's server): one stream at a time per connection.
fn h2_server(slow_paths: &'static [&'static str], slow: Duration) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let log: Log = Arc::default();
    let l = log.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            for n in 0..16 {
                let Ok((sock, _)) = listener.accept().await else { continue };
                let log = l.clone();
                tokio::task::spawn_local(async move {
                    let Ok(mut conn) = h2::server::handshake(sock).await else { return };
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        let path = req.uri().path().to_string();
                        log.lock().unwrap().push((n, path.clone(), Instant::now()));
                        // Answer from a task of its own: the connection keeps being driven.
                        tokio::task::spawn_local(async move {
                            if slow_paths.contains(&path.as_str()) {
                                tokio::time::sleep(slow).await;
                            }
                            let resp = http::Response::builder().status(200).body(()).unwrap();
                            if let Ok(mut body) = respond.send_response(resp, false) {
                                let _ = body.send_data(bytes::Bytes::from_static(b"ok"), true);
                            }
                        });
                    }
                });
            }
        });
    });
    (format!("http://{addr}/"), log)
}

#[test]
fn sessions_keep_their_order_offsets_and_own_connection() {
    let (uri, log) = server(&["/b0"], ms(150));
    play_and_check(&uri, "http1", &log, Counter::CxHttp1Total);
}

#[test]
fn sessions_over_http2_keep_their_own_connection_too() {
    let (uri, log) = h2_server(&["/b0"], ms(150));
    play_and_check(&uri, "http2", &log, Counter::CxHttp2Total);
}

fn play_and_check(uri: &str, protocol: &str, log: &Log, per_protocol: Counter) {
    let dir =
        std::env::temp_dir().join(format!("shrike-sessions-{protocol}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let list = dir.join("requests.jsonl");
    let paths = ["/a0", "/a1", "/a2", "/b0", "/b1", "/b2"];
    let text: String = paths.iter().map(|p| format!("{{\"path\": \"{p}\"}}\n")).collect();
    std::fs::write(&list, text).expect("write");
    let spec = RunSpec::from_json(&json!({
        "uri": uri,
        "protocol": protocol,
        "request_file": list.display().to_string(),
        "no_duration": true,
        "timeout": "5s",
    }))
    .expect("spec");
    let sessions = vec![
        SessionPlan {
            start: ms(0),
            requests: vec![(ms(0), 0), (ms(100), 1), (ms(250), 2)],
            own_connection: true,
        },
        SessionPlan {
            start: ms(50),
            requests: vec![(ms(0), 3), (ms(120), 4), (ms(200), 5)],
            own_connection: true,
        },
    ];
    let began = Instant::now();
    let r = Run::new(&spec).sessions(sessions).execute(&StopHandle::new()).expect("run");
    assert!(began.elapsed() < Duration::from_secs(5), "the run ends when its sessions do");
    assert_eq!(r.global.counters.get(Counter::Http2xx), 6, "{:?}", r.errors);
    assert_eq!(r.global.counters.get(Counter::CxTotal), 2, "one connection per session");
    assert_eq!(r.global.counters.get(per_protocol), 2);

    let log = log.lock().unwrap().clone();
    let t0 = log.iter().find(|e| e.1 == "/a0").expect("a0").2;
    let conn_of = |p: &str| log.iter().find(|e| e.1 == p).expect(p).0;
    let at = |p: &str| log.iter().find(|e| e.1 == p).expect(p).2.duration_since(t0);
    // Each session on one connection, in order; the two sessions on different connections.
    for s in ["a", "b"] {
        let on: Vec<&str> = log
            .iter()
            .filter(|e| e.0 == conn_of(&format!("/{s}0")))
            .map(|e| e.1.as_str())
            .collect();
        assert_eq!(on, [format!("/{s}0"), format!("/{s}1"), format!("/{s}2")], "{log:?}");
    }
    assert_ne!(conn_of("/a0"), conn_of("/b0"));
    // At their offsets (a loaded 2-core machine gets 40 ms of slack), except where the
    // session's previous answer came late: /b0 takes 150 ms, so /b1 (due at 170 ms) waits for
    // it (sent at ~200 ms), while session a is not held up at all.
    let near = |p: &str, want: u64| {
        let got = at(p).as_millis() as i64;
        assert!((got - want as i64).abs() <= 40, "{p} at {got} ms, planned {want} ms: {log:?}");
    };
    near("/a1", 100);
    near("/a2", 250);
    near("/b0", 50);
    near("/b1", 200);
    near("/b2", 250);
    // Measured between the two arrivals on the server's clock, so connection setup does not
    // blur it: /b1 left only after /b0's answer, which the server held 150 ms.
    assert!(at("/b1") - at("/b0") >= ms(150), "/b1 went out before /b0 was answered: {log:?}");
    // The late request's scheduled time stayed the planned one: its lateness is measured.
    let lateness = r.global.stats.get(shrike_stats::StatId::SendLateness);
    assert!(lateness.max() >= 25_000_000, "max lateness {} ns", lateness.max());
    let _ = std::fs::remove_dir_all(&dir);
}
