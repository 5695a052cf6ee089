//! Reading a JSON result back into a [`RunResult`].
//!
//! Walks a `serde_json::Value` by hand rather than deriving `Deserialize`, so every error names
//! the exact field at fault (`results[2].statistics[5].shrike_histogram: ...`). Unknown fields
//! are ignored (newer writers may add some). Unknown statistic ids and counter names are kept
//! ([`shrike_stats::ForeignStatistic`], [`Counters::set_named`]), since dropping them would
//! silently lose measurements.
//!
//! Nighthawk's own JSON reads too. It lacks Shrike's parts, which then read as follows:
//! - no `shrike` block: Nighthawk's output does not record how the run ended, so the
//!   termination reads as completed (the only kind that claims nothing), with no intervals and
//!   no errors;
//! - no `execution_start` (optional in Nighthawk): the global result's start, else the
//!   document's `timestamp`; an approximation, the only time the file gives;
//! - no `shrike_histogram`: the statistic is its summary (count, moments, printed percentiles,
//!   [`Statistic::from_summary`]), which answers percentile questions from the printed points
//!   and cannot be merged exactly.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};
use shrike_stats::duration::parse_proto;
use shrike_stats::{
    Counters, Failure, ForeignStatistic, Histogram, HistogramDecodeError, Interval, IntervalStat,
    Percentile, RunResult, StatId, StatKind, Statistic, Stats, StatusCodes, Termination,
    Unanswered, Verdict, WorkerResult,
};

use super::write::{
    FAILURE_NOTHING_COMPLETED, FAILURE_NOTHING_SENT, FAILURE_OTHER, FAILURE_PREDICATE,
    KIND_COMPLETED, KIND_FAILURE_PREDICATE, KIND_INTERRUPTED, KIND_TERMINATION_PREDICATE,
};
use super::SCHEMA_VERSION;
use crate::timestamp::parse_rfc3339;

/// Why a JSON result could not be read. Every variant but [`ReadError::Syntax`] carries the
/// path of the offending field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("not valid JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    #[error("{path}: missing")]
    Missing { path: String },
    #[error("{path}: expected {expected}, found {found}")]
    WrongType { path: String, expected: &'static str, found: &'static str },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: unknown statistic id {id:?}")]
    UnknownStatistic { path: String, id: String },
    #[error("{path}: {source}")]
    Histogram { path: String, source: HistogramDecodeError },
    #[error("{path}: unsupported schema version {found} (this build reads version {supported})")]
    UnsupportedSchema { path: String, found: u64, supported: u64 },
    #[error("results: no result is named \"global\"")]
    NoGlobal,
    /// Another format than a result: named, with what to give instead.
    #[error("this is {format}, not a result: {hint}")]
    Foreign { format: &'static str, hint: &'static str },
}

impl ReadError {
    /// The path of the field at fault (`results[0].counters[1].name`), when there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ReadError::Missing { path }
            | ReadError::WrongType { path, .. }
            | ReadError::Invalid { path, .. }
            | ReadError::UnknownStatistic { path, .. }
            | ReadError::Histogram { path, .. }
            | ReadError::UnsupportedSchema { path, .. } => Some(path),
            ReadError::NoGlobal => Some("results"),
            ReadError::Syntax(_) | ReadError::Foreign { .. } => None,
        }
    }
}

type Result<T> = std::result::Result<T, ReadError>;

