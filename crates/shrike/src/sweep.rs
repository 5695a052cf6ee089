//! `shrike sweep`: a grid over connections (closed loop, unpaced, as the webserver guide's
//! wrk runs) or over rate (open loop), `--iterations` times per point, sampling the server's
//! resources over each point's measuring window. With two instances (`--compare` or two
//! `--server-cmd`) runs are interleaved, the first alternating, so drift hits both alike.
//! The loop is shrike-plan's (`sweep::run`); this command starts the servers it is told to,
//! picks where the runs go (here, `--remote`, `--nighthawk-service`) and writes the report.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use shrike_plan::sweep::server::{ServerCmd, ServerProcess, StartError};
use shrike_plan::sweep::{self, Placement, Source, Sweep, SweepAsk, SweepOptions};

use crate::args::{parse, usage};
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::{info, warning};
use crate::run::RunArgs;
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
    /// switches of every thread). With --compare, once for both or twice: the baseline's, then
    /// the candidate's.
    #[arg(
        long = "server-pid",
        value_name = "PID",
        conflicts_with_all = ["server_cmds", "server_pid_files", "server_cgroups"]
    )]
    pub server_pids: Vec<u32>,
    /// Sample the process this pid file names, and its descendants, re-reading the file at
    /// every sample: for a server that daemonizes (nginx) or restarts. With --server-cmd, the
    /// server is that process: watched, sampled and stopped through it. Once, or twice with
    /// two instances.
    #[arg(long = "server-pid-file", value_name = "FILE", conflicts_with = "server_cgroups")]
    pub server_pid_files: Vec<std::path::PathBuf>,
    /// Sample every process of this cgroup (v2) directory, its CPU and memory from the
    /// cgroup's own cpu.stat and memory.current (processes that exit still count): for a
    /// server in a container or a systemd unit. Once, or twice with two instances.
    #[arg(long = "server-cgroup", value_name = "DIR")]
    pub server_cgroups: Vec<std::path::PathBuf>,
    /// Start the server with `sh -c CMD`, sample it, and stop it after. It listens at the
    /// target URL's address if one is given, else at the first HOST:PORT it prints; the sweep
    /// starts once that address accepts a connection. Given twice: a baseline and a candidate,
    /// compared point by point.
    #[arg(long = "server-cmd", value_name = "CMD")]
    pub server_cmds: Vec<String>,
    /// How long --server-cmd's server gets to accept a connection.
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
    cmd: Option<ServerCmd>,
    server: Option<ServerProcess>,
    /// How to sample a server the sweep did not start, or one that daemonizes
    /// (`--server-pid`, `--server-pid-file`, `--server-cgroup`).
    source: Option<Source>,
}

impl Instance {
    /// What the sampler reads: the given source, else the started server.
    fn sampled(&self) -> Option<Source> {
        self.source.clone().or_else(|| self.server.as_ref().map(ServerProcess::source))
    }

