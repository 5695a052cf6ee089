//! Whether a run succeeded, failed (and why), or was interrupted: decided once, where the
//! result is made ([`RunResult::judge`]), and read by everything that reports it: the command
//! line's exit code, the service's `failed` flag, the summary's Outcome line, a fleet's merged
//! result, Nighthawk's `error_detail`.

use crate::{Counter, RunResult, Termination};

/// How a run went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    #[default]
    Succeeded,
    Failed {
        why: Failure,
        /// The run's most frequent error, for the one line that says why.
        first_error: Option<String>,
    },
    /// Stopped by a signal or a cancel: what was measured is kept, the run is not complete.
    Interrupted,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A failure predicate fired (`benchmark.http_5xx:0`).
    Predicate(String),
    /// Requests were sent and not one completed: the run measured nothing.
    NothingCompleted,
    /// The run ran to its end and sent nothing at all: it measured nothing either.
    NothingSent,
    /// Something beyond the run's own requests failed it (a fleet's generator).
    Other(String),
}

/// Whether a run in which requests were sent and none completed failed. It did, unless the
/// run tolerates failures: it has no failure predicate at all (the user turned the defaults
/// off and gave none), so an error is not a failure. A replay never tolerates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unanswered {
    Fails,
    Tolerated,
}

impl Verdict {
    /// The verdict on `result`: its termination, then whether anything completed.
    pub fn of(result: &RunResult, unanswered: Unanswered) -> Verdict {
        let first_error = || {
            let mut errors: Vec<(&String, &u64)> = result.errors.iter().collect();
            errors.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            errors.first().map(|(m, _)| (*m).clone())
        };
        match &result.termination {
            Termination::Interrupted => return Verdict::Interrupted,
            Termination::FailurePredicate(p) => {
                return Verdict::Failed {
                    why: Failure::Predicate(p.clone()),
                    first_error: first_error(),
                }
            }
            Termination::Completed | Termination::TerminationPredicate(_) => {}
        }
        let g = &result.global;
        let answered = g.status_codes.total().max(g.counters.responses());
        // Every request the schedule released: sent, never connected, or overflowed.
        let tried = g.counters.get(Counter::RqTotal)
            + g.counters.get(Counter::PoolConnectionFailure)
            + g.counters.get(Counter::PoolOverflow);
        if answered == 0 && tried > 0 && unanswered == Unanswered::Fails {
            return Verdict::Failed { why: Failure::NothingCompleted, first_error: first_error() };
        }
        // A run that ended as planned without releasing one request (a plan at rate 0, an
        // empty request source) measured nothing, whatever errors it tolerates; one a
        // termination predicate ended early was stopped as asked.
        if answered == 0 && tried == 0 && result.termination == Termination::Completed {
            return Verdict::Failed { why: Failure::NothingSent, first_error: first_error() };
        }
        Verdict::Succeeded
    }

    pub fn is_failure(&self) -> bool {
        matches!(self, Verdict::Failed { .. })
    }

    /// The command line's exit status: 0, 1 for a failed run, 130 for an interrupted one (as
    /// shells report Ctrl-C), so a script tells an interrupted run from a complete one although
    /// its result was written.
    pub fn exit_code(&self) -> u8 {
        match self {
            Verdict::Succeeded => 0,
            Verdict::Failed { .. } => 1,
            Verdict::Interrupted => 130,
        }
    }

    /// `succeeded`, `failed` or `interrupted`, as documents name it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Verdict::Succeeded => "succeeded",
            Verdict::Failed { .. } => "failed",
            Verdict::Interrupted => "interrupted",
        }
    }

    /// Why it failed, in one line (`None` unless it failed): `failure predicate
    /// benchmark.http_5xx:0 fired (first error: …)`, `no request completed: connection
    /// refused`.
    pub fn reason(&self) -> Option<String> {
        let Verdict::Failed { why, first_error } = self else { return None };
        Some(match (why, first_error) {
            (Failure::Predicate(p), Some(e)) => {
                format!("failure predicate {p} fired (first error: {e})")
            }
            (Failure::Predicate(p), None) => format!("failure predicate {p} fired"),
            (Failure::NothingCompleted, Some(e)) => format!("no request completed: {e}"),
            (Failure::NothingCompleted, None) => "no request completed".into(),
            (Failure::NothingSent, Some(e)) => format!("no request was sent: {e}"),
            (Failure::NothingSent, None) => "no request was sent".into(),
            (Failure::Other(why), _) => why.clone(),
        })
    }

    /// The verdict in a few words: `succeeded`, `interrupted`, or `failed: REASON`.
    pub fn describe(&self) -> String {
        match self.reason() {
            Some(r) => format!("failed: {r}"),
            None => self.outcome().into(),
        }
    }
}

impl RunResult {
    /// Decides the run's verdict ([`Verdict::of`]) and keeps it with the result.
    pub fn judge(&mut self, unanswered: Unanswered) {
        self.verdict = Verdict::of(self, unanswered);
    }

    /// The run was stopped early by its caller although it ended as it would have (replay's
    /// soft stop: no new job started, the running ones finished).
    pub fn mark_interrupted(&mut self) {
        self.termination = Termination::Interrupted;
        self.verdict = Verdict::Interrupted;
    }

    /// Fails the run for a reason beyond its requests (unless it was interrupted first).
    pub fn fail(&mut self, why: String) {
        if self.verdict != Verdict::Interrupted {
            self.verdict = Verdict::Failed { why: Failure::Other(why), first_error: None };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkerResult;

    fn result(termination: Termination, sent: u64, ok: u64) -> RunResult {
        let mut w = WorkerResult::new("worker_0", std::time::SystemTime::now());
        w.counters.add(Counter::RqTotal, sent);
        w.counters.add(Counter::Http2xx, ok);
        let mut r = RunResult::new(serde_json::json!({}), vec![w], termination);
        r.errors.insert("connection refused".into(), 3);
        r.errors.insert("timed out".into(), 1);
        r
    }

    #[test]
    fn nothing_completed_fails_unless_tolerated() {
        let r = result(Termination::Completed, 5, 0);
        let v = Verdict::of(&r, Unanswered::Fails);
        assert_eq!(v.reason().as_deref(), Some("no request completed: connection refused"));
        assert_eq!(v.exit_code(), 1);
        assert_eq!(Verdict::of(&r, Unanswered::Tolerated), Verdict::Succeeded);
        assert_eq!(
            Verdict::of(&result(Termination::Completed, 5, 5), Unanswered::Fails),
            Verdict::Succeeded
        );
    }

    #[test]
    fn a_predicate_or_a_signal_decides_first() {
        let r = result(Termination::FailurePredicate("benchmark.http_5xx:0".into()), 5, 4);
        assert_eq!(
            Verdict::of(&r, Unanswered::Tolerated).describe(),
            "failed: failure predicate benchmark.http_5xx:0 fired (first error: connection refused)"
        );
        let r = result(Termination::Interrupted, 5, 0);
        assert_eq!(Verdict::of(&r, Unanswered::Fails).exit_code(), 130);
    }
}
