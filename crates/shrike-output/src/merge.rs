//! Exact merge of stored results: `shrike transform --merge a.json b.json …`.
//!
//! Use it to combine runs made in parallel from several machines, or a run split in parts.
//! - **Workers**: every input's workers are kept, in input order. A name already taken
//!   (`worker_0` in both files) is renamed to the first free `worker_N`, silently: that is
//!   what merging runs is.
//! - **Shards**: [`check_shards`] says whether shards are one run whole (each of `0/N` …
//!   `N-1/N` once); callers refuse a set that is not, unless asked for a partial merge.
//! - **Global**: the exact merge of the inputs' globals (histograms add, moments combine, the
//!   execution window spans all inputs).
//! - **Options**: the first input's, with the labels of all inputs and `workers` the sum of
//!   the inputs' (rates are per worker, so the requested total covers every input). Every
//!   shard of one run (`--shard 0/N` … `N-1/N`) merges into that run: no shard, and the
//!   workers of one shard. Options that change what
//!   was measured must agree ([`STRICT_OPTIONS`]: target, protocol, method, body, headers, open
//!   or closed loop), else the merge is refused naming the option and both values. Other
//!   differences (rate, connections, duration, …) are allowed and reported as warnings.
//! - **Termination**: the most serious of the inputs' (failure predicate, then interrupted,
//!   then termination predicate, then completed).
//! - **Intervals**: merged on a common wall-clock grid when every input has a series with the
//!   same interval length: each interval is placed at its wall-clock start relative to the
//!   merged start, rounded to the nearest multiple of the interval length, and intervals in the
//!   same slot merge exactly (counters add, histograms add). A warning says when an input's
//!   grid is offset by more than a tenth of an interval. If the lengths differ, or only some
//!   inputs have a series, the merged result has none, with a warning: a series that silently
//!   covers only part of the load would mislead.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use shrike_stats::{
    Interval, IntervalStat, RunResult, StatId, Statistic, Termination, WorkerResult,
};

/// Options that must be equal for results to be merged, as JSON pointers into `options`.
pub const STRICT_OPTIONS: [&str; 9] = [
    "/uri",
    "/multi_target_endpoints",
    "/multi_target_path",
    "/multi_target_use_https",
    "/protocol",
    "/request_options/request_method",
    "/request_options/request_body_size",
    "/request_options/request_headers",
    "/open_loop",
];

/// Options whose differences are not worth a warning (they do not describe the load).
/// Shards of one run always differ in `shard`, and a fleet's generators may each send from an
/// address of their own.
const QUIET_OPTIONS: [&str; 7] =
    ["labels", "output_format", "verbosity", "shard", "bind_address", "start_at", "execution_id"];

/// One result to merge, with the name errors and warnings use for it (its file name).
#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    pub result: RunResult,
}

/// The merged result and what the user should know about it.
#[derive(Clone, Debug)]
pub struct Merged {
    pub result: RunResult,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    #[error("nothing to merge")]
    NoInputs,
    #[error(
        "{other}: cannot merge with {first}: option {option} differs ({first}: {first_value}, \
         {other}: {other_value})"
    )]
    Incompatible {
        option: String,
        first: String,
        first_value: String,
        other: String,
        other_value: String,
    },
    #[error(
        "{input}: cannot merge: statistic {id} of result {result} has no histogram (a Nighthawk \
         result stores only printed percentiles, which cannot be combined exactly)"
    )]
    NoHistogram { input: String, result: String, id: String },
    #[error("{input}: shrike.intervals[{index}]: statistic {id}: {reason}")]
    IntervalHistogram { input: String, index: usize, id: &'static str, reason: String },
    /// Shards that are not one run ([`check_shards`]).
    #[error("{0}")]
    Shards(String),
    /// Shards of one run, but not all of it: one missing, or given twice ([`check_shards`]).
    #[error("{0}")]
    Partial(String),
    /// Shards whose sending windows never overlapped ([`check_shards`]).
    #[error("{0}")]
    Disjoint(String),
}