    /// Why it can run no more, if it cannot: its server exited.
    fn gone(&mut self) -> Option<String> {
        let why = match (&mut self.server, &self.source) {
            (Some(s), _) => s.exited(),
            (None, Some(src @ (Source::Tree(_) | Source::PidFile(_)))) => src.check().err(),
            _ => None,
        }?;
        Some(format!("{}: the server stopped during the sweep: {why}", self.name))
    }
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
            match start(inst, self.interrupts, false) {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => return Err(format!("{}: {e:#}", inst.name)),
            }
        }
        if let Some(why) = inst.gone() {
            return Err(why);
        }
        Ok(Some(Placement { url: inst.url.clone(), server: inst.sampled() }))
    }

    fn ran(&mut self, k: usize) -> Result<(), String> {
        match self.list[k].gone() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

pub fn run(mut args: SweepArgs) -> anyhow::Result<ExitCode> {
    restore_grid(&mut args);
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
    sources(&args, &mut instances)?;
    if args.output_format_unsupported() {
        return Err(usage("--output-format: sweep writes summary, human, json or csv"));
    }
    // Signals are watched from before the servers start, so a Ctrl-C while one comes up
    // stops it rather than leaving it running in its own process group.
    let interrupts = Interrupts::install(Duration::ZERO)
        .map_err(|e| anyhow::Error::new(e).context("the sweep could not start"))?;
    // Where the sweep goes is checked before anything starts. A dry run starts and writes none.
    if let Some((path, _)) = file_format(&args)?.filter(|_| !args.load.dry_run) {
        crate::atomic::ready(&path, "--output")?;
    }
    // Servers start before the load is read: a spec needs a target. A dry run starts none.
    for inst in instances.iter_mut().filter(|_| !args.load.dry_run) {
        if inst.cmd.is_some() && !start(inst, &interrupts, true)? {
            return Ok(ExitCode::from(crate::interrupts::status()));
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
    let setup = described(&instances, &args);
    if args.load.dry_run {
        return crate::dry_run::print(serde_json::json!({
            "command": "sweep",
            "spec": load.spec.to_json(),
            "sweep": options.to_json(),
            "instances": setup["instances"],
            "servers": setup["servers"],
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
            info!("{}", sweep::report::progress(&m, axis, several));
        })
    });
    let mut sweep = swept.map_err(|e| match e {
        sweep::SweepError::Spec(e) => load.explain(e),
        sweep::SweepError::Trial(e) => crate::trials::explain(e),
        e => anyhow::Error::new(e),
    })?;
    sweep.complete = sweep.complete && !interrupts.interrupted();
    sweep.setup = setup;
    write(&args, &sweep)?;
    drop(servers);
    drop(load);
    // A failure (a point nothing answered, a server that stopped) fails the run even when
    // it was also interrupted: what was measured is written either way.
    if let Some(why) = sweep.failure() {
        crate::log::line(crate::log::Tag::Error, &format!("the sweep failed: {why}"));
        return Ok(ExitCode::from(1));
    }
    Ok(if sweep.complete { ExitCode::SUCCESS } else { ExitCode::from(crate::interrupts::status()) })
}

/// What each instance was and how its server was run: what a stored sweep says it tested.
fn described(instances: &[Instance], args: &SweepArgs) -> serde_json::Value {
    let list: Vec<serde_json::Value> = instances
        .iter()
        .map(|i| {
            serde_json::json!({
                "name": i.name,
                "url": i.url,
                "server_cmd": i.cmd.as_ref().map(|c| &c.cmd),
                "server_pid_file": i.cmd.as_ref().and_then(|c| c.pid_file.as_ref()),
                "sampled": i.source.as_ref().map(Source::describe),
            })
        })
        .collect();
    serde_json::json!({
        "instances": list,
        "servers": {
            "start_timeout": format!("{:?}", args.server_start_timeout),
            "restart_between_runs": args.restart_server_between_runs,
        },
    })
}

impl SweepArgs {
    fn output_format_unsupported(&self) -> bool {
        use shrike_output::OutputFormat as F;
        self.load.output_format.is_some_and(|f| !(f.is_text() || f == F::Json || f == F::Csv))
    }
}

fn instances(args: &SweepArgs) -> anyhow::Result<Vec<Instance>> {
    let one = |name: &str, url: Option<String>, cmd: Option<&String>| -> anyhow::Result<_> {
        let cmd = cmd.map(|c| -> anyhow::Result<ServerCmd> {
            Ok(ServerCmd {
                cmd: c.clone(),
                addr: url.as_deref().map(socket_addr).transpose()?,
                pid_file: None,
                start_timeout: args.server_start_timeout,
            })
        });
        Ok(Instance { name: name.into(), url, cmd: cmd.transpose()?, server: None, source: None })
    };
    if !args.compare.is_empty() {
        if args.compare.len() != 2 || !args.server_cmds.is_empty() {
            return Err(usage("--compare takes exactly two NAME=URL (and no --server-cmd)"));
        }
        return args
            .compare
            .iter()
            .map(|c| match c.split_once('=') {
                Some((n, u)) if !n.is_empty() && !u.is_empty() => one(n, Some(u.into()), None),
                _ => Err(usage(format!("--compare {c:?}: expected NAME=URL"))),
            })
            .collect();
    }
    match args.server_cmds.as_slice() {
        [] => Ok(vec![one("default", args.load.url.clone(), None)?]),
        [cmd] => Ok(vec![one("default", args.load.url.clone(), Some(cmd))?]),
        [_, _] if args.load.url.is_some() => Err(usage(
            "two --server-cmd listen at two addresses, each printing its own: give no URL",
        )),
        [a, b] => Ok(vec![one("baseline", None, Some(a))?, one("candidate", None, Some(b))?]),
        _ => Err(usage("--server-cmd: give one, or two (baseline, then candidate)")),
    }
}

/// Where each instance's server is sampled from: `--server-pid`, `--server-pid-file` or
/// `--server-cgroup`, once for every instance or once each.
fn sources(args: &SweepArgs, instances: &mut [Instance]) -> anyhow::Result<()> {
    let given: Vec<(&str, Source)> = args
        .server_pids
        .iter()
        .map(|p| ("--server-pid", Source::Tree(*p)))
        .chain(
            args.server_pid_files.iter().map(|f| ("--server-pid-file", Source::PidFile(f.clone()))),
        )
        .chain(args.server_cgroups.iter().map(|d| ("--server-cgroup", Source::Cgroup(d.clone()))))
        .collect();
    let Some((flag, _)) = given.first() else { return Ok(()) };
    if !(given.len() == 1 || given.len() == instances.len()) {
        return Err(usage(format!(
            "{flag}: give one, or one per instance ({} here: the baseline's, then the \
             candidate's)",
            instances.len()
        )));
    }
    for (k, inst) in instances.iter_mut().enumerate() {
        let (flag, source) = given.get(k).unwrap_or(&given[0]).clone();
        match (&source, &mut inst.cmd) {
            // A server the sweep starts writes its pid file as it comes up: checked then.
            (Source::PidFile(f), Some(cmd)) => cmd.pid_file = Some(f.clone()),
            _ => source.check().map_err(|e| usage(format!("{flag}: {e}")))?,
        }
        inst.source = match (&source, &inst.cmd) {
            // Sampled through the started server, which knows its pid file.
            (Source::PidFile(_), Some(_)) => None,
            _ => Some(source),
        };
    }
    Ok(())
}

/// The address a URL's server listens at (its host resolved, its port or the scheme's).
fn socket_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs as _;
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(h, p)| p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']')));
    let with_port = match (has_port, scheme) {
        (true, _) => authority.to_string(),
        (false, "https") => format!("{authority}:443"),
        (false, _) => format!("{authority}:80"),
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| usage(format!("{url}: cannot tell the address its --server-cmd listens at")))
}

