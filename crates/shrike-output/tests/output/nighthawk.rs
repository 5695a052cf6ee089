//! Nighthawk's own outputs (`tests/nighthawk/`, copied from its repository; see the README
//! there) against Shrike: whether Shrike's stored-JSON reader takes Nighthawk's JSON, and whether
//! the formats Shrike writes in Nighthawk's layout match it name by name. Values are not
//! compared (the files describe other runs); names, nesting and JSON types are. Every deliberate
//! difference is listed where it is allowed, and a listed difference that no longer exists fails
//! the test too, so the lists stay true.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use shrike_output::OutputFormat;
use shrike_stats::{Counter, StatId, StatKind};

fn gold(name: &str) -> String {
    let path = format!("{}/tests/nighthawk/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The real run's `Output`. The fixture has one trailing comma (after `jitter_uniform`) that
/// protobuf's JSON parser accepts and Nighthawk's writer never produces; strict JSON needs it
/// gone.
fn real_run_text() -> String {
    let text = gold("output_formatter.medium.proto.gold");
    let fixed = text.replace("\"0.000000494s\",\n }", "\"0.000000494s\"\n }");
    assert_ne!(fixed, text, "the fixture's trailing comma moved; update real_run_text");
    fixed
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// A proto3 duration string (`"0.000195004s"`) in whole nanoseconds, parsed here rather than by
/// Shrike so the reading tests do not grade Shrike with its own parser.
fn proto_ns(v: &Value) -> u64 {
    let s = v.as_str().and_then(|s| s.strip_suffix('s')).expect("a proto3 duration");
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<9}");
    secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
}

fn uint(v: &Value) -> u64 {
    v.as_str().expect("uint64 as a string").parse().unwrap()
}

// ---- (a) Shrike's reader on Nighthawk's JSON ----

#[test]
fn reader_takes_nighthawks_formatter_json() {
    let text = gold("output_formatter.json.gold");
    let r = shrike_output::from_json(&text)
        .unwrap_or_else(|e| panic!("Shrike cannot read Nighthawk's JSON: {e}"));
    let names: Vec<&str> = r.workers.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["worker_0", "worker_1"]);
    assert_eq!(r.global.name, "global");
    for w in r.workers.iter().chain([&r.global]) {
        assert_eq!(w.execution_duration, std::time::Duration::from_secs(1), "{}", w.name);
    }
    // 2009-02-13T23:31:31.567Z, as Nighthawk wrote it for worker_0 and global.
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_234_567_891_567);
    assert_eq!(r.workers[0].execution_start, start);
    assert_eq!(r.global.execution_start, start);
    // worker_1 has none; it takes the global start, the closest time the file gives.
    assert_eq!(r.workers[1].execution_start, start);
    // No `shrike` block: how the run ended is unknown and reads as completed.
    assert_eq!(r.termination, shrike_stats::Termination::Completed);
    assert!(r.intervals.is_empty() && r.errors.is_empty());

    // None of its statistic ids is Shrike's: all kept as foreign, kind from the fields.
    let g = &r.global;
    assert!(g.stats.iter().all(|(_, s)| s.count() == 0));
    let ids: Vec<(&str, StatKind, u64)> =
        g.foreign.iter().map(|f| (f.id.as_str(), f.kind, f.stat.count())).collect();
    assert_eq!(
        ids,
        [
            ("stat_id", StatKind::Duration, 3),
            ("", StatKind::Duration, 0),
            ("foo_size", StatKind::Size, 4),
            ("foo_latency", StatKind::Duration, 4),
        ]
    );
    let latency = &g.foreign[3].stat;
    assert!(!latency.has_histogram());
    assert_eq!((latency.min(), latency.max()), (180_007, 210_007));
    assert_eq!(latency.mean().round() as u64, 195_004);
    // The printed points answer percentile questions: 0.5 -> 190.007us (2 of 4 samples).
    let p50 = latency.percentile(0.5);
    assert_eq!((p50.value, p50.count), (190_007, 2));
    // Between printed points, the next one up: 0.76 -> 0.775's 210.007us.
    assert_eq!(latency.value_at_quantile(0.76), 210_007);
    let size = &g.foreign[2].stat;
    assert_eq!((size.min(), size.max(), size.mean()), (14, 17, 15.5));
    assert_eq!(size.value_at_quantile(0.3), 15);
    // stat_id printed no points: only max is known as a bound.
    assert_eq!(g.foreign[0].stat.value_at_quantile(0.5), 3_000_000);

    // Counters it does not know are kept by name.
    assert_eq!(g.counters.get_named("bar"), 2);
    assert_eq!(g.counters.get_named("foo"), 1);
    assert_eq!(g.counters.non_zero(), []);

    // Written back as JSON, nothing read is lost: same ids, counts and counters.
    let again = shrike_output::from_json(&crate::common::json_text(&r)).unwrap();
    let back: Vec<(&str, u64)> =
        again.global.foreign.iter().map(|f| (f.id.as_str(), f.stat.count())).collect();
    assert_eq!(back, [("stat_id", 3), ("", 0), ("foo_size", 4), ("foo_latency", 4)]);
    assert_eq!(again.global.foreign[3].stat.percentile(0.5), p50);
    assert_eq!(again.global.counters.get_named("bar"), 2);

    // The full human report shows what it read: Nighthawk's statistics and counters.
    let text = crate::common::human_text(&r);
    assert!(!text.contains("No counter was incremented"), "{text}");
    let counters: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Counter ")).collect();
    assert_eq!(
        counters[1..].iter().map(|l| l.split_whitespace().next().unwrap()).collect::<Vec<_>>(),
        ["bar", "foo"]
    );
    assert!(text.contains("foo_latency [foo_latency]\n  samples: 4\n"), "{text}");
    assert!(text.contains("foo_size [foo_size]\n  samples: 4\n  mean:    15.50\n"), "{text}");
}

