//! The `shrike.v1.Shrike` service: runs the engine's library call for remote clients.
//!
//! A `Run` is checked before anything is sent (spec, options a remote run may not use, limits,
//! then the allowlist against the addresses the engine resolved), takes one of the
//! `--max-concurrent-runs` slots, and runs on a thread of its own. An engine observer
//! forwards every tick as a `Sample` (exact histograms); the result follows the last one.
//! The response stream owns the run: when the client goes away, dropping the stream stops it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use shrike_engine::{
    Observer, RateHandle, Ready, Run, RunSpec, Sample, StopHandle, Telemetry, TelemetryConfig,
};
use shrike_plan::capacity::CapacityOptions;
use shrike_plan::sweep::SweepOptions;
use shrike_replay::ReplayOptions;
use shrike_stats::RunResult;
use shrike_stats::Termination;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tonic::{Request, Response, Status};

use crate::convert;
use crate::policy::{check_remote_options, Allowlist, Limits, Refusal};
use crate::proto::{self, run_event::Event, shrike_server::Shrike};

/// The shortest sample period a client may ask for: finer ticks cost the workers more than
/// they tell anyone.
pub const MIN_SAMPLE_PERIOD: Duration = Duration::from_millis(50);
const DEFAULT_SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// What a service allows and how it names itself.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Reported to clients as the generator's name.
    pub name: String,
    pub allow: Allowlist,
    pub limits: Limits,
    pub max_concurrent_runs: usize,
    /// Runs that name no source address send from this one (a multi-homed generator).
    pub bind_address: Option<IpAddr>,
}

/// The service's state: its runs in progress, by id.
#[derive(Clone)]
pub struct ShrikeService {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ServiceConfig,
    slots: Arc<Semaphore>,
    runs: Mutex<HashMap<String, StopHandle>>,
    /// The rate of each paced run in progress, for ScaleRate.
    rates: Mutex<HashMap<String, RateHandle>>,
    next_id: AtomicU64,
}

