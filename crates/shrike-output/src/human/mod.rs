//! The human reports, as text for people.
//!
//! - `summary` ([`write_summary`], the default of `shrike run`): one screen that leads with the
//!   outcome, the achieved against the requested rate, latency from the schedule and service
//!   time side by side, and the notes that change how to read them.
//! - `human` ([`write`]): the summary, then under `Details` every statistic, every counter
//!   (another tool's included) and the run's start, for people who want everything and for
//!   Nighthawk users who read its full report.
//!
//! Modelled on Nighthawk's human output, with changes users asked for: durations use compact
//! units (`108.3us`, not `0s 000ms 108us`), min and max are printed, a statistic whose samples
//! are all one value is one line, and the report explains results that are skewed
//! (closed-loop blocking, open-loop overflow) instead of leaving users to spot them.

use std::fmt::Write as _;
use std::io;

use shrike_stats::duration::format_human_ns;
use shrike_stats::{RunResult, StatId, StatKind, Statistic};

use crate::table::{Align, Table};
use crate::timestamp::format_rfc3339;
use facts::Facts;

mod facts;
mod notes;
mod summary;

/// The percentiles every statistic's table shows.
pub const QUANTILES: [f64; 9] = [0.0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0];

/// Writes the full human report of `result` to `out`.
pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    // Rendered whole first so the sink sees one write instead of hundreds of small ones.
    out.write_all(render(result).as_bytes())
}

/// Writes the compact summary of `result` to `out`.
pub fn write_summary(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    out.write_all(render_summary(result).as_bytes())
}

/// The compact summary as a string.
pub fn render_summary(result: &RunResult) -> String {
    let mut s = String::new();
    summary::render(&Facts::of(result), &mut s);
    s.push_str(
        "\nEvery statistic and counter: --output-format human (or -o result.json to keep them).\n",
    );
    s
}

/// The full human report as a string: the summary, then the details.
pub fn render(result: &RunResult) -> String {
    let facts = Facts::of(result);
    let mut s = String::new();
    summary::render(&facts, &mut s);
    s.push_str("\nDetails\n-------\n\n");
    details(&facts, &mut s);
    s
}

fn details(f: &Facts, s: &mut String) {
    let g = f.g;
    let _ = writeln!(s, "Started:     {}", format_rfc3339(g.execution_start));
    let _ = writeln!(
        s,
        "Duration:    {} (sending and the last responses)",
        format_human_ns(g.execution_duration.as_nanos() as f64)
    );
    let _ = writeln!(s, "Workers:     {}\n", f.result.workers.len());
    let service = g.stats.get(StatId::RequestToResponse);
    let mut any = false;
    for (id, kind, stat) in g.all_stats() {
        if stat.count() == 0 {
            continue;
        }
        any = true;
        let known = StatId::from_id(id);
        let title = known.map_or(id, |k| k.title());
        if known == Some(StatId::Latency2xx) && same_samples(stat, service) {
            let _ = writeln!(
                s,
                "{title} [{id}]: every response was 2xx, so the same samples as service time \
                 [{}]\n",
                StatId::RequestToResponse.id()
            );
        } else if stat.min() == stat.max() {
            let n = stat.count();
            let v = value(kind, stat.min() as f64);
            match n {
                1 => writeln!(s, "{title} [{id}]: {v} (1 sample)\n"),
                _ => writeln!(s, "{title} [{id}]: {v} in all {n} samples\n"),
            }
            .ok();
        } else {
            statistic(title, id, kind, stat, s);
        }
    }
    if !any {
        s.push_str("No statistic recorded any samples.\n\n");
    }
    counters(f, s);
}

/// Whether two statistics hold exactly the same samples (histograms equal where both have
/// one, else the same moments).
fn same_samples(a: &Statistic, b: &Statistic) -> bool {
    let moments = a.count() == b.count()
        && a.min() == b.min()
        && a.max() == b.max()
        && a.mean() == b.mean()
        && a.pstdev() == b.pstdev();
    match (a.has_histogram(), b.has_histogram()) {
        (true, true) => moments && a.histogram() == b.histogram(),
        _ => moments,
    }
}

