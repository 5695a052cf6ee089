//! Load through CONNECT tunnels (Nighthawk's `--tunnel-uri`), against Debian's squid as the
//! proxy: exact counts at the target, one CONNECT in squid's own log per connection the run
//! counted, TLS to the target inside the tunnel, and a refused CONNECT counted and named as
//! the proxy's refusal, not as a failure to reach the target.

use std::time::Duration;

use crate::support::squid::Squid;
use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// `args` with JSON output against `target`, exit 0, checked against what the target itself
/// counted (every request, every status class): the load arrived through the tunnel.
fn agreed(target: &impl Counted, args: &[&str]) -> (serde_json::Value, Witness) {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(target, &all, Duration::from_secs(60));
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    (v, w)
}

#[test]
fn http1_and_http2_load_go_through_squid_one_connect_per_connection() {
    let squid = Squid::start(&[]);
    let server = Server::start(&[]);
    let port = server.addr.rsplit(':').next().unwrap();
    let mut tunnels = 0;
    let before = Witness::before(&server);
    for protocol in ["http1", "http2"] {
        let (v, w) = agreed(
            &server,
            &[
                "run",
                &server.url("/"),
                "--protocol",
                protocol,
                "--tunnel-uri",
                &squid.addr(),
                "--rps",
                "100",
                "--duration",
                "1",
                "--connections",
                "3",
            ],
        );
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 100, "{protocol}: {v}");
        let opened = counter(g, "upstream_cx_total");
        assert!(opened >= 1, "{protocol}: {v}");
        // squid opened one connection to the target per tunnel, speaking the run's protocol.
        assert_eq!(w.count(&format!("/connections/{protocol}")), opened, "{protocol}");
        assert_eq!(w.count("/connections/accepted"), opened, "{protocol}");
        assert_eq!(counter(g, "upstream_cx_tunnel_total"), opened, "{protocol}: a tunnel each");
        assert_eq!(counter(g, "benchmark.tunnel_failure"), 0);
        let setup = statistic(g, "benchmark_http_client.tunnel_setup");
        assert_eq!(setup["count"], opened.to_string(), "{setup}");
        assert_eq!(v["options"]["tunnel_options"]["tunnel_uri"], squid.addr());
        assert_eq!(v["options"]["tunnel_options"]["tunnel_protocol"], "HTTP1");
        tunnels += opened as usize;
    }
    // The target served every request, and squid tunnelled each connection once.
    assert_eq!(Witness::since(&server, before).count("/requests"), 200);
    let connects = squid.connects(tunnels);
    assert_eq!(connects.len(), tunnels, "{connects:?}");
    for (code, url) in &connects {
        assert_eq!(code, "TCP_TUNNEL/200");
        assert_eq!(url, &format!("127.0.0.1:{port}"));
    }
}

#[test]
fn tls_to_the_target_runs_inside_the_tunnel() {
    let squid = Squid::start(&[]);
    let server = TlsServer::start(&["--tls"]);
    let (v, w) = agreed(
        &server,
        &[
            "run",
            &server.url(),
            "--tls-ca",
            &server.ca,
            "--protocol",
            "http2",
            "--tunnel-uri",
            &format!("http://{}", squid.addr()),
            "--rps",
            "50",
            "--duration",
            "1",
        ],
    );
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{v}");
    assert_eq!(counter(g, "ssl.handshake"), counter(g, "upstream_cx_total"));
    // Every handshake was the target's own, through the tunnel.
    assert_eq!(w.count("/tls/handshakes"), counter(g, "ssl.handshake"));
    assert_eq!(w.count("/connections/http2"), counter(g, "upstream_cx_total"));
    // The proxy saw the target's name and port, and bytes it could not read.
    let connects = squid.connects(1);
    assert_eq!(connects[0], ("TCP_TUNNEL/200".into(), format!("localhost:{}", server.port)));
}