impl ShrikeService {
    pub fn new(config: ServiceConfig) -> ShrikeService {
        let slots = Arc::new(Semaphore::new(config.max_concurrent_runs.max(1)));
        ShrikeService {
            inner: Arc::new(Inner {
                config,
                slots,
                runs: Mutex::new(HashMap::new()),
                rates: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Nighthawk's `NighthawkService` over this service's runs, slots and rules.
    pub fn nighthawk(&self) -> crate::nighthawk::service::NighthawkApi {
        crate::nighthawk::service::NighthawkApi::new(self.inner.clone())
    }

    /// Stops every run in progress (their streams still end with their results).
    pub fn stop_all(&self) {
        for stop in self.inner.runs().values() {
            stop.request(Termination::Interrupted);
        }
    }
}

impl Inner {
    pub(crate) fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, StopHandle>> {
        // A panic while holding this lock leaves the map itself consistent (inserts and
        // removes are single calls), so a poisoned lock is still usable.
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn rates(&self) -> std::sync::MutexGuard<'_, HashMap<String, RateHandle>> {
        self.rates.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The spec a request describes, with the service's defaults applied, or why not.
    /// `ends_by_itself`: a replay ends with its jobs, so it needs no duration of its own.
    fn spec(&self, spec: Option<&proto::RunSpec>, ends_by_itself: bool) -> Result<RunSpec, Status> {
        let spec = self.base_spec(spec, ends_by_itself)?;
        self.config.limits.check(&spec).map_err(refused)?;
        Ok(spec)
    }

    /// [`Inner::spec`] without the per-run limits (a capacity search checks each trial).
    fn base_spec(
        &self,
        spec: Option<&proto::RunSpec>,
        ends_by_itself: bool,
    ) -> Result<RunSpec, Status> {
        let options = spec
            .and_then(|s| s.options.as_ref())
            .ok_or_else(|| Status::invalid_argument("spec.options is missing"))?;
        self.options_spec(&convert::from_struct(options), ends_by_itself)
    }

    /// The spec JSON `options` describe (Nighthawk's API sends them so), with the service's
    /// defaults, its refusals and its per-run limits applied.
    pub(crate) fn spec_from_json(
        &self,
        options: &serde_json::Value,
        ends_by_itself: bool,
    ) -> Result<RunSpec, Status> {
        let spec = self.options_spec(options, ends_by_itself)?;
        self.config.limits.check(&spec).map_err(refused)?;
        Ok(spec)
    }

    fn options_spec(
        &self,
        options: &serde_json::Value,
        ends_by_itself: bool,
    ) -> Result<RunSpec, Status> {
        let mut spec = RunSpec::from_json(options)
            .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        if let (Some(ip), None) = (self.config.bind_address, spec.bind_address()) {
            spec = spec
                .edit()
                .bind_address(Some(ip))
                .build()
                .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        }
        // A count (or a replay's jobs) without a duration ends by itself; the service's cap
        // bounds it in time too (whichever comes first), so a slow target cannot hold a run
        // forever.
        let ends = ends_by_itself || spec.total_requests().is_some();
        if let (None, true, Some(max)) = (spec.duration(), ends, self.config.limits.duration) {
            spec = spec
                .edit()
                .duration(max)
                .build()
                .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        }
        check_remote_options(&spec).map_err(refused)?;
        Ok(spec)
    }

    /// One of the `--max-concurrent-runs` slots, or RESOURCE_EXHAUSTED.
    pub(crate) fn permit(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "busy: this service already runs {} run(s) at once (--max-concurrent-runs)",
                self.config.max_concurrent_runs
            ))
        })
    }

    /// `spec` prepared (hosts resolved: blocking I/O, so off the runtime) and its targets
    /// checked against the allowlist.
    pub(crate) async fn prepare(&self, spec: &RunSpec) -> Result<Ready, Status> {
        let mut run = Run::new(spec);
        // A trace collector and a request source are hosts the service reaches too: the
        // allowlist covers them as it covers targets.
        if let Some(t) = spec.trace() {
            self.check_host("trace", &t.collector).await?;
        }
        // Through a tunnel, the service reaches the proxy, and the proxy the targets (which the
        // proxy resolves, but which must resolve here to be checked).
        if let Some(t) = spec.tunnel() {
            self.check_host("tunnel_options.tunnel_uri", &host_port(&t.host, t.port)).await?;
            for u in spec.urls() {
                self.check_host("uri (through the tunnel)", &host_port(&u.host, u.port)).await?;
            }
        }
        if let Some(source) = &spec.requests().remote_source {
            self.check_host("request_source", source).await?;
            let streams = crate::nighthawk::request_source::streams(spec, &Default::default())
                .map_err(Status::internal)?;
            run = run.request_streams(streams);
        }
        let ready = tokio::task::spawn_blocking(move || run.prepare())
            .await
            .map_err(|e| Status::internal(format!("preparing the run: {e}")))?
            .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        self.check_targets(&ready)?;
        Ok(ready)
    }

    /// Every address `host` (`HOST:PORT`, the option `what`) resolves to is inside the
    /// allowlist; a host that resolves to nothing is refused too.
    async fn check_host(&self, what: &str, host: &str) -> Result<(), Status> {
        let addrs = tokio::net::lookup_host(host)
            .await
            .map_err(|e| Status::invalid_argument(format!("{what} {host}: {e}")))?;
        for a in addrs {
            if !self.config.allow.allows(a) {
                return Err(Status::permission_denied(format!(
                    "{what} {host} resolves to {}, outside this service's allowlist \
                     (--allow-target {})",
                    a.ip(),
                    self.config.allow.describe()
                )));
            }
        }
        Ok(())
    }

    /// Whether a trial of a search (its spec, prepared) may run here: within the per-run
    /// limits, and every address it connects to inside the allowlist.
    pub(crate) fn admit(&self, spec: &RunSpec, ready: &Ready) -> Result<(), String> {
        self.config.limits.check(spec).map_err(|r| format!("the next trial: {r}"))?;
        self.check_targets(ready).map_err(|s| s.message().to_string())
    }

    /// Every address the prepared run would connect to is inside the allowlist.
    pub(crate) fn check_targets(&self, ready: &Ready) -> Result<(), Status> {
        for t in ready.targets() {
            if let Some(a) = t.addrs.iter().find(|a| !self.config.allow.allows(**a)) {
                return Err(Status::permission_denied(format!(
                    "target {} resolves to {}, outside this service's allowlist \
                     (--allow-target {})",
                    t.url(),
                    a.ip(),
                    self.config.allow.describe()
                )));
            }
        }
        Ok(())
    }

    /// Registers the run, streams `Started`, and runs `execute` on a thread of its own with an
    /// observer forwarding every tick; the result (or the error) ends the stream.
    fn launch(
        self: Arc<Self>,
        launch: Launch,
        execute: impl FnOnce(Telemetry, &StopHandle) -> Result<RunResult, String> + Send + 'static,
    ) -> Result<Response<RunStream>, Status> {
        let Launch { run_id, period, spec, permit, rate } = launch;
        let period = match period.as_ref() {
            None => DEFAULT_SAMPLE_PERIOD,
            Some(p) => convert::from_duration(Some(p)).max(MIN_SAMPLE_PERIOD),
        };
        let interval = spec.telemetry().stats_interval.unwrap_or(period);
        let config = TelemetryConfig::new(interval, Some(period))
            .ok_or_else(|| Status::invalid_argument("stats_interval is out of range"))?;
        let keep_series = spec.telemetry().stats_interval.is_some();
        let (id, stop) = self.register(&run_id)?;
        if let Some(rate) = rate {
            self.rates().insert(id.clone(), rate);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let started = self.started(&id, &spec);
        let _ = tx.send(Ok(proto::RunEvent { event: Some(Event::Started(started)) }));
        let telemetry = Telemetry { config, observers: vec![Box::new(Forward(tx.clone()))] };
        let (run_stop, thread_id, inner) = (stop.clone(), id.clone(), self.clone());
        std::thread::Builder::new()
            .name(format!("run {id}"))
            .spawn(move || {
                let event = match execute(telemetry, &run_stop) {
                    Ok(mut r) => {
                        if !keep_series {
                            r.intervals.clear();
                        }
                        Ok(proto::RunEvent { event: Some(Event::Result(convert::to_result(&r))) })
                    }
                    Err(e) => Err(Status::internal(format!("the run could not start: {e}"))),
                };
                let _ = tx.send(event);
                inner.rates().remove(&thread_id);
                inner.runs().remove(&thread_id);
                drop(permit);
            })
            .map_err(|e| {
                self.rates().remove(&id);
                self.runs().remove(&id);
                Status::internal(format!("starting the run: {e}"))
            })?;
        Ok(Response::new(EventStream { rx, stop, done: false }))
    }

    /// The run's id (asked for, or made) registered with its stop handle, for Cancel.
    pub(crate) fn register(&self, asked: &str) -> Result<(String, StopHandle), Status> {
        let id = self.run_id(asked);
        let stop = StopHandle::new();
        let mut runs = self.runs();
        if runs.contains_key(&id) {
            return Err(Status::already_exists(format!("run_id {id:?} is already running")));
        }
        runs.insert(id.clone(), stop.clone());
        Ok((id, stop))
    }

    pub(crate) fn started(&self, id: &str, spec: &RunSpec) -> proto::Started {
        proto::Started {
            run_id: id.to_string(),
            generator: self.config.name.clone(),
            workers: u32::try_from(spec.concurrency().workers().get()).unwrap_or(u32::MAX),
            options: Some(convert::to_struct(&spec.to_json())),
        }
    }

    fn run_id(&self, asked: &str) -> String {
        if asked.is_empty() {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed);
            format!("{}-{n}", self.config.name)
        } else {
            asked.to_string()
        }
    }
}

/// What every run needs to be launched, checked and admitted.
struct Launch {
    run_id: String,
    period: Option<prost_types::Duration>,
    spec: RunSpec,
    permit: OwnedSemaphorePermit,
    /// A paced run's rate, which ScaleRate may change.
    rate: Option<RateHandle>,
}

fn refused(r: Refusal) -> Status {
    match r {
        Refusal::Invalid(m) => Status::invalid_argument(m),
        Refusal::Denied(m) => Status::permission_denied(m),
    }
}

/// Forwards the engine's ticks to the stream, encoded on the collector thread.
struct Forward(mpsc::UnboundedSender<Result<proto::RunEvent, Status>>);

impl Observer for Forward {
    fn tick(&mut self, tick: &Sample) {
        let event = proto::RunEvent { event: Some(Event::Sample(convert::to_sample(tick))) };
        // The client left: its stream's drop stops the run; nothing to do here.
        let _ = self.0.send(Ok(event));
    }
}

/// The event that ends a call's stream: after it, dropping the stream stops nothing.
pub trait Final {
    fn is_final(&self) -> bool;
}

impl Final for proto::RunEvent {
    fn is_final(&self) -> bool {
        matches!(self.event, Some(Event::Result(_)))
    }
}

impl Final for proto::CapacityEvent {
    fn is_final(&self) -> bool {
        matches!(self.event, Some(proto::capacity_event::Event::Report(_)))
    }
}

impl Final for proto::SweepEvent {
    fn is_final(&self) -> bool {
        matches!(self.event, Some(proto::sweep_event::Event::Report(_)))
    }
}

/// A response stream. It owns the run: dropped before its final event (the client cancelled
/// or went away), it stops the run.
pub struct EventStream<T> {
    rx: mpsc::UnboundedReceiver<Result<T, Status>>,
    stop: StopHandle,
    done: bool,
}

impl<T> EventStream<T> {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Result<T, Status>>, stop: StopHandle) -> Self {
        EventStream { rx, stop, done: false }
    }
}

