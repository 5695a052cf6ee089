//! [`RunSpec`]: everything a run is, as one typed value.
//!
//! A spec is made only by resolving its options as given ([`crate::given::Given`]): read from
//! JSON ([`RunSpec::from_json`]: a spec file, a stored result's `options`, the wire) or changed
//! from another spec through typed edits ([`RunSpec::edit`]). Both end in the same field rules
//! and [`RunSpec::check`], so a `RunSpec` value is always valid. What needs I/O (resolving
//! hosts, reading request files, loading CA certificates) is checked by the engine when it
//! prepares a run.

use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::error::SpecError;
use crate::format::OutputFormat;
use crate::msg;
use crate::names::{self as n, Opt};
use crate::plan::{Rate, RatePlan, Stage};
use crate::predicate::Predicate;
use crate::shard::Shard;
use crate::types::{
    AddressFamily, Concurrency, H1Reuse, Http3Options, IdleStrategy, IoBackend, Protocol,
    StreamLimits, TlsOptions, TraceSpec, Verbosity,
};
use crate::url::{Scheme, Url};

/// Nighthawk's default for `max_requests_per_connection` (effectively unlimited).
pub const DEFAULT_MAX_REQUESTS_PER_CONNECTION: u64 = 4_294_937_295;
/// Nighthawk's default rate, per worker.
pub const DEFAULT_RPS: f64 = 5.0;
/// Interval reports finer than this would spend more on merging histograms than they show.
pub const MIN_STATS_INTERVAL: Duration = Duration::from_millis(100);

/// A scheduled start further ahead than this is surely a mistake.
const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// Several processes meant to start together: one that is late must not run out of step.
const MAX_START_LATE: Duration = Duration::from_secs(1);

/// Whether a run may start at `t`, seen at `now`: not more than a second late (processes meant
/// to start together would run out of step) and not more than a day ahead (surely a mistake).
pub fn check_start_at(t: SystemTime, now: SystemTime) -> Result<(), SpecError> {
    match t.duration_since(now) {
        Ok(ahead) if ahead > MAX_START_AHEAD => Err(SpecError::must(
            n::START_AT,
            format!(
                "is {:.0}s away; more than a day ahead is surely a mistake",
                ahead.as_secs_f64()
            ),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.duration() > MAX_START_LATE => Err(SpecError::must(
            n::START_AT,
            format!(
                "{} is in the past ({:.1}s ago)",
                shrike_stats::timestamp::format_rfc3339(t),
                e.duration().as_secs_f64()
            ),
        )),
        Err(_) => Ok(()),
    }
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    /// One URL.
    Uri(Url),
    /// Nighthawk's multi-target mode: `HOST:PORT` endpoints that requests rotate over round
    /// robin, all with one path and scheme.
    Multi { endpoints: Vec<String>, path: String, https: bool },
}

impl TargetSpec {
    /// The URL of every endpoint.
    pub fn urls(&self) -> Vec<Url> {
        match self {
            TargetSpec::Uri(u) => vec![u.clone()],
            TargetSpec::Multi { endpoints, path, https } => {
                let scheme = if *https { "https" } else { "http" };
                // Checked when the spec was built.
                endpoints
                    .iter()
                    .filter_map(|ep| Url::parse(&format!("{scheme}://{ep}{path}")).ok())
                    .collect()
            }
        }
    }
}

/// How the rate was asked for; [`RunSpec::plan`] turns it into the pacer's plan.
#[derive(Clone, Debug, PartialEq)]
pub enum RateSpec {
    /// `requests_per_second`, optionally reached by a linear ramp.
    Rps { rate: Rate, ramp: Option<Duration> },
    /// The same ramp (never zero) asked for as Nighthawk's linear-ramping rate limiter plugin
    /// (`rate_limiter_plugin_config`), and written back that way.
    LinearRamp { rate: Rate, ramp_time: Duration },
    /// `requests_per_second: "max"`: an unpaced closed loop.
    Max,
    /// k6-style stages; the run lasts their sum.
    Stages(Vec<Stage>),
}

impl RateSpec {
    /// The plan the pacer follows: a ramp is a two-stage plan (ramp, then hold).
    pub fn plan(&self) -> RatePlan {
        match self {
            RateSpec::Rps { rate, ramp: Some(d) } if !d.is_zero() => RatePlan::ramp(*rate, *d),
            RateSpec::Rps { rate, .. } => RatePlan::Constant(*rate),
            RateSpec::LinearRamp { rate, ramp_time } => RatePlan::ramp(*rate, *ramp_time),
            RateSpec::Max => RatePlan::Unpaced,
            RateSpec::Stages(s) => RatePlan::Stages(s.clone()),
        }
    }

    /// Requests per second asked for, all `workers` together: the rate (a ramp's target), or
    /// a staged plan's mean over `window`. `None` for unpaced runs.
    pub fn requested_rate(&self, workers: usize, window: Duration) -> Option<f64> {
        let per_worker = match self {
            RateSpec::Rps { rate, .. } | RateSpec::LinearRamp { rate, .. } => {
                Some(rate.per_second())
            }
            RateSpec::Max => None,
            RateSpec::Stages(s) => RatePlan::Stages(s.clone()).mean_rate(window),
        }?;
        Some(per_worker * workers as f64)
    }
}

/// What each request sends (Nighthawk's `request_options`, a request file, or its
/// request-source plugin), and what to read from responses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestsSpec {
    /// An HTTP token, upper-cased.
    pub method: String,
    /// `name: value` pairs; values may hold placeholders. With a request file, added to every
    /// entry that does not set the header itself.
    pub headers: Vec<(String, String)>,
    /// A body of this many `a`s (Nighthawk's `request_body_size`).
    pub body_size: u32,
    /// A file sent verbatim as the body.
    pub body_file: Option<PathBuf>,
    /// A JSON body (may hold placeholders).
    pub json_body: Option<String>,
    /// A request list (JSON Lines, JSON or YAML).
    pub request_file: Option<PathBuf>,
    /// Nighthawk's request-source plugin config (JSON, relaxed).
    pub plugin_config: Option<String>,
    /// A remote request source (Nighthawk's `request_source`): `HOST:PORT` of a gRPC
    /// `NighthawkRequestSourceService`, streamed by every worker.
    pub remote_source: Option<String>,
    /// Record this response header in `origin_latency_statistic`.
    pub latency_header: Option<String>,
}

/// Live telemetry: what observers watch a run (they never change it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetrySpec {
    pub stats_interval: Option<Duration>,
    pub metrics_listen: Option<String>,
    pub statsd: Vec<String>,
    pub stats_sinks: Vec<String>,
    pub stats_flush_interval: Duration,
    pub no_progress: bool,
}

