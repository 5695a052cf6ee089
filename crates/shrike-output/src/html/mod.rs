//! The HTML report: one or more results as a single self-contained page with plots.
//!
//! The page needs nothing but a browser: the numbers are embedded as JSON in a
//! `<script type="application/json">` block and drawn as SVG by a small hand-written script
//! (`plot.js`, a plotting kit, and `report.js`, the report's layout), styled by `report.css`;
//! all are compiled into the binary. Nothing is fetched
//! when the page opens, so a report can be mailed, attached to a ticket or opened offline.
//!
//! Rust computes everything that needs the histograms (the percentile spectrum, bucketed
//! counts, summary percentiles, error totals); the script only lays out and draws. Several
//! results overlay on the same plots, one colour each; the first is the baseline the summary
//! compares the others against.
//!
//! When the script has drawn the page it records what it drew on the DOM (`<body
//! data-render="ok" data-errors="0">`, and per plot `data-series`, `data-paths`, `data-width`,
//! `data-height`), so tests and scripts can check a rendered report mechanically.

mod data;

use std::io;

use shrike_stats::RunResult;

pub use data::report_data;

const CSS: &str = include_str!("report.css");
/// The plotting kit, then the report that uses it; one script element holds both.
const PLOT_JS: &str = include_str!("plot.js");
const REPORT_JS: &str = include_str!("report.js");
/// The capacity search's page, drawn with the same kit.
const CAPACITY_JS: &str = include_str!("capacity.js");
const SWEEP_JS: &str = include_str!("sweep.js");

/// One result shown in a report, with the name its legend entry and table column get.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub label: &'a str,
    pub result: &'a RunResult,
}

