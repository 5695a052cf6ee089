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

use shrike_engine::{Observer, Run, RunSpec, Sample, StopHandle, Telemetry, TelemetryConfig};
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

struct Inner {
    config: ServiceConfig,
    slots: Arc<Semaphore>,
    runs: Mutex<HashMap<String, StopHandle>>,
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
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Stops every run in progress (their streams still end with their results).
    pub fn stop_all(&self) {
        for stop in self.inner.runs().values() {
            stop.request(Termination::Interrupted);
        }
    }
}

impl Inner {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, StopHandle>> {
        // A panic while holding this lock leaves the map itself consistent (inserts and
        // removes are single calls), so a poisoned lock is still usable.
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The spec a request describes, with the service's defaults applied, or why not.
    fn spec(&self, req: &proto::RunRequest) -> Result<RunSpec, Status> {
        let options = req
            .spec
            .as_ref()
            .and_then(|s| s.options.as_ref())
            .ok_or_else(|| Status::invalid_argument("spec.options is missing"))?;
        let options = convert::from_struct(options);
        let mut spec = RunSpec::from_json(&options)
            .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        if let (Some(ip), None) = (self.config.bind_address, spec.bind_address()) {
            spec = spec
                .patched(&serde_json::json!({ "bind_address": ip.to_string() }))
                .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        }
        // A count without a duration ends at the count; the service's cap bounds it in time
        // too (whichever comes first), so a slow target cannot hold a run forever.
        if let (None, Some(_), Some(max)) =
            (spec.duration(), spec.total_requests(), self.config.limits.duration)
        {
            let cap = shrike_stats::duration::format_proto(max);
            spec = spec
                .patched(&serde_json::json!({ "duration": cap, "no_duration": null }))
                .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?;
        }
        check_remote_options(&spec).map_err(refused)?;
        self.config.limits.check(&spec).map_err(refused)?;
        Ok(spec)
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

/// The response stream. It owns the run: dropped before the result (the client cancelled or
/// went away), it stops the run.
pub struct RunStream {
    rx: mpsc::UnboundedReceiver<Result<proto::RunEvent, Status>>,
    stop: StopHandle,
    done: bool,
}

impl tokio_stream::Stream for RunStream {
    type Item = Result<proto::RunEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(Ok(proto::RunEvent { event: Some(Event::Result(_)) })))
        | Poll::Ready(Some(Err(_)))
        | Poll::Ready(None) = &item
        {
            self.done = true;
        }
        item
    }
}

impl Drop for RunStream {
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
        let inner = self.inner.clone();
        let spec = inner.spec(&req)?;
        let period = match req.sample_period.as_ref() {
            None => DEFAULT_SAMPLE_PERIOD,
            Some(p) => convert::from_duration(Some(p)).max(MIN_SAMPLE_PERIOD),
        };
        let permit: OwnedSemaphorePermit =
            inner.slots.clone().try_acquire_owned().map_err(|_| {
                Status::resource_exhausted(format!(
                    "busy: this service already runs {} run(s) at once (--max-concurrent-runs)",
                    inner.config.max_concurrent_runs
                ))
            })?;
        // Preparing resolves hosts (blocking I/O) and reads nothing remote runs may not read.
        let prepared = {
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || Run::new(&spec).prepare())
                .await
                .map_err(|e| Status::internal(format!("preparing the run: {e}")))?
                .map_err(|e| Status::invalid_argument(format!("spec: {e}")))?
        };
        for t in prepared.targets() {
            if let Some(a) = t.addrs.iter().find(|a| !inner.config.allow.allows(**a)) {
                return Err(Status::permission_denied(format!(
                    "target {} resolves to {}, outside this service's allowlist \
                     (--allow-target {})",
                    t.url(),
                    a.ip(),
                    inner.config.allow.describe()
                )));
            }
        }
        let interval = spec.telemetry().stats_interval.unwrap_or(period);
        let config = TelemetryConfig::new(interval, Some(period))
            .ok_or_else(|| Status::invalid_argument("stats_interval is out of range"))?;
        let id = inner.run_id(&req.run_id);
        let stop = StopHandle::new();
        {
            let mut runs = inner.runs();
            if runs.contains_key(&id) {
                return Err(Status::already_exists(format!("run_id {id:?} is already running")));
            }
            runs.insert(id.clone(), stop.clone());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let started = proto::Started {
            run_id: id.clone(),
            generator: inner.config.name.clone(),
            workers: u32::try_from(spec.concurrency().workers().get()).unwrap_or(u32::MAX),
            options: Some(convert::to_struct(&spec.to_json())),
        };
        let _ = tx.send(Ok(proto::RunEvent { event: Some(Event::Started(started)) }));
        let telemetry = Telemetry { config, observers: vec![Box::new(Forward(tx.clone()))] };
        let keep_series = spec.telemetry().stats_interval.is_some();
        let run_stop = stop.clone();
        let spawned_id = id.clone();
        std::thread::Builder::new()
            .name(format!("run {id}"))
            .spawn(move || {
                let result = prepared.observed(telemetry).execute(&run_stop);
                let event = match result {
                    Ok(mut r) => {
                        if !keep_series {
                            r.intervals.clear();
                        }
                        Ok(proto::RunEvent { event: Some(Event::Result(convert::to_result(&r))) })
                    }
                    Err(e) => Err(Status::internal(format!("the run could not start: {e}"))),
                };
                let _ = tx.send(event);
                inner.runs().remove(&id);
                drop(permit);
            })
            .map_err(|e| {
                self.inner.runs().remove(&spawned_id);
                Status::internal(format!("starting the run: {e}"))
            })?;
        Ok(Response::new(RunStream { rx, stop, done: false }))
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
}