/// Reads a document written by [`super::write`], or by Nighthawk (see the module docs), back
/// into a [`RunResult`].
///
/// Statistics are rebuilt from their `shrike_histogram` and exact moments; the workers are
/// every result not named `global`, in file order; `global` is taken as stored, not re-merged.
/// A statistic absent from a result (a file from a build with fewer statistics) reads as empty.
pub fn from_json(input: &str) -> Result<RunResult> {
    let root: Value = serde_json::from_str(input).map_err(ReadError::Syntax)?;
    let top = object(&root, "(document)")?;
    // fortio's JSON (ours, or Nighthawk's fortio output) keeps no options, workers or exact
    // histograms: nothing a result could be read back from.
    if top.contains_key("DurationHistogram") && top.contains_key("RunType") {
        return Err(ReadError::Foreign {
            format: "fortio's JSON (--output-format fortio)",
            hint: "it keeps no options, workers or exact histograms to read back; give the \
                   run's --output-format json result",
        });
    }
    if top.contains_key("capacity") && !top.contains_key("results") {
        return Err(ReadError::Foreign {
            format: "a capacity search's JSON",
            hint: "each trial's result is in capacity.trials[].result; shrike report renders \
                   the search",
        });
    }
    if top.contains_key("sweep") && !top.contains_key("results") {
        return Err(ReadError::Foreign {
            format: "a sweep's JSON",
            hint: "shrike report renders the sweep",
        });
    }
    let no_extension = Map::new();
    let (shrike, termination) = match top.get("shrike") {
        Some(v) => {
            let shrike = object(v, "shrike")?;
            check_schema(shrike)?;
            let t = termination(field(shrike, "shrike", "termination")?, "shrike.termination")?;
            (shrike, t)
        }
        // Nighthawk's JSON: how the run ended is not recorded (see the module docs).
        None => (&no_extension, Termination::Completed),
    };
    let timestamp = time(field(top, "", "timestamp")?, "timestamp")?;
    let options = field(top, "", "options")?;
    object(options, "options")?;

    let mut workers = Vec::new();
    let mut global: Option<(WorkerResult, Option<SystemTime>)> = None;
    for (i, v) in array(field(top, "", "results")?, "results")?.iter().enumerate() {
        let path = format!("results[{i}]");
        let (r, start) = worker(v, &path)?;
        if r.name != "global" {
            workers.push((r, start));
        } else if global.is_some() {
            return Err(invalid(format!("{path}.name"), "a second result is named \"global\""));
        } else {
            global = Some((r, start));
        }
    }
    let (mut global, global_start) = global.ok_or(ReadError::NoGlobal)?;
    let fallback_start = global_start.unwrap_or(timestamp);
    global.execution_start = fallback_start;
    let workers = workers
        .into_iter()
        .map(|(mut w, start)| {
            w.execution_start = start.unwrap_or(fallback_start);
            w
        })
        .collect();
    // Absent in files written before the time series existed: read as "not sampled".
    let intervals = match shrike.get("intervals") {
        None => Vec::new(),
        Some(v) => array(v, "shrike.intervals")?
            .iter()
            .enumerate()
            .map(|(i, v)| interval(v, &format!("shrike.intervals[{i}]")))
            .collect::<Result<_>>()?,
    };
    let errors = match shrike.get("errors") {
        // Results written before errors were stored have none to read.
        None | Some(Value::Null) => Default::default(),
        Some(v) => array(v, "shrike.errors")?
            .iter()
            .enumerate()
            .map(|(i, e)| error(e, &format!("shrike.errors[{i}]")))
            .collect::<Result<_>>()?,
    };
    let differences = match shrike.get("canary_differences") {
        None | Some(Value::Null) => Default::default(),
        Some(v) => array(v, "shrike.canary_differences")?
            .iter()
            .enumerate()
            .map(|(i, e)| error(e, &format!("shrike.canary_differences[{i}]")))
            .collect::<Result<_>>()?,
    };
    let mut result = RunResult {
        timestamp,
        options: options.clone(),
        workers,
        global,
        termination,
        intervals,
        errors,
        differences,
        verdict: Verdict::Succeeded,
    };
    match shrike.get("verdict") {
        Some(v) => result.verdict = verdict(v, "shrike.verdict")?,
        // Written before verdicts were stored, or by Nighthawk: judged as the run would be.
        None => result.judge(unanswered(options)),
    }
    Ok(result)
}

