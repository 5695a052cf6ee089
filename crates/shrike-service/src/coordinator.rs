//! One run on many services (`shrike run --remote A,B,C`): the fleet looks like one generator.
//!
//! - **Shares.** Generator `g` of `N` runs the spec as shard `g/N` ([`shrike_spec::Shard`]):
//!   1/N of the rate and of `total_requests`, with pacer phases that interleave with the
//!   others', so N generators × R look like one stream. All start at one `start_at` a little
//!   in the future.
//! - **Live view.** Every generator streams its ticks (one sample period, exact histograms);
//!   tick `k` of every live generator merges exactly and goes to the observers (progress,
//!   interval reports, metrics) as the fleet's tick, grouped into the fleet's intervals.
//! - **Predicates** run here, on the merged counters, and a firing one cancels every
//!   generator (generators run without predicates of their own).
//! - **Result.** Each generator's result (its JSON, exact histograms) merges exactly into the
//!   global one; each stays beside it, named by generator. A generator that fails to start,
//!   disconnects or dies is reported by name; what it streamed before is kept as a partial
//!   result, and the run goes on unless [`OnFailure::Abort`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::json;
use shrike_engine::{Observer, RunSpec, Sample, StopHandle, Telemetry, TelemetryConfig};
use shrike_output::merge::{merge, Input};
use shrike_stats::{RunResult, StatId, Termination, WorkerResult};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::convert;
use crate::proto::{self, run_event::Event, shrike_client::ShrikeClient};
use crate::server::MAX_MESSAGE;

/// How the coordinator reaches and proves itself to the services.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    pub token: Option<String>,
    /// Speak TLS, trusting this CA (PEM).
    pub ca: Option<Vec<u8>>,
    /// Present this certificate and key (PEM): mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name the services' certificates carry, when it is not the address's host.
    pub server_name: Option<String>,
    /// How long a service may stop answering (HTTP/2 pings unanswered: a partition, a node
    /// lost, a frozen process) before its stream is given up; [`KEEPALIVE`] if not set.
    pub keepalive: Option<Duration>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.ca.is_some())
            .finish_non_exhaustive()
    }
}

/// What to do when a generator fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFailure {
    /// Report it, keep its partial result, and let the others finish.
    Continue,
    /// Cancel the others.
    Abort,
}

#[derive(Clone, Debug)]
pub struct Fleet {
    /// `HOST:PORT` of each service.
    pub generators: Vec<String>,
    pub security: ClientSecurity,
    pub on_failure: OnFailure,
    /// How far in the future the common start is, when the spec has no `start_at`: time for
    /// every service to check and prepare the run.
    pub start_delay: Duration,
}

/// One generator's part of a coordinated run.
#[derive(Clone, Debug)]
pub struct GeneratorReport {
    pub address: String,
    /// The name the service gave (else its address).
    pub name: String,
    /// Its result as it sent it, or (when it failed) what it streamed before.
    pub result: Option<RunResult>,
    /// Why it did not finish, if it did not.
    pub failure: Option<String>,
    /// It refused the run (authentication, allowlist, limits, a bad spec): a configuration
    /// problem rather than a failure during the run.
    pub refused: bool,
    /// When it was found lost, from the common start.
    pub lost_at: Option<Duration>,
    /// What became of its share once it was lost.
    pub respread: Option<Respread>,
}

/// What became of a lost generator's share of the rate (`--remote-failure continue`).
#[derive(Clone, Debug, PartialEq)]
pub enum Respread {
    /// Spread over this many generators still running, each sending `factor` times its rate.
    Over { generators: usize, factor: f64 },
    /// Not re-spread, and why.
    Not(String),
}

