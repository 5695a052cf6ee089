//! Service-level objectives as users write them: `p99<=20ms`, `p99.9<=100ms`,
//! `service.p99<=5ms`, `mean<=2ms`, `errors<=0.1%`, `achieved>=99%`.
//!
//! Latency objectives judge scheduled-to-response latency (coordinated-omission-free) unless
//! prefixed `service.`, which judges service time (actual send to response end).

use std::fmt;
use std::time::Duration;

use shrike_stats::duration::{format_human_ns, parse_duration};

/// Which latency an objective judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Latency {
    /// Scheduled send to response end: what a user arriving on schedule sees.
    Scheduled,
    /// Actual send to response end: what wrk and ab report.
    Service,
}

/// What an objective measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// A latency percentile (`q` in 0..=1; 1 is the max), or the mean when `q` is `None`.
    Latency { of: Latency, q: Option<f64> },
    /// Requests the server failed (4xx, 5xx, resets, timeouts, connection failures) over the
    /// requests tried. Client overflow is judged apart (see the trial's verdict).
    Errors,
    /// Achieved over offered load.
    Achieved,
}

impl Metric {
    /// Its name as objectives and reports spell it: `p99`, `p99.9`, `service.p50`, `mean`,
    /// `max`, `errors`, `achieved`.
    pub fn name(&self) -> String {
        match self {
            Metric::Latency { of, q } => {
                let prefix = if *of == Latency::Service { "service." } else { "" };
                match q {
                    None => format!("{prefix}mean"),
                    Some(q) if *q >= 1.0 => format!("{prefix}max"),
                    Some(q) => {
                        let p = format!("{:.4}", q * 100.0);
                        format!("{prefix}p{}", p.trim_end_matches('0').trim_end_matches('.'))
                    }
                }
            }
            Metric::Errors => "errors".into(),
            Metric::Achieved => "achieved".into(),
        }
    }

    /// Objectives on the same metric with different bounds are separate goals; objectives on
    /// different metrics hold together.
    pub fn key(&self) -> String {
        match self {
            Metric::Latency { of, q } => format!("{of:?}/{q:?}"),
            Metric::Errors => "errors".into(),
            Metric::Achieved => "achieved".into(),
        }
    }
}

/// One objective: a metric and the bound it must stay within.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub metric: Metric,
    /// Nanoseconds for latency; a ratio (0.001 for 0.1%) for errors and achieved.
    pub bound: f64,
    /// `<=` (an upper bound) or `>=` (a lower one).
    pub at_most: bool,
    /// As the user wrote it, normalized (`p99<=20ms`).
    text: String,
    /// Not the user's: the errors objective every search holds when none was given
    /// ([`Slo::default_errors`]). It judges trials, and stays out of goal names.
    pub implied: bool,
}

/// The error ratio a trial may have when the user gave no errors objective: a latency goal
/// met by error responses says nothing about the service.
pub const DEFAULT_ERRORS: f64 = 0.01;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--slo {given:?}: {reason}")]
pub struct SloError {
    pub given: String,
    pub reason: String,
}

