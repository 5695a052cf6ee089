//! Every flag in Nighthawk's `nighthawk_client --help` (its usage synopsis, listed in
//! tests/fixtures/nighthawk-client-flags.txt) given to `shrike run` against its own test
//! server: each is accepted (the run completes) or refused with exit 2 and a message that says
//! why. A flag added to the list without a case here fails the test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;

/// What a flag must do.
enum Expect {
    /// The run completes (exit 0).
    Runs,
    /// Exit 2, with this text in the message.
    Refused(&'static str),
    /// Exit code and text (flags that run elsewhere, or print and exit).
    Exits(i32, &'static str),
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

#[test]
fn every_nighthawk_client_flag_is_accepted_or_refused_with_a_reason() {
    let plain = Server::start(&[]);
    let tls = TlsServer::start(&["--tls", "--http3"]);
    let url = plain.url("/");
    let https = tls.url();
    let ca = tls.ca.clone();
    let endpoint = plain.addr.clone();
    let tls_endpoint = format!("localhost:{}", tls.port);
    let inline = "{name:\"nighthawk.in-line-options-list-request-source-plugin\",typed_config:{\"@type\":\"type.googleapis.com/nighthawk.request_source.InLineOptionsListRequestSourceConfig\",options_list:{options:[{request_method:\"GET\",request_headers:[{header:{key:\"x-a\",value:\"1\"}}]}]}}}".to_string();
    let transport = format!("{{name:\"envoy.transport_sockets.tls\",typed_config:{{\"@type\":\"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\",sni:\"localhost\",common_tls_context:{{validation_context:{{trusted_ca:{{filename:\"{ca}\"}}}}}}}}}}");
    let tls_context = format!(
        "{{common_tls_context:{{validation_context:{{trusted_ca:{{filename:\"{ca}\"}}}}}}}}"
    );

    // Each case: the flag, the arguments of the whole command (without the common duration
    // and rate unless the case sets its own), and what must happen.
    let runs = |args: Vec<String>| (args, Expect::Runs);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let plain_with = |v: &[&str]| {
        let mut a = s(v);
        a.push(url.clone());
        a
    };
    let https_with = |v: &[&str]| {
        let mut a = s(v);
        a.extend([https.clone(), "--tls-ca".into(), ca.clone()]);
        a
    };
    let cases: Vec<(&str, (Vec<String>, Expect))> = vec![
        (
            "--user-defined-plugin-config",
            (plain_with(&["--user-defined-plugin-config", "{name:\"x\"}"]), Expect::Refused("not implemented")),
        ),
        ("--latency-response-header-name", runs(plain_with(&["--latency-response-header-name", "x-lat"]))),
        ("--stats-flush-interval-duration", runs(plain_with(&["--stats-flush-interval-duration", "1.000000001s"]))),
        ("--stats-flush-interval", runs(plain_with(&["--stats-flush-interval", "5"]))),
        ("--stats-sinks", runs(plain_with(&["--stats-sinks", "statsd://127.0.0.1:9"]))),
        (
            "--no-duration",
            runs(plain_with(&["--no-duration", "--termination-predicate", "benchmark.http_2xx:4"])),
        ),
        ("--simple-warmup", runs(plain_with(&["--simple-warmup"]))),
        ("--request-source-plugin-config", runs(plain_with(&["--request-source-plugin-config", &inline]))),
        (
            "--request-source",
            // Nothing serves there: accepted, and the run fails saying why.
            (plain_with(&["--request-source", "grpc://127.0.0.1:1"]), Expect::Exits(1, "request source grpc://127.0.0.1:1")),
        ),
        ("--label", runs(plain_with(&["--label", "a", "--label", "b"]))),
        (
            "--multi-target-use-https",
            runs(s(&["--multi-target-use-https", "--multi-target-endpoint", &tls_endpoint, "--multi-target-path", "/", "--tls-ca", &ca])),
        ),
        ("--multi-target-path", runs(s(&["--multi-target-endpoint", &endpoint, "--multi-target-path", "/x"]))),
        ("--multi-target-endpoint", runs(s(&["--multi-target-endpoint", &endpoint, "--multi-target-endpoint", &endpoint]))),
        (
            "--experimental-h2-use-multiple-connections",
            runs(plain_with(&["--experimental-h2-use-multiple-connections", "-p", "http2"])),
        ),
        (
            "--nighthawk-service",
            (plain_with(&["--nighthawk-service", "grpc://127.0.0.1:1"]), Expect::Exits(1, "connecting to 127.0.0.1:1")),
        ),
        ("--jitter-uniform", runs(plain_with(&["--jitter-uniform", ".00001s"]))),
        ("--open-loop", runs(plain_with(&["--open-loop"]))),
        (
            "--experimental-h1-connection-reuse-strategy",
            runs(plain_with(&["--experimental-h1-connection-reuse-strategy", "lru"])),
        ),
        ("--no-default-failure-predicates", runs(plain_with(&["--no-default-failure-predicates"]))),
        ("--failure-predicate", runs(plain_with(&["--failure-predicate", "benchmark.http_5xx:4294967295"]))),
        ("--termination-predicate", runs(plain_with(&["--termination-predicate", "benchmark.http_2xx:10"]))),
        (
            "--trace",
            runs(plain_with(&["--trace", "zipkin://127.0.0.1:9411/api/v2/spans"])),
        ),
        ("--sequencer-idle-strategy", runs(plain_with(&["--sequencer-idle-strategy", "sleep"]))),
        ("--max-concurrent-streams", runs(plain_with(&["--max-concurrent-streams", "1", "-p", "http2"]))),
        ("--max-requests-per-connection", runs(plain_with(&["--max-requests-per-connection", "2"]))),
        ("--max-active-requests", runs(plain_with(&["--max-active-requests", "5", "-p", "http2"]))),
        ("--max-pending-requests", runs(plain_with(&["--max-pending-requests", "2"]))),
        ("--transport-socket", runs(s(&["--transport-socket", &transport, &https]))),
        (
            "--upstream-bind-config",
            runs(plain_with(&["--upstream-bind-config", "{source_address:{address:\"127.0.0.1\",port_value:0}}"])),
        ),
        ("--tls-context", runs(s(&["--tls-context", &tls_context, &https]))),
        ("--request-body-size", runs(plain_with(&["--request-body-size", "10", "--request-method", "POST"]))),
        ("--request-header", runs(plain_with(&["--request-header", "x-a: 1"]))),
        ("--request-method", runs(plain_with(&["--request-method", "PUT"]))),
        ("--address-family", runs(plain_with(&["--address-family", "v4"]))),
        ("--burst-size", runs(plain_with(&["--burst-size", "2"]))),
        ("--prefetch-connections", runs(plain_with(&["--prefetch-connections"]))),
        ("--output-format", runs(plain_with(&["--output-format", "yaml"]))),
        ("-v", runs(plain_with(&["-v", "warn"]))),
        ("--verbosity", runs(plain_with(&["--verbosity", "error"]))),
        ("--concurrency", runs(plain_with(&["--concurrency", "auto"]))),
        (
            "--http3-protocol-options",
            runs(https_with(&[
                "-p",
                "http3",
                "--http3-protocol-options",
                "{quic_protocol_options:{max_concurrent_streams:1,initial_stream_window_size:65536,initial_connection_window_size:131072}}",
            ])),
        ),
        ("-p", runs(plain_with(&["-p", "http2"]))),
        ("--protocol", runs(https_with(&["--protocol", "http3"]))),
        ("--h2", runs(plain_with(&["--h2"]))),
        ("--timeout", runs(plain_with(&["--timeout", "5"]))),
        ("--duration", runs(plain_with(&["--duration", "1"]))),
        ("--connections", runs(plain_with(&["--connections", "2"]))),
        ("--rps", runs(plain_with(&["--rps", "40"]))),
        // tclap's `--`: what follows is not a flag (here, the URI).
        ("--ignore_rest", runs(s(&["--duration", "300ms", "--rps", "20", "--ignore_rest", &url]))),
        ("--version", (s(&["--version"]), Expect::Exits(0, env!("CARGO_PKG_VERSION")))),
        ("-h", (s(&["-h"]), Expect::Exits(0, "Usage"))),
        ("--help", (s(&["--help"]), Expect::Exits(0, "Usage"))),
    ];

    let covered: BTreeSet<String> = cases.iter().map(|(f, _)| f.to_string()).collect();
    let missing: Vec<_> = nighthawk_flags().difference(&covered).cloned().collect();
    assert!(missing.is_empty(), "Nighthawk flags with no case here: {missing:?}");

    let mut problems = Vec::new();
    for (flag, (args, expect)) in &cases {
        let mut all = vec!["run".to_string()];
        all.extend(args.iter().cloned());
        let own_duration = args.iter().any(|a| a == "--duration" || a == "--no-duration");
        if !own_duration && !matches!(expect, Expect::Exits(0, _)) {
            all.extend(s(&["--duration", "300ms"]));
        }
        if !args.iter().any(|a| a == "--rps") && !matches!(expect, Expect::Exits(0, _)) {
            all.extend(s(&["--rps", "20"]));
        }
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = run(&refs, Duration::from_secs(30));
        let ok = match expect {
            Expect::Runs => out.code() == 0,
            Expect::Refused(why) => out.code() == 2 && out.stderr.contains(why),
            Expect::Exits(code, text) => {
                out.code() == *code && (out.stdout.contains(text) || out.stderr.contains(text))
            }
        };
        if !ok {
            problems.push(format!(
                "{flag}: exit {} for {:?}\nstderr: {}",
                out.code(),
                &all[1..],
                out.stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
