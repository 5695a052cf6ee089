//! The human reports (the compact summary and the full report): content checks plus golden
//! files.
//!
//! Regenerate the golden files after an intended change with
//! `SHRIKE_BLESS=1 cargo test -p shrike-output --test output human` and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use shrike_stats::duration::format_human_ns;
use shrike_stats::{StatId, StatKind};

/// The rows (whitespace-split cells) of the table whose header line starts with `header_start`.
fn table_after<'a>(text: &'a str, header_start: &str) -> Vec<Vec<&'a str>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header_start));
    lines.next().unwrap_or_else(|| panic!("no line starts with {header_start:?}"));
    lines.take_while(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().collect()).collect()
}

#[test]
fn header_names_target_termination_and_duration() {
    let text = crate::common::human_text(&crate::common::sample());
    let line = |label: &str| {
        text.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label}")).to_string()
    };
    assert_eq!(line("Target:"), "Target:      http://127.0.0.1:8080/");
    assert_eq!(line("Termination:"), "Termination: completed");
    // The sending window (1.993 s: the fixture's workers stop sending 7 ms before the end),
    // then the drain.
    assert_eq!(
        line("Requests:"),
        "Requests:    1000 sent in 1.993s (then 7.000ms for the last responses), 2 workers"
    );
    assert_eq!(line("Duration:"), "Duration:    2.000s (sending and the last responses)");
    assert_eq!(line("Workers:"), "Workers:     2");
    assert_eq!(line("Started:"), "Started:     2026-11-21T05:27:52.123456789Z");
}

#[test]
fn every_non_empty_statistic_has_its_block() {
    let r = crate::common::sample();
    let text = crate::common::human_text(&r);
    let service = r.global.stats.get(StatId::RequestToResponse);
    for (id, stat) in r.global.stats.iter() {
        let heading = format!("{} [{}]", id.title(), id.id());
        if stat.count() == 0 {
            assert!(!text.contains(&heading), "empty {} printed", id.id());
            continue;
        }
        // The fixture's 2xx latency is service time sample for sample: one line says so.
        if id == StatId::Latency2xx {
            assert_eq!(stat.histogram(), service.histogram());
            let line = format!(
                "{heading}: every response was 2xx, so the same samples as service time \
                 [benchmark_http_client.request_to_response]\n"
            );
            assert!(text.contains(&line), "{text}");
            continue;
        }
        // A constant statistic is one line, not a table.
        if stat.min() == stat.max() {
            let line = format!("{heading}: {} in all {} samples\n", stat.min(), stat.count());
            assert!(text.contains(&line), "{line}\n{text}");
            continue;
        }
        let block: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != heading)
            .take_while(|l| !l.starts_with("  Percentile"))
            .collect();
        assert!(!block.is_empty(), "{heading} missing");
        let fmt = |v: f64| match id.kind() {
            StatKind::Duration => format_human_ns(v),
            StatKind::Size if v.fract() == 0.0 => format!("{v:.0}"),
            StatKind::Size => format!("{v:.2}"),
        };
        for (label, want) in [
            ("samples:", stat.count().to_string()),
            ("mean:", fmt(stat.mean())),
            ("pstdev:", fmt(stat.pstdev())),
            ("min:", fmt(stat.min() as f64)),
            ("max:", fmt(stat.max() as f64)),
        ] {
            let line = block.iter().find(|l| l.trim_start().starts_with(label)).unwrap();
            assert_eq!(line.split_whitespace().nth(1), Some(want.as_str()), "{heading} {label}");
        }

        // The percentile table right after this heading.
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| *l != heading)
            .skip_while(|l| !l.starts_with("  Percentile"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        let labels: Vec<&str> = rows.iter().map(|r| r[0]).collect();
        assert_eq!(labels, ["0", "0.5", "0.75", "0.8", "0.9", "0.95", "0.99", "0.999", "1"]);
        for (row, q) in rows.iter().zip(shrike_output::human::QUANTILES) {
            let p = stat.percentile(q);
            assert_eq!(row[1], p.count.to_string(), "{heading} q={q}");
            let clamped = p.value.max(stat.min()).min(stat.max());
            assert_eq!(row[2], fmt(clamped as f64), "{heading} q={q}");
        }
    }
    // Sizes print plain bytes: the fixture's header size is 150 in every sample.
    assert!(text.contains(&format!(
        "Response header size in bytes [{}]: 150 in all 1000 samples\n",
        StatId::ResponseHeaderSize.id()
    )));
}

#[test]
fn counters_have_per_second_rates() {
    let text = crate::common::human_text(&crate::common::sample());
    let rows = table_after(&text, "Counter ");
    assert_eq!(
        rows,
        [
            vec!["benchmark.http_2xx", "1000", "500.00"],
            // 493827 B/s.
            vec!["upstream_cx_rx_bytes_total", "987654", "482", "KiB/s"],
            vec!["upstream_cx_total", "7", "3.50"],
            vec!["upstream_rq_total", "1000", "500.00"],
        ]
    );
}

