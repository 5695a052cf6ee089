//! Typed, validated changes to a run spec: `spec.edit().rate(200.0).connections(8).build()?`.
//!
//! An edit starts from a spec's own options ([`RunSpec::edit`]), or from none at all
//! ([`SpecEdit::new`]: every default) or a JSON object of options ([`SpecEdit::from_json`]), and
//! each call replaces what it names, as the command line's flags replace a spec file's values.
//! A call that makes other options meaningless clears them with it: a rate replaces stages,
//! stages replace a rate, a ramp and the duration, a URL replaces multi-target endpoints. What a
//! call cannot check alone (a value that needs others) is checked by [`SpecEdit::build`], which
//! resolves the whole through the same rules as the JSON reader; errors name the option, and
//! [`SpecEdit::touched`] tells a front end which options the edit itself set.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::error::SpecError;
use crate::format::OutputFormat;
use crate::given::{Given, Rps};
use crate::names::{self as n, Opt};
use crate::plan::Stage;
use crate::predicate::Predicate;
use crate::shard::Shard;
use crate::spec::RunSpec;
use crate::types::*;

/// Changes to a run spec, made of typed values, validated by [`SpecEdit::build`].
#[derive(Clone, Debug)]
#[must_use = "an edit does nothing until built"]
pub struct SpecEdit {
    pub(crate) given: Given,
    /// The first option a call could not take (a malformed Nighthawk JSON value, say).
    error: Option<SpecError>,
    touched: Vec<Opt>,
}

impl Default for SpecEdit {
    fn default() -> Self {
        SpecEdit::new()
    }
}

impl SpecEdit {
    /// Nothing given yet: every option at its default, and no target.
    pub fn new() -> SpecEdit {
        SpecEdit { given: Given::default(), error: None, touched: Vec::new() }
    }

    pub(crate) fn from_spec(spec: &RunSpec) -> SpecEdit {
        SpecEdit { given: Given::of(spec), error: None, touched: Vec::new() }
    }

    pub(crate) fn from_given(given: Given) -> SpecEdit {
        SpecEdit { given, error: None, touched: Vec::new() }
    }

    /// The options of a JSON object (a spec file, a stored result's `options`), not yet
    /// resolved: further calls change them, and [`SpecEdit::build`] checks the whole.
    pub fn from_json(v: &Value) -> Result<SpecEdit, SpecError> {
        crate::json::read_given(v).map(SpecEdit::from_given)
    }

    /// The spec, every rule checked.
    pub fn build(self) -> Result<RunSpec, SpecError> {
        match self.error {
            Some(e) => Err(e),
            None => self.given.resolve(),
        }
    }

    /// The options this edit's calls set (not those it started from), in order.
    pub fn touched(&self) -> &[Opt] {
        &self.touched
    }

    fn set(mut self, opt: Opt, f: impl FnOnce(&mut Given)) -> Self {
        f(&mut self.given);
        if !self.touched.contains(&opt) {
            self.touched.push(opt);
        }
        self
    }

    /// Sets what `parse` makes of a value, or keeps its error for [`SpecEdit::build`].
    fn parse<T>(
        self,
        opt: Opt,
        parse: impl FnOnce() -> Result<T, SpecError>,
        f: impl FnOnce(&mut Given, T),
    ) -> Self {
        match parse() {
            Ok(v) => self.set(opt, |g| f(g, v)),
            Err(e) => {
                let mut s = self.set(opt, |_| {});
                s.error.get_or_insert(e);
                s
            }
        }
    }

    // The target.

    /// One URL; replaces multi-target endpoints and the built-in server.
    pub fn url(self, url: &str) -> Self {
        self.set(n::URI, |g| {
            g.uri = Some(url.to_string());
            g.endpoints = None;
            g.multi_target_path = None;
            g.multi_target_use_https = None;
            g.built_in_server = None;
        })
    }