#[derive(Debug)]
pub struct Coordinated {
    /// The fleet's result: every generator's merged exactly (workers: one per generator).
    pub result: RunResult,
    pub generators: Vec<GeneratorReport>,
    /// A generator failed and `OnFailure::Abort` stopped the others.
    pub aborted: bool,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinateError {
    #[error("--remote names no generator")]
    NoGenerators,
    #[error("{0}")]
    Spec(String),
    #[error("no generator produced a result: {why}")]
    AllFailed {
        why: String,
        /// Every generator refused the run (a configuration problem).
        refused: bool,
    },
    #[error("the coordinator could not start: {0}")]
    Runtime(std::io::Error),
}

/// What every generator is asked to do.
#[derive(Clone, Debug)]
pub enum Work {
    /// Run the spec: generator g of N sends shard g/N of its load.
    Run,
    /// Replay this jobs file (streamed to each generator): generator g of N plays every N-th
    /// job from the g-th, on the whole file's timeline.
    Replay { file: std::path::PathBuf, options: Box<shrike_replay::ReplayOptions> },
}

/// Runs `spec` on every generator of `fleet` and merges the results, blocking the calling
/// thread. `stop` cancels every generator (their results are still collected); `telemetry`'s
/// observers see the fleet as one run.
pub fn coordinate(
    spec: &RunSpec,
    fleet: &Fleet,
    stop: &StopHandle,
    telemetry: Option<Telemetry>,
) -> Result<Coordinated, CoordinateError> {
    coordinate_work(spec, &Work::Run, fleet, stop, telemetry)
}

/// [`coordinate`] for any [`Work`].
pub fn coordinate_work(
    spec: &RunSpec,
    work: &Work,
    fleet: &Fleet,
    stop: &StopHandle,
    telemetry: Option<Telemetry>,
) -> Result<Coordinated, CoordinateError> {
    if fleet.generators.is_empty() {
        return Err(CoordinateError::NoGenerators);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("shrike-coordinator")
        .enable_all()
        .build()
        .map_err(CoordinateError::Runtime)?;
    runtime.block_on(Coordinator::new(spec, work, fleet, telemetry)?.run(stop))
}

/// Asks every generator of `fleet` whether it answers (its address reachable, its handshake
/// and the run's credentials accepted) before a run is spread over them: the generators that
/// do not, each with why. A harmless call proves it (cancelling a run id no service holds).
pub fn roll_call(fleet: &Fleet) -> Result<Vec<Absent>, CoordinateError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CoordinateError::Runtime)?;
    runtime.block_on(async {
        let calls: Vec<_> = fleet
            .generators
            .iter()
            .map(|address| {
                let (address, security) = (address.clone(), fleet.security.clone());
                tokio::spawn(async move {
                    // Bounded: a silent address (a partition, a dropped SYN) answers nothing.
                    let answer =
                        tokio::time::timeout(ROLL_CALL_LIMIT, answers(&address, &security));
                    let (why, refused) = match answer.await {
                        Ok(Ok(())) => return None,
                        Ok(Err(e)) => e,
                        Err(_) => (format!("no answer within {ROLL_CALL_LIMIT:?}"), false),
                    };
                    Some(Absent { address, why, refused })
                })
            })
            .collect();
        let mut absent = Vec::new();
        for call in calls {
            if let Ok(Some(a)) = call.await {
                absent.push(a);
            }
        }
        Ok(absent)
    })
}

/// A generator that did not answer the roll call, and why.
#[derive(Clone, Debug)]
pub struct Absent {
    pub address: String,
    pub why: String,
    /// It answered, and refused the run's credentials: the caller's to fix, not the fleet's.
    pub refused: bool,
}

/// How long [`roll_call`] waits for a generator.
const ROLL_CALL_LIMIT: Duration = Duration::from_secs(6);

/// Whether the service at `address` answers: `Err((why, refused))` if not.
async fn answers(address: &str, security: &ClientSecurity) -> Result<(), (String, bool)> {
    let mut client = connect(address, security).await.map_err(|why| (why, false))?;
    let probe = proto::CancelRequest { run_id: "shrike-roll-call".into() };
    client.cancel(authorized(probe, security)).await.map_err(|s| {
        let refused =
            matches!(s.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied);
        (describe(&s), refused)
    })?;
    Ok(())
}

/// Why a generator whose own service stopped its run is lost.
const STOPPED_THERE: &str =
    "its service stopped the run: SIGTERM or SIGINT to the service, as a pod eviction sends";

/// A message from one generator's stream task.
enum Report {
    Started {
        g: usize,
        name: String,
    },
    Sample {
        g: usize,
        sample: Box<Sample>,
    },
    Result {
        g: usize,
        result: Box<RunResult>,
    },
    Failed {
        g: usize,
        why: String,
        refused: bool,
    },
    /// A generator answered a rate change (`why` it refused it, if it did).
    Scaled {
        g: usize,
        why: Option<String>,
    },
}

