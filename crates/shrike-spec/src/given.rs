//! The options of a run as given ([`Given`]): every one typed, `None` where it was not given,
//! none yet combined with the others. Both ways of making a spec fill one in: the JSON reader
//! (a spec file, a stored result's `options`, the wire) and typed edits ([`crate::SpecEdit`],
//! which start from a spec's own options). [`Given::resolve`] then takes the defaults for what
//! is missing, combines what belongs together (rate, ramp, stages and duration; the target;
//! stream limits; TLS and Envoy's transport socket; predicates and their defaults) and ends
//! in [`RunSpec::check`]: one path, one set of rules, errors that name the option.

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::error::SpecError;
use crate::format::OutputFormat;
use crate::msg;
use crate::names::{self as n, Opt};
use crate::nighthawk::TlsPatch;
use crate::plan::{Rate, RatePlan, Stage};
use crate::predicate::{Predicate, PredicateKind};
use crate::shard::Shard;
use crate::spec::*;
use crate::types::*;
use crate::url::Url;

/// `requests_per_second` as given: a rate, or `max` (unpaced).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rps {
    PerSecond(f64),
    Max,
}

/// Sets the I/O backend of runs that do not choose one, so a whole test suite (or a fleet)
/// can run on io_uring without touching each command.
pub const IO_BACKEND_ENV: &str = "SHRIKE_IO_BACKEND";

/// Every option of a run, as given. `None`: not given, the default applies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Given {
    pub uri: Option<String>,
    pub endpoints: Option<Vec<String>>,
    pub multi_target_path: Option<String>,
    pub multi_target_use_https: Option<bool>,
    pub built_in_server: Option<bool>,
    pub protocol: Option<Protocol>,
    /// Nighthawk's deprecated `h2` switch.
    pub h2: Option<bool>,
    pub concurrency: Option<Concurrency>,
    pub connections: Option<u64>,
    pub rps: Option<Rps>,
    pub ramp: Option<Duration>,
    pub tunnel: crate::tunnel::GivenTunnel,
    /// The ramp time of Nighthawk's linear-ramping rate limiter plugin.
    pub rate_limiter: Option<Duration>,
    pub stages: Option<Vec<Stage>>,
    pub duration: Option<Duration>,
    pub no_duration: Option<bool>,
    pub timeout: Option<Duration>,
    pub idle: Option<IdleStrategy>,
    pub io_backend: Option<IoBackend>,
    pub read_coalesce: Option<Duration>,
    pub max_lateness: Option<Duration>,
    pub burst_size: Option<u64>,
    pub jitter: Option<Duration>,
    pub max_pending_requests: Option<u64>,
    pub max_requests_per_connection: Option<u64>,
    pub total_requests: Option<u64>,
    pub open_loop: Option<bool>,
    pub prefetch_connections: Option<bool>,
    pub retry_unanswered: Option<bool>,
    pub simple_warmup: Option<bool>,
    pub start_at: Option<SystemTime>,
    pub shard: Option<Shard>,
    pub execution_id: Option<String>,
    pub bind_address: Option<IpAddr>,
    pub max_concurrent_streams: Option<u64>,
    pub max_active_requests: Option<u64>,
    /// Nighthawk's `http3_protocol_options`: a stream limit of its own, and QUIC's windows.
    pub http3: Option<(Option<NonZeroU32>, Http3Options)>,
    pub h2_multiple_connections: Option<bool>,
    pub h1_reuse: Option<H1Reuse>,
    pub address_family: Option<AddressFamily>,
    pub tls_ca: Option<PathBuf>,
    pub tls_insecure: Option<bool>,
    pub tls_sni: Option<String>,
    pub tls_min_version: Option<TlsVersion>,
    pub tls_max_version: Option<TlsVersion>,
    pub tls_cipher_suites: Option<Vec<String>>,
    pub tls_session_resumption: Option<bool>,
    /// Envoy's `UpstreamTlsContext`, from `transport_socket` or the older `tls_context`.
    pub(crate) tls_envoy: Option<(Opt, TlsPatch)>,
    pub trace: Option<String>,
    pub trace_sample_rate: Option<f64>,
    pub method: Option<String>,
    pub headers: Option<Vec<(String, String)>>,
    pub body_size: Option<u64>,
    pub body_file: Option<PathBuf>,
    pub json_body: Option<String>,
    pub request_file: Option<PathBuf>,
    pub plugin_config: Option<String>,
    /// `HOST:PORT` of a request-source service.
    pub request_source: Option<String>,
    pub latency_header: Option<String>,
    pub failure_predicates: Option<Vec<Predicate>>,
    pub termination_predicates: Option<Vec<Predicate>>,
    pub no_default_failure_predicates: Option<bool>,
    pub labels: Option<Vec<String>>,
    pub output_format: Option<OutputFormat>,
    pub verbosity: Option<Verbosity>,
    pub stats_interval: Option<Duration>,
    pub metrics_listen: Option<String>,
    pub statsd: Option<Vec<String>>,
    pub stats_sinks: Option<Vec<String>>,
    pub stats_flush_interval: Option<Duration>,
    pub stats_flush_interval_duration: Option<Duration>,
    pub no_progress: Option<bool>,
}

