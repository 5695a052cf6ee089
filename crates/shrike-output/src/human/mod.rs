//! The human report: the global result as aligned plain text.
//!
//! Modelled on Nighthawk's human output, with three changes users asked for: durations use
//! compact units (`108.3us`, not `0s 000ms 108us`), min and max are printed, and the report
//! explains results that are skewed (closed-loop blocking, open-loop overflow) instead of
//! leaving users to spot them in the counters.

use std::fmt::Write as _;
use std::io;

use serde_json::Value;
use shrike_stats::duration::format_human_ns;
use shrike_stats::{Counter, RunResult, StatId, StatKind, Statistic, WorkerResult};

use crate::table::{Align, Table};
use crate::timestamp::format_rfc3339;

/// The percentiles every statistic's table shows.
pub const QUANTILES: [f64; 9] = [0.0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0];

/// Option keys that name the target, in preference order (`uri` is Nighthawk's name).
const TARGET_KEYS: [&str; 3] = ["uri", "url", "target"];

/// Writes the human report of `result` to `out`.
pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    // Rendered whole first so the sink sees one write instead of hundreds of small ones.
    out.write_all(render(result).as_bytes())
}

/// The human report of `result` as a string.
pub fn render(result: &RunResult) -> String {
    let mut s = String::new();
    header(result, &mut s);
    let global = &result.global;
    let mut any = false;
    for (id, stat) in global.stats.iter() {
        if stat.count() > 0 {
            statistic(id, stat, &mut s);
            any = true;
        }
    }
    if !any {
        s.push_str("No statistic recorded any samples.\n\n");
    }
    counters(global, &mut s);
    notes(result, &mut s);
    s
}

/// Requests sent per second over the global execution window.
fn achieved_rate(g: &WorkerResult) -> Option<f64> {
    let secs = g.execution_duration.as_secs_f64();
    (secs > 0.0).then(|| requests(g) as f64 / secs)
}

/// Requests sent: `upstream_rq_total`, or the responses when a result lacks the counter.
fn requests(g: &WorkerResult) -> u64 {
    match g.counters.get(Counter::RqTotal) {
        0 => g.stats.get(StatId::RequestToResponse).count(),
        n => n,
    }
}

/// A rate as users write it: whole numbers plain, others with one decimal.
fn rate(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{r:.0}/s")
    } else {
        format!("{r:.1}/s")
    }
}

fn header(result: &RunResult, s: &mut String) {
    let g = &result.global;
    s.push_str(concat!("Shrike ", env!("CARGO_PKG_VERSION"), ": layer 7 load test results\n\n"));
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(target) = target(&result.options) {
        rows.push(("Target:", target));
    }
    rows.push(("Outcome:", outcome(g)));
    rows.push(("Termination:", result.termination.describe()));
    rows.push(("Started:", format_rfc3339(g.execution_start)));
    rows.push(("Duration:", format_human_ns(g.execution_duration.as_nanos() as f64)));
    rows.push(("Workers:", result.workers.len().to_string()));
    let workers = result.workers.len().max(1);
    match (crate::options::requested_rate(result), achieved_rate(g)) {
        (Some(req), Some(ach)) => rows.push((
            "Rate:",
            format!(
                "{} achieved of {} requested ({} per worker × {workers}), {:.1}%",
                rate(ach),
                rate(req),
                rate(req / workers as f64),
                100.0 * ach / req
            ),
        )),
        (None, Some(ach)) => rows.push(("Rate:", format!("{} achieved", rate(ach)))),
        _ => {}
    }
    let opened = g.counters.get(Counter::CxTotal);
    match result.options.get("connections").and_then(Value::as_u64) {
        Some(limit) => rows.push((
            "Connections:",
            format!(
                "{opened} opened (limit {limit} per worker × {workers} = {})",
                limit * workers as u64
            ),
        )),
        None => rows.push(("Connections:", format!("{opened} opened"))),
    }
    for (label, value) in rows {
        // Writing into a String cannot fail.
        let _ = writeln!(s, "{label:<13}{value}");
    }
    s.push('\n');
}

