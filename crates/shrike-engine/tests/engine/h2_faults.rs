//! The h2 pool against a small in-test HTTP/2 server (the `h2` crate) that misbehaves on
//! purpose: stream resets must be counted as failures, refused streams retried, and
//! connection-level protocol errors counted — in process, on 127.0.0.1:0.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;

use h2::Reason;
use shrike_engine::{RunSpec, StopHandle};
use shrike_stats::{Counter, Termination, WorkerResult};

/// What the server does with the n-th stream (1-based) of a connection.
#[derive(Clone, Copy)]
enum Fault {
    /// Reset every stream with INTERNAL_ERROR.
    ResetAll,
    /// Refuse the first stream of each connection (REFUSED_STREAM), answer the rest.
    RefuseFirst,
    /// Answer, then break the connection with a GOAWAY(PROTOCOL_ERROR) after 3 streams.
    AbortAfter3,
}

fn server(fault: Fault) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((sock, _)) = listener.accept().await else { continue };
                tokio::task::spawn_local(serve_conn(sock, fault));
            }
        });
    });
    addr
}

async fn serve_conn(sock: tokio::net::TcpStream, fault: Fault) {
    let Ok(mut conn) = h2::server::handshake(sock).await else { return };
    let mut n = 0;
    while let Some(Ok((_req, mut respond))) = conn.accept().await {
        n += 1;
        match fault {
            Fault::ResetAll => respond.send_reset(Reason::INTERNAL_ERROR),
            Fault::RefuseFirst if n == 1 => respond.send_reset(Reason::REFUSED_STREAM),
            Fault::AbortAfter3 if n > 3 => {
                conn.abrupt_shutdown(Reason::PROTOCOL_ERROR);
                break;
            }
            _ => {
                let resp = http::Response::builder().status(200).body(()).expect("response");
                if let Ok(mut body) = respond.send_response(resp, false) {
                    let _ = body.send_data(bytes::Bytes::from_static(b"hello"), true);
                }
            }
        }
    }
    // Let the GOAWAY and pending frames go out before the socket closes.
    let _ = std::future::poll_fn(|cx| conn.poll_closed(cx)).await;
}

fn config(addr: SocketAddr, default_predicates: bool) -> RunSpec {
    RunSpec::from_json(&serde_json::json!({
        "uri": format!("http://{addr}/"),
        "protocol": "http2",
        "requests_per_second": 20,
        "connections": 4,
        "duration": "1s",
        "timeout": "5s",
        "max_requests_per_connection": u64::MAX.to_string(),
        "no_default_failure_predicates": !default_predicates,
    }))
    .expect("spec")
}

fn run(spec: RunSpec) -> (WorkerResult, Termination, Vec<String>) {
    let out = shrike_engine::run(&spec, &StopHandle::new(), None).expect("run");
    (out.global, out.termination, out.errors.into_keys().collect())
}

#[test]
fn stream_resets_fail_the_run() {
    let (g, termination, errors) = run(config(server(Fault::ResetAll), true));
    assert!(g.counters.get(Counter::StreamResets) >= 1);
    assert_eq!(g.counters.get(Counter::Http2xx), 0);
    assert!(
        matches!(&termination, Termination::FailurePredicate(p) if p.contains("stream_resets")),
        "{termination:?}"
    );
    assert!(errors.iter().any(|e| e.contains("INTERNAL_ERROR")), "{errors:?}");
}

#[test]
fn refused_streams_are_retried_not_failed() {
    let (g, termination, errors) = run(config(server(Fault::RefuseFirst), true));
    assert_eq!(termination, Termination::Completed, "{errors:?}");
    assert_eq!(g.counters.get(Counter::Http2xx), 20);
    assert_eq!(g.counters.get(Counter::StreamResets), 0);
    assert_eq!(g.counters.get(Counter::RqTotal), 20);
}

#[test]
fn connection_errors_are_protocol_errors_and_connections_are_replaced() {
    let (g, _, errors) = run(config(server(Fault::AbortAfter3), false));
    assert!(g.counters.get(Counter::CxProtocolError) >= 1, "{errors:?}");
    assert!(g.counters.get(Counter::CxHttp2Total) >= 2, "a new connection after the abort");
    // Three answered per connection; the rest of the 20 went to later connections.
    assert!(g.counters.get(Counter::Http2xx) >= 15, "{:?}", g.counters.non_zero());
}