/// What the coordinator tells one generator's stream task.
#[derive(Clone, Copy, Debug)]
enum Command {
    /// Cancel its run (it still sends its result).
    Cancel,
    /// Multiply its run's rate by this: a lost generator's share re-spread.
    Scale(f64),
}

struct Coordinator<'a> {
    spec: &'a RunSpec,
    work: &'a Work,
    fleet: &'a Fleet,
    /// Each generator's spec: the run as its shard, without predicates or local telemetry.
    specs: Vec<serde_json::Value>,
    tick: Duration,
    ticks_per_interval: u32,
    observers: Vec<Box<dyn Observer>>,
    keep_series: bool,
    reports: Vec<GeneratorReport>,
    /// What each generator streamed, summed: its partial result if it fails.
    streamed: Vec<Option<Sample>>,
    /// Ticks not yet merged: tick index → (merged so far, generators in it).
    pending: BTreeMap<u64, (Sample, Vec<bool>)>,
    next_tick: u64,
    interval: Option<Sample>,
    ticks_in_interval: u32,
    series: Vec<shrike_stats::Interval>,
    totals: shrike_stats::Counters,
    done: Vec<bool>,
    termination: Option<Termination>,
    aborted: bool,
    /// The common start: a loss's time is from it.
    start_at: SystemTime,
    /// The fleet's run id.
    run_id: String,
    /// Each generator's stream task's commands.
    commands: Vec<mpsc::UnboundedSender<Command>>,
    warnings: Vec<String>,
}

