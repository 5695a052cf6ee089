//! `shrike sweep`: a grid over connections (closed loop, unpaced, as the webserver guide's
//! wrk runs) or over rate (open loop), `--iterations` times per point, sampling the server's
//! resources over each point's measuring window. With two instances (`--compare` or two
//! `--server-cmd`) runs are interleaved, the first alternating, so drift hits both alike.
//! Each point's spec is the user's load varied (`LoadSpec::vary`), run through the engine's
//! library call.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use shrike_plan::sweep::{grid, resources, Iteration, Point, Sampler, Sweep};
use shrike_spec::Protocol;
use shrike_stats::duration::parse_duration;
use shrike_stats::Termination;

use crate::args::usage;
use crate::interrupts::Interrupts;
use crate::load::LoadSpec;
use crate::log::{info, warning};
use crate::run::RunArgs;
use crate::server_cmd::{ServerCmd, StartError};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A rate grid (requests per second, all workers together) instead of connections: each
    /// point is an open loop at that rate with --connections (one number) per worker.
    #[arg(long, value_name = "GRID")]
    pub rates: Option<String>,
    /// Measured runs per point (their spread gives the error bars and intervals).
    #[arg(long, default_value_t = 3)]
    pub iterations: usize,
    /// Pause between runs, so one run's connections and backlog do not bleed into the next.
    #[arg(long, default_value = "1s", value_parser = parse_duration_arg)]
    pub wait: Duration,
    /// Sample this running server's process tree (CPU, RSS, VMS, open files, context
    /// switches). With --compare, once for both or twice: the baseline's, then the candidate's.
    #[arg(long = "server-pid", value_name = "PID", conflicts_with = "server_cmds")]
    pub server_pids: Vec<u32>,
    /// Start the server with `sh -c CMD`, target the first HOST:PORT it prints, sample it, and
    /// stop it after. Given twice: a baseline and a candidate, compared point by point.
    #[arg(long = "server-cmd", value_name = "CMD")]
    pub server_cmds: Vec<String>,
    /// How long --server-cmd's server gets to print its listen address.
    #[arg(long, default_value = "15s", value_parser = parse_duration_arg)]
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
    /// Time between resource samples.
    #[arg(long, default_value = "250ms", value_parser = parse_duration_arg)]
    pub collect_stats_interval: Duration,
    /// The load: `shrike run`'s flags; --connections takes a grid (1,4,16:256:16,512). Over
    /// HTTP/2 and HTTP/3 each connection carries --max-concurrent-streams streams (1 unless
    /// given, as h2load's -m), so a point's requests in flight are connections × streams.
    #[command(flatten)]
    pub load: RunArgs,
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

const STATS: [&str; 5] = ["cpu", "rss", "vms", "fds", "ctx-switches"];

/// One thing swept: a name, its target and how its server is found.
struct Instance {
    name: String,
    url: Option<String>,
    cmd: Option<String>,
    server: Option<ServerCmd>,
    /// A running server to sample (`--server-pid`).
    pid: Option<u32>,
}