impl Default for TelemetrySpec {
    fn default() -> Self {
        TelemetrySpec {
            stats_interval: None,
            metrics_listen: None,
            statsd: Vec::new(),
            stats_sinks: Vec::new(),
            stats_flush_interval: Duration::from_secs(5),
            no_progress: false,
        }
    }
}

/// Everything a run is: one typed, validated value, serialized as the result's `options`.
/// Rates and connection counts are per worker, as in Nighthawk.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub(crate) target: TargetSpec,
    /// The target is the built-in test server the CLI starts (its port changes every run).
    pub(crate) built_in_server: bool,
    pub(crate) protocol: Protocol,
    pub(crate) concurrency: Concurrency,
    pub(crate) connections: NonZeroU32,
    /// `None`: run until stopped (`no_duration`).
    pub(crate) duration: Option<Duration>,
    pub(crate) timeout: Duration,
    pub(crate) rate: RateSpec,
    pub(crate) idle: IdleStrategy,
    pub(crate) io_backend: IoBackend,
    /// `read_coalesce`: an idle worker waits this long before reading what arrived, so one
    /// wake-up reads many responses; they are timed by the kernel's receive stamps.
    pub(crate) read_coalesce: Option<Duration>,
    /// `max_lateness`: how late a release may be. A worker sleeps past a release's time by up
    /// to this much and releases everything due by then in one wake-up: fewer wake-ups, each
    /// request still timed from its own scheduled time. `None`: the idle strategy's precision.
    pub(crate) max_lateness: Option<Duration>,
    pub(crate) burst_size: u32,
    pub(crate) jitter: Duration,
    pub(crate) max_pending_requests: u32,
    pub(crate) max_requests_per_connection: NonZeroU64,
    /// Send exactly this many requests in all (`-n`), split over the workers; the run ends
    /// once they are answered (or at its duration, if it has one, whichever comes first).
    pub(crate) total_requests: Option<NonZeroU64>,
    pub(crate) open_loop: bool,
    pub(crate) prefetch_connections: bool,
    /// Send a request again, once, when its first send got no answer and may be sent again
    /// safely (an idempotent method on a reused HTTP/1.1 connection that closed under it, an
    /// HTTP/2 or HTTP/3 stream the server refused unprocessed); every resend is counted.
    pub(crate) retry_unanswered: bool,
    pub(crate) simple_warmup: bool,
    pub(crate) start_at: Option<SystemTime>,
    /// This process sends one share of the run ([`Shard`]).
    pub(crate) shard: Option<Shard>,
    /// The run's id as given ([`RunSpec::run_id`] for the one a result records).
    pub(crate) execution_id: Option<String>,
    pub(crate) bind_address: Option<IpAddr>,
    pub(crate) streams: StreamLimits,
    pub(crate) h1_reuse: H1Reuse,
    pub(crate) address_family: AddressFamily,
    pub(crate) tls: TlsOptions,
    /// Connections go through a proxy's `CONNECT` tunnels.
    pub(crate) tunnel: Option<crate::tunnel::TunnelSpec>,
    pub(crate) http3: Http3Options,
    pub(crate) trace: Option<TraceSpec>,
    pub(crate) requests: RequestsSpec,
    /// The effective predicates: the defaults (unless turned off) with the user's replacing
    /// any default on the same counter.
    pub(crate) predicates: Vec<Predicate>,
    /// The user's own predicates (what `predicates` holds beyond the defaults).
    pub(crate) user_predicates: Vec<Predicate>,
    pub(crate) no_default_failure_predicates: bool,
    pub(crate) labels: Vec<String>,
    pub(crate) output_format: OutputFormat,
    pub(crate) verbosity: Verbosity,
    pub(crate) telemetry: TelemetrySpec,
}

