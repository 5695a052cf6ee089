//! stderr telemetry: the progress line (terminals only) and the periodic interval reports.
//! Both live in one observer because they share the terminal: a report first clears the
//! progress line, which the next tick redraws.
//!
//! A report follows Apiary's tally/series idea: each count is given for the interval and as a
//! running total, with its rate; each latency is the interval's distribution, with the change
//! since the previous interval.

use std::collections::VecDeque;
use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use shrike_engine::{Observer, Sample};
use shrike_stats::duration::format_human_ns;
use shrike_stats::{Counter, Counters, Statistic};

/// How interval reports are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One aligned text line per interval.
    Text,
    /// One JSON object per line (JSONL).
    Jsonl,
}

/// The progress line's rate and percentiles cover about this much recent time.
const PROGRESS_WINDOW: Duration = Duration::from_secs(1);
/// Minimum time between two redraws.
const REDRAW_EVERY: Duration = Duration::from_millis(240);
const CLEAR_LINE: &str = "\r\x1b[2K";

/// The numbers a report compares with the previous interval's.
#[derive(Clone, Copy)]
struct Previous {
    rps: f64,
    sched_p50: u64,
    sched_p99: u64,
    service_p99: u64,
}

pub struct Console {
    progress: bool,
    reports: Option<Mode>,
    run_duration: Option<Duration>,
    recent: VecDeque<Sample>,
    /// Running totals, over ticks (progress) and over intervals (reports).
    tick_totals: Counters,
    totals: Counters,
    index: u64,
    previous: Option<Previous>,
    drawn: bool,
    last_draw: Option<Instant>,
}

impl Console {
    pub fn new(progress: bool, reports: Option<Mode>, run_duration: Option<Duration>) -> Console {
        Console {
            progress,
            reports,
            run_duration,
            recent: VecDeque::new(),
            tick_totals: Counters::new(),
            totals: Counters::new(),
            index: 0,
            previous: None,
            drawn: false,
            last_draw: None,
        }
    }

    fn clear(&mut self, err: &mut impl std::io::Write) {
        if self.drawn {
            let _ = write!(err, "{CLEAR_LINE}");
            self.drawn = false;
        }
    }

    fn progress_line(&self, tick: &Sample) -> String {
        let elapsed = tick.start + tick.duration;
        let mut sched = Statistic::new();
        let mut requests = 0;
        let mut span = Duration::ZERO;
        for s in &self.recent {
            sched.merge(&s.scheduled_to_response);
            requests += s.counters.get(Counter::RqTotal);
            span += s.duration;
        }
        let rps = if span.is_zero() { 0.0 } else { requests as f64 / span.as_secs_f64() };
        let time = match self.run_duration {
            Some(d) => format!(
                "{:.1}s/{:.1}s ({:.1}s left)",
                elapsed.as_secs_f64(),
                d.as_secs_f64(),
                d.saturating_sub(elapsed).as_secs_f64()
            ),
            None => format!("{:.1}s", elapsed.as_secs_f64()),
        };
        let latency = if sched.count() == 0 {
            "p50 -  p99 -".to_string()
        } else {
            format!(
                "p50 {}  p99 {}",
                format_human_ns(sched.clamped_quantile(0.5) as f64),
                format_human_ns(sched.clamped_quantile(0.99) as f64)
            )
        };
        format!(
            "[shrike] {time}  {rps:.0} rps  {latency}  requests {}  errors {}",
            self.tick_totals.get(Counter::RqTotal),
            super::errors(&self.tick_totals)
        )
    }

    fn report(&mut self, s: &Sample, mode: Mode) -> String {
        self.totals.merge(&s.counters);
        let secs = s.duration.as_secs_f64();
        let requests = s.counters.get(Counter::RqTotal);
        let rps = if secs > 0.0 { requests as f64 / secs } else { 0.0 };
        let (sched, service) = (&s.scheduled_to_response, &s.request_to_response);
        let now = Previous {
            rps,
            sched_p50: sched.clamped_quantile(0.5),
            sched_p99: sched.clamped_quantile(0.99),
            service_p99: service.clamped_quantile(0.99),
        };
        let prev = self.previous.replace(now);
        let index = self.index;
        self.index += 1;
        match mode {
            Mode::Text => text_report(index, s, &self.totals, rps, &now, prev.as_ref()),
            Mode::Jsonl => jsonl_report(index, s, &self.totals, rps, &now, prev.as_ref()),
        }
    }
}

impl Observer for Console {
    fn tick(&mut self, tick: &Sample) {
        if !self.progress {
            return;
        }
        self.tick_totals.merge(&tick.counters);
        self.recent.push_back(tick.clone());
        while self.recent.len() > 1
            && self.recent.iter().skip(1).map(|s| s.duration).sum::<Duration>() >= PROGRESS_WINDOW
        {
            self.recent.pop_front();
        }
        if tick.last || self.last_draw.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        let line = self.progress_line(tick);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{CLEAR_LINE}{line}");
        let _ = err.flush();
        self.drawn = true;
        self.last_draw = Some(Instant::now());
    }