#[test]
fn notes_appear_only_when_relevant() {
    let plain = crate::common::human_text(&crate::common::sample());
    assert!(!plain.contains("Notes:"));
    assert!(!plain.contains("Blocking"));
    assert!(!plain.contains("overflow"));

    let skewed = crate::common::human_text(&crate::common::skewed());
    assert!(skewed.contains("Termination: failure predicate benchmark.pool_overflow:10 fired"));
    assert!(skewed.contains(&format!("{} [sequencer.blocking]", StatId::SequencerBlocking.title())));
    let notes = skewed.split("\nNotes:\n").nth(1).expect("notes section");
    let notes = notes.split("\n\n").next().unwrap();
    assert!(notes.lines().all(|l| l.chars().count() <= 90), "{notes}");
    let notes = notes.split_whitespace().collect::<Vec<_>>().join(" ");
    // 2 workers x 3 blocked requests of 2ms + 3ms + 5ms each.
    assert!(notes.contains("before 6 requests, 20.00ms in total"), "{notes}");
    assert!(notes.contains("Results are skewed"), "{notes}");
    assert!(notes.contains("42 requests were dropped by open-loop overflow"), "{notes}");
}

#[test]
fn empty_run_says_so() {
    let r = shrike_stats::RunResult::new(
        serde_json::json!({}),
        Vec::new(),
        shrike_stats::Termination::Interrupted,
    );
    let text = crate::common::human_text(&r);
    assert!(text.contains("Termination: interrupted by signal"));
    assert!(text.contains("No statistic recorded any samples."));
    assert!(text.contains("No counter was incremented."));
    assert!(!text.contains("Target:"));
}

fn golden(text: &str, name: &str) {
    let text = text.replace(env!("CARGO_PKG_VERSION"), "{version}");
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("SHRIKE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(&path).expect("golden file; run with SHRIKE_BLESS=1");
    assert_eq!(text, golden, "{name} changed; rerun with SHRIKE_BLESS=1 and review");
}

#[test]
fn matches_golden_file() {
    golden(&crate::common::human_text(&crate::common::tiny()), "human_tiny.txt");
}

#[test]
fn summary_matches_golden_file() {
    let text = crate::common::text(shrike_output::OutputFormat::Summary, &crate::common::sample());
    golden(&text, "summary_sample.txt");
}

#[test]
fn summary_is_the_head_of_the_full_report() {
    let r = crate::common::skewed();
    let summary = crate::common::text(shrike_output::OutputFormat::Summary, &r);
    let full = crate::common::human_text(&r);
    let head =
        summary.lines().take_while(|l| !l.starts_with("Every statistic")).collect::<Vec<_>>();
    assert!(head.len() > 15, "{summary}");
    assert!(full.starts_with(&head.join("\n")), "{full}");
    // The summary fits a screen; the full report holds every statistic's table.
    assert!(summary.lines().count() < 45, "{summary}");
    assert!(full.contains("\nDetails\n-------\n"));
    assert!(!summary.contains("Percentile"));
}

#[test]
fn header_shows_requested_and_achieved_rate_and_connections() {
    let text = crate::common::human_text(&crate::common::sample());
    let line = |label: &str| text.lines().find(|l| l.starts_with(label)).unwrap().to_string();
    // 250/s per worker x 2 workers requested; 1000 requests (upstream_rq_total) sent in the
    // 1.993 s sending window, not the 2 s that include the drain.
    assert_eq!(line("Rate:"), "Rate:        501.8/s achieved of 500/s requested (100.4%)");
    // upstream_cx_total summed over workers (4 + 3), against 4 per worker x 2.
    assert_eq!(line("Connections:"), "Connections: 7 opened (limit 4 per worker × 2 = 8)");
    // Bytes over the execution window, in binary units.
    assert_eq!(
        line("Transfer:"),
        "Transfer:    482 KiB/s received, 0 B/s sent (965 KiB and 0 B in all)"
    );

    // Without a rate option only the achieved rate is known.
    let mut r = crate::common::sample();
    r.options = serde_json::json!({});
    let text = crate::common::human_text(&r);
    assert!(text.contains("\nRate:        501.8/s achieved\n"), "{text}");
    assert!(text.contains("\nConnections: 7 opened\n"), "{text}");
}

#[test]
fn what_this_means_judges_skew() {
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    // Overflow of 42 against 1000 requests (4.0%) skews the run.
    let skewed = flat(&crate::common::human_text(&crate::common::skewed()));
    assert!(
        skewed.contains(
            "What this means: the results are skewed: 0.6% of requests waited for a connection, \
             4.0% were dropped, 100.4% of the requested rate was achieved."
        ),
        "{skewed}"
    );

    // A handful of blocked requests (0.6%) without overflow is called out as harmless.
    let mut r = crate::common::skewed();
    for w in &mut r.workers {
        w.counters.set(shrike_stats::Counter::PoolOverflow, 0);
    }
    r.global = shrike_stats::WorkerResult::merge_all("global", &r.workers);
    let rare = flat(&crate::common::human_text(&r));
    assert!(rare.contains("What this means: blocking and overflow were rare"), "{rare}");

    // The same blocking in a run that reached only half the requested rate is skew.
    r.options["requests_per_second"] = serde_json::json!(500.0);
    let short = flat(&crate::common::human_text(&r));
    assert!(short.contains("50.2% of the requested rate was achieved"), "{short}");
    assert!(short.contains("the results are skewed"), "{short}");

    assert!(!crate::common::human_text(&crate::common::sample()).contains("What this means"));
}