impl<'a> Coordinator<'a> {
    fn new(
        spec: &'a RunSpec,
        work: &'a Work,
        fleet: &'a Fleet,
        telemetry: Option<Telemetry>,
    ) -> Result<Coordinator<'a>, CoordinateError> {
        let n = fleet.generators.len();
        let (config, observers) = match telemetry {
            Some(t) => (t.config, t.observers),
            None => (default_config(), Vec::new()),
        };
        let start_at = spec.start_at().unwrap_or_else(|| SystemTime::now() + fleet.start_delay);
        // One id for the fleet's run, in every generator's result too.
        let run_id = spec.run_id();
        let mut specs = Vec::with_capacity(n);
        for g in 0..n {
            // A replay's share is its jobs (in its options below), not a rate.
            let shard = match work {
                Work::Run => shrike_spec::Shard::try_new(g as u32, n as u32),
                Work::Replay { .. } => None,
            };
            // Generators run without predicates or telemetry of their own: the coordinator
            // judges and shows the fleet's merged counters.
            let s = spec
                .edit()
                .shard(shard)
                .execution_id(Some(&run_id))
                .start_at(Some(start_at))
                .no_predicates()
                .no_telemetry()
                .build()
                .map_err(|e| CoordinateError::Spec(e.to_string()))?;
            specs.push(s.to_json());
        }
        let reports = fleet
            .generators
            .iter()
            .map(|a| GeneratorReport {
                address: a.clone(),
                name: a.clone(),
                result: None,
                failure: None,
                refused: false,
                lost_at: None,
                respread: None,
            })
            .collect();
        Ok(Coordinator {
            spec,
            work,
            fleet,
            specs,
            tick: config.tick,
            ticks_per_interval: config.ticks_per_interval.get(),
            observers,
            keep_series: spec.telemetry().stats_interval.is_some(),
            reports,
            streamed: vec![None; n],
            pending: BTreeMap::new(),
            next_tick: 0,
            interval: None,
            ticks_in_interval: 0,
            series: Vec::new(),
            totals: shrike_stats::Counters::new(),
            done: vec![false; n],
            termination: None,
            aborted: false,
            start_at,
            run_id,
            commands: Vec::new(),
            warnings: Vec::new(),
        })
    }

    async fn run(mut self, stop: &StopHandle) -> Result<Coordinated, CoordinateError> {
        let n = self.fleet.generators.len();
        let (tx, mut rx) = mpsc::unbounded_channel();
        for g in 0..n {
            let (command_tx, command_rx) = mpsc::unbounded_channel();
            self.commands.push(command_tx);
            let spec = Some(proto::RunSpec { options: Some(convert::to_struct(&self.specs[g])) });
            let run_id = format!("coordinated-{}-{g}", std::process::id());
            let sample_period = Some(convert::to_duration(self.tick));
            let call = match self.work {
                Work::Run => Call::Run(proto::RunRequest { spec, run_id, sample_period }),
                Work::Replay { file, options } => {
                    let mut options = options.clone();
                    options.shard = shrike_spec::Shard::try_new(g as u32, n as u32);
                    let start = proto::ReplayStart {
                        spec,
                        replay: Some(convert::to_struct(&options.to_json())),
                        run_id,
                        sample_period,
                        file: file.display().to_string(),
                    };
                    Call::Replay(start, file.clone())
                }
            };
            let address = self.fleet.generators[g].clone();
            let security = self.fleet.security.clone();
            tokio::spawn(generator(g, address, security, call, tx.clone(), command_rx));
        }
        drop(tx);
        loop {
            let report = tokio::select! {
                r = rx.recv() => r,
                () = stop.stopped(), if self.termination.is_none() => {
                    self.termination = stop.reason().or(Some(Termination::Interrupted));
                    self.cancel_all();
                    continue;
                }
            };
            let Some(report) = report else { break };
            match report {
                Report::Started { g, name } => self.reports[g].name = name,
                Report::Sample { g, sample } => {
                    self.take_sample(g, *sample);
                    if self.termination.is_none() {
                        if let Some(t) = self.fired() {
                            self.termination = Some(t);
                            self.cancel_all();
                        }
                    }
                }
                Report::Result { g, result } => {
                    // Interrupted though the fleet was not: its service stopped it (a SIGTERM
                    // or SIGINT to the service, as a pod eviction sends). A lost generator,
                    // never the user's own interrupt.
                    let stopped_there = self.termination.is_none()
                        && matches!(result.termination, Termination::Interrupted);
                    self.reports[g].result = Some(*result);
                    if !stopped_there {
                        self.finish_generator(g);
                        continue;
                    }
                    self.reports[g].failure = Some(STOPPED_THERE.into());
                    self.lost(g);
                }
                Report::Failed { g, why, refused } => {
                    self.reports[g].failure = Some(why);
                    self.reports[g].refused = refused;
                    self.lost(g);
                }
                Report::Scaled { g, why: Some(why) } => self.warnings.push(format!(
                    "{} did not take its part of a lost generator's share: {why}",
                    self.reports[g].name
                )),
                Report::Scaled { .. } => {}
            }
        }
        self.flush_all();
        for o in &mut self.observers {
            o.finish();
        }
        self.result()
    }

    fn take_sample(&mut self, g: usize, sample: Sample) {
        match &mut self.streamed[g] {
            Some(s) => s.absorb(&sample),
            slot @ None => *slot = Some(sample.clone()),
        }
        let k = (sample.start.as_nanos() as f64 / self.tick.as_nanos().max(1) as f64).round();
        let k = k as u64;
        if k < self.next_tick {
            // A straggler for a tick already shown: it still counts in the generator's
            // partial result and in the final merge, only the live view has moved on.
            return;
        }
        let n = self.fleet.generators.len();
        let slot = self
            .pending
            .entry(k)
            .or_insert_with(|| (Sample::empty(sample.start, sample.duration), vec![false; n]));
        slot.0.add(&sample);
        slot.1[g] = true;
        self.flush_ready();
    }

    /// Generator `g` is lost: stop the fleet (`abort`), or re-spread its share of the rate
    /// over the generators still running (`continue`), so the fleet still offers the plan.
    fn lost(&mut self, g: usize) {
        let first = !self.done[g];
        self.finish_generator(g);
        if !first || self.termination.is_some() {
            return;
        }
        let at = SystemTime::now().duration_since(self.start_at).unwrap_or_default();
        self.reports[g].lost_at = Some(at);
        if self.fleet.on_failure == OnFailure::Abort {
            self.aborted = true;
            self.termination = Some(Termination::Interrupted);
            self.cancel_all();
            return;
        }
        let alive: Vec<usize> = (0..self.done.len()).filter(|&i| !self.done[i]).collect();
        let not = match self.work {
            Work::Replay { .. } => Some("a replay's jobs are dealt out when it starts"),
            Work::Run if matches!(self.spec.rate(), shrike_spec::RateSpec::Max) => {
                Some("an unpaced run's share is its connections, not a rate")
            }
            Work::Run if alive.is_empty() => Some("no generator is left"),
            Work::Run => None,
        };
        if let Some(why) = not {
            self.reports[g].respread = Some(Respread::Not(why.into()));
            return;
        }
        // Every generator running sends an equal share, so each takes 1/alive of this one's.
        let factor = (alive.len() + 1) as f64 / alive.len() as f64;
        for &i in &alive {
            let _ = self.commands[i].send(Command::Scale(factor));
        }
        self.reports[g].respread = Some(Respread::Over { generators: alive.len(), factor });
    }

    fn cancel_all(&self) {
        for c in &self.commands {
            let _ = c.send(Command::Cancel);
        }
    }

    fn finish_generator(&mut self, g: usize) {
        self.done[g] = true;
        self.flush_ready();
    }

    /// Shows every tick that every live generator has sent, in order.
    fn flush_ready(&mut self) {
        loop {
            let Some((&k, (_, has))) = self.pending.first_key_value() else { return };
            if k != self.next_tick {
                // A tick nobody pending has: skip it once every generator is past it (done,
                // or with a later tick already here); generators send their ticks in order.
                let past = |g: usize| self.done[g] || self.pending.values().any(|(_, h)| h[g]);
                if !(0..self.done.len()).all(past) {
                    return;
                }
                self.next_tick = k;
                continue;
            }
            if !(0..has.len()).all(|g| has[g] || self.done[g]) {
                return;
            }
            let Some((_, (sample, _))) = self.pending.pop_first() else { return };
            self.show(sample);
            self.next_tick += 1;
        }
    }

    fn flush_all(&mut self) {
        for g in 0..self.done.len() {
            self.done[g] = true;
        }
        self.flush_ready();
        if let Some(mut i) = self.interval.take() {
            i.last = true;
            self.close_interval(i);
        }
    }

    fn show(&mut self, tick: Sample) {
        self.totals.merge(&tick.counters);
        for o in &mut self.observers {
            o.tick(&tick);
        }
        match &mut self.interval {
            Some(i) => i.absorb(&tick),
            None => self.interval = Some(tick),
        }
        self.ticks_in_interval += 1;
        if self.ticks_in_interval >= self.ticks_per_interval {
            self.ticks_in_interval = 0;
            if let Some(i) = self.interval.take() {
                self.close_interval(i);
            }
        }
    }

    fn close_interval(&mut self, i: Sample) {
        for o in &mut self.observers {
            o.interval(&i);
        }
        if self.keep_series {
            self.series.push(i.to_interval());
        }
    }

    /// The first of the spec's predicates the fleet's counters pass, as a termination.
    fn fired(&self) -> Option<Termination> {
        let p = self.spec.predicates().iter().find(|p| p.fired(&self.totals))?;
        Some(match p.kind {
            shrike_engine::PredicateKind::Failure => Termination::FailurePredicate(p.describe()),
            shrike_engine::PredicateKind::Termination => {
                Termination::TerminationPredicate(p.describe())
            }
        })
    }

    fn result(mut self) -> Result<Coordinated, CoordinateError> {
        let mut inputs = Vec::new();
        let mut warnings = std::mem::take(&mut self.warnings);
        // Each generator's entry is named by the name it gave; generators that share one (the
        // same host name, no --name) are told apart by address, never renamed to worker_N.
        let shared: Vec<bool> = (0..self.reports.len())
            .map(|g| self.reports.iter().filter(|r| r.name == self.reports[g].name).count() > 1)
            .collect();
        for (r, shared) in self.reports.iter_mut().zip(shared) {
            if shared {
                r.name = format!("{}@{}", r.name, r.address);
            }
        }
        for (g, r) in self.reports.iter_mut().enumerate() {
            if r.result.is_none() {
                r.result = self.streamed[g].as_ref().map(|s| partial(s, &self.specs[g]));
            }
            let Some(result) = &r.result else { continue };
            let mut result = result.clone();
            if r.failure.is_some() {
                // A lost generator's own ending (its service's interrupt) is not the fleet's:
                // the loss is stated on its own.
                result.termination = Termination::Completed;
            }
            let mut own = result.global.clone();
            own.name = match &r.failure {
                None => r.name.clone(),
                Some(_) => format!("{} (partial)", r.name),
            };
            result.workers = vec![own];
            inputs.push(Input { name: r.name.clone(), result });
        }
        if inputs.is_empty() {
            let why: Vec<String> = self
                .reports
                .iter()
                .map(|r| format!("{}: {}", r.name, r.failure.as_deref().unwrap_or("no result")))
                .collect();
            let refused = self.reports.iter().all(|r| r.refused);
            return Err(CoordinateError::AllFailed { why: why.join("; "), refused });
        }
        let merged = merge(inputs).map_err(|e| CoordinateError::Spec(e.to_string()))?;
        // The merged result takes the fleet's options below, so the generators' differences
        // (their shards and source addresses) are expected and not worth a word.
        warnings.extend(merged.warnings.into_iter().filter(|w| !w.starts_with("option ")));
        let mut result = merged.result;
        result.options = self.spec.to_json();
        result.options["execution_id"] = json!(self.run_id);
        if let Some(o) = result.options.as_object_mut() {
            o.insert("remote".into(), json!(self.fleet.generators));
            // The fleet as it went, for every view's per-generator rows (shrike_output::fleet).
            let generators: Vec<serde_json::Value> = self
                .reports
                .iter()
                .map(|r| {
                    let state = if r.failure.is_some() { "lost" } else { "completed" };
                    let mut g = json!({
                        "name": r.name, "address": r.address, "state": state, "why": r.failure,
                    });
                    if let Some(at) = r.lost_at {
                        g["lost_at"] = json!(at.as_secs_f64());
                    }
                    match &r.respread {
                        Some(Respread::Over { generators, factor }) => {
                            g["respread_over"] = json!(generators);
                            g["respread_factor"] = json!(factor);
                        }
                        Some(Respread::Not(why)) => g["not_respread"] = json!(why),
                        None => {}
                    }
                    g
                })
                .collect();
            o.insert("generators".into(), serde_json::Value::Array(generators));
        }
        if let Work::Replay { .. } = self.work {
            let records: Vec<&serde_json::Value> = self
                .reports
                .iter()
                .filter_map(|r| r.result.as_ref()?.options.get("replay"))
                .collect();
            result.options["replay"] = fleet_replay_record(&records);
        }
        result.intervals = std::mem::take(&mut self.series);
        if let Some(t) = self.termination.take() {
            // The fleet's reason to stop (a predicate on the merged counters, a signal) over
            // the generators' own ("interrupted" by the coordinator's cancel).
            result.termination = t;
        }
        // The fleet's verdict, on its merged counters, by the run's rules, as one run's would
        // be: generators run without predicates, so their own verdicts say nothing.
        let replay = matches!(self.work, Work::Replay { .. });
        result.judge(match self.spec.tolerates_failures() && !replay {
            true => shrike_stats::Unanswered::Tolerated,
            false => shrike_stats::Unanswered::Fails,
        });
        if self.aborted {
            let failed: Vec<String> = self
                .reports
                .iter()
                .filter(|r| r.failure.is_some())
                .map(|r| r.name.clone())
                .collect();
            // The coordinator's own cancel interrupted the others: the fleet failed.
            result.verdict = shrike_stats::Verdict::Failed {
                why: shrike_stats::Failure::Other(format!(
                    "generator {} failed and --remote-failure abort stopped the others",
                    failed.join(", ")
                )),
                first_error: None,
            };
        }
        Ok(Coordinated { result, generators: self.reports, aborted: self.aborted, warnings })
    }
}