    fn interval(&mut self, s: &Sample) {
        let Some(mode) = self.reports else { return };
        let line = self.report(s, mode);
        let mut err = std::io::stderr().lock();
        self.clear(&mut err);
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }

    fn finish(&mut self) {
        let mut err = std::io::stderr().lock();
        self.clear(&mut err);
        let _ = err.flush();
    }
}

fn ns(v: u64) -> String {
    format_human_ns(v as f64)
}

fn signed_ns(d: i128) -> String {
    let sign = if d < 0 { "-" } else { "+" };
    format!("{sign}{}", format_human_ns(d.unsigned_abs() as f64))
}

/// Percentiles are clamped to the exact range, so none is printed above the `max` beside it
/// (the histogram answers with a bucket's top edge).
fn dist(s: &Statistic) -> String {
    if s.count() == 0 {
        return "-".into();
    }
    format!(
        "p50 {} p90 {} p99 {} max {}",
        ns(s.clamped_quantile(0.5)),
        ns(s.clamped_quantile(0.9)),
        ns(s.clamped_quantile(0.99)),
        ns(s.max())
    )
}

fn text_report(
    index: u64,
    s: &Sample,
    totals: &Counters,
    rps: f64,
    now: &Previous,
    prev: Option<&Previous>,
) -> String {
    let change = match prev {
        None => String::new(),
        Some(p) => {
            let rate = if p.rps > 0.0 {
                format!("{:+.1}%", (rps / p.rps - 1.0) * 100.0)
            } else {
                "n/a".into()
            };
            format!(
                "  change: rps {rate}, p50 {}, p99 {}",
                signed_ns(i128::from(now.sched_p50) - i128::from(p.sched_p50)),
                signed_ns(i128::from(now.sched_p99) - i128::from(p.sched_p99))
            )
        }
    };
    // Replays (sessions) also say how many jobs started, finished and are running: Apiary's
    // tally and level.
    let jobs = match totals.get(Counter::JobsStarted) {
        0 => String::new(),
        started => format!(
            " | jobs +{} started, +{} done, {} running (total {} done)",
            s.counters.get(Counter::JobsStarted),
            s.counters.get(Counter::JobsCompleted),
            started.saturating_sub(totals.get(Counter::JobsCompleted)),
            totals.get(Counter::JobsCompleted)
        ),
    };
    format!(
        "[shrike] interval {index} {:.3}s+{:.3}s: requests {} (total {}) {rps:.1}/s, \
         errors {} (total {}), in flight {} (max {}){jobs} | latency {} | service {}{change}",
        s.start.as_secs_f64(),
        s.duration.as_secs_f64(),
        s.counters.get(Counter::RqTotal),
        totals.get(Counter::RqTotal),
        super::errors(&s.counters),
        super::errors(totals),
        s.in_flight,
        s.in_flight_max,
        dist(&s.scheduled_to_response),
        dist(&s.request_to_response),
    )
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn dist_json(s: &Statistic) -> Value {
    json!({
        "count": s.count(),
        "mean_s": s.mean() / 1e9,
        "min_s": secs(s.min()),
        "p50_s": secs(s.clamped_quantile(0.5)),
        "p90_s": secs(s.clamped_quantile(0.9)),
        "p99_s": secs(s.clamped_quantile(0.99)),
        "p999_s": secs(s.clamped_quantile(0.999)),
        "max_s": secs(s.max()),
    })
}

fn jsonl_report(
    index: u64,
    s: &Sample,
    totals: &Counters,
    rps: f64,
    now: &Previous,
    prev: Option<&Previous>,
) -> String {
    let counters: Map<String, Value> =
        s.counters.non_zero().into_iter().map(|(c, n)| (c.name().to_string(), json!(n))).collect();
    let codes: Map<String, Value> =
        s.status_codes.non_zero().into_iter().map(|(c, n)| (c.to_string(), json!(n))).collect();
    let delta = |a: u64, b: u64| (a as f64 - b as f64) / 1e9;
    let change = prev.map(|p| {
        json!({
            "rps": rps - p.rps,
            "rps_ratio": (p.rps > 0.0).then(|| rps / p.rps),
            "scheduled_to_response_p50_s": delta(now.sched_p50, p.sched_p50),
            "scheduled_to_response_p99_s": delta(now.sched_p99, p.sched_p99),
            "request_to_response_p99_s": delta(now.service_p99, p.service_p99),
        })
    });
    json!({
        "type": "interval",
        "index": index,
        "start_s": s.start.as_secs_f64(),
        "duration_s": s.duration.as_secs_f64(),
        "last": s.last,
        "requests": s.counters.get(Counter::RqTotal),
        "requests_total": totals.get(Counter::RqTotal),
        "rps": rps,
        "errors": super::errors(&s.counters),
        "errors_total": super::errors(totals),
        "in_flight": s.in_flight,
        "in_flight_max": s.in_flight_max,
        "jobs_running": totals
            .get(Counter::JobsStarted)
            .saturating_sub(totals.get(Counter::JobsCompleted)),
        "counters": counters,
        "status_codes": codes,
        "scheduled_to_response": dist_json(&s.scheduled_to_response),
        "request_to_response": dist_json(&s.request_to_response),
        "change": change,
    })
    .to_string()
}