/// What came of the requests, before any rate: how many succeeded (a 1xx–3xx answer), and every
/// kind of error with its count, exact status codes included. A run in which nothing
/// completed says so in as many words.
fn outcome(g: &WorkerResult) -> String {
    let c = &g.counters;
    let sent = requests(g);
    let codes = g.status_codes.non_zero();
    // Exact codes where the result has them; results without them (older ones, other tools')
    // still have the class counters.
    let (ok, answered, mut errors): (u64, u64, Vec<String>) = if codes.is_empty() {
        let ok =
            [Counter::Http1xx, Counter::Http2xx, Counter::Http3xx].map(|k| c.get(k)).iter().sum();
        let bad = [
            (Counter::Http4xx, "4xx"),
            (Counter::Http5xx, "5xx"),
            (Counter::HttpXxx, "other status"),
        ];
        let errors = bad
            .iter()
            .filter(|(k, _)| c.get(*k) > 0)
            .map(|(k, name)| format!("{name} × {}", c.get(*k)))
            .collect();
        (ok, ok + bad.iter().map(|(k, _)| c.get(*k)).sum::<u64>(), errors)
    } else {
        let ok = codes.iter().filter(|(code, _)| *code < 400).map(|x| x.1).sum();
        let errors = codes
            .iter()
            .filter(|(code, _)| *code >= 400)
            .map(|(code, n)| format!("{code} × {n}"))
            .collect();
        (ok, g.status_codes.total(), errors)
    };
    for (counter, what) in [
        (Counter::RqTimeout, "timed out"),
        (Counter::StreamResets, "reset or broken"),
        (Counter::PoolConnectionFailure, "could not connect"),
        (Counter::PoolOverflow, "not sent (pool overflow)"),
    ] {
        let n = c.get(counter);
        if n > 0 {
            errors.push(format!("{what} × {n}"));
        }
    }
    let errors = if errors.is_empty() { "no errors".to_string() } else { errors.join(", ") };
    if answered == 0 {
        return match sent + c.get(Counter::PoolConnectionFailure) + c.get(Counter::PoolOverflow) {
            0 => "no request was sent".into(),
            _ => format!("NO REQUEST COMPLETED: {errors}"),
        };
    }
    let pct = 100.0 * ok as f64 / sent.max(answered) as f64;
    format!("{ok} of {} requests succeeded ({pct:.1}%); {errors}", sent.max(answered))
}

/// The benchmarked target, if the options name one.
fn target(options: &Value) -> Option<String> {
    TARGET_KEYS.iter().find_map(|k| match options.get(k)? {
        Value::String(t) if !t.is_empty() => Some(t.clone()),
        Value::Array(list) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            (!names.is_empty()).then(|| names.join(", "))
        }
        _ => None,
    })
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

fn statistic(id: StatId, stat: &Statistic, s: &mut String) {
    let kind = id.kind();
    let _ = writeln!(s, "{} [{}]", id.title(), id.id());
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
        // The histogram reports a bucket's edge (3 significant digits), which can fall just
        // outside the exact extremes: p100 of 4.000ms reads 4.002ms. No sample lies outside
        // [min, max], so clamping only moves a value closer to the truth.
        // Not `clamp`, which panics if min > max (possible in a hand-built `Statistic`).
        let v = p.value.max(stat.min()).min(stat.max());
        t.row(vec![format!("{q}"), p.count.to_string(), value(kind, v as f64)]);
    }
    t.render("  ", s);
    s.push('\n');
}

fn counters(g: &WorkerResult, s: &mut String) {
    let counters = g.counters.non_zero();
    if counters.is_empty() {
        s.push_str("No counter was incremented.\n");
        return;
    }
    let secs = g.execution_duration.as_secs_f64();
    let mut t = Table::new(&[
        ("Counter", Align::Left),
        ("Value", Align::Right),
        ("Per second", Align::Right),
    ]);
    for (c, v) in counters {
        // A zero-length window has no meaningful rate; print a dash rather than "inf".
        let rate = if secs > 0.0 { format!("{:.2}", v as f64 / secs) } else { "-".into() };
        t.row(vec![c.name().to_string(), v.to_string(), rate]);
    }
    t.render("", s);
}

/// Blocked or dropped requests at or above this share of all requests skew the results.
const SIGNIFICANT_SHARE: f64 = 0.01;
/// An achieved rate below this share of the requested one means the load was not offered.
const RATE_SHORTFALL: f64 = 0.95;

/// One sentence on whether blocking and overflow invalidate the run, or `None` when there was
/// neither or too little to matter.
fn what_it_means(result: &RunResult) -> Option<String> {
    let g = &result.global;
    let blocked = g.stats.get(StatId::SequencerBlocking).count();
    let dropped = g.counters.get(Counter::PoolOverflow);
    if blocked == 0 && dropped == 0 {
        return None;
    }
    let sent = requests(g);
    let blocked_share = blocked as f64 / sent.max(1) as f64;
    let dropped_share = dropped as f64 / (sent + dropped).max(1) as f64;
    let ratio =
        crate::options::requested_rate(result).zip(achieved_rate(g)).map(|(req, ach)| ach / req);
    let short = ratio.is_some_and(|r| r < RATE_SHORTFALL);
    if blocked_share < SIGNIFICANT_SHARE && dropped_share < SIGNIFICANT_SHARE && !short {
        return Some(format!(
            "What this means: blocking and overflow were rare (under {:.0}% of requests), so \
             the results describe the requested load.",
            SIGNIFICANT_SHARE * 100.0
        ));
    }
    let mut why = Vec::new();
    if blocked > 0 {
        why.push(format!("{:.1}% of requests waited for a connection", 100.0 * blocked_share));
    }
    if dropped > 0 {
        why.push(format!("{:.1}% were dropped", 100.0 * dropped_share));
    }
    if let Some(r) = ratio {
        why.push(format!("{:.1}% of the requested rate was achieved", 100.0 * r));
    }
    Some(format!(
        "What this means: the results are skewed: {}. The latencies above describe the load \
         that was actually offered, which is lighter than the one requested; do not read them \
         as the service's latency at the requested rate.",
        why.join(", ")
    ))
}

