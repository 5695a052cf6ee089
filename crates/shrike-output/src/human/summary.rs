//! The compact summary: one screen that leads with what a person came for, as wrk, oha and k6
//! do. The outcome (with exact status codes and every kind of error) comes first, then the
//! achieved rate against the requested one (a separate line: a fast rate of errors is not
//! success), then latency from the schedule and service time side by side, then the notes
//! that change how to read the numbers.

use std::fmt::Write as _;

use serde_json::Value;
use shrike_stats::duration::format_human_ns;
use shrike_stats::{Counter, Failure, StatId, Statistic, Verdict, WorkerResult};

use super::facts::{bytes, Facts};
use super::notes;
use crate::table::{Align, Table};

/// Option keys that name the target, in preference order (`uri` is Nighthawk's name).
const TARGET_KEYS: [&str; 3] = ["uri", "url", "target"];

/// The latency rows, as quantiles (`None`: the mean).
const LATENCY_ROWS: [(&str, Option<f64>); 6] = [
    ("p50", Some(0.5)),
    ("p90", Some(0.9)),
    ("p99", Some(0.99)),
    ("p99.9", Some(0.999)),
    ("max", Some(1.0)),
    ("mean", None),
];

/// The most frequent error messages the summary quotes.
const ERRORS_SHOWN: usize = 3;

pub(super) fn render(f: &Facts, s: &mut String) {
    s.push_str(concat!("Shrike ", env!("CARGO_PKG_VERSION"), ": layer 7 load test results\n\n"));
    let g = f.g;
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(target) = target(&f.result.options) {
        rows.push(("Target:", target));
    }
    let fleet = crate::fleet::generators(f.result);
    if let Some(gens) = &fleet {
        rows.push(("Generators:", generators_line(f, gens)));
    }
    let mut outcome = outcome(g, f.sent, &f.result.verdict);
    // A fleet that lost a generator did not run as asked, however its requests fared.
    let lost: Vec<&str> = fleet
        .iter()
        .flatten()
        .filter(|g| g.state != "completed")
        .map(|g| g.name.as_str())
        .collect();
    if !lost.is_empty() {
        let _ = write!(
            outcome,
            "; generator{} lost: {}",
            if lost.len() == 1 { "" } else { "s" },
            lost.join(", ")
        );
    }
    // A merge of some of a run's shards is not the run.
    if let Some(partial) = f.result.options.get("partial").and_then(Value::as_str) {
        let _ = write!(outcome, "; PARTIAL: {partial}");
    }
    rows.push(("Outcome:", outcome));
    let mut rate = f.rate_line();
    // Why a fleet sent other than asked: a lost generator's share went unsent from its loss,
    // or unsent until it was found lost and re-spread over the others.
    for fate in fleet.iter().flatten().filter_map(crate::fleet::Generator::fate) {
        let _ = write!(rate, "; {fate}");
    }
    rows.push(("Rate:", rate));
    if let Some(l) = lateness(f) {
        rows.push(("Lateness:", l));
    }
    rows.push(("Requests:", requests(f)));
    if let Some(c) = canary(g) {
        rows.push(("Canary:", c));
    }
    rows.push(("Termination:", f.result.termination.describe()));
    rows.push(("Connections:", connections(f)));
    if let Some(t) = transfer(f) {
        rows.push(("Transfer:", t));
    }
    for (label, value) in rows {
        // Writing into a String cannot fail.
        let _ = writeln!(s, "{label:<13}{value}");
    }
    s.push('\n');
    latency(g, s);
    if let Some(gens) = &fleet {
        generators_table(gens, s);
    }
    errors(f, s);
    differences(f, s);
    notes::render(f, s);
}

