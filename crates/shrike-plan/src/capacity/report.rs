//! A capacity search as people and scripts read it: answers first, then every trial.
//!
//! JSON: `max_rps` (or `max_concurrency`) maps each goal to its answer (null when there is
//! none), `complete` says whether the search ran to its end, and `capacity` holds the
//! objectives, the goals with their status, and every trial's figures and full result.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::text::table;
use shrike_stats::duration::format_human_ns;

use super::search::{Answer, Status};
use super::slo::{Latency, Metric, Slo};
use super::trial::{Trial, TrialVerdict};
use crate::trial::Dimension;

/// Everything a finished (or interrupted) search says.
pub struct Report<'a> {
    /// `rate` or `concurrency`.
    pub search: &'a str,
    /// What a level counts: `/s`, `connections` or `active requests`.
    pub unit: &'a str,
    pub slos: &'a [Slo],
    pub goals: &'a [Vec<Slo>],
    pub trials: &'a [Trial],
    pub answers: &'a [Answer],
    /// False when interrupted.
    pub complete: bool,
    /// Why the search ended before its answer ([`super::Outcome::stopped_by`]).
    pub stopped_by: Option<&'a str>,
    /// What was loaded (the target URL), when known.
    pub target: Option<&'a str>,
}

/// One judged trial in a line, as a search in progress shows it: the level, what it achieved,
/// each objective's own metric (`p99.9 41.20ms`), server errors, client overflow when there
/// was any, and the verdict for each goal.
pub fn progress(n: usize, t: &Trial, dimension: Dimension, slos: &[Slo]) -> String {
    let level = match dimension {
        Dimension::Rate => format!("{:.1}/s", t.level),
        d => format!("{} {}", t.level, d.unit()),
    };
    let figures = t.figures(slos);
    let errors = match slos.iter().any(|s| s.metric == Metric::Errors) {
        true => String::new(),
        false => format!(", errors {:.2}%", 100.0 * t.error_ratio),
    };
    let overflow = match t.overflow_share > 0.0 {
        true => format!(", client overflow {:.2}%", 100.0 * t.overflow_share),
        false => String::new(),
    };
    let verdicts: Vec<&str> = t.verdicts.iter().map(|v| v.name()).collect();
    format!(
        "trial {n}{}: {level} for {}: achieved {:.1}/s, {figures}{errors}{overflow}: {}",
        if t.confirmation { " (confirmation)" } else { "" },
        format_human_ns(t.duration.as_nanos() as f64),
        t.achieved_rps,
        verdicts.join(", ")
    )
}