/// Writes the report of `inputs` (the first is the baseline) titled `title` to `out`.
pub fn write(title: &str, inputs: &[Input<'_>], out: &mut dyn io::Write) -> io::Result<()> {
    out.write_all(render(title, inputs).as_bytes())
}

/// The report as a string.
pub fn render(title: &str, inputs: &[Input<'_>]) -> String {
    page(title, &report_data(title, inputs), REPORT_JS)
}

/// The page of a capacity search (`shrike capacity --output-format json`): latency against
/// offered load with the objectives and answers marked, and every trial. Each trial's full
/// result is left out of the embedded data: the plots need its summary figures only.
pub fn render_capacity(title: &str, doc: &serde_json::Value) -> String {
    let mut data = without_trial_results(doc);
    data["title"] = serde_json::json!(title);
    data["generator"] = serde_json::json!(concat!("shrike ", env!("CARGO_PKG_VERSION")));
    page(title, &data, CAPACITY_JS)
}

/// The page of several capacity searches side by side, each `(label, document)`: each goal's
/// answers in one table with the change from the first's, every search's trials on one
/// latency chart, then each search's own sections under its label.
pub fn render_capacities(title: &str, docs: &[(&str, &serde_json::Value)]) -> String {
    let inputs: Vec<serde_json::Value> = docs
        .iter()
        .map(|(label, doc)| serde_json::json!({"label": label, "doc": without_trial_results(doc)}))
        .collect();
    let data = serde_json::json!({
        "title": title,
        "generator": concat!("shrike ", env!("CARGO_PKG_VERSION")),
        "side_by_side": inputs,
    });
    page(title, &data, CAPACITY_JS)
}

fn without_trial_results(doc: &serde_json::Value) -> serde_json::Value {
    let mut data = doc.clone();
    if let Some(trials) = data.pointer_mut("/capacity/trials").and_then(|t| t.as_array_mut()) {
        for t in trials {
            if let Some(o) = t.as_object_mut() {
                o.remove("result");
            }
        }
    }
    data
}

/// The page of a sweep (`shrike sweep --output-format json`): throughput and server CPU
/// against the grid with error bars, latency at the peak, the findings.
pub fn render_sweep(title: &str, doc: &serde_json::Value, log_axes: bool) -> String {
    let mut data = doc.clone();
    data["title"] = serde_json::json!(title);
    data["log_axes"] = serde_json::json!(log_axes);
    data["generator"] = serde_json::json!(concat!("shrike ", env!("CARGO_PKG_VERSION")));
    page(title, &data, SWEEP_JS)
}

/// A capacity page's title from what the search found: `Highest rate meeting p99<=50.00ms:
/// 340/s`, each goal's answer (or its lack) when there are several.
pub fn capacity_title(doc: &serde_json::Value) -> String {
    let cap = &doc["capacity"];
    let rate = cap["search"].as_str() == Some("rate");
    let unit = cap["unit"].as_str().unwrap_or("connections");
    let amount = |v: f64| match rate {
        true if v >= 100.0 => format!("{v:.0}/s"),
        true => format!("{v:.1}/s"),
        false => format!("{v:.0} {unit}"),
    };
    let goals = cap["goals"].as_array().cloned().unwrap_or_default();
    let answer = |g: &serde_json::Value| match (g["status"].as_str(), g["max"].as_f64()) {
        (Some("found"), Some(m)) => amount(m),
        (Some("generator_bound"), Some(m)) => format!("at least {}", amount(m)),
        (Some("inconsistent" | "unfinished"), _) => "not settled".into(),
        _ => "no answer".into(),
    };
    let what = if rate { "Highest rate" } else { "Highest concurrency" };
    match goals.as_slice() {
        [g] => format!("{what} meeting {}: {}", g["name"].as_str().unwrap_or("?"), answer(g)),
        gs => {
            let each: Vec<String> = gs
                .iter()
                .map(|g| format!("{} {}", g["name"].as_str().unwrap_or("?"), answer(g)))
                .collect();
            format!("{what} meeting each goal: {}", each.join("; "))
        }
    }
}

/// A sweep page's title from its grid and instances: `Sweep over connections 1–16: peak
/// 61,000 responses/s at 8`, or `baseline vs candidate over connections 1–16`.
pub fn sweep_title(doc: &serde_json::Value) -> String {
    let sw = &doc["sweep"];
    let axis = sw["axis"].as_str().unwrap_or("connections");
    let levels: Vec<u64> = sw["points"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["level"].as_u64()).collect())
        .unwrap_or_default();
    let range = match (levels.iter().min(), levels.iter().max()) {
        (Some(a), Some(b)) if a != b => format!(" {a}–{b}"),
        (Some(a), _) => format!(" {a}"),
        _ => String::new(),
    };
    let instances: Vec<&str> = sw["instances"]
        .as_array()
        .map(|i| i.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    if instances.len() > 1 {
        return format!("{} over {axis}{range}", instances.join(" vs "));
    }
    let peak = &doc["peak"];
    match (peak["throughput_rps"]["mean"].as_f64(), peak[axis].as_u64()) {
        (Some(tp), Some(at)) => {
            let at = if axis == "rate" { format!("{at}/s") } else { at.to_string() };
            // A grid over which throughput only rose has no peak inside it.
            match peak["peaked"].as_bool() {
                Some(false) => format!(
                    "Sweep over {axis}{range}: still rising at the grid's end ({tp:.0} \
                     responses/s at {at})"
                ),
                _ => format!("Sweep over {axis}{range}: peak {tp:.0} responses/s at {at}"),
            }
        }
        _ => format!("Sweep over {axis}{range}: no successful point"),
    }
}

/// Whether a JSON document is a sweep's.
pub fn is_sweep(doc: &serde_json::Value) -> bool {
    doc.get("sweep").is_some_and(|s| s.get("points").is_some()) && doc.get("results").is_none()
}

/// Whether a JSON document is a capacity search's (rather than a run's result).
pub fn is_capacity(doc: &serde_json::Value) -> bool {
    doc.get("capacity").is_some_and(|c| c.get("trials").is_some()) && doc.get("results").is_none()
}

fn page(title: &str, data: &serde_json::Value, script: &str) -> String {
    let title = escape_html(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"shrike {version}\">\n\
         <title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n\
         <body data-render=\"pending\">\n<header><h1>{title}</h1></header>\n\
         <main id=\"report\"><noscript>This report draws its tables and plots with JavaScript; \
         enable it to see them.</noscript></main>\n\
         <script type=\"application/json\" id=\"shrike-data\">{json}</script>\n\
         <script>\n{PLOT_JS}{script}</script>\n</body>\n</html>\n",
        version = env!("CARGO_PKG_VERSION"),
        json = script_safe_json(data),
    )
}

/// JSON that cannot end its `<script>` element early: every `<` (which could open
/// `</script>` or `<!--`) is written as the JSON escape `\u003c`. `<` only occurs inside JSON
/// strings, where the escape means the same character, so `JSON.parse` reads the same data.
/// `>` and `&` are escaped too, so the block is also safe if someone pastes it into XHTML.
fn script_safe_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            // Valid in JSON but line terminators in older JavaScript parsers.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn embedded_json_cannot_close_the_script_and_reads_back() {
        let v = json!({"title": "</script><script>alert(1)</script><!-- & \u{2028}"});
        let s = script_safe_json(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'), "{s}");
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn title_is_escaped() {
        assert_eq!(escape_html("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
    }
}