/// Formats one value of a statistic in its unit: durations in compact units, sizes in bytes.
fn value(kind: StatKind, v: f64) -> String {
    match kind {
        StatKind::Duration => format_human_ns(v),
        // Sizes are whole bytes except for mean and pstdev, which keep two decimals.
        StatKind::Size if v.fract() == 0.0 => format!("{v:.0}"),
        StatKind::Size => format!("{v:.2}"),
    }
}

fn statistic(title: &str, id: &str, kind: StatKind, stat: &Statistic, s: &mut String) {
    let _ = writeln!(s, "{title} [{id}]");
    let lines = [
        ("samples:", stat.count().to_string()),
        ("mean:", value(kind, stat.mean())),
        ("pstdev:", value(kind, stat.pstdev())),
        ("min:", value(kind, stat.min() as f64)),
        ("max:", value(kind, stat.max() as f64)),
    ];
    for (label, v) in lines {
        let _ = writeln!(s, "  {label:<9}{v}");
    }
    s.push('\n');
    let mut t = Table::new(&[
        ("Percentile", Align::Left),
        ("Count", Align::Right),
        ("Value", Align::Right),
    ]);
    for q in QUANTILES {
        let p = stat.percentile(q);
        t.row(vec![
            format!("{q}"),
            p.count.to_string(),
            value(kind, stat.clamped_quantile(q) as f64),
        ]);
    }
    t.render("  ", s);
    s.push('\n');
}