impl Report<'_> {
    fn level(&self, l: f64) -> String {
        match self.search {
            "rate" if l.fract() != 0.0 => format!("{l:.1}/s"),
            "rate" => format!("{l:.0}/s"),
            _ => format!("{l:.0}"),
        }
    }

    /// A level with its unit, for sentences: `120/s`, `12 connections`.
    fn amount(&self, l: f64) -> String {
        match self.search {
            "rate" => self.level(l),
            _ => format!("{} {}", self.level(l), self.unit),
        }
    }

    /// A goal's name: the objectives the user gave, joined (`p99<=10.00ms, errors<=0.1%`);
    /// the implied errors objective is not part of it.
    pub fn goal_name(goal: &[Slo]) -> String {
        let given: Vec<String> = goal.iter().filter(|s| !s.implied).map(Slo::to_string).collect();
        match given.is_empty() {
            true => goal.iter().map(Slo::to_string).collect::<Vec<_>>().join(", "),
            false => given.join(", "),
        }
    }

    /// One line per goal: the answer, or plainly why there is none.
    pub fn answer_line(&self, goal: &[Slo], a: &Answer) -> String {
        let line = self.answer(goal, a);
        match self.stopped_by {
            Some(why) => format!("STOPPED — {why}; from the trials before: {line}"),
            None => line,
        }
    }

    fn answer(&self, goal: &[Slo], a: &Answer) -> String {
        let name = Self::goal_name(goal);
        let on = |n: usize| format!("{n} trial{}", if n == 1 { "" } else { "s" });
        match (&a.status, a.max) {
            (Status::Found, Some(m)) => format!(
                "{name}: max {} (confirmed; rests on {}; fails at {})",
                self.amount(m),
                on(a.trials),
                a.failed_at.map_or("-".into(), |f| self.amount(f))
            ),
            (Status::Bounded { limit }, _) => format!(
                "{name}: at least {} — every level up to the search's bound (--max-rate) passed, \
                 the bound confirmed (rests on {})",
                self.amount(*limit),
                on(a.trials)
            ),
            (Status::GeneratorBound { limit }, Some(m)) => format!(
                "{name}: at least {} — the load generator is the bottleneck at {}: add workers \
                 or machines to search higher (rests on {})",
                self.amount(m),
                self.amount(*limit),
                on(a.trials)
            ),
            (Status::GeneratorBound { limit }, None) => format!(
                "{name}: NO ANSWER — the load generator is the bottleneck at {}: add workers or \
                 machines, or start lower",
                self.amount(*limit)
            ),
            (Status::FirstTrialFailed, _) => {
                let first = self.trials.first();
                let at = first.map_or("-".into(), |t| self.amount(t.level));
                match first.and_then(|t| t.cause.as_ref()) {
                    Some(cause) => format!(
                        "{name}: NO ANSWER — the first trial, at {at}, got no successful \
                         response: {}; {}",
                        cause.detail,
                        cause.advice()
                    ),
                    None => format!(
                        "{name}: NO ANSWER — even the first trial, at {at}, failed{}; start \
                         lower (--start)",
                        first.map_or(String::new(), |t| format!(" ({})", t.misses(goal)))
                    ),
                }
            }
            (Status::Inconsistent { failed, passed }, _) => format!(
                "{name}: NOT SETTLED — the trials disagree: {} failed although {} passed, each \
                 after {} trials; the answer lies between {} and {}, and this host is too noisy \
                 to say where (quiet the machine, or give longer --trial-duration)",
                self.amount(*failed),
                self.amount(*passed),
                self.trials.iter().filter(|t| t.level == *failed).count(),
                a.max.map_or("0".into(), |m| self.amount(m)),
                self.amount(*passed),
            ),
            (_, Some(m)) if self.complete => format!(
                "{name}: NOT SETTLED — out of trials ({} run, the --max-trials limit): the answer \
                 lies between {} (passed, rests on {}) and {}",
                self.trials.len(),
                self.amount(m),
                on(a.trials),
                a.failed_at.map_or("an unknown level".into(), |f| self.amount(f))
            ),
            (_, Some(m)) => format!(
                "{name}: UNFINISHED — {} passed so far (rests on {}), not narrowed or confirmed",
                self.amount(m),
                on(a.trials)
            ),
            (_, None) => format!("{name}: UNFINISHED — no level passed yet"),
        }
    }

    pub fn human(&self) -> String {
        let mut s = String::new();
        let what = if self.search == "rate" { "rate" } else { "concurrency" };
        let _ = writeln!(s, "Shrike capacity: the highest {what} that meets every SLO\n");
        if let Some(t) = self.target {
            let _ = writeln!(s, "Target: {t}\n");
        }
        if !self.complete {
            s.push_str("INCOMPLETE: interrupted; the answers below are the best known so far.\n\n");
        }
        for (goal, a) in self.goals.iter().zip(self.answers) {
            let _ = writeln!(s, "  {}", self.answer_line(goal, a));
        }
        s.push('\n');
        let mut header = vec![
            "#".to_string(),
            "offered".into(),
            "achieved".into(),
            "p50".into(),
            "p99".into(),
            "p99.9".into(),
            "service p99".into(),
            "errors".into(),
            "overflow".into(),
            "duration".into(),
        ];
        header.extend((1..=self.goals.len()).map(|i| format!("goal {i}")));
        let mut rows = vec![header];
        for (i, t) in self.trials.iter().enumerate() {
            let q = |q: f64| quantile(t, Latency::Scheduled, q);
            let mut row = vec![
                format!("{}{}", i + 1, if t.confirmation { "*" } else { "" }),
                self.level(t.level),
                format!("{:.1}/s", t.achieved_rps),
                q(0.5),
                q(0.99),
                q(0.999),
                quantile(t, Latency::Service, 0.99),
                format!("{:.2}%", 100.0 * t.error_ratio),
                format!("{:.2}%", 100.0 * t.overflow_share),
                format_human_ns(t.duration.as_nanos() as f64),
            ];
            row.extend(t.verdicts.iter().map(|v| verdict(*v).to_string()));
            rows.push(row);
        }
        table(&rows, &mut s);
        s.push_str(
            "\n  * a full-length confirmation trial. Latency is from the schedule (free of\n    \
             coordinated omission) unless marked service. Errors are the server's (statuses,\n    \
             timeouts, resets, refused connections); overflow is the client's: requests due\n    \
             while every connection was busy, never sent.\n",
        );
        for (i, goal) in self.goals.iter().enumerate() {
            let _ = writeln!(s, "  goal {}: {}", i + 1, Self::goal_name(goal));
        }
        if let Some(implied) = self.slos.iter().find(|s| s.implied) {
            let _ = writeln!(
                s,
                "  every goal also holds {implied} (the default errors objective; give --slo \
                 'errors<=X%' for another)"
            );
        }
        let invalid: Vec<String> = self
            .trials
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.invalid.as_ref().map(|why| format!("  trial {}: {why}", i + 1)))
            .collect();
        if !invalid.is_empty() {
            s.push_str("\nInvalid trials (the load generator, not the server, was the limit):\n");
            for line in invalid {
                let _ = writeln!(s, "{line}");
            }
        }
        let thin: Vec<String> = self
            .trials
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let notes = t.thin(self.slos);
                (!notes.is_empty()).then(|| format!("  trial {}: {}", i + 1, notes.join(", ")))
            })
            .collect();
        if !thin.is_empty() {
            s.push_str(
                "\nPercentiles judged on too few answers (each is the slowest answer, not the \
                 percentile: run longer trials or at higher levels):\n",
            );
            for line in thin {
                let _ = writeln!(s, "{line}");
            }
        }
        s
    }

    /// The JSON document; `results[i]` is trial i's full result (Shrike's JSON result shape).
    pub fn json(&self, results: Vec<Value>) -> Value {
        let key = if self.search == "rate" { "max_rps" } else { "max_concurrency" };
        let answers: serde_json::Map<String, Value> = self
            .goals
            .iter()
            .zip(self.answers)
            .map(|(g, a)| (Self::goal_name(g), json!(a.max.filter(|_| a.usable()))))
            .collect();
        let goals: Vec<Value> = self
            .goals
            .iter()
            .zip(self.answers)
            .map(|(g, a)| {
                json!({
                    "name": Self::goal_name(g),
                    "slos": g.iter().map(Slo::to_string).collect::<Vec<_>>(),
                    "max": a.max,
                    "failed_at": a.failed_at,
                    "trials_at_answer": a.trials,
                    "status": status(&a.status),
                    "generator_limit": match a.status { Status::GeneratorBound { limit } => Some(limit), _ => None },
                    "summary": self.answer_line(g, a),
                })
            })
            .collect();
        let mut results = results.into_iter();
        let trials: Vec<Value> = self
            .trials
            .iter()
            .map(|t| {
                json!({
                    "level": t.level,
                    "duration_s": t.duration.as_secs_f64(),
                    "confirmation": t.confirmation,
                    "achieved_rps": t.achieved_rps,
                    "responses_rps": t.responses_rps,
                    "achieved_ratio": t.achieved_ratio,
                    "error_ratio": t.error_ratio,
                    "overflow_ratio": t.overflow_share,
                    "client_cpu_cores": t.client_cpu_cores,
                    "objectives": objectives(t, self.slos),
                    "latency_s": latencies(t, Latency::Scheduled),
                    "service_s": latencies(t, Latency::Service),
                    "invalid": t.invalid,
                    "thin": t.thin(self.slos),
                    "cause": t.cause.as_ref().map(ToString::to_string),
                    "verdicts": t.verdicts.iter().map(|v| verdict(*v)).collect::<Vec<_>>(),
                    "result": results.next().unwrap_or(Value::Null),
                })
            })
            .collect();
        json!({
            key: answers,
            "complete": self.complete,
            "stopped_by": self.stopped_by,
            "capacity": {
                "search": self.search,
                "unit": self.unit,
                "slos": self.slos.iter().map(|s| json!({
                    "slo": s.to_string(),
                    "metric": s.metric.name(),
                    "bound": s.bound,
                    "at_most": s.at_most,
                    "implied": s.implied,
                })).collect::<Vec<_>>(),
                "goals": goals,
                "trials": trials,
            },
        })
    }
}

