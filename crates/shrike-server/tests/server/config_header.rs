//! Per-request behaviour from `x-nighthawk-test-server-config`, field by field, and the 500s
//! that bad configurations get (after which the connection keeps working).

use std::time::{Duration, Instant};

use crate::common::{Client, TestServer};
use shrike_server::ServerConfig;

fn server() -> TestServer {
    TestServer::start(ServerConfig::default())
}

#[test]
fn response_body_size_is_exact() {
    let server = server();
    let mut client = server.connect();
    for size in [0, 1, 4096, 16 * 1024, 16 * 1024 + 1, 200_000] {
        client.get_with_config(&format!(r#"{{"response_body_size": {size}}}"#)).assert_filler(size);
    }
}

#[test]
fn response_headers_are_added_replaced_and_appended() {
    let server = TestServer::start(
        ServerConfig::builder()
            .response_header("x-default", "server")
            .response_header("x-keep", "kept")
            .build()
            .expect("config"),
    );
    let mut client = server.connect();
    let r = client.get_with_config(
        r#"{"response_headers": [
            {"header": {"key": "x-default", "value": "request"}},
            {"header": {"key": "x-new", "value": "1"}},
            {"header": {"key": "x-new", "value": "2"}, "append": true},
            {"header": {"key": "server", "value": "not-shrike"}},
            {"header": {"key": "x-replaced", "value": "old"}},
            {"header": {"key": "x-replaced", "value": "new"}, "append": false}
        ]}"#,
    );
    r.assert_filler(10);
    assert_eq!(r.all("x-default"), ["request"]);
    assert_eq!(r.all("x-keep"), ["kept"]);
    assert_eq!(r.all("x-new"), ["1", "2"]);
    assert_eq!(r.all("server"), ["not-shrike"]);
    assert_eq!(r.all("x-replaced"), ["new"]);
    assert!(r.header("date").is_some());

    // The next request without the header gets the server defaults back.
    let r = client.get("");
    assert_eq!(r.all("x-default"), ["server"]);
    assert_eq!(r.all("server"), ["shrike"]);
    assert_eq!(r.header("x-new"), None);
}

#[test]
fn echo_request_headers_returns_them_as_the_body() {
    let server = server();
    let mut client = server.connect();
    let r = client.get(
        "X-Custom: hello world\r\n\
         x-nighthawk-test-server-config: {\"echo_request_headers\": true}\r\n",
    );
    assert_eq!(r.status, 200);
    let body = r.text();
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(
        lines,
        [
            "host: test",
            "X-Custom: hello world",
            r#"x-nighthawk-test-server-config: {"echo_request_headers": true}"#,
        ]
    );
    assert_eq!(r.header("content-length"), Some(body.len().to_string().as_str()));
}

fn timed(client: &mut Client, json: &str) -> Duration {
    let started = Instant::now();
    client.get_with_config(json).assert_filler(10);
    started.elapsed()
}

#[test]
fn static_delay_holds_the_response() {
    let server = server();
    let mut client = server.connect();
    let elapsed = timed(&mut client, r#"{"static_delay": "0.2s"}"#);
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    let elapsed = timed(&mut client, r#"{"static_delay": "150ms"}"#);
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
}

#[test]
fn server_default_delay_can_be_cancelled_per_request() {
    let server = TestServer::start(
        ServerConfig::builder().static_delay(Duration::from_secs(1)).build().expect("config"),
    );
    let mut client = server.connect();
    let elapsed = timed(&mut client, "{}");
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    // A zero delay replaces the default rather than adding to it.
    let elapsed = timed(&mut client, r#"{"static_delay": "0s"}"#);
    assert!(elapsed < Duration::from_millis(800), "{elapsed:?}");
}

#[test]
fn concurrency_based_linear_delay_grows_with_active_requests() {
    let server = server();
    let config = r#"{"concurrency_based_linear_delay":
        {"minimal_delay": "0.05s", "concurrency_delay_factor": "0.05s"}}"#;
    // Alone: minimal + 1 × factor.
    let alone = timed(&mut server.connect(), config);
    assert!(alone >= Duration::from_millis(100), "{alone:?}");

    // Three at once: the last to arrive sees three active requests.
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let addr = server.addr;
            std::thread::spawn(move || timed(&mut Client::connect(addr), config))
        })
        .collect();
    let elapsed: Vec<Duration> = threads.into_iter().map(|t| t.join().expect("client")).collect();
    let longest = elapsed.iter().max().copied().unwrap_or_default();
    assert!(longest >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed.iter().all(|e| *e >= Duration::from_millis(100)), "{elapsed:?}");
}