/// `http://host/ (HTTP/1.1, closed loop)`: what was loaded, and how.
fn target(options: &Value) -> Option<String> {
    let name = TARGET_KEYS.iter().find_map(|k| match options.get(k)? {
        Value::String(t) if !t.is_empty() => Some(t.clone()),
        Value::Array(list) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            (!names.is_empty()).then(|| names.join(", "))
        }
        _ => None,
    })?;
    // A TCP or MySQL replay connects to HOST:PORT; its URL's scheme is only the engine's.
    let replayed = options.get("replay").and_then(|r| r.get("protocol")).and_then(Value::as_str);
    let (name, protocol) = match replayed {
        Some(p @ ("tcp" | "mysql")) => {
            let hostport = name.split("://").nth(1).unwrap_or(&name).trim_end_matches('/');
            (hostport.to_string(), Some(if p == "tcp" { "raw TCP" } else { "MySQL" }))
        }
        _ => (name, None),
    };
    let protocol = protocol.or(match options.get("protocol").and_then(Value::as_str) {
        Some("http1") => Some("HTTP/1.1"),
        Some("http2") => Some("HTTP/2"),
        Some("http3") => Some("HTTP/3"),
        _ => None,
    });
    let replay = options.get("replay").map(|r| {
        let scale = r.get("time_scale").and_then(Value::as_f64).unwrap_or(1.0);
        // The captured paths go under the target's path: say so beside it.
        match r.get("path_prefix").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            Some(prefix) => format!("replay at {scale}× speed, every path under {prefix}"),
            None => format!("replay at {scale}× speed"),
        }
    });
    let looping = match (options.get("open_loop"), options.get("requests_per_second")) {
        _ if replay.is_some() => replay.as_deref(),
        (_, Some(Value::String(r))) if r == "max" => Some("unpaced closed loop"),
        (Some(Value::Bool(true)), _) => Some("open loop"),
        (Some(Value::Bool(false)), _) => Some("closed loop"),
        _ => None,
    };
    // Through a proxy, the numbers include it: say so where the target is named.
    let quic = options.get("protocol").and_then(Value::as_str) == Some("http3");
    let tunnel = options.get("tunnel_options").and_then(|t| {
        let uri = t.get("tunnel_uri").and_then(Value::as_str)?;
        let over = t.get("tunnel_protocol").and_then(Value::as_str).unwrap_or("http1");
        let connect = match over.to_ascii_lowercase().as_str() {
            "http2" if quic => "HTTP/2 CONNECT-UDP",
            "http2" => "HTTP/2 CONNECT",
            "http3" if quic => "HTTP/3 CONNECT-UDP",
            "http3" => "HTTP/3 CONNECT",
            _ => "CONNECT",
        };
        Some(format!("through proxy {uri} ({connect})"))
    });
    let mut how: Vec<&str> = protocol.into_iter().chain(looping).collect();
    how.extend(tunnel.as_deref());
    Some(match how.is_empty() {
        true => name,
        false => format!("{name} ({})", how.join(", ")),
    })
}

