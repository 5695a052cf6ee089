//! Capacity and sweep off the happy path, against real servers: a refused port fails with its
//! cause, server errors and client overflow stay apart, objectives without units are refused,
//! every thread and every process of a server is sampled (a multi-threaded `shrike serve`,
//! nginx with two workers through its pid file, each checked against /proc read here), and
//! servers that print before they listen, or die mid-sweep, are waited for and reported.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(90);

/// A loopback port nothing listens on (bound, then closed).
/// An address nothing listens on, kept so: no test server binds 127.0.0.99 (one on 127.0.0.1
/// could take a port freed there while the suite runs in parallel).
fn closed_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.99:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A process and its descendants, as /proc says: (CPU seconds, context switches of every
/// thread, processes).
fn tree(root: u32) -> (f64, u64, usize) {
    let (mut cpu, mut ctx, mut n) = (0.0, 0u64, 0usize);
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let f: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        cpu += (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0;
        n += 1;
        for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for key in ["voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"] {
                ctx += status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map_or(0, |v| v.trim().parse::<u64>().unwrap());
            }
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            stack.extend(children.split_whitespace().map(|c| c.parse::<u32>().unwrap()));
        }
    }
    (cpu, ctx, n)
}

/// The sweep's iterations, each with its run length (`-d`).
fn iterations(v: &Value) -> Vec<Value> {
    v["sweep"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["iterations"].as_array().unwrap().clone())
        .collect()
}

/// What a sweep's windows saw in all (rate × window length), against what /proc saw over the
/// whole sweep (which holds the windows and a little around them).
/// The total of a per-second sampled figure: each iteration's rate over the seconds its
/// readings covered (`window_s`, the run's own window), else over `secs`.
fn sampled_total(v: &Value, key: &str, secs: f64) -> f64 {
    let covered = |i: &Value| i["server"]["window_s"].as_f64().unwrap_or(secs);
    iterations(v).iter().map(|i| i["server"][key].as_f64().unwrap() * covered(i)).sum()
}

