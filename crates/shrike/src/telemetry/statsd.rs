//! statsd export over UDP (`--statsd`, Nighthawk's `--stats-sinks`), flushed every
//! `--stats-flush-interval`: counters as `|c` deltas since the last flush, latency percentiles
//! of the flushed window as `|g` gauges in milliseconds (a percentile sent as a `|ms` timer
//! would be re-aggregated by statsd into a meaningless percentile of percentiles).

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use serde_json::Value;
use shrike_engine::{Observer, Sample};
use shrike_stats::{Counter, Counters, Statistic, StatusCodes};

/// Stay under a typical Ethernet MTU so no datagram fragments.
const MAX_PACKET: usize = 1400;
const DEFAULT_PREFIX: &str = "shrike";
const STATSD_SINK: &str = "envoy.stat_sinks.statsd";
const STATSD_TYPE: &str = "type.googleapis.com/envoy.config.metrics.v3.StatsdSink";

/// Where one sink sends, and the prefix of its metric names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    pub prefix: String,
}

impl Target {
    pub fn parse_addr(s: &str, prefix: &str) -> Result<Target, String> {
        let addr = s
            .to_socket_addrs()
            .map_err(|e| format!("expected HOST:PORT, got {s:?} ({e})"))?
            .next()
            .ok_or_else(|| format!("{s:?} resolves to no address"))?;
        Ok(Target { addr, prefix: prefix.to_string() })
    }

    /// Nighthawk's `--stats-sinks` in the forms Shrike supports: `statsd://HOST:PORT`, or an
    /// Envoy `StatsdSink` (JSON; bare keys as in Nighthawk's help are accepted) with
    /// `address.socket_address` and optionally `prefix`.
    pub fn parse_sink(s: &str) -> Result<Target, String> {
        let s = s.trim();
        if let Some(addr) = s.strip_prefix("statsd://") {
            return Target::parse_addr(addr.trim_end_matches('/'), DEFAULT_PREFIX);
        }
        if !s.starts_with('{') {
            return Err(format!(
                "expected statsd://HOST:PORT or an {STATSD_SINK} JSON object, got {s:?}"
            ));
        }
        let v = shrike_stats::relaxed::parse(s).map_err(|e| format!("not a JSON object: {e}"))?;
        let name = v.get("name").and_then(Value::as_str).unwrap_or(STATSD_SINK);
        if name != STATSD_SINK {
            return Err(format!("only the {STATSD_SINK} sink is supported, got {name:?}"));
        }
        let cfg = v.get("typed_config").unwrap_or(&Value::Null);
        if let Some(t) = cfg.get("@type").and_then(Value::as_str) {
            if t != STATSD_TYPE {
                return Err(format!("typed_config must be a {STATSD_TYPE}, got {t:?}"));
            }
        }
        if cfg.get("tcp_cluster_name").is_some() {
            return Err("tcp_cluster_name names an Envoy cluster, which Shrike does not have: \
                        give address: {socket_address: {address, port_value}} instead"
                .into());
        }
        let sa = cfg.pointer("/address/socket_address").ok_or(
            "typed_config.address.socket_address {address, port_value} is required".to_string(),
        )?;
        if sa.get("protocol").and_then(Value::as_str).is_some_and(|p| p != "UDP") {
            return Err("only UDP statsd is supported (socket_address.protocol)".into());
        }
        let host = sa
            .get("address")
            .and_then(Value::as_str)
            .ok_or("socket_address.address is required")?;
        let port = sa
            .get("port_value")
            .and_then(|p| p.as_u64().or_else(|| p.as_str().and_then(|s| s.parse().ok())))
            .and_then(|p| u16::try_from(p).ok())
            .ok_or("socket_address.port_value must be a port number")?;
        let prefix = cfg.get("prefix").and_then(Value::as_str).unwrap_or(DEFAULT_PREFIX);
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        Target::parse_addr(&format!("{host}:{port}"), prefix)
    }
}

struct Sink {
    target: Target,
    socket: UdpSocket,
}

/// The statsd observer: accumulates ticks and flushes every `flush` (and at the end).
pub struct Statsd {
    sinks: Vec<Sink>,
    flush: Duration,
    next_flush: Duration,
    window: Duration,
    in_flight: u64,
    counters: Counters,
    codes: StatusCodes,
    sched: Statistic,
    service: Statistic,
}

