//! A fleet across hosts, not ports: each generator in a network namespace of its own with its
//! own address, the target in another, the coordinator in a third ([`Hosts`]). There a
//! generator cut off mid-run (its link set down: a partition, a lost node) is named as lost
//! within `--remote-keepalive`; one whose service gets SIGTERM (a pod eviction) is named at
//! once; either way what it streamed is kept as its partial, the others' results merge exactly,
//! and its share is re-spread over them (`continue`) or the fleet stops (`abort`, exit 1).
//! The Kubernetes manifests' own commands run here as pods would in `deploy.rs`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::hosts::{Hosts, Listening};
use crate::support::*;

const LIMIT: Duration = Duration::from_secs(60);
const GENERATORS: [&str; 3] = ["gen-0", "gen-1", "gen-2"];

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// gen-1's link goes down.
    Cut,
    /// gen-1's service gets SIGTERM.
    Evicted { abort: bool },
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
    result: Option<serde_json::Value>,
    /// The target's own counts (its `--stats-path` document) after the run: a fresh server,
    /// so everything it counted is the fleet's.
    served: serde_json::Value,
}

/// `shrike serve` on the target host, serving its counts at [`WITNESS_STATS`].
fn counted_target(hosts: &Hosts) -> Listening {
    let listen = format!("{}:0", hosts.addr("target"));
    Listening::start(
        hosts
            .shrike("target")
            .args(["serve", "--listen", &listen])
            .args(["--stats-path", WITNESS_STATS]),
    )
}