    /// The built-in test server the command line started, at `url`, for a spec that names no
    /// target (or a built-in server's gone port). Multi-target options given without endpoints
    /// stay, to be refused by name.
    pub fn built_in_server(self, url: &str) -> Self {
        self.set(n::URI, |g| {
            g.uri = Some(url.to_string());
            g.endpoints = None;
        })
        .set(n::BUILT_IN_SERVER, |g| g.built_in_server = Some(true))
    }

    /// Whether the spec's target is the built-in test server (a spec that recorded a run
    /// against it names a port that is gone).
    pub fn targets_built_in_server(&self) -> bool {
        self.given.built_in_server == Some(true)
    }

    /// Whether any target is given.
    pub fn has_target(&self) -> bool {
        self.given.uri.is_some() || self.given.endpoints.as_ref().is_some_and(|e| !e.is_empty())
    }

    /// Nighthawk's multi-target mode: `HOST:PORT` endpoints requests rotate over; replaces the
    /// URL.
    pub fn multi_target_endpoints(self, endpoints: Vec<String>) -> Self {
        self.set(n::MULTI_TARGET_ENDPOINTS, |g| {
            g.endpoints = Some(endpoints);
            g.uri = None;
            g.built_in_server = None;
        })
    }

    pub fn multi_target_path(self, path: &str) -> Self {
        self.set(n::MULTI_TARGET_PATH, |g| g.multi_target_path = Some(path.to_string()))
    }

    pub fn multi_target_use_https(self, https: bool) -> Self {
        self.set(n::MULTI_TARGET_USE_HTTPS, |g| g.multi_target_use_https = Some(https))
    }

    // Workers, connections and how long.

    pub fn protocol(self, p: Protocol) -> Self {
        self.set(n::PROTOCOL, |g| {
            g.protocol = Some(p);
            g.h2 = None;
        })
    }

    pub fn concurrency(self, c: Concurrency) -> Self {
        self.set(n::CONCURRENCY, |g| g.concurrency = Some(c))
    }

    /// Connections per worker (at least 1).
    pub fn connections(self, n: u32) -> Self {
        self.set(n::CONNECTIONS, |g| g.connections = Some(u64::from(n)))
    }

    /// Run this long (above 0); a run with stages lasts their sum instead.
    pub fn duration(self, d: Duration) -> Self {
        self.set(n::DURATION, |g| {
            g.duration = Some(d);
            g.no_duration = Some(false);
        })
    }

    /// Run until stopped (a predicate, a signal, or `total_requests` answered).
    pub fn no_duration(self) -> Self {
        self.set(n::NO_DURATION, |g| {
            g.duration = None;
            g.no_duration = Some(true);
        })
    }

    /// Send exactly this many requests in all (`None`: no count).
    pub fn total_requests(self, n: Option<u64>) -> Self {
        self.set(n::TOTAL_REQUESTS, |g| g.total_requests = n)
    }

    pub fn timeout(self, d: Duration) -> Self {
        self.set(n::TIMEOUT, |g| g.timeout = Some(d))
    }

    // The rate.

    /// Requests per second per worker (above 0); replaces stages, keeps a ramp.
    pub fn rate(self, per_second: f64) -> Self {
        self.set(n::REQUESTS_PER_SECOND, |g| {
            g.rps = Some(Rps::PerSecond(per_second));
            g.stages = None;
        })
    }

    /// No schedule (`requests_per_second: max`): an unpaced closed loop. Replaces stages.
    pub fn unpaced(self) -> Self {
        self.set(n::REQUESTS_PER_SECOND, |g| {
            g.rps = Some(Rps::Max);
            g.stages = None;
        })
    }

    /// Reach the rate by a linear ramp over `d`. `None`: no ramp, neither Shrike's nor the
    /// Nighthawk plugin's (a capacity trial runs at its rate from the start).
    pub fn ramp(self, d: Option<Duration>) -> Self {
        self.set(n::RAMP_DURATION, |g| {
            g.ramp = d;
            if d.is_none() {
                g.rate_limiter = None;
            }
        })
    }