#[test]
fn previous_request_delta_header() {
    let server = server();
    let mut client = server.connect();
    let config = r#"{"emit_previous_request_delta_in_response_header": "x-delta"}"#;
    // Like Nighthawk, the server's first request has no predecessor and gets no header.
    let first = client.get_with_config(config);
    assert_eq!(first.header("x-delta"), None);
    std::thread::sleep(Duration::from_millis(50));
    let second = client.get_with_config(config);
    let delta: u64 =
        second.header("x-delta").expect("delta header").parse().expect("numeric delta");
    assert!(delta >= 50_000_000, "{delta}");
    // Requests without the config header still move the reference point.
    std::thread::sleep(Duration::from_millis(100));
    client.get("").assert_filler(10);
    let third = client.get_with_config(config);
    let delta: u64 = third.header("x-delta").expect("delta header").parse().expect("numeric");
    assert!(delta < 100_000_000, "{delta}");
}

#[test]
fn response_status_is_applied() {
    let server = server();
    let mut client = server.connect();
    for status in [201, 404, 503, 599] {
        let r = client.get_with_config(&format!(r#"{{"response_status": {status}}}"#));
        assert_eq!(r.status, status);
        assert_eq!(r.body.len(), 10);
    }
}

#[test]
fn multiple_config_headers_merge_in_order() {
    let server = server();
    let mut client = server.connect();
    let r = client.get(
        "x-nighthawk-test-server-config: {\"response_body_size\": 3, \"response_status\": 202}\r\n\
         x-nighthawk-test-server-config: {\"response_body_size\": 5}\r\n",
    );
    assert_eq!(r.status, 202);
    assert_eq!(r.body, b"aaaaa");
}

#[test]
fn nighthawk_documentation_syntax_is_accepted() {
    let server = server();
    let mut client = server.connect();
    client.get_with_config(r#"{response_body_size:20, static_delay: "0s"}"#).assert_filler(20);
}

#[test]
fn bad_configs_get_500_naming_the_problem_and_keep_the_connection() {
    let server = server();
    let mut client = server.connect();
    let cases = [
        (r#"{"response_body_size": "#, "EOF while parsing"),
        (r#"{"foo": 1}"#, "unknown field `foo`"),
        (r#"{"static_delay": "soon"}"#, "invalid static_delay"),
        (r#"{"response_body_size": 4194305}"#, "exceeds the server's max body size"),
        (r#"{"response_body_size": 18446744073709551615}"#, "exceeds"),
        (r#"{"response_status": 42}"#, "response_status 42 is out of range"),
        (
            r#"{"response_headers": [{"header": {"key": "content-length", "value": "1"}}]}"#,
            "managed by the server",
        ),
        (r#"[]"#, "expected a JSON object"),
    ];
    for (json, needle) in cases {
        let r = client.get_with_config(json);
        assert_eq!(r.status, 500, "{json}");
        let text = r.text();
        assert!(text.starts_with("invalid x-nighthawk-test-server-config: "), "{text}");
        assert!(text.contains(needle), "{json}: {text}");
        assert_eq!(r.header("connection"), None, "a bad config must not close the connection");
        client.get("").assert_filler(10);
    }
}

#[test]
fn works_on_a_multi_thread_runtime() {
    let server = TestServer::start_multi(ServerConfig::default(), 2);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let mut client = Client::connect(addr);
                for size in 0..50 {
                    let json = format!(r#"{{"response_body_size": {}}}"#, size + i);
                    client.get_with_config(&json).assert_filler(size + i);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
}