pub type RunStream = EventStream<proto::RunEvent>;

impl<T: Final> tokio_stream::Stream for EventStream<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = self.rx.poll_recv(cx);
        if let Poll::Ready(i) = &item {
            if i.as_ref().is_none_or(|r| r.as_ref().map_or(true, Final::is_final)) {
                self.done = true;
            }
        }
        item
    }
}

impl<T> Drop for EventStream<T> {
    fn drop(&mut self) {
        if !self.done {
            self.stop.request(Termination::Interrupted);
        }
    }
}

#[tonic::async_trait]
impl Shrike for ShrikeService {
    type RunStream = RunStream;

    async fn run(
        &self,
        request: Request<proto::RunRequest>,
    ) -> Result<Response<RunStream>, Status> {
        let req = request.into_inner();
        let spec = self.inner.spec(req.spec.as_ref(), false)?;
        let permit = self.inner.permit()?;
        let prepared = self.inner.prepare(&spec).await?;
        // An unpaced run's load is its connections, not a rate: nothing to scale.
        let paced = !matches!(spec.rate(), shrike_spec::RateSpec::Max);
        let rate = paced.then(RateHandle::new);
        let handle = rate.clone();
        let launch = Launch { run_id: req.run_id, period: req.sample_period, spec, permit, rate };
        self.inner.clone().launch(launch, move |telemetry, stop| {
            let ready = prepared.observed(telemetry);
            let ready = match handle {
                Some(h) => ready.rate_handle(h),
                None => ready,
            };
            ready.execute(stop).map_err(|e| e.to_string())
        })
    }