/// The target's counts, read with curl on its own host.
fn served(hosts: &Hosts, target: &Listening) -> serde_json::Value {
    // A response's last bytes may reach the client a moment before the server counts it.
    std::thread::sleep(Duration::from_millis(100));
    let out = hosts
        .command("target", "curl")
        .args(["-s", "--max-time", "5", &format!("http://{}{WITNESS_STATS}", target.addr)])
        .output()
        .expect("curl");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stats ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Asserts the target counted what the fleet's result says, but for gen-1's requests after
/// its last report reached the coordinator (at most a second of its third of 60/s), which
/// reached the target and are in no result.
fn agrees_but_the_lost(served: &serde_json::Value, v: &serde_json::Value) {
    let n = |at: &str| served.pointer(at).and_then(serde_json::Value::as_u64).unwrap();
    let g = global(v);
    let sent = counter(g, "upstream_rq_total") + counter(g, "upstream_rq_retry");
    let requests = n("/requests");
    assert!((sent..=sent + 20).contains(&requests), "the target {requests}, the result {sent}");
    let ok = counter(g, "benchmark.http_2xx");
    assert!((ok..=ok + 20).contains(&n("/responses/2xx")), "{served} vs {ok}");
    assert_eq!(n("/responses/5xx") + n("/responses/4xx"), 0, "{served}");
}

/// 60/s for 5 s from three generators on hosts of their own; 1.8 s in, `fault` hits gen-1.
fn fleet_meets(fault: Fault, tag: &str) -> Outcome {
    let names: Vec<&str> = ["target", "coordinator"].iter().chain(&GENERATORS).copied().collect();
    let hosts = Hosts::new(tag, &names);
    let dir = scratch(tag);
    let token = dir.join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let token = token.to_str().unwrap();
    let listen = |name: &str| format!("{}:0", hosts.addr(name));
    let target = counted_target(&hosts);
    let generators: Vec<Listening> = GENERATORS
        .iter()
        .map(|g| {
            let mut c = hosts.shrike(g);
            c.args(["service", "--listen", &listen(g), "--token-file", token, "--name", g])
                .args(["--allow-target", "10.200.0.0/24"]);
            Listening::start(&mut c)
        })
        .collect();
    let fleet: Vec<&str> = generators.iter().map(|g| g.addr.as_str()).collect();
    let stored = dir.join("fleet.json");
    let mut cmd = hosts.shrike("coordinator");
    cmd.args(["run", &format!("http://{}/", target.addr), "--remote", &fleet.join(",")])
        .args(["--remote-token-file", token, "--rps", "60", "--duration", "5"])
        .args(["--remote-start-delay", "300ms", "--remote-keepalive", "2s"])
        .args(["-o", stored.to_str().unwrap()]);
    if fault == (Fault::Evicted { abort: true }) {
        cmd.args(["--remote-failure", "abort"]);
    }
    let began = Instant::now();
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    std::thread::sleep(Duration::from_millis(2100));
    match fault {
        Fault::Cut => hosts.cut("gen-1"),
        Fault::Evicted { .. } => {
            let pid = generators[1].pid();
            assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        }
    }
    let out = wait_limited(child.unwrap(), LIMIT);
    let took = began.elapsed();
    let result = std::fs::read_to_string(&stored).ok().map(|s| serde_json::from_str(&s).unwrap());
    let served = served(&hosts, &target);
    Outcome { code: out.code(), stdout: out.stdout, stderr: out.stderr, took, result, served }
}

fn requests(result: &serde_json::Value, name: &str) -> u64 {
    let r = result["results"].as_array().unwrap().iter().find(|r| r["name"] == name);
    counter(r.unwrap_or_else(|| panic!("no result {name}: {result}")), "upstream_rq_total")
}

/// The lost generator's partial and the others' results are the global one, exactly.
fn merged_exactly(v: &serde_json::Value) -> (u64, u64) {
    let (a, b) = (requests(v, "gen-0"), requests(v, "gen-2"));
    let partial = requests(v, "gen-1 (partial)");
    assert!(partial > 0, "what it streamed is kept");
    let total = requests(v, "global");
    assert_eq!(total, a + b + partial);
    let ok = |name: &str| {
        let r = v["results"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap();
        counter(r, "benchmark.http_2xx")
    };
    assert_eq!(ok("global"), ok("gen-0") + ok("gen-2") + ok("gen-1 (partial)"));
    (a + b, total)
}

#[test]
fn a_generator_cut_off_mid_run_is_lost_within_the_keepalive_bound() {
    let o = fleet_meets(Fault::Cut, "cut");
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 lost: gen-1"), "{}", o.stdout);
    assert!(o.stdout.contains("Termination: completed"), "{}", o.stdout);
    // Roll call, 0.3 s, the 5 s run and its drain: the silence did not hold the run up.
    assert!(o.took < Duration::from_secs(12), "{:?}", o.took);
    let v = o.result.expect("the result was written");
    let lost = &v["options"]["generators"][1];
    // Cut about 1.8 s into the run, found within the 2 s keepalive (and a ping's period).
    let at = lost["lost_at"].as_f64().unwrap();
    assert!(at > 1.0 && at < 5.0, "{lost}");
    assert_eq!(lost["respread_over"], 2, "{lost}");
    let (survivors, _) = merged_exactly(&v);
    // Without the re-spread the two send 2 × 100; with it, a third more from the loss on.
    assert!(survivors > 205, "{survivors}");
    agrees_but_the_lost(&o.served, &v);
}

#[test]
fn an_evicted_generator_is_named_and_its_share_re_spread() {
    let o = fleet_meets(Fault::Evicted { abort: false }, "evict");
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 lost: gen-1 (its service stopped the run"), "{}", o.stdout);
    assert!(o.stdout.contains("gen-1 lost at "), "{}", o.stdout);
    assert!(!o.stdout.contains("interrupted by signal"), "{}", o.stdout);
    let v = o.result.expect("the result was written");
    let (_, total) = merged_exactly(&v);
    // Found at once (the service says it stopped): the fleet still offered the plan's 300.
    assert!((280..=305).contains(&total), "{total}");
    agrees_but_the_lost(&o.served, &v);
}

#[test]
fn an_evicted_generator_stops_the_fleet_with_remote_failure_abort() {
    let o = fleet_meets(Fault::Evicted { abort: true }, "abort");
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("--remote-failure abort"), "{}", o.stderr);
    // Stopped when gen-1 went, not at the run's end (2.1 s in against about 5.8 s).
    assert!(o.took < Duration::from_millis(4500), "{:?}", o.took);
    let v = o.result.expect("what was measured is written");
    assert!(requests(&v, "gen-0") < 100 && requests(&v, "gen-2") < 100, "stopped early");
    agrees_but_the_lost(&o.served, &v);
}
