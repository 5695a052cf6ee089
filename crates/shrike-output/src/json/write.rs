//! Writing the JSON result. The document is built from typed structs (not `json!`), whose
//! fields serialize in declaration order: they are declared in the order Nighthawk writes them
//! (`options`, `results`, `version`, `timestamp`; a statistic's `count` before its `id`; a
//! result's `execution_duration` before its `execution_start`), checked against Nighthawk's own
//! file by `tests/output/json_shape.rs`. Shrike's additions follow Nighthawk's fields.

use std::io;

use serde::Serialize;
use serde_json::Value;
use shrike_stats::duration::{format_proto, format_proto_ns};
use shrike_stats::{
    Failure, Interval, IntervalStat, RunResult, StatKind, Statistic, Termination, Verdict,
    WorkerResult,
};

use super::SCHEMA_VERSION;
use crate::spectrum::spectrum;
use crate::timestamp::format_rfc3339;

#[derive(Serialize)]
struct OutputDoc<'a> {
    options: &'a Value,
    results: Vec<ResultDoc<'a>>,
    version: VersionDoc,
    timestamp: String,
    shrike: ShrikeDoc,
}

#[derive(Serialize)]
struct ResultDoc<'a> {
    name: &'a str,
    statistics: Vec<StatisticDoc<'a>>,
    counters: Vec<CounterDoc<'a>>,
    execution_duration: String,
    execution_start: String,
    /// The sending window (see [`WorkerResult::sending_duration`]); absent when not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    shrike_sending_duration: Option<String>,
    /// Responses per exact status code (`"503": "12"`); Nighthawk only has status classes.
    shrike_status_codes: std::collections::BTreeMap<String, String>,
}

/// One statistic. Duration statistics fill `mean`..`max`, size statistics `raw_*`, as in
/// Nighthawk's `Statistic` message.
#[derive(Serialize)]
struct StatisticDoc<'a> {
    count: String,
    id: &'a str,
    percentiles: Vec<PercentileDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pstdev: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_pstdev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_min: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_max: Option<String>,
    /// Absent for a statistic read without one (Nighthawk's JSON): an empty histogram here
    /// would read back as a count mismatch, and as zero samples to anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    shrike_histogram: Option<String>,
}

#[derive(Serialize)]
struct PercentileDoc {
    percentile: f64,
    count: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration: Option<String>,
    /// A number, as Nighthawk writes its `double raw_value`; sizes are whole bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_value: Option<u64>,
}

#[derive(Serialize)]
struct CounterDoc<'a> {
    name: &'a str,
    value: String,
}

/// Envoy's `BuildVersion`, as Nighthawk writes it.
#[derive(Serialize)]
struct VersionDoc {
    version: SemverDoc,
}

#[derive(Serialize)]
struct SemverDoc {
    major_number: u32,
    minor_number: u32,
    patch: u32,
}

#[derive(Serialize)]
struct ShrikeDoc {
    schema_version: u64,
    tool_version: &'static str,
    termination: TerminationDoc,
    /// Whether the run succeeded, failed (and why) or was interrupted, as Shrike judged it.
    verdict: VerdictDoc,
    environment: EnvironmentDoc,
    /// The time series (`--stats-interval`); always present, empty when not sampled.
    intervals: Vec<IntervalDoc>,
    /// Distinct errors the run saw, most frequent first; always present, empty without errors.
    errors: Vec<ErrorDoc>,
    /// A replay's canary diff: how its answers differed from the captured ones, most frequent
    /// first (`message` says what changed); present only when some did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    canary_differences: Vec<ErrorDoc>,
    /// A coordinated run's generators, one row each ([`crate::fleet`]); present only then.
    #[serde(skip_serializing_if = "Option::is_none")]
    generators: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct ErrorDoc {
    message: String,
    count: String,
}

#[derive(Serialize)]
struct IntervalDoc {
    /// Offset of the interval's start from the run's execution start.
    start: String,
    duration: String,
    /// Increments during the interval.
    counters: Vec<CounterDoc<'static>>,
    statistics: Vec<IntervalStatDoc>,
}

/// A statistic of one interval: a summary at fixed quantiles plus its exact histogram.
#[derive(Serialize)]
struct IntervalStatDoc {
    id: &'static str,
    count: String,
    /// Mean as a number (ns for durations, bytes for sizes): intervals are read by plots.
    raw_mean: f64,
    raw_min: String,
    raw_max: String,
    percentiles: Vec<PercentileDoc>,
    shrike_histogram: String,
}

#[derive(Serialize)]
struct TerminationDoc {
    kind: &'static str,
    /// The predicate that fired, empty for other kinds (kept so the shape is fixed).
    detail: String,
    description: String,
}

#[derive(Serialize)]
struct VerdictDoc {
    /// `succeeded`, `failed` or `interrupted`.
    outcome: &'static str,
    /// Why it failed: `predicate`, `nothing_completed` or `other`; empty otherwise.
    failure: &'static str,
    /// The predicate that fired, or the other reason; empty otherwise.
    detail: String,
    /// The run's most frequent error, when it failed; empty otherwise.
    first_error: String,
    description: String,
}

/// The machine that wrote the document.
#[derive(Serialize)]
struct EnvironmentDoc {
    os: &'static str,
    arch: &'static str,
    available_parallelism: Option<usize>,
    /// How the client's TCP connections did their I/O (`epoll` or `io_uring`): the same load
    /// costs the client different CPU on each, so results say which they came from.
    io_backend: String,
}

/// Writes `result` as pretty-printed JSON (2-space indent) with a trailing newline.
pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    // Serialized whole first: serde_json emits many tiny writes, and a half-written document
    // on an I/O error is no more useful than none.
    let mut buf = serde_json::to_vec_pretty(&document(result))?;
    buf.push(b'\n');
    out.write_all(&buf)
}

