//! What a finished replay tells its user beyond its numbers: whether it kept the capture's
//! timing (claimed only when there are requests enough for a p99 to mean more than their
//! maximum), and what a pattern in its errors points at. Every caller (the CLI, the service's
//! clients) gets the same words from here.

use shrike_stats::{RunResult, StatId};

use crate::ReplayOptions;

/// Requests a send-lateness p99 needs before it says more than the single latest request:
/// with fewer, the 99th percentile is the maximum.
pub const MIN_LATENESS_SAMPLES: u64 = 100;

/// Lateness beyond this was noticeable: requests left later than the capture had them.
const LATE_NS: u64 = 1_000_000;

/// One thing to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advice {
    /// A problem with the replay (else information).
    pub warning: bool,
    pub text: String,
}

/// What `result`, a replay played with `options`, should tell its user.
pub fn advice(result: &RunResult, options: &ReplayOptions) -> Vec<Advice> {
    let mut out = Vec::new();
    let late = result.global.stats.get(StatId::SendLateness);
    let human = |ns: u64| shrike_stats::duration::format_human_ns(ns as f64);
    let n = late.count();
    if n >= MIN_LATENESS_SAMPLES {
        let p99 = late.clamped_quantile(0.99);
        if p99 > LATE_NS {
            out.push(Advice {
                warning: true,
                text: format!(
                    "the replay did not keep up: 1% of requests left {} or more after their \
                     time (send lateness p99); add workers (--concurrency) or slow it \
                     (--time-scale)",
                    human(p99)
                ),
            });
        }
    } else if n > 0 && late.max() > LATE_NS {
        out.push(Advice {
            warning: false,
            text: format!(
                "the latest of {n} requests left {} after its time; {n} are too few to say \
                 whether the replay kept up (a p99 needs {MIN_LATENESS_SAMPLES})",
                human(late.max())
            ),
        });
    }
    // A rule that changed nothing was likely mistyped: the replay sent what it would have
    // without it.
    for (rule, n) in options.rewrites.matched() {
        if n == 0 {
            out.push(Advice {
                warning: true,
                text: format!("--rewrite {rule:?} matched no request: nothing was rewritten by it"),
            });
        }
    }
    // "No database selected": the sessions started in none, and their commands assumed one.
    let no_db: u64 = result
        .errors
        .iter()
        .filter(|(k, _)| k.starts_with("MySQL error 1046 "))
        .map(|(_, n)| n)
        .sum();
    let errors: u64 = result.errors.values().sum();
    if no_db > 0 && 2 * no_db > errors && options.mysql.database.is_none() {
        out.push(Advice {
            warning: true,
            text: format!(
                "{no_db} of {errors} errors were MySQL error 1046 (no database selected): the \
                 captured sessions named no database at login (or the capture began after \
                 their logins); name one with --mysql-db"
            ),
        });
    }
    out
}
