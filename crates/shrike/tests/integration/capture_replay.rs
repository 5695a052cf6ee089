//! Real loopback traffic captured with tcpdump, imported with `shrike jobs import`, and
//! replayed with `shrike replay`: the jobs hold exactly what was sent, on as many connections,
//! with the gaps it was sent with; the replay reproduces it at nginx (its access log says what
//! arrived on which connection, and when), at the captured speed and at twice it. Cooked
//! (`-i any`) and pcapng captures import the same.

use crate::support::capture;
use crate::support::nginx;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;
use capture::Tcpdump;
use nginx::{Listen, Nginx};
use shrike_jobs::{Job, JobReader};

const LIMIT: Duration = Duration::from_secs(60);

/// Reads one HTTP/1.1 response with a content-length body from `s`.
fn read_response(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
}

/// The traffic: a keep-alive session (GET, then 300 ms later a POST with a body), a
/// one-request connection, and a pipelined pair. Returns the time from the GET's write to the
/// POST's as this thread saw it: on a busy machine the 300 ms sleep overruns (by 52 ms once).
fn send_traffic(addr: &str) -> f64 {
    let mut a = TcpStream::connect(addr).unwrap();
    let get = std::time::Instant::now();
    a.write_all(b"GET /a HTTP/1.1\r\nhost: shop\r\n\r\n").unwrap();
    read_response(&mut a);
    std::thread::sleep(Duration::from_millis(300));
    let gap = get.elapsed().as_secs_f64();
    a.write_all(b"POST /upload HTTP/1.1\r\nhost: shop\r\ncontent-length: 5\r\n\r\nhello").unwrap();
    read_response(&mut a);
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    let mut b = TcpStream::connect(addr).unwrap();
    b.write_all(b"GET /c HTTP/1.1\r\nhost: shop\r\nconnection: close\r\n\r\n").unwrap();
    read_response(&mut b);
    drop(b);
    std::thread::sleep(Duration::from_millis(100));
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /p1 HTTP/1.1\r\nhost: shop\r\n\r\nGET /p2 HTTP/1.1\r\nhost: shop\r\n\r\n")
        .unwrap();
    read_response(&mut c);
    read_response(&mut c);
    gap
}

