//! Every seed of every fuzz target (`fuzz/corpus/TARGET/*`, the `regression-*` inputs that
//! once crashed one among them) run through the target's own function, on the stable
//! toolchain: CI replays the whole corpus on every run, where an instrumented fuzz build would
//! cost it minutes (`fuzz/run` and `fuzz/campaign` do the coverage-guided exploring).

use std::path::Path;

#[path = "../../../../fuzz/src/lib.rs"]
#[allow(dead_code, clippy::all)]
mod targets;

/// A fuzz target: what it does with one input.
type Target = fn(&[u8]);

/// The fuzz targets, by their `fuzz/fuzz_targets/NAME.rs` names.
const TARGETS: [(&str, Target); 11] = [
    ("capture", targets::capture),
    ("envoy_config", targets::envoy_config),
    ("h1_request", targets::h1_request),
    ("h1_response", targets::h1_response),
    ("h2_request", targets::h2_request),
    ("h2_response", targets::h2_response),
    ("jobs", targets::jobs),
    ("request_file", targets::request_file),
    ("result_json", targets::result_json),
    ("server_config", targets::server_config),
    ("spec_text", targets::spec_text),
];

#[test]
fn every_seed_runs_through_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    // Every target binary has its function here (a new target without one fails).
    let mut binaries: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    binaries.sort();
    let ours: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(binaries, ours);
    let mut seeds = 0;
    for (name, target) in TARGETS {
        let dir = fuzz.join("corpus").join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name} has no seeds");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            // A panic names the seed.
            let ok = std::panic::catch_unwind(|| target(&data));
            assert!(ok.is_ok(), "{name}: {} panicked", f.display());
            seeds += 1;
        }
    }
    assert!(seeds >= 30, "{seeds}");
}