/// How a stored run treats requests none of which completed, from its options: it tolerated
/// it only with no failure predicate at all, and never as a replay.
pub fn unanswered(options: &Value) -> Unanswered {
    let none =
        options.get("failure_predicates").and_then(Value::as_object).is_some_and(|m| m.is_empty());
    match none && options.get("replay").is_none() {
        true => Unanswered::Tolerated,
        false => Unanswered::Fails,
    }
}

fn verdict(v: &Value, path: &str) -> Result<Verdict> {
    let o = object(v, path)?;
    let text =
        |k: &str| -> Result<String> { Ok(string(field(o, path, k)?, &join(path, k))?.to_string()) };
    let outcome = text("outcome")?;
    match outcome.as_str() {
        "succeeded" => Ok(Verdict::Succeeded),
        "interrupted" => Ok(Verdict::Interrupted),
        "failed" => {
            let detail = text("detail")?;
            let first_error = Some(text("first_error")?).filter(|e| !e.is_empty());
            let why = match text("failure")?.as_str() {
                FAILURE_PREDICATE => Failure::Predicate(detail),
                FAILURE_NOTHING_COMPLETED => Failure::NothingCompleted,
                FAILURE_NOTHING_SENT => Failure::NothingSent,
                FAILURE_OTHER => Failure::Other(detail),
                other => {
                    return Err(invalid(
                        join(path, "failure"),
                        format!(
                            "unknown failure {other:?} (expected {FAILURE_PREDICATE}, \
                             {FAILURE_NOTHING_COMPLETED}, {FAILURE_NOTHING_SENT} or \
                             {FAILURE_OTHER})"
                        ),
                    ))
                }
            };
            Ok(Verdict::Failed { why, first_error })
        }
        other => Err(invalid(
            join(path, "outcome"),
            format!("unknown outcome {other:?} (expected succeeded, failed or interrupted)"),
        )),
    }
}