/// What came of the requests, before any rate: how many succeeded (a 1xx–3xx answer), and every
/// kind of error with its count, exact status codes included. A run in which nothing
/// completed says so in as many words.
pub(super) fn outcome(g: &WorkerResult, sent: u64, verdict: &Verdict) -> String {
    let c = &g.counters;
    let codes = g.status_codes.non_zero();
    // Exact codes where the result has them; results without them (older ones, other tools')
    // still have the class counters.
    let (ok, answered, mut errors): (u64, u64, Vec<String>) = if codes.is_empty() {
        let ok =
            [Counter::Http1xx, Counter::Http2xx, Counter::Http3xx].map(|k| c.get(k)).iter().sum();
        let bad = [
            (Counter::Http4xx, "4xx"),
            (Counter::Http5xx, "5xx"),
            (Counter::HttpXxx, "other status"),
        ];
        let errors = bad
            .iter()
            .filter(|(k, _)| c.get(*k) > 0)
            .map(|(k, name)| format!("{name} × {}", c.get(*k)))
            .collect();
        (ok, ok + bad.iter().map(|(k, _)| c.get(*k)).sum::<u64>(), errors)
    } else {
        let ok = codes.iter().filter(|(code, _)| *code < 400).map(|x| x.1).sum();
        let errors = codes
            .iter()
            .filter(|(code, _)| *code >= 400)
            .map(|(code, n)| format!("{code} × {n}"))
            .collect();
        (ok, g.status_codes.total(), errors)
    };
    // Successes that were not 2xx (redirects, informational answers) are named: a redirect
    // followed nowhere is not the page asked for.
    let other_ok: Vec<String> = if codes.is_empty() {
        [(Counter::Http1xx, "1xx"), (Counter::Http3xx, "3xx")]
            .iter()
            .filter(|(k, _)| c.get(*k) > 0)
            .map(|(k, name)| format!("{name} × {}", c.get(*k)))
            .collect()
    } else {
        codes
            .iter()
            .filter(|(code, _)| *code < 200 || (300..400).contains(code))
            .map(|(code, n)| format!("{code} × {n}"))
            .collect()
    };
    // Answers without a status (replayed raw TCP, MySQL) succeeded: they were read whole;
    // error answers (MySQL error packets) were answered, not succeeded.
    let (ok, answered) = (
        ok + c.get(Counter::Answered),
        answered + c.get(Counter::Answered) + c.get(Counter::AnswerErrors),
    );
    for (counter, what) in [
        (Counter::RqTimeout, "timed out"),
        (Counter::StreamResets, "reset or broken"),
        (Counter::TunnelFail, "CONNECT failed at the proxy"),
        (Counter::PoolConnectionFailure, "could not connect"),
        (Counter::PoolOverflow, "not sent (pool overflow)"),
        (Counter::RqCancelled, "cancelled at the run's end (queued, or in flight past the grace)"),
        (Counter::AnswerErrors, "answered with an error"),
    ] {
        let n = c.get(counter);
        if n > 0 {
            errors.push(format!("{what} × {n}"));
        }
    }
    let errors = if errors.is_empty() { "no errors".to_string() } else { errors.join(", ") };
    // Out of every request the schedule released: those sent, those that never got a
    // connection, those the pool had no room for, those the run's end cancelled. A request
    // that was never sent (or never finished) failed too.
    let released = sent.max(answered)
        + c.get(Counter::PoolConnectionFailure)
        + c.get(Counter::PoolOverflow)
        + c.get(Counter::RqCancelled);
    let counts = if answered == 0 {
        match released {
            0 => "NO REQUEST WAS SENT".into(),
            _ => format!("NO REQUEST COMPLETED: {errors}"),
        }
    } else {
        let pct = 100.0 * ok as f64 / released as f64;
        let among = match other_ok.is_empty() {
            true => String::new(),
            false => format!(", {} among them", other_ok.join(", ")),
        };
        format!("{ok} of {released} requests succeeded ({pct:.1}%{among}); {errors}")
    };
    // A failed run says so first, whatever its counts look like.
    match verdict {
        Verdict::Failed { why: Failure::Predicate(p), .. } => {
            format!("FAILED (failure predicate {p} fired): {counts}")
        }
        Verdict::Failed { why: Failure::Other(why), .. } => format!("FAILED ({why}): {counts}"),
        // The counts say it in as many words.
        Verdict::Failed { why: Failure::NothingCompleted | Failure::NothingSent, .. } => counts,
        Verdict::Succeeded | Verdict::Interrupted => counts,
    }
}

/// `1000 sent in 10.00s (+1.2ms draining), 2 workers`.
fn requests(f: &Facts) -> String {
    let g = f.g;
    let mut s = format!("{} sent in {}", f.sent, format_human_ns(f.window.as_nanos() as f64));
    // Resent requests went out twice: a server that acted on both counts them twice.
    let retried = g.counters.get(Counter::RqRetry);
    if retried > 0 {
        let _ = write!(
            s,
            ", {retried} of them sent twice (no answer to the first send; upstream_rq_retry)"
        );
    }
    let drain = g.execution_duration.saturating_sub(f.window);
    // Only a drain long enough to notice: waiting on slow or stuck responses.
    if g.sending_duration.is_some() && drain >= std::time::Duration::from_millis(1) {
        let _ = write!(
            s,
            " (then {} for the last responses)",
            format_human_ns(drain.as_nanos() as f64)
        );
    }
    // A fleet's workers are on its Generators line.
    if f.generators().is_none() {
        let workers = f.workers();
        let _ = write!(s, ", {workers} worker{}", if workers == 1 { "" } else { "s" });
    }
    s
}