/// A capture of [`send_traffic`], and the gap between its session's requests.
fn capture(dir: &Path, interface: &str) -> (PathBuf, f64) {
    let server = Server::start(&[]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let dump = Tcpdump::start(
        interface,
        &format!("tcp port {port}"),
        &dir.join(format!("{interface}.pcap")),
    );
    let gap = send_traffic(&server.addr);
    (dump.stop(), gap)
}

fn import(capture: &Path, out: &Path) -> Output {
    run(&["jobs", "import", capture.to_str().unwrap(), "-o", out.to_str().unwrap()], LIMIT)
}

fn jobs(path: &Path) -> Vec<Job> {
    JobReader::open(path).unwrap().collect::<Result<_, _>>().unwrap()
}

/// Each job's requests as "METHOD PATH" plus body bytes.
fn shape(jobs: &[Job]) -> Vec<Vec<(String, usize)>> {
    jobs.iter()
        .map(|j| {
            j.requests
                .iter()
                .map(|r| {
                    let d = r.body.data();
                    let head = d.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let line =
                        String::from_utf8_lossy(&d[..d.iter().position(|&b| b == b'\r').unwrap()]);
                    let mut it = line.split(' ');
                    (format!("{} {}", it.next().unwrap(), it.next().unwrap()), d.len() - head)
                })
                .collect()
        })
        .collect()
}

fn expected() -> Vec<Vec<(String, usize)>> {
    let r = |s: &str, n| (s.to_string(), n);
    vec![
        vec![r("GET /a", 0), r("POST /upload", 5)],
        vec![r("GET /c", 0)],
        vec![r("GET /p1", 0), r("GET /p2", 0)],
    ]
}

#[test]
fn a_tcpdump_capture_imports_to_what_was_sent_and_replays_it() {
    let dir = scratch("capture-replay");
    let (pcap, sent_gap) = capture(&dir, "lo");
    let jobs_file = dir.join("lo.jobs");
    let out = import(&pcap, &jobs_file);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("imported 3 job(s) with 5 request(s)"), "{}", out.stderr);
    let js = jobs(&jobs_file);
    assert_eq!(shape(&js), expected());
    // The POST left 300 ms (or, on a busy machine, a little more) after the GET.
    let gap = js[0].requests[1].at.as_secs_f64();
    assert!((gap - sent_gap).abs() < 0.02, "captured {gap} s, sent {sent_gap} s");
    assert!(js[0].requests[0].body.data().starts_with(b"GET /a HTTP/1.1\r\nhost: shop\r\n"));

    // Replayed to nginx, at the captured speed and at twice it.
    for (scale, factor) in [("1", 1.0), ("2", 0.5)] {
        let ng = Nginx::start_logged(Listen::Http1);
        let out = run(
            &[
                "replay",
                jobs_file.to_str().unwrap(),
                "--target",
                &format!("127.0.0.1:{}", ng.port),
                "--time-scale",
                scale,
            ],
            LIMIT,
        );
        assert_eq!(out.code(), 0, "{}", out.stderr);
        let log = ng.access_log();
        let mut conns: BTreeMap<u64, Vec<&nginx::LogEntry>> = BTreeMap::new();
        for e in &log {
            conns.entry(e.connection).or_default().push(e);
        }
        let got: Vec<Vec<String>> = conns
            .values()
            .map(|c| {
                c.iter().map(|e| e.request.trim_end_matches(" HTTP/1.1").to_string()).collect()
            })
            .collect();
        let want: Vec<Vec<String>> =
            expected().iter().map(|j| j.iter().map(|(l, _)| l.clone()).collect()).collect();
        assert_eq!(got, want, "scale {scale}");
        let session = conns.values().next().unwrap();
        let gap = session[1].secs - session[0].secs;
        let want = js[0].requests[1].at.as_secs_f64() * factor;
        assert!((gap - want).abs() < 0.06, "scale {scale}: gap {gap}, captured × scale {want}");
        // The POST's body arrived whole (nginx reads it at /upload, and counts it).
        let post = log.iter().find(|e| e.request.starts_with("POST")).unwrap();
        let replayed_post = js[0].requests[1].body.data();
        let host_delta = format!("127.0.0.1:{}", ng.port).len() as i64 - "shop".len() as i64;
        assert_eq!(post.request_length as i64, replayed_post.len() as i64 + host_delta);
    }
}

#[test]
fn cooked_and_pcapng_captures_import_the_same() {
    let dir = scratch("capture-cooked");
    let (cooked, _) = capture(&dir, "any");
    let raw = std::fs::read(&cooked).unwrap();
    // tcpdump -i any writes Linux cooked capture (v1 or v2), never Ethernet.
    let linktype = u32::from_le_bytes([raw[20], raw[21], raw[22], raw[23]]);
    assert!(linktype == 113 || linktype == 276, "link type {linktype}");
    let out = import(&cooked, &dir.join("any.jobs"));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(shape(&jobs(&dir.join("any.jobs"))), expected());
    // The same capture with its records in reverse order (time order lost entirely) imports
    // the same.
    let backwards = dir.join("backwards.pcap");
    std::fs::write(&backwards, reverse_records(&raw)).unwrap();
    let out = import(&backwards, &dir.join("backwards.jobs"));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(shape(&jobs(&dir.join("backwards.jobs"))), expected());
    let ng = dir.join("any.pcapng");
    std::fs::write(&ng, capture::pcap_to_pcapng(&raw)).unwrap();
    let out = run(
        &[
            "jobs",
            "import",
            "pcapng",
            ng.to_str().unwrap(),
            "-o",
            dir.join("ng.jobs.zst").to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(shape(&jobs(&dir.join("ng.jobs.zst"))), expected());
}

/// A little-endian pcap with its records in reverse order.
fn reverse_records(pcap: &[u8]) -> Vec<u8> {
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let caplen =
            u32::from_le_bytes([pcap[at + 8], pcap[at + 9], pcap[at + 10], pcap[at + 11]]) as usize;
        records.push(&pcap[at..at + 16 + caplen]);
        at += 16 + caplen;
    }
    let mut out = pcap[..24].to_vec();
    for r in records.iter().rev() {
        out.extend_from_slice(r);
    }
    out
}

#[test]
fn bad_captures_and_flags_are_clear() {
    let dir = scratch("capture-bad");
    let not = dir.join("notes.txt");
    std::fs::write(&not, "hello").unwrap();
    let out = import(&not, &dir.join("x.jobs"));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("not a pcap, pcapng or HAR file"), "{}", out.stderr);
    // A photo: said what it begins with, and no advice to name a format it is not; named as
    // a pcap anyway, only that it is none (no report of nothing imported).
    let jpeg = dir.join("photo.jpg");
    std::fs::write(&jpeg, b"\xff\xd8\xff\xe0\x00\x10JFIF\x00").unwrap();
    let out = import(&jpeg, &dir.join("x.jobs"));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("it begins ff d8 ff e0"), "{}", out.stderr);
    assert!(!out.stderr.contains("name its format"), "{}", out.stderr);
    let out = run(&["jobs", "import", "pcap", jpeg.to_str().unwrap(), "-o", "/tmp/x.jobs"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("photo.jpg: not a pcap capture"), "{}", out.stderr);
    assert!(!out.stderr.contains("imported 0 job(s)"), "{}", out.stderr);
    assert!(!out.stderr.contains("what came before it"), "{}", out.stderr);
    let out = run(&["jobs", "import", "/nonexistent.pcap", "-o", "/tmp/x.jobs"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("/nonexistent.pcap"), "{}", out.stderr);
    let out = run(
        &["jobs", "import", not.to_str().unwrap(), "-o", "/tmp/x.jobs", "--protocol", "smtp"],
        LIMIT,
    );
    assert_eq!(out.code(), 2);
    // A capture of traffic on another port: readable, but nothing to import.
    let server = Server::start(&[]);
    let dump = Tcpdump::start("lo", "tcp port 1", &dir.join("empty.pcap"));
    send_traffic(&server.addr);
    let empty = dump.stop();
    let out = import(&empty, &dir.join("empty.jobs"));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("nothing to import"), "{}", out.stderr);
}