/// Merges `inputs` exactly (see the module docs).
pub fn merge(inputs: Vec<Input>) -> Result<Merged, MergeError> {
    let first = inputs.first().ok_or(MergeError::NoInputs)?;
    // Before anything is combined: merging summaries would print percentiles no run measured.
    for i in &inputs {
        for r in i.result.workers.iter().chain([&i.result.global]) {
            if let Some(id) = r.without_histogram() {
                let (input, result) = (i.name.clone(), r.name.clone());
                return Err(MergeError::NoHistogram { input, result, id });
            }
        }
    }
    let mut warnings = Vec::new();
    for other in &inputs[1..] {
        check_options(first, other, &mut warnings)?;
    }

    let global = WorkerResult::merge_all("global", inputs.iter().map(|i| &i.result.global));
    let intervals = merge_intervals(&inputs, global.execution_start, &mut warnings)?;

    let mut options = first.result.options.clone();
    let mut labels: Vec<Value> = Vec::new();
    for i in &inputs {
        for l in i.result.options.get("labels").and_then(Value::as_array).into_iter().flatten() {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
    }
    if let Some(o) = options.as_object_mut() {
        if o.contains_key("labels") || !labels.is_empty() {
            o.insert("labels".into(), Value::Array(labels));
        }
        // Rates are per worker: the merged run had every input's workers, each at its own
        // per-worker rate, so the requested total is that rate times all of them (not the
        // first input's total spread over more workers).
        let workers: u64 = inputs.iter().map(|i| worker_count(&i.result)).sum();
        o.insert("workers".into(), Value::from(workers));
        // Every shard of one run together is that run: its options without the shard, its
        // per-shard worker count (each shard ran them all at 1/N of the rate). A partial set
        // keeps the first's shard, so its requested rate is the shards' present share.
        // Several runs merged by choice are no one run: their merge has no run id of its own.
        let id = |i: &Input| i.result.options.get("execution_id").cloned();
        if inputs.iter().any(|i| id(i) != id(&inputs[0])) {
            o.remove("execution_id");
        }
        match (whole_shards(&inputs), shards_present(&inputs)) {
            (Some(n), _) => {
                o.remove("shard");
                o.insert("workers".into(), Value::from(workers / u64::from(n)));
            }
            // Merged by choice (--allow-partial): the result says what it lacks.
            (None, Some((present, n))) => {
                o.insert("partial".into(), format!("{present} of {n} shards").into());
            }
            (None, None) => {}
        }
    }

    let mut workers: Vec<WorkerResult> = Vec::new();
    for i in &inputs {
        for w in &i.result.workers {
            let mut w = w.clone();
            if workers.iter().any(|have| have.name == w.name) || w.name == "global" {
                let new = (0..)
                    .map(|k| format!("worker_{k}"))
                    .find(|n| !name_taken(n, &workers, &inputs))
                    .unwrap_or_default();
                w.name = new;
            }
            workers.push(w);
        }
    }

    let timestamp = inputs.iter().map(|i| i.result.timestamp).max().unwrap_or(SystemTime::now());
    let termination = inputs
        .iter()
        .map(|i| &i.result.termination)
        .max_by_key(|t| severity(t))
        .cloned()
        .unwrap_or(Termination::Completed);
    let sum = |of: fn(&RunResult) -> &std::collections::BTreeMap<String, u64>| {
        let mut sum = std::collections::BTreeMap::new();
        for (msg, n) in inputs.iter().flat_map(|i| of(&i.result)) {
            *sum.entry(msg.clone()).or_insert(0) += n;
        }
        sum
    };
    let errors = sum(|r| &r.errors);
    let differences = sum(|r| &r.differences);
    let mut result = RunResult {
        timestamp,
        options,
        workers,
        global,
        termination,
        intervals,
        errors,
        differences,
        verdict: Default::default(),
    };
    // The merged run is judged as one run: on its merged counters, by its options' rules.
    result.judge(crate::json::unanswered(&result.options));
    Ok(Merged { result, warnings })
}

/// How far apart the starts of one run's shards may be when no --execution-id ties them.
const SHARD_START_SPREAD: std::time::Duration = std::time::Duration::from_secs(1);

/// `(distinct shards present, N)` when the inputs are shards of `N`.
fn shards_present(inputs: &[Input]) -> Option<(usize, u32)> {
    let mut seen: Vec<u32> = Vec::new();
    let mut n = None;
    for i in inputs {
        let s = i.result.options.get("shard")?.as_str()?;
        let s = shrike_spec::Shard::parse(s).ok()?;
        n = Some(s.count());
        if !seen.contains(&s.index()) {
            seen.push(s.index());
        }
    }
    Some((seen.len(), n?))
}

/// `Some(N)` when the inputs are exactly shards 0..N of one run, each once.
fn whole_shards(inputs: &[Input]) -> Option<u32> {
    let shard = |i: &Input| {
        let s = i.result.options.get("shard")?.as_str()?;
        shrike_spec::Shard::parse(s).ok()
    };
    let shards: Vec<shrike_spec::Shard> = inputs.iter().map(shard).collect::<Option<_>>()?;
    let n = shards.first()?.count();
    let mut seen: Vec<u32> = shards.iter().filter(|s| s.count() == n).map(|s| s.index()).collect();
    seen.sort_unstable();
    seen.dedup();
    (seen.len() == n as usize && shards.len() == n as usize).then_some(n)
}

/// Checks that inputs that are shards (`--shard i/N`) are one run whole: all of one run (one
/// `execution_id`, where they record one) and one count `N`,
/// each index once, and no input without a shard among them. Inputs with no shard at all (a
/// fleet's, or runs merged by choice) pass.
///
/// A partial set (`MergeError::Partial`) and shards that never ran together
/// (`MergeError::Disjoint`) are refused unless `waive` says otherwise; what was waived comes
/// back, for the user to be told.
pub fn check_shards(inputs: &[Input], waive: Waive) -> Result<Vec<MergeError>, MergeError> {
    let mut waived = Vec::new();
    let mut unless = |allowed: bool, e: MergeError| match allowed {
        true => {
            waived.push(e);
            Ok(())
        }
        false => Err(e),
    };
    let shard = |i: &Input| {
        let s = i.result.options.get("shard")?.as_str()?;
        shrike_spec::Shard::parse(s).ok()
    };
    let shards: Vec<(&Input, Option<shrike_spec::Shard>)> =
        inputs.iter().map(|i| (i, shard(i))).collect();
    let Some((first, Some(of))) = shards.iter().find(|(_, s)| s.is_some()) else {
        return Ok(Vec::new());
    };
    let n = of.count();
    let refuse = |why: String| Err(MergeError::Shards(why));
    if let Some((i, _)) = shards.iter().find(|(_, s)| s.is_none()) {
        return refuse(format!("{} has no shard, while {} is shard {of}", i.name, first.name));
    }
    if let Some((i, Some(s))) = shards.iter().find(|(_, s)| s.is_some_and(|s| s.count() != n)) {
        return refuse(format!(
            "{} is shard {s}, {} is shard {of}: not one run",
            i.name, first.name
        ));
    }
    // Shards of different runs (last week's shard 1 left in the directory) are no one run,
    // however well their indices fit. Results from before run ids say nothing either way.
    let id = |i: &Input| i.result.options.get("execution_id")?.as_str().map(str::to_string);
    let ids: Vec<(&str, String)> =
        shards.iter().filter_map(|(i, _)| Some((i.name.as_str(), id(i)?))).collect();
    if let Some((other, other_id)) = ids.iter().find(|(_, x)| *x != ids[0].1) {
        return refuse(format!(
            "shards of different runs: {} is run {}, {other} is run {other_id}",
            ids[0].0, ids[0].1
        ));
    }
    // A derived id (no --execution-id) is the same for every run of the same options: shards
    // of one run start together (by --start-at, or within a second of each other), so ones
    // that did not are runs of the same command at other times.
    let derived = ids.first().is_some_and(|(_, id)| id.starts_with("shards-"));
    let start = |i: &Input| i.result.global.execution_start;
    let (earliest, latest) = (
        shards.iter().min_by_key(|(i, _)| start(i)).map(|(i, _)| *i).unwrap_or(first),
        shards.iter().max_by_key(|(i, _)| start(i)).map(|(i, _)| *i).unwrap_or(first),
    );
    let apart = start(latest).duration_since(start(earliest)).unwrap_or_default();
    if derived && apart > SHARD_START_SPREAD {
        return refuse(format!(
            "shards of different starts: {} started {:.1}s after {}, and neither has an \
             --execution-id (shards of one run start together with --start-at, or share one)",
            latest.name,
            apart.as_secs_f64(),
            earliest.name
        ));
    }
    // Shards whose windows never overlapped did not load the target together: their summed
    // rate was never offered.
    let end = |i: &Input| start(i) + i.result.global.execution_duration;
    if let Some((i, _)) =
        shards.iter().find(|(i, _)| end(i) <= start(latest) && i.name != latest.name)
    {
        let why = format!(
            "shards that never ran together: {} ended before {} started",
            i.name, latest.name
        );
        unless(waive.disjoint, MergeError::Disjoint(why))?;
    }
    let mut by_index: Vec<Vec<&str>> = vec![Vec::new(); n as usize];
    for (i, s) in &shards {
        if let Some(s) = s {
            by_index[s.index() as usize].push(&i.name);
        }
    }
    if let Some((k, names)) = by_index.iter().enumerate().find(|(_, v)| v.len() > 1) {
        let why = format!("shard {k}/{n} is given {} times: {}", names.len(), names.join(", "));
        unless(waive.partial, MergeError::Partial(why))?;
    }
    let missing: Vec<String> =
        (0..n).filter(|k| by_index[*k as usize].is_empty()).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        let plural = if missing.len() == 1 { "" } else { "s" };
        let why = format!(
            "shard{plural} {} missing: {} of {n} given",
            missing.join(", "),
            n as usize - missing.len()
        );
        unless(waive.partial, MergeError::Partial(why))?;
    }
    Ok(waived)
}

