//! CSV output read back by Python's csv module (RFC 4180 quoting) holds every number.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use shrike_output::OutputFormat;
use shrike_stats::{Counter, StatId, StatKind};

fn rows(csv: &str) -> Vec<Vec<String>> {
    let out = crate::common::python(
        "import sys, csv, json, io\n\
         print(json.dumps(list(csv.reader(io.StringIO(sys.stdin.read(), newline='')))))",
        csv,
    );
    serde_json::from_str(&out).unwrap()
}

fn find<'a>(rows: &'a [Vec<String>], key: [&str; 5]) -> &'a str {
    let hits: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r.len() == 7 && key.iter().zip(r.iter()).all(|(k, c)| k == c))
        .collect();
    assert_eq!(hits.len(), 1, "rows matching {key:?}: {hits:?}");
    &hits[0][5]
}

#[test]
fn tidy_rows_hold_statistics_percentiles_counters_and_codes() {
    let r = crate::common::sample();
    let text = crate::common::text(OutputFormat::Csv, &r);
    assert!(text.ends_with("\r\n") && !text.replace("\r\n", "").contains('\n'));
    let rows = rows(&text);
    assert_eq!(rows[0], shrike_output::csv::HEADER);
    assert!(rows.iter().all(|r| r.len() == 7), "ragged row");

    let g = &r.global;
    let rtr = g.stats.get(StatId::RequestToResponse);
    let id = StatId::RequestToResponse.id();
    assert_eq!(find(&rows, ["global", "statistic", id, "count", ""]), "1000");
    let mean: f64 = find(&rows, ["global", "statistic", id, "mean", ""]).parse().unwrap();
    assert_eq!(mean, rtr.mean());
    assert_eq!(find(&rows, ["global", "statistic", id, "max", ""]), "5000000000");
    assert_eq!(find(&rows, ["global", "statistic", id, "min", ""]), rtr.min().to_string());
    for q in ["0", "0.5", "0.99", "0.999", "1"] {
        let p = rtr.percentile(q.parse().unwrap());
        assert_eq!(find(&rows, ["global", "percentile", id, "value", q]), p.value.to_string());
        assert_eq!(find(&rows, ["global", "percentile", id, "count", q]), p.count.to_string());
    }
    let unit = |id: StatId| {
        rows.iter().find(|r| r[2] == id.id() && r[3] == "mean").map(|r| r[6].clone()).unwrap()
    };
    assert_eq!(unit(StatId::RequestToResponse), "ns");
    assert_eq!(unit(StatId::ResponseBodySize), "bytes");
    assert_eq!(StatId::ResponseBodySize.kind(), StatKind::Size);

    // Per-worker rows too, and counters and status codes.
    assert_eq!(find(&rows, ["worker_1", "statistic", id, "count", ""]), "400");
    assert_eq!(find(&rows, ["global", "counter", Counter::Http2xx.name(), "value", ""]), "1000");
    assert_eq!(find(&rows, ["worker_0", "counter", Counter::CxTotal.name(), "value", ""]), "4");
    assert_eq!(find(&rows, ["worker_0", "status_code", "204", "count", ""]), "2");
    assert_eq!(find(&rows, ["global", "status_code", "200", "count", ""]), "998");

    // Every statistic of every result has its five summary rows; empty ones no percentiles.
    let stat_rows = rows.iter().filter(|r| r[1] == "statistic").count();
    assert_eq!(stat_rows, 3 * StatId::COUNT * 5);
    let blocking = StatId::SequencerBlocking.id();
    assert!(!rows.iter().any(|r| r[1] == "percentile" && r[2] == blocking));
}

#[test]
fn names_with_separators_are_quoted() {
    let mut r = crate::common::tiny();
    r.workers[0].name = "worker \"a\", second\nline".into();
    let rows = rows(&crate::common::text(OutputFormat::Csv, &r));
    assert!(rows.iter().any(|row| row[0] == "worker \"a\", second\nline"));
    assert!(rows.iter().all(|r| r.len() == 7));
}
