//! Every flag that shapes what `shrike run` sends, shown honoured where it acts by a witness
//! that is not Shrike: the test server's own counts (plain, TLS, HTTP/3), nginx's access log
//! (method, path, source address, timing, TLS version, cipher, resumption, SNI), a statsd
//! socket. Two walks:
//! - Nighthawk's client flags (its usage synopsis, tests/fixtures/nighthawk-client-flags.txt):
//!   each honoured, or refused with exit 2 and a message that says why, with nothing sent;
//! - `run`'s own flags beyond those: each honoured here, or named in [`PROVEN_ELSEWHERE`] with
//!   the test that shows it (proxies, fleets, outputs).
//!
//! A flag in `run --help` or in Nighthawk's list with no case fails the test. (every_flag.rs
//! walks every subcommand's flags through their plans; this walk is the one that sends.)

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::nginx;
use crate::support::*;

/// What one case's run was seen to do: by the two test servers and nginx (their own counts
/// and log over the run), a statsd socket, the process, and the result it wrote.
struct Seen {
    plain: Witness,
    tls: Witness,
    /// nginx's access log lines the run added.
    nginx: Vec<nginx::LogEntry>,
    /// statsd datagrams received during the run.
    statsd: Vec<String>,
    out: Output,
    /// The `global` result of the `-o` file, for runs that wrote one.
    g: serde_json::Value,
    /// When the process was started, in Unix seconds (nginx's clock).
    launched_at: f64,
}

impl Seen {
    fn requests(&self) -> u64 {
        self.plain.count("/requests")
    }
    /// The client's counter `name`.
    fn client(&self, name: &str) -> u64 {
        counter(&self.g, name)
    }
}

type Check = Box<dyn Fn(&Seen) -> Result<(), String>>;