    /// k6-style stages; the run lasts their sum. Replaces the rate, a ramp and the duration.
    pub fn stages(self, stages: Vec<Stage>) -> Self {
        self.set(n::STAGES, |g| {
            g.stages = Some(stages);
            g.rps = None;
            g.ramp = None;
            g.duration = None;
            g.no_duration = None;
        })
    }

    /// Nighthawk's `--rate-limiter-plugin-config` (JSON): its linear-ramping plugin, a ramp
    /// from 0 to the rate over the config's `ramp_time`. The spec refuses it beside a ramp,
    /// stages, bursts or jitter.
    pub fn rate_limiter_plugin_config(self, json: &str) -> Self {
        let o = n::RATE_LIMITER_PLUGIN_CONFIG;
        self.parse(
            o,
            || crate::nighthawk::rate_limiter_plugin(Value::String(json.into()), o.name),
            |g, ramp_time| g.rate_limiter = Some(ramp_time),
        )
    }

    pub fn open_loop(self, on: bool) -> Self {
        self.set(n::OPEN_LOOP, |g| g.open_loop = Some(on))
    }

    pub fn burst_size(self, n: u32) -> Self {
        self.set(n::BURST_SIZE, |g| g.burst_size = Some(u64::from(n)))
    }

    pub fn jitter_uniform(self, d: Duration) -> Self {
        self.set(n::JITTER_UNIFORM, |g| g.jitter = Some(d))
    }

    pub fn idle_strategy(self, s: IdleStrategy) -> Self {
        self.set(n::IDLE_STRATEGY, |g| g.idle = Some(s))
    }

    pub fn io_backend(self, b: IoBackend) -> Self {
        self.set(n::IO_BACKEND, |g| g.io_backend = Some(b))
    }

    /// How long an idle worker waits before reading (`None`: it does not wait).
    pub fn read_coalesce(self, d: Option<Duration>) -> Self {
        self.set(n::READ_COALESCE, |g| g.read_coalesce = d)
    }

    /// A lateness budget (`None`: the idle strategy's precision).
    pub fn max_lateness(self, d: Option<Duration>) -> Self {
        self.set(n::MAX_LATENESS, |g| g.max_lateness = d)
    }

    pub fn simple_warmup(self, on: bool) -> Self {
        self.set(n::SIMPLE_WARMUP, |g| g.simple_warmup = Some(on))
    }

    pub fn start_at(self, t: Option<SystemTime>) -> Self {
        self.set(n::START_AT, |g| g.start_at = t)
    }

    /// Send one share of the run (`None`: all of it).
    pub fn shard(self, s: Option<Shard>) -> Self {
        self.set(n::SHARD, |g| g.shard = s)
    }

    /// The run's id (`--execution-id`; `None`: made when the result is).
    pub fn execution_id(self, id: Option<&str>) -> Self {
        self.set(n::EXECUTION_ID, |g| g.execution_id = id.map(str::to_string))
    }

    // Pools.

    pub fn max_pending_requests(self, n: u32) -> Self {
        self.set(n::MAX_PENDING_REQUESTS, |g| g.max_pending_requests = Some(u64::from(n)))
    }

    pub fn max_requests_per_connection(self, n: u64) -> Self {
        self.set(n::MAX_REQUESTS_PER_CONNECTION, |g| g.max_requests_per_connection = Some(n))
    }

    pub fn prefetch_connections(self, on: bool) -> Self {
        self.set(n::PREFETCH_CONNECTIONS, |g| g.prefetch_connections = Some(on))
    }
    pub fn retry_unanswered(self, on: bool) -> Self {
        self.set(n::RETRY_UNANSWERED, |g| g.retry_unanswered = Some(on))
    }