pub fn run(mut args: SweepArgs) -> anyhow::Result<ExitCode> {
    for s in &args.collect_stats {
        if !STATS.contains(&s.as_str()) {
            return Err(usage(format!(
                "--collect-stats {s:?}: expected any of {}",
                STATS.join(", ")
            )));
        }
    }
    if args.iterations == 0 {
        return Err(usage("--iterations must be at least 1"));
    }
    let (axis, levels) = match (&args.rates, &args.load.connections) {
        (Some(r), _) => ("rate", grid::parse(r).map_err(|e| usage(format!("--rates: {e}")))?),
        (None, Some(c)) => {
            ("connections", grid::parse(c).map_err(|e| usage(format!("--connections: {e}")))?)
        }
        (None, None) => {
            return Err(usage("give the grid: --connections 1,4,16:64:16 or --rates 100,200,400"))
        }
    };
    // The grid is ours: the load's own connections flag must read as one number (or none).
    if axis == "connections" {
        args.load.connections = None;
    } else if let Some(c) = &args.load.connections {
        if c.contains([',', ':']) {
            return Err(usage("--rates sweeps the rate: give --connections as one number"));
        }
    }
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
    // Servers start before the load is read: a spec needs a target.
    for inst in &mut instances {
        if inst.cmd.is_some() && !start(inst, &args, &interrupts, true)? {
            return Ok(ExitCode::from(130));
        }
    }
    // The load's target: the first instance's (each run sets its own instance's).
    if let Some(url) = instances.first().and_then(|i| i.url.clone()) {
        args.load.url = Some(url);
    }
    if args.load.url.is_none() {
        // No target: the built-in server, as `run` does. It shares this process, so its CPU
        // cannot be told from the client's: no server statistics then.
        warning!(
            "no URL and no --server-cmd: sweeping the built-in server in this process, without \
             server statistics"
        );
    }
    let load = LoadSpec::from_args(&args.load)?;
    let workers = load.spec.concurrency().workers().get();
    // HTTP/2 and HTTP/3 multiplex: a connection point carries this many streams per connection.
    let streams = match load.spec.protocol() {
        Protocol::Http1 => None,
        Protocol::Http2 | Protocol::Http3 => Some(args.load.max_concurrent_streams.unwrap_or(1)),
    };
    interrupts.set_grace(load.spec.timeout());
    let mut sweep = Sweep {
        axis: axis.into(),
        workers: workers as u64,
        instances: instances.iter().map(|i| i.name.clone()).collect(),
        points: Vec::new(),
        server_cores: None,
        complete: true,
    };
    'grid: for &level in &levels {
        for inst in &instances {
            sweep.points.push(Point { instance: inst.name.clone(), level, iterations: Vec::new() });
        }
        for i in 0..args.iterations {
            // Two instances alternate who goes first (AB, BA, AB…), so a drift within an
            // iteration, or an advantage of going first or second, falls on both alike.
            let order: Vec<usize> = if i % 2 == 1 {
                (0..instances.len()).rev().collect()
            } else {
                (0..instances.len()).collect()
            };
            for k in order {
                let inst = &mut instances[k];
                if interrupts.interrupted() {
                    sweep.complete = false;
                    break 'grid;
                }
                if args.restart_server_between_runs {
                    inst.server = None;
                    if !start(inst, &args, &interrupts, false)? {
                        sweep.complete = false;
                        break 'grid;
                    }
                }
                let pid = inst.server.as_mut().map(|s| (s.alive(), s.pid()));
                if let Some((false, _)) = pid {
                    return Err(anyhow::anyhow!(
                        "{}: the server exited during the sweep",
                        inst.name
                    ));
                }
                let pid = pid.map(|p| p.1).or(inst.pid);
                if sweep.server_cores.is_none() {
                    sweep.server_cores = pid.and_then(allowed_cores);
                }
                let mut patch = json!({
                    "duration": format!("{}s", load.spec.duration().unwrap_or(Duration::from_secs(5)).as_secs_f64()),
                    "no_duration": false,
                    "total_requests": null,
                    "no_default_failure_predicates": true,
                });
                if let Some(url) = &inst.url {
                    patch["uri"] = json!(url);
                    patch["built_in_server"] = json!(false);
                }
                if axis == "connections" {
                    patch["connections"] = json!(level);
                    patch["requests_per_second"] = json!("max");
                    if let Some(streams) = streams {
                        // As h2load's -c N -m M: N connections of M streams each. Without the
                        // stream limit the pool would put every request on one connection.
                        patch["max_concurrent_streams"] = json!(streams);
                        patch["max_active_requests"] = json!(level * u64::from(streams));
                    }
                } else {
                    patch["requests_per_second"] = json!(level as f64 / workers as f64);
                    patch["open_loop"] = json!(args.load.open_loop.unwrap_or(true));
                }
                let spec = load.vary(&patch)?;
                let ready = interrupts
                    .preparing(|| shrike_engine::Run::new(&spec).prepare())
                    .map_err(|e| load.explain(e))?;
                let (cpu0, t0) = (crate::capacity::process_cpu_seconds(), Instant::now());
                let sampler = Sampler::start(pid, args.collect_stats_interval);
                let result = interrupts
                    .execute(ready)
                    .map_err(|e| anyhow::Error::new(e).context("a run could not start"))?;
                let window = keep_selected(sampler.finish(), &args.collect_stats);
                let client = crate::capacity::process_cpu_seconds()
                    .zip(cpu0)
                    .map(|(b, a)| (b - a) / t0.elapsed().as_secs_f64());
                if result.termination == Termination::Interrupted {
                    sweep.complete = false;
                    break 'grid;
                }
                let it = Iteration::of(&result, window, client);
                info!(
                    "{}{} {level}: {:.1} responses/s, p99 {:.2}ms{}",
                    if instances_len(&sweep) > 1 {
                        format!("{}: ", inst.name)
                    } else {
                        String::new()
                    },
                    axis,
                    it.throughput,
                    it.latency[2] * 1e3,
                    it.server
                        .cpu_cores
                        .map_or(String::new(), |c| format!(", server CPU {c:.2} cores"))
                );
                let at = sweep.points.len() - instances_len(&sweep) + k;
                sweep.points[at].iterations.push(it);
                if !args.wait.is_zero() {
                    std::thread::sleep(args.wait);
                }
            }
        }
    }
    sweep.points.retain(|p| !p.iterations.is_empty());
    write(&args, &sweep)?;
    drop(instances);
    drop(load);
    Ok(if sweep.complete { ExitCode::SUCCESS } else { ExitCode::from(130) })
}

fn instances_len(s: &Sweep) -> usize {
    s.instances.len()
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

/// The window with only the statistics `--collect-stats` chose (all when it chose none).
fn keep_selected(mut w: resources::Window, chosen: &[String]) -> resources::Window {
    let on = |s: &str| chosen.is_empty() || chosen.iter().any(|c| c == s);
    if !on("cpu") {
        w.cpu_cores = None;
    }
    if !on("rss") {
        w.rss_max_bytes = None;
        w.rss_mean_bytes = None;
    }
    if !on("vms") {
        w.vms_max_bytes = None;
    }
    if !on("fds") {
        w.fds_max = None;
    }
    if !on("ctx-switches") {
        w.ctx_switches_per_sec = None;
    }
    w
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
    let s = match ServerCmd::start(&cmd, args.server_start_timeout, &|| interrupts.interrupted()) {
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

/// The CPUs a process may run on (its affinity), from /proc/PID/status.
fn allowed_cores(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim();
    let mut n = 0u32;
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => n += b.trim().parse::<u32>().ok()? - a.trim().parse::<u32>().ok()? + 1,
            None => n += 1,
        }
    }
    Some(f64::from(n))
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
    if let Some(path) = &args.load.output_file {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        let f = match ext.as_str() {
            "json" => Some(F::Json),
            "csv" => Some(F::Csv),
            _ => None,
        };
        let text = render(f)?;
        crate::atomic::write(path, |w| w.write_all(text.as_bytes()))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    crate::out::print(&render(args.load.output_format)?)
}