/// Every non-zero counter, another tool's included. Per-second figures over the execution
/// window only when rates mean something; byte counters per second in binary units.
fn counters(f: &Facts, s: &mut String) {
    let counters = f.g.counters.non_zero_named();
    if counters.is_empty() {
        s.push_str("No counter was incremented.\n");
        return;
    }
    let secs = f.g.execution_duration.as_secs_f64();
    let per_second = f.rates_mean_something() && secs > 0.0;
    let mut headers = vec![("Counter", Align::Left), ("Value", Align::Right)];
    if per_second {
        headers.push(("Per second", Align::Right));
    }
    let mut t = Table::new(&headers);
    for (name, v) in counters {
        let rate = v as f64 / secs;
        let rate = if name.ends_with("bytes_total") {
            format!("{}/s", facts::bytes(rate))
        } else {
            format!("{rate:.2}")
        };
        t.row(vec![name.to_string(), v.to_string(), rate]);
    }
    t.render("", s);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_plain_bytes() {
        assert_eq!(value(StatKind::Size, 1234.0), "1234");
        assert_eq!(value(StatKind::Size, 12.345), "12.35");
        assert_eq!(value(StatKind::Duration, 108_312.0), "108.3us");
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::summary::outcome;
    use shrike_stats::{Counter, Failure, Verdict, WorkerResult};
    use std::time::SystemTime;

    fn worker() -> WorkerResult {
        WorkerResult::new("global", SystemTime::UNIX_EPOCH)
    }

    #[test]
    fn errors_are_not_hidden_behind_the_rate() {
        let mut g = worker();
        g.counters.add(Counter::RqTotal, 1000);
        g.status_codes.add(200, 800);
        g.status_codes.add(503, 200);
        assert_eq!(
            outcome(&g, 1000, &Verdict::Succeeded),
            "800 of 1000 requests succeeded (80.0%); 503 × 200"
        );
        // A failed run says so before its counts, however good they look.
        let failed = Verdict::Failed {
            why: Failure::Predicate("benchmark.http_5xx:0".into()),
            first_error: None,
        };
        assert_eq!(
            outcome(&g, 1000, &failed),
            "FAILED (failure predicate benchmark.http_5xx:0 fired): 800 of 1000 requests \
             succeeded (80.0%); 503 × 200"
        );
        g.counters.add(Counter::RqTimeout, 3);
        g.counters.add(Counter::StreamResets, 2);
        assert_eq!(
            outcome(&g, 1000, &Verdict::Succeeded),
            "800 of 1000 requests succeeded (80.0%); 503 × 200, timed out × 3, reset or broken × 2"
        );
    }

    #[test]
    fn a_run_where_nothing_completed_says_so() {
        let mut g = worker();
        g.counters.add(Counter::RqTotal, 25);
        g.counters.add(Counter::RqTimeout, 25);
        assert_eq!(outcome(&g, 25, &Verdict::Succeeded), "NO REQUEST COMPLETED: timed out × 25");
        let mut refused = worker();
        refused.counters.add(Counter::PoolConnectionFailure, 4);
        assert_eq!(
            outcome(&refused, 0, &Verdict::Succeeded),
            "NO REQUEST COMPLETED: could not connect × 4"
        );
        assert_eq!(outcome(&worker(), 0, &Verdict::Succeeded), "NO REQUEST WAS SENT");
    }

    #[test]
    fn the_share_counts_every_request_released() {
        // Requests that never got a connection, or no room in the pool, were not answered:
        // the share is of everything the schedule released.
        let mut g = worker();
        g.counters.add(Counter::RqTotal, 10);
        g.counters.add(Counter::Http2xx, 10);
        g.status_codes.add(200, 10);
        g.counters.add(Counter::PoolConnectionFailure, 10);
        assert_eq!(
            outcome(&g, 10, &Verdict::Succeeded),
            "10 of 20 requests succeeded (50.0%); could not connect × 10"
        );
        g.counters.add(Counter::PoolOverflow, 580);
        assert_eq!(
            outcome(&g, 10, &Verdict::Succeeded),
            "10 of 600 requests succeeded (1.7%); could not connect × 10, not sent (pool \
             overflow) × 580"
        );
        // Queued when the run ended (or still in flight past the grace): released, never
        // answered.
        g.counters.add(Counter::RqCancelled, 400);
        assert_eq!(
            outcome(&g, 10, &Verdict::Succeeded),
            "10 of 1000 requests succeeded (1.0%); could not connect × 10, not sent (pool \
             overflow) × 580, cancelled at the run's end (queued, or in flight past the grace) × \
             400"
        );
    }
}

#[cfg(test)]
mod lateness_tests {
    use shrike_stats::{Counter, RunResult, StatId, Termination, WorkerResult};
    use std::time::{Duration, SystemTime};

    fn result(options: serde_json::Value, late_ns: &[u64]) -> RunResult {
        let mut g = WorkerResult::new("worker_0", SystemTime::UNIX_EPOCH);
        g.execution_duration = Duration::from_secs(1);
        for &l in late_ns {
            g.stats.record(StatId::SendLateness, l);
            g.stats.record(StatId::RequestToResponse, 200_000);
            g.stats.record(StatId::ScheduledToResponse, 200_000 + l);
        }
        g.counters.add(Counter::RqTotal, late_ns.len() as u64);
        g.counters.add(Counter::Http2xx, late_ns.len() as u64);
        g.status_codes.add(200, late_ns.len() as u64);
        RunResult::new(options, vec![g], Termination::Completed)
    }

    fn lateness_row(r: &RunResult) -> Option<String> {
        super::render_summary(r).lines().find(|l| l.starts_with("Lateness:")).map(str::to_string)
    }

    #[test]
    fn lateness_is_shown_when_it_matters_and_an_exceeded_budget_says_by_how_much() {
        let paced = serde_json::json!({"requests_per_second": 100.0});
        // 50 µs late, against 200 µs of service time: nothing to say.
        assert_eq!(lateness_row(&result(paced.clone(), &[50_000; 100])), None);
        // A p99 of 3 ms is the client's share of latency from the schedule, whatever the
        // idle strategy: shown.
        let mut late = vec![50_000; 97];
        late.extend([3_000_000; 3]);
        let row = lateness_row(&result(paced, &late)).expect("a row");
        assert!(row.contains("p99 3.000ms"), "{row}");
        // A budget exceeded: by how much, for how many.
        let budget = serde_json::json!({"requests_per_second": 100.0, "max_lateness": "1ms"});
        let row = lateness_row(&result(budget, &late)).expect("a row");
        assert!(
            row.contains("(--max-lateness 1ms); OVER BUDGET by up to 2.000ms (3 requests)"),
            "{row}"
        );
        // Unpaced, a wait for a connection is no lateness.
        let unpaced = serde_json::json!({"requests_per_second": "max"});
        assert_eq!(lateness_row(&result(unpaced, &late)), None);
    }
}