/// The generators' `options.replay` records as the fleet's: counts add, the file is complete
/// only if every generator read it to its end.
fn fleet_replay_record(records: &[&serde_json::Value]) -> serde_json::Value {
    let Some(first) = records.first() else { return serde_json::Value::Null };
    let mut out = (*first).clone();
    let sum = |k: &str| records.iter().filter_map(|r| r.get(k)?.as_u64()).sum::<u64>();
    for k in ["jobs", "requests", "jobs_skipped"] {
        out[k] = json!(sum(k));
    }
    let read = records.iter().filter_map(|r| r.get("jobs_read")?.as_u64()).max();
    out["jobs_read"] = json!(read);
    let complete = records.iter().all(|r| r.get("file_complete") == Some(&json!(true)));
    out["file_complete"] = json!(complete);
    out["shard"] = serde_json::Value::Null;
    out
}

/// Samples every second when nobody watches: the coordinator still merges ticks (for
/// predicates).
fn default_config() -> TelemetryConfig {
    TelemetryConfig {
        tick: Duration::from_millis(250),
        ticks_per_interval: std::num::NonZeroU32::MIN.saturating_add(3),
    }
}

/// What a failed generator streamed, as a result of one worker.
fn partial(s: &Sample, options: &serde_json::Value) -> RunResult {
    let start = SystemTime::now() - s.start.saturating_add(s.duration);
    let mut w = WorkerResult::new("partial", start);
    w.execution_duration = s.start.saturating_add(s.duration);
    w.sending_duration = Some(w.execution_duration);
    w.counters = s.counters.clone();
    w.status_codes = s.status_codes.clone();
    w.stats.set(StatId::ScheduledToResponse, s.scheduled_to_response.clone());
    w.stats.set(StatId::RequestToResponse, s.request_to_response.clone());
    w.stats.set(StatId::SendLateness, s.send_lateness.clone());
    // Completed: the generator's failure is reported (and its result marked partial); the
    // fleet's run was not interrupted by it.
    RunResult::new(options.clone(), vec![w], Termination::Completed)
}

