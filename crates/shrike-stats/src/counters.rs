//! Named counters, summed across workers. Names follow Nighthawk/Envoy so users' predicates and
//! dashboards keep working (`benchmark.http_5xx:0`, `upstream_cx_connect_fail`, …).

use std::collections::BTreeMap;

macro_rules! counters {
    ($( $variant:ident => $name:literal; )*) => {
        /// A counter a worker increments. Stored in a fixed array indexed by this enum.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Counter { $( $variant, )* }

        impl Counter {
            pub const ALL: &'static [Counter] = &[ $( Counter::$variant, )* ];
            pub const COUNT: usize = Self::ALL.len();

            pub fn name(self) -> &'static str {
                match self { $( Counter::$variant => $name, )* }
            }
            pub fn from_name(name: &str) -> Option<Counter> {
                match name { $( $name => Some(Counter::$variant), )* _ => None }
            }
        }
    };
}

counters! {
    Http1xx => "benchmark.http_1xx";
    Http2xx => "benchmark.http_2xx";
    Http3xx => "benchmark.http_3xx";
    Http4xx => "benchmark.http_4xx";
    Http5xx => "benchmark.http_5xx";
    HttpXxx => "benchmark.http_xxx";
    // An answer read whole in a protocol without status codes (replay's raw TCP).
    Answered => "benchmark.answers";
    // An answer that was an error of its protocol (a MySQL error packet).
    AnswerErrors => "benchmark.answer_errors";
    // Sessions (replay's jobs) that sent their first request, and that finished their last.
    JobsStarted => "replay.jobs_started";
    JobsCompleted => "replay.jobs_completed";
    // Rows read from MySQL result sets.
    MysqlRows => "replay.mysql_rows";
    // Replayed HTTP answers that matched their captured answer (status, and body size where
    // captured), and that differed: the canary diff.
    CanaryMatched => "replay.canary_matched";
    CanaryDiffered => "replay.canary_differed";
    PoolOverflow => "benchmark.pool_overflow";
    PoolConnectionFailure => "benchmark.pool_connection_failure";
    StreamResets => "benchmark.stream_resets";
    // A response whose status is not among its request-list entry's expected ones.
    ExpectationMismatch => "benchmark.expectation_mismatch";
    CxTotal => "upstream_cx_total";
    CxHttp1Total => "upstream_cx_http1_total";
    CxHttp2Total => "upstream_cx_http2_total";
    CxHttp3Total => "upstream_cx_http3_total";
    // Replay's raw TCP and MySQL connections.
    CxTcpTotal => "upstream_cx_tcp_total";
    CxMysqlTotal => "upstream_cx_mysql_total";
    CxConnectFail => "upstream_cx_connect_fail";
    // CONNECT tunnels set up through the proxy (`--tunnel-uri`): a 2xx answer.
    TunnelTotal => "upstream_cx_tunnel_total";
    // CONNECTs the proxy refused (any non-2xx), reset, closed or garbled.
    TunnelFail => "benchmark.tunnel_failure";
    CxConnectTimeout => "upstream_cx_connect_timeout";
    CxDestroyLocal => "upstream_cx_destroy_local";
    CxDestroyRemote => "upstream_cx_destroy_remote";
    // Of those, the connections that took a request in flight with them (Envoy's names): the
    // server closed or reset mid-response; we closed on a timeout or a broken answer.
    CxDestroyLocalWithActiveRq => "upstream_cx_destroy_local_with_active_rq";
    CxDestroyRemoteWithActiveRq => "upstream_cx_destroy_remote_with_active_rq";
    CxProtocolError => "upstream_cx_protocol_error";
    // Of those, response heads past the client's limits (too large, too many fields): closed
    // rather than buffered. Envoy's codecs call it `header_overflow`.
    CxHeaderOverflow => "upstream_cx_header_overflow";
    // Closed on the server's notice: HTTP/1.1 `connection: close` or HTTP/2 GOAWAY (Envoy's
    // name and meaning).
    CxCloseNotify => "upstream_cx_close_notify";
    CxRxBytesTotal => "upstream_cx_rx_bytes_total";
    CxTxBytesTotal => "upstream_cx_tx_bytes_total";
    RqTotal => "upstream_rq_total";
    RqPendingTotal => "upstream_rq_pending_total";
    RqPendingOverflow => "upstream_rq_pending_overflow";
    RqTimeout => "upstream_rq_timeout";
    RqCancelled => "upstream_rq_cancelled";
    // Requests sent again after their first send got no answer (a reused HTTP/1.1 connection
    // closed under it, an HTTP/2 or HTTP/3 stream the server refused): Envoy's name. The
    // server may have seen a request twice, so its count is the client's `upstream_rq_total`
    // plus these.
    RqRetry => "upstream_rq_retry";
    SslHandshake => "ssl.handshake";
    SslSessionReused => "ssl.session_reused";
    SequencerFailedTerminations => "sequencer.failed_terminations";
    SequencerTerminations => "sequencer.terminations";
}

impl Counter {
    /// The status-class counter for an HTTP status code.
    pub fn for_status(status: u16) -> Counter {
        match status / 100 {
            1 => Counter::Http1xx,
            2 => Counter::Http2xx,
            3 => Counter::Http3xx,
            4 => Counter::Http4xx,
            5 => Counter::Http5xx,
            _ => Counter::HttpXxx,
        }
    }
}