impl Statsd {
    pub fn new(targets: Vec<Target>, flush: Duration) -> std::io::Result<Statsd> {
        let sinks = targets
            .into_iter()
            .map(|target| {
                let local = if target.addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                let socket = UdpSocket::bind(local)?;
                socket.connect(target.addr)?;
                Ok(Sink { target, socket })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Statsd {
            sinks,
            flush,
            next_flush: flush,
            window: Duration::ZERO,
            in_flight: 0,
            counters: Counters::new(),
            codes: StatusCodes::new(),
            sched: Statistic::new(),
            service: Statistic::new(),
        })
    }

    fn lines(&self, prefix: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for (c, n) in self.counters.non_zero() {
            lines.push(format!("{prefix}.{}:{n}|c", c.name()));
        }
        for (code, n) in self.codes.non_zero() {
            lines.push(format!("{prefix}.status_code.{code}:{n}|c"));
        }
        let secs = self.window.as_secs_f64();
        if secs > 0.0 {
            let rps = self.counters.get(Counter::RqTotal) as f64 / secs;
            lines.push(format!("{prefix}.requests_per_second:{rps:.3}|g"));
            lines.push(format!("{prefix}.requests_in_flight:{}|g", self.in_flight));
        }
        for (name, s) in
            [("scheduled_to_response", &self.sched), ("request_to_response", &self.service)]
        {
            if s.count() == 0 {
                continue;
            }
            let ms = |ns: u64| ns as f64 / 1e6;
            // Clamped: the histogram's bucket edge can exceed the exact max printed next to it.
            for (label, v) in [
                ("p50", ms(s.clamped_quantile(0.5))),
                ("p90", ms(s.clamped_quantile(0.9))),
                ("p99", ms(s.clamped_quantile(0.99))),
                ("p999", ms(s.clamped_quantile(0.999))),
                ("max", ms(s.max())),
                ("mean", s.mean() / 1e6),
            ] {
                lines.push(format!("{prefix}.{name}.{label}:{v:.6}|g"));
            }
        }
        lines
    }

    fn flush_now(&mut self) {
        for sink in &self.sinks {
            for packet in packets(&self.lines(&sink.target.prefix)) {
                // UDP statsd is fire-and-forget; a missing collector must not fail the run.
                let _ = sink.socket.send(packet.as_bytes());
            }
        }
        self.window = Duration::ZERO;
        self.counters = Counters::new();
        self.codes = StatusCodes::new();
        self.sched = Statistic::new();
        self.service = Statistic::new();
    }
}

/// Joins lines into newline-separated datagrams of at most [`MAX_PACKET`] bytes.
fn packets(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for l in lines {
        if !cur.is_empty() && cur.len() + 1 + l.len() > MAX_PACKET {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(l);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Observer for Statsd {
    fn tick(&mut self, t: &Sample) {
        self.window += t.duration;
        self.in_flight = t.in_flight;
        self.counters.merge(&t.counters);
        self.codes.merge(&t.status_codes);
        self.sched.merge(&t.scheduled_to_response);
        self.service.merge(&t.request_to_response);
        // Flush on the first tick boundary at or past each multiple of the flush interval,
        // so the cadence holds on average whatever the tick.
        let end = t.start + t.duration;
        if end >= self.next_flush || t.last {
            while self.next_flush <= end {
                self.next_flush += self.flush;
            }
            self.flush_now();
        }
    }

    fn finish(&mut self) {
        if !self.window.is_zero() {
            self.flush_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_forms() {
        let t = Target::parse_sink("statsd://127.0.0.1:8125").unwrap();
        assert_eq!((t.addr.to_string(), t.prefix.as_str()), ("127.0.0.1:8125".into(), "shrike"));
        let t = Target::parse_sink(
            r#"{name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/envoy.config.metrics.v3.StatsdSink",address:{socket_address:{address:"127.0.0.1",port_value:9125}},prefix:"lt"}}"#,
        )
        .unwrap();
        assert_eq!((t.addr.to_string(), t.prefix.as_str()), ("127.0.0.1:9125".into(), "lt"));
        let t = Target::parse_sink(
            r#"{"typed_config":{"address":{"socket_address":{"address":"::1","port_value":"1"}}}}"#,
        )
        .unwrap();
        assert_eq!(t.addr.to_string(), "[::1]:1");
        for bad in [
            r#"{name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/envoy.config.metrics.v3.StatsdSink",tcp_cluster_name:"statsd"}}"#,
            r#"{name:"envoy.stat_sinks.dog_statsd"}"#,
            r#"{typed_config:{address:{socket_address:{address:"127.0.0.1",port_value:70000}}}}"#,
            "udp://127.0.0.1:8125",
            "{not json",
        ] {
            assert!(Target::parse_sink(bad).is_err(), "{bad}");
        }
    }

    /// One sample of 1.016957ms: HdrHistogram's p99 is its bucket's top, 1.017343ms, which
    /// was printed above `max 1.016957`.
    #[test]
    fn percentiles_never_exceed_max() {
        let mut s = Statsd::new(Vec::new(), Duration::from_secs(1)).unwrap();
        s.window = Duration::from_secs(1);
        s.sched.record(1_016_957);
        s.service.record(1_016_957);
        let lines = s.lines("t");
        let value = |key: &str| -> f64 {
            let line = lines.iter().find(|l| l.starts_with(&format!("t.{key}:"))).unwrap();
            line.split([':', '|']).nth(1).unwrap().parse().unwrap()
        };
        for name in ["scheduled_to_response", "request_to_response"] {
            let max = value(&format!("{name}.max"));
            assert_eq!(max, 1.016957);
            for p in ["p50", "p90", "p99", "p999"] {
                assert_eq!(value(&format!("{name}.{p}")), max, "{name}.{p}");
            }
        }
    }

    #[test]
    fn packets_stay_small() {
        let lines: Vec<String> = (0..200).map(|i| format!("shrike.metric_{i}:1|c")).collect();
        let ps = packets(&lines);
        assert!(ps.len() > 1);
        assert!(ps.iter().all(|p| p.len() <= MAX_PACKET));
        assert_eq!(ps.iter().map(|p| p.lines().count()).sum::<usize>(), 200);
    }
}