/// The JSON document of `result` as a value (object keys in serde_json's map order).
pub fn to_json_value(result: &RunResult) -> Value {
    // Invariant: the document is plain structs, strings, numbers and an existing `Value`; every
    // map key is a string, so converting to a `Value` cannot fail.
    #[allow(clippy::expect_used)]
    serde_json::to_value(document(result)).expect("the result document always converts to a Value")
}

fn document(result: &RunResult) -> OutputDoc<'_> {
    let results =
        result.workers.iter().chain(std::iter::once(&result.global)).map(result_doc).collect();
    OutputDoc {
        timestamp: format_rfc3339(result.timestamp),
        options: &result.options,
        results,
        version: VersionDoc {
            version: SemverDoc {
                major_number: version_part(env!("CARGO_PKG_VERSION_MAJOR")),
                minor_number: version_part(env!("CARGO_PKG_VERSION_MINOR")),
                patch: version_part(env!("CARGO_PKG_VERSION_PATCH")),
            },
        },
        shrike: ShrikeDoc {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION"),
            termination: termination_doc(&result.termination),
            verdict: verdict_doc(&result.verdict),
            environment: EnvironmentDoc {
                os: std::env::consts::OS,
                arch: std::env::consts::ARCH,
                available_parallelism: std::thread::available_parallelism().ok().map(|n| n.get()),
                io_backend: result.options["io_backend"].as_str().unwrap_or("epoll").to_string(),
            },
            intervals: result.intervals.iter().map(interval_doc).collect(),
            errors: error_docs(&result.errors),
            canary_differences: error_docs(&result.differences),
            generators: crate::fleet::generators(result).map(|g| crate::fleet::to_json(&g)),
        },
    }
}

/// Cargo guarantees numeric version parts; 0 stands in should that ever not hold.
fn version_part(s: &str) -> u32 {
    s.parse().unwrap_or(0)
}

/// The `kind` names [`super::from_json`] accepts back.
pub(super) const KIND_COMPLETED: &str = "completed";
pub(super) const KIND_TERMINATION_PREDICATE: &str = "termination_predicate";
pub(super) const KIND_FAILURE_PREDICATE: &str = "failure_predicate";
pub(super) const KIND_INTERRUPTED: &str = "interrupted";

fn error_docs(errors: &std::collections::BTreeMap<String, u64>) -> Vec<ErrorDoc> {
    let mut v: Vec<(&String, &u64)> = errors.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    v.into_iter().map(|(m, n)| ErrorDoc { message: m.clone(), count: n.to_string() }).collect()
}

/// The `failure` names [`super::from_json`] accepts back.
pub(super) const FAILURE_PREDICATE: &str = "predicate";
pub(super) const FAILURE_NOTHING_COMPLETED: &str = "nothing_completed";
pub(super) const FAILURE_NOTHING_SENT: &str = "nothing_sent";
pub(super) const FAILURE_OTHER: &str = "other";

fn verdict_doc(v: &Verdict) -> VerdictDoc {
    let (failure, detail, first_error) = match v {
        Verdict::Failed { why, first_error } => {
            let (kind, detail) = match why {
                Failure::Predicate(p) => (FAILURE_PREDICATE, p.clone()),
                Failure::NothingCompleted => (FAILURE_NOTHING_COMPLETED, String::new()),
                Failure::NothingSent => (FAILURE_NOTHING_SENT, String::new()),
                Failure::Other(why) => (FAILURE_OTHER, why.clone()),
            };
            (kind, detail, first_error.clone().unwrap_or_default())
        }
        _ => ("", String::new(), String::new()),
    };
    VerdictDoc { outcome: v.outcome(), failure, detail, first_error, description: v.describe() }
}