/// Starts an instance's server and points the instance at it (its address may change from
/// one start to the next: port 0). False when a signal interrupted the wait.
fn start(inst: &mut Instance, interrupts: &Interrupts, first: bool) -> anyhow::Result<bool> {
    let Some(how) = inst.cmd.clone() else { return Ok(true) };
    let s = match ServerProcess::start(&how, &|| interrupts.interrupted()) {
        Ok(s) => s,
        Err(StartError::Interrupted) => return Ok(false),
        Err(StartError::Failed(e)) => return Err(anyhow::anyhow!(e)),
    };
    let what = if first { format!("started {:?}", how.cmd) } else { "restarted the server".into() };
    let sampled = s.source().describe();
    info!("{}: {what} ({sampled}), accepting connections at {}", inst.name, s.addr);
    if inst.url.is_none() || how.addr.is_none() {
        inst.url = Some(format!("http://{}/", s.addr));
    }
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

/// A stored sweep named by `--spec` is swept again as it was: its grid when neither
/// `--connections` nor `--rates` is given, and its iterations, wait, sampling interval and
/// streams per connection for the flags that are not. The load comes from the same file's
/// options, as for every `--spec`; servers are the command line's to start.
fn restore_grid(args: &mut SweepArgs) {
    let Some(doc) = crate::load::stored_plan(&args.load, "sweep") else { return };
    let g = &doc["grid"];
    let levels: Vec<String> = g["levels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_u64)
        .map(|l| l.to_string())
        .collect();
    if args.rates.is_none() && args.load.connections.is_none() && !levels.is_empty() {
        match g["axis"].as_str() {
            Some("rate") => args.rates = Some(levels.join(",")),
            _ => args.load.connections = Some(levels.join(",")),
        }
    }
    let secs = |k: &str| g[k].as_str().and_then(|t| shrike_stats::duration::parse_duration(t).ok());
    args.iterations =
        args.iterations.or(g["iterations"].as_u64().and_then(|n| usize::try_from(n).ok()));
    args.wait = args.wait.or(secs("wait"));
    args.collect_stats_interval = args.collect_stats_interval.or(secs("collect_stats_interval"));
    args.load.max_concurrent_streams = args
        .load
        .max_concurrent_streams
        .or(g["streams_per_connection"].as_u64().and_then(|n| u32::try_from(n).ok()));
}
