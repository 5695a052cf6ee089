//! `shrike sweep`: a grid over connections (closed loop, unpaced, as the webserver guide's
//! wrk runs) or over rate (open loop), `--iterations` times per point, sampling the server's
//! resources over each point's measuring window. With two instances (`--compare` or two
//! `--server-cmd`) runs are interleaved, the first alternating, so drift hits both alike.
//! The loop is shrike-plan's (`sweep::run`); this command starts the servers it is told to,
//! picks where the runs go (here, `--remote`, `--nighthawk-service`) and writes the report.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use shrike_plan::sweep::{self, resources, Placement, Sweep, SweepAsk, SweepOptions};

use crate::args::{parse, usage};
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::{info, warning};
use crate::run::RunArgs;
use crate::server_process::{ServerProcess, StartError};
use crate::trials::Trials;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A rate grid (requests per second, all workers together) instead of connections: each
    /// point is an open loop at that rate with --connections (one number) per worker.
    #[arg(long, value_name = "GRID")]
    pub rates: Option<String>,
    /// Measured runs per point (their spread gives the error bars and intervals) [default: 3].
    #[arg(long)]
    pub iterations: Option<usize>,
    /// Pause between runs, so one run's connections and backlog do not bleed into the next
    /// [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub wait: Option<Duration>,
    /// Sample this running server's process tree (CPU, RSS, VMS, open files, context
    /// switches). With --compare, once for both or twice: the baseline's, then the candidate's.
    #[arg(long = "server-pid", value_name = "PID", conflicts_with = "server_cmds")]
    pub server_pids: Vec<u32>,
    /// Start the server with `sh -c CMD`, target the first HOST:PORT it prints, sample it, and
    /// stop it after. Given twice: a baseline and a candidate, compared point by point.
    #[arg(long = "server-cmd", value_name = "CMD")]
    pub server_cmds: Vec<String>,
    /// How long --server-cmd's server gets to print its listen address.
    #[arg(long, default_value = "15s", value_parser = parse::duration)]
    pub server_start_timeout: Duration,
    /// Restart --server-cmd's server before every run (no state carried between points).
    #[arg(long)]
    pub restart_server_between_runs: bool,
    /// Compare two targets: --compare baseline=URL1 --compare candidate=URL2.
    #[arg(long = "compare", value_name = "NAME=URL")]
    pub compare: Vec<String>,
    /// What to sample: cpu, rss, vms, fds, ctx-switches (all by default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub collect_stats: Vec<String>,
    /// Time between resource samples [default: 250ms].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub collect_stats_interval: Option<Duration>,
    /// The load: `shrike run`'s flags; --connections takes a grid (1,4,16:256:16,512). Over
    /// HTTP/2 and HTTP/3 each connection carries --max-concurrent-streams streams (1 unless
    /// given, as h2load's -m), so a point's requests in flight are connections × streams.
    #[command(flatten)]
    pub load: RunArgs,
}

/// One thing swept: a name, its target and how its server is found.
struct Instance {
    name: String,
    url: Option<String>,
    cmd: Option<String>,
    server: Option<ServerProcess>,
    /// A running server to sample (`--server-pid`).
    pid: Option<u32>,
}

/// The instances as the sweep loop sees them: each run goes to its instance's server,
/// restarted first if asked, and a server that died ends the sweep.
struct Servers<'a> {
    list: Vec<Instance>,
    args: &'a SweepArgs,
    interrupts: &'a Interrupts,
}

impl sweep::Instances for Servers<'_> {
    fn names(&self) -> Vec<String> {
        self.list.iter().map(|i| i.name.clone()).collect()
    }

    fn place(&mut self, k: usize) -> Result<Option<Placement>, String> {
        if self.interrupts.interrupted() {
            return Ok(None);
        }
        let inst = &mut self.list[k];
        if self.args.restart_server_between_runs && inst.cmd.is_some() {
            inst.server = None;
            match start(inst, self.args, self.interrupts, false) {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => return Err(format!("{e:#}")),
            }
        }
        if let Some(s) = inst.server.as_mut() {
            if !s.alive() {
                return Err(format!("{}: the server exited during the sweep", inst.name));
            }
        }
        let pid = inst.server.as_ref().map(ServerProcess::pid).or(inst.pid);
        Ok(Some(Placement { url: inst.url.clone(), pid }))
    }
}

