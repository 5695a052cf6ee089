//! Every flag of every subcommand is honoured or refused. The test reads each subcommand's
//! `--help` (what a user sees) and, for every flag listed, shows that it changes what the
//! command would do, or that the command refuses it with exit 2 naming it:
//! - commands that run something print their plan with `--dry-run` (the spec, the search or
//!   sweep, where the result goes, where the run would go); a flag must change the plan;
//! - batch commands (`jobs …`, `report`, `transform`) must write something else;
//! - a flag listed for a mode of the command (capacity's `--rps` in a rate search) is shown
//!   in that mode, and refused in another.
//!
//! Flags a subcommand shares but has no use for (capacity's `--duration`) are hidden from its
//! help; they are checked to be refused by name too. A flag listed in a help with no probe
//! here fails the test: a new flag must show what it does.
//!
//! A changed plan shows a flag is read, not that the engine does what it says: the flags that
//! shape what `run` sends are shown honoured at the server in flags_at_the_server.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::capture::Tcpdump;
use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// Nighthawk's in-line request source: one GET with a header.
const INLINE_PLUGIN: &str = "{name:\"nighthawk.in-line-options-list-request-source-plugin\",typed_config:{\"@type\":\"type.googleapis.com/nighthawk.request_source.InLineOptionsListRequestSourceConfig\",options_list:{options:[{request_method:\"GET\",request_headers:[{header:{key:\"x-a\",value:\"1\"}}]}]}}}";