/// The call one generator gets.
enum Call {
    Run(proto::RunRequest),
    /// The start message, and the jobs file to stream after it.
    Replay(proto::ReplayStart, std::path::PathBuf),
}

/// How long a generator may stop answering before it is lost (`--remote-keepalive`): the
/// coordinator pings every half of it and gives up on a ping unanswered for the other half.
pub const KEEPALIVE: Duration = Duration::from_secs(10);

/// Chunks of a jobs file in flight to one generator: the stream's flow control does the rest.
const JOB_CHUNK: usize = 64 << 10;

/// Streams `start` and then `file`'s bytes. A file that cannot be read to its end is a
/// failure of that generator's share (a truncated stream would read as a shorter file).
async fn send_jobs(
    start: proto::ReplayStart,
    file: std::path::PathBuf,
    out: mpsc::Sender<proto::ReplayRequest>,
) -> Result<(), String> {
    use proto::replay_request::Part;
    use tokio::io::AsyncReadExt as _;
    let part = |p| proto::ReplayRequest { part: Some(p) };
    if out.send(part(Part::Start(start))).await.is_err() {
        return Ok(());
    }
    let mut f = tokio::fs::File::open(&file)
        .await
        .map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
    loop {
        let mut buf = vec![0u8; JOB_CHUNK];
        let n =
            f.read(&mut buf).await.map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        if n == 0 {
            return Ok(());
        }
        buf.truncate(n);
        // The generator stopped taking jobs (the replay ended or was cancelled).
        if out.send(part(Part::Jobs(buf))).await.is_err() {
            return Ok(());
        }
    }
}

