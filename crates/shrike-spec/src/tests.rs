//! The spec's two ways in (JSON and typed edits) agree, and each says what is wrong by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use shrike_stats::Counter;

use crate::names::{self, flag_for};
use crate::{Predicate, PredicateKind, Protocol, RateSpec, RunSpec, SpecEdit};

fn spec(v: serde_json::Value) -> RunSpec {
    RunSpec::from_json(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn specs() -> Vec<RunSpec> {
    vec![
        spec(json!({"uri": "http://127.0.0.1:8080/a"})),
        spec(json!({"uri": "https://localhost:8443/", "protocol": "http2", "concurrency": "3",
            "connections": 7, "requests_per_second": 120.5, "ramp_duration": "2s",
            "duration": "9s", "tls": {"insecure": true, "min_version": "1.3"},
            "request_options": {"request_method": "post", "request_body_size": 10,
                "request_headers": ["x-a: 1"]},
            "failure_predicates": {"benchmark.http_5xx": "7"},
            "termination_predicates": ["upstream_rq_total:100"], "labels": ["a", "b"]})),
        spec(json!({"multi_target_endpoints": ["127.0.0.1:1", "[::1]:2"],
            "multi_target_path": "/p", "stages": "1s:10,2s:0", "open_loop": true,
            "no_default_failure_predicates": true, "shard": "1/3",
            "stats_interval": "250ms", "statsd": ["127.0.0.1:8125"]})),
        spec(json!({"uri": "http://127.0.0.1/", "requests_per_second": "max",
            "read_coalesce": "50us", "total_requests": "1000", "no_duration": true,
            "max_concurrent_streams": 1, "max_active_requests": 9})),
        spec(json!({"uri": "https://127.0.0.1/", "protocol": "http3",
            "http3_protocol_options": {"quic_protocol_options": {"max_concurrent_streams": 4,
                "initial_stream_window_size": 65536}}})),
        // Nighthawk's proto3 JSON of the plugin: camelCase, a Duration as its message.
        spec(json!({"uri": "http://127.0.0.1/", "requests_per_second": 50, "duration": "20s",
            "rateLimiterPluginConfig": {"name": "nighthawk.linear-ramping-rate-limiter-plugin",
                "typedConfig": {"@type":
                    "type.googleapis.com/nighthawk.rate_limiter.LinearRampingRateLimiterConfig",
                    "rampTime": {"seconds": "5", "nanos": 500000000}}}})),
    ]
}

#[test]
fn the_linear_ramping_plugin_is_a_ramp_written_back_as_the_plugin() {
    let s = specs().pop().unwrap();
    let ramp_time = Duration::from_millis(5500);
    let rate = crate::Rate::try_new(50.0).unwrap();
    assert_eq!(*s.rate(), RateSpec::LinearRamp { rate, ramp_time });
    assert_eq!(s.rate().plan(), crate::RatePlan::ramp(rate, ramp_time));
    let written = s.to_json();
    assert_eq!(written["rate_limiter_plugin_config"]["typed_config"]["ramp_time"], "5.500s");
    assert!(written["ramp_duration"].is_null(), "{written}");
    // The same ramp asked for Shrike's way is Shrike's ramp, not the plugin.
    let own = spec(json!({"uri": "http://127.0.0.1/", "requests_per_second": 50,
        "duration": "20s", "ramp_duration": "5.5s"}));
    assert_eq!(own.rate().plan(), s.rate().plan());
    assert!(own.to_json()["rate_limiter_plugin_config"].is_null());
}

#[test]
fn an_edit_that_changes_nothing_gives_the_spec_back() {
    for s in specs() {
        assert_eq!(s.edit().build().unwrap(), s);
        assert_eq!(RunSpec::from_json(&s.to_json()).unwrap(), s, "{}", s.to_json());
    }
}

#[test]
fn lower_camel_case_reads_as_its_snake_case_twin() {
    let snake = json!({"uri": "http://127.0.0.1/", "requests_per_second": 20,
        "max_pending_requests": 3, "experimental_h1_connection_reuse_strategy": "lru",
        "request_options": {"request_method": "PUT", "request_body_size": 4},
        "tls": {"session_resumption": true}, "no_default_failure_predicates": true,
        "stats_flush_interval": "2s", "multi_target_use_https": false});
    let camel = json!({"uri": "http://127.0.0.1/", "requestsPerSecond": 20,
        "maxPendingRequests": 3, "experimentalH1ConnectionReuseStrategy": "lru",
        "requestOptions": {"requestMethod": "PUT", "requestBodySize": 4},
        "tls": {"sessionResumption": true}, "noDefaultFailurePredicates": true,
        "statsFlushInterval": "2s", "multiTargetUseHttps": false});
    let (a, b) = (spec(snake), spec(camel));
    assert_eq!(a, b);
    // Written in proto field names, whichever way it was read.
    assert_eq!(a.to_json(), b.to_json());
    assert!(b.to_json().get("requests_per_second").is_some());
    assert!(b.to_json().get("requestsPerSecond").is_none());
}

#[test]
fn an_option_given_in_both_cases_is_refused_by_name() {
    let e = RunSpec::from_json(&json!({"uri": "http://127.0.0.1/",
        "requests_per_second": 1, "requestsPerSecond": 2}))
    .unwrap_err();
    assert_eq!(e.field, "requests_per_second");
    assert!(e.to_string().contains("given twice, also as requestsPerSecond"), "{e}");
    let e = RunSpec::from_json(&json!({"uri": "http://127.0.0.1/", "requestz": 1})).unwrap_err();
    assert_eq!(e.to_string(), "requestz is not an option Shrike knows (misspelt?)");
}

#[test]
fn a_rate_replaces_stages_and_stages_replace_rate_ramp_and_duration() {
    let staged = spec(json!({"uri": "http://127.0.0.1/", "stages": "1s:10,3s:20"}));
    assert_eq!(staged.duration(), Some(Duration::from_secs(4)));
    let paced = staged.edit().rate(50.0).build().unwrap();
    assert!(matches!(paced.rate(), RateSpec::Rps { ramp: None, .. }));
    assert_eq!(paced.duration(), Some(Duration::from_secs(4)), "the stages' length stays");
    let e = staged.edit().duration(Duration::from_secs(9)).build().unwrap_err();
    assert_eq!(
        e.render(&flag_for),
        "--duration cannot be used with --stages (the run lasts the sum of the stages)"
    );
    let ramped = paced.edit().ramp(Some(Duration::from_secs(1))).build().unwrap();
    let restaged = ramped
        .edit()
        .stages(vec![crate::Stage { duration: Duration::from_secs(2), target: 5.0 }])
        .build()
        .unwrap();
    assert_eq!(restaged.duration(), Some(Duration::from_secs(2)));
    assert!(matches!(restaged.rate(), RateSpec::Stages(_)));
    let e = paced.edit().unpaced().ramp(Some(Duration::from_secs(1))).build().unwrap_err();
    assert_eq!(e.field, "ramp_duration");
}

#[test]
fn typed_edits_are_validated_and_errors_name_the_field_or_its_flag() {
    let s = spec(json!({"uri": "http://127.0.0.1/"}));
    let e = s.edit().connections(0).build().unwrap_err();
    assert_eq!(e.to_string(), "connections must be at least 1 (and at most 4294967295)");
    assert_eq!(e.render(&flag_for), "--connections must be at least 1 (and at most 4294967295)");
    let e = s.edit().unpaced().open_loop(true).build().unwrap_err();
    assert_eq!(
        e.render(&flag_for),
        "--open-loop needs a rate: --rps \"max\" is a closed loop (a request goes out when a \
         connection frees up)"
    );
    let e = s.edit().transport_socket("{name: x}").build().unwrap_err();
    assert!(e.field.starts_with("transport_socket"), "{e}");
    let e = s.edit().request_headers(&["no colon".into()]).build().unwrap_err();
    assert_eq!(e.field, "request_options.request_headers");
    assert_eq!(
        s.edit().timeout(Duration::ZERO).build().unwrap_err().render(&flag_for),
        "--timeout must be greater than 0"
    );
    let e = s.edit().protocol(Protocol::Http3).build().unwrap_err();
    assert_eq!(e.field, "protocol");
}

#[test]
fn predicates_written_out_turn_off_with_the_defaults() {
    // A stored result lists the defaults among its failure predicates.
    let stored = spec(json!({"uri": "http://127.0.0.1/",
        "failure_predicates": {"benchmark.http_5xx": "3"}}))
    .to_json();
    let s = RunSpec::from_json(&stored).unwrap();
    let off = s.edit().no_default_failure_predicates(true).build().unwrap();
    let failures: Vec<&Predicate> =
        off.predicates().iter().filter(|p| p.kind == PredicateKind::Failure).collect();
    assert_eq!(failures.len(), 1, "only the user's: {failures:?}");
    assert_eq!((failures[0].counter, failures[0].threshold), (Counter::Http5xx, 3));
    assert!(s.edit().no_predicates().build().unwrap().predicates().is_empty());
}

#[test]
fn an_edit_remembers_what_it_set() {
    let e = SpecEdit::new().url("http://127.0.0.1/").connections(3).rate(2.0);
    let names: Vec<&str> = e.touched().iter().map(|o| o.name).collect();
    assert_eq!(names, ["uri", "connections", "requests_per_second"]);
    assert_eq!(names::find("connections").and_then(|o| o.flag), Some("--connections"));
}
