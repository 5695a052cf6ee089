//! Zipkin tracing (Nighthawk's `--trace zipkin://HOST:PORT/api/v2/spans`).
//!
//! A worker samples each request as it releases it (`sample_rate`); a sampled request carries
//! B3 propagation headers (`x-b3-traceid`, `x-b3-spanid`, `x-b3-sampled: 1`), so the server's
//! own spans join its trace, and its completion becomes one Zipkin v2 span: a CLIENT span from
//! the actual send to the response, with the scheduled and actual send times as annotations
//! (their gap is the request's lateness, which coordinated omission would hide).
//!
//! Off the hot path: a worker only sends a small record over a bounded channel (a full
//! channel drops the span and counts it; it never blocks the worker). One collector thread
//! turns records into JSON and POSTs them in batches (every second, or every
//! [`BATCH`] spans). What could not be delivered is reported in the run's errors.

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::requests::template::Rng;

/// Spans per POST, at most.
const BATCH: usize = 500;
/// Records a worker may have in flight to the collector before spans are dropped.
const QUEUE: usize = 64 * 1024;
/// The longest a span waits before its batch is posted.
const FLUSH: Duration = Duration::from_secs(1);
const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where spans go and how many requests are traced.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceConfig {
    /// As the user gave it (for messages).
    pub uri: String,
    /// `HOST:PORT` of the collector.
    pub collector: String,
    pub path: String,
    /// In (0, 1].
    pub sample_rate: f64,
}

/// A traced request's ids. The 128-bit trace id is two words, so a ticket keeps 8-byte
/// alignment (a `u128` would double it on x86-64 and grow every ticket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceIds {
    pub trace: [u64; 2],
    pub span: u64,
}

impl TraceIds {
    pub fn trace_hex(&self) -> String {
        format!("{:016x}{:016x}", self.trace[0], self.trace[1])
    }
    pub fn span_hex(&self) -> String {
        format!("{:016x}", self.span)
    }
    /// The B3 propagation headers (multi-header form).
    pub fn headers(&self) -> [(&'static str, String); 3] {
        [
            ("x-b3-traceid", self.trace_hex()),
            ("x-b3-spanid", self.span_hex()),
            ("x-b3-sampled", "1".to_string()),
        ]
    }
}

/// One finished traced request, as a worker hands it over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanRecord {
    pub ids: TraceIds,
    pub request: u32,
    pub scheduled: Instant,
    pub sent: Option<Instant>,
    pub done: Instant,
    pub status: Option<u16>,
    /// Why it got no answer, if it got none.
    pub error: Option<&'static str>,
}

/// A worker's side: its sampler and its channel to the collector.
pub(crate) struct Tracing {
    threshold: u64,
    rng: Rng,
    tx: SyncSender<SpanRecord>,
    dropped: Arc<AtomicU64>,
}

impl Tracing {
    /// Ids for a new request if it is sampled. Ids are never zero (B3 treats zero as absent).
    #[inline]
    pub fn sample(&self) -> Option<TraceIds> {
        if self.rng.next() > self.threshold {
            return None;
        }
        let trace = [self.rng.next(), self.rng.next().max(1)];
        Some(TraceIds { trace, span: self.rng.next().max(1) })
    }

    /// Hands a finished span to the collector, or counts it dropped if the collector is behind.
    pub fn finish(&self, span: SpanRecord) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(span) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The collector thread and what it reports when the run is over.
pub(crate) struct Collector {
    tx: Option<SyncSender<SpanRecord>>,
    dropped: Arc<AtomicU64>,
    threshold: u64,
    thread: std::thread::JoinHandle<Delivery>,
    uri: String,
}

/// What the collector delivered.
#[derive(Debug, Default)]
struct Delivery {
    posted: u64,
    failed: u64,
    last_error: Option<String>,
}

impl Collector {
    /// Starts the collector thread. `names`: each request-source entry's method and path, for
    /// the spans' names and tags.
    pub fn start(cfg: &TraceConfig, names: Vec<(String, String)>) -> std::io::Result<Collector> {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let post = Post { collector: cfg.collector.clone(), path: cfg.path.clone() };
        let anchor = (Instant::now(), SystemTime::now());
        let thread = std::thread::Builder::new()
            .name("shrike-trace".into())
            .spawn(move || collect(&rx, &post, &names, anchor))?;
        // rate × 2^64, as a threshold on a uniform u64; 1.0 saturates to "always".
        let threshold = (cfg.sample_rate * 18_446_744_073_709_551_616.0) as u64;
        Ok(Collector {
            tx: Some(tx),
            dropped: Arc::default(),
            threshold,
            thread,
            uri: cfg.uri.clone(),
        })
    }

    /// Worker `seed`'s sampler and channel.
    pub fn tracing(&self, seed: u64) -> Option<Tracing> {
        Some(Tracing {
            threshold: self.threshold,
            rng: Rng::new(seed),
            tx: self.tx.clone()?,
            dropped: self.dropped.clone(),
        })
    }