/// Connects to one service, runs its share and reports everything back. A cancel closes the
/// stream only after asking the service to stop, so its result still arrives.
async fn generator(
    g: usize,
    address: String,
    security: ClientSecurity,
    call: Call,
    tx: mpsc::UnboundedSender<Report>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let fail = |why: String| Report::Failed { g, why, refused: false };
    let run_id = match &call {
        Call::Run(r) => r.run_id.clone(),
        Call::Replay(s, _) => s.run_id.clone(),
    };
    let mut client = match connect(&address, &security).await {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(fail(format!("cannot connect to {address}: {e}")));
            return;
        }
    };
    let opened = match call {
        Call::Run(request) => client.run(authorized(request, &security)).await,
        Call::Replay(start, file) => {
            let (jobs_tx, jobs_rx) = mpsc::channel(4);
            let failed = tx.clone();
            tokio::spawn(async move {
                if let Err(why) = send_jobs(start, file, jobs_tx).await {
                    let _ = failed.send(Report::Failed { g, why, refused: false });
                }
            });
            let jobs = tokio_stream::wrappers::ReceiverStream::new(jobs_rx);
            client.replay(authorized(jobs, &security)).await
        }
    };
    let mut stream = match opened {
        Ok(s) => s.into_inner(),
        Err(status) => {
            let why = format!("{address} refused the run: {}", describe(&status));
            let _ = tx.send(Report::Failed { g, why, refused: true });
            return;
        }
    };
    let mut cancelled = false;
    loop {
        let message = tokio::select! {
            m = stream.message() => m,
            Some(command) = commands.recv() => {
                let (mut c, security) = (client.clone(), security.clone());
                match command {
                    Command::Cancel if !cancelled => {
                        cancelled = true;
                        let req = proto::CancelRequest { run_id: run_id.clone() };
                        tokio::spawn(async move { c.cancel(authorized(req, &security)).await });
                    }
                    Command::Cancel => {}
                    Command::Scale(factor) => {
                        let req = proto::ScaleRateRequest { run_id: run_id.clone(), factor };
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            let answer = c.scale_rate(authorized(req, &security)).await;
                            let why = answer.err().map(|s| describe(&s));
                            let _ = tx.send(Report::Scaled { g, why });
                        });
                    }
                }
                continue;
            }
        };
        let report = match message {
            Ok(Some(proto::RunEvent { event: Some(Event::Started(s)) })) => {
                Report::Started { g, name: s.generator }
            }
            Ok(Some(proto::RunEvent { event: Some(Event::Sample(s)) })) => {
                match convert::from_sample(&s) {
                    Ok(sample) => Report::Sample { g, sample: Box::new(sample) },
                    Err(e) => fail(format!("{address} sent a bad sample: {e}")),
                }
            }
            Ok(Some(proto::RunEvent { event: Some(Event::Result(r)) })) => {
                let report = match convert::from_result(&r) {
                    Ok(result) => Report::Result { g, result: Box::new(result) },
                    Err(e) => fail(format!("{address} sent a bad result: {e}")),
                };
                let _ = tx.send(report);
                return;
            }
            Ok(Some(_)) => continue,
            Ok(None) => fail(format!("{address} ended the stream without a result")),
            Err(status) => fail(format!("{address} failed: {}", describe(&status))),
        };
        let last = matches!(report, Report::Failed { .. });
        if tx.send(report).is_err() || last {
            return;
        }
    }
}

