//! The config JSON: every field, merge rules, and error texts.
use super::*;

fn plan<'a>(config: &'a ServerConfig, values: &[&'a str]) -> Result<ResponsePlan<'a>, String> {
    ResponsePlan::from_config_headers(config, values.iter().map(|v| v.as_bytes()))
        .map_err(|e| e.to_string())
}

#[test]
fn defaults_without_header() {
    let config = ServerConfig::default();
    let p = ResponsePlan::defaults(&config);
    assert_eq!(p.status, 200);
    assert_eq!(p.body, Body::Filler(10));
    assert_eq!(p.headers, Headers::Default);
    assert!(p.delay.is_none());
}

#[test]
fn every_field() {
    let config = ServerConfig::default();
    let p = plan(
        &config,
        &[r#"{"response_body_size": 3, "response_status": 503, "static_delay": "250ms",
              "emit_previous_request_delta_in_response_header": "x-delta",
              "response_headers": [{"header": {"key": "x-a", "value": "1"}}]}"#],
    )
    .unwrap();
    assert_eq!(p.body, Body::Filler(3));
    assert_eq!(p.status, 503);
    assert_eq!(p.delay, Delay::Static(Duration::from_millis(250)));
    assert_eq!(p.delta_header.as_deref(), Some("x-delta"));
    let Headers::Custom(list) = p.headers else { panic!("expected custom headers") };
    assert_eq!(list.entries.len(), 2);
    assert!(list.date);
}

#[test]
fn later_headers_override_and_lists_concatenate() {
    let config = ServerConfig::default();
    let p = plan(
        &config,
        &[
            r#"{"response_body_size": 3, "static_delay": "1s",
                "response_headers": [{"header": {"key": "x-a", "value": "1"}}]}"#,
            r#"{"response_body_size": 7, "concurrency_based_linear_delay":
                  {"minimal_delay": "0.01s", "concurrency_delay_factor": "0.001s"},
                "response_headers": [{"header": {"key": "x-a", "value": "2"}, "append": true}]}"#,
        ],
    )
    .unwrap();
    assert_eq!(p.body, Body::Filler(7));
    let linear =
        Delay::Linear { minimal: Duration::from_millis(10), factor: Duration::from_millis(1) };
    assert_eq!(p.delay, linear);
    assert_eq!(linear.duration(5), Duration::from_millis(15));
    let Headers::Custom(list) = p.headers else { panic!("expected custom headers") };
    let xa: Vec<_> = list.entries.iter().filter(|(n, _)| n == "x-a").map(|(_, v)| &**v).collect();
    assert_eq!(xa, ["1", "2"]);
}

#[test]
fn fault_and_pacing_fields() {
    let config = ServerConfig::default();
    let p = plan(
        &config,
        &[r#"{"reset": {"scope": "connection", "probability": 0.25},
              "close_after_bytes": {"bytes": 5},
              "stall": {"duration": "0.000250s", "after_bytes": 2, "probability": 0.5},
              "status_faults": [{"status": 503, "probability": 0.2}, {"status": 429}],
              "response_chunk_size": 4, "response_chunk_delay": "1ms",
              "delay_distribution": {"weighted": [{"delay": "1ms", "weight": 90},
                                                  {"delay": "50ms", "weight": 10}]},
              "emit_server_stats_headers": true, "seed": 9}"#],
    );
    // 0.2 + 1 > 1.
    assert!(p.unwrap_err().contains("status_faults"));
    let p = plan(
        &config,
        &[r#"{"reset": {"scope": "connection", "probability": 0.25},
              "close_after_bytes": {"bytes": 5},
              "stall": {"duration": "0.000250s", "after_bytes": 2, "probability": 0.5},
              "status_faults": [{"status": 503, "probability": 0.2}],
              "response_chunk_size": 4, "response_chunk_delay": "1ms",
              "delay_distribution": {"exponential": {"mean": "2ms"}},
              "emit_server_stats_headers": true, "seed": 9}"#],
    )
    .unwrap();
    let f = &p.faults;
    assert_eq!(f.reset, Some(Reset { scope: ResetScope::Connection, probability: 0.25 }));
    assert_eq!(f.close_after_bytes, Some((5, 1.0)));
    let stall = Stall { duration: Duration::from_micros(250), after_bytes: Some(2) };
    assert_eq!(f.stall, Some((stall, 0.5)));
    assert_eq!(&f.status[..], &[(503, 0.2)]);
    assert_eq!(p.chunking, Some(Chunking { size: 4, delay: Duration::from_millis(1) }));
    assert_eq!(p.random_delay, Some(Distribution::Exponential { mean: Duration::from_millis(2) }));
    assert!(p.delay.is_none());
    assert!(p.stats_headers);
    assert_eq!(p.seed, Some(9));
}