#[test]
fn reader_takes_a_real_nighthawk_run() {
    let text = real_run_text();
    let doc = json(&text);
    let r = shrike_output::from_json(&text)
        .unwrap_or_else(|e| panic!("Shrike cannot read Nighthawk's JSON: {e}"));
    let results: Vec<&shrike_stats::WorkerResult> = r.workers.iter().chain([&r.global]).collect();
    let stored = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), stored.len());
    for (got, want) in results.iter().zip(stored) {
        assert_eq!(got.name, want["name"].as_str().unwrap());
        let dur = proto_ns(&want["execution_duration"]);
        assert_eq!(got.execution_duration.as_nanos(), u128::from(dur), "{}", got.name);
        // Every statistic with the count and moments Nighthawk wrote.
        for s in want["statistics"].as_array().unwrap() {
            let id = StatId::from_id(s["id"].as_str().unwrap()).expect("a Nighthawk statistic id");
            let stat = got.stats.get(id);
            let what = format!("{} {}", got.name, id.id());
            assert_eq!(stat.count(), uint(&s["count"]), "{what}");
            if stat.count() == 0 {
                continue;
            }
            match id.kind() {
                StatKind::Duration => {
                    assert_eq!(stat.min(), proto_ns(&s["min"]), "{what}");
                    assert_eq!(stat.max(), proto_ns(&s["max"]), "{what}");
                    assert_eq!(stat.mean().round() as u64, proto_ns(&s["mean"]), "{what}");
                    assert_eq!(stat.pstdev().round() as u64, proto_ns(&s["pstdev"]), "{what}");
                }
                StatKind::Size => {
                    assert_eq!(stat.min(), uint(&s["raw_min"]), "{what}");
                    assert_eq!(stat.max(), uint(&s["raw_max"]), "{what}");
                    assert_eq!(stat.mean(), s["raw_mean"].as_f64().unwrap(), "{what}");
                    assert_eq!(stat.pstdev(), s["raw_pstdev"].as_f64().unwrap(), "{what}");
                }
            }
        }
        // Every counter, Shrike's or Envoy's, with Nighthawk's value.
        for c in want["counters"].as_array().unwrap() {
            let name = c["name"].as_str().unwrap();
            assert_eq!(got.counters.get_named(name), uint(&c["value"]), "{} {name}", got.name);
        }
    }
    // Spot checks against values read off the file by eye, so the loop above cannot pass by
    // comparing a misread with itself.
    let g = &r.global;
    assert_eq!(r.workers.len(), 3);
    assert_eq!(g.counters.get(Counter::Http2xx), 56);
    assert_eq!(g.counters.get_named("default.total_match_count"), 3);
    assert_eq!(g.counters.get_named("ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256"), 6);
    let q2c = g.stats.get(StatId::QueueToConnect);
    assert_eq!(q2c.count(), 53);
    assert!(!q2c.has_histogram());
    // Nighthawk printed p50 as 0.000018829s with 27 samples at or below it.
    let p50 = q2c.percentile(0.5);
    assert_eq!((p50.value, p50.count), (18_829, 27));
    assert_eq!(g.stats.get(StatId::ResponseHeaderSize).count(), 56);
    assert_eq!(r.termination, shrike_stats::Termination::Completed);
}