fn describe(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

pub(crate) fn authorized<T>(message: T, security: &ClientSecurity) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Some(token) = &security.token {
        if let Ok(v) = format!("Bearer {token}").parse() {
            req.metadata_mut().insert("authorization", v);
        }
    }
    req
}

/// A client of the service at `address`, or why not: the error with its causes (the
/// transport's own text is only "transport error"; what happened is in its sources).
async fn connect(
    address: &str,
    security: &ClientSecurity,
) -> Result<ShrikeClient<Channel>, String> {
    let channel = channel(address, security).await.map_err(|e| {
        let mut why = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            why = format!("{why}: {s}");
            source = s.source();
        }
        why
    })?;
    Ok(ShrikeClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE))
}

/// A channel to the service at `address` (`HOST:PORT`), with TLS when `security` has a CA.
pub(crate) async fn channel(
    address: &str,
    security: &ClientSecurity,
) -> Result<Channel, Box<dyn std::error::Error + Send + Sync>> {
    let scheme = if security.ca.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        // A generator that vanishes without a reset (a node lost, a partition) must not hold
        // the run forever: HTTP/2 pings find it dead within ~30 s and its stream fails.
        .http2_keep_alive_interval(security.keepalive.unwrap_or(KEEPALIVE) / 2)
        .keep_alive_timeout(security.keepalive.unwrap_or(KEEPALIVE) / 2)
        .keep_alive_while_idle(true);
    if let Some(ca) = &security.ca {
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some((cert, key)) = &security.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = &security.server_name {
            tls = tls.domain_name(name.clone());
        }
        endpoint = endpoint.tls_config(tls)?;
    }
    Ok(endpoint.connect().await?)
}
