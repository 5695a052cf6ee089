//! Notes that change how to read the numbers: closed-loop blocking, open-loop overflow, and
//! whether together they skew the run.

use shrike_stats::duration::format_human_ns;
use shrike_stats::{Counter, StatId};

use super::facts::Facts;

/// Blocked or dropped requests at or above this share of all requests skew the results.
const SIGNIFICANT_SHARE: f64 = 0.01;
/// An achieved rate below this share of the requested one means the load was not offered.
const RATE_SHORTFALL: f64 = 0.95;

/// One sentence on whether blocking and overflow invalidate the run, or `None` when there was
/// neither or too little to matter.
fn what_it_means(f: &Facts) -> Option<String> {
    let g = f.g;
    let blocked = g.stats.get(StatId::SequencerBlocking).count();
    let dropped = g.counters.get(Counter::PoolOverflow);
    if blocked == 0 && dropped == 0 {
        return None;
    }
    let sent = f.sent;
    let blocked_share = blocked as f64 / sent.max(1) as f64;
    let dropped_share = dropped as f64 / (sent + dropped).max(1) as f64;
    let requested =
        f.load.as_ref().filter(|l| l.burst == 1).and_then(|l| l.requested_over(f.window));
    let ratio = requested.zip(f.achieved()).map(|(req, ach)| ach / req);
    let short = ratio.is_some_and(|r| r < RATE_SHORTFALL);
    if blocked_share < SIGNIFICANT_SHARE && dropped_share < SIGNIFICANT_SHARE && !short {
        return Some(format!(
            "What this means: blocking and overflow were rare (under {:.0}% of requests), so \
             the results describe the requested load.",
            SIGNIFICANT_SHARE * 100.0
        ));
    }
    let mut why = Vec::new();
    if blocked > 0 {
        why.push(format!("{:.1}% of requests waited for a connection", 100.0 * blocked_share));
    }
    if dropped > 0 {
        why.push(format!("{:.1}% were dropped", 100.0 * dropped_share));
    }
    if let Some(r) = ratio {
        why.push(format!("{:.1}% of the requested rate was achieved", 100.0 * r));
    }
    Some(format!(
        "What this means: the results are skewed: {}. The latencies above describe the load \
         that was actually offered, which is lighter than the one requested; do not read them \
         as the service's latency at the requested rate.",
        why.join(", ")
    ))
}

/// Explains conditions that make the numbers above misleading.
pub(super) fn render(f: &Facts, s: &mut String) {
    let g = f.g;
    let mut notes: Vec<String> = Vec::new();
    let blocking = g.stats.get(StatId::SequencerBlocking);
    if blocking.count() > 0 {
        let total_ns = blocking.mean() * blocking.count() as f64;
        notes.push(format!(
            "The closed loop waited for a free connection before {} requests, {} in total \
             ({}). Results are skewed when blocking is significant: the target rate was not \
             offered. Add connections, or use an open loop to measure latency at a fixed rate.",
            blocking.count(),
            format_human_ns(total_ns),
            StatId::SequencerBlocking.id(),
        ));
    }
    let overflow = g.counters.get(Counter::PoolOverflow);
    if overflow > 0 {
        notes.push(format!(
            "{overflow} requests were dropped by open-loop overflow ({}): no connection or \
             pending slot was free when they were due, so the achieved rate is below the \
             requested rate. Add connections or allow pending requests.",
            Counter::PoolOverflow.name(),
        ));
    }
    notes.extend(what_it_means(f));
    if notes.is_empty() {
        return;
    }
    s.push_str("\nNotes:\n");
    for n in notes {
        wrap(&n, NOTE_WIDTH, "  - ", "    ", s);
    }
}

/// Notes are prose; wrap them to a width that reads well in an 80-100 column terminal.
const NOTE_WIDTH: usize = 90;

/// Greedy word wrap: `first` prefixes the first line, `rest` the following ones. A word longer
/// than the width gets a line of its own rather than being split.
pub(super) fn wrap(text: &str, width: usize, first: &str, rest: &str, out: &mut String) {
    let mut line = String::from(first);
    let mut line_len = first.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let word_len = word.chars().count();
        if !empty && line_len + 1 + word_len > width {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
            line_len = rest.chars().count();
            empty = true;
        }
        if !empty {
            line.push(' ');
            line_len += 1;
        }
        line.push_str(word);
        line_len += word_len;
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_notes_with_hanging_indent() {
        let mut out = String::new();
        wrap("aaa bbb ccc dddddddddddd e", 12, "  - ", "    ", &mut out);
        assert_eq!(out, "  - aaa bbb\n    ccc\n    dddddddddddd\n    e\n");
        let mut out = String::new();
        wrap("", 12, "  - ", "    ", &mut out);
        assert_eq!(out, "  - \n");
    }
}