// ---- (b) Shrike's writers against Nighthawk's layout ----

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every object's keys by path (`results[].statistics[]`), each with the JSON kinds its values
/// take anywhere in the document.
type Shape = BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>>;

fn shape(v: &Value) -> Shape {
    fn walk(v: &Value, path: &str, out: &mut Shape) {
        match v {
            Value::Object(m) => {
                out.entry(path.to_string()).or_default();
                for (k, x) in m {
                    out.get_mut(path).unwrap().entry(k.clone()).or_default().insert(kind(x));
                    let child = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    walk(x, &child, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, &format!("{path}[]"), out)),
            _ => {}
        }
    }
    let mut out = Shape::new();
    walk(v, "", &mut out);
    out
}

/// What may differ between Nighthawk's layout and Shrike's.
struct Differences<'a> {
    /// Objects whose keys are not compared (the key naming them, in its parent, still is).
    not_compared: &'a [&'a str],
    /// (path, key) Nighthawk writes and Shrike does not.
    only_nighthawk: &'a [(&'a str, &'a str)],
    /// (path, key) Shrike adds; their subtrees are Shrike's own.
    only_shrike: &'a [(&'a str, &'a str)],
    /// (path, key, Nighthawk's kind, Shrike's kind) when the types differ; `None` to compare
    /// names only (YAML, where the types are the YAML parser's guess).
    kinds: Option<&'a [(&'a str, &'a str, &'a str, &'a str)]>,
}

fn compare_shapes(nighthawk: &Shape, shrike: &Shape, d: &Differences) {
    let under = |path: &str, root: &str| {
        path == root
            || path.starts_with(&format!("{root}."))
            || path.starts_with(&format!("{root}[]"))
    };
    let join = |p: &str, k: &str| if p.is_empty() { k.to_string() } else { format!("{p}.{k}") };
    let skipped = |path: &str| {
        d.not_compared.iter().any(|r| under(path, r))
            || d.only_shrike.iter().any(|(p, k)| under(path, &join(p, k)))
            || d.only_nighthawk.iter().any(|(p, k)| under(path, &join(p, k)))
    };
    let mut problems = Vec::new();
    let empty = BTreeMap::new();
    let paths: BTreeSet<&String> = nighthawk.keys().chain(shrike.keys()).collect();
    for path in paths {
        if skipped(path) {
            continue;
        }
        let (nh, sh) = match (nighthawk.get(path), shrike.get(path)) {
            (Some(nh), Some(sh)) => (nh, sh),
            // An array one side left empty has no elements to compare.
            _ if path.ends_with("[]") => continue,
            (nh, sh) => (nh.unwrap_or(&empty), sh.unwrap_or(&empty)),
        };
        let listed = |list: &[(&str, &str)], k: &str| list.contains(&(path.as_str(), k));
        for (k, kinds) in nh {
            match sh.get(k) {
                None if listed(d.only_nighthawk, k) => {}
                None => problems.push(format!("{path}: Shrike lacks Nighthawk's {k:?}")),
                Some(_) if listed(d.only_nighthawk, k) => problems.push(format!(
                    "{path}: {k:?} is listed as Nighthawk-only but Shrike writes it"
                )),
                Some(sk) => {
                    let Some(exceptions) = d.kinds else { continue };
                    let exception = exceptions.iter().find(|e| e.0 == path && e.1 == k);
                    match exception {
                        Some(e) => {
                            let (nk, skd) = (BTreeSet::from([e.2]), BTreeSet::from([e.3]));
                            if (kinds, sk) != (&nk, &skd) {
                                problems.push(format!(
                                    "{path}.{k}: listed as {e:?}, found Nighthawk {kinds:?} \
                                     and Shrike {sk:?}"
                                ));
                            }
                        }
                        None if kinds != sk => problems
                            .push(format!("{path}.{k}: Nighthawk writes {kinds:?}, Shrike {sk:?}")),
                        None => {}
                    }
                }
            }
        }
        for k in sh.keys() {
            match (nh.contains_key(k), listed(d.only_shrike, k)) {
                (false, false) => problems.push(format!("{path}: Shrike adds unlisted {k:?}")),
                (true, true) => problems
                    .push(format!("{path}: {k:?} is listed as Shrike-only but Nighthawk has it")),
                _ => {}
            }
        }
    }
    for (p, k) in d.only_shrike {
        if !shrike.get(*p).is_some_and(|m| m.contains_key(*k)) {
            problems.push(format!("{p}: listed Shrike addition {k:?} is not written"));
        }
    }
    for (p, k) in d.only_nighthawk {
        if !nighthawk.get(*p).is_some_and(|m| m.contains_key(*k)) {
            problems.push(format!("{p}: listed Nighthawk field {k:?} is not in Nighthawk's file"));
        }
    }
    assert!(problems.is_empty(), "layout differs from Nighthawk's:\n{}", problems.join("\n"));
}

