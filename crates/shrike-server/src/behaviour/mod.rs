//! Per-request behaviour: what the response looks like, when and how it is sent, and what goes
//! wrong with it on purpose.
//!
//! This is the protocol-neutral half of the server. A front end (HTTP/1.1, HTTP/2 or HTTP/3)
//! hands over the values of the request's `x-nighthawk-test-server-config` headers and gets a
//! [`ResponsePlan`] back ([`ResponsePlan::for_request`]); it then only has to put the plan on its wire. Config
//! merging (the server's defaults, then each header field by field), the dice for faults and
//! random delays, arrival bookkeeping and the texts of server-generated errors live here, so
//! the front ends cannot drift apart.
//!
//! The fields, as JSON in the header or in `shrike serve --config`:
//!
//! | field | meaning |
//! |---|---|
//! | `response_body_size` | body of this many `a` bytes (default 10) |
//! | `response_headers` | `[{"header": {"key": k, "value": v}, "append": bool}]` |
//! | `echo_request_headers` | body lists the request headers |
//! | `response_status` | status 200..=599 |
//! | `static_delay` | wait before answering (µs precision, e.g. `"0.000250s"`) |
//! | `concurrency_based_linear_delay` | `minimal_delay + active requests × concurrency_delay_factor` |
//! | `delay_distribution` | `{"fixed": d}`, `{"uniform": {"min", "max"}}`, `{"exponential": {"mean"}}`, `{"weighted": [{"delay", "weight"}]}` |
//! | `emit_previous_request_delta_in_response_header` | header name for ns since the previous request |
//! | `response_chunk_size`, `response_chunk_delay` | stream the body in chunks, paced |
//! | `reset` | `{"scope": "stream"\|"connection", "probability"}` |
//! | `close_after_bytes` | `{"bytes": n, "probability"}`: truncate the body after n bytes |
//! | `stall` | `{"duration", "after_bytes", "probability"}`: pause before the head, or mid-body |
//! | `status_faults` | `[{"status", "probability"}]`: fortio's `status=503:20` |
//! | `emit_server_stats_headers` | add `x-shrike-active-requests` and `x-shrike-service-time-us` |
//! | `seed` | seed for the fault and delay dice |
//!
//! Delays (static, linear, distribution) are one choice: one header sets one of them, and a
//! later header or field replaces the earlier choice.

mod faults;
mod parse;
mod schedule;

use std::borrow::Cow;
use std::time::{Duration, Instant};

pub(crate) use faults::{Distribution, Faults, ResetScope, Rng, Rolled};
pub(crate) use parse::{defaults_from_json, RequestConfigError};
pub(crate) use schedule::{Chunking, Schedule, Step};

use crate::config::ServerConfig;
use crate::headers::HeaderList;
use crate::state::ServerState;
use crate::stats::FaultKind;

pub(crate) const CONFIG_HEADER: &str = "x-nighthawk-test-server-config";
/// Requests in flight server-wide when the request arrived, itself included.
pub(crate) const ACTIVE_HEADER: &str = "x-shrike-active-requests";
/// Microseconds from the request's arrival to its response head.
pub(crate) const SERVICE_TIME_HEADER: &str = "x-shrike-service-time-us";

/// Response bodies are slices of this: Nighthawk's filler byte, shared by every response of
/// every protocol, so no response allocates its body.
pub(crate) static FILLER: [u8; 64 * 1024] = [b'a'; 64 * 1024];

/// When to answer, relative to the request's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delay {
    None,
    Static(Duration),
    /// Nighthawk's model of an overloaded server: `minimal + active requests × factor`.
    Linear {
        minimal: Duration,
        factor: Duration,
    },
}

impl Delay {
    pub(crate) fn from_static(delay: Duration) -> Self {
        if delay.is_zero() {
            Delay::None
        } else {
            Delay::Static(delay)
        }
    }

    pub(crate) fn is_none(self) -> bool {
        self == Delay::None
    }

    /// How long to wait now, given the requests currently in flight server-wide.
    pub(crate) fn now(self, state: &ServerState) -> Duration {
        match self {
            Delay::None => Duration::ZERO,
            Delay::Static(d) => d,
            Delay::Linear { .. } => self.duration(state.active()),
        }
    }