/// `3 (2 workers each), 1 lost: gen-b (why)`.
fn generators_line(f: &Facts, gens: &[crate::fleet::Generator]) -> String {
    let workers = f.workers();
    let mut s =
        format!("{} ({workers} worker{} each)", gens.len(), if workers == 1 { "" } else { "s" });
    let lost: Vec<String> = gens
        .iter()
        .filter(|g| g.state != "completed")
        .map(|g| match &g.why {
            Some(why) => format!("{} ({why})", g.name),
            None => g.name.clone(),
        })
        .collect();
    if !lost.is_empty() {
        let _ = write!(s, "; {} lost: {}", lost.len(), lost.join(", "));
    }
    s
}

/// One row per generator, so a sick one shows.
fn generators_table(gens: &[crate::fleet::Generator], s: &mut String) {
    s.push('\n');
    let mut t = Table::new(&[
        ("Generator", Align::Left),
        ("state", Align::Left),
        ("requests", Align::Right),
        ("rate", Align::Right),
        ("errors", Align::Right),
        ("p99", Align::Right),
    ]);
    for g in gens {
        t.row(vec![
            format!("  {}", g.name),
            g.state.clone(),
            g.requests.to_string(),
            g.rate.map_or("-".into(), super::facts::rate),
            g.errors.to_string(),
            g.p99_ns.map_or("-".into(), |ns| format_human_ns(ns as f64)),
        ]);
    }
    t.render("", s);
    s.push_str("  (p99 from schedule; a lost generator's figures are what it streamed)\n");
}

/// How late requests left their schedule, where the user asked about it: a replay's fidelity
/// to its captured times, or what a lateness budget (`--max-lateness`) allowed.
fn lateness(f: &Facts) -> Option<String> {
    let s = f.g.stats.get(StatId::SendLateness);
    if s.count() == 0 {
        return None;
    }
    let budget = f.result.options.get("max_lateness").and_then(Value::as_str);
    let replay = crate::options::is_replay(f.result);
    let after = match (replay, budget) {
        (true, _) => "after their captured time".to_string(),
        (false, Some(b)) => format!("after their scheduled time (--max-lateness {b})"),
        (false, None) => "after their scheduled time".to_string(),
    };
    // Whenever it matters, whatever the idle strategy: a p99 past a millisecond, or past the
    // service time itself, is the client's share of latency from the schedule. An unpaced
    // run has no schedule to be late for (its lateness is its wait for a connection).
    // Past the service time only counts from enough requests for a p99 to be more than the
    // one slowest (the first request's, which waits for its connection).
    let p99 = s.clamped_quantile(0.99);
    let service_p50 = f.g.stats.get(StatId::RequestToResponse).clamped_quantile(0.5);
    let enough = s.count() >= 100;
    let matters = p99 > 1_000_000 || (enough && service_p50 > 0 && p99 > service_p50);
    if !replay && budget.is_none() && (f.unpaced() || !matters) {
        return None;
    }
    let q = |q: f64| format_human_ns(s.clamped_quantile(q) as f64);
    let mut line =
        format!("p50 {}, p99 {}, max {} {after}", q(0.5), q(0.99), format_human_ns(s.max() as f64));
    // A budget exceeded says by how much, and for how many requests.
    let budget_ns = budget
        .and_then(|b| shrike_stats::duration::parse_duration(b).ok())
        .map(|b| b.as_nanos() as u64);
    if let Some(b) = budget_ns.filter(|&b| s.max() > b) {
        let over = match s.has_histogram() {
            true => format!("{} requests", s.histogram().count_between(b + 1, s.max())),
            false => "some requests".into(),
        };
        let _ = write!(
            line,
            "; OVER BUDGET by up to {} ({over})",
            format_human_ns((s.max() - b) as f64)
        );
    }
    Some(line)
}