/// Shard `s`'s share of `n` per worker: the first `n mod N` shards take one more, and every
/// shard at least one (a worker cannot send with none).
fn share(n: NonZeroU32, s: Shard) -> NonZeroU32 {
    let (n, c) = (n.get(), s.count());
    NonZeroU32::new(n / c + u32::from(s.index() < n % c)).unwrap_or(NonZeroU32::MIN)
}

impl RunSpec {
    /// A spec for `url` with every other option at its default.
    pub fn for_url(url: &str) -> Result<RunSpec, SpecError> {
        crate::given::Given { uri: Some(url.to_string()), ..Default::default() }.resolve()
    }

    /// Typed, validated changes to this spec: `spec.edit().connections(8).duration(d).build()?`.
    pub fn edit(&self) -> crate::edit::SpecEdit {
        crate::edit::SpecEdit::from_spec(self)
    }

    /// Cross-field rules, checked after every field was read on its own.
    pub(crate) fn check(self) -> Result<RunSpec, SpecError> {
        self.check_read_coalesce()?;
        self.check_max_lateness()?;
        let urls = self.target.urls();
        if self.protocol == Protocol::Http3 {
            if let Some(u) = urls.iter().find(|u| u.scheme == Scheme::Http) {
                return Err(SpecError::must(
                    n::PROTOCOL,
                    format!("http3 needs an https:// URL (QUIC always runs TLS), got {u}"),
                ));
            }
        }
        if self.tls != TlsOptions::default() && urls.iter().all(|u| u.scheme == Scheme::Http) {
            return Err(SpecError::invalid(
                n::TLS,
                format!(
                    "TLS options need an https:// target, got {}",
                    urls.first().map(Url::to_string).unwrap_or_default()
                ),
            ));
        }
        if self.open_loop && self.rate == RateSpec::Max {
            return Err(SpecError::must(
                n::OPEN_LOOP,
                msg!(
                    "needs a rate: ",
                    n::REQUESTS_PER_SECOND,
                    " \"max\" is a closed loop (a request goes out when a connection frees up)"
                ),
            ));
        }
        let r = &self.requests;
        let single_changed =
            r.method != "GET" || r.body_size != 0 || r.body_file.is_some() || r.json_body.is_some();
        let sources = [
            (n::REQUEST_FILE, r.request_file.is_some()),
            (n::REQUEST_SOURCE_PLUGIN_CONFIG, r.plugin_config.is_some()),
            (n::REQUEST_SOURCE, r.remote_source.is_some()),
        ];
        for (name, set) in sources {
            if set && single_changed {
                return Err(SpecError::must(
                    name,
                    msg!(
                        "cannot be used with ",
                        n::REQUEST_OPTIONS,
                        "' method or body (each entry sets its own)"
                    ),
                ));
            }
        }
        let mut given = sources.iter().filter(|(_, set)| *set).map(|(o, _)| *o);
        if let (Some(a), Some(b)) = (given.next(), given.next()) {
            return Err(SpecError::must(a, msg!("cannot be used with ", b)));
        }
        if self.http3 != Http3Options::default() && self.protocol != Protocol::Http3 {
            return Err(SpecError::must(
                n::HTTP3_PROTOCOL_OPTIONS,
                msg!("needs ", n::PROTOCOL, " http3 (QUIC's windows)"),
            ));
        }
        if r.body_file.is_some() && (r.body_size != 0 || r.json_body.is_some()) {
            return Err(SpecError::must(
                n::REQUEST_BODY_FILE,
                msg!("cannot be used with ", n::REQUEST_BODY_SIZE, " or ", n::JSON_BODY),
            ));
        }
        if r.json_body.is_some() && r.body_size != 0 {
            return Err(SpecError::must(
                n::JSON_BODY,
                msg!("cannot be used with ", n::REQUEST_BODY_SIZE),
            ));
        }
        Ok(self)
    }