/// Shrike's JSON next to Nighthawk's `Output`, shared by the JSON and YAML checks.
const JSON_DIFFERENCES: Differences<'static> = Differences {
    // The options are each tool's own flags as given; their values and sets differ by design.
    not_compared: &["options"],
    // Output plugins' results; Shrike has no output plugins.
    only_nighthawk: &[("results[]", "user_defined_outputs")],
    only_shrike: &[
        // Schema version, termination, environment and the time series.
        ("", "shrike"),
        // Responses per exact status code (Nighthawk counts classes only).
        ("results[]", "shrike_status_codes"),
        ("results[]", "shrike_sending_duration"),
        // The whole HdrHistogram, so stored results merge exactly.
        ("results[].statistics[]", "shrike_histogram"),
    ],
    kinds: Some(&[]),
};

/// Key names, nesting and JSON types of Shrike's JSON against Nighthawk's formatter output.
/// (Key order is not compared here; `json_shape.rs` checks it against the same file.)
#[test]
fn json_layout_matches_nighthawks() {
    let nighthawk = shape(&json(&gold("output_formatter.json.gold")));
    let shrike = shape(&json(&crate::common::json_text(&crate::common::sample())));
    let kinds = [];
    compare_shapes(&nighthawk, &shrike, &Differences { kinds: Some(&kinds), ..JSON_DIFFERENCES });
    // A real run's statistics, percentiles and counters have the same layout. (Its results
    // are compared above through the formatter's file: this fixture omits the optional
    // execution_start and user_defined_outputs.)
    let inner = |s: &Shape| -> Shape {
        let keep = |p: &str| {
            p.starts_with("results[].statistics[]") || p.starts_with("results[].counters[]")
        };
        s.iter().filter(|(p, _)| keep(p)).map(|(p, m)| (p.clone(), m.clone())).collect()
    };
    let real = inner(&shape(&json(&real_run_text())));
    let differences = Differences {
        not_compared: &[],
        only_nighthawk: &[],
        only_shrike: &[("results[].statistics[]", "shrike_histogram")],
        kinds: Some(&kinds),
    };
    compare_shapes(&real, &inner(&shrike), &differences);
}

#[test]
fn percentile_raw_value_is_a_number_as_in_nighthawk() {
    let nighthawk = shape(&json(&gold("output_formatter.json.gold")));
    let shrike = shape(&json(&crate::common::json_text(&crate::common::sample())));
    let path = "results[].statistics[].percentiles[]";
    assert_eq!(nighthawk[path]["raw_value"], BTreeSet::from(["number"]));
    assert_eq!(shrike[path]["raw_value"], nighthawk[path]["raw_value"]);
}

/// YAML through Debian's PyYAML into JSON (timestamps, which PyYAML turns into datetimes, as
/// strings).
fn yaml_as_json(yaml: &str) -> Value {
    let out = crate::common::python(
        "import sys, json, yaml\nprint(json.dumps(yaml.safe_load(sys.stdin.read()), default=str))",
        yaml,
    );
    json(&out)
}