    pub fn max_concurrent_streams(self, n: u32) -> Self {
        self.set(n::MAX_CONCURRENT_STREAMS, |g| g.max_concurrent_streams = Some(u64::from(n)))
    }

    pub fn max_active_requests(self, n: u32) -> Self {
        self.set(n::MAX_ACTIVE_REQUESTS, |g| g.max_active_requests = Some(u64::from(n)))
    }

    /// Nighthawk's Envoy `Http3ProtocolOptions`, as JSON or its compact form.
    pub fn http3_protocol_options(self, json: &str) -> Self {
        let o = n::HTTP3_PROTOCOL_OPTIONS;
        self.parse(
            o,
            || crate::nighthawk::http3_protocol_options(Value::String(json.into()), o.name),
            |g, v| g.http3 = Some(v),
        )
    }

    /// Nighthawk's deprecated switch: one stream per HTTP/2 connection.
    pub fn h2_use_multiple_connections(self, on: bool) -> Self {
        self.set(n::H2_MULTIPLE_CONNECTIONS, |g| g.h2_multiple_connections = Some(on))
    }

    pub fn h1_reuse(self, r: H1Reuse) -> Self {
        self.set(n::H1_REUSE, |g| g.h1_reuse = Some(r))
    }

    pub fn address_family(self, f: AddressFamily) -> Self {
        self.set(n::ADDRESS_FAMILY, |g| g.address_family = Some(f))
    }

    /// Source address of outgoing connections (`None`: the kernel's choice).
    pub fn bind_address(self, ip: Option<IpAddr>) -> Self {
        self.set(n::BIND_ADDRESS, |g| g.bind_address = ip)
    }

    /// Nighthawk's `BindConfig` JSON; its `source_address.address` is the bind address.
    pub fn upstream_bind_config(self, json: &str) -> Self {
        let o = n::UPSTREAM_BIND_CONFIG;
        self.parse(
            o,
            || crate::json::bind_config(Value::String(json.into()), o.name),
            |g, ip| g.bind_address = Some(ip),
        )
    }

    // TLS.

    pub fn tls_ca(self, file: PathBuf) -> Self {
        self.set(n::TLS_CA, |g| g.tls_ca = Some(file))
    }

    pub fn tls_insecure(self, on: bool) -> Self {
        self.set(n::TLS_INSECURE, |g| g.tls_insecure = Some(on))
    }

    pub fn tls_sni(self, name: &str) -> Self {
        self.set(n::TLS_SNI, |g| g.tls_sni = Some(name.to_string()))
    }

    pub fn tls_min_version(self, v: TlsVersion) -> Self {
        self.set(n::TLS_MIN_VERSION, |g| g.tls_min_version = Some(v))
    }

    pub fn tls_max_version(self, v: TlsVersion) -> Self {
        self.set(n::TLS_MAX_VERSION, |g| g.tls_max_version = Some(v))
    }

    /// rustls suite names; empty: the defaults.
    pub fn tls_cipher_suites(self, suites: Vec<String>) -> Self {
        self.set(n::TLS_CIPHER_SUITES, |g| g.tls_cipher_suites = Some(suites))
    }

    pub fn tls_session_resumption(self, on: bool) -> Self {
        self.set(n::TLS_SESSION_RESUMPTION, |g| g.tls_session_resumption = Some(on))
    }

    /// TLS as Envoy's transport socket (JSON or Nighthawk's compact form).
    pub fn transport_socket(self, json: &str) -> Self {
        let o = n::TRANSPORT_SOCKET;
        self.parse(
            o,
            || crate::nighthawk::transport_socket(Value::String(json.into()), o.name),
            |g, p| g.tls_envoy = Some((o, p)),
        )
    }