/// What a flag must do.
enum Expect {
    /// The run exits with this code, and what its witnesses saw passes the check: the flag
    /// shown honoured where it acts, on the wire or at the server, not in the plan's text.
    Seen(i32, Check),
    /// Exit 2, with this text in the message, and nothing sent anywhere.
    Refused(&'static str),
    /// Exit code and text (flags that run elsewhere, or print and exit), and nothing sent
    /// to the servers here.
    Exits(i32, &'static str),
}

macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

fn seen(code: i32, check: impl Fn(&Seen) -> Result<(), String> + 'static) -> Expect {
    Expect::Seen(code, Box::new(check))
}

/// The run's requests reached the plain test server, as many as the client counted, all
/// answered as it says, and `n` of them.
fn sent(n: u64) -> Expect {
    seen(0, move |s| agreed(s, n))
}

fn agreed(s: &Seen, n: u64) -> Result<(), String> {
    ensure!(s.requests() == n, "the server saw {} requests, not {n}", s.requests());
    let client = s.client("upstream_rq_total") + s.client("upstream_rq_retry");
    ensure!(client == n, "the client counted {client} sent, the server {n}");
    for c in 1..=5 {
        let (server, client) = (
            s.plain.count(&format!("/responses/{c}xx")),
            s.client(&format!("benchmark.http_{c}xx")),
        );
        ensure!(
            server == client,
            "{c}xx: the server answered {server}, the client counted {client}"
        );
    }
    Ok(())
}

/// The test server's config header, as `-H` gives it.
fn config(json: &str) -> String {
    format!("x-nighthawk-test-server-config: {json}")
}

/// The flags of Nighthawk's usage synopsis (`--name` and `-x`), kept in the repository: a
/// user's clone has nothing beside it to read them from.
fn nighthawk_flags() -> BTreeSet<String> {
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nighthawk-client-flags.txt");
    let text = std::fs::read_to_string(list).expect("the Nighthawk flag list");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Reads statsd datagrams from `socket` until told to stop.
fn listen_statsd(
    socket: &UdpSocket,
) -> (std::sync::Arc<AtomicBool>, std::thread::JoinHandle<Vec<String>>) {
    let socket = socket.try_clone().unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let reader = std::thread::spawn(move || {
        let mut packets = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match socket.recv(&mut buf) {
                Ok(n) => packets.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(_) if done.load(Ordering::Relaxed) => return packets,
                Err(_) => {}
            }
        }
    });
    (stop, reader)
}

/// The sum of statsd counter `name` (under any prefix) over `packets` (`name:value|c`
/// lines), and how many datagrams held it.
fn statsd_counter(packets: &[String], name: &str) -> (u64, usize) {
    let mut sum = 0;
    let mut holding = 0;
    for p in packets {
        let mut here = false;
        for line in p.lines() {
            let Some((n, rest)) = line.split_once(':') else { continue };
            // `statsd://` sinks prefix every name with `shrike.`.
            if n == name || n.strip_suffix(name).is_some_and(|p| p.ends_with('.')) {
                here = true;
                sum += rest.split('|').next().unwrap_or("0").parse::<u64>().unwrap_or(0);
            }
        }
        holding += usize::from(here);
    }
    (sum, holding)
}

/// The witnesses every case's run is checked against: the test server plain and with TLS
/// (HTTP/3 too), nginx plain and with TLS (their access logs), a statsd socket; and where each
/// run writes its result.
struct Witnesses {
    plain: Server,
    tls: TlsServer,
    nginx: nginx::Nginx,
    /// TLS 1.2 and 1.3 (left to itself, it and Shrike agree on 1.3); and TLS 1.2 only.
    nginx_tls: nginx::Nginx,
    nginx_tls12: nginx::Nginx,
    statsd: UdpSocket,
    dir: std::path::PathBuf,
}

impl Witnesses {
    fn start(name: &str) -> Witnesses {
        Witnesses {
            plain: Server::start(&[]),
            tls: TlsServer::start(&["--tls", "--http3"]),
            nginx: nginx::Nginx::start(nginx::Listen::Http1),
            nginx_tls: nginx::Nginx::start(nginx::Listen::Tls),
            nginx_tls12: nginx::Nginx::start_with(nginx::Listen::Tls, "ssl_protocols TLSv1.2;"),
            statsd: UdpSocket::bind("127.0.0.1:0").unwrap(),
            dir: scratch(name),
        }
    }

    /// Runs each case (`shrike run` with its arguments, 300 ms at 20/s unless it sets its own
    /// length or rate) and checks it against what the witnesses saw; returns what failed.
    fn walk(&self, cases: &[(&str, (Vec<String>, Expect))]) -> Vec<String> {
        let result = self.dir.join("result.json");
        let mut problems = Vec::new();
        for (flag, (args, expect)) in cases {
            let runs = matches!(expect, Expect::Seen(..));
            let mut all = vec!["run".to_string()];
            if runs {
                // Before the arguments: after `--ignore_rest` nothing is a flag.
                let _ = std::fs::remove_file(&result);
                all.extend(["-o".to_string(), result.display().to_string()]);
            }
            all.extend(args.iter().cloned());
            let sets = |names: &[&str]| args.iter().any(|a| names.contains(&a.as_str()));
            let quick = matches!(expect, Expect::Exits(0, _));
            if !quick && !sets(&["--duration", "--no-duration", "--requests", "-n", "--stages"]) {
                all.extend(["--duration".to_string(), "300ms".to_string()]);
            }
            if !quick && !sets(&["--rps", "--stages"]) {
                all.extend(["--rps".to_string(), "20".to_string()]);
            }
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            let (plain_before, tls_before) =
                (Witness::before(&self.plain), Witness::before(&self.tls));
            let marks = (self.nginx.mark(), self.nginx_tls.mark(), self.nginx_tls12.mark());
            let (stop, reader) = listen_statsd(&self.statsd);
            let launched_at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let out = run(&refs, Duration::from_secs(30));
            let plain = Witness::since(&self.plain, plain_before);
            let tls = Witness::since(&self.tls, tls_before);
            stop.store(true, Ordering::Relaxed);
            let statsd = reader.join().unwrap();
            let g = std::fs::read_to_string(&result)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .map(|v| {
                    let mut g = global(&v).clone();
                    g["__options"] = v["options"].clone();
                    g
                })
                .unwrap_or_default();
            let mut nginx = self.nginx.access_log().split_off(marks.0);
            nginx.extend(self.nginx_tls.access_log().split_off(marks.1));
            nginx.extend(self.nginx_tls12.access_log().split_off(marks.2));
            let seen = Seen { plain, tls, nginx, statsd, out, g, launched_at };
            let nothing_sent =
                seen.requests() + seen.tls.count("/requests") + seen.nginx.len() as u64 == 0;
            let verdict = match expect {
                Expect::Seen(code, check) if seen.out.code() == *code => check(&seen),
                Expect::Seen(code, _) => Err(format!("expected exit {code}")),
                Expect::Refused(why) if seen.out.code() == 2 && seen.out.stderr.contains(why) => {
                    if nothing_sent {
                        Ok(())
                    } else {
                        Err("refused, yet requests went out".into())
                    }
                }
                Expect::Refused(why) => Err(format!("expected exit 2 saying {why:?}")),
                Expect::Exits(code, text)
                    if seen.out.code() == *code
                        && (seen.out.stdout.contains(text) || seen.out.stderr.contains(text)) =>
                {
                    if nothing_sent {
                        Ok(())
                    } else {
                        Err("requests went out to the servers here".into())
                    }
                }
                Expect::Exits(code, text) => Err(format!("expected exit {code} saying {text:?}")),
            };
            if let Err(why) = verdict {
                problems.push(format!(
                    "{flag}: {why}; exit {} for {:?}\nstderr: {}",
                    seen.out.code(),
                    &all[1..],
                    seen.out.stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
                ));
            }
        }
        problems
    }
}

impl Drop for Witnesses {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn every_nighthawk_client_flag_is_honoured_where_it_acts_or_refused_with_a_reason() {
    let w = Witnesses::start("nighthawk-flags");
    let cases = nighthawk_cases(&w);
    let covered: BTreeSet<String> = cases.iter().map(|(f, _)| f.to_string()).collect();
    let missing: Vec<_> = nighthawk_flags().difference(&covered).cloned().collect();
    assert!(missing.is_empty(), "Nighthawk flags with no case here: {missing:?}");
    let problems = w.walk(&cases);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A case per flag of Nighthawk's client (and the spellings Shrike shares with it), each
/// against the witnesses in `w`.
fn nighthawk_cases(w: &Witnesses) -> Vec<(&'static str, (Vec<String>, Expect))> {
    let (plain, tls, ng) = (&w.plain, &w.tls, &w.nginx);
    let statsd_addr = w.statsd.local_addr().unwrap().to_string();
    let url = plain.url("/");
    let https = tls.url();
    let ca = tls.ca.clone();
    let endpoint = plain.addr.clone();
    let tls_endpoint = format!("localhost:{}", tls.port);
    let nginx_url = ng.url("http", "127.0.0.1", "/file");
    let nginx_endpoint = format!("127.0.0.1:{}", ng.port);
    // One GET whose header asks the test server for 418: the server's 4xx count shows the
    // request source's headers went out.
    let inline = "{name:\"nighthawk.in-line-options-list-request-source-plugin\",typed_config:{\"@type\":\"type.googleapis.com/nighthawk.request_source.InLineOptionsListRequestSourceConfig\",options_list:{options:[{request_method:\"GET\",request_headers:[{header:{key:\"x-nighthawk-test-server-config\",value:\"{\\\"response_status\\\":418}\"}}]}]}}}".to_string();
    let transport = format!("{{name:\"envoy.transport_sockets.tls\",typed_config:{{\"@type\":\"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\",sni:\"localhost\",common_tls_context:{{validation_context:{{trusted_ca:{{filename:\"{ca}\"}}}}}}}}}}");
    let tls_context = format!(
        "{{common_tls_context:{{validation_context:{{trusted_ca:{{filename:\"{ca}\"}}}}}}}}"
    );
    let statsd_sink = format!("statsd://{statsd_addr}");
    let trace = format!("zipkin://{nginx_endpoint}/api/v2/spans");
    let slow = |secs: &str| config(&format!("{{\"static_delay\":\"{secs}s\"}}"));
    let (slow_100ms, slow_200ms, slow_400ms) = (slow("0.1"), slow("0.2"), slow("0.4"));
    let status = |code: u16| config(&format!("{{\"response_status\":{code}}}"));
    let (teapot, unavailable) = (status(418), status(503));
    let emit = config(r#"{"emit_previous_request_delta_in_response_header":"x-lat"}"#);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;

    // Each case: the flag, the arguments of the whole command (without the common duration
    // and rate, 300 ms at 20/s: 6 requests, unless the case sets its own), and what must be
    // seen.
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let at = |target: &str, v: &[&str]| {
        let mut a = s(v);
        a.push(target.to_string());
        a
    };
    let plain_with = |v: &[&str]| at(&url, v);
    let nginx_with = |v: &[&str]| at(&nginx_url, v);
    let https_with = |v: &[&str]| {
        let mut a = s(v);
        a.extend([https.clone(), "--tls-ca".into(), ca.clone()]);
        a
    };
    let over_tls = |protocol: &'static str| {
        seen(0, move |s: &Seen| {
            let (requests, conns) =
                (s.tls.count("/requests"), s.tls.count(&format!("/connections/{protocol}")));
            ensure!(requests == 6 && conns >= 1, "{requests} requests over {conns} {protocol}");
            ensure!(
                s.client("upstream_rq_total") == 6,
                "client: {}",
                s.client("upstream_rq_total")
            );
            ensure!(s.tls.count("/tls/handshakes") >= 1, "no TLS handshake at the server");
            Ok(())
        })
    };
    let plain_connections = |protocol: &'static str, n: u64| {
        seen(0, move |s: &Seen| {
            let got = s.plain.count(&format!("/connections/{protocol}"));
            ensure!(got == n, "the server served {got} {protocol} connections, not {n}");
            agreed(s, s.requests())
        })
    };
    let cases: Vec<(&'static str, (Vec<String>, Expect))> = vec![
        (
            "--user-defined-plugin-config",
            (plain_with(&["--user-defined-plugin-config", "{name:\"x\"}"]), Expect::Refused("not implemented")),
        ),
        (
            // The server writes the time since its previous request in x-lat; the client
            // reads one sample from each response that has one.
            "--latency-response-header-name",
            (
                plain_with(&["--latency-response-header-name", "x-lat", "-H", &emit]),
                seen(0, |s| {
                    let n = statistic(&s.g, "benchmark_http_client.origin_latency_statistic")["count"]
                        .as_str()
                        .and_then(|c| c.parse::<u64>().ok())
                        .unwrap_or(0);
                    // The first response follows no earlier request, so it has no delta.
                    ensure!(n + 1 == s.plain.count("/responses/2xx"), "{n} samples");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--stats-flush-interval-duration",
            (
                plain_with(&["--stats-sinks", &statsd_sink, "--stats-flush-interval-duration", "0.4s", "--duration", "1.3"]),
                seen(0, |s| {
                    let (_, flushes) = statsd_counter(&s.statsd, "upstream_rq_total");
                    ensure!(flushes >= 3, "{flushes} flushes in 1.3 s, every 0.4 s: {:?}", s.statsd);
                    Ok(())
                }),
            ),
        ),
        (
            "--stats-flush-interval",
            (
                plain_with(&["--stats-sinks", &statsd_sink, "--stats-flush-interval", "1", "--duration", "2.2"]),
                seen(0, |s| {
                    let (_, flushes) = statsd_counter(&s.statsd, "upstream_rq_total");
                    ensure!(flushes >= 3, "{flushes} flushes in 2.2 s, every second");
                    Ok(())
                }),
            ),
        ),
        (
            "--stats-sinks",
            (
                plain_with(&["--stats-sinks", &statsd_sink]),
                seen(0, |s| {
                    let (sum, _) = statsd_counter(&s.statsd, "upstream_rq_total");
                    ensure!(sum == s.requests(), "statsd summed {sum}, the server saw {}", s.requests());
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--no-duration",
            (
                plain_with(&["--no-duration", "--termination-predicate", "benchmark.http_2xx:4"]),
                seen(0, |s| {
                    let ok = s.plain.count("/responses/2xx");
                    ensure!((5..=6).contains(&ok), "{ok} answered: the predicate, not a duration, ended it");
                    agreed(s, s.requests())
                }),
            ),
        ),
        (
            // One request before the clock: counted, its latency not sampled.
            "--simple-warmup",
            (
                plain_with(&["--simple-warmup"]),
                seen(0, |s| {
                    let sampled = statistic(&s.g, "benchmark_http_client.request_to_response")["count"]
                        .as_str()
                        .and_then(|c| c.parse::<u64>().ok())
                        .unwrap_or(0);
                    ensure!(sampled + 1 == s.requests(), "{sampled} sampled of {} sent", s.requests());
                    agreed(s, s.requests())
                }),
            ),
        ),
        (
            "--request-source-plugin-config",
            (
                plain_with(&["--request-source-plugin-config", &inline, "--no-default-failure-predicates"]),
                seen(0, |s| {
                    ensure!(s.plain.count("/responses/4xx") == 6, "its header asked for 418 each time");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--request-source",
            // Nothing serves there: accepted, and the run fails saying why.
            (plain_with(&["--request-source", "grpc://127.0.0.1:1"]), Expect::Exits(1, "request source grpc://127.0.0.1:1")),
        ),
        (
            "--label",
            (
                plain_with(&["--label", "a", "--label", "b"]),
                seen(0, |s| {
                    let labels = &s.g["__options"]["labels"];
                    ensure!(*labels == serde_json::json!(["a", "b"]), "labels {labels}");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--multi-target-use-https",
            (
                s(&["--multi-target-use-https", "--multi-target-endpoint", &tls_endpoint, "--multi-target-path", "/", "--tls-ca", &ca]),
                over_tls("http1"),
            ),
        ),
        (
            "--multi-target-path",
            (
                s(&["--multi-target-endpoint", &nginx_endpoint, "--multi-target-path", "/missing", "--no-default-failure-predicates"]),
                seen(0, |s| {
                    let missing = s.nginx.iter().filter(|e| e.request == "GET /missing HTTP/1.1").count();
                    ensure!(missing == 6 && s.nginx.len() == 6, "nginx: {:?}", s.nginx);
                    Ok(())
                }),
            ),
        ),
        (
            "--multi-target-endpoint",
            (
                s(&["--multi-target-endpoint", &endpoint, "--multi-target-endpoint", &nginx_endpoint, "--multi-target-path", "/file"]),
                seen(0, |s| {
                    let (here, there) = (s.requests(), s.nginx.len() as u64);
                    ensure!(here == 3 && there == 3, "round robin: {here} here, {there} at nginx");
                    Ok(())
                }),
            ),
        ),
        (
            // Four requests in flight (200 ms each at 20/s) spread over HTTP/2 connections,
            // where without the flag they share one.
            "--experimental-h2-use-multiple-connections",
            (
                plain_with(&["--experimental-h2-use-multiple-connections", "-p", "http2", "--connections", "3", "-H", &slow_200ms]),
                seen(0, |s| {
                    let n = s.plain.count("/connections/http2");
                    ensure!((2..=3).contains(&n), "{n} HTTP/2 connections");
                    agreed(s, s.requests())
                }),
            ),
        ),
        (
            "--nighthawk-service",
            (plain_with(&["--nighthawk-service", "grpc://127.0.0.1:1"]), Expect::Exits(1, "connecting to 127.0.0.1:1")),
        ),
        ("--jitter-uniform", (plain_with(&["--jitter-uniform", ".00001s"]), sent(6))),
        (
            // One connection, 200 ms a request: open loop does not wait for it; what it
            // cannot send it counts as overflow, and the server never sees those.
            "--open-loop",
            (
                plain_with(&["--open-loop", "--connections", "1", "-H", &slow_200ms]),
                seen(0, |s| {
                    let (here, overflow) = (s.requests(), s.client("benchmark.pool_overflow"));
                    ensure!(here + overflow == 6 && here <= 2, "{here} sent, {overflow} overflowed");
                    agreed(s, here)
                }),
            ),
        ),
        (
            // Three connections opened ahead: the least recently used one takes each
            // request, so nginx sees all three carry requests (the most recent would reuse one).
            "--experimental-h1-connection-reuse-strategy",
            (
                nginx_with(&["--experimental-h1-connection-reuse-strategy", "lru", "--connections", "3", "--prefetch-connections"]),
                seen(0, |s| {
                    let used: BTreeSet<u64> = s.nginx.iter().map(|e| e.connection).collect();
                    ensure!(used.len() == 3, "nginx saw requests on {} connections", used.len());
                    Ok(())
                }),
            ),
        ),
        (
            "--no-default-failure-predicates",
            (
                plain_with(&["--no-default-failure-predicates", "-H", &unavailable]),
                seen(0, |s| {
                    ensure!(s.plain.count("/responses/5xx") == 6, "the run went on through every 503");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            // Fails the run past two 503s: the server answers three, and no more.
            "--failure-predicate",
            (
                plain_with(&["--failure-predicate", "benchmark.http_5xx:2", "--connections", "1", "--rps", "100", "--duration", "1", "-H", &unavailable]),
                seen(1, |s| {
                    let n = s.plain.count("/responses/5xx");
                    ensure!((3..=4).contains(&n), "{n} 503s answered before the run failed");
                    Ok(())
                }),
            ),
        ),
        (
            "--termination-predicate",
            (
                plain_with(&["--termination-predicate", "benchmark.http_2xx:10", "--connections", "1", "--rps", "100", "--duration", "1"]),
                seen(0, |s| {
                    let n = s.plain.count("/responses/2xx");
                    ensure!((11..=12).contains(&n), "{n} answered of 100 planned");
                    agreed(s, s.requests())
                }),
            ),
        ),
        (
            // The collector is nginx: it logs the spans' POSTs (and refuses them).
            "--trace",
            (
                plain_with(&["--trace", &trace]),
                seen(0, |s| {
                    let posts = s.nginx.iter().filter(|e| e.request.starts_with("POST /api/v2/spans")).count();
                    ensure!(posts >= 1, "no spans reached the collector: {:?}", s.nginx);
                    agreed(s, 6)
                }),
            ),
        ),
        ("--sequencer-idle-strategy", (plain_with(&["--sequencer-idle-strategy", "sleep"]), sent(6))),
        (
            // One stream per connection, 100 ms each, 20/s: two connections at least.
            "--max-concurrent-streams",
            (
                plain_with(&["--max-concurrent-streams", "1", "-p", "http2", "-H", &slow_100ms]),
                seen(0, |s| {
                    let n = s.plain.count("/connections/http2");
                    ensure!(n >= 2, "{n} HTTP/2 connections for one stream each");
                    agreed(s, 6)
                }),
            ),
        ),
        ("--max-requests-per-connection", (plain_with(&["--max-requests-per-connection", "2"]), plain_connections("http1", 3))),
        (
            // Two in flight at most, 200 ms each, for 300 ms: the server never holds more.
            "--max-active-requests",
            (
                plain_with(&["--max-active-requests", "2", "-p", "http2", "--rps", "50", "-H", &slow_200ms]),
                seen(0, |s| {
                    let n = s.requests();
                    ensure!((2..=4).contains(&n), "{n} sent with two in flight over 300 ms");
                    agreed(s, n)
                }),
            ),
        ),
        (
            // Open loop, one connection busy 200 ms a request: two may wait, the rest overflow.
            "--max-pending-requests",
            (
                plain_with(&["--max-pending-requests", "2", "--open-loop", "--connections", "1", "-H", &slow_200ms]),
                seen(0, |s| {
                    let (done, overflow) = (s.client("upstream_rq_total"), s.client("benchmark.pool_overflow"));
                    let cancelled = s.client("upstream_rq_cancelled");
                    ensure!(s.client("upstream_rq_pending_total") >= 1, "nothing waited");
                    ensure!(
                        done + overflow + cancelled == 6,
                        "{done} finished, {overflow} overflowed, {cancelled} cancelled at the end"
                    );
                    // The server saw the finished ones, and any the end cut off in flight.
                    let here = s.requests();
                    ensure!((done..=done + cancelled).contains(&here), "the server saw {here}");
                    Ok(())
                }),
            ),
        ),
        ("--transport-socket", (s(&["--transport-socket", &transport, &https]), over_tls("http1"))),
        (
            // The connections come from 127.0.0.2, and nginx says so.
            "--upstream-bind-config",
            (
                nginx_with(&["--upstream-bind-config", "{source_address:{address:\"127.0.0.2\",port_value:0}}"]),
                seen(0, |s| {
                    ensure!(s.nginx.len() == 6, "{} at nginx", s.nginx.len());
                    ensure!(s.nginx.iter().all(|e| e.remote_addr == "127.0.0.2"), "{:?}", s.nginx);
                    Ok(())
                }),
            ),
        ),
        ("--tls-context", (s(&["--tls-context", &tls_context, &https]), over_tls("http1"))),
        (
            "--request-body-size",
            (
                plain_with(&["--request-body-size", "10", "--request-method", "POST"]),
                seen(0, |s| {
                    let body = s.plain.count("/request_body_bytes");
                    ensure!(body == 60, "the server read {body} body bytes for 6 × 10");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--request-header",
            (
                plain_with(&["--request-header", &teapot, "--no-default-failure-predicates"]),
                seen(0, |s| {
                    ensure!(s.plain.count("/responses/4xx") == 6, "the header asked for 418 each time");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--request-method",
            (
                nginx_with(&["--request-method", "PUT", "--no-default-failure-predicates"]),
                seen(0, |s| {
                    let puts = s.nginx.iter().filter(|e| e.request.starts_with("PUT /file ")).count();
                    ensure!(puts == 6 && s.nginx.len() == 6, "nginx: {:?}", s.nginx);
                    Ok(())
                }),
            ),
        ),
        ("--address-family", (plain_with(&["--address-family", "v4"]), sent(6))),
        (
            // Bursts of two every 100 ms: in nginx's log, pairs close together, pairs apart.
            "--burst-size",
            (
                nginx_with(&["--burst-size", "2"]),
                seen(0, |s| {
                    let t: Vec<f64> = s.nginx.iter().map(|e| e.secs).collect();
                    ensure!(t.len() == 6, "{} at nginx", t.len());
                    let mut gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
                    gaps.sort_by(f64::total_cmp);
                    ensure!(gaps[2] < 0.04 && gaps[3] > 0.06, "gaps {gaps:?}: not in pairs");
                    Ok(())
                }),
            ),
        ),
        (
            // Three connections opened ahead, though 20/s needs one: the server accepts three.
            "--prefetch-connections",
            (
                plain_with(&["--prefetch-connections", "--connections", "3"]),
                seen(0, |s| {
                    let n = s.plain.count("/connections/accepted");
                    ensure!(n == 3, "the server accepted {n} connections");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--output-format",
            (
                plain_with(&["--output-format", "yaml"]),
                seen(0, |s| {
                    ensure!(s.out.stdout.starts_with("---") || s.out.stdout.contains("\nresults:"), "not YAML: {}", s.out.stdout);
                    agreed(s, 6)
                }),
            ),
        ),
        ("-v", (plain_with(&["-v", "warn"]), quiet_run())),
        ("--verbosity", (plain_with(&["--verbosity", "error"]), quiet_run())),
        // A worker per core, each with its own connection.
        ("--concurrency", (plain_with(&["--concurrency", "auto"]), plain_connections("http1", cores))),
        (
            "--http3-protocol-options",
            (
                https_with(&[
                    "-p",
                    "http3",
                    "--http3-protocol-options",
                    "{quic_protocol_options:{max_concurrent_streams:1,initial_stream_window_size:65536,initial_connection_window_size:131072}}",
                ]),
                over_tls("http3"),
            ),
        ),
        ("-p", (plain_with(&["-p", "http2"]), plain_connections("http2", 1))),
        ("--protocol", (https_with(&["--protocol", "http3"]), over_tls("http3"))),
        ("--h2", (plain_with(&["--h2"]), plain_connections("http2", 1))),
        (
            // 100 ms for answers that take 400: none arrives in time, every one was sent.
            "--timeout",
            (
                plain_with(&["--timeout", "0.1", "-H", &slow_400ms, "--no-default-failure-predicates"]),
                seen(0, |s| {
                    let timeouts = s.client("upstream_rq_timeout");
                    ensure!(s.client("benchmark.http_2xx") == 0, "answered within 100 ms");
                    ensure!(timeouts >= 1 && timeouts == s.requests(), "{timeouts} timed out of {} sent", s.requests());
                    Ok(())
                }),
            ),
        ),
        ("--duration", (plain_with(&["--duration", "1"]), sent(20))),
        // 100 ms a request at 20/s: two connections busy at once.
        ("--connections", (plain_with(&["--connections", "2", "-H", &slow_100ms]), plain_connections("http1", 2))),
        ("--rps", (plain_with(&["--rps", "40"]), sent(12))),
        // tclap's `--`: what follows is not a flag (here, the URI).
        ("--ignore_rest", (s(&["--duration", "300ms", "--rps", "20", "--ignore_rest", &url]), sent(6))),
        ("--version", (s(&["--version"]), Expect::Exits(0, env!("CARGO_PKG_VERSION")))),
        ("-h", (s(&["-h"]), Expect::Exits(0, "Usage"))),
        ("--help", (s(&["--help"]), Expect::Exits(0, "Usage"))),
    ];

    cases
}

/// A quieter log changes no load: 6 requests, seen by the server, and nothing on stderr
/// below a warning.
fn quiet_run() -> Expect {
    seen(0, |s| {
        ensure!(
            !s.out.stderr.contains("INFO") && !s.out.stderr.contains("info:"),
            "{}",
            s.out.stderr
        );
        agreed(s, 6)
    })
}

/// Flags of `run --help` beyond Nighthawk's that act somewhere other than the wire a witness
/// here reads, each with where it is shown honoured instead.
const PROVEN_ELSEWHERE: &[(&str, &str)] = &[
    ("--tunnel-uri", "tunnels.rs: the proxy's own tunnel counts and the target's requests"),
    ("--tunnel-protocol", "tunnels.rs: an HTTP/2 proxy's counts"),
    ("--tunnel-tls-context", "tunnels.rs: a TLS proxy's counts"),
    ("--tunnel-ca", "tunnels.rs: a TLS proxy verified by its CA"),
    ("--remote", "fleet.rs: each generator's requests at the test server"),
    ("--remote-ca", "fleet.rs / service.rs: TLS to the service"),
    ("--remote-cert", "service.rs: client certificates the service checks"),
    ("--remote-key", "service.rs: client certificates the service checks"),
    ("--remote-server-name", "service.rs: the name the service's certificate is checked for"),
    ("--remote-token-env", "service.rs: the token the service checks"),
    ("--remote-token-file", "service.rs: the token the service checks"),
    ("--remote-expect", "fleet_hosts.rs: a missing generator refused before any load"),
    ("--remote-failure", "fleet.rs: a lost generator's policy"),
    ("--remote-keepalive", "fleet.rs: a frozen generator named as lost"),
    ("--remote-start-delay", "fleet.rs: the generators' common start"),
    ("--remote-wait", "fleet.rs: waiting for generators to come up"),
    ("--metrics-listen", "telemetry.rs: Prometheus scraped during a run"),
    ("--read-coalesce", "no effect a server can see (when reads are made); bench/ measures it"),
    ("--dry-run", "every_flag.rs: prints the plan and sends nothing"),
    ("--output", "every_flag.rs: the file written"),
    ("--output-file-format", "every_flag.rs: the file's format"),
    ("--no-progress", "every_flag.rs: no progress lines"),
    ("--stats-interval", "telemetry.rs and report.rs: the per-interval series"),
    ("--execution-id", "witness.rs and every_flag.rs: the result's id and merges"),
];

/// `run`'s flags beyond Nighthawk's: each one that shapes what is sent is shown honoured by
/// a witness here (the servers' counts, nginx's access log with its TLS fields, a statsd
/// socket); the rest are named in [`PROVEN_ELSEWHERE`] with the test that shows them.
#[test]
fn every_run_flag_that_shapes_load_is_honoured_at_the_server() {
    let w = Witnesses::start("run-flags");
    let url = w.plain.url("/");
    let nginx_url = w.nginx.url("http", "127.0.0.1", "/file");
    let tls_url = w.nginx_tls.url("https", "localhost", "/file");
    let ca = w.nginx_tls.ca();
    let tls12_url = w.nginx_tls12.url("https", "localhost", "/file");
    let ca12 = w.nginx_tls12.ca();
    let statsd_addr = w.statsd.local_addr().unwrap().to_string();
    let zipkin = format!("zipkin://127.0.0.1:{}/api/v2/spans", w.nginx.port);
    let body = w.dir.join("body.bin");
    std::fs::write(&body, "body").unwrap();
    let requests = w.dir.join("requests.jsonl");
    std::fs::write(&requests, "{\"method\": \"GET\", \"path\": \"/listed\"}\n").unwrap();
    let spec = w.dir.join("spec.json");
    std::fs::write(&spec, r#"{"connections": 3}"#).unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let (body, requests, spec) = (path(&body), path(&requests), path(&spec));
    let reset = config(r#"{"reset":{"probability":0.2}}"#);

    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let at = |target: &str, v: &[&str]| {
        let mut a = s(v);
        a.push(target.to_string());
        a
    };
    let plain_with = |v: &[&str]| at(&url, v);
    let nginx_with = |v: &[&str]| at(&nginx_url, v);
    let tls_with = |v: &[&str]| at(&tls_url, v);
    // Every request nginx logged over TLS passes `each`.
    let over_tls = |n: usize, each: fn(&nginx::LogEntry) -> bool, what: &'static str| {
        seen(0, move |s: &Seen| {
            ensure!(s.nginx.len() == n, "{} requests at nginx, not {n}", s.nginx.len());
            let bad: Vec<_> = s.nginx.iter().filter(|e| !each(e)).collect();
            ensure!(bad.is_empty(), "not {what}: {bad:?}");
            Ok(())
        })
    };
    // A ramp from 0 to 20/s over the first second of two: about 10 + 20 requests, where
    // 20/s from the start would be 40.
    let ramped = || {
        seen(0, |s: &Seen| {
            let n = s.requests();
            ensure!((25..=33).contains(&n), "{n} requests: not a 1 s ramp to 20/s then 1 s at it");
            agreed(s, n)
        })
    };
    let cases: Vec<(&str, (Vec<String>, Expect))> = vec![
        (
            // First, so that "+1s" is soon after the list was made: nginx logs nothing before.
            "--start-at",
            (
                nginx_with(&["--start-at", "+1.5s"]),
                seen(0, |s| {
                    let first = s.nginx.iter().map(|e| e.secs).fold(f64::INFINITY, f64::min);
                    let after = first - s.launched_at;
                    ensure!(
                        s.nginx.len() == 6 && after >= 1.4,
                        "first request {after:.3}s after launch"
                    );
                    Ok(())
                }),
            ),
        ),
        ("--requests", (plain_with(&["--requests", "9", "--rps", "100"]), sent(9))),
        (
            "--json-body",
            (
                plain_with(&["--json-body", r#"{"a":1}"#]),
                seen(0, |s| {
                    let bytes = s.plain.count("/request_body_bytes");
                    ensure!(bytes == 6 * 7, "the server read {bytes} body bytes for 6 × 7");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--request-body-file",
            (
                plain_with(&["--request-body-file", &body, "--request-method", "POST"]),
                seen(0, |s| {
                    let bytes = s.plain.count("/request_body_bytes");
                    ensure!(bytes == 6 * 4, "the server read {bytes} body bytes for 6 × 4");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--request-file",
            (
                nginx_with(&["--request-file", &requests, "--no-default-failure-predicates"]),
                seen(0, |s| {
                    let listed =
                        s.nginx.iter().filter(|e| e.request == "GET /listed HTTP/1.1").count();
                    ensure!(listed == 6 && s.nginx.len() == 6, "nginx: {:?}", s.nginx);
                    Ok(())
                }),
            ),
        ),
        ("--stages", (plain_with(&["--stages", "1s:20,1s:20"]), ramped())),
        ("--ramp-duration", (plain_with(&["--ramp-duration", "1s", "--duration", "2"]), ramped())),
        (
            "--rate-limiter-plugin-config",
            (
                plain_with(&[
                    "--duration",
                    "2",
                    "--rate-limiter-plugin-config",
                    "{name:\"nighthawk.linear-ramping-rate-limiter-plugin\",typed_config:{\
                     \"@type\":\"type.googleapis.com/nighthawk.rate_limiter.\
                     LinearRampingRateLimiterConfig\",ramp_time:\"1s\"}}",
                ]),
                ramped(),
            ),
        ),
        // Shard 0 of 2 sends half of the run.
        ("--shard", (plain_with(&["--shard", "0/2"]), sent(3))),
        (
            "--bind-address",
            (
                nginx_with(&["--bind-address", "127.0.0.2"]),
                seen(0, |s| {
                    ensure!(s.nginx.len() == 6, "{} at nginx", s.nginx.len());
                    ensure!(s.nginx.iter().all(|e| e.remote_addr == "127.0.0.2"), "{:?}", s.nginx);
                    Ok(())
                }),
            ),
        ),
        ("--io-backend", (plain_with(&["--io-backend", other_backend()]), sent(6))),
        (
            // Woken once per 250 ms, a worker sends the releases due by then together: nginx
            // logs 20 requests in clumps, a few long gaps and many short ones, where precise
            // releases would be 50 ms apart each.
            "--max-lateness",
            (
                nginx_with(&["--max-lateness", "250ms", "--duration", "1"]),
                seen(0, |s| {
                    let t: Vec<f64> = s.nginx.iter().map(|e| e.secs).collect();
                    ensure!(t.len() == 20, "{} at nginx", t.len());
                    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
                    let long = gaps.iter().filter(|g| **g > 0.15).count();
                    let short = gaps.iter().filter(|g| **g < 0.03).count();
                    ensure!((2..=5).contains(&long) && short >= 12, "gaps {gaps:?}: not clumped");
                    Ok(())
                }),
            ),
        ),
        (
            // A server that resets one request in five: nothing is sent twice when told not to.
            "--retry-unanswered",
            (
                plain_with(&[
                    "--retry-unanswered=false",
                    "--connections",
                    "1",
                    "--requests",
                    "100",
                    "--rps",
                    "400",
                    "--no-default-failure-predicates",
                    "-H",
                    &reset,
                ]),
                seen(0, |s| {
                    ensure!(s.client("upstream_rq_retry") == 0, "resent");
                    ensure!(s.requests() == 100, "the server saw {} for 100", s.requests());
                    Ok(())
                }),
            ),
        ),
        (
            // The spec's three connections, opened ahead.
            "--spec",
            (
                plain_with(&["--spec", &spec, "--prefetch-connections"]),
                seen(0, |s| {
                    let n = s.plain.count("/connections/accepted");
                    ensure!(n == 3, "the server accepted {n} connections");
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--statsd",
            (
                plain_with(&["--statsd", &statsd_addr]),
                seen(0, |s| {
                    let (sum, _) = statsd_counter(&s.statsd, "upstream_rq_total");
                    ensure!(
                        sum == s.requests(),
                        "statsd summed {sum}, the server saw {}",
                        s.requests()
                    );
                    agreed(s, 6)
                }),
            ),
        ),
        (
            // One in a billion sampled: no span reaches the collector (nginx), where every
            // request's would without it.
            "--trace-sample-rate",
            (
                plain_with(&["--trace", &zipkin, "--trace-sample-rate", "1e-9"]),
                seen(0, |s| {
                    ensure!(s.nginx.is_empty(), "spans posted: {:?}", s.nginx);
                    agreed(s, 6)
                }),
            ),
        ),
        (
            "--tls-ca",
            (
                tls_with(&["--tls-ca", &ca]),
                over_tls(6, |e| e.ssl_protocol.starts_with("TLS"), "over TLS"),
            ),
        ),
        (
            "--tls-insecure",
            (
                tls_with(&["--tls-insecure"]),
                over_tls(6, |e| e.ssl_protocol.starts_with("TLS"), "over TLS"),
            ),
        ),
        (
            "--tls-sni",
            (
                tls_with(&["--tls-insecure", "--tls-sni", "other.example"]),
                over_tls(6, |e| e.ssl_server_name == "other.example", "for the name asked"),
            ),
        ),
        (
            "--tls-max-version",
            (
                tls_with(&["--tls-ca", &ca, "--tls-max-version", "1.2"]),
                over_tls(6, |e| e.ssl_protocol == "TLSv1.2", "TLS 1.2"),
            ),
        ),
        (
            // A server of TLS 1.2 only: with 1.3 the least allowed, no handshake completes.
            "--tls-min-version",
            (
                at(&tls12_url, &["--tls-ca", &ca12, "--tls-min-version", "1.3"]),
                seen(1, |s| {
                    ensure!(s.nginx.is_empty(), "nginx answered over TLS 1.2: {:?}", s.nginx);
                    ensure!(s.out.stderr.contains("ProtocolVersion"), "{}", s.out.stderr);
                    Ok(())
                }),
            ),
        ),
        (
            "--tls-cipher-suites",
            (
                tls_with(&[
                    "--tls-ca",
                    &ca,
                    "--tls-cipher-suites",
                    "TLS13_CHACHA20_POLY1305_SHA256",
                ]),
                over_tls(6, |e| e.ssl_cipher == "TLS_CHACHA20_POLY1305_SHA256", "the suite asked"),
            ),
        ),
        (
            // A connection per request, each a full handshake: nginx resumed none.
            "--tls-no-session-resumption",
            (
                tls_with(&[
                    "--tls-ca",
                    &ca,
                    "--tls-no-session-resumption",
                    "--max-requests-per-connection",
                    "1",
                    "--connections",
                    "1",
                ]),
                over_tls(6, |e| e.ssl_session_reused == ".", "a full handshake"),
            ),
        ),
    ];

    // Every run flag is Nighthawk's (the other test), a case here, or proven elsewhere.
    let nighthawk: BTreeSet<String> =
        nighthawk_cases(&w).iter().map(|(f, _)| f.to_string()).collect();
    let here: BTreeSet<&str> = cases.iter().map(|(f, _)| *f).collect();
    let elsewhere: BTreeSet<&str> = PROVEN_ELSEWHERE.iter().map(|(f, _)| *f).collect();
    let help = run(&["run", "--help"], Duration::from_secs(10));
    let mut unproven = Vec::new();
    for line in help.stdout.lines() {
        let Some(at) =
            line.find("--").filter(|&at| line[..at].trim().trim_end_matches(',').len() <= 2)
        else {
            continue;
        };
        let flag: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if flag.len() > 2
            && !nighthawk.contains(&flag)
            && !here.contains(flag.as_str())
            && !elsewhere.contains(flag.as_str())
        {
            unproven.push(flag);
        }
    }
    assert!(unproven.is_empty(), "run flags with no witness case or reference: {unproven:?}");
    let problems = w.walk(&cases);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The I/O backend runs do not use by default here.
fn other_backend() -> &'static str {
    match std::env::var("SHRIKE_IO_BACKEND").as_deref() {
        Ok("io_uring") => "epoll",
        _ => "io_uring",
    }
}