#[test]
fn yaml_layout_matches_nighthawks() {
    // Nighthawk's test fills in its build's version numbers before comparing; any number will
    // do for the layout.
    let nighthawk_yaml = gold("output_formatter.yaml.gold");
    let nighthawk_yaml = ["@version_major@", "@version_minor@", "@version_patch@"]
        .iter()
        .fold(nighthawk_yaml, |text, placeholder| text.replace(placeholder, "0"));
    let nighthawk = shape(&yaml_as_json(&nighthawk_yaml));
    let shrike =
        shape(&yaml_as_json(&crate::common::text(OutputFormat::Yaml, &crate::common::sample())));
    // Names and nesting only: YAML's scalars have no declared type (Nighthawk writes `count: 3`,
    // PyYAML reads an int).
    compare_shapes(&nighthawk, &shrike, &Differences { kinds: None, ..JSON_DIFFERENCES });
}

/// Shrike's `fortio` is Nighthawk's `experimental_fortio_pedantic` (fortio's exact Go types).
#[test]
fn fortio_layout_matches_nighthawks_pedantic_fortio() {
    let nighthawk = shape(&json(&gold("output_formatter.medium.fortio-noquirks.gold")));
    let shrike = shape(&json(&crate::common::text(OutputFormat::Fortio, &crate::common::sample())));
    compare_shapes(
        &nighthawk,
        &shrike,
        &Differences {
            // Keys are the status codes each run saw.
            not_compared: &["RetCodes"],
            only_nighthawk: &[],
            // Fields of fortio's HTTPRunnerResults that Nighthawk leaves out.
            only_shrike: &[
                ("", "ErrorsDurationHistogram"),
                ("", "Exactly"),
                ("", "Uniform"),
                ("", "NoCatchUp"),
                ("", "RunID"),
                ("", "ID"),
                ("", "SocketCount"),
                ("", "AbortOn"),
            ],
            kinds: Some(&[]),
        },
    );
    // Nighthawk's default `fortio` writes uint64s as strings, which fortio's Go types reject;
    // Shrike writes the pedantic form under both names.
    let quirky = json(&gold("output_formatter.medium.fortio.gold"));
    assert_eq!(kind(&quirky["DurationHistogram"]["Count"]), "string");
}

/// A real Nighthawk run's statistic ids and counter names: Shrike has each statistic, with the
/// same duration/size kind, and each counter except Envoy's internals.
#[test]
fn a_real_runs_statistics_and_counters_are_shrikes() {
    let doc = json(&real_run_text());
    // Envoy's cluster-manager, runtime and TLS-detail counters: Shrike has no Envoy inside.
    let envoy_only = [
        "cluster_manager.cluster_added",
        "default.total_match_count",
        "membership_change",
        "runtime.load_success",
        "runtime.override_dir_not_exists",
        "ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256",
        "ssl.curves.X25519",
        "ssl.sigalgs.rsa_pss_rsae_sha256",
        "ssl.versions.TLSv1.2",
    ];
    let mut unknown = BTreeSet::new();
    for r in doc["results"].as_array().unwrap() {
        for s in r["statistics"].as_array().unwrap() {
            let id = s["id"].as_str().unwrap();
            let stat = StatId::from_id(id).unwrap_or_else(|| panic!("Shrike lacks statistic {id}"));
            let size = s.get("raw_mean").is_some();
            assert_eq!(stat.kind() == StatKind::Size, size, "{id}: duration or size");
        }
        for c in r["counters"].as_array().unwrap() {
            let name = c["name"].as_str().unwrap();
            if Counter::from_name(name).is_none() {
                unknown.insert(name);
            }
        }
    }
    assert_eq!(unknown, envoy_only.into_iter().collect(), "counters Shrike lacks");
}