#[test]
fn a_refused_connect_is_the_proxys_refusal_and_fails_the_run() {
    let target = Server::start(&[]);
    let port: u16 = target.addr.rsplit(':').next().unwrap().parse().unwrap();
    let squid = Squid::start(&[port]);
    let (out, w) = run_witnessed(
        &target,
        &[
            "run",
            &target.url("/"),
            "--tunnel-uri",
            &squid.addr(),
            "--rps",
            "20",
            "--duration",
            "1",
            "--output-format",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    assert!(counter(g, "benchmark.tunnel_failure") >= 1, "{v}");
    assert_eq!(counter(g, "upstream_cx_connect_fail"), 0, "not a failure to reach the target");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), 0);
    assert_eq!(counter(g, "benchmark.http_2xx"), 0);
    // Nothing reached the target: squid refused before connecting to it.
    assert_eq!(w.count("/requests"), 0);
    assert_eq!(w.count("/connections/accepted"), 0);
    let why =
        format!("CONNECT 127.0.0.1:{port} through proxy {}: the proxy answered 403", squid.addr());
    assert!(out.stderr.contains(&why), "{}", out.stderr);
    assert_eq!(squid.connects(1)[0].0, "TCP_DENIED/403");
    // The human summary names it too.
    let out = run(
        &["run", &target.url("/"), "--tunnel-uri", &squid.addr(), "--rps", "5", "--duration", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1);
    assert!(out.stdout.contains("CONNECT failed at the proxy"), "{}", out.stdout);
    let via = format!("through proxy {} (CONNECT)", squid.addr());
    assert!(out.stdout.contains(&via), "the target line says how it was reached: {}", out.stdout);
    assert!(out.stdout.contains("the proxy answered 403 Forbidden"), "{}", out.stdout);
}

#[test]
fn a_proxy_that_is_not_there_is_named_as_the_proxy() {
    let target = Server::start(&[]);
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = free.local_addr().unwrap().to_string();
    drop(free);
    let (out, w) = run_witnessed(
        &target,
        &["run", &target.url("/"), "--tunnel-uri", &proxy, "--rps", "5", "--duration", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(w.count("/connections/accepted"), 0, "the target was never reached");
    assert!(out.stderr.contains(&format!("connect to proxy {proxy}")), "{}", out.stderr);
}

#[test]
fn tunnel_pairs_nighthawk_refuses_are_refused_by_name() {
    let url = "http://127.0.0.1:9/";
    let cases: [(&[&str], &str); 7] = [
        (&["--tunnel-protocol", "http1"], "--tunnel-protocol needs --tunnel-uri"),
        (
            &["--tunnel-uri", "127.0.0.1:3128", "-p", "http3", "--tunnel-protocol", "http2"],
            "is required to carry HTTP/3 load: CONNECT-UDP goes over TLS to the proxy",
        ),
        (&["--tunnel-uri", "127.0.0.1"], "--tunnel-uri: no port"),
        (&["--tunnel-uri", "127.0.0.1:3128", "-p", "http3"], "http1 cannot carry HTTP/3 load"),
        (
            &["--tunnel-uri", "127.0.0.1:3128", "-p", "http3", "--tunnel-protocol", "http3"],
            "is required for an http3 tunnel",
        ),
        (
            &["--tunnel-uri", "127.0.0.1:3128", "--tunnel-protocol", "http3"],
            "is required for an http3 tunnel: QUIC to the proxy is TLS",
        ),
        (&["--tunnel-uri", "127.0.0.1:3128", "--tunnel-ca", "/x.pem"], "needs TLS to the proxy"),
    ];
    for (extra, why) in cases {
        let out = run(&[&["run", url][..], extra].concat(), Duration::from_secs(20));
        assert_eq!(out.code(), 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{extra:?}: {}", out.stderr);
    }
}

/// Tunnel options through Nighthawk's API: the service runs the same tunnelled load, and its
/// allowlist covers the proxy as it covers targets.
#[test]
fn the_service_tunnels_too_and_its_allowlist_covers_the_proxy() {
    let squid = Squid::start(&[]);
    let target = Server::start(&[]);
    let service = Service::start(&["--allow-target", "127.0.0.1/32"]);
    let url = target.url("/");
    let args = ["run", &url, "--tunnel-uri", &squid.addr(), "--rps", "50", "--duration", "1"];
    let uri = service.uri();
    let (remote, w) = agreed(&target, &[&args[..], &["--nighthawk-service", &uri]].concat());
    let g = global(&remote);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{remote}");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), counter(g, "upstream_cx_total"));
    assert_eq!(w.count("/connections/http1"), counter(g, "upstream_cx_tunnel_total"));
    assert_eq!(remote["options"]["tunnel_options"]["tunnel_uri"], squid.addr());
    // A proxy outside the allowlist (127.0.0.2 is not 127.0.0.1/32) is refused by name.
    let outside = format!("127.0.0.2:{}", squid.port);
    let (out, w) = run_witnessed(
        &target,
        &["run", &url, "--tunnel-uri", &outside, "--nighthawk-service", &service.uri()],
        Duration::from_secs(30),
    );
    assert_ne!(out.code(), 0, "{}", out.stderr);
    assert_eq!(w.count("/requests"), 0, "refused before any load");
    assert!(out.stderr.contains("tunnel_options.tunnel_uri"), "{}", out.stderr);
    assert!(out.stderr.contains("outside this service's allowlist"), "{}", out.stderr);
}

/// TLS to the proxy (squid's `https_port`): an `https://` tunnel URI with `--tunnel-ca`, or
/// Nighthawk's `--tunnel-tls-context` naming the CA; TLS to an https target inside that; and a
/// proxy certificate nobody vouches for, named as the proxy's handshake.
#[test]
fn tls_to_the_proxy_with_the_target_tls_inside_it() {
    let squid = Squid::start_tls();
    let ca = squid.dir.join("ca.pem").display().to_string();
    let proxy = format!("127.0.0.1:{}", squid.tls_port.unwrap());
    let plain = Server::start(&[]);
    let tunnel_uri = format!("https://{proxy}");
    let (v, w) = agreed(
        &plain,
        &[
            "run",
            &plain.url("/"),
            "--tunnel-uri",
            &tunnel_uri,
            "--tunnel-ca",
            &ca,
            "--rps",
            "40",
            "--duration",
            "1",
        ],
    );
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 40, "{v}");
    // A connection at the target per tunnel, in plaintext: the handshakes were the proxy's.
    assert_eq!(w.count("/connections/http1"), counter(g, "upstream_cx_total"), "{v}");
    // One TLS handshake per connection: the proxy's.
    assert_eq!(counter(g, "ssl.handshake"), counter(g, "upstream_cx_total"), "{v}");
    assert_eq!(v["options"]["tunnel_options"]["tunnel_ca"], ca);
    let plain_tunnels = counter(g, "upstream_cx_total") as usize;

    let tls = TlsServer::start(&["--tls"]);
    let context = format!(
        "{{common_tls_context:{{validation_context:{{trusted_ca:{{filename:\"{ca}\"}}}}}}}}"
    );
    let (v, w) = agreed(
        &tls,
        &[
            "run",
            &tls.url(),
            "--tls-ca",
            &tls.ca,
            "--tunnel-uri",
            &proxy,
            "--tunnel-tls-context",
            &context,
            "--rps",
            "40",
            "--duration",
            "1",
        ],
    );
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 40, "{v}");
    // Two per connection: the proxy's, and the target's inside the tunnel.
    assert_eq!(counter(g, "ssl.handshake"), 2 * counter(g, "upstream_cx_total"), "{v}");
    assert_eq!(w.count("/tls/handshakes"), counter(g, "upstream_cx_total"), "the target's half");
    assert!(v["options"]["tunnel_options"]["tunnel_tls_context"].is_object(), "{v}");
    // A busy machine may open a second connection in a run: one CONNECT each, either way.
    let tls_tunnels = counter(g, "upstream_cx_total") as usize;
    let connects = squid.connects(plain_tunnels + tls_tunnels);
    assert_eq!(connects.len(), plain_tunnels + tls_tunnels, "{connects:?}");
    let to_tls = ("TCP_TUNNEL/200".to_string(), format!("localhost:{}", tls.port));
    assert_eq!(connects.iter().filter(|c| **c == to_tls).count(), tls_tunnels, "{connects:?}");

    // The proxy's certificate without its CA: the proxy's handshake fails, by name.
    let (out, w) = run_witnessed(
        &plain,
        &["run", &plain.url("/"), "--tunnel-uri", &tunnel_uri, "-d", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert_eq!(w.count("/connections/accepted"), 0, "no tunnel, so nothing reached the target");
    assert!(out.stderr.contains(&format!("TLS handshake with proxy {proxy}")), "{}", out.stderr);
    // The advice names the tunnel's flag, not the target's --tls-ca.
    assert!(out.stderr.contains("--tunnel-ca"), "{}", out.stderr);
    assert!(!out.stderr.contains("with --tls-ca"), "{}", out.stderr);

    // squid's https_port negotiates nothing by ALPN: an HTTP/2 tunnel is named as needing a
    // proxy that speaks h2.
    let out = run(
        &[
            "run",
            &plain.url("/"),
            "--tunnel-uri",
            &format!("https://{proxy}"),
            "--tunnel-ca",
            &ca,
            "--tunnel-protocol",
            "http2",
            "-d",
            "1",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("the proxy speaks HTTP/1.1 only"), "{}", out.stderr);
    assert!(out.stderr.contains("use --tunnel-protocol http1"), "{}", out.stderr);
}

/// `shrike serve --connect-proxy` as the proxy: Shrike's client and curl tunnel through it, it
/// counts what it carried, refuses destinations outside `--proxy-allow`, and a server that is
/// not a proxy says so.
#[test]
fn shrike_serve_is_a_connect_proxy() {
    let proxy = Server::start(&["--connect-proxy", "--stats-path", "/stats"]);
    let target = Server::start(&[]);
    let mut tunnels = 0;
    for protocol in ["http1", "http2"] {
        let before = Counted::stats(&proxy, "/stats");
        let (v, _) = agreed(
            &target,
            &[
                "run",
                &target.url("/"),
                "-p",
                protocol,
                "--tunnel-uri",
                &proxy.addr,
                "--rps",
                "100",
                "--duration",
                "1",
            ],
        );
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 100, "{protocol}: {v}");
        tunnels += counter(g, "upstream_cx_tunnel_total");
        // The proxy counted this run's tunnels as the run did.
        let after = Counted::stats(&proxy, "/stats");
        let n = |v: &serde_json::Value| v["proxy"]["tunnels"].as_u64().unwrap();
        assert_eq!(n(&after) - n(&before), counter(g, "upstream_cx_tunnel_total"), "{protocol}");
    }
    // curl through it, as a user would check the proxy by hand.
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-p", "-x"])
        .arg(format!("http://{}", proxy.addr))
        .arg(target.url("/"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    let p = proxy.stats("/stats");
    assert_eq!(p["proxy"]["tunnels"], tunnels + 1, "{p}");
    assert!(p["proxy"]["bytes_from_destination"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(target.stats(WITNESS_STATS)["requests"], 201);

    // Outside --proxy-allow (loopback by default): 403, counted, named by the client.
    let refused = |v: &serde_json::Value| v["proxy"]["refused"].as_u64().unwrap();
    let before = refused(&proxy.stats("/stats"));
    let outside = ["run", "http://10.255.0.1:80/", "--tunnel-uri", &proxy.addr, "--rps", "5"];
    let out = run(&[&outside[..], &["-d", "1", "--output-format", "json"]].concat(), LIMIT);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("the proxy answered 403"), "{}", out.stderr);
    assert!(proxy.stats("/stats")["proxy"]["refused"].as_u64().unwrap() >= 1);
    // Each refusal the client counted is one the proxy counted.
    let failures = counter(global(&json(&out)), "benchmark.tunnel_failure");
    assert_eq!(refused(&proxy.stats("/stats")) - before, failures);
    // Over TLS to the proxy (`--tls`): the same tunnels, TLS to the proxy first.
    let tls_proxy = TlsServer::start(&["--tls", "--connect-proxy"]);
    let before = Witness::before(&tls_proxy);
    let v = run_json_ok(&[
        "run",
        &target.url("/"),
        "--tunnel-uri",
        &format!("https://localhost:{}", tls_proxy.port),
        "--tunnel-ca",
        &tls_proxy.ca,
        "--rps",
        "20",
        "--duration",
        "1",
    ]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 20, "{v}");
    // The TLS proxy's own count: a handshake and a tunnel per connection of the run.
    let w = Witness::since(&tls_proxy, before);
    let opened = counter(global(&v), "upstream_cx_tunnel_total");
    assert_eq!(w.count("/proxy/tunnels"), opened, "{v}");
    assert_eq!(w.count("/tls/handshakes"), counter(global(&v), "ssl.handshake"), "{v}");
    // A server without --connect-proxy answers 405.
    let out = run(
        &["run", &target.url("/"), "--tunnel-uri", &target.addr, "--rps", "5", "-d", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("the proxy answered 405"), "{}", out.stderr);
}

/// Go's own HTTP/2 server as a CONNECT proxy (tests/connect_proxy; quic-go's HTTP/3 server too
/// with -h3), started on a loopback port it picks and prints; killed by its child handle.
struct GoProxy {
    child: std::process::Child,
    addr: String,
    /// Serving TLS (given -cert).
    tls: bool,
}

impl GoProxy {
    fn start(args: &[&str]) -> GoProxy {
        GoProxy::spawn(args, true)
    }

    /// `xconnect`: offer extended CONNECT (RFC 8441), which CONNECT-UDP over HTTP/2 needs;
    /// Go's server offers it only when asked.
    fn spawn(args: &[&str], xconnect: bool) -> GoProxy {
        let bin = go_build("connect_proxy", &["."], "the Go CONNECT proxy");
        let xconnect = if xconnect { "http2xconnect=1" } else { "http2xconnect=0" };
        let mut child = std::process::Command::new(bin.join("connect_proxy"))
            .args(args)
            .env("GODEBUG", xconnect)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn the Go proxy");
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
        GoProxy { child, addr: line.trim().to_string(), tls: args.contains(&"-cert") }
    }

    fn stats(&self) -> serde_json::Value {
        let out = std::process::Command::new("curl")
            .args(["-s", "--max-time", "5", "-k"])
            .arg(format!("{}://{}/stats", if self.tls { "https" } else { "http" }, self.addr))
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }
}

impl Drop for GoProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP/2 CONNECT against Go's server: every connection of the run a stream of one proxy
/// connection, HTTP/1.1 and HTTP/2 load inside them, exact counts.
#[test]
fn http2_connect_streams_share_one_proxy_connection_on_gos_server() {
    let proxy = GoProxy::start(&[]);
    // 20 ms per response at 200/s: about four requests in flight, so several connections.
    let target = Server::start(&["--static-delay", "20ms"]);
    let url = target.url("/");
    let mut tunnels = 0;
    for protocol in ["http1", "http2"] {
        let mut args = vec!["run", &url, "-p", protocol, "--tunnel-uri"];
        args.extend([proxy.addr.as_str(), "--tunnel-protocol", "http2", "--rps", "200"]);
        args.extend(["--duration", "1", "--connections", "8"]);
        args.extend(one_stream(protocol));
        let (v, w) = agreed(&target, &args);
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{protocol}: {v}");
        let opened = counter(g, "upstream_cx_total");
        assert!(opened >= 2, "{protocol}: {opened} connections: {v}");
        // Go's proxy dialled the target once per tunnel.
        assert_eq!(w.count(&format!("/connections/{protocol}")), opened, "{protocol}");
        assert_eq!(counter(g, "upstream_cx_tunnel_total"), opened, "{protocol}");
        assert_eq!(v["options"]["tunnel_options"]["tunnel_protocol"], "HTTP2");
        tunnels += opened;
    }
    // Eight connections opened at once before the clock starts: still one proxy connection.
    let (v, w) = agreed(
        &target,
        &[
            "run",
            &url,
            "--tunnel-uri",
            &proxy.addr,
            "--tunnel-protocol",
            "http2",
            "--prefetch-connections",
            "--connections",
            "8",
            "--rps",
            "50",
            "--duration",
            "1",
        ],
    );
    assert_eq!(counter(global(&v), "upstream_cx_tunnel_total"), 8, "{v}");
    assert_eq!(w.count("/connections/accepted"), 8, "eight tunnels, eight at the target");
    tunnels += 8;
    let s = proxy.stats();
    assert_eq!(s["tunnels"], tunnels, "{s}");
    assert_eq!(s["h2_requests"], tunnels, "every CONNECT was an HTTP/2 stream: {s}");
    // One proxy connection per run (and curl's for the stats).
    assert_eq!(s["connections"], 4, "{s}");
}

/// Go's proxy over TLS (a fresh certificate in `dir`), refusing port 9, and the flags that
/// tunnel a 1 s run through it over HTTP/2, or over HTTP/3 (quic-go, and masque-go for
/// CONNECT-UDP) when `protocol` is "http3".
fn tls_go_proxy(dir: &std::path::Path, xconnect: bool, protocol: &str) -> (GoProxy, Vec<String>) {
    crate::support::nginx::make_certs(dir);
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let (cert, key) = (path("cert.pem"), path("key.pem"));
    let mut args = vec!["-cert", &cert, "-key", &key, "-deny", "9"];
    if protocol == "http3" {
        args.push("-h3");
    }
    let proxy = GoProxy::spawn(&args, xconnect);
    let via = [
        "--tunnel-uri",
        &format!("https://{}", proxy.addr),
        "--tunnel-ca",
        &path("ca.pem"),
        "--tunnel-protocol",
        protocol,
        "--duration",
        "1",
    ]
    .map(String::from);
    (proxy, via.to_vec())
}

/// TLS to Go's proxy (ALPN h2), and the target's TLS inside each HTTP/2 stream; a denied
/// destination is the proxy's 403, named.
#[test]
fn http2_connect_over_tls_with_tls_inside_and_a_refusal() {
    let dir = scratch("go-proxy-tls");
    let target = TlsServer::start(&["--tls"]);
    let (_proxy, via) = tls_go_proxy(&dir, true, "http2");
    let via: Vec<&str> = via.iter().map(String::as_str).collect();
    let url = target.url();
    let args = ["run", &url, "--tls-ca", &target.ca, "-p", "http2", "--rps", "50"];
    let (v, w) = agreed(&target, &[&args[..], &via].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{v}");
    // The proxy's handshake once, and the target's in each tunnel.
    assert_eq!(counter(g, "ssl.handshake"), 1 + counter(g, "upstream_cx_total"), "{v}");
    assert_eq!(w.count("/tls/handshakes"), counter(g, "upstream_cx_total"), "the target's");

    let denied = ["run", "http://127.0.0.1:9/", "--rps", "5", "--output-format", "json"];
    let out = run(&[&denied[..], &via].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.tunnel_failure") >= 1);
    assert_eq!(counter(&g, "upstream_cx_connect_fail"), 0);
    assert!(out.stderr.contains("(HTTP/2): the proxy answered 403 Forbidden"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// HTTP/3 load through CONNECT-UDP (RFC 9298) over HTTP/2 on Go's server, which shares no
/// code with Shrike (its capsules are encoded by hand from RFC 9297): exact counts at the
/// target, one UDP tunnel per QUIC connection, every tunnel a stream of one TLS connection to
/// the proxy; a denied destination is the proxy's 403, counted as a tunnel failure and named.
#[test]
fn http3_through_connect_udp_over_http2_on_gos_server() {
    let dir = scratch("go-proxy-udp");
    let target = TlsServer::start(&["--tls", "--http3"]);
    let (proxy, via) = tls_go_proxy(&dir, true, "http2");
    let via: Vec<&str> = via.iter().map(String::as_str).collect();
    let url = target.url();
    // 20 ms per answer at 200/s: several requests in flight, on a few QUIC connections.
    let h3 = ["run", &url, "--tls-ca", &target.ca, "-p", "http3", "--rps", "200"];
    let delay = ["--request-header", r#"x-nighthawk-test-server-config: {"static_delay":"0.02s"}"#];
    let streams = ["--max-concurrent-streams", "1"];
    let before = Witness::before(&target);
    let v = run_json_ok(&[&h3[..], &delay[..], &streams, &via].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{v}");
    let quic = counter(g, "upstream_cx_http3_total");
    assert!(quic >= 2, "several QUIC connections: {v}");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), quic, "a tunnel per QUIC connection");
    assert_eq!(statistic(g, "benchmark_http_client.tunnel_setup")["count"], quic.to_string());
    // The target counted the requests and the QUIC connections the run did.
    let w = Witness::since(&target, before);
    w.agrees(g);
    assert_eq!(w.count("/connections/http3"), quic, "{v}");
    let s = proxy.stats();
    assert_eq!(s["udp_tunnels"], quic, "{s}");
    assert_eq!(s["tunnels"], 0, "no TCP CONNECT: {s}");
    // Every QUIC packet of the run went through the proxy.
    assert!(s["datagrams_to_target"].as_u64().unwrap() >= 200, "{s}");
    // One TLS connection to the proxy carried every tunnel (and curl's for the stats).
    assert_eq!(s["connections"], 2, "{s}");

    let denied = ["run", "https://localhost:9/", "-p", "http3", "--rps", "5"];
    let json_out = ["--output-format", "json"];
    let out = run(&[&denied[..], &via, &json_out].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.tunnel_failure") >= 1, "{g}");
    assert_eq!(counter(&g, "upstream_cx_connect_fail"), 0, "{g}");
    assert!(
        out.stderr.contains("localhost:9 (CONNECT-UDP) through proxy")
            && out.stderr.contains("the proxy answered 403 Forbidden"),
        "{}",
        out.stderr
    );

    // A proxy that does not offer extended CONNECT: the failure says so.
    let plain_dir = scratch("go-proxy-no-xconnect");
    let (_plain, via) = tls_go_proxy(&plain_dir, false, "http2");
    let via: Vec<&str> = via.iter().map(String::as_str).collect();
    let out = run(&[&h3[..], &via, &json_out].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("does not offer extended CONNECT (RFC 8441"), "{}", out.stderr);
    assert!(counter(global(&json(&out)), "benchmark.tunnel_failure") >= 1);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&plain_dir);
}

/// `shrike serve --connect-proxy` over HTTP/2: `CONNECT` streams on h2c, HTTP/1.1 and HTTP/2
/// load inside them, with bodies larger than a stream's window both ways (the client's bytes
/// get their credit back only once written to the destination); a denied destination is the
/// proxy's 403, named and counted.
#[test]
fn shrike_serve_is_an_http2_connect_proxy() {
    let proxy = Server::start(&["--connect-proxy", "--stats-path", "/stats"]);
    let target = Server::start(&["--max-body-size", "8388608"]);
    let url = target.url("/");
    let mut tunnels = 0;
    for protocol in ["http1", "http2"] {
        // 20 ms per response at 100/s: a few requests in flight, so several connections.
        let config = r#"x-nighthawk-test-server-config: {"static_delay":"0.02s"}"#;
        let mut args = vec!["run", &url, "-p", protocol, "--tunnel-uri", &proxy.addr];
        args.extend(["--tunnel-protocol", "http2", "--rps", "100", "--duration", "1"]);
        args.extend(["--request-header", config]);
        args.extend(one_stream(protocol));
        let (v, w) = agreed(&target, &args);
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 100, "{protocol}: {v}");
        let dialled = w.count(&format!("/connections/{protocol}"));
        assert_eq!(dialled, counter(g, "upstream_cx_total"), "{protocol}: a connection per tunnel");
        let opened = counter(g, "upstream_cx_total");
        assert!(opened >= 2, "{protocol}: {opened} connections: {v}");
        assert_eq!(counter(g, "upstream_cx_tunnel_total"), opened, "{protocol}");
        tunnels += opened;
    }
    // 3 MB up and 3 MB down per request: three stream windows each way.
    let big = r#"x-nighthawk-test-server-config: {"response_body_size":3000000}"#;
    let (v, _) = agreed(
        &target,
        &[
            "run",
            &url,
            "--tunnel-uri",
            &proxy.addr,
            "--tunnel-protocol",
            "http2",
            "--request-body-size",
            "3000000",
            "--request-header",
            big,
            "--rps",
            "4",
            "--duration",
            "1",
            "--connections",
            "1",
        ],
    );
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 4, "{v}");
    assert!(counter(g, "upstream_cx_rx_bytes_total") > 12_000_000, "{v}");
    tunnels += counter(g, "upstream_cx_tunnel_total");
    let s = proxy.stats("/stats");
    assert_eq!(s["proxy"]["tunnels"], tunnels, "{s}");
    assert_eq!(s["proxy"]["failed"], 0, "{s}");
    assert!(s["proxy"]["bytes_to_destination"].as_u64().unwrap() > 12_000_000, "{s}");
    assert!(s["proxy"]["bytes_from_destination"].as_u64().unwrap() > 12_000_000, "{s}");
    assert_eq!(target.stats(WITNESS_STATS)["requests"], 204);

    let denied = ["run", "http://10.255.0.1:80/", "--tunnel-uri", &proxy.addr, "--rps", "5"];
    let via = ["--tunnel-protocol", "http2", "-d", "1", "--output-format", "json"];
    let out = run(&[&denied[..], &via].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(counter(global(&json(&out)), "benchmark.tunnel_failure") >= 1);
    assert!(out.stderr.contains("(HTTP/2): the proxy answered 403 Forbidden"), "{}", out.stderr);
    assert!(proxy.stats("/stats")["proxy"]["refused"].as_u64().unwrap() >= 1);
}

/// `shrike serve --tls --connect-proxy` as a CONNECT-UDP proxy (RFC 9298 over HTTP/2's
/// extended CONNECT) for HTTP/3 load: a UDP tunnel per QUIC connection, every QUIC packet a
/// datagram through it, exact counts at the target.
#[test]
fn shrike_serve_is_a_connect_udp_proxy_for_http3_load() {
    let target = TlsServer::start(&["--tls", "--http3"]);
    let proxy = TlsServer::start(&["--tls", "--connect-proxy", "--stats-path", "/stats"]);
    let url = target.url();
    let via = format!("https://localhost:{}", proxy.port);
    let h3 = ["run", &url, "--tls-ca", &target.ca, "-p", "http3", "--rps", "200", "-d", "1"];
    let tunnel = ["--tunnel-uri", &via, "--tunnel-ca", &proxy.ca, "--tunnel-protocol", "http2"];
    let delay = ["--request-header", r#"x-nighthawk-test-server-config: {"static_delay":"0.02s"}"#];
    let streams = ["--max-concurrent-streams", "1"];
    let (v, w) = agreed(&target, &[&h3[..], &tunnel, &delay, &streams].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{v}");
    let quic = counter(g, "upstream_cx_http3_total");
    assert!(quic >= 2, "several QUIC connections: {v}");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), quic, "a tunnel per QUIC connection");
    assert_eq!(w.count("/connections/http3"), quic, "the target's QUIC connections");
    let s = proxy.stats("/stats");
    let p = &s["proxy"];
    assert_eq!(p["udp_tunnels"], quic, "{s}");
    assert_eq!(p["tunnels"], quic, "{s}");
    assert!(p["datagrams_to_destination"].as_u64().unwrap() >= 200, "{s}");
    assert!(p["datagrams_from_destination"].as_u64().unwrap() >= 200, "{s}");
    assert_eq!(w.count("/requests"), 200);
}

/// Go's HTTP/2 client (golang.org/x/net, sharing no code with Shrike) through `shrike serve
/// --connect-proxy`, over h2c and TLS: `CONNECT` streams carrying HTTP/1.1 to a target, and
/// a CONNECT-UDP tunnel echoing datagrams (capsules encoded by Go's test code from the RFCs);
/// the proxy's counts match the client's exactly, and a denied destination is its 403.
#[test]
fn gos_http2_client_tunnels_through_shrike_serve() {
    let bin = go_build("connect_proxy", &["."], "the Go CONNECT peer").join("connect_proxy");
    let target = Server::start(&[]);
    let client = |via: &str, ca: &str, target: &str| {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["-via", via, "-ca", ca, "-target", target, "-tunnels", "10"]);
        cmd.args(["-requests", "10", "-datagrams", "50"]);
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = wait_limited(cmd.spawn().expect("spawn the Go client"), Duration::from_secs(60));
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout, out.stderr));
        (out.code(), v)
    };
    let h2c = Server::start(&["--connect-proxy", "--stats-path", "/stats"]);
    let tls = TlsServer::start(&["--tls", "--connect-proxy", "--stats-path", "/stats"]);
    let tls_via = format!("https://localhost:{}", tls.port);
    for (via, ca) in [(format!("http://{}", h2c.addr), ""), (tls_via.clone(), tls.ca.as_str())] {
        let before = Witness::before(&target);
        let (code, v) = client(&via, ca, &target.addr);
        assert_eq!(code, 0, "{via}: {v}");
        assert_eq!(v["tunnels"], 11, "{via}: {v}");
        assert_eq!(v["responses"], 100, "{via}: {v}");
        assert_eq!(v["datagrams_echoed"], 50, "{via}: {v}");
        // The target answered the Go client's 100 requests, over its 10 TCP tunnels.
        let w = Witness::since(&target, before);
        assert_eq!(w.count("/responses/2xx"), 100, "{via}");
        assert_eq!(w.count("/requests"), 100, "{via}");
        assert_eq!(w.count("/connections/http1"), 10, "{via}");
    }
    for s in [h2c.stats("/stats"), tls.stats("/stats")] {
        let p = &s["proxy"];
        assert_eq!(p["tunnels"], 11, "{s}");
        assert_eq!(p["udp_tunnels"], 1, "{s}");
        assert_eq!(p["datagrams_to_destination"], 50, "{s}");
        assert_eq!(p["datagrams_from_destination"], 50, "{s}");
        // Exactly what the client sent: its requests and the datagrams' payloads.
        let request = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", target.addr).len();
        assert_eq!(p["bytes_to_destination"], 100 * request + 50 * 1000, "{s}");
        assert!(p["bytes_from_destination"].as_u64().unwrap() > 100 * 100 + 50 * 1000, "{s}");
    }
    let (code, v) = client(&tls_via, &tls.ca, "10.255.0.1:80");
    assert_eq!(code, 1, "{v}");
    assert!(v["error"].as_str().unwrap().contains("403 Forbidden"), "{v}");
}

/// HTTP/1.1 and HTTP/2 load through CONNECT over HTTP/3 (RFC 9114 §4.4) on quic-go's server,
/// which shares no code with Shrike and refuses a CONNECT carrying `:scheme` or `:path`: exact
/// counts, every tunnel a stream of the worker's one QUIC connection to the proxy, the
/// target's TLS inside the tunnel, and a denied destination named as the proxy's 403.
#[test]
fn http3_connect_streams_share_one_quic_connection_on_quic_gos_server() {
    let dir = scratch("quic-go-proxy");
    let (proxy, via) = tls_go_proxy(&dir, true, "http3");
    let via: Vec<&str> = via.iter().map(String::as_str).collect();
    let target = Server::start(&["--static-delay", "20ms"]);
    let url = target.url("/");
    let mut tunnels = 0;
    for protocol in ["http1", "http2"] {
        // 20 ms per response at 200/s: about four requests in flight, so several connections.
        let mut args = vec!["run", &url, "-p", protocol, "--rps", "200"];
        args.extend(["--connections", "8"]);
        args.extend(one_stream(protocol));
        let (v, w) = agreed(&target, &[&args[..], &via].concat());
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{protocol}: {v}");
        let opened = counter(g, "upstream_cx_total");
        assert!(opened >= 2, "{protocol}: {opened} connections: {v}");
        assert_eq!(w.count(&format!("/connections/{protocol}")), opened, "{protocol}");
        assert_eq!(counter(g, "upstream_cx_tunnel_total"), opened, "{protocol}");
        assert_eq!(counter(g, "ssl.handshake"), 1, "the proxy's QUIC handshake only: {v}");
        assert_eq!(v["options"]["tunnel_options"]["tunnel_protocol"], "HTTP3");
        tunnels += opened;
    }
    // TLS to the target inside each tunnel.
    let tls_target = TlsServer::start(&["--tls"]);
    let tls_url = tls_target.url();
    let args = ["run", &tls_url, "--tls-ca", &tls_target.ca, "-p", "http2", "--rps", "50"];
    let (v, w) = agreed(&tls_target, &[&args[..], &via].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 50, "{v}");
    assert_eq!(counter(g, "ssl.handshake"), 1 + counter(g, "upstream_cx_total"), "{v}");
    assert_eq!(w.count("/tls/handshakes"), counter(g, "upstream_cx_total"), "the target's");
    tunnels += counter(g, "upstream_cx_tunnel_total");
    let s = proxy.stats();
    assert_eq!(s["tunnels"], tunnels, "{s}");
    assert_eq!(s["quic_connections"], 3, "one QUIC connection per run: {s}");

    let denied = ["run", "http://127.0.0.1:9/", "--rps", "5", "--output-format", "json"];
    let out = run(&[&denied[..], &via].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.tunnel_failure") >= 1, "{g}");
    assert_eq!(counter(&g, "upstream_cx_connect_fail"), 0, "{g}");
    assert!(out.stderr.contains("(HTTP/3): the proxy answered 403 Forbidden"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// HTTP/3 load through CONNECT-UDP over HTTP/3 (RFC 9298 over RFC 9220) on masque-go, quic-go's
/// MASQUE library, which shares no code with Shrike and carries UDP payloads only as HTTP/3
/// datagrams (QUIC DATAGRAM frames): exact counts at the target, a tunnel per QUIC connection
/// of the load, all on one QUIC connection to the proxy; a denied destination is its 403.
#[test]
fn http3_through_connect_udp_over_http3_on_masque_go() {
    let dir = scratch("masque-go");
    let (proxy, via) = tls_go_proxy(&dir, true, "http3");
    let via: Vec<&str> = via.iter().map(String::as_str).collect();
    let target = TlsServer::start(&["--tls", "--http3"]);
    let url = target.url();
    // 20 ms per answer at 200/s: several requests in flight, on a few QUIC connections.
    let h3 = ["run", &url, "--tls-ca", &target.ca, "-p", "http3", "--rps", "200"];
    let delay = ["--request-header", r#"x-nighthawk-test-server-config: {"static_delay":"0.02s"}"#];
    let streams = ["--max-concurrent-streams", "1"];
    let (v, w) = agreed(&target, &[&h3[..], &delay, &streams, &via].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{v}");
    let quic = counter(g, "upstream_cx_http3_total");
    assert!(quic >= 2, "several QUIC connections: {v}");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), quic, "a tunnel per QUIC connection");
    let s = proxy.stats();
    assert_eq!(s["udp_tunnels"], quic, "{s}");
    assert_eq!(s["quic_connections"], 1, "one QUIC connection to the proxy: {s}");
    assert_eq!(w.count("/requests"), 200);
    assert_eq!(w.count("/connections/http3"), quic, "the target's QUIC connections");

    let denied = ["run", "https://localhost:9/", "-p", "http3", "--rps", "5"];
    let out =
        run(&[&denied[..], &via, &["--output-format", "json"]].concat(), Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let g = global(&json(&out)).clone();
    assert!(counter(&g, "benchmark.tunnel_failure") >= 1, "{g}");
    assert!(
        out.stderr.contains("localhost:9 (CONNECT-UDP) through proxy")
            && out.stderr.contains("(HTTP/3): the proxy answered 403 Forbidden"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `shrike serve --tls --http3 --connect-proxy` as the proxy on its HTTP/3 port: HTTP/1.1 and
/// HTTP/2 load through `CONNECT` streams, HTTP/3 load through CONNECT-UDP with HTTP/3
/// datagrams, and masque-go's client (sharing no code with Shrike) echoing datagrams through
/// it; exact counts on both sides.
#[test]
fn shrike_serve_is_an_http3_connect_and_masque_proxy() {
    let proxy =
        TlsServer::start(&["--tls", "--http3", "--connect-proxy", "--stats-path", "/stats"]);
    let via_uri = format!("https://localhost:{}", proxy.port);
    let via = ["--tunnel-uri", &via_uri, "--tunnel-ca", &proxy.ca, "--tunnel-protocol", "http3"];
    let target = Server::start(&["--static-delay", "20ms"]);
    let url = target.url("/");
    let mut tunnels = 0;
    for protocol in ["http1", "http2"] {
        let mut args = vec!["run", &url, "-p", protocol, "--rps", "100", "--duration", "1"];
        args.extend(one_stream(protocol));
        let (v, w) = agreed(&target, &[&args[..], &via].concat());
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 100, "{protocol}: {v}");
        let opened = counter(g, "upstream_cx_total");
        assert!(opened >= 2, "{protocol}: {opened} connections: {v}");
        assert_eq!(w.count(&format!("/connections/{protocol}")), opened, "{protocol}");
        assert_eq!(counter(g, "upstream_cx_tunnel_total"), opened, "{protocol}");
        tunnels += opened;
    }
    let h3_target = TlsServer::start(&["--tls", "--http3"]);
    let h3_url = h3_target.url();
    let h3 = ["run", &h3_url, "--tls-ca", &h3_target.ca, "-p", "http3", "--rps", "200", "-d", "1"];
    let delay = ["--request-header", r#"x-nighthawk-test-server-config: {"static_delay":"0.02s"}"#];
    let streams = ["--max-concurrent-streams", "1"];
    let (v, w) = agreed(&h3_target, &[&h3[..], &delay, &streams, &via].concat());
    let g = global(&v);
    assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{v}");
    let quic = counter(g, "upstream_cx_http3_total");
    assert!(quic >= 2, "several QUIC connections: {v}");
    assert_eq!(counter(g, "upstream_cx_tunnel_total"), quic, "{v}");
    assert_eq!(w.count("/requests"), 200);
    assert_eq!(w.count("/connections/http3"), quic, "the target's QUIC connections");

    let bin = go_build("connect_proxy", &["."], "the Go peers").join("connect_proxy");
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["-masque", &via_uri, "-ca", &proxy.ca, "-datagrams", "50"]);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_limited(cmd.spawn().expect("spawn masque-go's client"), Duration::from_secs(60));
    assert_eq!(out.code(), 0, "{}{}", out.stdout, out.stderr);
    let m: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(m["datagrams_echoed"], 50, "{m}");

    let s = proxy.stats("/stats");
    let p = &s["proxy"];
    assert_eq!(p["tunnels"], tunnels + quic + 1, "{s}");
    assert_eq!(p["udp_tunnels"], quic + 1, "{s}");
    // Clients closing their tunnels (Shrike's reset their streams) are not failures.
    assert_eq!(p["failed"], 0, "{s}");
    // Every QUIC packet of the load, and masque-go's 50, went through as datagrams.
    assert!(p["datagrams_to_destination"].as_u64().unwrap() >= 200 + 50, "{s}");
    assert!(p["datagrams_from_destination"].as_u64().unwrap() >= 200 + 50, "{s}");
}

/// The wrong paths of an HTTP/3 tunnel, each failing the run (exit 1) with a message that
/// names the cause: no proxy on the UDP port, a server that is not a proxy (405, and no
/// extended CONNECT for CONNECT-UDP), and a destination outside `--proxy-allow` (403).
#[test]
fn http3_tunnel_wrong_paths_are_named() {
    let target = Server::start(&[]);
    let url = target.url("/");
    let fails = |args: &[&str], why: &[&str]| {
        let common = ["--rps", "5", "-d", "1", "--timeout", "1", "--tunnel-protocol", "http3"];
        let out = run(&[&["run"][..], args, &common].concat(), Duration::from_secs(30));
        assert_eq!(out.code(), 1, "{args:?}: {}", out.stderr);
        for w in why {
            assert!(out.stderr.contains(w), "{args:?}: no {w:?} in {}", out.stderr);
        }
    };
    let plain = TlsServer::start(&["--tls", "--http3"]);
    // A CA file that is none: a usage error naming the flag.
    let bad_ca = ["run", &url, "--tunnel-uri", "https://127.0.0.1:9", "--tunnel-ca", "/dev/null"];
    let out =
        run(&[&bad_ca[..], &["--tunnel-protocol", "http3"]].concat(), Duration::from_secs(20));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("--tunnel-ca: cannot read CA file /dev/null"), "{}", out.stderr);
    // Nothing listens on the proxy's UDP port: the QUIC handshake times out, named.
    let idle = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = idle.local_addr().unwrap().port().to_string();
    drop(idle);
    let nowhere = format!("https://127.0.0.1:{port}");
    fails(
        &[&url, "--tunnel-uri", &nowhere, "--tunnel-ca", &plain.ca],
        &[&format!("QUIC handshake with proxy 127.0.0.1:{port}"), "timed out"],
    );
    // A server that is not a proxy.
    let not_proxy = format!("https://localhost:{}", plain.port);
    let via = ["--tunnel-uri", &not_proxy, "--tunnel-ca", &plain.ca];
    fails(&[&[url.as_str()][..], &via].concat(), &["(HTTP/3): the proxy answered 405"]);
    let h3_target = TlsServer::start(&["--tls", "--http3"]);
    let h3_url = h3_target.url();
    let h3 = [h3_url.as_str(), "-p", "http3", "--tls-ca", &h3_target.ca];
    fails(&[&h3[..], &via].concat(), &["does not offer extended CONNECT (RFC 9220"]);
    // A proxy refusing the destination.
    let proxy = TlsServer::start(&["--tls", "--http3", "--connect-proxy"]);
    let proxy_uri = format!("https://localhost:{}", proxy.port);
    let via = ["--tunnel-uri", &proxy_uri, "--tunnel-ca", &proxy.ca];
    fails(&[&["http://10.255.0.1:80/"][..], &via].concat(), &["the proxy answered 403"]);
}

/// An HTTP/3 proxy that shuts down in the middle of a run: its tunnels end, the run does not
/// hang on them, and it fails naming the proxy it can no longer reach.
#[test]
fn a_run_through_an_http3_proxy_that_shuts_down_fails_naming_it() {
    let proxy = TlsServer::start(&["--tls", "--http3", "--connect-proxy"]);
    let target = Server::start(&[]);
    let via = format!("https://localhost:{}", proxy.port);
    let child = shrike()
        .args(["run", &target.url("/"), "--rps", "50", "-d", "4", "--timeout", "1"])
        .args(["--tunnel-uri", &via, "--tunnel-ca", &proxy.ca, "--tunnel-protocol", "http3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let pid = proxy.child.id().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let started = std::time::Instant::now();
    let out = wait_limited(child, Duration::from_secs(30));
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("proxy https://localhost:{}", proxy.port)),
        "{}",
        out.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(15), "the run hung on its tunnels");
}

/// One stream per HTTP/2 connection, so the load opens several connections (tunnels), as
/// HTTP/1.1's one request per connection does by itself (a stream limit is HTTP/2's alone).
fn one_stream(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "http2" => &["--max-concurrent-streams", "1"],
        _ => &[],
    }
}