pub fn run(mut args: SweepArgs) -> anyhow::Result<ExitCode> {
    // The grid is the sweep's: with --rates, the load's own connections flag must read as one
    // number (or none); without, it is the grid.
    let rate = args.rates.is_some();
    let grid = match rate {
        true => {
            if args.load.connections.as_ref().is_some_and(|c| c.contains([',', ':'])) {
                return Err(usage("--rates sweeps the rate: give --connections as one number"));
            }
            None
        }
        false => args.load.connections.take(),
    };
    if !rate && grid.is_none() {
        return Err(usage("give the grid: --connections 1,4,16:64:16 or --rates 100,200,400"));
    }
    let ask = SweepAsk {
        connections: grid,
        rates: args.rates.clone(),
        iterations: args.iterations,
        wait: args.wait,
        open_loop: args.load.open_loop,
        streams: args.load.max_concurrent_streams,
        collect: Some(args.collect_stats.clone()),
        sample_every: args.collect_stats_interval,
    };
    let mut instances = instances(&args)?;
    for &p in &args.server_pids {
        if !resources::exists(p) {
            return Err(usage(format!("--server-pid {p}: no such process")));
        }
    }
    match (args.server_pids.as_slice(), instances.len()) {
        ([], _) | ([_], _) => {}
        ([_, _], 2) => {}
        _ => {
            return Err(usage(
                "--server-pid: give one, or two with --compare (the baseline's, then the \
                 candidate's)",
            ))
        }
    }
    for (k, inst) in instances.iter_mut().enumerate() {
        inst.pid = args.server_pids.get(k).or(args.server_pids.first()).copied();
    }
    if args.output_format_unsupported() {
        return Err(usage("--output-format: sweep writes summary, human, json or csv"));
    }
    // Signals are watched from before the servers start, so a Ctrl-C while one comes up
    // stops it rather than leaving it running in its own process group.
    let interrupts = Interrupts::install(Duration::ZERO)
        .map_err(|e| anyhow::Error::new(e).context("the sweep could not start"))?;
    // Servers start before the load is read: a spec needs a target. A dry run starts none.
    for inst in instances.iter_mut().filter(|_| !args.load.dry_run) {
        if inst.cmd.is_some() && !start(inst, &args, &interrupts, true)? {
            return Ok(ExitCode::from(130));
        }
    }
    // The load's target: the first instance's (each run sets its own instance's).
    if let Some(url) = instances.first().and_then(|i| i.url.clone()) {
        args.load.url = Some(url);
    }
    if args.load.url.is_none() && args.server_cmds.is_empty() {
        // No target: the built-in server, as `run` does. It shares this process, so its CPU
        // cannot be told from the client's: no server statistics then.
        warning!(
            "no URL and no --server-cmd: sweeping the built-in server in this process, without \
             server statistics"
        );
    }
    // A connections sweep's runs are all unpaced: so is the load they vary.
    let load = match rate {
        true => LoadSpec::from_args(&args.load)?,
        false => LoadSpec::with(&args.load, |e| e.unpaced())?,
    };
    crate::log::set_level(crate::run::level(load.spec.verbosity()));
    interrupts.set_grace(load.spec.timeout());
    let options = SweepOptions::new(&ask, &load.spec)
        .map_err(|e| usage(format!("--{} {}", e.field.replace('_', "-"), e.reason)))?;
    refuse_in_mode(&args, &load, &options)?;
    let trials = Trials::of(&args.load, &load)?;
    if args.load.dry_run {
        let list: Vec<serde_json::Value> = instances
            .iter()
            .map(|i| serde_json::json!({"name": i.name, "url": i.url, "server_cmd": i.cmd, "server_pid": i.pid}))
            .collect();
        return crate::dry_run::print(serde_json::json!({
            "command": "sweep",
            "spec": load.spec.to_json(),
            "sweep": options.to_json(),
            "instances": list,
            "servers": {
                "start_timeout": format!("{:?}", args.server_start_timeout),
                "restart_between_runs": args.restart_server_between_runs,
            },
            "trials": trials.plan(&args.load)?,
            "output": crate::dry_run::output(
                args.load.output_format.unwrap_or(shrike_output::OutputFormat::Summary),
                file_format(&args)?.as_ref(),
            ),
        }));
    }
    let several = instances.len() > 1;
    let axis = if rate { "rate" } else { "connections" };
    let mut servers = Servers { list: instances, args: &args, interrupts: &interrupts };
    let swept = trials.with_runner(&interrupts, |runner| {
        sweep::run(&load.spec, &options, &mut servers, runner, &mut |m| {
            info!(
                "{}{axis} {}: {:.1} responses/s, p99 {:.2}ms{}",
                if several { format!("{}: ", m.instance) } else { String::new() },
                m.level,
                m.run.throughput,
                m.run.latency[2] * 1e3,
                m.run
                    .server
                    .cpu_cores
                    .map_or(String::new(), |c| format!(", server CPU {c:.2} cores"))
            );
        })
    });
    let mut sweep = swept.map_err(|e| match e {
        sweep::SweepError::Spec(e) => load.explain(e),
        sweep::SweepError::Trial(e) => crate::trials::explain(e),
        e => anyhow::Error::new(e),
    })?;
    sweep.complete = sweep.complete && !interrupts.interrupted();
    write(&args, &sweep)?;
    drop(servers);
    drop(load);
    Ok(if sweep.complete { ExitCode::SUCCESS } else { ExitCode::from(130) })
}