    /// `active` counts the requests in flight server-wide, this one included (Nighthawk counts
    /// live filter instances process-wide, its own among them).
    pub(crate) fn duration(self, active: usize) -> Duration {
        match self {
            Delay::None => Duration::ZERO,
            Delay::Static(d) => d,
            Delay::Linear { minimal, factor } => {
                let active = u32::try_from(active).unwrap_or(u32::MAX);
                minimal.saturating_add(factor.saturating_mul(active))
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// This many `a` bytes, as Nighthawk's test server sends.
    Filler(u64),
    /// The request's headers, one `name: value` line each.
    Echo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Headers<'a> {
    /// The server-wide list, untouched: front ends may use a pre-encoded copy.
    Default,
    Custom(HeaderList<'a>),
}

/// The server-wide defaults beyond status, headers and body (see [`ServerConfig`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Behaviour {
    pub(crate) delay: Delay,
    pub(crate) random_delay: Option<Distribution>,
    pub(crate) delta_header: Option<String>,
    pub(crate) chunking: Option<Chunking>,
    pub(crate) faults: Faults,
    pub(crate) stats_headers: bool,
    pub(crate) seed: Option<u64>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            delay: Delay::None,
            random_delay: None,
            delta_header: None,
            chunking: None,
            faults: Faults::default(),
            stats_headers: false,
            seed: None,
        }
    }
}

/// What the server-side stats headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatsHeaders {
    pub(crate) arrival: Instant,
    pub(crate) active: usize,
}

impl StatsHeaders {
    pub(crate) fn service_time_us(&self) -> u64 {
        u64::try_from(self.arrival.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// The resolved response for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResponsePlan<'a> {
    pub(crate) status: u16,
    pub(crate) headers: Headers<'a>,
    pub(crate) body: Body,
    pub(crate) delay: Delay,
    /// Drawn into `delay` by [`ResponsePlan::for_request`].
    pub(crate) random_delay: Option<Distribution>,
    /// Name of the header that carries the nanoseconds since the previous request arrived.
    pub(crate) delta_header: Option<Cow<'a, str>>,
    pub(crate) chunking: Option<Chunking>,
    pub(crate) faults: Faults,
    /// The faults that fired, decided by [`ResponsePlan::for_request`].
    pub(crate) rolled: Rolled,
    pub(crate) stats_headers: bool,
    /// Set by [`ResponsePlan::for_request`] when `stats_headers` is on.
    pub(crate) stats: Option<StatsHeaders>,
    pub(crate) seed: Option<u64>,
}

impl<'a> ResponsePlan<'a> {
    pub(crate) fn defaults(config: &'a ServerConfig) -> Self {
        let b = config.behaviour();
        ResponsePlan {
            status: config.response_status(),
            headers: Headers::Default,
            body: if config.echo_request_headers() {
                Body::Echo
            } else {
                Body::Filler(config.response_body_size())
            },
            delay: b.delay,
            random_delay: b.random_delay.clone(),
            delta_header: b.delta_header.as_deref().map(Cow::Borrowed),
            chunking: b.chunking,
            faults: b.faults.clone(),
            rolled: Rolled::default(),
            stats_headers: b.stats_headers,
            stats: None,
            seed: b.seed,
        }
    }

    /// The plan for one request, and the nanoseconds since the previous request when the plan
    /// asks for them. `config_headers` is `None` when the request has no config header (the
    /// HTTP/1.1 front end knows that from its framing pass and skips a second scan). Rolls the
    /// dice for faults and random delays, and counts the request in the server's statistics.
    ///
    /// Records the request's arrival whatever the outcome: every request must, or the next
    /// delta would span several requests.
    pub(crate) fn for_request<I>(
        config: &'a ServerConfig,
        state: &ServerState,
        config_headers: Option<I>,
        head_only: bool,
    ) -> Result<(Self, Option<u64>), RequestConfigError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let stats = state.stats();
        stats.request();
        let mut plan = match config_headers {
            None => ResponsePlan::defaults(config),
            Some(values) => match Self::from_config_headers(config, values) {
                Ok(plan) => plan,
                Err(e) => {
                    state.arrival(false);
                    stats.response(500, 0);
                    return Err(e);
                }
            },
        };
        let delta = state.arrival(plan.delta_header.is_some());
        if plan.random_delay.is_some() || !plan.faults.is_empty() {
            let mut rng = state.rng(plan.seed);
            if let Some(d) = plan.random_delay.take() {
                plan.delay = Delay::from_static(d.sample(&mut rng));
            }
            plan.rolled = plan.faults.roll(&mut rng);
        }
        if plan.stats_headers {
            plan.stats = Some(StatsHeaders { arrival: Instant::now(), active: state.active() + 1 });
        }
        let rolled = plan.rolled;
        if let Some(scope) = rolled.reset {
            stats.fault(FaultKind::from(scope));
            return Ok((plan, delta));
        }
        if let Some(status) = rolled.status {
            stats.fault(FaultKind::Status);
            plan.status = status;
        }
        if rolled.stall.is_some() {
            stats.fault(FaultKind::Stall);
        }
        let mut body = match plan.body {
            Body::Filler(n) if !head_only && crate::status::allows_body(plan.status) => n,
            _ => 0,
        };
        if let Some(limit) = rolled.close_after_bytes {
            stats.fault(FaultKind::CloseAfterBytes);
            body = body.min(limit);
        }
        stats.response(plan.status, body);
        Ok((plan, delta))
    }

    /// Merges the config headers in order over the server defaults. Scalars set later win;
    /// `response_headers` lists concatenate, as protobuf's merge does for Nighthawk.
    pub(crate) fn from_config_headers<I>(
        config: &'a ServerConfig,
        values: I,
    ) -> Result<Self, RequestConfigError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        parse::plan(config, values)
    }