/// What [`check_shards`] lets pass: a partial set of shards, shards that never overlapped.
#[derive(Clone, Copy, Debug, Default)]
pub struct Waive {
    pub partial: bool,
    pub disjoint: bool,
}

/// The workers a result's run had: its `workers` option, else the worker results present.
fn worker_count(r: &RunResult) -> u64 {
    let stated =
        r.options.get("workers").and_then(|w| w.as_u64().or_else(|| w.as_str()?.parse().ok()));
    stated.unwrap_or(r.workers.len().max(1) as u64)
}

/// A renamed worker must not take a name a later input still brings.
fn name_taken(n: &str, workers: &[WorkerResult], inputs: &[Input]) -> bool {
    workers.iter().any(|w| w.name == n)
        || inputs.iter().any(|i| i.result.workers.iter().any(|w| w.name == n))
}

/// Higher is more serious; `max_by_key` keeps the last of equals, so ties pick the later input,
/// which only matters for the predicate text.
fn severity(t: &Termination) -> u8 {
    match t {
        Termination::Completed => 0,
        Termination::TerminationPredicate(_) => 1,
        Termination::Interrupted => 2,
        Termination::FailurePredicate(_) => 3,
    }
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => v.to_string(),
    }
}

fn check_options(
    first: &Input,
    other: &Input,
    warnings: &mut Vec<String>,
) -> Result<(), MergeError> {
    let (a, b) = (&first.result.options, &other.result.options);
    for ptr in STRICT_OPTIONS {
        let (va, vb) =
            (a.pointer(ptr).filter(|v| !v.is_null()), b.pointer(ptr).filter(|v| !v.is_null()));
        if va != vb {
            return Err(MergeError::Incompatible {
                option: ptr.trim_start_matches('/').replace('/', "."),
                first: first.name.clone(),
                first_value: shown(va),
                other: other.name.clone(),
                other_value: shown(vb),
            });
        }
    }
    let empty = serde_json::Map::new();
    let (ma, mb) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let strict_top: Vec<&str> =
        STRICT_OPTIONS.iter().map(|p| p[1..].split('/').next().unwrap_or("")).collect();
    let mut keys: Vec<&String> = ma.keys().collect();
    keys.extend(mb.keys().filter(|k| !ma.contains_key(*k)));
    for k in keys {
        if QUIET_OPTIONS.contains(&k.as_str()) || strict_top.contains(&k.as_str()) {
            continue;
        }
        if ma.get(k) != mb.get(k) {
            warnings.push(format!(
                "option {k} differs ({}: {}, {}: {}); the merged result keeps {}'s options",
                first.name,
                shown(ma.get(k)),
                other.name,
                shown(mb.get(k)),
                first.name
            ));
        }
    }
    Ok(())
}