impl SweepArgs {
    fn output_format_unsupported(&self) -> bool {
        use shrike_output::OutputFormat as F;
        self.load.output_format.is_some_and(|f| !(f.is_text() || f == F::Json || f == F::Csv))
    }
}

fn instances(args: &SweepArgs) -> anyhow::Result<Vec<Instance>> {
    let one = |name: &str, url: Option<String>, cmd: Option<String>| Instance {
        name: name.into(),
        url,
        cmd,
        server: None,
        pid: None,
    };
    if !args.compare.is_empty() {
        if args.compare.len() != 2 || !args.server_cmds.is_empty() {
            return Err(usage("--compare takes exactly two NAME=URL (and no --server-cmd)"));
        }
        return args
            .compare
            .iter()
            .map(|c| match c.split_once('=') {
                Some((n, u)) if !n.is_empty() && !u.is_empty() => Ok(one(n, Some(u.into()), None)),
                _ => Err(usage(format!("--compare {c:?}: expected NAME=URL"))),
            })
            .collect();
    }
    Ok(match args.server_cmds.as_slice() {
        [] => vec![one("default", args.load.url.clone(), None)],
        [cmd] => vec![one("default", None, Some(cmd.clone()))],
        [a, b] => {
            vec![one("baseline", None, Some(a.clone())), one("candidate", None, Some(b.clone()))]
        }
        _ => return Err(usage("--server-cmd: give one, or two (baseline, then candidate)")),
    })
}

/// Starts an instance's server and points the instance at it (its address may change from
/// one start to the next: port 0). False when a signal interrupted the wait.
fn start(
    inst: &mut Instance,
    args: &SweepArgs,
    interrupts: &Interrupts,
    first: bool,
) -> anyhow::Result<bool> {
    let Some(cmd) = inst.cmd.clone() else { return Ok(true) };
    let s =
        match ServerProcess::start(&cmd, args.server_start_timeout, &|| interrupts.interrupted()) {
            Ok(s) => s,
            Err(StartError::Interrupted) => return Ok(false),
            Err(StartError::Failed(e)) => return Err(e),
        };
    let what = if first { format!("started {cmd:?}") } else { "restarted the server".into() };
    info!("{}: {what} (pid {}) at {}", inst.name, s.pid(), s.addr);
    inst.url = Some(format!("http://{}/", s.addr));
    inst.server = Some(s);
    Ok(true)
}

/// The load's flags a connections sweep sets itself: it runs unpaced, closed loop, and over
/// HTTP/2 and HTTP/3 its requests in flight are the level's connections × their streams.
fn refuse_in_mode(args: &SweepArgs, load: &LoadSpec, options: &SweepOptions) -> anyhow::Result<()> {
    if options.dimension.is_rate() {
        return Ok(());
    }
    let refused = |flag: &str, why: &str| Err(crate::refuse::in_mode("sweep", flag, why));
    if args.load.open_loop.is_some() {
        return refused("--open-loop", "a connections sweep runs unpaced, closed loop");
    }
    match load.spec.protocol() {
        shrike_spec::Protocol::Http2 | shrike_spec::Protocol::Http3
            if args.load.max_active_requests.is_some() =>
        {
            refused(
                "--max-active-requests",
                "a connections sweep keeps connections × --max-concurrent-streams in flight",
            )
        }
        _ => Ok(()),
    }
}

/// Where `-o FILE` goes and in which format: `--output-file-format`, else its extension
/// (`.json`, `.csv`), else the text report.
fn file_format(
    args: &SweepArgs,
) -> anyhow::Result<Option<(std::path::PathBuf, shrike_output::OutputFormat)>> {
    use shrike_output::OutputFormat as F;
    let Some(path) = &args.load.output_file else { return Ok(None) };
    let f = match args.load.output_file_format {
        Some(f) if f.is_text() || f == F::Json || f == F::Csv => f,
        Some(f) => {
            return Err(usage(format!(
                "--output-file-format {f}: sweep writes summary, human, json or csv"
            )))
        }
        None => {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
            match ext.as_str() {
                "json" => F::Json,
                "csv" => F::Csv,
                _ => F::Human,
            }
        }
    };
    Ok(Some((path.clone(), f)))
}

fn write(args: &SweepArgs, sweep: &Sweep) -> anyhow::Result<()> {
    use shrike_output::OutputFormat as F;
    let render = |f: Option<F>| -> anyhow::Result<String> {
        Ok(match f {
            Some(F::Json) => serde_json::to_string_pretty(&sweep.json())? + "\n",
            Some(F::Csv) => sweep.csv(),
            _ => sweep.human(),
        })
    };
    // The file first: if stdout is gone (a closed pipe), the sweep is still kept.
    if let Some((path, f)) = file_format(args)? {
        let text = render(Some(f))?;
        crate::atomic::write(&path, |w| w.write_all(text.as_bytes()))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    crate::out::print(&render(args.load.output_format)?)
}