    /// Nighthawk's deprecated `UpstreamTlsContext` by itself.
    pub fn tls_context(self, json: &str) -> Self {
        let o = n::TLS_CONTEXT;
        self.parse(
            o,
            || crate::nighthawk::tls_context(Value::String(json.into()), o.name),
            |g, p| g.tls_envoy = Some((o, p)),
        )
    }

    // Tunnels.

    /// The proxy every connection is tunnelled through: `HOST:PORT`, `http://HOST:PORT` or
    /// `https://HOST:PORT` (TLS to the proxy).
    pub fn tunnel_uri(self, uri: &str) -> Self {
        self.set(n::TUNNEL_URI, |g| g.tunnel.uri = Some(uri.to_string()))
    }

    pub fn tunnel_protocol(self, p: Protocol) -> Self {
        self.set(n::TUNNEL_PROTOCOL, |g| g.tunnel.protocol = Some(p))
    }

    /// TLS to the proxy, as an Envoy `UpstreamTlsContext` (JSON or Nighthawk's compact form).
    pub fn tunnel_tls_context(self, json: &str) -> Self {
        let o = n::TUNNEL_TLS_CONTEXT;
        self.parse(
            o,
            || {
                let v = crate::nighthawk::relaxed(Value::String(json.into()), o.name)?;
                let patch = crate::nighthawk::tls_context(v.clone(), o.name)?;
                Ok((v, patch))
            },
            |g, c| g.tunnel.tls_context = Some(c),
        )
    }

    /// Extra trust roots (PEM) for the proxy's certificate.
    pub fn tunnel_ca(self, file: PathBuf) -> Self {
        self.set(n::TUNNEL_CA, |g| g.tunnel.ca = Some(file))
    }

    // What is sent.

    pub fn request_method(self, m: &str) -> Self {
        self.set(n::REQUEST_METHOD, |g| g.method = Some(m.to_string()))
    }