/// Dotted lines as the (kind, has permilles) of each statistic → its line suffixes in order of
/// first appearance, with permille numbers as `<p>`; also every permille number seen, and a
/// check that each result's statistic lines precede its counter lines.
#[allow(clippy::type_complexity)]
fn dotted_layout(
    text: &str,
    results: &[&str],
    stats: &BTreeMap<String, StatKind>,
    counters: &BTreeSet<String>,
) -> (BTreeMap<(bool, bool), Vec<String>>, BTreeSet<u64>) {
    let mut seq: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut permilles = BTreeSet::new();
    let mut order: Vec<&str> = Vec::new();
    let mut counters_started: BTreeSet<&str> = BTreeSet::new();
    for line in text.lines() {
        let (key, value) = line.split_once(':').unwrap_or_else(|| panic!("no colon: {line}"));
        let result = results
            .iter()
            .find(|r| key.starts_with(&format!("{r}.")))
            .unwrap_or_else(|| panic!("unknown result in {line}"));
        if order.last() != Some(result) {
            assert!(!order.contains(result), "{result} interrupted: {line}");
            order.push(result);
        }
        let rest = &key[result.len() + 1..];
        if !value.starts_with(' ') {
            // Counters: `name:value`, no space.
            assert!(counters.contains(rest), "unknown counter line {line}");
            counters_started.insert(result);
            continue;
        }
        assert!(!counters_started.contains(result), "statistic after counters: {line}");
        let id = stats
            .keys()
            .filter(|id| rest.starts_with(&format!("{id}.")))
            .max_by_key(|id| id.len())
            .unwrap_or_else(|| panic!("unknown statistic in {line}"));
        let suffix = &rest[id.len() + 1..];
        let suffix = match suffix.strip_prefix("permilles-").and_then(|s| s.split_once('.')) {
            Some((p, tail)) => {
                permilles.insert(p.parse::<u64>().unwrap());
                format!("permilles-<p>.{tail}")
            }
            None => suffix.to_string(),
        };
        let s = seq.entry((result.to_string(), id.clone())).or_default();
        if !s.contains(&suffix) {
            s.push(suffix);
        }
    }
    assert_eq!(order, results, "results in order, workers then global");
    let mut layout: BTreeMap<(bool, bool), Vec<String>> = BTreeMap::new();
    for ((_, id), s) in seq {
        let size = stats[&id] == StatKind::Size;
        let has_permilles = s.iter().any(|x| x.starts_with("permilles-"));
        let prev = layout.insert((size, has_permilles), s.clone());
        assert!(prev.as_ref().is_none_or(|p| *p == s), "{id}: {s:?} vs {prev:?}");
    }
    (layout, permilles)
}

/// Nighthawk's formatter JSON read by Shrike and written as dotted gives every line Nighthawk's
/// own dotted file has, values included: its foreign statistics (`stat_id`, `foo_size`, ...)
/// and counters (`bar`, `foo`) survive reading, and printed percentiles are answered from the
/// stored points. (Shrike adds lines: its own empty statistics, and permilles Nighthawk did not
/// store, answered by the next stored point up. A statistic with no stored point, `stat_id`,
/// gets no permilles, as in Nighthawk.)
#[test]
fn dotted_of_nighthawks_json_has_every_line_nighthawk_writes() {
    let r = shrike_output::from_json(&gold("output_formatter.json.gold")).unwrap();
    let shrike = crate::common::text(OutputFormat::Dotted, &r);
    let shrike: BTreeSet<&str> = shrike.lines().collect();
    let nighthawk = gold("output_formatter.dotted.gold");
    let missing: Vec<&str> = nighthawk.lines().filter(|l| !shrike.contains(l)).collect();
    assert!(missing.is_empty(), "Shrike lacks Nighthawk's lines:\n{}", missing.join("\n"));
    assert!(nighthawk.lines().count() > 100);
    assert!(!shrike.iter().any(|l| l.starts_with("global.stat_id.permilles")));
}

#[test]
fn dotted_key_names_match_nighthawks() {
    // Nighthawk's statistics and counters as its JSON fixture declares them.
    let doc = json(&gold("output_formatter.json.gold"));
    let global = &doc["results"][2];
    let nh_stats: BTreeMap<String, StatKind> = global["statistics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let kind =
                if s.get("raw_mean").is_some() { StatKind::Size } else { StatKind::Duration };
            (s["id"].as_str().unwrap().to_string(), kind)
        })
        .collect();
    let nh_counters = global["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let results = ["worker_0", "worker_1", "global"];
    let (nh, nh_permilles) =
        dotted_layout(&gold("output_formatter.dotted.gold"), &results, &nh_stats, &nh_counters);

    let sh_stats = StatId::ALL.iter().map(|s| (s.id().to_string(), s.kind())).collect();
    let sh_counters = Counter::ALL.iter().map(|c| c.name().to_string()).collect();
    let text = crate::common::text(OutputFormat::Dotted, &crate::common::sample());
    let (sh, sh_permilles) = dotted_layout(&text, &results, &sh_stats, &sh_counters);

    // Same suffixes in the same order for each kind of statistic Nighthawk's file shows: a
    // duration without percentiles, a duration and a size with them.
    for (kind, suffixes) in &nh {
        assert_eq!(sh.get(kind), Some(suffixes), "(size, has permilles) = {kind:?}");
    }
    // Deliberate: Shrike prints exactly these nine permilles from the histogram; Nighthawk
    // prints the first stored spectrum point at or above each (so a file can say
    // `permilles-991`), here only 0, 500, 750 and 1000 because its fixture stores few points.
    assert_eq!(sh_permilles, BTreeSet::from([0, 500, 750, 800, 900, 950, 990, 999, 1000]));
    assert!(nh_permilles.is_subset(&sh_permilles), "{nh_permilles:?}");
}