    /// `read_coalesce`: only where every response is timed by the kernel's receive stamp (TCP
    /// receives, on epoll or io_uring), and where waking late delays nothing but reads. A paced
    /// worker must wake at each release; an HTTP/3 stream (QUIC's own socket) is timed by the
    /// thread's clock, which the wait would make late.
    fn check_read_coalesce(&self) -> Result<(), SpecError> {
        let Some(window) = self.read_coalesce else { return Ok(()) };
        let why = if window > Duration::from_millis(1) {
            msg!("must be at most 1ms: every response waits up to this long to be read")
        } else if !matches!(self.rate, RateSpec::Max) {
            msg!(
                "needs an unpaced run (",
                n::REQUESTS_PER_SECOND,
                " max): a paced worker must wake at each release"
            )
        } else if self.protocol == Protocol::Http3 {
            msg!("works with HTTP/1.1 and HTTP/2 only: HTTP/3 responses are not timed by the kernel's receive stamps")
        } else {
            return Ok(());
        };
        Err(SpecError::must(n::READ_COALESCE, why))
    }

    /// `max_lateness`: for paced runs, replacing the precise idle strategies it would undo.
    fn check_max_lateness(&self) -> Result<(), SpecError> {
        let Some(budget) = self.max_lateness else { return Ok(()) };
        let why = if budget > Duration::from_secs(1) {
            msg!("must be at most 1s")
        } else if matches!(self.rate, RateSpec::Max) {
            msg!(
                "needs a paced run (",
                n::REQUESTS_PER_SECOND,
                " max releases at once, never late)"
            )
        } else if self.idle != IdleStrategy::Poll {
            msg!(
                "replaces ",
                n::IDLE_STRATEGY,
                ": a lateness budget is how a worker idles; give one of them"
            )
        } else {
            return Ok(());
        };
        Err(SpecError::must(n::MAX_LATENESS, why))
    }

    /// For an open-loop run whose lateness budget gathers more releases into one wake-up than
    /// a worker's connections take at once (the rest overflow: the budget would drop requests,
    /// not only delay them): how many it gathers at the peak rate, and how many they take.
    pub fn lateness_overflow(&self) -> Option<(u64, u64)> {
        let budget = self.max_lateness?;
        if !self.open_loop {
            return None;
        }
        let peak = self.plan().peak()?;
        let need = (peak * budget.as_secs_f64()).ceil() as u64 * u64::from(self.burst().get());
        let connections = u64::from(self.connections.get());
        let room = match self.protocol {
            Protocol::Http1 => connections,
            Protocol::Http2 | Protocol::Http3 => (connections
                * u64::from(self.streams.max_concurrent_streams.get()))
            .min(u64::from(self.streams.max_active_requests.get())),
        } + u64::from(self.max_pending_requests);
        (need > room).then_some((need, room))
    }

