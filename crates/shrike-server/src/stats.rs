//! Server-side statistics for the admin endpoint (`stats_path`): what the server received,
//! answered and broke on purpose, so a test can check the client's counts against the server's.
//!
//! Counted per request on every core, so the counters are sharded: each thread adds to its own
//! cache-line-padded shard and only a read of the endpoint sums them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::behaviour::ResetScope;
use crate::state::ServerTotals;

const SHARDS: usize = 16;

/// What a fault-injection counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    ResetStream = 0,
    ResetConnection,
    CloseAfterBytes,
    Stall,
    Status,
}

const FAULT_NAMES: [&str; 5] =
    ["reset_stream", "reset_connection", "close_after_bytes", "stall", "status"];

/// What a connection-limit counter counts: a client cut off or refused by a limit (see the
/// `limits` module). Rare events, so they share the request counters' shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitKind {
    /// A request head not complete within the header timeout.
    HeaderTimeout = 0,
    /// A connection closed after the idle timeout.
    IdleTimeout,
    /// 431 for more header fields than allowed.
    TooManyHeaders,
    /// 431 for a head larger than allowed.
    HeadersTooLarge,
    /// A connection closed (or sent GOAWAY) after its request cap.
    MaxRequestsReached,
    /// A TCP connection reset at accept because the connection cap was full.
    ConnectionRefused,
}

const LIMIT_NAMES: [&str; 6] = [
    "header_timeouts",
    "idle_timeouts",
    "too_many_headers",
    "headers_too_large",
    "max_requests_reached",
    "connections_refused",
];

impl From<ResetScope> for FaultKind {
    fn from(scope: ResetScope) -> Self {
        match scope {
            ResetScope::Stream => FaultKind::ResetStream,
            ResetScope::Connection => FaultKind::ResetConnection,
        }
    }
}

#[repr(align(128))]
#[derive(Debug, Default)]
struct Shard {
    requests: AtomicU64,
    /// 1xx..5xx at 0..5, anything else at 5.
    responses: [AtomicU64; 6],
    request_body_bytes: AtomicU64,
    response_body_bytes: AtomicU64,
    faults: [AtomicU64; 5],
    limits: [AtomicU64; 6],
    proxy: [AtomicU64; 8],
}

/// What the server did as a `CONNECT` proxy, by [`ProxyEvent`].
const PROXY_NAMES: [&str; 8] = [
    "tunnels",
    "refused",
    "failed",
    "bytes_to_destination",
    "bytes_from_destination",
    "udp_tunnels",
    "datagrams_to_destination",
    "datagrams_from_destination",
];

/// A `CONNECT` proxy's counts: tunnels opened (answered 200; CONNECT-UDP ones also under
/// `udp_tunnels`), refused (403: a destination outside `--proxy-allow`, 405: not a proxy),
/// failed (502/504: the destination did not answer; or an open tunnel's destination was
/// lost), the bytes carried each way and, for CONNECT-UDP, the datagrams.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ProxyEvent {
    Tunnel,
    Refused,
    Failed,
    BytesTo,
    BytesFrom,
    UdpTunnel,
    DatagramsTo,
    DatagramsFrom,
}

#[derive(Debug)]
pub(crate) struct Stats {
    started: Instant,
    shards: Box<[Shard]>,
}

fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub(crate) fn new() -> Self {
        Self { started: Instant::now(), shards: (0..SHARDS).map(|_| Shard::default()).collect() }
    }

    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    pub(crate) fn request(&self) {
        add(&self.shard().requests, 1);
    }

    pub(crate) fn response(&self, status: u16, body_bytes: u64) {
        let shard = self.shard();
        let class = match status / 100 {
            c @ 1..=5 => usize::from(c - 1),
            _ => 5,
        };
        add(&shard.responses[class], 1);
        add(&shard.response_body_bytes, body_bytes);
    }

    /// A request refused before any behaviour ran (431, 413, 400, 405): a request and its
    /// response all the same, so that what a client counts answered has its witness here.
    pub(crate) fn refused(&self, status: u16) {
        self.request();
        self.response(status, 0);
    }

    pub(crate) fn request_body(&self, bytes: u64) {
        add(&self.shard().request_body_bytes, bytes);
    }

    pub(crate) fn fault(&self, kind: FaultKind) {
        add(&self.shard().faults[kind as usize], 1);
    }

    pub(crate) fn limit(&self, kind: LimitKind) {
        add(&self.shard().limits[kind as usize], 1);
    }

    pub(crate) fn proxy(&self, event: ProxyEvent, n: u64) {
        add(&self.shard().proxy[event as usize], n);
    }

    /// The endpoint's JSON document. `active` is the server's in-flight request count,
    /// `totals` its connections by protocol and TLS handshakes so far.
    pub(crate) fn to_json(&self, active: usize, totals: ServerTotals) -> String {
        let sum = |f: &dyn Fn(&Shard) -> &AtomicU64| -> u64 {
            self.shards.iter().map(|s| f(s).load(Ordering::Relaxed)).sum()
        };
        let classes = ["1xx", "2xx", "3xx", "4xx", "5xx", "xxx"];
        let responses: serde_json::Map<String, serde_json::Value> = classes
            .iter()
            .enumerate()
            .map(|(i, c)| ((*c).to_string(), sum(&|s| &s.responses[i]).into()))
            .collect();
        let faults: serde_json::Map<String, serde_json::Value> = FAULT_NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_string(), sum(&|s| &s.faults[i]).into()))
            .collect();
        let limits: serde_json::Map<String, serde_json::Value> = LIMIT_NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_string(), sum(&|s| &s.limits[i]).into()))
            .collect();
        let proxy: serde_json::Map<String, serde_json::Value> = PROXY_NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_string(), sum(&|s| &s.proxy[i]).into()))
            .collect();
        let doc = serde_json::json!({
            "requests": sum(&|s| &s.requests),
            "responses": responses,
            "active_requests": active,
            // Accepted TCP connections, and each by protocol once it is known; a stats request
            // counts its own connection.
            "connections": {
                "accepted": totals.accepted_connections,
                "http1": totals.http1_connections,
                "http2": totals.http2_connections,
                "http3": totals.http3_connections,
            },
            "tls": {
                "handshakes": totals.tls_handshakes,
                "handshake_failures": totals.tls_handshake_failures,
            },
            "request_body_bytes": sum(&|s| &s.request_body_bytes),
            "response_body_bytes": sum(&|s| &s.response_body_bytes),
            "faults": faults,
            "limits": limits,
            "proxy": proxy,
            "uptime_seconds": self.started.elapsed().as_secs_f64(),
        });
        doc.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_across_threads() {
        let stats = std::sync::Arc::new(Stats::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = stats.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        s.request();
                        s.response(503, 10);
                    }
                    s.fault(FaultKind::Status);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        stats.response(200, 1);
        stats.request_body(7);
        let v: serde_json::Value =
            serde_json::from_str(&stats.to_json(3, ServerTotals::default())).unwrap();
        assert_eq!(v["requests"], 400);
        assert_eq!(v["responses"]["5xx"], 400);
        assert_eq!(v["responses"]["2xx"], 1);
        assert_eq!(v["response_body_bytes"], 4001);
        assert_eq!(v["request_body_bytes"], 7);
        assert_eq!(v["faults"]["status"], 4);
        assert_eq!(v["faults"]["reset_stream"], 0);
        assert_eq!(v["active_requests"], 3);
        assert_eq!(v["limits"]["connections_refused"], 0);
        stats.limit(LimitKind::IdleTimeout);
        let v: serde_json::Value =
            serde_json::from_str(&stats.to_json(0, ServerTotals::default())).unwrap();
        assert_eq!(v["limits"]["idle_timeouts"], 1);
        assert_eq!(v["limits"].as_object().unwrap().len(), LIMIT_NAMES.len());
    }
}
