//! Beyond one machine, on loopback: `shrike service` generators on 127.0.0.2, .3 and .4, one
//! coordinated `shrike run --remote`, the service's refusals, and the sharded batch path
//! (`--shard i/N` processes merged by `transform --merge`).

use crate::support::nginx;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;
use nginx::{Listen, Nginx};

const LIMIT: Duration = Duration::from_secs(60);

/// A `shrike service` on `ip:0`, sending from `ip`; killed when dropped.
struct Service {
    child: Child,
    addr: String,
}

impl Service {
    /// Named gen-IP unless `extra` names it.
    fn start(ip: &str, extra: &[&str]) -> Service {
        let name = format!("gen-{ip}");
        let named: &[&str] = if extra.contains(&"--name") { &[] } else { &["--name", &name] };
        let mut child = shrike()
            .args(["service", "--listen", &format!("{ip}:0"), "--bind-address", ip])
            .args(named)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn shrike service");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("address line");
        let addr = line.trim().to_string();
        assert!(addr.starts_with(ip), "{addr:?}");
        Service { child, addr }
    }

    fn fleet(ips: &[&str], extra: &[&str]) -> Vec<Service> {
        ips.iter().map(|ip| Service::start(ip, extra)).collect()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const IPS: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

fn addrs(fleet: &[Service]) -> String {
    fleet.iter().map(|s| s.addr.as_str()).collect::<Vec<_>>().join(",")
}

/// `shrike run TARGET --remote FLEET ARGS…` started in the background, its output piped.
fn coordinate(target: &Server, fleet: &[Service], args: &[&str]) -> Child {
    shrike()
        .args(["run", &target.url("/"), "--remote", &addrs(fleet)])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn requests(result: &serde_json::Value, name: &str) -> u64 {
    let r = result["results"].as_array().unwrap().iter().find(|r| r["name"] == name);
    counter(r.unwrap_or_else(|| panic!("no result {name}: {result}")), "upstream_rq_total")
}

/// Asserts the server counted what a fleet's merged result says, when a generator was lost:
/// the lost one's partial is what it streamed before it went, so the requests it sent after
/// its last report (at most `unreported`) reached the server and are in no result.
fn agrees_but_the_lost(w: &Witness, v: &serde_json::Value, unreported: u64) {
    let g = global(v);
    let sent = counter(g, "upstream_rq_total") + counter(g, "upstream_rq_retry");
    let served = w.count("/requests");
    assert!(
        (sent..=sent + unreported).contains(&served),
        "the server counted {served} requests, the fleet's result {sent} (+ at most {unreported})"
    );
    for c in 1..=5 {
        let answered = w.count(&format!("/responses/{c}xx"));
        let got = counter(g, &format!("benchmark.http_{c}xx"));
        assert!(answered >= got && answered <= got + unreported, "{c}xx: {answered} vs {got}");
    }
}

fn histogram(result: &serde_json::Value, id: &str) -> hdrhistogram::Histogram<u64> {
    let stat = result["statistics"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap();
    shrike_stats::Statistic::decode_histogram(stat["shrike_histogram"].as_str().unwrap()).unwrap()
}

#[test]
fn three_generators_make_one_run_merged_exactly() {
    let target = Nginx::start_logged(Listen::Http1);
    let fleet = Service::fleet(&IPS, &["--allow-target", "127.0.0.0/8"]);
    let mark = target.mark();
    let out = run(
        &[
            "run",
            &format!("http://127.0.0.1:{}/file", target.port),
            "--remote",
            &addrs(&fleet),
            "--rps",
            "150",
            "-n",
            "300",
            "--output-format",
            "json",
            "--stats-interval",
            "500ms",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    // Each generator kept beside the global result, and the total is their sum: exactly -n.
    let per: Vec<u64> = IPS.iter().map(|ip| requests(&v, &format!("gen-{ip}"))).collect();
    assert_eq!(per.iter().sum::<u64>(), 300, "{per:?}");
    assert_eq!(requests(&v, "global"), 300);
    assert_eq!(per, vec![100, 100, 100]);
    assert_eq!(target.access_log().len(), 300);
    // nginx logged every request the merged result counts, with its status class.
    target.agrees(mark, global(&v));
    // The merged histogram is the generators' histograms added, bit for bit.
    let results = v["results"].as_array().unwrap();
    for id in
        ["benchmark_http_client.request_to_response", "benchmark_http_client.scheduled_to_response"]
    {
        let mut sum = histogram(&results[0], id);
        for r in &results[1..3] {
            sum.add(histogram(r, id)).unwrap();
        }
        assert_eq!(sum, histogram(&results[3], id), "{id}");
    }
    // The fleet's options: the run as asked, without a shard, with its generators.
    assert!(v["options"]["shard"].is_null());
    assert_eq!(v["options"]["remote"].as_array().unwrap().len(), 3);
    // The interval series is the fleet's: its counts add up to the total.
    let series: u64 = v["shrike"]["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| counter(i, "upstream_rq_total"))
        .sum();
    assert_eq!(series, 300);
    // The server saw the generators interleaved (phase offsets), not one after another.
    let mut log = target.access_log();
    log.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    for ip in IPS {
        assert_eq!(log.iter().filter(|e| e.remote_addr == ip).count(), 100, "{ip}");
    }
    let switches = log.windows(2).filter(|w| w[0].remote_addr != w[1].remote_addr).count();
    assert!(switches > log.len() / 3, "{switches} switches in {} requests", log.len());
}

/// `sweep --remote`: every run of every point is one coordinated run on the fleet, and each
/// iteration records what each generator sent, which adds up to the point's whole, as nginx
/// saw it.
#[test]
fn a_sweep_on_two_generators_merges_every_point_exactly() {
    let target = Nginx::start_logged(Listen::Http1);
    let fleet = Service::fleet(&IPS[..2], &["--allow-target", "127.0.0.0/8"]);
    let out = run(
        &[
            "sweep",
            &format!("http://127.0.0.1:{}/file", target.port),
            "--rates",
            "40,80",
            "--iterations",
            "2",
            "--wait",
            "0s",
            "-d",
            "0.5s",
            "--remote",
            &addrs(&fleet),
            "--remote-start-delay",
            "0.3s",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let points = v["sweep"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{v}");
    let mut total = 0;
    for p in points {
        let level = p["level"].as_u64().unwrap();
        for it in p["iterations"].as_array().unwrap() {
            let parts = it["parts"].as_array().unwrap();
            let names: Vec<&str> = parts.iter().map(|x| x["name"].as_str().unwrap()).collect();
            assert_eq!(names, ["gen-127.0.0.2", "gen-127.0.0.3"], "{it}");
            let each: Vec<u64> = parts.iter().map(|x| x["responses"].as_u64().unwrap()).collect();
            // Half the point's rate each, for half a second: the shards split it exactly.
            let want = level / 2 / 2;
            assert!(each.iter().all(|&n| n.abs_diff(want) <= 1), "{level}/s: {each:?}");
            total += each.iter().sum::<u64>();
        }
    }
    // What the generators reported is what the server answered, request for request, and
    // every answer a success as the iterations counted.
    assert_eq!(target.access_log().len() as u64, total);
    let ok = target.access_log().iter().filter(|e| e.status == 200).count() as u64;
    let successes: u64 = points
        .iter()
        .flat_map(|p| p["iterations"].as_array().unwrap())
        .map(|it| it["successes"].as_u64().unwrap())
        .sum();
    assert_eq!(ok, successes);
}

#[test]
fn a_predicate_on_the_merged_counters_stops_every_generator() {
    let target = Server::start(&["--response-status", "500"]);
    let fleet = Service::fleet(&IPS, &["--allow-target", "127.0.0.0/8"]);
    let (out, w) = run_witnessed(
        &target,
        &[
            "run",
            &target.url("/"),
            "--remote",
            &addrs(&fleet),
            "--rps",
            "100",
            "--duration",
            "20",
            "--failure-predicate",
            "benchmark.http_5xx:20",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let v = json(&out);
    let t = &v["shrike"]["termination"];
    assert_eq!(t["detail"], "benchmark.http_5xx:20", "{t}");
    // More than 20 in all, but no generator reached 20 on its own: the merged count fired.
    let per: Vec<u64> = IPS.iter().map(|ip| requests(&v, &format!("gen-{ip}"))).collect();
    assert!(per.iter().sum::<u64>() > 20, "{per:?}");
    assert!(per.iter().all(|&n| n < 200), "every generator stopped early: {per:?}");
    // The server answered the merged count's 500s, each generator's requests in it.
    w.agrees(global(&v));
    assert_eq!(w.count("/responses/5xx"), per.iter().sum::<u64>());
}

#[test]
fn a_killed_generator_is_reported_and_the_others_results_kept() {
    let target = Server::start(&[]);
    let mut fleet = Service::fleet(&IPS, &["--allow-target", "127.0.0.0/8"]);
    let args = ["--rps", "50", "--duration", "5", "--output-format", "json"];
    let before = Witness::before(&target);
    let child = coordinate(&target, &fleet, &args);
    // The run starts 2 s after it is sent; kill the middle generator halfway through.
    std::thread::sleep(Duration::from_millis(4500));
    fleet[1].child.kill().unwrap();
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("generator gen-127.0.0.3") && out.stderr.contains("failed"),
        "{}",
        out.stderr
    );
    let v = json(&out);
    // 50 rps for 5 s across three: each sends a third of 250 until the kill halfway, then
    // the two left take its share (half of 50/s each): about 42 + 62.
    let (a, b) = (requests(&v, "gen-127.0.0.2"), requests(&v, "gen-127.0.0.4"));
    assert!((92..=112).contains(&a) && (92..=112).contains(&b), "{a} {b}");
    let partial = requests(&v, "gen-127.0.0.3 (partial)");
    assert!(partial > 0 && partial < 80, "{partial}");
    assert_eq!(requests(&v, "global"), a + b + partial);
    // The fleet still offered the plan: 250, less the moments between the kill and the
    // re-spread.
    assert!((238..=252).contains(&(a + b + partial)), "{a} {b} {partial}");
    // The server's count: the merged result's, and what the killed one sent after its last
    // report (its third of 50/s, for at most a second).
    agrees_but_the_lost(&Witness::since(&target, before), &v, 17);

    // Every view shows the fleet, a row per generator, the lost one as lost.
    let rows = v["shrike"]["generators"].as_array().expect("shrike.generators");
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).expect(name).clone();
    assert_eq!(rows.len(), 3);
    assert_eq!(row("gen-127.0.0.2")["state"], "completed");
    assert_eq!(row("gen-127.0.0.2")["requests"], a);
    assert_eq!(row("gen-127.0.0.3")["state"], "lost");
    assert_eq!(row("gen-127.0.0.3")["requests"], partial);
    assert!(row("gen-127.0.0.3")["why"].as_str().is_some_and(|w| !w.is_empty()));
    let dir = scratch("fleet-views");
    let stored = dir.join("fleet.json");
    std::fs::write(&stored, &out.stdout).unwrap();
    let summary = transform_summary(&stored);
    assert!(summary.contains("Generators:  3 (1 worker each); 1 lost: gen-127.0.0.3"), "{summary}");
    for (name, state) in
        [("gen-127.0.0.2", "completed"), ("gen-127.0.0.3", "lost"), ("gen-127.0.0.4", "completed")]
    {
        assert!(
            summary.lines().any(|l| l.trim_start().starts_with(name) && l.contains(state)),
            "{name} {state}: {summary}"
        );
    }
    let page = dir.join("fleet.html");
    let out = run(&["report", stored.to_str().unwrap(), "-o", page.to_str().unwrap()], LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("\"generators\":[{"), "the page's data carries the rows");
}

/// The stored result's summary, as `shrike transform --output-format summary` prints it.
fn transform_summary(stored: &std::path::Path) -> String {
    let out = shrike()
        .args(["transform", "--output-format", "summary"])
        .stdin(std::fs::File::open(stored).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_service_refuses_what_it_must_naming_the_rule() {
    let dir = scratch("fleet-refusals");
    let token = dir.join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let target = Server::start(&[]);
    let service = Service::start(
        "127.0.0.2",
        &[
            "--allow-target",
            "127.0.0.1/32",
            "--token-file",
            token.to_str().unwrap(),
            "--max-rps",
            "500",
        ],
    );
    let remote = |extra: &[&str]| {
        let mut args = vec!["run", "--remote", &service.addr, "--duration", "1"];
        args.extend_from_slice(extra);
        run(&args, LIMIT)
    };
    let url = target.url("/");
    let refused = Witness::before(&target);
    // No token.
    let out = remote(&[&url]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("Unauthenticated") && out.stderr.contains("bearer token"),
        "{}",
        out.stderr
    );
    // Wrong token; the token itself never shows up in what the client prints.
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "guess").unwrap();
    let out = remote(&[&url, "--remote-token-file", wrong.to_str().unwrap()]);
    assert!(out.stderr.contains("Unauthenticated"), "{}", out.stderr);
    let with_token = |extra: &[&str]| {
        let mut all = vec!["--remote-token-file", token.to_str().unwrap()];
        all.extend_from_slice(extra);
        remote(&all)
    };
    // A target outside the allowlist, by address...
    let port = target.addr.rsplit(':').next().unwrap();
    let out = with_token(&[&format!("http://127.0.0.3:{port}/")]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("PermissionDenied"), "{}", out.stderr);
    assert!(out.stderr.contains("resolves to 127.0.0.3"), "{}", out.stderr);
    assert!(out.stderr.contains("--allow-target 127.0.0.1/32"), "{}", out.stderr);
    // ...and by a host name that resolves outside it (the check follows DNS, not the name).
    let narrow = Service::start("127.0.0.5", &["--allow-target", "127.0.0.9/32"]);
    let out = run(&["run", &format!("http://localhost:{port}/"), "--remote", &narrow.addr], LIMIT);
    assert!(out.stderr.contains("PermissionDenied"), "{}", out.stderr);
    assert!(
        out.stderr.contains("localhost") && out.stderr.contains("resolves to 127.0.0.1"),
        "{}",
        out.stderr
    );
    // Every refusal so far came before any load: the target saw nothing.
    assert_eq!(Witness::since(&target, refused).count("/requests"), 0);
    // An allowed host name allows what it resolves to.
    let named = Service::start("127.0.0.6", &["--allow-target", "localhost"]);
    let (out, w) = run_witnessed(
        &target,
        &["run", &format!("http://127.0.0.1:{port}/"), "--remote", &named.addr, "-n", "5"],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 5);
    assert_eq!(w.count("/responses/2xx"), 5);
    let refused = Witness::before(&target);
    // Over the rate limit: 600 in all.
    let out = with_token(&[&url, "--rps", "300", "--concurrency", "2"]);
    assert!(
        out.stderr.contains("InvalidArgument") && out.stderr.contains("--max-rps 500"),
        "{}",
        out.stderr
    );
    // Each generator refused: a configuration error, named per generator.
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(Witness::since(&target, refused).count("/requests"), 0, "refused before any load");
    // Within every rule it runs.
    let before = Witness::before(&target);
    let out = with_token(&[&url, "--output-format", "json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(requests(&json(&out), "global") > 0);
    Witness::since(&target, before).agrees(global(&json(&out)));
    for o in [&out.stdout, &out.stderr] {
        assert!(!o.contains("s3cret-token"));
    }
    // Beyond loopback without authentication it does not even listen.
    let out = run(&["service", "--listen", "0.0.0.0:0", "--allow-target", "127.0.0.0/8"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(
        out.stderr.contains("refusing to listen on 0.0.0.0") && out.stderr.contains("open relay"),
        "{}",
        out.stderr
    );
    let out = run(&["service", "--listen", "127.0.0.1:0"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("--allow-target"), "{}", out.stderr);
}

#[test]
fn shards_run_as_separate_processes_merge_into_the_whole_run() {
    let target = Server::start(&[]);
    let dir = scratch("fleet-shards");
    let start = "+3s";
    let before = Witness::before(&target);
    let children: Vec<(std::path::PathBuf, Child)> = (0..3)
        .map(|i| {
            let path = dir.join(format!("shard{i}.json"));
            let child = shrike()
                .args(["run", &target.url("/"), "--shard", &format!("{i}/3"), "--start-at", start])
                .args(["--rps", "100", "-n", "301", "--output", path.to_str().unwrap()])
                .args(["--output-format", "json"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (path, child)
        })
        .collect();
    let mut paths = Vec::new();
    for (path, child) in children {
        let out = wait_limited(child, LIMIT);
        assert_eq!(out.code(), 0, "{}", out.stderr);
        paths.push(path.to_str().unwrap().to_string());
    }
    let shards = Witness::since(&target, before);
    // Listed one by one, or as the directory they were written to (written into it).
    let mut args = vec!["transform", "--merge"];
    args.extend(paths.iter().map(String::as_str));
    args.extend(["--output-format", "json"]);
    let listed = run(&args, LIMIT);
    assert_eq!(listed.code(), 0, "{}", listed.stderr);
    let into = dir.join("merged.json");
    let by_dir =
        run(&["transform", "--merge", dir.to_str().unwrap(), "-o", into.to_str().unwrap()], LIMIT);
    assert_eq!(by_dir.code(), 0, "{}", by_dir.stderr);
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&into).unwrap()).unwrap();
    assert_eq!(merged["results"], json(&listed)["results"]);
    // The shards split 301 exactly (101, 100, 100) and together are the run: no shard left,
    // its requested rate the whole run's.
    assert_eq!(requests(&merged, "global"), 301);
    // The three processes together: what the server counted.
    shards.agrees(global(&merged));
    assert_eq!(shards.count("/requests"), 301);
    assert_eq!(merged["options"].get("shard"), None);
    let url = target.url("/");
    let one = ["run", &url, "--rps", "100", "-n", "301", "--output-format", "json"];
    let (out, w) = run_witnessed(&target, &one, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let single = json(&out);
    w.agrees(global(&single));
    assert_eq!(requests(&single, "global"), requests(&merged, "global"));
    assert_eq!(merged["options"]["requests_per_second"], single["options"]["requests_per_second"]);
}

#[test]
fn a_replay_on_three_generators_keeps_the_captures_timing_and_deals_jobs() {
    let target = Nginx::start_logged(Listen::Http1);
    let fleet = Service::fleet(&IPS, &["--allow-target", "127.0.0.0/8"]);
    let dir = scratch("fleet-replay");
    // 30 jobs, 100 ms apart, each one request naming its job.
    let mut text = String::from("{\"shrike_jobs\": 1, \"protocol\": \"http\"}\n");
    for i in 0..30 {
        text += &format!(
            "{{\"job\": {i}, \"start\": {}, \"requests\": [{{\"at\": 0, \"text\": \"GET /file?job={i} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\"}}]}}\n",
            f64::from(i) * 0.1
        );
    }
    let jobs = dir.join("t.jobs");
    std::fs::write(&jobs, text).unwrap();
    let mark = target.mark();
    let out = run(
        &[
            "replay",
            jobs.to_str().unwrap(),
            "--target",
            &format!("127.0.0.1:{}", target.port),
            "--remote",
            &addrs(&fleet),
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    assert_eq!(v["options"]["replay"]["jobs"], 30, "{}", v["options"]["replay"]);
    assert_eq!(v["options"]["replay"]["file_complete"], true);
    for ip in IPS {
        assert_eq!(requests(&v, &format!("gen-{ip}")), 10, "{ip}");
    }
    // Job i went from generator i mod 3, at its captured offset: every shard kept the whole
    // file's timeline.
    let log = target.access_log();
    assert_eq!(log.len(), 30);
    target.agrees(mark, global(&v));
    let job = |e: &nginx::LogEntry| -> usize {
        e.request.split("job=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap()
    };
    let t0 = log.iter().find(|e| job(e) == 0).unwrap().secs;
    for e in &log {
        let i = job(e);
        assert_eq!(e.remote_addr, IPS[i % 3], "job {i}");
        let late = e.secs - t0 - i as f64 * 0.1;
        assert!(late.abs() < 0.05, "job {i} arrived {late:+.3}s off its captured time");
    }
}

/// A CA, a server certificate for 127.0.0.2 and a client certificate, made with openssl.
fn certificates(dir: &std::path::Path) {
    let sh = |script: &str| {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    sh(&format!(
        "openssl req -x509 {ec} -keyout ca.key -out ca.pem -subj /CN=shrike-test-ca -days 1"
    ));
    for (name, ext) in [
        ("server", "subjectAltName=IP:127.0.0.2,DNS:localhost\nextendedKeyUsage=serverAuth"),
        ("client", "extendedKeyUsage=clientAuth"),
    ] {
        sh(&format!(
            "openssl req {ec} -keyout {name}.key -out {name}.csr -subj /CN={name} && \
             printf 'basicConstraints=CA:FALSE\n{ext}\n' > {name}.ext && \
             openssl x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
             -out {name}.pem -days 1 -extfile {name}.ext"
        ));
    }
}

#[test]
fn mutual_tls_lets_in_only_clients_with_a_certificate() {
    let dir = scratch("fleet-mtls");
    certificates(&dir);
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let target = Server::start(&[]);
    let service = Service::start(
        "127.0.0.2",
        &[
            "--allow-target",
            "127.0.0.1",
            "--tls-cert",
            &p("server.pem"),
            "--tls-key",
            &p("server.key"),
            "--client-ca",
            &p("ca.pem"),
        ],
    );
    let base =
        ["run", &target.url("/"), "--remote", &service.addr, "-n", "20", "--output-format", "json"];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        run_witnessed(&target, &args, LIMIT)
    };
    let (out, w) = with(&[
        "--remote-ca",
        &p("ca.pem"),
        "--remote-cert",
        &p("client.pem"),
        "--remote-key",
        &p("client.key"),
    ]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(requests(&json(&out), "global"), 20);
    w.agrees(global(&json(&out)));
    // TLS without a client certificate, and plaintext: neither gets a run.
    let ca = p("ca.pem");
    for extra in [vec!["--remote-ca", ca.as_str()], vec![]] {
        let (out, w) = with(&extra);
        assert_ne!(out.code(), 0, "{extra:?}: {}", out.stderr);
        assert_eq!(w.count("/requests"), 0, "{extra:?}: no run, no load");
        assert!(out.stderr.contains(&service.addr), "{extra:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{extra:?}");
    }
}

#[test]
fn generators_sharing_a_name_are_told_apart_by_address() {
    let target = Server::start(&[]);
    let fleet: Vec<Service> = IPS[..2]
        .iter()
        .map(|ip| Service::start(ip, &["--allow-target", "127.0.0.1", "--name", "same"]))
        .collect();
    let (out, w) = run_witnessed(
        &target,
        &[
            "run",
            &target.url("/"),
            "--remote",
            &addrs(&fleet),
            "-n",
            "40",
            "--output-format",
            "json",
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    for s in &fleet {
        assert_eq!(requests(&v, &format!("same@{}", s.addr)), 20);
    }
    w.agrees(global(&v));
    assert_eq!(w.count("/requests"), 40);
}

#[test]
fn remote_failure_abort_stops_the_others_and_fails_the_run() {
    let target = Server::start(&[]);
    let mut fleet = Service::fleet(&IPS[..2], &["--allow-target", "127.0.0.1"]);
    let args = ["--remote-failure", "abort", "--rps", "50", "--duration", "20"];
    let args = [&args[..], &["--output-format", "json", "--remote-start-delay", "500ms"]].concat();
    let before = Witness::before(&target);
    let child = coordinate(&target, &fleet, &args);
    std::thread::sleep(Duration::from_millis(2000));
    fleet[0].child.kill().unwrap();
    let t = std::time::Instant::now();
    let out = wait_limited(child, LIMIT);
    // Stopped long before its 20 s, exit 1, the survivor's result kept and the dead one named.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("--remote-failure abort"), "{}", out.stderr);
    assert!(out.stderr.contains("gen-127.0.0.2"), "{}", out.stderr);
    let v = json(&out);
    let survivor = requests(&v, "gen-127.0.0.3");
    assert!(survivor > 0 && survivor < 500, "{survivor}");
    // The server's count: the result's (the survivor and the dead one's partial), and what
    // the killed one sent after its last report (its half of 50/s, for at most a second).
    agrees_but_the_lost(&Witness::since(&target, before), &v, 25);
}

/// A generator that does not answer when the run starts: the run does not start (exit 1,
/// naming it), rather than offer a share of the rate nobody sends; `--remote-expect N` starts
/// with those present, the whole plan spread over them.
#[test]
fn a_generator_missing_at_start_stops_the_run_unless_remote_expect_allows_it() {
    let target = Server::start(&[]);
    let live = Service::start(IPS[0], &["--allow-target", "127.0.0.1"]);
    // An address where nothing listens.
    let dead = {
        let l = std::net::TcpListener::bind(format!("{}:0", IPS[1])).unwrap();
        l.local_addr().unwrap().to_string()
    };
    let fleet = format!("{},{dead}", live.addr);
    let args = |extra: &[&str]| {
        let mut a = vec!["run", "--remote", &fleet, "--rps", "100", "--duration", "2"];
        a.extend_from_slice(&["--remote-start-delay", "300ms", "--output-format", "json"]);
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let url = target.url("/");
    let began = std::time::Instant::now();
    let mut a = args(&[]);
    a.insert(1, url.clone());
    let (out, w) = run_witnessed(&target, &a.iter().map(String::as_str).collect::<Vec<_>>(), LIMIT);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "the run did not start: not one request");
    assert!(out.stderr.contains("1 of 2 generator(s) not answering"), "{}", out.stderr);
    assert!(out.stderr.contains(&dead), "names the missing one: {}", out.stderr);
    assert!(out.stdout.is_empty(), "no result of a run that did not start");
    assert!(began.elapsed() < Duration::from_secs(15), "{:?}", began.elapsed());

    let mut a = args(&["--remote-expect", "1"]);
    a.insert(1, url);
    let (out, w) = run_witnessed(&target, &a.iter().map(String::as_str).collect::<Vec<_>>(), LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("spread over the 1 present"), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    // The whole 100/s from the one present, not half of it.
    let sent = counter(global(&v), "upstream_rq_total");
    assert!((170..=210).contains(&sent), "{sent}");
    w.agrees(global(&v));
}

/// A SIGTERM to one generator's service (what a pod eviction sends) mid-run: that generator is
/// lost, named, its part kept as "(partial)"; the run is not "interrupted by signal" and exits
/// 0 with the loss stated, the lost share re-spread over the other so the fleet still offers
/// the plan (`continue`), or stops the others and exits 1 (`abort`).
#[test]
fn a_generator_whose_service_is_stopped_is_lost_not_an_interrupt() {
    let target = Server::start(&[]);
    for abort in [false, true] {
        let fleet = Service::fleet(&IPS[..2], &["--allow-target", "127.0.0.1"]);
        let dir = scratch("sigterm");
        let stored = dir.join("fleet.json");
        let mut args = vec!["--rps", "50", "--duration", "4", "--remote-start-delay", "300ms"];
        args.extend(["-o", stored.to_str().unwrap()]);
        if abort {
            args.extend(["--remote-failure", "abort"]);
        }
        let before = Witness::before(&target);
        let child = coordinate(&target, &fleet, &args);
        std::thread::sleep(Duration::from_millis(1800));
        let pid = fleet[1].child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let out = wait_limited(child, LIMIT);
        let stopped = "gen-127.0.0.3";
        if abort {
            assert_eq!(out.code(), 1, "{}", out.stderr);
            assert!(out.stderr.contains("--remote-failure abort"), "{}", out.stderr);
            continue;
        }
        assert_eq!(out.code(), 0, "{}", out.stderr);
        assert!(!out.stdout.contains("interrupted by signal"), "{}", out.stdout);
        assert!(out.stdout.contains(&format!("1 lost: {stopped} (its service stopped the run")));
        assert!(out.stdout.contains(&format!("; generator lost: {stopped}\n")), "{}", out.stdout);
        assert!(
            out.stdout.contains(&format!("{stopped} lost at ")),
            "the rate line says why: {}",
            out.stdout
        );
        assert!(
            out.stdout.contains("its share re-spread over 1 generator (×2.00"),
            "{}",
            out.stdout
        );
        // Lost about 1.5 s into 4 s: the survivor sent 25/s until then and 50/s after, so the
        // fleet sent close to the plan's 200 (without the re-spread: about 137).
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stored).unwrap()).unwrap();
        let survivor = requests(&v, "gen-127.0.0.2");
        let total = counter(global(&v), "upstream_rq_total");
        assert!(survivor >= 140, "survivor {survivor}, total {total}");
        assert!((175..=205).contains(&total), "survivor {survivor}, total {total}");
        // The server's count: the result's, and what the stopped one sent after its last
        // report (its half of 50/s, for at most a second).
        agrees_but_the_lost(&Witness::since(&target, before), &v, 25);
        let lost = &v["options"]["generators"][1];
        assert_eq!(lost["respread_over"], 1, "{lost}");
        assert!(lost["lost_at"].as_f64().is_some_and(|t| t > 1.0 && t < 2.5), "{lost}");
    }
}

/// A generator that stops answering (here its process frozen with SIGSTOP: its kernel still
/// holds the connection, only the service is silent, as behind a partition) is lost within
/// `--remote-keepalive`, named, and the run ends on time with the others' results.
#[test]
fn a_silent_generator_is_lost_within_the_keepalive_bound() {
    let target = Server::start(&[]);
    let fleet = Service::fleet(&IPS[..2], &["--allow-target", "127.0.0.1"]);
    let began = std::time::Instant::now();
    let args = ["--rps", "50", "--duration", "4", "--remote-start-delay", "300ms"];
    let child = coordinate(&target, &fleet, &[&args[..], &["--remote-keepalive", "2s"]].concat());
    std::thread::sleep(Duration::from_millis(1500));
    let pid = fleet[1].child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let out = wait_limited(child, LIMIT);
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    // 0.3 s to start, 4 s of run, the silence found within 2 s of it: well under 10 s.
    assert!(began.elapsed() < Duration::from_secs(10), "{:?}", began.elapsed());
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stdout.contains("1 lost: gen-127.0.0.3"), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Termination: completed"), "{}", out.stdout);
}

/// A counted run (`-n`) whose generator is lost: the one left takes over what the lost one
/// had still to send, so the fleet sends close to the count asked for, not half the rest.
#[test]
fn a_counted_run_re_spreads_the_lost_generators_remaining_count() {
    let target = Server::start(&[]);
    let mut fleet = Service::fleet(&IPS[..2], &["--allow-target", "127.0.0.1"]);
    let args = ["--rps", "100", "-n", "300", "--remote-start-delay", "300ms"];
    let before = Witness::before(&target);
    let child = coordinate(&target, &fleet, &[&args[..], &["--output-format", "json"]].concat());
    std::thread::sleep(Duration::from_millis(1500));
    fleet[1].child.kill().unwrap();
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let survivor = requests(&v, "gen-127.0.0.2");
    let partial = requests(&v, "gen-127.0.0.3 (partial)");
    // About 60 each before the kill; the survivor then sends the rest of both shares (about
    // 240) where, without the re-spread, it would stop at its own 150.
    assert!(survivor > 200, "survivor {survivor}, partial {partial}");
    assert!((285..=300).contains(&(survivor + partial)), "survivor {survivor}, partial {partial}");
    // The server's count: the result's, and what the killed one sent after its last report
    // (its half of 100/s, for at most a second).
    agrees_but_the_lost(&Witness::since(&target, before), &v, 50);
}