/// A connections sweep of `url` (2 and 8, two 0.5 s runs each, no waits) sampling the server
/// through `how` (`--server-pid`, `--server-pid-file`, `--server-cgroup`) `what`: its JSON.
fn sampling_sweep(url: &str, how: &str, what: &str) -> Value {
    let args = ["sweep", url, "--connections", "2,8", "--iterations", "2", "-d", "0.5"];
    let out =
        run(&[&args[..], &["--wait", "0s", how, what, "--output-format", "json"]].concat(), LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    json(&out)
}

#[test]
fn a_sweep_of_a_refused_port_fails_and_says_why() {
    let url = format!("http://{}/", closed_addr());
    let args = ["sweep", &url, "--connections", "1,2", "--iterations", "1", "-d", "0.3"];
    let out = run(&[&args[..], &["--wait", "0s"]].concat(), LIMIT);
    assert_eq!(out.code(), 1, "{}\n{}", out.stdout, out.stderr);
    // The answer first: failed, at which point, and why.
    let first = out.stdout.lines().find(|l| !l.trim().is_empty() && !l.starts_with("Shrike"));
    let first = first.unwrap_or_default();
    assert!(first.starts_with("FAILED: at 1 connections"), "{}", out.stdout);
    assert!(first.contains("Connection refused"), "{first}");
    assert!(first.contains("is the server running"), "{first}");
    assert!(!out.stdout.contains("NaN") && !out.stdout.contains("peak 0.0"), "{}", out.stdout);
    assert!(out.stderr.contains("the sweep failed"), "{}", out.stderr);
    // The JSON says it too.
    let out = run(&[&args[..], &["--wait", "0s", "--output-format", "json"]].concat(), LIMIT);
    assert_eq!(out.code(), 1);
    let v = json(&out);
    assert!(v["failed"].as_str().unwrap().contains("Connection refused"), "{v}");
    assert!(iterations(&v)[0]["cause"].as_str().unwrap().contains("refused"));
    assert_eq!(v["peak"], Value::Null);
}

#[test]
fn a_capacity_search_of_a_refused_port_names_the_cause_not_start_lower() {
    let url = format!("http://{}/", closed_addr());
    let out = run(
        &["capacity", &url, "--slo", "p99<=50ms", "--trial-duration", "0.3s", "--rps", "5"],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "{}\n{}", out.stdout, out.stderr);
    let answer = out.stdout.lines().find(|l| l.contains("NO ANSWER")).unwrap_or_default();
    assert!(answer.contains("Connection refused"), "{}", out.stdout);
    assert!(answer.contains("is the server running"), "{answer}");
    assert!(!answer.contains("start lower"), "{answer}");
}

#[test]
fn objectives_need_units_and_p999_is_p99_9() {
    let server = Server::start(&[]);
    let url = server.url("/");
    let before = Witness::before(&server);
    let out = run(&["capacity", &url, "--slo", "p99<=50", "--dry-run"], LIMIT);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("give a unit: 50ms?"), "{}", out.stderr);
    let out = run(&["capacity", &url, "--slo", "p999<=50ms", "--rps", "10", "--dry-run"], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    // The errors objective every search holds unless given, said in the plan.
    assert_eq!(v["search"]["slos"], serde_json::json!(["p99.9<=50.00ms", "errors<=1%"]), "{v}");
    // A refused objective and a dry run send nothing: the server saw no connection.
    let w = Witness::since(&server, before);
    assert_eq!((w.count("/requests"), w.connections()), (0, 0));
}

#[test]
fn a_p99_9_objective_is_shown_as_itself_while_the_search_runs() {
    let server = Server::start(&[]);
    let out = run(
        &[
            "capacity",
            &server.url("/"),
            "--slo",
            "p99.9<=200ms",
            "--rps",
            "50",
            "--trial-duration",
            "0.3s",
            "--final-duration",
            "0.3s",
            "--max-trials",
            "2",
        ],
        LIMIT,
    );
    let progress: Vec<&str> = out.stderr.lines().filter(|l| l.contains("trial 1")).collect();
    assert!(progress.iter().any(|l| l.contains("p99.9 ")), "{}", out.stderr);
    assert!(!progress.iter().any(|l| l.contains(" p99 ")), "{}", out.stderr);
    // Two passing trials and no more allowed: not settled, said in one readable line.
    if let Some(l) = out.stdout.lines().find(|l| l.contains("NOT SETTLED")) {
        assert!(
            l.contains("out of trials (2 run, the --max-trials limit): the answer lies"),
            "{l}"
        );
        assert!(!l.trim_start().contains("  "), "no run of spaces inside the sentence: {l:?}");
    }
}

#[test]
fn client_overflow_is_not_a_server_error() {
    // One connection, 50 ms per response: at most 20/s; 100/s open loop overflows without a
    // single server error.
    let server = Server::start(&["--static-delay", "50ms"]);
    let (out, w) = run_witnessed(
        &server,
        &[
            "sweep",
            &server.url("/"),
            "--rates",
            "100",
            "--connections",
            "1",
            "--iterations",
            "1",
            "-d",
            "0.6",
            "--wait",
            "0s",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let it = &iterations(&v)[0];
    assert_eq!(it["errors"], 0, "{it}");
    assert!(it["overflow"].as_u64().unwrap() > 10, "{it}");
    assert!(it["successes"].as_u64().unwrap() > 0, "{it}");
    // The server answered every request it saw with a 2xx, as many as the sweep's successes:
    // the overflow never reached it, and no error came from it.
    let answered = w.count("/responses/2xx");
    assert_eq!(w.count("/requests"), answered, "{it}");
    assert_eq!(answered, it["successes"].as_u64().unwrap(), "{it}");
}

#[test]
fn every_thread_of_a_multithreaded_server_is_sampled() {
    let server = Server::start(&["--concurrency", "2"]);
    let pid = server.pid();
    let (cpu0, ctx0, _) = tree(pid);
    let v = sampling_sweep(&server.url("/"), "--server-pid", &pid.to_string());
    let (cpu1, ctx1, _) = tree(pid);
    let (ctx, cpu) = ((ctx1 - ctx0) as f64, cpu1 - cpu0);
    let sampled_ctx = sampled_total(&v, "ctx_switches_per_s", 0.5);
    let sampled_cpu = sampled_total(&v, "cpu_cores", 0.5);
    // The runs' own windows (their sending, not their start-up or drain, sampled every
    // step) hold most of the sweep's load, and never more than it; reading only the main
    // thread (which a tokio server leaves idle) saw about nothing.
    assert!(sampled_ctx >= 0.3 * ctx && sampled_ctx <= 1.2 * ctx + 50.0, "{sampled_ctx} vs {ctx}");
    assert!(sampled_cpu >= 0.3 * cpu && sampled_cpu <= 1.2 * cpu + 0.05, "{sampled_cpu} vs {cpu}");
    for i in iterations(&v) {
        let s = &i["server"];
        let (all, vol, invol) = (
            s["ctx_switches_per_s"].as_f64().unwrap(),
            s["voluntary_ctx_switches_per_s"].as_f64().unwrap(),
            s["involuntary_ctx_switches_per_s"].as_f64().unwrap(),
        );
        assert!((all - vol - invol).abs() < 1e-6 * all.max(1.0), "{s}");
        assert!(s["threads_max"].as_u64().unwrap() >= 3, "main and two workers: {s}");
    }
}

/// nginx in the foreground with a master and two workers, writing its pid file.
struct Nginx {
    child: Child,
    port: u16,
    pid_file: std::path::PathBuf,
}

impl Nginx {
    fn start(dir: &Path) -> Nginx {
        let port = free_port();
        let pid_file = dir.join("nginx.pid");
        let conf = format!(
            "daemon off; worker_processes 2; pid {pid}; error_log stderr;\n\
             events {{ worker_connections 256; }}\n\
             http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
             fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
             server {{ listen 127.0.0.1:{port}; location / {{ return 200 ok; }} }} }}\n",
            pid = pid_file.display(),
            d = dir.display()
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        use std::os::unix::process::CommandExt as _;
        let child = Command::new("/usr/sbin/nginx")
            .args(["-p", &dir.display().to_string(), "-c", "nginx.conf", "-e", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Not the test's own stderr: a worker outliving the test would hold it open.
            .stderr(Stdio::null())
            // Its own process group, so ending it ends its workers too.
            .process_group(0)
            .spawn()
            .expect("nginx (Debian's nginx package; .ci/run installs it)");
        let until = Instant::now() + Duration::from_secs(10);
        // Up: listening, its pid file written, and both workers forked (the master listens
        // and writes the file before it forks them).
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
            || !pid_file.exists()
            || tree(child.id()).2 < 3
        {
            assert!(Instant::now() < until, "nginx did not come up on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, port, pid_file }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // The master and its workers: the process group this test made, by its id.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

#[test]
fn nginx_with_two_workers_is_sampled_through_its_pid_file() {
    let dir = scratch("plan-nginx");
    let nginx = Nginx::start(&dir);
    let master = nginx.child.id();
    let (cpu0, ctx0, procs) = tree(master);
    assert_eq!(procs, 3, "a master and two workers");
    let url = format!("http://127.0.0.1:{}/", nginx.port);
    let v = sampling_sweep(&url, "--server-pid-file", &nginx.pid_file.display().to_string());
    let (cpu1, ctx1, _) = tree(master);
    let (ctx, cpu) = ((ctx1 - ctx0) as f64, cpu1 - cpu0);
    let sampled_ctx = sampled_total(&v, "ctx_switches_per_s", 0.5);
    let sampled_cpu = sampled_total(&v, "cpu_cores", 0.5);
    assert!(sampled_ctx >= 0.3 * ctx && sampled_ctx <= 1.2 * ctx + 50.0, "{sampled_ctx} vs {ctx}");
    assert!(sampled_cpu >= 0.3 * cpu && sampled_cpu <= 1.2 * cpu + 0.05, "{sampled_cpu} vs {cpu}");
    for i in iterations(&v) {
        assert_eq!(i["server"]["processes_max"], 3, "{i}");
        assert!(i["server"]["source"].as_str().unwrap().contains("nginx.pid"), "{i}");
    }
}

#[test]
fn a_server_that_prints_before_it_listens_is_waited_for() {
    // The address comes a second before anything listens there: the first point must not be
    // measured against a closed port.
    let bin = env!("CARGO_BIN_EXE_shrike");
    let port = free_port();
    let cmd = format!("echo 127.0.0.1:{port}; sleep 1; exec {bin} serve --listen 127.0.0.1:{port}");
    let out = run(
        &[
            "sweep",
            "--connections",
            "1",
            "--iterations",
            "1",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--server-cmd",
            &cmd,
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let it = &iterations(&json(&out))[0];
    assert_eq!(it["errors"], 0, "{it}");
    assert!(it["successes"].as_u64().unwrap() > 0, "{it}");
}

#[test]
fn a_server_that_dies_mid_sweep_keeps_the_points_and_fails_naming_its_exit() {
    // The server runs about a second, then its command exits 3: later points cannot run.
    let bin = env!("CARGO_BIN_EXE_shrike");
    let dir = scratch("plan-dies");
    let child_pid = dir.join("server.pid");
    let cmd = format!(
        "{bin} serve --listen 127.0.0.1:0 & echo $! > {}; sleep 1.2; kill $!; wait; exit 3",
        child_pid.display()
    );
    let out = run(
        &[
            "sweep",
            "--connections",
            "1,2,4,8",
            "--iterations",
            "2",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--server-cmd",
            &cmd,
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let v = json(&out);
    assert!(!iterations(&v).is_empty(), "the points before it are kept: {v}");
    let why = v["failed"].as_str().unwrap();
    assert!(why.contains("exit status: 3"), "{why}");
    assert!(out.stderr.contains("exit status: 3"), "{}", out.stderr);
    assert_eq!(v["complete"], false);
    for i in iterations(&v) {
        if let Some(cpu) = i["server"]["cpu_cores"].as_f64() {
            assert!(cpu >= 0.0, "negative server CPU: {i}");
        }
    }
    let pid = std::fs::read_to_string(&child_pid).unwrap();
    assert!(!Path::new(&format!("/proc/{}", pid.trim())).exists(), "the server outlived it");
}

#[test]
fn a_daemonizing_server_without_a_pid_file_is_refused_by_name() {
    // `sh` exits 0 at once while what it started listens on: nothing could sample or stop it.
    let bin = env!("CARGO_BIN_EXE_shrike");
    let dir = scratch("plan-daemon");
    let pid_file = dir.join("daemon.pid");
    let port = free_port();
    let cmd = format!(
        "setsid {bin} serve --listen 127.0.0.1:{port} > /dev/null 2>&1 & echo $! > {}",
        pid_file.display()
    );
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(&["sweep", &url, "--connections", "1", "--server-cmd", &cmd], LIMIT);
    let daemon = std::fs::read_to_string(&pid_file).unwrap_or_default();
    let pid: u32 = daemon.trim().parse().unwrap();
    // A zombie until its parent (init) reaps it: gone or dead either way.
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'));
    if alive {
        // End what the test started, by its pid, before failing.
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    assert!(!alive, "the daemon {pid} the sweep's command left listening still runs");
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("daemonized") && out.stderr.contains("--server-pid-file"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_daemonizing_server_with_its_pid_file_is_sampled_and_stopped() {
    let bin = env!("CARGO_BIN_EXE_shrike");
    let dir = scratch("plan-daemon-pid");
    let pid_file = dir.join("daemon.pid");
    let port = free_port();
    let cmd = format!(
        "setsid {bin} serve --listen 127.0.0.1:{port} > /dev/null 2>&1 & echo $! > {}",
        pid_file.display()
    );
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(
        &[
            "sweep",
            &url,
            "--connections",
            "1,2",
            "--iterations",
            "1",
            "-d",
            "0.3",
            "--wait",
            "0s",
            "--server-cmd",
            &cmd,
            "--server-pid-file",
            &pid_file.display().to_string(),
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    let daemon = std::fs::read_to_string(&pid_file).unwrap();
    let alive = std::fs::read_to_string(format!("/proc/{}/stat", daemon.trim()))
        .is_ok_and(|s| !s.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'));
    if alive {
        let _ = Command::new("kill").arg(daemon.trim()).status();
    }
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(!alive, "the daemon {} outlived the sweep", daemon.trim());
    for i in iterations(&json(&out)) {
        assert!(i["server"]["cpu_cores"].as_f64().unwrap() > 0.0, "{i}");
    }
}

#[test]
fn a_usl_fit_on_too_few_levels_is_no_fit() {
    let server = Server::start(&[]);
    let out = run(
        &[
            "sweep",
            &server.url("/"),
            "--connections",
            "1,2,4",
            "--iterations",
            "1",
            "-d",
            "0.3",
            "--wait",
            "0s",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("USL: no fit, no predicted peak: too few points"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("predicted peak none"), "{}", out.stdout);
}

/// The cgroup v2 hierarchy's mount point, from /proc/mounts.
fn cgroup2_mount() -> std::path::PathBuf {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let line = mounts.lines().find(|l| l.split_whitespace().nth(2) == Some("cgroup2"));
    let line =
        line.expect("a cgroup v2 hierarchy is mounted (the test needs one; CI runs as root)");
    line.split_whitespace().nth(1).unwrap().into()
}

/// A cgroup of the test's own, removed (once empty) when dropped.
struct Cgroup(std::path::PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_server_in_a_cgroup_is_sampled_from_the_cgroups_own_counters() {
    let group = Cgroup(cgroup2_mount().join(format!("shrike-test-{}", std::process::id())));
    std::fs::create_dir(&group.0).unwrap();
    let server = Server::start(&["--concurrency", "2"]);
    std::fs::write(group.0.join("cgroup.procs"), server.pid().to_string()).unwrap();
    let usage = || -> f64 {
        let stat = std::fs::read_to_string(group.0.join("cpu.stat")).unwrap();
        let usec = stat.lines().find_map(|l| l.strip_prefix("usage_usec ")).unwrap();
        usec.trim().parse::<f64>().unwrap() / 1e6
    };
    let u0 = usage();
    let v = sampling_sweep(&server.url("/"), "--server-cgroup", &group.0.display().to_string());
    let cpu = usage() - u0;
    drop(server);
    let sampled = sampled_total(&v, "cpu_cores", 0.5);
    assert!(sampled >= 0.3 * cpu && sampled <= 1.2 * cpu + 0.05, "{sampled} vs {cpu}");
    for i in iterations(&v) {
        let s = &i["server"];
        assert!(s["source"].as_str().unwrap().starts_with("cgroup "), "{s}");
        assert_eq!(s["processes_max"], 1, "{s}");
        assert!(s["threads_max"].as_u64().unwrap() >= 3, "{s}");
    }
}