fn check_schema(shrike: &Map<String, Value>) -> Result<()> {
    let version_path = "shrike.schema_version";
    let version = uint(field(shrike, "shrike", "schema_version")?, version_path)?;
    if version == 0 || version > SCHEMA_VERSION {
        return Err(ReadError::UnsupportedSchema {
            path: version_path.into(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

fn error(v: &Value, path: &str) -> Result<(String, u64)> {
    let o = object(v, path)?;
    let message = string(field(o, path, "message")?, &join(path, "message"))?;
    let count = uint(field(o, path, "count")?, &join(path, "count"))?;
    Ok((message.to_string(), count))
}

fn termination(v: &Value, path: &str) -> Result<Termination> {
    let o = object(v, path)?;
    let kind_path = join(path, "kind");
    let kind = string(field(o, path, "kind")?, &kind_path)?;
    let detail = || -> Result<String> {
        let detail_path = join(path, "detail");
        let d = string(field(o, path, "detail")?, &detail_path)?;
        if d.is_empty() {
            return Err(invalid(detail_path, "a predicate termination must name the predicate"));
        }
        Ok(d.to_string())
    };
    match kind {
        KIND_COMPLETED => Ok(Termination::Completed),
        KIND_INTERRUPTED => Ok(Termination::Interrupted),
        KIND_TERMINATION_PREDICATE => Ok(Termination::TerminationPredicate(detail()?)),
        KIND_FAILURE_PREDICATE => Ok(Termination::FailurePredicate(detail()?)),
        other => Err(invalid(
            kind_path,
            format!(
                "unknown termination kind {other:?} (expected one of {KIND_COMPLETED}, \
                 {KIND_TERMINATION_PREDICATE}, {KIND_FAILURE_PREDICATE}, {KIND_INTERRUPTED})"
            ),
        )),
    }
}

/// One result, with its `execution_start` if stored (Nighthawk may omit it; the caller fills
/// in the fallback, which needs the global result).
fn worker(v: &Value, path: &str) -> Result<(WorkerResult, Option<SystemTime>)> {
    let o = object(v, path)?;
    let name = string(field(o, path, "name")?, &join(path, "name"))?;
    let start_path = join(path, "execution_start");
    let execution_start = o.get("execution_start").map(|v| time(v, &start_path)).transpose()?;
    let dur_path = join(path, "execution_duration");
    let execution_duration = duration(field(o, path, "execution_duration")?, &dur_path)?;
    let sending_path = join(path, "shrike_sending_duration");
    let sending_duration =
        o.get("shrike_sending_duration").map(|v| duration(v, &sending_path)).transpose()?;

    let mut stats = Stats::new();
    let mut foreign = Vec::new();
    let mut seen_stats = BTreeSet::new();
    let stats_path = join(path, "statistics");
    for (i, sv) in array(field(o, path, "statistics")?, &stats_path)?.iter().enumerate() {
        let spath = format!("{stats_path}[{i}]");
        let (id, kind, stat) = statistic(sv, &spath)?;
        if !seen_stats.insert(id.clone()) {
            let reason = format!("statistic {id:?} appears twice");
            return Err(invalid(join(&spath, "id"), reason));
        }
        match StatId::from_id(&id) {
            Some(known) => stats.set(known, stat),
            None => foreign.push(ForeignStatistic { id, kind, stat }),
        }
    }

    let counters = counters(field(o, path, "counters")?, &join(path, "counters"))?;
    let status_codes = match o.get("shrike_status_codes") {
        Some(v) => status_codes(v, &join(path, "shrike_status_codes"))?,
        None => StatusCodes::new(),
    };
    let result = WorkerResult {
        name: name.to_string(),
        stats,
        counters,
        status_codes,
        // Replaced by the caller (see above).
        execution_start: SystemTime::UNIX_EPOCH,
        execution_duration,
        sending_duration,
        foreign,
    };
    Ok((result, execution_start))
}

fn counters(v: &Value, counters_path: &str) -> Result<Counters> {
    let mut counters = Counters::new();
    let mut seen_counters = BTreeSet::new();
    for (i, cv) in array(v, counters_path)?.iter().enumerate() {
        let cpath = format!("{counters_path}[{i}]");
        let co = object(cv, &cpath)?;
        let name_path = join(&cpath, "name");
        let name = string(field(co, &cpath, "name")?, &name_path)?;
        if !seen_counters.insert(name) {
            return Err(invalid(name_path, format!("counter {name:?} appears twice")));
        }
        counters.set_named(name, uint(field(co, &cpath, "value")?, &join(&cpath, "value"))?);
    }
    Ok(counters)
}

fn status_codes(v: &Value, path: &str) -> Result<StatusCodes> {
    let mut codes = StatusCodes::new();
    for (k, n) in object(v, path)? {
        let p = join(path, k);
        let code = k
            .parse::<u16>()
            .ok()
            .filter(|c| *c < 1000 && k.len() == 3)
            .ok_or_else(|| invalid(p.clone(), "not a three-digit status code"))?;
        codes.add(code, uint(n, &p)?);
    }
    Ok(codes)
}

fn interval(v: &Value, path: &str) -> Result<Interval> {
    let o = object(v, path)?;
    let start = duration(field(o, path, "start")?, &join(path, "start"))?;
    let length = duration(field(o, path, "duration")?, &join(path, "duration"))?;
    let counters = counters(field(o, path, "counters")?, &join(path, "counters"))?;
    let stats_path = join(path, "statistics");
    let stats = array(field(o, path, "statistics")?, &stats_path)?
        .iter()
        .enumerate()
        .map(|(i, v)| interval_stat(v, &format!("{stats_path}[{i}]")))
        .collect::<Result<_>>()?;
    Ok(Interval { start, duration: length, counters, stats })
}

fn interval_stat(v: &Value, path: &str) -> Result<IntervalStat> {
    let o = object(v, path)?;
    let (id, count, histogram, _) = stored_histogram(o, path)?;
    let mean_path = join(path, "raw_mean");
    let mean_v = field(o, path, "raw_mean")?;
    let mean = mean_v
        .as_f64()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| invalid(mean_path, "must be a finite, non-negative number"))?;
    let min = uint(field(o, path, "raw_min")?, &join(path, "raw_min"))?;
    let max = uint(field(o, path, "raw_max")?, &join(path, "raw_max"))?;
    let percentiles = percentiles(o, path, id.kind())?;
    Ok(IntervalStat { id, count, mean, min, max, percentiles, histogram: histogram.to_string() })
}

/// The printed percentile points of a statistic (`percentiles[]`).
fn percentiles(o: &Map<String, Value>, path: &str, kind: StatKind) -> Result<Vec<Percentile>> {
    let pct_path = join(path, "percentiles");
    let mut out = Vec::new();
    for (i, pv) in array(field(o, path, "percentiles")?, &pct_path)?.iter().enumerate() {
        let ppath = format!("{pct_path}[{i}]");
        let po = object(pv, &ppath)?;
        let q_path = join(&ppath, "percentile");
        let q_v = field(po, &ppath, "percentile")?;
        let quantile = q_v
            .as_f64()
            .filter(|q| (0.0..=1.0).contains(q))
            .ok_or_else(|| invalid(q_path, "must be a number from 0 to 1"))?;
        let pcount = uint(field(po, &ppath, "count")?, &join(&ppath, "count"))?;
        let value = match kind {
            StatKind::Duration => {
                let vpath = join(&ppath, "duration");
                let d = duration(field(po, &ppath, "duration")?, &vpath)?;
                u64::try_from(d.as_nanos()).map_err(|_| invalid(vpath, "duration is too large"))?
            }
            // Nighthawk writes a number (a proto double); older Shrike results a string. `uint`
            // takes both.
            StatKind::Size => uint(field(po, &ppath, "raw_value")?, &join(&ppath, "raw_value"))?,
        };
        out.push(Percentile { quantile, count: pcount, value });
    }
    Ok(out)
}

/// What every stored statistic has: its id, its count and its encoded histogram, decoded and
/// checked to hold exactly `count` samples.
fn stored_histogram<'a>(
    o: &'a Map<String, Value>,
    path: &str,
) -> Result<(StatId, u64, &'a str, Histogram<u64>)> {
    let id_path = join(path, "id");
    let id_str = string(field(o, path, "id")?, &id_path)?;
    let id = StatId::from_id(id_str)
        .ok_or_else(|| ReadError::UnknownStatistic { path: id_path, id: id_str.into() })?;
    let count = uint(field(o, path, "count")?, &join(path, "count"))?;
    let (encoded, hist) = decoded_histogram(o, path, count)?;
    Ok((id, count, encoded, hist))
}

/// A statistic's `shrike_histogram`, decoded and checked to hold exactly `count` samples.
fn decoded_histogram<'a>(
    o: &'a Map<String, Value>,
    path: &str,
    count: u64,
) -> Result<(&'a str, Histogram<u64>)> {
    let hist_path = join(path, "shrike_histogram");
    let encoded = string(field(o, path, "shrike_histogram")?, &hist_path)?;
    let hist = Statistic::decode_histogram(encoded)
        .map_err(|source| ReadError::Histogram { path: hist_path.clone(), source })?;
    if hist.len() != count {
        let reason = format!("holds {} samples but count is {count}", hist.len());
        return Err(invalid(hist_path, reason));
    }
    Ok((encoded, hist))
}

/// One statistic of a result: its id as stored, its kind and its contents. An id this build
/// does not know takes its kind from its fields (`raw_*` for sizes, as Nighthawk writes them).
fn statistic(v: &Value, path: &str) -> Result<(String, StatKind, Statistic)> {
    let o = object(v, path)?;
    let id_path = join(path, "id");
    let id = string(field(o, path, "id")?, &id_path)?;
    let kind = match StatId::from_id(id) {
        Some(known) => known.kind(),
        None if o.contains_key("raw_mean") || o.contains_key("raw_max") => StatKind::Size,
        None => StatKind::Duration,
    };
    let count = uint(field(o, path, "count")?, &join(path, "count"))?;
    let hist = match o.get("shrike_histogram") {
        Some(_) => Some(decoded_histogram(o, path, count)?.1),
        None => None,
    };

    let get = |key: &str| field(o, path, key).map(|v| (v, join(path, key)));
    let (mean, pstdev, min, max) = match kind {
        StatKind::Duration => {
            let ns = |key: &str| -> Result<u64> {
                let (v, p) = get(key)?;
                let d = duration(v, &p)?;
                u64::try_from(d.as_nanos()).map_err(|_| invalid(p, "duration is too large"))
            };
            (ns("mean")? as f64, ns("pstdev")? as f64, ns("min")?, ns("max")?)
        }
        StatKind::Size => {
            let moment = |key: &str| -> Result<f64> {
                let (v, p) = get(key)?;
                let x = v.as_f64().ok_or_else(|| wrong_type(v, &p, "a number"))?;
                if !(x.is_finite() && x >= 0.0) {
                    return Err(invalid(p, "must be a finite, non-negative number"));
                }
                Ok(x)
            };
            let whole = |key: &str| get(key).and_then(|(v, p)| uint(v, &p));
            (moment("raw_mean")?, moment("raw_pstdev")?, whole("raw_min")?, whole("raw_max")?)
        }
    };
    if count > 0 && min > max {
        return Err(invalid(path.to_string(), format!("min {min} is greater than max {max}")));
    }
    let stat = match hist {
        Some(hist) => Statistic::from_parts(hist, count, mean, pstdev, min, max),
        None => {
            let points = percentiles(o, path, kind)?;
            Statistic::from_summary(count, mean, pstdev, min, max, points)
        }
    };
    Ok((id.to_string(), kind, stat))
}

// ---- typed accessors: each names the path of what it reads in its error ----

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn invalid(path: String, reason: impl Into<String>) -> ReadError {
    ReadError::Invalid { path, reason: reason.into() }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(v: &Value, path: &str, expected: &'static str) -> ReadError {
    ReadError::WrongType { path: path.to_string(), expected, found: kind_name(v) }
}

fn field<'a>(o: &'a Map<String, Value>, path: &str, key: &str) -> Result<&'a Value> {
    o.get(key).ok_or_else(|| ReadError::Missing { path: join(path, key) })
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| wrong_type(v, path, "an object"))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array().ok_or_else(|| wrong_type(v, path, "an array"))
}

fn string<'a>(v: &'a Value, path: &str) -> Result<&'a str> {
    v.as_str().ok_or_else(|| wrong_type(v, path, "a string"))
}

/// A uint64: a decimal string as proto3 JSON writes it, or a plain integer, which proto3
/// parsers also accept.
fn uint(v: &Value, path: &str) -> Result<u64> {
    match v {
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map_err(|_| invalid(path.to_string(), format!("{s:?} does not fit in a uint64"))),
        Value::String(s) => {
            Err(invalid(path.to_string(), format!("{s:?} is not an unsigned integer")))
        }
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| invalid(path.to_string(), format!("{n} is not an unsigned integer"))),
        other => Err(wrong_type(other, path, "an unsigned integer string")),
    }
}

fn duration(v: &Value, path: &str) -> Result<Duration> {
    parse_proto(string(v, path)?).map_err(|e| invalid(path.to_string(), e.to_string()))
}

fn time(v: &Value, path: &str) -> Result<SystemTime> {
    parse_rfc3339(string(v, path)?).map_err(|e| invalid(path.to_string(), e.to_string()))
}