    /// `name: value` headers, as users type them.
    pub fn request_headers(self, raw: &[String]) -> Self {
        let o = n::REQUEST_HEADERS;
        let parse = || {
            raw.iter()
                .map(|h| {
                    crate::given::parse_header(h).ok_or_else(|| {
                        SpecError::must(
                            o,
                            format!(
                                "must each be 'name: value' with a token name and no line \
                                 breaks, got {h:?}"
                            ),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        self.parse(o, parse, |g, h| g.headers = Some(h))
    }

    pub fn request_body_size(self, n: u32) -> Self {
        self.set(n::REQUEST_BODY_SIZE, |g| g.body_size = Some(u64::from(n)))
    }

    pub fn request_body_file(self, file: PathBuf) -> Self {
        self.set(n::REQUEST_BODY_FILE, |g| g.body_file = Some(file))
    }

    pub fn json_body(self, json: &str) -> Self {
        self.set(n::JSON_BODY, |g| g.json_body = Some(json.to_string()))
    }

    /// A request list; replaces a request-source plugin or service.
    pub fn request_file(self, file: PathBuf) -> Self {
        self.set(n::REQUEST_FILE, |g| {
            g.request_file = Some(file);
            g.plugin_config = None;
            g.request_source = None;
        })
    }

    /// Nighthawk's request-source plugin config (JSON); replaces a request file or service.
    pub fn request_source_plugin_config(self, json: &str) -> Self {
        self.set(n::REQUEST_SOURCE_PLUGIN_CONFIG, |g| {
            g.plugin_config = Some(json.to_string());
            g.request_file = None;
            g.request_source = None;
        })
    }

    /// A request-source service, `grpc://HOST:PORT`; replaces a request file or plugin.
    pub fn request_source(self, uri: &str) -> Self {
        let o = n::REQUEST_SOURCE;
        self.parse(
            o,
            || crate::nighthawk::request_source(&Value::String(uri.into()), o.name),
            |g, a| {
                g.request_source = Some(a);
                g.request_file = None;
                g.plugin_config = None;
            },
        )
    }

    pub fn latency_response_header_name(self, name: &str) -> Self {
        self.set(n::LATENCY_HEADER, |g| g.latency_header = Some(name.to_string()))
    }

    /// Zipkin tracing to `zipkin://HOST:PORT/api/v2/spans` (`""`: none).
    pub fn trace(self, uri: &str) -> Self {
        self.set(n::TRACE, |g| g.trace = Some(uri.to_string()))
    }

    pub fn trace_sample_rate(self, fraction: f64) -> Self {
        self.set(n::TRACE_SAMPLE_RATE, |g| g.trace_sample_rate = Some(fraction))
    }

    // When a run fails, and how it reports.

    /// The user's failure predicates (each replaces a default on the same counter).
    pub fn failure_predicates(self, p: Vec<Predicate>) -> Self {
        self.set(n::FAILURE_PREDICATES, |g| g.failure_predicates = Some(p))
    }

    pub fn termination_predicates(self, p: Vec<Predicate>) -> Self {
        self.set(n::TERMINATION_PREDICATES, |g| g.termination_predicates = Some(p))
    }

    /// Without Nighthawk's default failure predicates (any 4xx, 5xx, connection failure or
    /// reset ends the run as failed).
    pub fn no_default_failure_predicates(self, on: bool) -> Self {
        self.set(n::NO_DEFAULT_FAILURE_PREDICATES, |g| g.no_default_failure_predicates = Some(on))
    }

    /// No predicates at all, the defaults included (a fleet's generators: the coordinator
    /// judges the merged counters).
    pub fn no_predicates(self) -> Self {
        self.failure_predicates(Vec::new())
            .termination_predicates(Vec::new())
            .no_default_failure_predicates(true)
    }

    pub fn labels(self, labels: Vec<String>) -> Self {
        self.set(n::LABELS, |g| g.labels = Some(labels))
    }

    pub fn output_format(self, f: OutputFormat) -> Self {
        self.set(n::OUTPUT_FORMAT, |g| g.output_format = Some(f))
    }

    pub fn verbosity(self, v: Verbosity) -> Self {
        self.set(n::VERBOSITY, |g| g.verbosity = Some(v))
    }

    // Live telemetry.

    pub fn stats_interval(self, d: Option<Duration>) -> Self {
        self.set(n::STATS_INTERVAL, |g| g.stats_interval = d)
    }

    pub fn metrics_listen(self, addr: Option<String>) -> Self {
        self.set(n::METRICS_LISTEN, |g| g.metrics_listen = addr)
    }

    pub fn statsd(self, targets: Vec<String>) -> Self {
        self.set(n::STATSD, |g| g.statsd = Some(targets))
    }

    pub fn stats_sinks(self, sinks: Vec<String>) -> Self {
        self.set(n::STATS_SINKS, |g| g.stats_sinks = Some(sinks))
    }

    pub fn stats_flush_interval(self, d: Duration) -> Self {
        self.set(n::STATS_FLUSH_INTERVAL, |g| {
            g.stats_flush_interval = Some(d);
            g.stats_flush_interval_duration = None;
        })
    }

    /// Nighthawk's spelling of [`SpecEdit::stats_flush_interval`].
    pub fn stats_flush_interval_duration(self, d: Duration) -> Self {
        self.set(n::STATS_FLUSH_INTERVAL_DURATION, |g| {
            g.stats_flush_interval_duration = Some(d);
            g.stats_flush_interval = None;
        })
    }

    pub fn no_progress(self, on: bool) -> Self {
        self.set(n::NO_PROGRESS, |g| g.no_progress = Some(on))
    }

    /// None of the run's own live telemetry (a fleet's generators: the coordinator shows the
    /// fleet's).
    pub fn no_telemetry(self) -> Self {
        self.stats_interval(None)
            .metrics_listen(None)
            .statsd(Vec::new())
            .stats_sinks(Vec::new())
            .no_progress(true)
    }
}