const DEFAULT_CONNECTIONS: u64 = 100;
const DEFAULT_DURATION: Duration = Duration::from_secs(5);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_CONCURRENT_STREAMS: u64 = 2_147_483_647;
const DEFAULT_MAX_ACTIVE_REQUESTS: u64 = 100;

fn must(opt: Opt, why: impl Into<crate::error::Message>) -> SpecError {
    SpecError::must(opt, why)
}

/// A count that must fit a `u32` and be at least `min`.
fn u32_at_least(opt: Opt, v: u64, min: u32) -> Result<u32, SpecError> {
    u32::try_from(v).ok().filter(|n| *n >= min).ok_or_else(|| {
        let lo = if min == 0 { "" } else { "be at least 1 (and " };
        let hi = if min == 0 { "be at most 4294967295" } else { "at most 4294967295)" };
        must(opt, format!("must {lo}{hi}"))
    })
}

fn nonzero_u32(opt: Opt, v: u64) -> Result<NonZeroU32, SpecError> {
    u32_at_least(opt, v, 1).map(|n| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN))
}

/// Whether `b` may appear in an HTTP token (a method or header name, RFC 9110 §5.6.2).
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses a `name: value` header as a user writes it.
pub fn parse_header(raw: &str) -> Option<(String, String)> {
    let (k, v) = raw.split_once(':')?;
    let k = k.trim();
    let v = v.trim();
    if k.is_empty()
        || !k.bytes().all(is_token_byte)
        || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
    {
        return None;
    }
    Some((k.to_string(), v.to_string()))
}

