//! What each fuzz target does with its input, as plain functions: the `fuzz_targets/` binaries
//! hand libFuzzer's inputs to them, and the workspace's test suite runs every seed in `corpus/`
//! through them (`crates/shrike/tests/integration/fuzz_corpus.rs`, which includes this file), so
//! CI replays the corpus on every run without an instrumented build. A panic is a failure.

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use shrike_capture::{import_bytes, ImportOptions, Splitter};
use shrike_engine::h1::ResponseReader;
use shrike_engine::requests::file::parse;
use shrike_server::ServerConfig;
use shrike_spec::{Predicate, PredicateKind, RatePlan, RunSpec};

/// Packet captures: pcap (either byte order, µs or ns) and pcapng, every link layer, TCP
/// reassembly and the splitters (HTTP, MySQL, delimited, fixed; picked by the first byte), on
/// any bytes.
pub fn capture(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    let splitter = match which % 4 {
        0 => Splitter::Http,
        1 => Splitter::Mysql,
        2 => Splitter::Delimited(b"\n".to_vec()),
        _ => Splitter::Fixed(16),
    };
    let _ = import_bytes(rest, &ImportOptions { splitter, port: None });
}

/// The test server's HTTP/1.1 request head parser, body framing (content-length,
/// transfer-encoding, their conflicts) and chunked decoder: any bytes from a client.
pub fn h1_request(data: &[u8]) {
    shrike_server::fuzzing::request(data);
}

/// The test server's HTTP/2 connection state machine (framing, HPACK, stream states, flow
/// control, request bodies, timers): any frames from a client, in chunks of any size.
pub fn h2_request(data: &[u8]) {
    shrike_server::fuzzing::h2_request(data);
}

/// Up to two responses in a row (the second starts from what the first left buffered):
/// (status, header bytes, body bytes, close) for each, or the error that ended the reading.
fn read_two(mut reader: ResponseReader, mut input: &[u8], head: bool) -> Vec<String> {
    let mut rx = 0u64;
    let mut out = Vec::new();
    for _ in 0..2 {
        let read = pin!(reader.read_response(&mut input, head, &mut rx));
        let mut cx = Context::from_waker(Waker::noop());
        match read.poll(&mut cx) {
            Poll::Ready(Ok(i)) => {
                out.push(format!("{} {} {} {}", i.status, i.header_bytes, i.body_bytes, i.close))
            }
            Poll::Ready(Err(e)) => {
                out.push(e.to_string());
                break;
            }
            Poll::Pending => panic!("reading from a slice never waits"),
        }
    }
    out
}

/// The client's HTTP/1.1 response reader (status line, headers, content-length, chunked,
/// close-delimited bodies): any bytes from a server. The first byte says whether the request
/// was HEAD. Reading a slice never waits, so one poll finishes the read.
///
/// Differential too: a reader that reads an origin-latency header parses every head, while a
/// plain one answers a head it has seen before from the thread's remembered last head (which
/// earlier inputs of this process have left there). Both must read the same responses and fail
/// the same way.
pub fn h1_response(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let head = flags & 1 == 1;
    let plain = read_two(ResponseReader::new(), rest, head);
    let name: Rc<[u8]> = Rc::from(&b"x-fuzz-origin-latency"[..]);
    let parsing = ResponseReader::new().with_latency_header(Some(name));
    assert_eq!(plain, read_two(parsing, rest, head), "the remembered head answered differently");
}

/// The client's HTTP/2 codec (framing, HPACK, flow control, stream states): any bytes from a
/// server, read in chunks of any size, with up to seven streams open, some sending bodies.
pub fn h2_response(data: &[u8]) {
    shrike_engine::pool::h2::fuzz_server_bytes(data);
}

/// Jobs files (`shrike jobs` / `replay` input, plain or zstd) and HAR recordings, picked by the
/// first byte.
pub fn jobs(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    if which & 1 == 0 {
        let reader = std::io::Cursor::new(rest.to_vec());
        if let Ok(jobs) = shrike_jobs::JobReader::from_reader("fuzz".into(), Box::new(reader)) {
            for job in jobs.take(10_000) {
                if job.is_err() {
                    break;
                }
            }
        }
    } else if let Ok(text) = std::str::from_utf8(rest) {
        let _ = shrike_jobs::har::read_har(text);
    }
}

/// Request lists (`--request-file`): JSON Lines, JSON and YAML, picked by the first byte.
/// Body files resolve in a directory that does not exist, so no input reads the disk.
pub fn request_file(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let ext = ["jsonl", "json", "yaml"][usize::from(which) % 3];
    let _ = parse("fuzz", ext, text, Path::new("/nonexistent-shrike-fuzz"), &[], &[]);
}

/// Stored results: the JSON reader (forged documents, histograms and all) and the histogram
/// decoder on raw bytes. What reads back must write and read again.
pub fn result_json(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    if which & 1 == 0 {
        let _ = shrike_stats::Statistic::decode_histogram_bytes(rest);
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if let Ok(result) = shrike_output::json::from_json(text) {
        let mut out = Vec::new();
        shrike_output::json::write(&result, &mut out).expect("writing to memory");
        let text = String::from_utf8(out).expect("JSON is UTF-8");
        shrike_output::json::from_json(&text).expect("a written result reads back");
    }
}

/// The `x-nighthawk-test-server-config` parser (JSON, or Nighthawk's YAML flow), through the
/// server-wide defaults path that reads the same shape.
pub fn server_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ServerConfig::builder().defaults_json(text.to_string()).build();
}

/// `shrike serve --config-path`'s Envoy bootstrap reader (YAML or JSON), and the server-wide
/// defaults it yields, through the server's own configuration builder.
pub fn envoy_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(c) = shrike_server::envoy::parse_text(text) {
        let defaults = serde_json::Value::Object(c.defaults).to_string();
        let _ = ServerConfig::builder().defaults_json(defaults).build();
    }
}

/// The small parsers of user input, picked by the first byte: durations, k6-style stages,
/// predicates, SLOs, relaxed JSON, and a whole run spec as JSON.
pub fn spec_text(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    match which % 6 {
        0 => {
            let _ = shrike_stats::duration::parse_duration(text);
        }
        1 => {
            let _ = RatePlan::parse_stages(text);
        }
        2 => {
            let _ = Predicate::parse(text, PredicateKind::Failure);
        }
        3 => {
            let _ = shrike_plan::capacity::slo::Slo::parse(text);
        }
        4 => {
            let _ = shrike_stats::relaxed::parse(text);
        }
        _ => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                if let Ok(spec) = RunSpec::from_json(&v) {
                    // What a valid spec writes reads back to the same spec.
                    let again = RunSpec::from_json(&spec.to_json()).expect("canonical form reads");
                    assert_eq!(again.to_json(), spec.to_json());
                }
            }
        }
    }
}