/// Shrike's CSV is a tidy table (`result,kind,name,measure,quantile,value,unit`), not
/// Nighthawk's per-statistic sections; every Nighthawk column has a counterpart.
#[test]
fn csv_carries_every_nighthawk_column() {
    // Nighthawk's column headers and the "N samples" in its section titles, each mapped to
    // Shrike's (kind, measure); `None` for what Shrike leaves out.
    let map: BTreeMap<&str, Option<(&str, &str)>> = BTreeMap::from([
        ("samples", Some(("statistic", "count"))),
        ("Min", Some(("statistic", "min"))),
        ("Mean", Some(("statistic", "mean"))),
        ("Max", Some(("statistic", "max"))),
        ("Pstdev", Some(("statistic", "pstdev"))),
        ("Percentile", Some(("percentile", "value"))),
        ("Count", Some(("percentile", "count"))),
        // One value column, in ns or bytes (the unit column says which), not µs plus text.
        ("Value(microseconds)", Some(("percentile", "value"))),
        ("Value", Some(("percentile", "value"))),
        ("Counter", Some(("counter", "value"))),
        // Deliberate: no rates; divide by the result's execution_duration.
        ("Per second", None),
    ]);
    let mut nh_columns = BTreeSet::new();
    for line in gold("output_formatter.csv.gold").lines() {
        if line.ends_with(" samples)") {
            nh_columns.insert("samples");
        }
        for header in [
            "Min,Mean,Max,Pstdev",
            "Percentile,Count,Value(microseconds),Value",
            "Counter,Value,Per second",
        ] {
            if line == header {
                nh_columns.extend(header.split(','));
            }
        }
    }
    assert_eq!(nh_columns, map.keys().copied().collect(), "Nighthawk's CSV columns changed");

    let text = crate::common::text(OutputFormat::Csv, &crate::common::sample());
    let rows: Vec<Vec<&str>> =
        text.split_terminator("\r\n").map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], shrike_output::csv::HEADER);
    let id = StatId::RequestToResponse.id();
    for (column, target) in &map {
        let Some((kind, measure)) = target else { continue };
        let name = if *kind == "counter" { Counter::Http2xx.name() } else { id };
        assert!(
            rows.iter()
                .any(|r| r[0] == "global" && r[1] == *kind && r[2] == name && r[3] == *measure),
            "Nighthawk's {column:?}: no global {kind} {name} {measure} row"
        );
    }
    // Deliberate: Nighthawk's percentile rows skip 0 and 1 (its Min and Max); Shrike's carry
    // the nine quantiles of the other formats, and every result, not only global.
    let quantiles: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r[0] == "worker_1" && r[1] == "percentile" && r[2] == id && r[3] == "value")
        .map(|r| r[4])
        .collect();
    assert_eq!(quantiles.len(), 9, "{quantiles:?}");
}

/// `# TYPE name type` lines: each family and its type.
fn prometheus_families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.rsplit_once(' ').unwrap();
            (name.to_string(), kind.to_string())
        })
        .collect()
}

/// The label names used on samples.
fn prometheus_labels(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('{').and_then(|(_, r)| r.split_once('}')).map(|(ls, _)| ls))
        .flat_map(|ls| ls.split(',').map(|kv| kv.split_once('=').unwrap().0.to_string()))
        .collect()
}