    /// Options of one protocol, given for another, refused by name rather than ignored: a
    /// stream limit means nothing to HTTP/1.1, connections opened ahead nothing to HTTP/2.
    /// `given` are the options set by the user (flags), not those a spec file or a stored
    /// result carries, which record every option, defaults included, for any protocol.
    pub fn refuse_misplaced(&self, given: &[Opt]) -> Result<(), SpecError> {
        let multiplexed = matches!(self.protocol, Protocol::Http2 | Protocol::Http3);
        let rules: [(Opt, bool, &str); 5] = [
            (n::MAX_CONCURRENT_STREAMS, multiplexed, "http2 and http3"),
            (n::MAX_ACTIVE_REQUESTS, multiplexed, "http2 and http3 (HTTP/1.1's is --connections)"),
            (n::H2_MULTIPLE_CONNECTIONS, self.protocol == Protocol::Http2, "http2"),
            (
                n::PREFETCH_CONNECTIONS,
                self.protocol == Protocol::Http1,
                "http1 (HTTP/2 and HTTP/3 open connections as streams need them)",
            ),
            (n::H1_REUSE, self.protocol == Protocol::Http1, "http1"),
        ];
        for (opt, fits, only) in rules {
            if !fits && given.contains(&opt) {
                return Err(SpecError::must(
                    opt,
                    format!("applies to {only} only, not --protocol {}", self.protocol.name()),
                ));
            }
        }
        Ok(())
    }

