//! The engine as a library: a `RunSpec` in, a `RunResult` out, called several times in one
//! process (as capacity search and sweeps do), against Shrike's own test server on 127.0.0.1:0.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::json;
use shrike_engine::{RunSpec, StopHandle};
use shrike_stats::{Counter, Termination};

/// The test server on its own thread; dropping the sender shuts it down.
fn server() -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let config = Arc::new(shrike_server::ServerConfig::builder().build().expect("config"));
            let _ = shrike_server::run(listener, config, async {
                let _ = rx.await;
            })
            .await;
        });
    });
    (addr, tx)
}

/// A result's options without its run id (each run makes its own), and that id.
fn without_run_id(options: &serde_json::Value) -> (serde_json::Value, String) {
    let mut o = options.clone();
    let id = o.as_object_mut().and_then(|m| m.remove("execution_id"));
    (o, id.and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())
}

#[test]
fn two_specs_run_one_after_another_in_one_process() {
    let (addr, _stop_server) = server();
    let uri = format!("http://{addr}/lib");
    let a = RunSpec::from_json(&json!({"uri": uri, "requests_per_second": 40, "duration": "0.5s"}))
        .expect("spec a");
    let b = a
        .edit()
        .concurrency(shrike_engine::Concurrency::Workers(2.try_into().expect("2")))
        .rate(10.0)
        .duration(std::time::Duration::from_secs(1))
        .request_method("POST")
        .request_body_size(7)
        .build()
        .expect("spec b");
    for (spec, want) in [(&a, 20), (&b, 20), (&a, 20)] {
        let r = shrike_engine::run(spec, &StopHandle::new(), None).expect("run");
        assert_eq!(r.termination, Termination::Completed, "{:?}", r.errors);
        assert_eq!(r.global.counters.get(Counter::Http2xx), want, "{:?}", r.errors);
        assert_eq!(r.global.counters.get(Counter::RqTotal), want);
        assert_eq!(r.workers.len(), spec.concurrency().workers().get());
        // The result's options are the spec with the run's id, and read back to it.
        let (options, id) = without_run_id(&r.options);
        assert!(id.starts_with("run-"), "{id}");
        assert_eq!(options, without_run_id(&spec.to_json()).0);
        assert_eq!(&RunSpec::from_json(&options).expect("options read back"), spec);
    }
    // The POST spec sent its bodies: 7 bytes each, visible in the bytes sent.
    let r = shrike_engine::run(&b, &StopHandle::new(), None).expect("run");
    assert!(r.global.counters.get(Counter::CxTxBytesTotal) >= 20 * 7);
}

#[test]
fn a_spec_round_trips_through_json_to_an_identical_result_shape() {
    let (addr, _stop_server) = server();
    let spec = RunSpec::from_json(&json!({
        "uri": format!("http://{addr}/rt"),
        "stages": "0s:50,400ms:50",
        "connections": 4,
        "request_options": {"request_headers": ["x-a: 1", {"header": {"key": "x-b", "value": "2"}}]},
        "failure_predicates": {"benchmark.http_5xx": "3"},
        "labels": ["round", "trip"],
        "sequencer_idle_strategy": "SPIN",
        "experimental_h1_connection_reuse_strategy": "LRU",
    }))
    .expect("spec");
    let text = spec.to_json().to_string();
    let back = RunSpec::from_json(&serde_json::from_str(&text).expect("json")).expect("spec back");
    assert_eq!(back, spec);
    let r1 = shrike_engine::run(&spec, &StopHandle::new(), None).expect("run");
    let r2 = shrike_engine::run(&back, &StopHandle::new(), None).expect("run");
    let ((o1, id1), (o2, id2)) = (without_run_id(&r1.options), without_run_id(&r2.options));
    assert_eq!(o1, o2);
    assert_ne!(id1, id2, "two runs, two ids");
    let shape = |r: &shrike_stats::RunResult| {
        let ids: Vec<_> =
            r.global.stats.iter().filter(|(_, s)| s.count() > 0).map(|(id, _)| id.id()).collect();
        (r.workers.len(), ids, r.global.counters.get(Counter::Http2xx))
    };
    assert_eq!(shape(&r1), shape(&r2));
    assert_eq!(r1.global.counters.get(Counter::Http2xx), 20, "a step to 50 rps held for 400 ms");
}

#[test]
fn errors_name_the_field_and_nothing_runs() {
    let bad = [
        (json!({"uri": "http://127.0.0.1:9/", "connections": 0}), "connections"),
        (json!({"uri": "ftp://x/"}), "uri"),
        (json!({"uri": "http://127.0.0.1:9/", "timeout": "0s"}), "timeout"),
        (json!({"uri": "http://127.0.0.1:9/", "tls": {"min_version": "1.1"}}), "tls.min_version"),
        (
            json!({"uri": "http://127.0.0.1:9/", "requests_per_second": "max", "open_loop": true}),
            "open_loop",
        ),
        (json!({"uri": "http://127.0.0.1:9/", "bogus": 1}), "bogus"),
        (json!({"requests_per_second": 5}), "uri"),
    ];
    for (v, field) in bad {
        let e = RunSpec::from_json(&v).expect_err("invalid");
        assert_eq!(e.field, field, "{v}: {e}");
    }
    // What needs the world (resolution, files) fails when the run is prepared, still by field.
    let spec = RunSpec::from_json(&json!({"uri": "http://127.0.0.1:9/",
        "request_file": "/nonexistent/list.jsonl"}))
    .expect("syntactically fine");
    let e = shrike_engine::run(&spec, &StopHandle::new(), None).expect_err("cannot prepare");
    assert!(matches!(&e, shrike_engine::RunError::Spec(s) if s.field == "request_file"), "{e}");
}