fn termination_doc(t: &Termination) -> TerminationDoc {
    let (kind, detail) = match t {
        Termination::Completed => (KIND_COMPLETED, String::new()),
        Termination::TerminationPredicate(p) => (KIND_TERMINATION_PREDICATE, p.clone()),
        Termination::FailurePredicate(p) => (KIND_FAILURE_PREDICATE, p.clone()),
        Termination::Interrupted => (KIND_INTERRUPTED, String::new()),
    };
    TerminationDoc { kind, detail, description: t.describe() }
}

fn counter_docs(c: &shrike_stats::Counters) -> Vec<CounterDoc<'static>> {
    c.non_zero()
        .into_iter()
        .map(|(c, v)| CounterDoc { name: c.name(), value: v.to_string() })
        .collect()
}

/// A result's counters including those this build does not know (read from another tool's
/// file), so writing a result read back loses none.
fn all_counter_docs(c: &shrike_stats::Counters) -> Vec<CounterDoc<'_>> {
    c.non_zero_named()
        .into_iter()
        .map(|(name, v)| CounterDoc { name, value: v.to_string() })
        .collect()
}

fn percentile_doc(kind: StatKind, p: &shrike_stats::Percentile) -> PercentileDoc {
    let (duration, raw_value) = match kind {
        StatKind::Duration => (Some(format_proto_ns(p.value)), None),
        StatKind::Size => (None, Some(p.value)),
    };
    PercentileDoc { percentile: p.quantile, count: p.count.to_string(), duration, raw_value }
}

fn interval_doc(i: &Interval) -> IntervalDoc {
    IntervalDoc {
        start: format_proto(i.start),
        duration: format_proto(i.duration),
        counters: counter_docs(&i.counters),
        statistics: i.stats.iter().map(interval_stat_doc).collect(),
    }
}

fn interval_stat_doc(s: &IntervalStat) -> IntervalStatDoc {
    IntervalStatDoc {
        id: s.id.id(),
        count: s.count.to_string(),
        raw_mean: s.mean,
        raw_min: s.min.to_string(),
        raw_max: s.max.to_string(),
        percentiles: s.percentiles.iter().map(|p| percentile_doc(s.id.kind(), p)).collect(),
        shrike_histogram: s.histogram.clone(),
    }
}

fn result_doc(w: &WorkerResult) -> ResultDoc<'_> {
    ResultDoc {
        name: &w.name,
        statistics: w.all_stats().map(|(id, kind, s)| statistic_doc(id, kind, s)).collect(),
        counters: all_counter_docs(&w.counters),
        shrike_status_codes: w
            .status_codes
            .non_zero()
            .into_iter()
            .map(|(c, n)| (format!("{c:03}"), n.to_string()))
            .collect(),
        execution_start: format_rfc3339(w.execution_start),
        execution_duration: format_proto(w.execution_duration),
        shrike_sending_duration: w.sending_duration.map(format_proto),
    }
}

/// Rounds a non-negative ns moment to whole ns, as proto3 durations cannot hold fractions.
/// `as` saturates, so a value beyond u64 cannot wrap.
fn whole_ns(x: f64) -> u64 {
    x.round() as u64
}

fn statistic_doc<'a>(id: &'a str, kind: StatKind, s: &Statistic) -> StatisticDoc<'a> {
    let percentiles = spectrum(s).iter().map(|p| percentile_doc(kind, p)).collect();
    let mut doc = StatisticDoc {
        id,
        count: s.count().to_string(),
        percentiles,
        mean: None,
        pstdev: None,
        min: None,
        max: None,
        raw_mean: None,
        raw_pstdev: None,
        raw_min: None,
        raw_max: None,
        shrike_histogram: s.has_histogram().then(|| s.encode_histogram()),
    };
    match kind {
        StatKind::Duration => {
            doc.mean = Some(format_proto_ns(whole_ns(s.mean())));
            doc.pstdev = Some(format_proto_ns(whole_ns(s.pstdev())));
            doc.min = Some(format_proto_ns(s.min()));
            doc.max = Some(format_proto_ns(s.max()));
        }
        StatKind::Size => {
            doc.raw_mean = Some(s.mean());
            doc.raw_pstdev = Some(s.pstdev());
            doc.raw_min = Some(s.min().to_string());
            doc.raw_max = Some(s.max().to_string());
        }
    }
    doc
}

/// Writes any JSON value pretty-printed like [`write`]. `transform` uses it to pass a stored
/// document through untouched (its environment and tool version are the recording machine's).
pub fn write_value(value: &Value, out: &mut dyn io::Write) -> io::Result<()> {
    let mut buf = serde_json::to_vec_pretty(value)?;
    buf.push(b'\n');
    out.write_all(&buf)
}