fn merge_intervals(
    inputs: &[Input],
    start: SystemTime,
    warnings: &mut Vec<String>,
) -> Result<Vec<Interval>, MergeError> {
    let with: Vec<&Input> = inputs.iter().filter(|i| !i.result.intervals.is_empty()).collect();
    if with.is_empty() {
        return Ok(Vec::new());
    }
    if with.len() != inputs.len() {
        let without: Vec<&str> = inputs
            .iter()
            .filter(|i| i.result.intervals.is_empty())
            .map(|i| i.name.as_str())
            .collect();
        warnings.push(format!(
            "intervals dropped: {} has no time series, so a merged series would cover only part \
             of the load",
            without.join(", ")
        ));
        return Ok(Vec::new());
    }
    // The first interval's length is the series' period (the last one may be cut short).
    let period = with[0].result.intervals[0].duration;
    for i in &with {
        let d = i.result.intervals[0].duration;
        if period.is_zero() || d.abs_diff(period) > period / 100 {
            warnings.push(format!(
                "intervals dropped: {} samples every {:?} but {} every {:?}; series with \
                 different periods cannot be aligned",
                with[0].name, period, i.name, d
            ));
            return Ok(Vec::new());
        }
    }

    // slot -> (start, duration, parts)
    let mut slots: std::collections::BTreeMap<u64, Vec<(&Input, usize)>> = Default::default();
    let p = period.as_nanos() as f64;
    for i in &with {
        let shift = i.result.global.execution_start.duration_since(start).unwrap_or_default();
        let mut offset_warned = false;
        for (k, iv) in i.result.intervals.iter().enumerate() {
            let abs = (shift + iv.start).as_nanos() as f64;
            let slot = (abs / p).round();
            if !offset_warned && (abs - slot * p).abs() > p / 10.0 {
                warnings.push(format!(
                    "{}: intervals are offset by {:?} from the merged grid; aligned to the \
                     nearest interval",
                    i.name,
                    Duration::from_nanos((abs - slot * p).abs() as u64)
                ));
                offset_warned = true;
            }
            slots.entry(slot as u64).or_default().push((i, k));
        }
    }

    let mut out = Vec::new();
    for (slot, parts) in slots {
        let mut counters = shrike_stats::Counters::new();
        let mut duration = Duration::ZERO;
        let mut ids: Vec<StatId> = Vec::new();
        for (i, k) in &parts {
            let iv = &i.result.intervals[*k];
            counters.merge(&iv.counters);
            duration = duration.max(iv.duration);
            for s in &iv.stats {
                if !ids.contains(&s.id) {
                    ids.push(s.id);
                }
            }
        }
        let mut stats = Vec::new();
        for id in ids {
            let mut merged = Statistic::new();
            for (i, k) in &parts {
                let iv = &i.result.intervals[*k];
                for s in iv.stats.iter().filter(|s| s.id == id) {
                    let hist = Statistic::decode_histogram(&s.histogram).map_err(|e| {
                        MergeError::IntervalHistogram {
                            input: i.name.clone(),
                            index: *k,
                            id: id.id(),
                            reason: e.to_string(),
                        }
                    })?;
                    // pstdev is not stored per interval; only count, mean, min and max matter.
                    merged.merge(&Statistic::from_parts(hist, s.count, s.mean, 0.0, s.min, s.max));
                }
            }
            stats.push(IntervalStat::summarize(id, &merged));
        }
        let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        let start = Duration::from_nanos(period_ns.saturating_mul(slot));
        out.push(Interval { start, duration, counters, stats });
    }
    Ok(out)
}