impl Slo {
    pub fn parse(input: &str) -> Result<Slo, SloError> {
        let err = |reason: &str| SloError { given: input.to_string(), reason: reason.to_string() };
        let s: String = input.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs, at_most) = if let Some((l, r)) = s.split_once("<=") {
            (l, r, true)
        } else if let Some((l, r)) = s.split_once(">=") {
            (l, r, false)
        } else if let Some((l, r)) = s.split_once('<') {
            (l, r, true)
        } else if let Some((l, r)) = s.split_once('>') {
            (l, r, false)
        } else {
            return Err(err("expected METRIC<=BOUND, e.g. p99<=20ms, errors<=0.1%, achieved>=99%"));
        };
        let lhs = lhs.to_ascii_lowercase();
        let metric = match lhs.as_str() {
            "errors" | "error" | "error_rate" => Metric::Errors,
            "achieved" => Metric::Achieved,
            _ => {
                let (of, name) = match lhs.strip_prefix("service.") {
                    Some(rest) => (Latency::Service, rest),
                    None => (Latency::Scheduled, lhs.strip_prefix("latency.").unwrap_or(&lhs)),
                };
                Metric::Latency {
                    of,
                    q: quantile(name).ok_or_else(|| {
                        err("unknown metric: expected pNN (p50, p99, p99.9), mean or max, \
                         optionally prefixed service.; or errors, or achieved")
                    })?,
                }
            }
        };
        let bound = match metric {
            Metric::Latency { .. } => {
                if !at_most {
                    return Err(err("a latency objective is an upper bound: use <="));
                }
                // A bare number would read as seconds (`p99<=50` as 50 s), which is never
                // what someone who writes it means: ask for the unit.
                if !rhs.is_empty() && rhs.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    return Err(err(&format!("give a unit: {rhs}ms?")));
                }
                let d = parse_duration(rhs).map_err(|e| err(&e.to_string()))?;
                if d.is_zero() {
                    return Err(err("a latency bound of 0 cannot be met"));
                }
                d.as_nanos() as f64
            }
            Metric::Errors | Metric::Achieved => {
                let pct =
                    rhs.strip_suffix('%').ok_or_else(|| err("expected a percentage, e.g. 0.1%"))?;
                let v: f64 = pct.parse().map_err(|_| err("expected a percentage, e.g. 0.1%"))?;
                if !(0.0..=100.0).contains(&v) {
                    return Err(err("a percentage lies between 0% and 100%"));
                }
                if matches!(metric, Metric::Errors) != at_most {
                    return Err(err(if at_most {
                        "achieved is a lower bound: use >="
                    } else {
                        "errors is an upper bound: use <="
                    }));
                }
                v / 100.0
            }
        };
        let name = metric.name();
        let text = match metric {
            Metric::Latency { .. } => format!("{name}<={}", format_human_ns(bound)),
            _ => format!("{name}{}{}%", if at_most { "<=" } else { ">=" }, bound * 100.0),
        };
        Ok(Slo { metric, bound, at_most, text, implied: false })
    }

    /// `errors<=1%`, the objective a search holds when the user gave none on errors.
    pub fn default_errors() -> Slo {
        Slo {
            metric: Metric::Errors,
            bound: DEFAULT_ERRORS,
            at_most: true,
            text: format!("errors<={}%", DEFAULT_ERRORS * 100.0),
            implied: true,
        }
    }

    /// Whether `value` (in the metric's unit) meets the objective.
    pub fn met_by(&self, value: f64) -> bool {
        if self.at_most {
            value <= self.bound
        } else {
            value >= self.bound
        }
    }

    /// How far `value` is from the bound, relative to it: negative inside, positive outside.
    /// A trial that fails by less than a few percent is a narrow failure, worth repeating.
    pub fn margin(&self, value: f64) -> f64 {
        let b = self.bound.max(f64::MIN_POSITIVE);
        if self.at_most {
            (value - self.bound) / b
        } else {
            (self.bound - value) / b
        }
    }

    /// A latency bound as a duration (for plots and messages).
    pub fn latency_bound(&self) -> Option<Duration> {
        matches!(self.metric, Metric::Latency { .. })
            .then(|| Duration::from_nanos(self.bound as u64))
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `p99` → 0.99, `p99.9` → 0.999, `p50` → 0.5, `max` → 1, `mean` → None (as `Some(None)`).
/// `p999` and `p9999` are p99.9 and p99.99, as Shrike's own JSON and statsd names spell them.
fn quantile(name: &str) -> Option<Option<f64>> {
    match name {
        "mean" | "avg" => return Some(None),
        "max" => return Some(Some(1.0)),
        _ => {}
    }
    let digits = name.strip_prefix('p')?;
    let p: f64 = digits.parse().ok()?;
    // Digits past 100 without a point (999, 9999, 995): the point goes after the first two.
    let p = match p > 100.0 && digits.bytes().all(|b| b.is_ascii_digit()) {
        true => format!("{}.{}", &digits[..2], &digits[2..]).parse().ok()?,
        false => p,
    };
    // Rounded: 99.9 / 100 computes as 0.9990000000000001.
    (p > 0.0 && p <= 100.0).then_some(Some((p / 100.0 * 1e9).round() / 1e9))
}

/// Groups objectives into goals: objectives on one metric with different bounds are
/// alternatives (the max rate for p99 ≤ 10 ms, and for p99 ≤ 50 ms), each its own goal;
/// objectives on different metrics hold together in every goal.
pub fn goals(slos: &[Slo]) -> Vec<Vec<Slo>> {
    let mut by_metric: Vec<(String, Vec<Slo>)> = Vec::new();
    for s in slos {
        match by_metric.iter_mut().find(|(k, _)| *k == s.metric.key()) {
            Some((_, v)) if !v.contains(s) => v.push(s.clone()),
            Some(_) => {}
            None => by_metric.push((s.metric.key(), vec![s.clone()])),
        }
    }
    let mut goals: Vec<Vec<Slo>> = vec![Vec::new()];
    for (_, alternatives) in by_metric {
        goals = goals
            .iter()
            .flat_map(|g| {
                alternatives.iter().map(move |a| {
                    let mut g = g.clone();
                    g.push(a.clone());
                    g
                })
            })
            .collect();
    }
    goals.retain(|g| !g.is_empty());
    goals
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_users_write() {
        let s = Slo::parse("p99<=20ms").unwrap();
        assert_eq!(s.metric, Metric::Latency { of: Latency::Scheduled, q: Some(0.99) });
        assert_eq!(s.bound, 20e6);
        assert_eq!(s.to_string(), "p99<=20.00ms");
        let s = Slo::parse(" service.p99.9 <= 250us ").unwrap();
        assert_eq!(s.metric, Metric::Latency { of: Latency::Service, q: Some(0.999) });
        assert_eq!(s.bound, 250e3);
        assert_eq!(
            Slo::parse("mean<=1ms").unwrap().metric,
            Metric::Latency { of: Latency::Scheduled, q: None }
        );
        assert_eq!(
            Slo::parse("max<=1s").unwrap().metric,
            Metric::Latency { of: Latency::Scheduled, q: Some(1.0) }
        );
        // Shrike's JSON and statsd spell p99.9 as p999.
        assert_eq!(Slo::parse("p999<=50ms").unwrap(), Slo::parse("p99.9<=50ms").unwrap());
        assert_eq!(
            Slo::parse("service.p9999<=1s").unwrap().metric,
            Metric::Latency { of: Latency::Service, q: Some(0.9999) }
        );
        assert_eq!(Slo::parse("p100<=1s").unwrap().metric, Slo::parse("max<=1s").unwrap().metric);
        let e = Slo::parse("errors<=0.1%").unwrap();
        assert_eq!((e.metric, e.at_most), (Metric::Errors, true));
        assert!((e.bound - 0.001).abs() < 1e-12);
        assert!(e.met_by(0.001) && !e.met_by(0.0011));
        let a = Slo::parse("achieved>=99%").unwrap();
        assert!(a.met_by(0.995) && !a.met_by(0.98));
        assert!((a.margin(0.98) - 0.0101).abs() < 1e-3);
    }

    #[test]
    fn bad_objectives_name_the_problem() {
        for (bad, why) in [
            ("p99", "expected METRIC<=BOUND"),
            ("p9x<=1ms", "unknown metric"),
            ("p99<=50", "give a unit: 50ms?"),
            ("q99<=1ms", "unknown metric"),
            ("p99>=1ms", "upper bound"),
            ("p99<=fast", "invalid duration"),
            ("p99<=0ms", "cannot be met"),
            ("errors<=0.1", "percentage"),
            ("errors>=1%", "use <="),
            ("achieved<=99%", "use >="),
            ("achieved>=120%", "between 0% and 100%"),
        ] {
            let e = Slo::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn alternatives_on_one_metric_are_separate_goals() {
        let p = |s: &str| Slo::parse(s).unwrap();
        let g = goals(&[p("p99<=10ms"), p("errors<=1%"), p("p99<=50ms")]);
        let names: Vec<Vec<String>> =
            g.iter().map(|g| g.iter().map(|s| s.to_string()).collect()).collect();
        assert_eq!(names, [vec!["p99<=10.00ms", "errors<=1%"], vec!["p99<=50.00ms", "errors<=1%"]]);
        assert_eq!(goals(&[p("p99<=10ms"), p("p99<=10ms")]).len(), 1);
        assert!(goals(&[]).is_empty());
    }
}