impl Given {
    /// The spec these options make, with defaults for what was not given; every rule checked.
    pub fn resolve(&self) -> Result<RunSpec, SpecError> {
        let protocol = match self.protocol {
            Some(p) => p,
            None if self.h2 == Some(true) => Protocol::Http2,
            None => Protocol::Http1,
        };
        let rate = self.rate()?;
        let duration = self.duration(&rate)?;
        if let (RateSpec::LinearRamp { ramp_time, .. }, Some(d)) = (&rate, duration) {
            if *ramp_time >= d {
                return Err(must(
                    n::RATE_LIMITER_PLUGIN_CONFIG,
                    format!(
                        "ramp_time ({}) must be shorter than the duration ({})",
                        shrike_stats::duration::format_proto(*ramp_time),
                        shrike_stats::duration::format_proto(d)
                    ),
                ));
            }
        }
        let timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return Err(must(n::TIMEOUT, "must be greater than 0"));
        }
        let io_backend = match self.io_backend {
            Some(b) => b,
            None => match std::env::var(IO_BACKEND_ENV) {
                Err(_) => IoBackend::default(),
                Ok(s) => IoBackend::parse(&s).ok_or_else(|| {
                    must(
                        n::IO_BACKEND,
                        format!("{IO_BACKEND_ENV} must be epoll or io_uring, got {s:?}"),
                    )
                })?,
            },
        };
        let max_requests_per_connection = NonZeroU64::new(
            self.max_requests_per_connection.unwrap_or(DEFAULT_MAX_REQUESTS_PER_CONNECTION),
        )
        .ok_or_else(|| must(n::MAX_REQUESTS_PER_CONNECTION, "must be at least 1"))?;
        let total_requests = match self.total_requests {
            None => None,
            Some(t) => Some(
                NonZeroU64::new(t).ok_or_else(|| must(n::TOTAL_REQUESTS, "must be at least 1"))?,
            ),
        };
        let (streams, http3) = self.streams()?;
        let (predicates, user_predicates) = self.predicates();
        let spec = RunSpec {
            target: self.target()?,
            built_in_server: self.built_in_server.unwrap_or(false),
            protocol,
            concurrency: self.concurrency.unwrap_or(Concurrency::Workers(NonZeroUsize::MIN)),
            connections: nonzero_u32(
                n::CONNECTIONS,
                self.connections.unwrap_or(DEFAULT_CONNECTIONS),
            )?,
            duration,
            timeout,
            rate,
            idle: self.idle.unwrap_or_default(),
            io_backend,
            read_coalesce: self.read_coalesce.filter(|d| !d.is_zero()),
            max_lateness: self.max_lateness.filter(|d| !d.is_zero()),
            burst_size: u32_at_least(n::BURST_SIZE, self.burst_size.unwrap_or(0), 0)?,
            jitter: self.jitter.unwrap_or_default(),
            max_pending_requests: u32_at_least(
                n::MAX_PENDING_REQUESTS,
                self.max_pending_requests.unwrap_or(0),
                0,
            )?,
            max_requests_per_connection,
            total_requests,
            open_loop: self.open_loop.unwrap_or(false),
            prefetch_connections: self.prefetch_connections.unwrap_or(false),
            retry_unanswered: self.retry_unanswered.unwrap_or(true),
            simple_warmup: self.simple_warmup.unwrap_or(false),
            start_at: self.start_at,
            shard: self.shard,
            execution_id: execution_id(self.execution_id.as_deref())?,
            bind_address: self.bind_address,
            streams,
            h1_reuse: self.h1_reuse.unwrap_or_default(),
            address_family: self.address_family.unwrap_or_default(),
            tls: self.tls()?,
            tunnel: self.tunnel.resolve(protocol)?,
            http3,
            trace: self.trace()?,
            requests: self.requests()?,
            predicates,
            user_predicates,
            no_default_failure_predicates: self.no_default_failure_predicates.unwrap_or(false),
            labels: self.labels.clone().unwrap_or_default(),
            output_format: self.output_format.unwrap_or(OutputFormat::Summary),
            verbosity: self.verbosity.unwrap_or_default(),
            telemetry: self.telemetry()?,
        };
        spec.check()
    }

    fn target(&self) -> Result<TargetSpec, SpecError> {
        let endpoints = self.endpoints.as_ref().filter(|e| !e.is_empty());
        match (&self.uri, endpoints) {
            (Some(_), Some(_)) => {
                Err(must(n::URI, msg!("cannot be used with ", n::MULTI_TARGET_ENDPOINTS)))
            }
            (Some(u), None) => {
                if self.multi_target_path.is_some() || self.multi_target_use_https == Some(true) {
                    return Err(must(
                        n::MULTI_TARGET_PATH,
                        msg!(
                            "and ",
                            n::MULTI_TARGET_USE_HTTPS,
                            " need ",
                            n::MULTI_TARGET_ENDPOINTS,
                            ", not a ",
                            n::URI
                        ),
                    ));
                }
                Url::parse(u).map(TargetSpec::Uri).map_err(|e| SpecError::invalid(n::URI, e))
            }
            (None, None) => Err(must(
                n::URI,
                msg!(
                    "is missing: a run needs a target (",
                    n::URI,
                    ", or ",
                    n::MULTI_TARGET_ENDPOINTS,
                    ")"
                ),
            )),
            (None, Some(endpoints)) => {
                let path = self.multi_target_path.clone().unwrap_or_else(|| "/".into());
                if !path.starts_with('/') {
                    return Err(must(
                        n::MULTI_TARGET_PATH,
                        format!("must start with '/', got {path:?}"),
                    ));
                }
                for ep in endpoints {
                    let port_ok = ep.rsplit_once(':').is_some_and(|(h, p)| {
                        !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
                    });
                    let url = format!("http://{ep}{path}");
                    if !port_ok || ep.contains(['/', '?', '#', '@']) || Url::parse(&url).is_err() {
                        return Err(must(
                            n::MULTI_TARGET_ENDPOINTS,
                            format!("must each be HOST:PORT (IPv6 as [::1]:PORT), got {ep:?}"),
                        ));
                    }
                }
                Ok(TargetSpec::Multi {
                    endpoints: endpoints.clone(),
                    path,
                    https: self.multi_target_use_https.unwrap_or(false),
                })
            }
        }
    }

    fn rate(&self) -> Result<RateSpec, SpecError> {
        let bad_rps = |shown: String| {
            must(
                n::REQUESTS_PER_SECOND,
                format!("must be a number greater than 0 or 'max', got {shown}"),
            )
        };
        if let Some(ramp_time) = self.rate_limiter {
            return self.linear_ramp(ramp_time);
        }
        match (&self.stages, self.rps) {
            (Some(_), Some(_)) => {
                Err(must(n::STAGES, msg!("cannot be used with ", n::REQUESTS_PER_SECOND)))
            }
            (Some(_), None) if self.ramp.is_some() => {
                Err(must(n::STAGES, msg!("cannot be used with ", n::RAMP_DURATION)))
            }
            (Some(s), None) => {
                RatePlan::check_stages(s).map_err(|e| SpecError::invalid(n::STAGES, e))?;
                Ok(RateSpec::Stages(s.clone()))
            }
            (None, Some(Rps::Max)) => {
                if self.ramp.is_some() {
                    return Err(must(
                        n::RAMP_DURATION,
                        msg!("needs a numeric ", n::REQUESTS_PER_SECOND, " to ramp to"),
                    ));
                }
                Ok(RateSpec::Max)
            }
            (None, Some(Rps::PerSecond(r))) => {
                let rate = Rate::try_new(r).ok_or_else(|| bad_rps(r.to_string()))?;
                Ok(RateSpec::Rps { rate, ramp: self.ramp })
            }
            (None, None) => Ok(RateSpec::Rps {
                rate: Rate::try_new(DEFAULT_RPS).ok_or_else(|| bad_rps(DEFAULT_RPS.to_string()))?,
                ramp: self.ramp,
            }),
        }
    }

    /// Nighthawk's linear-ramping rate limiter plugin: a ramp to `requests_per_second`, which
    /// Nighthawk refuses beside bursts, jitter and (Shrike's) other ways of shaping the rate.
    fn linear_ramp(&self, ramp_time: Duration) -> Result<RateSpec, SpecError> {
        let o = n::RATE_LIMITER_PLUGIN_CONFIG;
        let conflict = [
            (self.stages.is_some(), n::STAGES),
            (self.ramp.is_some(), n::RAMP_DURATION),
            (self.burst_size.is_some_and(|b| b > 1), n::BURST_SIZE),
            (self.jitter.is_some_and(|j| !j.is_zero()), n::JITTER_UNIFORM),
        ];
        if let Some((_, other)) = conflict.iter().find(|(set, _)| *set) {
            return Err(must(o, msg!("cannot be used with ", *other)));
        }
        let per_second = match self.rps {
            None => DEFAULT_RPS,
            Some(Rps::PerSecond(r)) => r,
            Some(Rps::Max) => {
                return Err(must(
                    o,
                    msg!("needs a numeric ", n::REQUESTS_PER_SECOND, " to ramp to"),
                ))
            }
        };
        let rate = Rate::try_new(per_second).ok_or_else(|| {
            must(
                n::REQUESTS_PER_SECOND,
                format!("must be a number greater than 0 or 'max', got {per_second}"),
            )
        })?;
        Ok(RateSpec::LinearRamp { rate, ramp_time })
    }

    /// The run's length: stages last their sum; `no_duration` runs until stopped.
    fn duration(&self, rate: &RateSpec) -> Result<Option<Duration>, SpecError> {
        let no_duration = self.no_duration.unwrap_or(false);
        match (rate, no_duration, self.duration) {
            (RateSpec::Stages(s), false, d) => {
                let total = RatePlan::stages_duration(s);
                if d.is_some_and(|d| d != total) {
                    return Err(must(
                        n::DURATION,
                        msg!(
                            "cannot be used with ",
                            n::STAGES,
                            " (the run lasts the sum of the stages)"
                        ),
                    ));
                }
                Ok(Some(total))
            }
            (RateSpec::Stages(_), true, _) => {
                Err(must(n::NO_DURATION, msg!("cannot be used with ", n::STAGES)))
            }
            (_, true, Some(_)) => {
                Err(must(n::DURATION, msg!("cannot be used with ", n::NO_DURATION)))
            }
            (_, true, None) => Ok(None),
            (_, false, d) => {
                let d = d.unwrap_or(DEFAULT_DURATION);
                if d.is_zero() {
                    return Err(must(
                        n::DURATION,
                        msg!(
                            "must be greater than 0 (use ",
                            n::NO_DURATION,
                            " to run until stopped)"
                        ),
                    ));
                }
                Ok(Some(d))
            }
        }
    }

    /// The stream limits and QUIC windows: Nighthawk's `http3_protocol_options` may set HTTP/3's
    /// stream limit itself (exclusive with `max_concurrent_streams`, as in Nighthawk), and its
    /// deprecated `experimental_h2_use_multiple_connections` means one stream per connection.
    fn streams(&self) -> Result<(StreamLimits, Http3Options), SpecError> {
        let given_streams = self.max_concurrent_streams.is_some();
        let mut streams = StreamLimits {
            max_concurrent_streams: nonzero_u32(
                n::MAX_CONCURRENT_STREAMS,
                self.max_concurrent_streams.unwrap_or(DEFAULT_MAX_CONCURRENT_STREAMS),
            )?,
            max_active_requests: nonzero_u32(
                n::MAX_ACTIVE_REQUESTS,
                self.max_active_requests.unwrap_or(DEFAULT_MAX_ACTIVE_REQUESTS),
            )?,
        };
        let (h3_streams, http3) = self.http3.unwrap_or_default();
        if let Some(s) = h3_streams {
            if given_streams && s != streams.max_concurrent_streams {
                return Err(must(
                    n::HTTP3_PROTOCOL_OPTIONS,
                    msg!(
                        "cannot set max_concurrent_streams when ",
                        n::MAX_CONCURRENT_STREAMS,
                        " is given too"
                    ),
                ));
            }
            streams.max_concurrent_streams = s;
        }
        if self.h2_multiple_connections == Some(true) {
            if given_streams && streams.max_concurrent_streams != NonZeroU32::MIN {
                return Err(must(
                    n::H2_MULTIPLE_CONNECTIONS,
                    msg!(
                        "means ",
                        n::MAX_CONCURRENT_STREAMS,
                        " 1, which contradicts the ",
                        n::MAX_CONCURRENT_STREAMS,
                        " given"
                    ),
                ));
            }
            streams.max_concurrent_streams = NonZeroU32::MIN;
        }
        Ok((streams, http3))
    }

    /// Shrike's TLS options, with Envoy's transport socket over them: a setting given both
    /// ways is refused rather than one silently winning.
    fn tls(&self) -> Result<TlsOptions, SpecError> {
        let mut opts = TlsOptions {
            ca_file: self.tls_ca.clone(),
            insecure: self.tls_insecure.unwrap_or(false),
            sni: self.tls_sni.clone(),
            min_version: self.tls_min_version,
            max_version: self.tls_max_version,
            cipher_suites: self.tls_cipher_suites.clone().unwrap_or_default(),
            no_session_resumption: !self.tls_session_resumption.unwrap_or(true),
        };
        if let (Some(lo), Some(hi)) = (opts.min_version, opts.max_version) {
            if lo > hi {
                return Err(must(
                    n::TLS_MIN_VERSION,
                    msg!(
                        format!("({}) must not be above ", lo.name()),
                        n::TLS_MAX_VERSION,
                        format!(" ({})", hi.name())
                    ),
                ));
            }
        }
        let Some((opt, patch)) = &self.tls_envoy else { return Ok(opts) };
        let clash = |what: &str| {
            must(*opt, msg!(format!("sets {what}, which the "), n::TLS, " options set too"))
        };
        if let Some(v) = &patch.sni {
            if opts.sni.is_some() {
                return Err(clash("sni"));
            }
            opts.sni = Some(v.clone());
        }
        if let Some(v) = patch.min_version {
            if opts.min_version.is_some() {
                return Err(clash("the minimum TLS version"));
            }
            opts.min_version = Some(v);
        }
        if let Some(v) = patch.max_version {
            if opts.max_version.is_some() {
                return Err(clash("the maximum TLS version"));
            }
            opts.max_version = Some(v);
        }
        if let Some(v) = &patch.cipher_suites {
            if !opts.cipher_suites.is_empty() {
                return Err(clash("cipher suites"));
            }
            opts.cipher_suites = v.clone();
        }
        if let Some(v) = &patch.ca_file {
            if opts.ca_file.is_some() {
                return Err(clash("a trusted CA"));
            }
            opts.ca_file = Some(v.clone());
        }
        if let Some(v) = patch.no_session_resumption {
            opts.no_session_resumption |= v;
        }
        if let (Some(lo), Some(hi)) = (opts.min_version, opts.max_version) {
            if lo > hi {
                return Err(must(*opt, "sets a minimum TLS version above the maximum"));
            }
        }
        Ok(opts)
    }

    /// `trace` (Nighthawk's zipkin URI, `""` for none) and Shrike's `trace_sample_rate`.
    fn trace(&self) -> Result<Option<TraceSpec>, SpecError> {
        if let Some(r) = self.trace_sample_rate {
            if !(r > 0.0 && r <= 1.0) {
                return Err(must(n::TRACE_SAMPLE_RATE, format!("must be in (0, 1], got {r}")));
            }
        }
        match self.trace.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None if self.trace_sample_rate.is_some() => {
                Err(must(n::TRACE_SAMPLE_RATE, msg!("needs ", n::TRACE, " (a zipkin:// URI)")))
            }
            None => Ok(None),
            Some(t) => {
                crate::nighthawk::trace(t, self.trace_sample_rate.unwrap_or(1.0), n::TRACE.name)
                    .map(Some)
            }
        }
    }

    fn requests(&self) -> Result<RequestsSpec, SpecError> {
        let method = match self.method.as_deref().map(str::trim) {
            None => "GET".to_string(),
            Some(m) if !m.is_empty() && m.bytes().all(is_token_byte) => m.to_ascii_uppercase(),
            Some(m) => {
                return Err(must(
                    n::REQUEST_METHOD,
                    format!("must be an HTTP token such as GET or POST, got {m:?}"),
                ))
            }
        };
        let latency_header = match self.latency_header.as_deref().map(str::trim) {
            // Nighthawk's default is "": no header.
            None | Some("") => None,
            Some(h)
                if h.bytes()
                    .all(|b| b.is_ascii_graphic() && !b":()<>@,;\\\"/[]?={}".contains(&b)) =>
            {
                Some(h.to_ascii_lowercase())
            }
            Some(h) => {
                return Err(must(n::LATENCY_HEADER, format!("must be an HTTP token, got {h:?}")))
            }
        };
        Ok(RequestsSpec {
            method,
            headers: self.headers.clone().unwrap_or_default(),
            body_size: u32_at_least(n::REQUEST_BODY_SIZE, self.body_size.unwrap_or(0), 0)?,
            body_file: self.body_file.clone(),
            json_body: self.json_body.clone().filter(|s| !s.is_empty()),
            request_file: self.request_file.clone(),
            plugin_config: self.plugin_config.clone(),
            remote_source: self.request_source.clone(),
            latency_header,
        })
    }

    /// The effective predicates (the defaults unless turned off, each replaced by the user's
    /// on the same counter, in place, so a spec reads back in the order it was written), and
    /// the user's own. A user predicate equal to a default adds nothing while the defaults are
    /// on: it is not kept as the user's, so turning the defaults off later removes it too.
    fn predicates(&self) -> (Vec<Predicate>, Vec<Predicate>) {
        let no_default = self.no_default_failure_predicates.unwrap_or(false);
        let defaults = if no_default { Vec::new() } else { Predicate::default_failures() };
        let mut effective = defaults.clone();
        let mut user = Vec::new();
        let given = self.failure_predicates.iter().chain(&self.termination_predicates).flatten();
        for p in given {
            match effective.iter_mut().find(|q| q.counter == p.counter && q.kind == p.kind) {
                Some(q) => *q = *p,
                None => effective.push(*p),
            }
            user.retain(|q: &Predicate| !(q.counter == p.counter && q.kind == p.kind));
            if !defaults.contains(p) {
                user.push(*p);
            }
        }
        (effective, user)
    }

    fn telemetry(&self) -> Result<TelemetrySpec, SpecError> {
        let mut t =
            TelemetrySpec { stats_interval: self.stats_interval, ..TelemetrySpec::default() };
        if t.stats_interval.is_some_and(|d| d < MIN_STATS_INTERVAL) {
            return Err(must(
                n::STATS_INTERVAL,
                "must be at least 100ms (each interval holds full histograms)",
            ));
        }
        t.metrics_listen = self.metrics_listen.clone();
        t.statsd = self.statsd.clone().unwrap_or_default();
        t.stats_sinks = self.stats_sinks.clone().unwrap_or_default();
        let flush = match (self.stats_flush_interval, self.stats_flush_interval_duration) {
            (Some(_), Some(_)) => {
                return Err(must(
                    n::STATS_FLUSH_INTERVAL,
                    msg!("cannot be used with ", n::STATS_FLUSH_INTERVAL_DURATION),
                ))
            }
            (a, b) => a.or(b),
        };
        t.stats_flush_interval = flush.unwrap_or(t.stats_flush_interval);
        if t.stats_flush_interval.is_zero() {
            return Err(must(n::STATS_FLUSH_INTERVAL, "must be greater than 0"));
        }
        t.no_progress = self.no_progress.unwrap_or(false);
        Ok(t)
    }

    /// Every option of `spec` as given: resolving it gives `spec` back.
    pub fn of(spec: &RunSpec) -> Given {
        let (uri, endpoints, multi_target_path, multi_target_use_https) = match &spec.target {
            TargetSpec::Uri(u) => (Some(u.to_string()), None, None, None),
            TargetSpec::Multi { endpoints, path, https } => {
                (None, Some(endpoints.clone()), Some(path.clone()), Some(*https))
            }
        };
        let (rps, ramp, stages) = match &spec.rate {
            RateSpec::Rps { rate, ramp } => (Some(Rps::PerSecond(rate.per_second())), *ramp, None),
            RateSpec::LinearRamp { rate, .. } => {
                (Some(Rps::PerSecond(rate.per_second())), None, None)
            }
            RateSpec::Max => (Some(Rps::Max), None, None),
            RateSpec::Stages(s) => (None, None, Some(s.clone())),
        };
        let rate_limiter = match &spec.rate {
            RateSpec::LinearRamp { ramp_time, .. } => Some(*ramp_time),
            _ => None,
        };
        let kind = |k: PredicateKind| -> Vec<Predicate> {
            spec.user_predicates.iter().filter(|p| p.kind == k).copied().collect()
        };
        let r = &spec.requests;
        let t = &spec.telemetry;
        Given {
            uri,
            endpoints,
            multi_target_path,
            multi_target_use_https,
            built_in_server: Some(spec.built_in_server),
            protocol: Some(spec.protocol),
            h2: None,
            concurrency: Some(spec.concurrency),
            connections: Some(u64::from(spec.connections.get())),
            rps,
            ramp,
            tunnel: crate::tunnel::GivenTunnel::of(spec.tunnel.as_ref()),
            rate_limiter,
            stages,
            duration: spec.duration,
            no_duration: Some(spec.duration.is_none()),
            timeout: Some(spec.timeout),
            idle: Some(spec.idle),
            io_backend: Some(spec.io_backend),
            read_coalesce: spec.read_coalesce,
            max_lateness: spec.max_lateness,
            burst_size: Some(u64::from(spec.burst_size)),
            jitter: Some(spec.jitter),
            max_pending_requests: Some(u64::from(spec.max_pending_requests)),
            max_requests_per_connection: Some(spec.max_requests_per_connection.get()),
            total_requests: spec.total_requests.map(NonZeroU64::get),
            open_loop: Some(spec.open_loop),
            prefetch_connections: Some(spec.prefetch_connections),
            retry_unanswered: Some(spec.retry_unanswered),
            simple_warmup: Some(spec.simple_warmup),
            start_at: spec.start_at,
            shard: spec.shard,
            execution_id: spec.execution_id.clone(),
            bind_address: spec.bind_address,
            max_concurrent_streams: Some(u64::from(spec.streams.max_concurrent_streams.get())),
            max_active_requests: Some(u64::from(spec.streams.max_active_requests.get())),
            http3: (spec.http3 != Http3Options::default()).then_some((None, spec.http3)),
            h2_multiple_connections: None,
            h1_reuse: Some(spec.h1_reuse),
            address_family: Some(spec.address_family),
            tls_ca: spec.tls.ca_file.clone(),
            tls_insecure: Some(spec.tls.insecure),
            tls_sni: spec.tls.sni.clone(),
            tls_min_version: spec.tls.min_version,
            tls_max_version: spec.tls.max_version,
            tls_cipher_suites: Some(spec.tls.cipher_suites.clone()),
            tls_session_resumption: Some(!spec.tls.no_session_resumption),
            tls_envoy: None,
            trace: spec.trace.as_ref().map(|t| t.uri.clone()),
            trace_sample_rate: spec.trace.as_ref().map(|t| t.sample_rate),
            method: Some(r.method.clone()),
            headers: Some(r.headers.clone()),
            body_size: Some(u64::from(r.body_size)),
            body_file: r.body_file.clone(),
            json_body: r.json_body.clone(),
            request_file: r.request_file.clone(),
            plugin_config: r.plugin_config.clone(),
            request_source: r.remote_source.clone(),
            latency_header: r.latency_header.clone(),
            failure_predicates: Some(kind(PredicateKind::Failure)),
            termination_predicates: Some(kind(PredicateKind::Termination)),
            no_default_failure_predicates: Some(spec.no_default_failure_predicates),
            labels: Some(spec.labels.clone()),
            output_format: Some(spec.output_format),
            verbosity: Some(spec.verbosity),
            stats_interval: t.stats_interval,
            metrics_listen: t.metrics_listen.clone(),
            statsd: Some(t.statsd.clone()),
            stats_sinks: Some(t.stats_sinks.clone()),
            stats_flush_interval: Some(t.stats_flush_interval),
            stats_flush_interval_duration: None,
            no_progress: Some(t.no_progress),
        }
    }
}

/// A run id as given: trimmed, 1 to 128 printable characters without spaces (it names files,
/// labels and log lines); empty is none.
fn execution_id(id: Option<&str>) -> Result<Option<String>, SpecError> {
    let Some(id) = id.map(str::trim).filter(|s| !s.is_empty()) else { return Ok(None) };
    if id.len() > 128 || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SpecError::must(
            n::EXECUTION_ID,
            format!("must be 1-128 printable ASCII characters without spaces, got {id:?}"),
        ));
    }
    Ok(Some(id.to_string()))
}