    type ReplayStream = RunStream;

    async fn replay(
        &self,
        request: Request<tonic::Streaming<proto::ReplayRequest>>,
    ) -> Result<Response<RunStream>, Status> {
        use proto::replay_request::Part;
        let mut stream = request.into_inner();
        let start = match stream.message().await?.and_then(|m| m.part) {
            Some(Part::Start(s)) => s,
            _ => return Err(Status::invalid_argument("the first message must be start")),
        };
        let options = start.replay.as_ref().map(convert::from_struct).unwrap_or_default();
        let options = ReplayOptions::from_json(&options).map_err(Status::invalid_argument)?;
        if options.loops > 1 {
            return Err(Status::invalid_argument(
                "replay.loops: a streamed jobs file is read once; loop it where the file is",
            ));
        }
        let spec = self.inner.spec(start.spec.as_ref(), true)?;
        let permit = self.inner.permit()?;
        let file = if start.file.is_empty() { "jobs".to_string() } else { start.file.clone() };
        let reader = crate::jobs_stream::reader(stream);
        let prepared = {
            let (spec, options, file) = (spec.clone(), options.clone(), file.clone());
            tokio::task::spawn_blocking(move || {
                let jobs = shrike_jobs::JobReader::from_reader(file, Box::new(reader))
                    .map_err(|e| Status::invalid_argument(e.to_string()))?;
                options
                    .check_hosts(jobs.header())
                    .map_err(|e| Status::invalid_argument(format!("replay: {e}")))?;
                shrike_replay::prepare(&spec, &options, jobs)
                    .map_err(|e| Status::invalid_argument(format!("spec: {e}")))
            })
            .await
            .map_err(|e| Status::internal(format!("preparing the replay: {e}")))??
        };
        self.inner.check_targets(&prepared.ready)?;
        let protocol = prepared.protocol;
        let (ready, feeder) =
            prepared.start().map_err(|e| Status::internal(format!("starting the feeder: {e}")))?;
        let prefix = shrike_replay::path_prefix(&spec);
        let launch =
            Launch { run_id: start.run_id, period: start.sample_period, spec, permit, rate: None };
        self.inner.clone().launch(launch, move |telemetry, stop| {
            let result = ready.observed(telemetry).execute(stop);
            let progress = feeder.progress.clone();
            let end = feeder.finish();
            let mut result = result.map_err(|e| e.to_string())?;
            result.options["replay"] =
                shrike_replay::record(&file, &options, protocol, &progress, &end, &prefix);
            if let Some(e) = end.error {
                // The jobs before the bad line (or the lost stream) played; say why the rest
                // did not, and fail the result: the file was not replayed.
                result.errors.insert(format!("jobs: {e}"), 1);
                result.fail(format!("the jobs file stopped the replay: {e}"));
            }
            options.judge_canary(&mut result);
            Ok(result)
        })
    }

