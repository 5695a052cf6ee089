//! The service's `Capacity`: `shrike capacity`'s search loop (shrike-plan) with every trial
//! run here, each checked against the service's limits and allowlist before it is sent.

use shrike_engine::{RunSpec, StopHandle};
use shrike_plan::capacity::{CapacityOptions, SearchError, Trial};
use shrike_plan::trial::LocalRunner;
use tokio::sync::mpsc;
use tonic::Status;

use crate::convert;
use crate::proto::{self, capacity_event::Event};
use crate::service::Inner;

type Events = mpsc::UnboundedSender<Result<proto::CapacityEvent, Status>>;

/// Runs the search to its end (or `stop`), streaming each judged trial; the report is the
/// caller's to send.
pub(crate) fn search(
    inner: &Inner,
    base: &RunSpec,
    options: &CapacityOptions,
    stop: &StopHandle,
    events: &Events,
) -> Result<proto::CapacityReport, Status> {
    let admit = |spec: &RunSpec, ready: &shrike_engine::Ready| inner.admit(spec, ready);
    let mut runner = LocalRunner::new(stop).admitting(&admit);
    let mut seen = |n: usize, t: &Trial| {
        let _ = events.send(Ok(proto::CapacityEvent { event: Some(Event::Trial(trial(n, t))) }));
    };
    let outcome = shrike_plan::capacity::run_search(base, options, &mut runner, &mut seen)
        .map_err(|e| match e {
            SearchError::Spec(e) => Status::invalid_argument(format!("spec: {e}")),
            e => Status::failed_precondition(e.to_string()),
        })?;
    let json = serde_json::to_string_pretty(&outcome.json()).unwrap_or_default();
    Ok(proto::CapacityReport { json, complete: outcome.complete, failed: outcome.failed() })
}

fn trial(n: usize, t: &Trial) -> proto::CapacityTrial {
    proto::CapacityTrial {
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