/// Explains conditions that make the numbers above misleading.
fn notes(result: &RunResult, s: &mut String) {
    let g = &result.global;
    let mut notes: Vec<String> = Vec::new();
    let blocking = g.stats.get(StatId::SequencerBlocking);
    if blocking.count() > 0 {
        let total_ns = blocking.mean() * blocking.count() as f64;
        notes.push(format!(
            "The closed loop waited for a free connection before {} requests, {} in total \
             ({}). Results are skewed when blocking is significant: the target rate was not \
             offered. Add connections, or use an open loop to measure latency at a fixed rate.",
            blocking.count(),
            format_human_ns(total_ns),
            StatId::SequencerBlocking.id(),
        ));
    }
    let overflow = g.counters.get(Counter::PoolOverflow);
    if overflow > 0 {
        notes.push(format!(
            "{overflow} requests were dropped by open-loop overflow ({}): no connection or \
             pending slot was free when they were due, so the achieved rate is below the \
             requested rate. Add connections or allow pending requests.",
            Counter::PoolOverflow.name(),
        ));
    }
    notes.extend(what_it_means(result));
    if notes.is_empty() {
        return;
    }
    s.push_str("\nNotes:\n");
    for n in notes {
        wrap(&n, NOTE_WIDTH, "  - ", "    ", s);
    }
}

/// Notes are prose; wrap them to a width that reads well in an 80-100 column terminal.
const NOTE_WIDTH: usize = 90;

/// Greedy word wrap: `first` prefixes the first line, `rest` the following ones. A word longer
/// than the width gets a line of its own rather than being split.
fn wrap(text: &str, width: usize, first: &str, rest: &str, out: &mut String) {
    let mut line = String::from(first);
    let mut line_len = first.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let word_len = word.chars().count();
        if !empty && line_len + 1 + word_len > width {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
            line_len = rest.chars().count();
            empty = true;
        }
        if !empty {
            line.push(' ');
            line_len += 1;
        }
        line.push_str(word);
        line_len += word_len;
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_prefers_uri_and_joins_lists() {
        assert_eq!(
            target(&json!({"uri": "http://a/", "url": "http://b/"})).as_deref(),
            Some("http://a/")
        );
        assert_eq!(target(&json!({"url": ["x", "y"]})).as_deref(), Some("x, y"));
        assert_eq!(target(&json!({"uri": ""})), None);
        assert_eq!(target(&json!(null)), None);
    }

    #[test]
    fn wraps_notes_with_hanging_indent() {
        let mut out = String::new();
        wrap("aaa bbb ccc dddddddddddd e", 12, "  - ", "    ", &mut out);
        assert_eq!(out, "  - aaa bbb\n    ccc\n    dddddddddddd\n    e\n");
        let mut out = String::new();
        wrap("", 12, "  - ", "    ", &mut out);
        assert_eq!(out, "  - \n");
    }

    #[test]
    fn sizes_print_plain_bytes() {
        assert_eq!(value(StatKind::Size, 1234.0), "1234");
        assert_eq!(value(StatKind::Size, 12.345), "12.35");
        assert_eq!(value(StatKind::Duration, 108_312.0), "108.3us");
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::*;
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
        assert_eq!(outcome(&g), "800 of 1000 requests succeeded (80.0%); 503 × 200");
        g.counters.add(Counter::RqTimeout, 3);
        g.counters.add(Counter::StreamResets, 2);
        assert_eq!(
            outcome(&g),
            "800 of 1000 requests succeeded (80.0%); 503 × 200, timed out × 3, reset or broken × 2"
        );
    }

    #[test]
    fn a_run_where_nothing_completed_says_so() {
        let mut g = worker();
        g.counters.add(Counter::RqTotal, 25);
        g.counters.add(Counter::RqTimeout, 25);
        assert_eq!(outcome(&g), "NO REQUEST COMPLETED: timed out × 25");
        let mut refused = worker();
        refused.counters.add(Counter::PoolConnectionFailure, 4);
        assert_eq!(outcome(&refused), "NO REQUEST COMPLETED: could not connect × 4");
        assert_eq!(outcome(&worker()), "no request was sent");
    }
}
