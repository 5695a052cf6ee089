//! Sub-millisecond and low-millisecond timing through the real binaries, in the `timing` test
//! binary and run one at a time.
//!
//! A median under a millisecond only means something when the client and server have the CPU:
//! on a 2-core machine, other load tests running alongside would delay wake-ups by more than
//! the bound and fail these for reasons unrelated to Shrike. Cargo runs test binaries one after
//! another, so the `timing` binary keeps the `integration` binary's tests away, and
//! [`alone`] keeps this binary's tests from overlapping each other. Add any new tight timing
//! check here, holding [`alone`] for its whole run.

use crate::support::*;

const CONFIG: &str = "x-nighthawk-test-server-config";

#[test]
fn a_250us_static_delay_is_honoured_below_a_millisecond() {
    let _alone = alone();
    let server = Server::start(&[]);
    // The median service time at a static delay, against the same run without one: what
    // the delay adds. The undelayed exchange alone takes 0.2–0.45 ms on a 2-core VM (each
    // side wakes from idle for every message, and debug builds add more on HTTP/2), so an
    // absolute bound under 1 ms measured the machine as much as the delay.
    let median = |protocol: &str, delay: &str| {
        let header = format!(r#"{CONFIG}: {{"static_delay": "{delay}"}}"#);
        let v = run_json_ok(&[
            "run",
            &server.url("/"),
            "--protocol",
            protocol,
            "--request-header",
            &header,
            "--rps",
            "200",
            "--duration",
            "1",
            "--connections",
            "1",
        ]);
        let g = global(&v);
        assert_eq!(counter(g, "benchmark.http_2xx"), 200, "{protocol} {delay}");
        let service = statistic(g, "benchmark_http_client.request_to_response");
        (secs(&service["min"]), percentile_secs(service, 0.5))
    };
    for protocol in ["http1", "http2"] {
        let (_, base) = median(protocol, "0s");
        let (min, delayed) = median(protocol, "0.000250s");
        assert!(min >= 0.000250, "{protocol}: min {min}");
        // tokio's 1 ms timer wheel ends a 250 µs sleep at the next millisecond tick: 0.25–1.25
        // ms later, about 0.75 ms at the median. The server's precise timer adds 0.3–0.35 ms.
        let added = delayed - base;
        assert!(added < 0.0006, "{protocol}: median {delayed} against {base} undelayed");
    }
}

#[test]
fn sends_leave_on_time_at_a_fixed_rate() {
    let _alone = alone();
    let server = Server::start(&[]);
    let v = run_json_ok(&[
        "run",
        &server.url("/"),
        "--rps",
        "100",
        "--duration",
        "2",
        "--concurrency",
        "2",
        "--connections",
        "4",
    ]);
    // The release timer keeps lateness small on an idle server: p50 under 2 ms (tokio's 1 ms
    // timer wheel alone would put it near 0.5–1 ms).
    let lateness = statistic(global(&v), "sequencer.send_lateness");
    assert!(percentile_secs(lateness, 0.5) < 0.002, "{lateness}");
}
