//! The service's planners: `Capacity` (`shrike capacity` here) and `Sweep` (`shrike sweep`
//! here). Each runs shrike-plan's loop on a thread of its own, every trial on this machine's
//! engine and checked against the service's limits and allowlist before it is sent, and
//! streams what it judges or measures as it goes; the report ends the stream.

use std::sync::Arc;

use shrike_engine::{Ready, RunSpec, StopHandle};
use shrike_plan::capacity::{CapacityOptions, SearchError, Trial};
use shrike_plan::sweep::{Measured, SweepError, SweepOptions, Targets};
use shrike_plan::trial::LocalRunner;
use tokio::sync::mpsc;
use tonic::{Response, Status};

use crate::convert;
use crate::proto::{self, capacity_event, sweep_event};
use crate::service::{EventStream, Final, Inner};

type Events<E> = mpsc::UnboundedSender<Result<E, Status>>;

/// Starts a planner over `base` on a thread of its own: `Started`, then what `work` streams,
/// then its report. The call's stream owns it: dropped, it stops the planner.
pub(crate) fn launch<E: Final + Send + 'static>(
    inner: &Arc<Inner>,
    run_id: &str,
    base: RunSpec,
    permit: tokio::sync::OwnedSemaphorePermit,
    started: fn(proto::Started) -> E,
    work: impl FnOnce(&Inner, &RunSpec, &StopHandle, &Events<E>) -> Result<E, Status> + Send + 'static,
) -> Result<Response<EventStream<E>>, Status> {
    let (id, stop) = inner.register(run_id)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(Ok(started(inner.started(&id, &base))));
    let (worker, run_stop, thread_id) = (inner.clone(), stop.clone(), id.clone());
    std::thread::Builder::new()
        .name(format!("plan {id}"))
        .spawn(move || {
            let end = work(&worker, &base, &run_stop, &tx);
            let _ = tx.send(end);
            worker.runs().remove(&thread_id);
            drop(permit);
        })
        .map_err(|e| {
            inner.runs().remove(&id);
            Status::internal(format!("starting the planner: {e}"))
        })?;
    Ok(Response::new(EventStream::new(rx, stop)))
}

/// Runs the search to its end (or `stop`), streaming each judged trial, and reports.
pub(crate) fn capacity(
    inner: &Inner,
    base: &RunSpec,
    options: &CapacityOptions,
    stop: &StopHandle,
    events: &Events<proto::CapacityEvent>,
) -> Result<proto::CapacityEvent, Status> {
    // Every trial is checked as a run of its own would be.
    let admit = |spec: &RunSpec, ready: &Ready| inner.admit(spec, ready);
    let mut runner = LocalRunner::new(stop).admitting(&admit);
    let event = |e| proto::CapacityEvent { event: Some(e) };
    let mut seen = |n: usize, t: &Trial| {
        let _ = events.send(Ok(event(capacity_event::Event::Trial(trial(n, t, options)))));
    };
    let outcome =
        shrike_plan::capacity::run(base, options, &mut runner, &mut seen).map_err(|e| match e {
            SearchError::Spec(e) => Status::invalid_argument(format!("spec: {e}")),
            e => Status::failed_precondition(e.to_string()),
        })?;
    let json = serde_json::to_string_pretty(&outcome.json()).unwrap_or_default();
    let report =
        proto::CapacityReport { json, complete: outcome.complete, failed: outcome.failed() };
    Ok(event(capacity_event::Event::Report(report)))
}

/// Runs the sweep to its end (or `stop`), streaming each measured run, and reports.
pub(crate) fn sweep(
    inner: &Inner,
    base: &RunSpec,
    (options, mut targets): (SweepOptions, Targets),
    stop: &StopHandle,
    events: &Events<proto::SweepEvent>,
) -> Result<proto::SweepEvent, Status> {
    let admit = |spec: &RunSpec, ready: &Ready| inner.admit(spec, ready);
    let mut runner = LocalRunner::new(stop).admitting(&admit);
    let event = |e| proto::SweepEvent { event: Some(e) };
    let mut seen = |m: Measured| {
        let run = proto::SweepRun {
            instance: m.instance.to_string(),
            level: m.level,
            iteration: u32::try_from(m.iteration).unwrap_or(u32::MAX),
            throughput_rps: m.run.throughput,
            p99: m.run.latency[2].is_finite().then(|| {
                convert::to_duration(std::time::Duration::from_secs_f64(m.run.latency[2]))
            }),
            errors: m.run.errors,
        };
        let _ = events.send(Ok(event(sweep_event::Event::Run(run))));
    };
    let swept = shrike_plan::sweep::run(base, &options, &mut targets, &mut runner, &mut seen)
        .map_err(|e| match e {
            SweepError::Spec(e) => Status::invalid_argument(format!("spec: {e}")),
            e => Status::failed_precondition(e.to_string()),
        })?;
    let complete = swept.complete && !stop.is_stopped();
    let json = serde_json::to_string_pretty(&swept.json()).unwrap_or_default();
    let failed = swept.failure().is_some();
    Ok(event(sweep_event::Event::Report(proto::SweepReport { json, complete, failed })))
}

/// A sweep's instances from its `compare` (`{"baseline": URL, "candidate": URL}`), each
/// checked against the allowlist as a run's target; without one, the spec's own target.
pub(crate) fn targets(sweep: &serde_json::Value, base: &RunSpec) -> Result<Targets, Status> {
    let Some(compare) = sweep.get("compare").filter(|c| !c.is_null()) else {
        return Ok(Targets(vec![("default".into(), None)]));
    };
    let pairs = compare
        .as_object()
        .filter(|m| m.len() == 2)
        .ok_or_else(|| Status::invalid_argument("sweep.compare: two NAME: URL pairs"))?;
    let mut out = Vec::new();
    for (name, url) in pairs {
        let url = url
            .as_str()
            .ok_or_else(|| Status::invalid_argument(format!("sweep.compare.{name}: a URL")))?;
        // A URL the spec cannot take is refused now, naming the instance.
        base.edit()
            .url(url)
            .build()
            .map_err(|e| Status::invalid_argument(format!("sweep.compare.{name}: {e}")))?;
        out.push((name.clone(), Some(url.to_string())));
    }
    Ok(Targets(out))
}

fn trial(n: usize, t: &Trial, options: &CapacityOptions) -> proto::CapacityTrial {
    proto::CapacityTrial {
        summary: shrike_plan::capacity::report::progress(n, t, options.dimension, &options.slos),
        invalid: t.invalid.clone().unwrap_or_default(),
        cause: t.cause.as_ref().map(ToString::to_string).unwrap_or_default(),
        number: u32::try_from(n).unwrap_or(u32::MAX),
        level: t.level,
        confirmation: t.confirmation,
        achieved_rps: t.achieved_rps,
        p99: (t.scheduled.count() > 0).then(|| {
            convert::to_duration(std::time::Duration::from_nanos(
                t.scheduled.clamped_quantile(0.99),
            ))
        }),
        verdicts: t.verdicts.iter().map(|v| v.name().to_string()).collect(),
    }
}