    type CapacityStream = EventStream<proto::CapacityEvent>;

    async fn capacity(
        &self,
        request: Request<proto::CapacityRequest>,
    ) -> Result<Response<Self::CapacityStream>, Status> {
        let req = request.into_inner();
        let base = self.inner.base_spec(req.spec.as_ref(), false)?;
        let search = req.search.as_ref().map(convert::from_struct).unwrap_or_default();
        let options =
            CapacityOptions::from_json(&search, &base).map_err(Status::invalid_argument)?;
        let permit = self.inner.permit()?;
        // The targets are checked before the first trial (and again for each).
        drop(self.inner.prepare(&base).await?);
        let started =
            |s| proto::CapacityEvent { event: Some(proto::capacity_event::Event::Started(s)) };
        crate::plans::launch(&self.inner, &req.run_id, base, permit, started, move |i, b, s, e| {
            crate::plans::capacity(i, b, &options, s, e)
        })
    }

    type SweepStream = EventStream<proto::SweepEvent>;

    async fn sweep(
        &self,
        request: Request<proto::SweepRequest>,
    ) -> Result<Response<Self::SweepStream>, Status> {
        let req = request.into_inner();
        let base = self.inner.base_spec(req.spec.as_ref(), false)?;
        let sweep = req.sweep.as_ref().map(convert::from_struct).unwrap_or_default();
        let options = SweepOptions::from_json(&sweep, &base).map_err(Status::invalid_argument)?;
        let targets = crate::plans::targets(&sweep, &base)?;
        let permit = self.inner.permit()?;
        // Every instance's targets are checked before the first run (and again for each).
        for (_, url) in &targets.0 {
            let spec = match url {
                Some(u) => base
                    .edit()
                    .url(u)
                    .build()
                    .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?,
                None => base.clone(),
            };
            drop(self.inner.prepare(&spec).await?);
        }
        let started = |s| proto::SweepEvent { event: Some(proto::sweep_event::Event::Started(s)) };
        crate::plans::launch(&self.inner, &req.run_id, base, permit, started, move |i, b, s, e| {
            crate::plans::sweep(i, b, (options, targets), s, e)
        })
    }

    async fn cancel(
        &self,
        request: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelResponse>, Status> {
        let id = request.into_inner().run_id;
        let cancelled = match self.inner.runs().get(&id) {
            Some(stop) => {
                stop.request(Termination::Interrupted);
                true
            }
            None => false,
        };
        Ok(Response::new(proto::CancelResponse { cancelled }))
    }

    async fn scale_rate(
        &self,
        request: Request<proto::ScaleRateRequest>,
    ) -> Result<Response<proto::ScaleRateResponse>, Status> {
        let req = request.into_inner();
        if !self.inner.runs().contains_key(&req.run_id) {
            return Err(Status::not_found(format!("no run {:?} is in progress", req.run_id)));
        }
        let Some(rate) = self.inner.rates().get(&req.run_id).cloned() else {
            return Err(Status::failed_precondition(format!(
                "run {:?} is not paced by a rate (unpaced, a replay or a search)",
                req.run_id
            )));
        };
        if !rate.scale(req.factor) {
            return Err(Status::invalid_argument(format!(
                "factor {} is not a finite, positive number",
                req.factor
            )));
        }
        Ok(Response::new(proto::ScaleRateResponse {}))
    }
}

/// `HOST:PORT`, an IPv6 host in brackets.
fn host_port(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}