#[test]
fn header_overrides_server_defaults_field_by_field() {
    let base = ServerConfig::builder()
        .defaults_json(
            r#"{"response_status": 503, "reset": {"probability": 0.5},
                "response_chunk_size": 8, "response_chunk_delay": "2ms",
                "concurrency_based_linear_delay": {"minimal_delay": "1ms"}}"#,
        )
        .build()
        .unwrap();
    let d = ResponsePlan::defaults(&base);
    assert_eq!(d.status, 503);
    assert_eq!(d.faults.reset.map(|r| r.probability), Some(0.5));
    // Only the named fields change: probability 0 turns the reset off, the chunk delay
    // keeps its default, and a static delay replaces the linear one.
    let p = plan(
        &base,
        &[r#"{"reset": {"probability": 0}, "response_chunk_size": 16, "static_delay": "3ms"}"#],
    )
    .unwrap();
    assert_eq!(p.status, 503);
    assert_eq!(p.faults.reset, None);
    assert_eq!(p.chunking, Some(Chunking { size: 16, delay: Duration::from_millis(2) }));
    assert_eq!(p.delay, Delay::Static(Duration::from_millis(3)));
    let p = plan(&base, &[r#"{"response_chunk_size": 0}"#]).unwrap();
    assert_eq!(p.chunking, None);
    let bad = ServerConfig::builder().defaults_json(r#"{"seed": -1}"#).build();
    assert!(matches!(bad, Err(ConfigError::InvalidDefaults(_))), "{bad:?}");
}

#[test]
fn echo_wins_over_size() {
    let config = ServerConfig::default();
    let p = plan(&config, &[r#"{"echo_request_headers": true, "response_body_size": 5}"#]);
    assert_eq!(p.unwrap().body, Body::Echo);
}

#[test]
fn nighthawk_yaml_flow_is_accepted() {
    let config = ServerConfig::default();
    let p = plan(&config, &[r#"{response_body_size:20, static_delay: "0s"}"#]).unwrap();
    assert_eq!(p.body, Body::Filler(20));
    assert!(p.delay.is_none());
}

#[test]
fn errors_name_the_problem() {
    let config = ServerConfig::default();
    let cases = [
        (r#"{"foo": 1}"#, "unknown field `foo`"),
        (r#"{"response_body_size": "#, "EOF"),
        (r#"[1]"#, "expected a JSON object"),
        (r#"5"#, "expected a JSON object"),
        (r#"{"response_body_size": [1]}"#, "invalid type: sequence"),
        (r#"{"static_delay": "soon"}"#, "invalid static_delay"),
        (r#"{"response_status": 42}"#, "response_status 42"),
        (r#"{"response_body_size": 4194305}"#, "exceeds the server's max body size"),
        (r#"{"response_body_size": -1}"#, "invalid value"),
        (
            r#"{"response_headers": [{"header": {"key": "a b", "value": "v"}}]}"#,
            "invalid header name",
        ),
        (r#"{"static_delay": "1s", "concurrency_based_linear_delay": {}}"#, "mutually exclusive"),
        (
            r#"{"concurrency_based_linear_delay": {"minimal_delay": "x"}}"#,
            "invalid concurrency_based_linear_delay.minimal_delay",
        ),
        (r#"{response_body_sise: 3}"#, "unknown field `response_body_sise`"),
        (r#"{"reset": {"probability": -0.1}}"#, "invalid reset.probability"),
        (r#"{"close_after_bytes": {}}"#, "missing field `bytes`"),
        (r#"{"stall": {"duration": "x"}}"#, "invalid stall.duration"),
        (r#"{"status_faults": [{"status": 600}]}"#, "invalid status_faults.status"),
        (r#"{"delay_distribution": {"normal": {}}}"#, "unknown variant `normal`"),
        (r#"{"delay_distribution": {"weighted": []}}"#, "delay_distribution.weighted"),
        (r#"{"static_delay": "1s", "delay_distribution": {"fixed": "1ms"}}"#, "mutually exclusive"),
    ];
    for (input, needle) in cases {
        let err = plan(&config, &[input]).unwrap_err();
        assert!(err.starts_with("invalid x-nighthawk-test-server-config: "), "{err}");
        assert!(err.contains(needle), "{input}: {err}");
    }
}

/// Mangled configs must produce errors, never panics.
#[test]
fn arbitrary_input_never_panics() {
    let config = ServerConfig::default();
    let valid = br#"{"response_body_size": 12, "response_headers": [{"header": {"key": "x-a", "value": "b"}, "append": true}], "static_delay": "1ms", "emit_previous_request_delta_in_response_header": "x-d", "response_status": 201, "echo_request_headers": false}"#;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    let alphabet = b"{}[]:,\"' \\0123456789abcxyz_-.smnu\xc3\xa9\x00\r";
    for _ in 0..20_000 {
        let mut input = valid.to_vec();
        for _ in 0..next(4) + 1 {
            let at = next(input.len() + 1);
            match next(3) {
                0 if at < input.len() => {
                    input.remove(at);
                }
                1 if at < input.len() => input[at] = alphabet[next(alphabet.len())],
                _ => input.insert(at, alphabet[next(alphabet.len())]),
            }
        }
        let _ = ResponsePlan::from_config_headers(&config, [&input[..]]);
        let _ = std::str::from_utf8(&input).map(relaxed::to_json);
    }
}
