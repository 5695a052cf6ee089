//! `shrike run --spec FILE`: a stored result (or a spec file) re-runs exactly the options it
//! recorded, flags given on the command line override them, and a bad spec names the field.

use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(30);

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("shrike-spec-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

/// [`run_json_ok`] against `server`, whose own counts must agree with the result's (every
/// request sent, every status class).
fn agreed(server: &Server, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--output-format", "json"]);
    let (out, w) = run_witnessed(server, &all, LIMIT);
    assert_eq!(out.code(), 0, "args {args:?}\nstderr:\n{}", out.stderr);
    let v = json(&out);
    w.agrees(global(&v));
    v
}

#[test]
fn a_stored_result_re_runs_with_the_same_options() {
    let server = Server::start(&[]);
    let url = server.url("/spec");
    let first = agreed(
        &server,
        &[
            "run",
            &url,
            "--rps",
            "40",
            "--duration",
            "0.5",
            "--connections",
            "3",
            "--request-header",
            "x-a: 1",
            "--label",
            "again",
        ],
    );
    assert_eq!(counter(global(&first), "benchmark.http_2xx"), 20);
    let dir = tmpdir("rerun");
    let stored = write(&dir, "first.json", &first.to_string());

    let second = agreed(&server, &["run", "--spec", &stored]);
    assert_eq!(
        options_but_id(&second),
        options_but_id(&first),
        "the re-run records the same options"
    );
    assert_ne!(second["options"]["execution_id"], first["options"]["execution_id"], "a new run");
    assert_eq!(counter(global(&second), "benchmark.http_2xx"), 20, "and sends the same load");

    // A flag overrides the stored value; everything else stays as recorded.
    let third = agreed(&server, &["run", "--spec", &stored, "--connections", "2", "--rps", "20"]);
    assert_eq!(third["options"]["connections"], 2);
    assert_eq!(third["options"]["requests_per_second"], 20.0);
    assert_eq!(counter(global(&third), "benchmark.http_2xx"), 10);
    let mut expected = options_but_id(&first);
    expected["connections"] = 2.into();
    expected["requests_per_second"] = 20.0.into();
    assert_eq!(options_but_id(&third), expected);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hand_written_spec_file_runs_and_its_defaults_fill_in() {
    let server = Server::start(&[]);
    let dir = tmpdir("hand");
    let spec = write(
        &dir,
        "smoke.json",
        &serde_json::json!({
            "uri": server.url("/hand"),
            "requests_per_second": "25",
            "duration": "0.4s",
            "output_format": "JSON",
            "sequencer_idle_strategy": "SLEEP",
        })
        .to_string(),
    );
    let v = agreed(&server, &["run", "--spec", &spec]);
    assert_eq!(counter(global(&v), "benchmark.http_2xx"), 10);
    assert_eq!(v["options"]["connections"], 100, "defaults fill in");
    assert_eq!(v["options"]["sequencer_idle_strategy"], "sleep");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_spec_exits_2_naming_the_field() {
    let dir = tmpdir("bad");
    let u = "http://127.0.0.1:9/";
    let cases = [
        (
            serde_json::json!({"uri": u, "connections": 0}),
            "bad1.json: connections must be at least 1",
        ),
        (serde_json::json!({"uri": u, "conections": 5}), "conections is not an option"),
        (
            serde_json::json!({"uri": u, "duration": "soon"}),
            "bad3.json: duration: invalid duration",
        ),
        (
            serde_json::json!({"uri": u, "request_options": {"request_method": "G ET"}}),
            "request_options.request_method must be an HTTP token",
        ),
        (
            serde_json::json!({"uri": u, "stages": "1s:5", "requests_per_second": 3}),
            "stages cannot be used with requests_per_second",
        ),
    ];
    for (i, (spec, needle)) in cases.iter().enumerate() {
        let path = write(&dir, &format!("bad{}.json", i + 1), &spec.to_string());
        let out = run(&["run", "--spec", &path], LIMIT);
        assert_eq!(out.code(), 2, "{spec}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{spec}: want {needle:?} in\n{}", out.stderr);
        assert!(!out.stderr.contains("starting"), "{spec} started a run");
    }
    // A flag that fixes the bad value wins over the file.
    let path =
        write(&dir, "fixable.json", &serde_json::json!({"uri": u, "connections": 0}).to_string());
    let out = run(&["run", "--spec", &path, "--connections", "0"], LIMIT);
    assert!(out.stderr.contains("--connections must be at least 1"), "{}", out.stderr);
    let out = run(&["run", "--spec", "/nonexistent/spec.json"], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("--spec: cannot read /nonexistent/spec.json"), "{}", out.stderr);
    let not_json = write(&dir, "x.json", "{nope");
    let out = run(&["run", "--spec", &not_json], LIMIT);
    assert_eq!(out.code(), 2);
    assert!(out.stderr.contains("is not JSON"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