/// Connections opened against the limit, and why more were opened than the limit allows
/// at once, when the counters or options explain it.
fn connections(f: &Facts) -> String {
    let g = f.g;
    let opened = g.counters.get(Counter::CxTotal);
    let workers = f.workers() as u64;
    // A replay opens what its captured clients opened: no limit applies.
    if crate::options::is_replay(f.result) {
        return format!("{opened} opened, as the replayed sessions did");
    }
    let Some(limit) = f.result.options.get("connections").and_then(Value::as_u64) else {
        return format!("{opened} opened");
    };
    // Every generator of a fleet ran the workers, each with the limit.
    let workers = workers * f.generators().unwrap_or(1) as u64;
    let total = limit * workers;
    let mut s = match (workers, f.generators()) {
        (1, _) => format!("{opened} opened (limit {limit})"),
        (_, Some(n)) => format!(
            "{opened} opened (limit {limit} per worker × {} on {n} generators = {total})",
            workers / n as u64
        ),
        _ => format!("{opened} opened (limit {limit} per worker × {workers} = {total})"),
    };
    if opened <= total {
        return s;
    }
    let mut why = Vec::new();
    let per_connection = f
        .result
        .options
        .get("max_requests_per_connection")
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()));
    if let Some(n) = per_connection.filter(|n| *n < f.sent) {
        why.push(format!(
            "each is replaced after {n} request{} (--max-requests-per-connection)",
            if n == 1 { "" } else { "s" }
        ));
    }
    let closed = g.counters.get(Counter::CxDestroyRemote);
    if closed > 0 {
        why.push(format!("the server closed {closed}"));
    }
    let broken = g.counters.get(Counter::CxProtocolError) + g.counters.get(Counter::RqTimeout);
    if broken > 0 {
        why.push(format!("{broken} were closed after a protocol error or timeout"));
    }
    if !why.is_empty() {
        let _ = write!(s, ": {}", why.join("; "));
    }
    s
}

/// Bytes per second each way, over the whole execution (bytes flow until the last response).
fn transfer(f: &Facts) -> Option<String> {
    let c = &f.g.counters;
    let (rx, tx) = (c.get(Counter::CxRxBytesTotal), c.get(Counter::CxTxBytesTotal));
    if rx == 0 && tx == 0 {
        return None;
    }
    let total = format!("{} received, {} sent", bytes(rx as f64), bytes(tx as f64));
    let in_all = format!("{} and {} in all", bytes(rx as f64), bytes(tx as f64));
    if !f.rates_mean_something() {
        return Some(total);
    }
    let secs = f.g.execution_duration.as_secs_f64();
    Some(format!(
        "{}/s received, {}/s sent ({in_all})",
        bytes(rx as f64 / secs),
        bytes(tx as f64 / secs)
    ))
}

/// Latency from the schedule and service time side by side.
fn latency(g: &WorkerResult, s: &mut String) {
    let scheduled = g.stats.get(StatId::ScheduledToResponse);
    let service = g.stats.get(StatId::RequestToResponse);
    if scheduled.count() == 0 && service.count() == 0 {
        s.push_str("Latency: no response completed, so none was measured.\n");
        return;
    }
    let mut t = Table::new(&[
        ("Latency", Align::Left),
        ("from schedule", Align::Right),
        ("service time", Align::Right),
    ]);
    for (label, q) in LATENCY_ROWS {
        t.row(vec![format!("  {label}"), cell(scheduled, q), cell(service, q)]);
    }
    t.render("", s);
    s.push_str(
        "  (from schedule: scheduled send → response end, free of coordinated omission;\n   \
         service time: actual send → response end, what wrk and ab report)\n",
    );
}