/// A line echo server on 127.0.0.1:0: answers each `\n`-terminated message with `ok:` and the
/// message, on every connection, until the test ends.
fn line_echo() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let r = std::io::BufReader::new(conn);
                for line in std::io::BufRead::lines(r).map_while(Result::ok) {
                    if w.write_all(format!("ok:{line}\n").as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn tcp_framing_given_at_import_is_the_replays_default() {
    let dir = scratch("capture-tcp-framing");
    let addr = line_echo();
    let port = addr.rsplit(':').next().unwrap().to_string();
    let dump = Tcpdump::start("lo", &format!("tcp port {port}"), &dir.join("lines.pcap"));
    let mut c = TcpStream::connect(&addr).unwrap();
    for i in 0..4 {
        c.write_all(format!("hello {i}\n").as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).unwrap();
        assert!(buf[..n].ends_with(b"\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(c);
    let pcap = dump.stop();
    let jobs_path = dir.join("lines.jobs");
    let out = run(
        &[
            "jobs",
            "import",
            pcap.to_str().unwrap(),
            "--protocol",
            "tcp",
            "--port",
            &port,
            "--delimiter",
            "\\n",
            "-o",
            jobs_path.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // The framing is in the file ...
    let header: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&jobs_path).unwrap().lines().next().unwrap())
            .unwrap();
    assert_eq!(header["tcp_framing"], serde_json::json!({"delimiter": [10]}), "{header}");
    // ... and the replay reads each answer to it without being told again (the old default,
    // a NUL, timed every request out).
    let out = run(
        &[
            "replay",
            jobs_path.to_str().unwrap(),
            "--target",
            &addr,
            "--timeout",
            "2s",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    assert_eq!(counter(global(&v), "upstream_rq_timeout"), 0, "{}", out.stderr);
    assert_eq!(counter(global(&v), "benchmark.answers"), 4, "{}", out.stderr);
}

/// Captures `traffic` to `port` and imports it into `jobs`, capturing again (up to three
/// times) while the capture lacks packets, as `whole` (every request with an answer) or the
/// import's report (bytes lost, a request cut off) says: on a busy machine tcpdump was seen to
/// miss a segment now and then (one of twenty, not at the end). The capture is the fixture
/// here; what is under test is what Shrike makes of a whole one.
fn whole_capture(
    dir: &Path,
    port: u16,
    jobs_file: &Path,
    requests: usize,
    traffic: impl Fn(),
) -> Output {
    let mut out = None;
    for attempt in 0..3 {
        let pcap = dir.join(format!("capture-{attempt}.pcap"));
        let dump = Tcpdump::start("lo", &format!("tcp port {port}"), &pcap);
        traffic();
        let o = import(&dump.stop(), jobs_file);
        let answered = o.code() == 0
            && jobs(jobs_file)
                .iter()
                .flat_map(|j| &j.requests)
                .filter(|r| r.response.is_some())
                .count()
                == requests;
        out = Some(o);
        if answered {
            break;
        }
    }
    out.unwrap()
}

#[test]
fn a_replay_reports_what_differs_from_the_captured_answers() {
    let dir = scratch("capture-canary");
    let ng = Nginx::start(Listen::Http1);
    let html = ng.dir.join("html");
    std::fs::write(html.join("a.txt"), "hello").unwrap();
    std::fs::write(html.join("b.txt"), "bee").unwrap();
    let jobs_file = dir.join("c.jobs");
    let out = whole_capture(&dir, ng.port, &jobs_file, 6, || {
        let mut s = TcpStream::connect(("127.0.0.1", ng.port)).unwrap();
        for _ in 0..2 {
            for path in ["/a.txt", "/b.txt", "/missing"] {
                let req = format!("GET {path} HTTP/1.1\r\nhost: shop\r\n\r\n");
                s.write_all(req.as_bytes()).unwrap();
                read_response(&mut s);
            }
        }
    });
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // Each request keeps what nginx answered it.
    let js = jobs(&jobs_file);
    let answers: Vec<(u16, Option<u64>)> = js[0]
        .requests
        .iter()
        .map(|r| r.response.map(|c| (c.status, c.body_bytes)).unwrap())
        .collect();
    let missing = answers[2];
    assert_eq!(missing.0, 404);
    assert_eq!(&answers[..2], &[(200, Some(5)), (200, Some(3))]);
    assert_eq!(answers[3..], answers[..3]);

    // The candidate: a.txt changed size, b.txt is gone, /missing is as it was.
    std::fs::write(html.join("a.txt"), "hello world").unwrap();
    std::fs::remove_file(html.join("b.txt")).unwrap();
    let target = format!("127.0.0.1:{}", ng.port);
    let jobs_arg = jobs_file.to_str().unwrap();
    let out = run(&["replay", jobs_arg, "--target", &target], LIMIT);
    assert_eq!(out.code(), 0, "a difference is a finding, not a failure: {}", out.stderr);
    assert!(
        out.stdout.contains("4 of 6 compared answers differ from the capture"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("2 × GET /b.txt: 200 → 404"), "{}", out.stdout);
    assert!(
        out.stdout.contains("2 × GET /a.txt: 200 with a 5-byte body → 11 bytes"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("GET /missing"), "it answered as captured: {}", out.stdout);
    let out = run(&["replay", jobs_arg, "--target", &target, "--output-format", "json"], LIMIT);
    let v = json(&out);
    let g = global(&v);
    assert_eq!(counter(g, "replay.canary_matched"), 2);
    assert_eq!(counter(g, "replay.canary_differed"), 4);
    let diffs = v["shrike"]["canary_differences"].as_array().unwrap();
    assert_eq!(diffs.len(), 2, "{diffs:?}");
    assert_eq!(diffs[0]["count"], "2");
}

#[test]
fn an_h2c_capture_imports_and_replays_with_its_connections_request_sequences() {
    let dir = scratch("capture-h2c");
    let ng = Nginx::start(Listen::H2c);
    std::fs::write(ng.dir.join("html/a.txt"), "hello").unwrap();
    // h2load speaks cleartext HTTP/2 by prior knowledge: two connections, three requests
    // each, one at a time.
    let url = format!("http://127.0.0.1:{}/a.txt", ng.port);
    let jobs_file = dir.join("h2.jobs");
    let out = whole_capture(&dir, ng.port, &jobs_file, 6, || {
        let out = std::process::Command::new("h2load")
            .args(["-n", "6", "-c", "2", "-m", "1", &url])
            .output()
            .expect("h2load (Debian's nghttp2-client; .ci/run installs it)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    });
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("2 connection(s) spoke HTTP/2"), "{}", out.stderr);
    assert!(!out.stderr.contains("no HTTP/1.1 request"), "{}", out.stderr);
    let js = jobs(&jobs_file);
    assert_eq!(js.len(), 2, "a job per connection");
    // h2load deals the six requests to its two connections (evenly, almost always).
    assert_eq!(js.iter().map(|j| j.requests.len()).sum::<usize>(), 6, "{js:?}");
    for j in &js {
        for r in &j.requests {
            let text = String::from_utf8_lossy(r.body.data()).into_owned();
            assert!(text.starts_with("GET /a.txt HTTP/1.1\r\nhost: 127.0.0.1:"), "{text}");
            let answer = r.response.expect("its answer");
            assert_eq!((answer.status, answer.body_bytes), (200, Some(5)));
        }
    }
    // Replayed over HTTP/2 to a fresh nginx: the same requests on as many connections, in the
    // same order, every answer as captured.
    let logged = Nginx::start_logged(Listen::H2c);
    std::fs::write(logged.dir.join("html/a.txt"), "hello").unwrap();
    let target = format!("127.0.0.1:{}", logged.port);
    let out = run(
        &["replay", jobs_file.to_str().unwrap(), "--target", &target, "--protocol", "http2"],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stdout.contains("all 6 compared answers as captured"), "{}", out.stdout);
    let mut conns: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for e in logged.access_log() {
        conns.entry(e.connection).or_default().push(e.request);
    }
    let mut got: Vec<Vec<String>> = conns.into_values().collect();
    got.sort_by_key(Vec::len);
    let mut want: Vec<Vec<String>> =
        js.iter().map(|j| vec!["GET /a.txt HTTP/2.0".to_string(); j.requests.len()]).collect();
    want.sort_by_key(Vec::len);
    assert_eq!(got, want);
}

/// Two connections: one sends at once; the other, opened 100 ms later, waits 400 ms before
/// its request (a client that connected ahead, as pools and browsers do). Returns that wait
/// as this thread saw it: on a busy machine the sleep overruns (by 70 ms once, in CI).
fn connect_ahead_traffic(addr: &str) -> f64 {
    let mut a = TcpStream::connect(addr).unwrap();
    a.write_all(b"GET /now HTTP/1.1\r\nhost: shop\r\n\r\n").unwrap();
    read_response(&mut a);
    std::thread::sleep(Duration::from_millis(100));
    let mut b = TcpStream::connect(addr).unwrap();
    let connected = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(400));
    let lead = connected.elapsed().as_secs_f64();
    b.write_all(b"GET /later HTTP/1.1\r\nhost: shop\r\n\r\n").unwrap();
    read_response(&mut b);
    lead
}

#[test]
fn a_replay_opens_each_connection_as_far_ahead_as_the_capture_shows() {
    let dir = scratch("capture-connect-ahead");
    let server = Server::start(&[]);
    let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let jobs_file = dir.join("ahead.jobs");
    let sent_lead = std::cell::Cell::new(0.0);
    let out = whole_capture(&dir, port, &jobs_file, 2, || {
        sent_lead.set(connect_ahead_traffic(&server.addr));
    });
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // The SYN's lead over the first request, per connection.
    let leads = |js: &[Job]| -> Vec<f64> {
        js.iter().map(|j| j.connect_ahead.expect("a SYN was captured").as_secs_f64()).collect()
    };
    let captured = leads(&jobs(&jobs_file));
    let sent_lead = sent_lead.get();
    assert!(captured[0] < 0.05 && (captured[1] - sent_lead).abs() < 0.02, "{captured:?}");

    // Replayed while tcpdump watches, the replay's own capture shows the same leads: the
    // second connection opened ~400 ms before its request (as captured), not with it.
    let replayed = dir.join("replayed.jobs");
    let target = Server::start(&[]);
    let target_port: u16 = target.addr.rsplit(':').next().unwrap().parse().unwrap();
    let out = whole_capture(&dir, target_port, &replayed, 2, || {
        let out = run(&["replay", jobs_file.to_str().unwrap(), "--target", &target.addr], LIMIT);
        assert_eq!(out.code(), 0, "{}", out.stderr);
    });
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let again = leads(&jobs(&replayed));
    assert!(again[0] < 0.05 && (again[1] - captured[1]).abs() < 0.06, "{again:?}");
}