    /// The timing and fault side of the plan, for the front end to act on.
    pub(crate) fn pacing(&self) -> Pacing {
        Pacing {
            delay: self.delay,
            rolled: self.rolled,
            chunking: self.chunking,
            stats: self.stats,
        }
    }
}

/// How a planned response goes out: when, in what pieces, and what breaks. Cheap to copy, so
/// front ends carry it into the task that sends the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pacing {
    pub(crate) delay: Delay,
    pub(crate) rolled: Rolled,
    pub(crate) chunking: Option<Chunking>,
    pub(crate) stats: Option<StatsHeaders>,
}

impl Default for Pacing {
    fn default() -> Self {
        Self { delay: Delay::None, rolled: Rolled::default(), chunking: None, stats: None }
    }
}

impl Pacing {
    /// Whether sending the response needs more than writing it out: a pause, a fault, a
    /// paced body or a service time to measure.
    pub(crate) fn is_eventful(&self) -> bool {
        !self.delay.is_none()
            || self.rolled != Rolled::default()
            || self.chunking.is_some()
            || self.stats.is_some()
    }

    /// The body's timeline after the head, for `len` body bytes.
    pub(crate) fn schedule(&self, len: u64) -> Schedule {
        let stall = self.rolled.stall.and_then(|s| s.after_bytes.map(|at| (at, s.duration)));
        Schedule::new(len, self.chunking, stall, self.rolled.close_after_bytes)
    }

    /// The pause before the head, if a stall fired with no `after_bytes`.
    pub(crate) fn stall_before_head(&self) -> Duration {
        match self.rolled.stall {
            Some(s) if s.after_bytes.is_none() => s.duration,
            _ => Duration::ZERO,
        }
    }

    /// Whether the body must go out step by step rather than in one piece.
    pub(crate) fn paced_body(&self) -> bool {
        self.chunking.is_some()
            || self.rolled.close_after_bytes.is_some()
            || self.rolled.stall.is_some_and(|s| s.after_bytes.is_some())
    }
}

/// The message of a 413: `declared` is the request's content-length when it gave one.
pub(crate) fn body_too_large(declared: Option<u64>, max_body: u64) -> String {
    match declared {
        Some(len) => format!(
            "request body of {len} bytes exceeds the server's max body size of {max_body} bytes"
        ),
        None => format!("request body exceeds the server's max body size of {max_body} bytes"),
    }
}