/// A worker's counters: a plain array, incremented without atomics on the hot path, plus
/// counters this build has no [`Counter`] for, by name. Those come only from stored results
/// (Nighthawk's JSON carries Envoy's `default.total_match_count`, `ssl.ciphers.*`, …) and are
/// kept so a result read back loses nothing; an empty map does not allocate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters([u64; Counter::COUNT], BTreeMap<String, u64>);

impl Default for Counters {
    fn default() -> Self {
        Counters([0; Counter::COUNT], BTreeMap::new())
    }
}

impl Counter {
    /// The counters of answered requests, one per status class: their sum is the responses.
    pub const RESPONSES: [Counter; 7] = [
        Counter::Http1xx,
        Counter::Http2xx,
        Counter::Http3xx,
        Counter::Http4xx,
        Counter::Http5xx,
        Counter::HttpXxx,
        Counter::Answered,
    ];
}

impl Counters {
    /// Responses of any status class.
    pub fn responses(&self) -> u64 {
        Counter::RESPONSES.iter().map(|&k| self.get(k)).sum()
    }

    pub fn new() -> Self {
        Self::default()
    }
    #[inline]
    pub fn inc(&mut self, c: Counter) {
        self.0[c as usize] += 1;
    }
    #[inline]
    pub fn add(&mut self, c: Counter, n: u64) {
        self.0[c as usize] += n;
    }
    #[inline]
    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }
    pub fn set(&mut self, c: Counter, v: u64) {
        self.0[c as usize] = v;
    }
    pub fn merge(&mut self, other: &Counters) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += *b;
        }
        for (name, n) in &other.1 {
            *self.1.entry(name.clone()).or_default() += n;
        }
    }
    /// Sets a counter this build does not know, by name. A known name sets that [`Counter`].
    pub fn set_named(&mut self, name: &str, v: u64) {
        match Counter::from_name(name) {
            Some(c) => self.set(c, v),
            None => {
                self.1.insert(name.to_string(), v);
            }
        }
    }
    /// A counter's value by name, known or not (0 if absent).
    pub fn get_named(&self, name: &str) -> u64 {
        match Counter::from_name(name) {
            Some(c) => self.get(c),
            None => self.1.get(name).copied().unwrap_or(0),
        }
    }
    /// Counters this build does not know (read from a stored result), in name order.
    pub fn others(&self) -> impl Iterator<Item = (&str, u64)> {
        self.1.iter().map(|(k, v)| (k.as_str(), *v))
    }
    /// Every non-zero counter by name, known or not, in name order: what a format that writes
    /// a result back out (JSON) prints, so nothing read is lost.
    pub fn non_zero_named(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> =
            self.non_zero().into_iter().map(|(c, n)| (c.name(), n)).collect();
        v.extend(self.others().filter(|&(_, n)| n > 0));
        v.sort_by_key(|&(name, _)| name);
        v
    }
    /// Non-zero counters in name order (how every format prints them).
    pub fn non_zero(&self) -> Vec<(Counter, u64)> {
        let mut v: Vec<(Counter, u64)> =
            Counter::ALL.iter().map(|&c| (c, self.get(c))).filter(|&(_, n)| n > 0).collect();
        v.sort_by_key(|(c, _)| c.name());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        for &c in Counter::ALL {
            assert_eq!(Counter::from_name(c.name()), Some(c));
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Counter::COUNT);
        assert_eq!(Counter::from_name("benchmark.http_9xx"), None);
    }

    #[test]
    fn merge_sums_and_non_zero_filters() {
        let mut a = Counters::new();
        let mut b = Counters::new();
        a.add(Counter::Http2xx, 3);
        b.add(Counter::Http2xx, 4);
        b.inc(Counter::CxTotal);
        a.merge(&b);
        assert_eq!(a.get(Counter::Http2xx), 7);
        assert_eq!(a.non_zero(), vec![(Counter::Http2xx, 7), (Counter::CxTotal, 1)]);
    }
}

/// Responses per exact status code: fortio's `RetCodes`, and what a class counter hides (a 503
/// storm and a 500 bug both read `http_5xx`). A flat array so counting is one increment; every
/// three-digit code is kept exactly.
#[derive(Clone, PartialEq, Eq)]
pub struct StatusCodes(Box<[u64; 1000]>);

impl Default for StatusCodes {
    fn default() -> Self {
        StatusCodes(Box::new([0; 1000]))
    }
}

impl std::fmt::Debug for StatusCodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.non_zero()).finish()
    }
}

impl StatusCodes {
    pub fn new() -> Self {
        Self::default()
    }
    /// Counts one response. A code outside 0–999 cannot come off the wire (the parsers take three
    /// digits) and is ignored.
    #[inline]
    pub fn inc(&mut self, code: u16) {
        self.add(code, 1);
    }
    pub fn add(&mut self, code: u16, n: u64) {
        if let Some(c) = self.0.get_mut(usize::from(code)) {
            *c += n;
        }
    }
    pub fn get(&self, code: u16) -> u64 {
        self.0.get(usize::from(code)).copied().unwrap_or(0)
    }
    pub fn merge(&mut self, other: &StatusCodes) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    /// `(code, count)` for every code seen, ascending.
    pub fn non_zero(&self) -> Vec<(u16, u64)> {
        (0u16..).zip(self.0.iter()).filter(|(_, &n)| n > 0).map(|(c, &n)| (c, n)).collect()
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}