fn status(s: &Status) -> &'static str {
    match s {
        Status::Found => "found",
        Status::FirstTrialFailed => "first_trial_failed",
        Status::GeneratorBound { .. } => "generator_bound",
        Status::Inconsistent { .. } => "inconsistent",
        Status::Unfinished => "unfinished",
        Status::Bounded { .. } => "bounded",
    }
}

fn verdict(v: TrialVerdict) -> &'static str {
    match v {
        TrialVerdict::Pass => "pass",
        TrialVerdict::Fail { .. } => "fail",
        TrialVerdict::Invalid => "invalid",
    }
}

fn quantile(t: &Trial, of: Latency, q: f64) -> String {
    match t.value(Metric::Latency { of, q: Some(q) }) {
        v if v.is_finite() => format_human_ns(v),
        _ => "-".into(),
    }
}

/// Each objective's metric as this trial measured it, by the metric's name: latency in
/// seconds (null when nothing answered), errors and achieved as ratios.
fn objectives(t: &Trial, slos: &[Slo]) -> Value {
    let mut out = serde_json::Map::new();
    for s in slos {
        let v = t.value(s.metric);
        let v = match s.metric {
            Metric::Latency { .. } => v.is_finite().then_some(v / 1e9),
            _ => Some(v),
        };
        out.insert(s.metric.name(), json!(v));
    }
    Value::Object(out)
}

/// Seconds at p50/p90/p99/p99.9/max and the mean, as plots want them.
fn latencies(t: &Trial, of: Latency) -> Value {
    let v = |q: Option<f64>| {
        let x = t.value(Metric::Latency { of, q });
        x.is_finite().then_some(x / 1e9)
    };
    json!({"p50": v(Some(0.5)), "p90": v(Some(0.9)), "p99": v(Some(0.99)),
           "p999": v(Some(0.999)), "max": v(Some(1.0)), "mean": v(None)})
}