fn cell(stat: &Statistic, q: Option<f64>) -> String {
    if stat.count() == 0 {
        return "-".into();
    }
    match q {
        None => format_human_ns(stat.mean()),
        Some(q) => format_human_ns(stat.clamped_quantile(q) as f64),
    }
}

/// The most frequent error messages, so a failed run says what failed.
fn errors(f: &Facts, s: &mut String) {
    most_frequent(&f.result.errors, "Errors", ERRORS_SHOWN, s);
}

/// A replay's canary diff: how many answers were as captured.
fn canary(g: &WorkerResult) -> Option<String> {
    let matched = g.counters.get(Counter::CanaryMatched);
    let differed = g.counters.get(Counter::CanaryDiffered);
    let compared = matched + differed;
    if compared == 0 {
        return None;
    }
    Some(match differed {
        0 => format!("all {compared} compared answers as captured (status and body size)"),
        _ => format!(
            "{differed} of {compared} compared answers differ from the capture ({:.1}%); \
             {matched} as captured",
            100.0 * differed as f64 / compared as f64
        ),
    })
}

/// What differed from the capture, most frequent first.
fn differences(f: &Facts, s: &mut String) {
    most_frequent(&f.result.differences, "Canary differences (captured → replayed)", 10, s);
}

/// `title:` and the `shown` most frequent of `counts`, with how many kinds were left out.
fn most_frequent(
    counts: &std::collections::BTreeMap<String, u64>,
    title: &str,
    shown: usize,
    s: &mut String,
) {
    if counts.is_empty() {
        return;
    }
    let mut by_count: Vec<(&String, &u64)> = counts.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let _ = writeln!(s, "\n{title}:");
    for (msg, n) in by_count.iter().take(shown) {
        let _ = writeln!(s, "  {n} × {msg}");
    }
    if by_count.len() > shown {
        let _ = writeln!(s, "  … and {} other kinds", by_count.len() - shown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_prefers_uri_joins_lists_and_says_how() {
        assert_eq!(
            target(&json!({"uri": "http://a/", "url": "http://b/"})).as_deref(),
            Some("http://a/")
        );
        assert_eq!(target(&json!({"url": ["x", "y"]})).as_deref(), Some("x, y"));
        assert_eq!(
            target(&json!({"uri": "http://a/", "protocol": "http2", "open_loop": true})).as_deref(),
            Some("http://a/ (HTTP/2, open loop)")
        );
        assert_eq!(
            target(&json!({"uri": "u", "open_loop": false, "requests_per_second": "max"}))
                .as_deref(),
            Some("u (unpaced closed loop)")
        );
        let tunnelled = json!({"uri": "u", "protocol": "http1", "tunnel_options":
            {"tunnel_uri": "127.0.0.1:3128", "tunnel_protocol": "HTTP2"}});
        assert_eq!(
            target(&tunnelled).as_deref(),
            Some("u (HTTP/1.1, through proxy 127.0.0.1:3128 (HTTP/2 CONNECT))")
        );
        let udp = json!({"uri": "u", "protocol": "http3", "tunnel_options":
            {"tunnel_uri": "https://p:443", "tunnel_protocol": "http2"}});
        assert_eq!(
            target(&udp).as_deref(),
            Some("u (HTTP/3, through proxy https://p:443 (HTTP/2 CONNECT-UDP))")
        );
        let masque = json!({"uri": "u", "protocol": "http3", "tunnel_options":
            {"tunnel_uri": "https://p:443", "tunnel_protocol": "HTTP3"}});
        assert_eq!(
            target(&masque).as_deref(),
            Some("u (HTTP/3, through proxy https://p:443 (HTTP/3 CONNECT-UDP))")
        );
        assert_eq!(target(&json!({"uri": ""})), None);
        assert_eq!(target(&json!(null)), None);
    }
}