    pub fn target(&self) -> &TargetSpec {
        &self.target
    }
    /// Every endpoint's URL, in order.
    pub fn urls(&self) -> Vec<Url> {
        self.target.urls()
    }
    pub fn built_in_server(&self) -> bool {
        self.built_in_server
    }
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
    pub fn concurrency(&self) -> Concurrency {
        self.concurrency
    }
    /// Connections per worker. An unpaced shard (`requests_per_second: "max"`: its load is its
    /// concurrency, not a rate) takes its share, so N shards hold the run's connections.
    pub fn connections(&self) -> NonZeroU32 {
        match self.unpaced_shard() {
            Some(s) => share(self.connections, s),
            None => self.connections,
        }
    }
    /// A shard of an unpaced run.
    fn unpaced_shard(&self) -> Option<Shard> {
        self.shard.filter(|_| matches!(self.rate, RateSpec::Max))
    }
    /// `None`: the run lasts until a predicate or a signal stops it.
    pub fn duration(&self) -> Option<Duration> {
        self.duration
    }
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    pub fn rate(&self) -> &RateSpec {
        &self.rate
    }
    /// The per-worker rate over time (a shard's workers each send `1/N` of it).
    pub fn plan(&self) -> RatePlan {
        let plan = self.rate.plan();
        match self.shard {
            Some(s) => plan.scaled(1.0 / f64::from(s.count())),
            None => plan,
        }
    }
    pub fn idle(&self) -> IdleStrategy {
        self.idle
    }
    pub fn io_backend(&self) -> IoBackend {
        self.io_backend
    }
    /// How long an idle worker waits to gather responses before reading them (`None`: it
    /// reads each as it arrives).
    pub fn read_coalesce(&self) -> Option<Duration> {
        self.read_coalesce
    }
    /// How late a release may be ([`RunSpec`]'s `max_lateness`), if a budget was given.
    pub fn max_lateness(&self) -> Option<Duration> {
        self.max_lateness
    }
    /// Requests released together (1: no bursts).
    pub fn burst(&self) -> NonZeroU32 {
        NonZeroU32::new(self.burst_size.max(1)).unwrap_or(NonZeroU32::MIN)
    }
    pub fn jitter(&self) -> Duration {
        self.jitter
    }
    pub fn max_pending_requests(&self) -> u32 {
        self.max_pending_requests
    }
    pub fn max_requests_per_connection(&self) -> NonZeroU64 {
        self.max_requests_per_connection
    }
    pub fn total_requests(&self) -> Option<NonZeroU64> {
        self.total_requests
    }
    /// Worker `index`'s share of `total_requests` (the first `total mod workers` workers send
    /// one more), so the shares add up to the total exactly. A shard's workers take their
    /// places among all shards' workers, so the shards' shares add up to the total too.
    pub fn requests_for_worker(&self, index: usize, workers: usize) -> Option<u64> {
        let total = self.total_requests?.get();
        let (index, workers) = match self.shard {
            Some(s) => s.global_worker(index, workers.max(1)),
            None => (index, workers),
        };
        let n = workers.max(1) as u64;
        Some(total / n + u64::from((index as u64) < total % n))
    }
    pub fn open_loop(&self) -> bool {
        self.open_loop
    }
    pub fn prefetch_connections(&self) -> bool {
        self.prefetch_connections
    }
    pub fn retry_unanswered(&self) -> bool {
        self.retry_unanswered
    }
    pub fn simple_warmup(&self) -> bool {
        self.simple_warmup
    }
    pub fn start_at(&self) -> Option<SystemTime> {
        self.start_at
    }
    pub fn shard(&self) -> Option<Shard> {
        self.shard
    }
    /// The run id as given (`--execution-id`), if it was.
    pub fn execution_id(&self) -> Option<&str> {
        self.execution_id.as_deref()
    }
    /// The id a result of this spec records: the one given; for a shard without one, one
    /// every shard of the same run derives alike (from its options but the shard and the
    /// start), so a merge can tell apart shards of runs with other options (runs with the same
    /// options need `--execution-id`, as the Kubernetes batch Job passes its uid); else a new
    /// one (the time and this process).
    pub fn run_id(&self) -> String {
        if let Some(id) = &self.execution_id {
            return id.clone();
        }
        if self.shard.is_some() {
            let mut options = self.to_json();
            // Not the start either: `--start-at +3s` resolves a little differently in each.
            if let Some(o) = options.as_object_mut() {
                o.remove(n::SHARD.name);
                o.remove(n::START_AT.name);
            }
            return format!("shards-{:016x}", fnv1a(options.to_string().as_bytes()));
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        format!("run-{:x}-{}", now.as_millis(), std::process::id())
    }

    /// The options a result records: [`RunSpec::to_json`] with [`RunSpec::run_id`] in
    /// `execution_id`.
    pub fn recorded_options(&self) -> serde_json::Value {
        let mut options = self.to_json();
        if let Some(o) = options.as_object_mut() {
            o.insert(n::EXECUTION_ID.name.into(), self.run_id().into());
        }
        options
    }
    pub fn bind_address(&self) -> Option<IpAddr> {
        self.bind_address
    }
    /// Stream limits; an unpaced shard takes its share of the requests in flight, as of the
    /// connections.
    pub fn streams(&self) -> StreamLimits {
        let mut streams = self.streams;
        if let Some(s) = self.unpaced_shard() {
            streams.max_active_requests = share(streams.max_active_requests, s);
        }
        streams
    }
    pub fn h1_reuse(&self) -> H1Reuse {
        self.h1_reuse
    }
    pub fn address_family(&self) -> AddressFamily {
        self.address_family
    }
    pub fn tls(&self) -> &TlsOptions {
        &self.tls
    }
    pub fn tunnel(&self) -> Option<&crate::tunnel::TunnelSpec> {
        self.tunnel.as_ref()
    }
    pub fn http3(&self) -> Http3Options {
        self.http3
    }
    pub fn trace(&self) -> Option<&TraceSpec> {
        self.trace.as_ref()
    }
    pub fn requests(&self) -> &RequestsSpec {
        &self.requests
    }
    pub fn predicates(&self) -> &[Predicate] {
        &self.predicates
    }
    /// The run has no failure predicate at all (the user turned the defaults off and gave
    /// none): an error is then no failure, not even when nothing completes.
    pub fn tolerates_failures(&self) -> bool {
        self.predicates.iter().all(|p| p.kind != crate::predicate::PredicateKind::Failure)
    }
    pub fn labels(&self) -> &[String] {
        &self.labels
    }
    pub fn output_format(&self) -> OutputFormat {
        self.output_format
    }
    pub fn verbosity(&self) -> Verbosity {
        self.verbosity
    }
    pub fn telemetry(&self) -> &TelemetrySpec {
        &self.telemetry
    }
}

/// FNV-1a, 64 bits: a stable hash (std's is seeded per process), for ids derived alike by
/// separate processes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}