    /// Waits for every span to be posted (the workers' senders are gone by now) and says what
    /// was not delivered, as the run's errors.
    pub fn finish(mut self) -> Vec<(String, u64)> {
        drop(self.tx.take());
        let d = self.thread.join().unwrap_or_else(|_| Delivery {
            failed: 1,
            last_error: Some("the trace collector thread panicked".into()),
            ..Delivery::default()
        });
        let mut errors = Vec::new();
        if d.failed > 0 {
            let why = d.last_error.unwrap_or_default();
            errors.push((format!("trace: spans not delivered to {}: {why}", self.uri), d.failed));
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            errors.push((
                format!("trace: spans dropped (the collector at {} fell behind)", self.uri),
                dropped,
            ));
        }
        errors
    }
}

fn collect(
    rx: &Receiver<SpanRecord>,
    post: &Post,
    names: &[(String, String)],
    anchor: (Instant, SystemTime),
) -> Delivery {
    let mut d = Delivery::default();
    let mut batch: Vec<Value> = Vec::new();
    let mut oldest: Option<Instant> = None;
    loop {
        let wait = oldest.map_or(FLUSH, |t| FLUSH.saturating_sub(t.elapsed()));
        let ended = match rx.recv_timeout(wait) {
            Ok(r) => {
                batch.push(span_json(&r, names, anchor));
                oldest.get_or_insert_with(Instant::now);
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        let due = oldest.is_some_and(|t| t.elapsed() >= FLUSH);
        if !batch.is_empty() && (ended || due || batch.len() >= BATCH) {
            let n = batch.len() as u64;
            match post.send(&Value::Array(std::mem::take(&mut batch))) {
                Ok(()) => d.posted += n,
                Err(e) => {
                    d.failed += n;
                    d.last_error = Some(e);
                }
            }
            oldest = None;
        }
        if ended {
            return d;
        }
    }
}

/// Microseconds since the epoch of `t`, through the anchor taken when tracing started.
fn epoch_us(t: Instant, (i0, s0): (Instant, SystemTime)) -> u64 {
    let wall = if t >= i0 { s0 + (t - i0) } else { s0 - (i0 - t) };
    wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

fn span_json(r: &SpanRecord, names: &[(String, String)], anchor: (Instant, SystemTime)) -> Value {
    let named = names.get(r.request as usize);
    let start = r.sent.unwrap_or(r.scheduled);
    let mut annotations =
        vec![json!({"timestamp": epoch_us(r.scheduled, anchor), "value": "scheduled"})];
    if let Some(sent) = r.sent {
        annotations.push(json!({"timestamp": epoch_us(sent, anchor), "value": "sent"}));
    }
    let mut tags = serde_json::Map::new();
    if let Some((method, path)) = named {
        tags.insert("http.method".into(), json!(method));
        tags.insert("http.path".into(), json!(path));
    }
    if let Some(s) = r.status {
        tags.insert("http.status_code".into(), json!(s.to_string()));
        if s >= 500 {
            tags.insert("error".into(), json!(s.to_string()));
        }
    }
    if let Some(e) = r.error {
        tags.insert("error".into(), json!(e));
    }
    json!({
        "traceId": r.ids.trace_hex(),
        "id": r.ids.span_hex(),
        "name": named.map_or_else(|| "request".to_string(), |(m, p)| format!("{m} {p}")),
        "kind": "CLIENT",
        "timestamp": epoch_us(start, anchor),
        // Zipkin reads a zero duration as "unknown".
        "duration": (r.done.saturating_duration_since(start).as_micros() as u64).max(1),
        "localEndpoint": {"serviceName": "shrike"},
        "annotations": annotations,
        "tags": tags,
    })
}

/// POSTs a batch to the collector's span endpoint (HTTP/1.1, one connection per batch: at
/// most a few a second).
struct Post {
    collector: String,
    path: String,
}

impl Post {
    fn send(&self, spans: &Value) -> Result<(), String> {
        let body = spans.to_string();
        let addr = self
            .collector
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", self.collector))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.collector))?;
        let mut s = TcpStream::connect_timeout(&addr, POST_TIMEOUT).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(POST_TIMEOUT)).map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(POST_TIMEOUT)).map_err(|e| e.to_string())?;
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            self.path,
            self.collector,
            body.len()
        );
        s.write_all(head.as_bytes())
            .and_then(|()| s.write_all(body.as_bytes()))
            .map_err(|e| e.to_string())?;
        let mut status = [0u8; 12];
        s.read_exact(&mut status).map_err(|e| format!("no answer: {e}"))?;
        match &status[9..12] {
            [b'2', _, _] => Ok(()),
            code => Err(format!("the collector answered {}", String::from_utf8_lossy(code))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_follows_the_rate_and_ids_are_never_zero() {
        let (tx, _rx) = std::sync::mpsc::sync_channel(1);
        let t = |rate: f64| Tracing {
            threshold: (rate * 18_446_744_073_709_551_616.0) as u64,
            rng: Rng::new(7),
            tx: tx.clone(),
            dropped: Arc::default(),
        };
        let all = t(1.0);
        assert!((0..1000).all(|_| all.sample().is_some_and(|i| i.trace[1] != 0 && i.span != 0)));
        let quarter = t(0.25);
        let n = (0..100_000).filter(|_| quarter.sample().is_some()).count();
        assert!((24_000..26_000).contains(&n), "{n}");
        let ids = TraceIds { trace: [0, 0xab], span: 0xcd };
        assert_eq!(ids.trace_hex(), format!("{:0>32}", "ab"));
        assert_eq!(ids.headers()[1], ("x-b3-spanid", format!("{:0>16}", "cd")));
    }
}