/// Nighthawk's family names for a set of statistics and counters, as its
/// `PrometheusOutputFormatterImpl` builds them: `nighthawk_` + the id with `.` as `_`; per
/// statistic `_min`, `_max`, `_mean`, `_pstdev` counters, and a summary when it has percentiles
/// (else `_count` and `_sum` counters); statistics with an empty id are skipped.
fn nighthawk_families(stats: &[(&str, bool)], counters: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (id, has_percentiles) in stats.iter().filter(|(id, _)| !id.is_empty()) {
        let name = format!("nighthawk_{}", id.replace('.', "_"));
        for m in ["min", "max", "mean", "pstdev"] {
            out.insert(format!("{name}_{m}"), "counter".to_string());
        }
        if *has_percentiles {
            out.insert(name, "summary".to_string());
        } else {
            out.insert(format!("{name}_count"), "counter".to_string());
            out.insert(format!("{name}_sum"), "counter".to_string());
        }
    }
    for c in counters {
        out.insert(format!("nighthawk_{}", c.replace('.', "_")), "counter".to_string());
    }
    out
}

#[test]
fn prometheus_names_follow_nighthawks_with_listed_differences() {
    // First: the model of Nighthawk's names reproduces its file exactly.
    let doc = json(&gold("output_formatter.json.gold"));
    let global = &doc["results"][2];
    let stats: Vec<(&str, bool)> = global["statistics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), !s["percentiles"].as_array().unwrap().is_empty()))
        .collect();
    let counters: Vec<&str> = global["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let nh_text = gold("output_formatter.prometheus.gold");
    assert_eq!(prometheus_families(&nh_text), nighthawk_families(&stats, &counters));

    // Then: Shrike's families are Nighthawk's names for Shrike's statistics and counters, changed
    // only as listed.
    let shrike_text = crate::common::text(OutputFormat::Prometheus, &crate::common::sample());
    let sh_stats: Vec<(&str, bool)> = StatId::ALL.iter().map(|s| (s.id(), true)).collect();
    let sh_counters: Vec<&str> = Counter::ALL.iter().map(|c| c.name()).collect();
    let mut expected = BTreeMap::new();
    for (name, kind) in nighthawk_families(&sh_stats, &sh_counters) {
        let base = name.strip_prefix("nighthawk_").unwrap();
        let stat = StatId::ALL.iter().find(|s| s.id().replace('.', "_") == base);
        let renamed = match (kind.as_str(), stat) {
            // A statistic's summary: prefix `shrike_`, and a unit suffix with values in base
            // units (seconds, not Nighthawk's microseconds; bytes). Shrike writes a summary
            // (with `_count` and `_sum`) even for a statistic without samples.
            ("summary", Some(s)) => {
                let unit = if s.kind() == StatKind::Size { "bytes" } else { "seconds" };
                Some((format!("shrike_{base}_{unit}"), "summary"))
            }
            // Nighthawk's `_min`, `_max`, `_mean`, `_pstdev` "counters" (really gauges): Shrike
            // has none. Min and max are the summary's quantiles 0 and 1, the mean is
            // `_sum / _count`, and the standard deviation is not exported.
            ("counter", None)
                if ["_min", "_max", "_mean", "_pstdev"].iter().any(|m| base.ends_with(m))
                    && StatId::ALL.iter().any(|s| {
                        base.strip_prefix(&s.id().replace('.', "_")).is_some_and(|m| m.len() > 1)
                    }) =>
            {
                None
            }
            // Counters: prefix `shrike_` and Prometheus's `_total` suffix (once).
            ("counter", None) => Some((
                if base.ends_with("_total") {
                    format!("shrike_{base}")
                } else {
                    format!("shrike_{base}_total")
                },
                "counter",
            )),
            other => panic!("unexpected Nighthawk family {name} {other:?}"),
        };
        if let Some((n, k)) = renamed {
            expected.insert(n, k.to_string());
        }
    }
    // Shrike's additions: responses per exact status code, and each result's time window.
    for (n, k) in [
        ("shrike_http_responses_total", "counter"),
        ("shrike_execution_duration_seconds", "gauge"),
        ("shrike_execution_start_timestamp_seconds", "gauge"),
    ] {
        expected.insert(n.to_string(), k.to_string());
    }
    assert_eq!(prometheus_families(&shrike_text), expected);

    // Labels: Nighthawk's `scope` is Shrike's `worker`; `code` is Shrike's per-status family;
    // the rest are the fixture's `--label`s (`env=ci` and a plain `nightly`).
    assert_eq!(prometheus_labels(&nh_text), BTreeSet::from(["quantile".into(), "scope".into()]));
    let sh_labels = prometheus_labels(&shrike_text);
    let want: BTreeSet<String> =
        ["quantile", "worker", "code", "env", "label"].into_iter().map(String::from).collect();
    assert_eq!(sh_labels, want);
}