/// How one flag is shown to take effect.
#[derive(Clone, Debug)]
enum Probe {
    /// `--dry-run` prints different plans for the two command lines (the second uses the flag).
    Dry(Vec<String>, Vec<String>),
    /// The two command lines write different things (stdout, and files in a scratch dir).
    Out(Vec<String>, Vec<String>),
    /// The command line exits 2 and names the flag.
    Refused(Vec<String>),
    /// clap's own: --help, --version.
    Clap,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `base` against `base` + `extra`, by dry run.
fn dry(base: &[&str], extra: &[&str]) -> Probe {
    Probe::Dry(strs(base), [base, extra].concat().iter().map(|s| s.to_string()).collect())
}

fn out(base: &[&str], extra: &[&str]) -> Probe {
    Probe::Out(strs(base), [base, extra].concat().iter().map(|s| s.to_string()).collect())
}

fn refused(args: &[&str]) -> Probe {
    Probe::Refused(strs(args))
}

/// The flags a subcommand's help lists (long names, with their dashes).
fn listed(sub: &[&str]) -> Vec<String> {
    let out = run(&[sub, &["--help"]].concat(), LIMIT);
    assert_eq!(out.code(), 0, "{sub:?} --help: {}", out.stderr);
    let mut flags = Vec::new();
    for line in out.stdout.lines() {
        // Flag lines: "  -c, --connections <N>" or "      --spec <FILE>"; descriptions are
        // indented further.
        let rest = line.strip_prefix("  ").and_then(|l| {
            l.strip_prefix("    ").or_else(|| l.get(4..).filter(|_| l.as_bytes()[0] == b'-'))
        });
        let Some(rest) = rest else { continue };
        if let Some(name) = rest.strip_prefix("--") {
            let name: String =
                name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            flags.push(format!("--{name}"));
        }
    }
    assert!(flags.len() > 2, "{sub:?}: no flags read from\n{}", out.stdout);
    flags
}

/// Files the probes use, in one scratch directory.
struct Fixtures {
    dir: PathBuf,
}

impl Fixtures {
    fn new() -> Fixtures {
        let dir = scratch("every-flag");
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        write("spec.json", r#"{"connections": 3}"#);
        write("body.bin", "body");
        write("requests.jsonl", "{\"method\": \"GET\", \"path\": \"/listed\"}\n");
        write("token", "secret\n");
        // A pid file naming init, and a directory shaped as a cgroup, for the sweep's sources.
        write("server.pid", "1\n");
        std::fs::create_dir_all(dir.join("cgroup")).unwrap();
        write("cgroup/cgroup.procs", "");
        write(
            "http.jobs",
            &[
                r#"{"shrike_jobs": 1, "protocol": "http"}"#,
                r#"{"job": 1, "start": 0, "requests": [{"at": 0, "method": "GET", "path": "/a?x=1"}]}"#,
                r#"{"job": 2, "start": 0.5, "requests": [{"at": 0, "method": "GET", "path": "/a?x=2"}, {"at": 0.1, "method": "POST", "path": "/b", "body": "x"}]}"#,
                r#"{"job": 3, "start": 1, "requests": [{"at": 0, "method": "GET", "path": "/c"}]}"#,
                r#"{"job": 4, "start": 1.5, "requests": [{"at": 0, "method": "GET", "path": "/d"}]}"#,
                r#"{"job": 5, "start": 9, "requests": [{"at": 0, "method": "GET", "path": "/e"}]}"#,
                "",
            ]
            .join("\n"),
        );
        write(
            "tcp.jobs",
            "{\"shrike_jobs\": 1, \"protocol\": \"tcp\"}\n{\"job\": 1, \"start\": 0, \"requests\": \
             [{\"at\": 0, \"text\": \"ping\\n\", \"response_bytes\": 5}]}\n",
        );
        write(
            "mysql.jobs",
            "{\"shrike_jobs\": 1, \"protocol\": \"mysql\"}\n{\"job\": 1, \"start\": 0, \"requests\": \
             [{\"at\": 0, \"command\": \"query\", \"text\": \"SELECT 1\"}]}\n",
        );
        write(
            "nighthawk.yaml",
            "static_resources:\n  listeners:\n  - address:\n      socket_address: {address: 127.0.0.1, port_value: 0}\n",
        );
        // A certificate and key (openssl, Debian's: .ci/run installs it) for the TLS flags.
        let status = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj"])
            .args(["/CN=localhost", "-keyout"])
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl (Debian's openssl package; .ci/run installs it)");
        assert!(status.success());
        // A browser recording (three hosts), for the HAR import's flags.
        let har =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shrike-jobs/tests/fixtures/chrome.har");
        std::fs::copy(har, dir.join("rec.har")).unwrap();
        // A stored result, for report and transform.
        let r = run(&["run", "-n", "3", "-o", dir.join("r.json").to_str().unwrap()], LIMIT);
        assert_eq!(r.code(), 0, "{}", r.stderr);
        // Shard 0 of 2 of a run, alone: a partial set to merge.
        let mut shard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
        shard["options"]["shard"] = serde_json::Value::from("0/2");
        std::fs::write(dir.join("shard0.json"), shard.to_string()).unwrap();
        // Shard 1 of the same run (its id), started long after: the two never overlapped.
        shard["options"]["shard"] = serde_json::Value::from("1/2");
        for r in shard["results"].as_array_mut().unwrap() {
            r["execution_start"] = serde_json::Value::from("2099-01-01T00:00:00Z");
        }
        std::fs::write(dir.join("shard1-later.json"), shard.to_string()).unwrap();
        // And a second result to merge with the first.
        std::fs::copy(dir.join("r.json"), dir.join("r2.json")).unwrap();
        // A real capture (tcpdump, Debian's) of two requests to the built-in server.
        let server = Server::start(&[]);
        let port = server.addr.rsplit(':').next().unwrap().to_string();
        let dump = Tcpdump::start("lo", &format!("tcp port {port}"), &dir.join("capture.pcap"));
        for path in ["/a", "/b"] {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
            )
            .unwrap();
            let mut sink = Vec::new();
            s.read_to_end(&mut sink).unwrap();
        }
        std::fs::rename(dump.stop(), dir.join("capture.pcap")).ok();
        Fixtures { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

/// A moment within the next day, as `--start-at` takes it (fixed, so plans compare equal).
fn later() -> String {
    let t = std::time::SystemTime::now() + Duration::from_secs(3600);
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    format!("@{secs}")
}

/// The probes of `run`'s flags (also capacity's and sweep's, with their own bases), each a
/// base command line and what the flag adds to it.
/// The I/O backend runs do not use by default here.
fn other_backend() -> &'static str {
    match std::env::var("SHRIKE_IO_BACKEND").as_deref() {
        Ok("io_uring") => "epoll",
        _ => "io_uring",
    }
}

fn load_probes(f: &Fixtures, cmd: &[&str], url: &str) -> Vec<(&'static str, Probe)> {
    let https = url.replacen("http://", "https://", 1);
    let at = |u: &str| -> Vec<String> {
        let mut v = strs(cmd);
        v.insert(1, u.to_string());
        v
    };
    let plain = at(url);
    let tls = at(&https);
    let b: Vec<&str> = plain.iter().map(String::as_str).collect();
    let t: Vec<&str> = tls.iter().map(String::as_str).collect();
    let no_url: Vec<&str> = cmd.to_vec();
    let later = later();
    let later = Box::leak(later.into_boxed_str());
    let p = |s: &str| Box::leak(f.path(s).into_boxed_str()) as &str;
    let remote = [&b[..], &["--remote", "127.0.0.1:1"]].concat();
    let nh = "{name:\"envoy.transport_sockets.tls\",typed_config:{\"@type\":\"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\",sni:\"x\"}}";
    let ctx = "{sni:\"y\"}";
    let tunnelled = [&b[..], &["--tunnel-uri", "127.0.0.1:3128"]].concat();
    let h2 = [&b[..], &["--protocol", "http2"]].concat();
    let tls_tunnel = [&b[..], &["--tunnel-uri", "https://127.0.0.1:3128"]].concat();
    vec![
        ("--tunnel-uri", dry(&b, &["--tunnel-uri", "127.0.0.1:3128"])),
        ("--tunnel-protocol", dry(&tunnelled, &["--tunnel-protocol", "http2"])),
        ("--tunnel-tls-context", dry(&tunnelled, &["--tunnel-tls-context", ctx])),
        ("--tunnel-ca", dry(&tls_tunnel, &["--tunnel-ca", p("cert.pem")])),
        ("--spec", dry(&b, &["--spec", p("spec.json")])),
        ("--connections", dry(&b, &["--connections", "7"])),
        ("--duration", dry(&b, &["--duration", "2s"])),
        ("--requests", dry(&b, &["--requests", "9"])),
        ("--no-duration", dry(&b, &["--no-duration"])),
        ("--concurrency", dry(&b, &["--concurrency", "2"])),
        ("--timeout", dry(&b, &["--timeout", "3s"])),
        ("--request-method", dry(&b, &["--request-method", "POST"])),
        ("--request-header", dry(&b, &["--request-header", "x-a: 1"])),
        ("--request-body-size", dry(&b, &["--request-body-size", "10"])),
        ("--request-body-file", dry(&b, &["--request-body-file", p("body.bin")])),
        ("--json-body", dry(&b, &["--json-body", "{}"])),
        ("--request-file", dry(&b, &["--request-file", p("requests.jsonl")])),
        (
            "--request-source-plugin-config",
            dry(&b, &["--request-source-plugin-config", INLINE_PLUGIN]),
        ),
        ("--latency-response-header-name", dry(&b, &["--latency-response-header-name", "x-o"])),
        ("--max-pending-requests", dry(&b, &["--max-pending-requests", "3"])),
        ("--max-requests-per-connection", dry(&b, &["--max-requests-per-connection", "9"])),
        ("--open-loop", dry(&b, &["--open-loop"])),
        ("--burst-size", dry(&b, &["--burst-size", "4"])),
        ("--jitter-uniform", dry(&b, &["--jitter-uniform", "10us"])),
        ("--prefetch-connections", dry(&b, &["--prefetch-connections"])),
        ("--retry-unanswered", dry(&b, &["--retry-unanswered=false"])),
        ("--multi-target-endpoint", dry(&no_url, &["--multi-target-endpoint", "127.0.0.1:9"])),
        (
            "--multi-target-path",
            dry(
                &[&no_url[..], &["--multi-target-endpoint", "127.0.0.1:9"]].concat(),
                &["--multi-target-path", "/x"],
            ),
        ),
        (
            "--multi-target-use-https",
            dry(
                &[&no_url[..], &["--multi-target-endpoint", "127.0.0.1:9"]].concat(),
                &["--multi-target-use-https"],
            ),
        ),
        ("--protocol", dry(&b, &["--protocol", "http2"])),
        ("--h2", dry(&b, &["--h2"])),
        // Stream limits are HTTP/2's and HTTP/3's (HTTP/1.1 refuses them, by name).
        ("--max-concurrent-streams", dry(&h2, &["--max-concurrent-streams", "4"])),
        ("--max-active-requests", dry(&h2, &["--max-active-requests", "7"])),
        ("--address-family", dry(&b, &["--address-family", "v4"])),
        (
            "--experimental-h1-connection-reuse-strategy",
            dry(&b, &["--experimental-h1-connection-reuse-strategy", "lru"]),
        ),
        ("--tls-ca", dry(&t, &["--tls-ca", p("cert.pem")])),
        ("--tls-insecure", dry(&t, &["--tls-insecure"])),
        ("--tls-sni", dry(&t, &["--tls-sni", "x"])),
        ("--tls-min-version", dry(&t, &["--tls-min-version", "1.3"])),
        ("--tls-max-version", dry(&t, &["--tls-max-version", "1.2"])),
        ("--tls-cipher-suites", dry(&t, &["--tls-cipher-suites", "TLS13_AES_128_GCM_SHA256"])),
        ("--tls-no-session-resumption", dry(&t, &["--tls-no-session-resumption"])),
        ("--failure-predicate", dry(&b, &["--failure-predicate", "benchmark.http_5xx:3"])),
        ("--termination-predicate", dry(&b, &["--termination-predicate", "upstream_rq_total:9"])),
        ("--no-default-failure-predicates", dry(&b, &["--no-default-failure-predicates"])),
        ("--output-format", dry(&b, &["--output-format", "json"])),
        ("--output", dry(&b, &["--output", p("out.json")])),
        (
            "--output-file-format",
            dry(&[&b[..], &["-o", p("out.json")]].concat(), &["--output-file-format", "yaml"]),
        ),
        ("--verbosity", dry(&b, &["--verbosity", "debug"])),
        ("--label", dry(&b, &["--label", "a"])),
        ("--rps", dry(&b, &["--rps", "50"])),
        ("--ramp-duration", dry(&b, &["--ramp-duration", "2s"])),
        ("--stages", dry(&b, &["--stages", "1s:5"])),
        (
            "--rate-limiter-plugin-config",
            dry(
                &b,
                &[
                    "--rate-limiter-plugin-config",
                    "{name:\"nighthawk.linear-ramping-rate-limiter-plugin\",typed_config:{\
                     \"@type\":\"type.googleapis.com/nighthawk.rate_limiter.\
                     LinearRampingRateLimiterConfig\",ramp_time:\"1s\"}}",
                ],
            ),
        ),
        ("--sequencer-idle-strategy", dry(&b, &["--sequencer-idle-strategy", "spin"])),
        // The backend the default is not: CI's second pass makes io_uring the default
        // (SHRIKE_IO_BACKEND), where asking for it again changes nothing.
        ("--io-backend", dry(&b, &["--io-backend", other_backend()])),
        (
            "--read-coalesce",
            dry(&[&b[..], &["--rps", "max"]].concat(), &["--read-coalesce", "50us"]),
        ),
        ("--simple-warmup", dry(&b, &["--simple-warmup"])),
        ("--max-lateness", dry(&b, &["--max-lateness", "1ms"])),
        ("--start-at", dry(&b, &["--start-at", later])),
        ("--shard", dry(&b, &["--shard", "0/2"])),
        ("--execution-id", dry(&b, &["--execution-id", "batch-7"])),
        ("--bind-address", dry(&b, &["--bind-address", "127.0.0.1"])),
        (
            "--upstream-bind-config",
            dry(&b, &["--upstream-bind-config", "{source_address:{address:\"127.0.0.1\"}}"]),
        ),
        ("--no-progress", dry(&b, &["--no-progress"])),
        ("--stats-interval", dry(&b, &["--stats-interval", "1s"])),
        ("--metrics-listen", dry(&b, &["--metrics-listen", "127.0.0.1:0"])),
        ("--statsd", dry(&b, &["--statsd", "127.0.0.1:8125"])),
        ("--stats-sinks", dry(&b, &["--stats-sinks", "statsd://127.0.0.1:8125"])),
        ("--stats-flush-interval", dry(&b, &["--stats-flush-interval", "2s"])),
        ("--stats-flush-interval-duration", dry(&b, &["--stats-flush-interval-duration", "2s"])),
        ("--remote", dry(&b, &["--remote", "127.0.0.1:1"])),
        ("--remote-expect", dry(&remote, &["--remote-expect", "1"])),
        (
            "--remote-wait",
            dry(&[&remote[..], &["--remote-expect", "1"]].concat(), &["--remote-wait", "5s"]),
        ),
        ("--remote-token-file", dry(&remote, &["--remote-token-file", p("token")])),
        ("--remote-token-env", dry(&remote, &["--remote-token-env", "SHRIKE_FLAG_TOKEN"])),
        ("--remote-ca", dry(&remote, &["--remote-ca", p("cert.pem")])),
        (
            "--remote-cert",
            dry(
                &[&remote[..], &["--remote-ca", p("cert.pem")]].concat(),
                &["--remote-cert", p("cert.pem"), "--remote-key", p("key.pem")],
            ),
        ),
        (
            "--remote-key",
            dry(
                &[&remote[..], &["--remote-ca", p("cert.pem")]].concat(),
                &["--remote-key", p("key.pem"), "--remote-cert", p("cert.pem")],
            ),
        ),
        ("--remote-server-name", dry(&remote, &["--remote-server-name", "x"])),
        ("--remote-failure", dry(&remote, &["--remote-failure", "abort"])),
        ("--remote-start-delay", dry(&remote, &["--remote-start-delay", "1s"])),
        ("--remote-keepalive", dry(&remote, &["--remote-keepalive", "3s"])),
        ("--transport-socket", dry(&t, &["--transport-socket", nh])),
        ("--tls-context", dry(&t, &["--tls-context", ctx])),
        (
            "--http3-protocol-options",
            dry(
                &[&t[..], &["--protocol", "http3"]].concat(),
                &[
                    "--http3-protocol-options",
                    "{quic_protocol_options:{initial_stream_window_size:65536}}",
                ],
            ),
        ),
        (
            "--experimental-h2-use-multiple-connections",
            dry(
                &[&b[..], &["--protocol", "http2"]].concat(),
                &["--experimental-h2-use-multiple-connections"],
            ),
        ),
        ("--trace", dry(&b, &["--trace", "zipkin://127.0.0.1:9411/api/v2/spans"])),
        (
            "--trace-sample-rate",
            dry(
                &[&b[..], &["--trace", "zipkin://127.0.0.1:9411/api/v2/spans"]].concat(),
                &["--trace-sample-rate", "0.5"],
            ),
        ),
        ("--request-source", dry(&b, &["--request-source", "grpc://127.0.0.1:9"])),
        (
            "--user-defined-plugin-config",
            refused(&[&b[..], &["--user-defined-plugin-config", "{}"]].concat()),
        ),
        ("--nighthawk-service", dry(&b, &["--nighthawk-service", "grpc://127.0.0.1:9"])),
    ]
}

fn probes(f: &Fixtures) -> BTreeMap<(String, String), Probe> {
    let mut all = BTreeMap::new();
    let mut add = |sub: &str, list: Vec<(&str, Probe)>| {
        for (flag, p) in list {
            all.insert((sub.to_string(), flag.to_string()), p);
        }
    };
    let url = "http://127.0.0.1:9/";
    let p = |s: &str| Box::leak(f.path(s).into_boxed_str()) as &str;

    add("run", load_probes(f, &["run", "--dry-run"], url));
    add(
        "run",
        vec![(
            "--dry-run",
            out(
                &["run", url, "-n", "1", "--timeout", "0.2s", "--no-default-failure-predicates"],
                &["--dry-run"],
            ),
        )],
    );

    let cap = ["capacity", "--slo", "p99<=1s", "--dry-run"];
    let mut c = load_probes(f, &cap, url);
    let cb = ["capacity", url, "--slo", "p99<=1s", "--dry-run"];
    c.extend([
        ("--slo", dry(&cb, &["--slo", "errors<=2%"])),
        ("--max-rate", dry(&[&cb[..], &["--start", "10"]].concat(), &["--max-rate", "500"])),
        ("--search", dry(&cb, &["--search", "concurrency"])),
        ("--start", dry(&cb, &["--start", "50"])),
        ("--precision", dry(&cb, &["--precision", "5%"])),
        ("--trial-duration", dry(&cb, &["--trial-duration", "1s"])),
        ("--final-duration", dry(&cb, &["--final-duration", "1s"])),
        ("--cooldown", dry(&cb, &["--cooldown", "1s"])),
        ("--trial-repeats", dry(&cb, &["--trial-repeats", "2"])),
        ("--max-trials", dry(&cb, &["--max-trials", "5"])),
        (
            "--output-file-format",
            dry(&[&cb[..], &["-o", p("out.json")]].concat(), &["--output-file-format", "human"]),
        ),
        // Coalescing reads is for unpaced load: a concurrency search's trials.
        (
            "--read-coalesce",
            dry(&[&cb[..], &["--search", "concurrency"]].concat(), &["--read-coalesce", "50us"]),
        ),
        // Without it the search runs (its first trial fails at once: nothing listens).
        (
            "--dry-run",
            out(
                &[
                    "capacity",
                    url,
                    "--slo",
                    "p99<=1s",
                    "--max-trials",
                    "1",
                    "--trial-duration",
                    "0.1s",
                ],
                &["--dry-run"],
            ),
        ),
    ]);
    add("capacity", c);

    let sw = ["sweep", "--connections", "1,2", "--dry-run"];
    let mut s = load_probes(f, &sw, url);
    let sb = ["sweep", url, "--connections", "1,2", "--dry-run"];
    let rates = ["sweep", url, "--rates", "10", "--dry-run"];
    s.retain(|(flag, _)| {
        !["--connections", "--open-loop", "--max-active-requests", "--max-lateness"].contains(flag)
    });
    s.extend([
        // A budget paces: a sweep of rates, not of connections (unpaced).
        ("--max-lateness", dry(&rates, &["--max-lateness", "1ms"])),
        ("--connections", dry(&rates, &["--connections", "3"])),
        ("--open-loop", dry(&rates, &["--open-loop=false"])),
        (
            "--max-active-requests",
            dry(&[&rates[..], &["-p", "http2"]].concat(), &["--max-active-requests", "3"]),
        ),
        ("--rates", Probe::Dry(strs(&sb), strs(&rates))),
        ("--iterations", dry(&sb, &["--iterations", "5"])),
        (
            "--output-file-format",
            dry(&[&sb[..], &["-o", p("out.json")]].concat(), &["--output-file-format", "csv"]),
        ),
        ("--read-coalesce", dry(&sb, &["--read-coalesce", "50us"])),
        ("--wait", dry(&sb, &["--wait", "2s"])),
        ("--server-pid", dry(&sb, &["--server-pid", "1"])),
        ("--server-pid-file", dry(&sb, &["--server-pid-file", p("server.pid")])),
        ("--server-cgroup", dry(&sb, &["--server-cgroup", p("cgroup")])),
        (
            "--server-cmd",
            dry(&["sweep", "--connections", "1,2", "--dry-run"], &["--server-cmd", "shrike serve"]),
        ),
        (
            "--server-start-timeout",
            dry(
                &["sweep", "--connections", "1", "--dry-run", "--server-cmd", "x"],
                &["--server-start-timeout", "3s"],
            ),
        ),
        (
            "--restart-server-between-runs",
            dry(
                &["sweep", "--connections", "1", "--dry-run", "--server-cmd", "x"],
                &["--restart-server-between-runs"],
            ),
        ),
        (
            "--compare",
            dry(
                &["sweep", "--connections", "1", "--dry-run"],
                &["--compare", &format!("a={url}"), "--compare", "b=http://127.0.0.2:9/"],
            ),
        ),
        ("--collect-stats", dry(&sb, &["--collect-stats", "cpu"])),
        ("--collect-stats-interval", dry(&sb, &["--collect-stats-interval", "1s"])),
        (
            "--dry-run",
            out(
                &[
                    "sweep",
                    url,
                    "--connections",
                    "1",
                    "--iterations",
                    "1",
                    "-d",
                    "0.1s",
                    "--wait",
                    "0s",
                ],
                &["--dry-run"],
            ),
        ),
    ]);
    add("sweep", s);

    let rp = ["replay", p("http.jobs"), "--target", url, "--dry-run"];
    let tcp = ["replay", p("tcp.jobs"), "--target", "127.0.0.1:9", "--dry-run"];
    let mysql = ["replay", p("mysql.jobs"), "--target", "127.0.0.1:9", "--dry-run"];
    let tls = ["replay", p("http.jobs"), "--target", "https://127.0.0.1:9/", "--dry-run"];
    let remote = [&rp[..], &["--remote", "127.0.0.1:1"]].concat();
    let later = Box::leak(later().into_boxed_str()) as &str;
    add(
        "replay",
        vec![
            ("--target", dry(&["replay", p("http.jobs"), "--dry-run"], &["--target", url])),
            ("--time-scale", dry(&rp, &["--time-scale", "2"])),
            ("--max-idle", dry(&rp, &["--max-idle", "1s"])),
            ("--keep-host", dry(&rp, &["--keep-host"])),
            ("--rewrite", dry(&rp, &["--rewrite", "path:^/a=>/b"])),
            ("--canary-max-differences", dry(&rp, &["--canary-max-differences", "3"])),
            ("--host", dry(&rp, &["--host", "shop.*"])),
            ("--loop", dry(&rp, &["--loop", "2"])),
            ("--shard", dry(&rp, &["--shard", "0/2"])),
            ("--start-at", dry(&rp, &["--start-at", later])),
            ("--protocol", dry(&rp, &["--protocol", "http2"])),
            ("--concurrency", dry(&rp, &["--concurrency", "2"])),
            ("--timeout", dry(&rp, &["--timeout", "3s"])),
            ("--duration", dry(&rp, &["--duration", "3s"])),
            ("--tcp-delimiter", dry(&tcp, &["--tcp-delimiter", "\\n"])),
            ("--tcp-count", dry(&tcp, &["--tcp-count"])),
            ("--tcp-no-answer", dry(&tcp, &["--tcp-no-answer"])),
            ("--mysql-user", dry(&mysql, &["--mysql-user", "app"])),
            ("--mysql-db", dry(&mysql, &["--mysql-db", "shop"])),
            ("--tls-ca", dry(&tls, &["--tls-ca", p("cert.pem")])),
            ("--tls-insecure", dry(&tls, &["--tls-insecure"])),
            ("--failure-predicate", dry(&rp, &["--failure-predicate", "benchmark.http_5xx:3"])),
            ("--output-format", dry(&rp, &["--output-format", "json"])),
            ("--output", dry(&rp, &["--output", p("replay.json")])),
            ("--no-progress", dry(&rp, &["--no-progress"])),
            ("--stats-interval", dry(&rp, &["--stats-interval", "2s"])),
            ("--metrics-listen", dry(&rp, &["--metrics-listen", "127.0.0.1:0"])),
            ("--statsd", dry(&rp, &["--statsd", "127.0.0.1:8125"])),
            ("--stats-sinks", dry(&rp, &["--stats-sinks", "statsd://127.0.0.1:8125"])),
            ("--stats-flush-interval", dry(&rp, &["--stats-flush-interval", "2s"])),
            (
                "--stats-flush-interval-duration",
                dry(&rp, &["--stats-flush-interval-duration", "2s"]),
            ),
            ("--remote", dry(&rp, &["--remote", "127.0.0.1:1"])),
            ("--remote-expect", dry(&remote, &["--remote-expect", "1"])),
            (
                "--remote-wait",
                dry(&[&remote[..], &["--remote-expect", "1"]].concat(), &["--remote-wait", "5s"]),
            ),
            ("--remote-token-file", dry(&remote, &["--remote-token-file", p("token")])),
            ("--remote-token-env", dry(&remote, &["--remote-token-env", "SHRIKE_FLAG_TOKEN"])),
            ("--remote-ca", dry(&remote, &["--remote-ca", p("cert.pem")])),
            (
                "--remote-cert",
                dry(
                    &[&remote[..], &["--remote-ca", p("cert.pem")]].concat(),
                    &["--remote-cert", p("cert.pem"), "--remote-key", p("key.pem")],
                ),
            ),
            (
                "--remote-key",
                dry(
                    &[&remote[..], &["--remote-ca", p("cert.pem")]].concat(),
                    &["--remote-key", p("key.pem"), "--remote-cert", p("cert.pem")],
                ),
            ),
            ("--remote-server-name", dry(&remote, &["--remote-server-name", "x"])),
            ("--remote-failure", dry(&remote, &["--remote-failure", "abort"])),
            ("--remote-start-delay", dry(&remote, &["--remote-start-delay", "1s"])),
            ("--remote-keepalive", dry(&remote, &["--remote-keepalive", "3s"])),
            (
                "--dry-run",
                out(
                    &["replay", p("http.jobs"), "--target", url, "--timeout", "0.2s"],
                    &["--dry-run"],
                ),
            ),
        ],
    );

    let sv = ["serve", "--listen", "127.0.0.1:0", "--dry-run"];
    let tls_serve = [&sv[..], &["--tls"]].concat();
    add(
        "serve",
        vec![
            ("--listen", dry(&["serve", "--dry-run"], &["--listen", "127.0.0.1:0"])),
            (
                "--config-path",
                dry(&["serve", "--dry-run"], &["--config-path", p("nighthawk.yaml")]),
            ),
            ("--listener-address-file", dry(&sv, &["--listener-address-file", p("addr")])),
            ("--concurrency", dry(&sv, &["--concurrency", "7"])),
            ("--response-body-size", dry(&sv, &["--response-body-size", "7"])),
            ("--static-delay", dry(&sv, &["--static-delay", "1ms"])),
            ("--response-header", dry(&sv, &["--response-header", "x-a: b"])),
            ("--echo-request-headers", dry(&sv, &["--echo-request-headers"])),
            ("--response-status", dry(&sv, &["--response-status", "503"])),
            ("--max-body-size", dry(&sv, &["--max-body-size", "100000"])),
            ("--max-connections", dry(&sv, &["--max-connections", "5"])),
            ("--request-header-timeout", dry(&sv, &["--request-header-timeout", "1s"])),
            ("--idle-timeout", dry(&sv, &["--idle-timeout", "2s"])),
            ("--max-request-headers", dry(&sv, &["--max-request-headers", "5"])),
            ("--max-request-header-bytes", dry(&sv, &["--max-request-header-bytes", "2048"])),
            ("--max-requests-per-connection", dry(&sv, &["--max-requests-per-connection", "3"])),
            ("--max-concurrent-streams", dry(&sv, &["--max-concurrent-streams", "5"])),
            ("--drain-timeout", dry(&sv, &["--drain-timeout", "2s"])),
            ("--config", dry(&sv, &["--config", r#"{"response_body_size": 3}"#])),
            ("--stats-path", dry(&sv, &["--stats-path", "/s"])),
            ("--http3", dry(&tls_serve, &["--http3"])),
            ("--connect-proxy", dry(&sv, &["--connect-proxy"])),
            (
                "--proxy-allow",
                dry(&[&sv[..], &["--connect-proxy"]].concat(), &["--proxy-allow", "10.0.0.0/8"]),
            ),
            ("--tls", dry(&sv, &["--tls"])),
            ("--tls-cert", dry(&sv, &["--tls-cert", p("cert.pem"), "--tls-key", p("key.pem")])),
            ("--tls-key", dry(&sv, &["--tls-key", p("key.pem"), "--tls-cert", p("cert.pem")])),
            ("--tls-cert-out", dry(&tls_serve, &["--tls-cert-out", p("certs")])),
            // A dry run binds nothing: an address that cannot be bound is no error then.
            ("--dry-run", out(&["serve", "--listen", "256.0.0.1:1"], &["--dry-run"])),
        ],
    );

    let sc = ["service", "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.0/8", "--dry-run"];
    let dummy =
        ["service", "--listen", "127.0.0.1:0", "--service", "dummy-request-source", "--dry-run"];
    add(
        "service",
        vec![
            ("--service", Probe::Dry(strs(&sc), strs(&dummy))),
            ("--listener-address-file", dry(&sc, &["--listener-address-file", p("svc-addr")])),
            ("--request-file", dry(&dummy, &["--request-file", p("requests.jsonl")])),
            ("--jobs", dry(&dummy, &["--jobs", p("http.jobs")])),
            ("--repeat", dry(&[&dummy[..], &["--jobs", p("http.jobs")]].concat(), &["--repeat"])),
            (
                "--listen",
                dry(
                    &["service", "--allow-target", "127.0.0.0/8", "--dry-run"],
                    &["--listen", "127.0.0.1:0"],
                ),
            ),
            ("--allow-target", dry(&sc, &["--allow-target", "10.0.0.0/8"])),
            ("--token-file", dry(&sc, &["--token-file", p("token")])),
            ("--token-env", dry(&sc, &["--token-env", "SHRIKE_FLAG_TOKEN"])),
            ("--tls-cert", dry(&sc, &["--tls-cert", p("cert.pem"), "--tls-key", p("key.pem")])),
            ("--tls-key", dry(&sc, &["--tls-key", p("key.pem"), "--tls-cert", p("cert.pem")])),
            (
                "--client-ca",
                dry(
                    &[&sc[..], &["--tls-cert", p("cert.pem"), "--tls-key", p("key.pem")]].concat(),
                    &["--client-ca", p("cert.pem")],
                ),
            ),
            ("--max-concurrent-runs", dry(&sc, &["--max-concurrent-runs", "3"])),
            ("--max-rps", dry(&sc, &["--max-rps", "100"])),
            ("--max-duration", dry(&sc, &["--max-duration", "1m"])),
            ("--max-connections", dry(&sc, &["--max-connections", "10"])),
            ("--max-workers", dry(&sc, &["--max-workers", "2"])),
            ("--name", dry(&sc, &["--name", "gen"])),
            ("--bind-address", dry(&sc, &["--bind-address", "127.0.0.1"])),
            (
                "--dry-run",
                out(
                    &["service", "--listen", "256.0.0.1:1", "--allow-target", "127.0.0.1"],
                    &["--dry-run"],
                ),
            ),
        ],
    );

    let r = p("r.json");
    add(
        "report",
        vec![
            ("--output", out(&["report", r], &["--output", p("r.html")])),
            ("--title", out(&["report", r], &["--title", "Mine"])),
            ("--log-axes", refused(&["report", r, "--log-axes"])),
        ],
    );
    add(
        "transform",
        vec![
            ("--output-format", out(&["transform", "--merge", r], &["--output-format", "csv"])),
            ("--merge", out(&["transform", "--merge", r], &["--merge", p("r2.json")])),
            ("--allow-partial", {
                let partial = ["transform", "--merge", p("shard0.json")];
                out(&partial, &["--allow-partial"])
            }),
            ("--allow-disjoint", {
                let apart = ["transform", "--merge", p("shard0.json"), p("shard1-later.json")];
                out(&apart, &["--allow-disjoint"])
            }),
            ("--output", out(&["transform", "--merge", r], &["--output", p("t.json")])),
        ],
    );
    let cap_file = p("capture.pcap");
    let imp = ["jobs", "import", cap_file, "-o", p("import.jobs")];
    add(
        "jobs import",
        vec![
            ("--protocol", out(&imp, &["--protocol", "tcp"])),
            ("--port", out(&imp, &["--port", "80"])),
            (
                "--delimiter",
                out(&[&imp[..], &["--protocol", "tcp"]].concat(), &["--delimiter", "\\r\\n"]),
            ),
            (
                "--frame-length",
                out(&[&imp[..], &["--protocol", "tcp"]].concat(), &["--frame-length", "4"]),
            ),
            (
                "--host",
                out(&["jobs", "import", p("rec.har"), "-o", p("har.jobs")], &["--host", "shop.*"]),
            ),
            (
                "--output",
                Probe::Out(
                    strs(&["jobs", "import", cap_file, "-o", p("a.jobs")]),
                    strs(&["jobs", "import", cap_file, "--output", p("b.jobs")]),
                ),
            ),
        ],
    );
    let jobs = p("http.jobs");
    add(
        "jobs stats",
        vec![
            ("--bucket", out(&["jobs", "stats", jobs], &["--bucket", "100ms"])),
            ("--keep-query", out(&["jobs", "stats", jobs], &["--keep-query"])),
            ("--top", out(&["jobs", "stats", jobs], &["--top", "1"])),
            ("--output-format", out(&["jobs", "stats", jobs], &["--output-format", "json"])),
        ],
    );
    let fl = ["jobs", "filter", jobs, "-o", p("f.jobs")];
    add(
        "jobs filter",
        vec![
            (
                "--output",
                Probe::Out(
                    strs(&["jobs", "filter", jobs, "-o", p("f1.jobs")]),
                    strs(&["jobs", "filter", jobs, "--output", p("f2.jobs")]),
                ),
            ),
            ("--from", out(&fl, &["--from", "1s"])),
            ("--to", out(&fl, &["--to", "1s"])),
            ("--job", out(&fl, &["--job", "2"])),
            ("--match", out(&fl, &["--match", "GET /c"])),
            (
                "--match-requests",
                out(&[&fl[..], &["--match", "POST *"]].concat(), &["--match-requests"]),
            ),
            ("--sample", out(&fl, &["--sample", "50%"])),
            ("--seed", out(&[&fl[..], &["--sample", "50%"]].concat(), &["--seed", "7"])),
            ("--shard", out(&fl, &["--shard", "0/2"])),
        ],
    );
    all
}

/// What a command line printed and wrote: stdout, and each file in its scratch dir.
fn effect(args: &[String], f: &Fixtures) -> (i32, String, String) {
    let before: BTreeSet<PathBuf> = files(&f.dir);
    let out = shrike()
        .args(args)
        .env("SHRIKE_FLAG_TOKEN", "secret")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limited(out, LIMIT);
    let mut written = String::new();
    for p in files(&f.dir).difference(&before) {
        written.push_str(&format!(
            "{}: {}\n",
            p.display(),
            String::from_utf8_lossy(&std::fs::read(p).unwrap())
        ));
        let _ = std::fs::remove_file(p);
    }
    (out.code(), out.stdout + &written, out.stderr)
}

fn files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect()
}

#[test]
fn every_flag_of_every_subcommand_is_honoured_or_refused() {
    let f = Fixtures::new();
    let probes = probes(&f);
    let subs: [&[&str]; 11] = [
        &["run"],
        &["capacity"],
        &["sweep"],
        &["replay"],
        &["serve"],
        &["service"],
        &["report"],
        &["transform"],
        &["jobs", "import"],
        &["jobs", "stats"],
        &["jobs", "filter"],
    ];
    let mut failures = Vec::new();
    let mut shown = 0;
    for sub in subs {
        let name = sub.join(" ");
        for flag in listed(sub) {
            let probe = match flag.as_str() {
                "--help" | "--version" => Probe::Clap,
                _ => match probes.get(&(name.clone(), flag.clone())) {
                    Some(p) => p.clone(),
                    None => {
                        failures.push(format!(
                            "{name} {flag}: listed in --help, but no probe shows what it does"
                        ));
                        continue;
                    }
                },
            };
            shown += 1;
            if let Err(why) = check(&probe, &flag, &f) {
                failures.push(format!("{name} {flag}: {why}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {shown} flags:\n{}", failures.len(), failures.join("\n"));
}

fn check(probe: &Probe, flag: &str, f: &Fixtures) -> Result<(), String> {
    match probe {
        Probe::Clap => Ok(()),
        Probe::Refused(args) => {
            let (code, _, stderr) = effect(args, f);
            if code == 2 && stderr.contains(flag) {
                Ok(())
            } else {
                Err(format!("{args:?} should exit 2 naming {flag}, exited {code}: {stderr}"))
            }
        }
        Probe::Dry(a, b) | Probe::Out(a, b) => {
            let (ca, oa, ea) = effect(a, f);
            let (cb, ob, eb) = effect(b, f);
            if ca != 0 && !matches!(probe, Probe::Out(..)) {
                return Err(format!("{a:?} exited {ca}: {ea}"));
            }
            if cb > 1 {
                return Err(format!("{b:?} exited {cb}: {eb}"));
            }
            if oa == ob {
                return Err(format!("{b:?} changes nothing against {a:?}"));
            }
            Ok(())
        }
    }
}

/// Flags a subcommand shares with `run` but has no use for: not in its help, and refused by
/// name, saying where they belong.
#[test]
fn shared_flags_a_subcommand_has_no_use_for_are_hidden_and_refused() {
    let url = "http://127.0.0.1:9/";
    let cases: [(&[&str], &[&str]); 2] = [
        (
            &["capacity", url, "--slo", "p99<=1s"],
            &[
                "--duration 1s",
                "--requests 3",
                "--no-duration",
                "--ramp-duration 1s",
                "--rate-limiter-plugin-config {}",
                "--stages 1s:5",
                "--no-default-failure-predicates",
                "--start-at +1m",
                "--shard 0/2",
                "--request-source grpc://127.0.0.1:9",
                "--no-progress",
                "--stats-interval 1s",
                "--metrics-listen 127.0.0.1:0",
                "--statsd 127.0.0.1:1",
                "--stats-sinks statsd://127.0.0.1:1",
                "--stats-flush-interval 1s",
                "--stats-flush-interval-duration 1s",
            ],
        ),
        (
            &["sweep", url, "--connections", "1"],
            &[
                "--requests 3",
                "--no-duration",
                "--rps 5",
                "--ramp-duration 1s",
                "--rate-limiter-plugin-config {}",
                "--stages 1s:5",
                "--no-default-failure-predicates",
                "--start-at +1m",
                "--shard 0/2",
                "--request-source grpc://127.0.0.1:9",
                "--no-progress",
                "--stats-interval 1s",
                "--metrics-listen 127.0.0.1:0",
                "--statsd 127.0.0.1:1",
                "--stats-sinks statsd://127.0.0.1:1",
                "--stats-flush-interval 1s",
                "--stats-flush-interval-duration 1s",
            ],
        ),
    ];
    for (base, flags) in cases {
        let help = listed(&base[..1]);
        for given in flags {
            let flag = given.split(' ').next().unwrap();
            assert!(!help.iter().any(|h| h == flag), "{} --help lists {flag}", base[0]);
            let args: Vec<&str> = [base, &given.split(' ').collect::<Vec<_>>()[..]].concat();
            let out = run(&args, LIMIT);
            assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(&format!("{} does not take {flag}:", base[0])),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
    // Flags listed for one mode, refused in another.
    for (args, flag) in [
        (
            &["capacity", url, "--slo", "p99<=1s", "--search", "concurrency", "--rps", "5"][..],
            "--rps",
        ),
        (
            &["capacity", url, "--slo", "p99<=1s", "--search", "concurrency", "--connections", "5"],
            "--connections",
        ),
        (
            &[
                "capacity",
                url,
                "--slo",
                "p99<=1s",
                "--search",
                "concurrency",
                "-p",
                "http2",
                "--max-active-requests",
                "5",
            ],
            "--max-active-requests",
        ),
        (&["sweep", url, "--connections", "1,2", "--open-loop"], "--open-loop"),
        (
            &["sweep", url, "--connections", "1,2", "-p", "http2", "--max-active-requests", "5"],
            "--max-active-requests",
        ),
        (&["run", url, "--remote-ca", "/dev/null"], "--remote-ca"),
        (&["run", url, "--remote-start-delay", "1s"], "--remote"),
        (&["run", url, "--remote-keepalive", "1s"], "--remote"),
        // A run id names files and labels: no spaces, no control characters.
        (&["run", url, "--execution-id", "a b"], "--execution-id must be 1-128 printable"),
        // Pings every half of it: below a second a busy generator would read as lost.
        (&["run", url, "--remote", "127.0.0.2:1", "--remote-keepalive", "500ms"], "at least 1s"),
        (&["service", "--service", "dummy-request-source", "--max-rps", "5"], "--max-rps"),
        (&["jobs", "filter", "x.jobs", "-o", "y.jobs", "--seed", "3"], "--sample"),
    ] {
        let out = run(args, LIMIT);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{args:?}: {}", out.stderr);
    }
}
