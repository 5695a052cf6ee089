//! Better "did you mean" for mistyped flags. clap's similarity measure suggests
//! `--max-requests-per-connection` for `--rsp`; users coming from wrk, hey, oha, k6 or vegeta
//! also type the names their tools use (`--rate`, `--qps`, `--threads`). This picks the flag
//! by edit distance with transpositions, and knows those synonyms.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;

/// Names other load testers use, and the flag Shrike calls it.
const SYNONYMS: &[(&str, &str)] = &[
    ("rate", "rps"),
    ("qps", "rps"),
    ("requests-per-second", "rps"),
    ("conns", "connections"),
    ("conn", "connections"),
    ("threads", "concurrency"),
    ("workers", "concurrency"),
    ("header", "request-header"),
    ("method", "request-method"),
    ("body", "request-body-file"),
    ("time", "duration"),
    ("insecure", "tls-insecure"),
    ("http2", "protocol"),
    ("http3", "protocol"),
];

/// The flag `typed` (without dashes) most likely meant, among `known`.
pub fn suggest<'a>(typed: &str, known: &[&'a str]) -> Option<&'a str> {
    let typed = typed.trim_start_matches('-');
    let typed = typed.split('=').next().unwrap_or(typed);
    if let Some((_, to)) = SYNONYMS.iter().find(|(from, _)| *from == typed) {
        return known.iter().copied().find(|k| k == to);
    }
    let (best, d) =
        known.iter().map(|k| (*k, osa_distance(typed, k))).min_by_key(|&(k, d)| (d, k.len()))?;
    // Close enough to be the same word mistyped: at most two edits, and fewer than half of it.
    (d <= 2 && d * 2 < typed.len().max(2)).then_some(best)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// neighbours each cost 1 (`rsp` → `rps` is one edit, not two).
fn osa_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// For an unknown-flag error of a subcommand: the message with Shrike's suggestion in place of
/// clap's. `None` leaves the error as clap reports it.
pub fn rewrite(err: &clap::Error, args: &[String]) -> Option<String> {
    if err.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(typed)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    if !typed.starts_with("--") {
        return None;
    }
    let root = crate::Cli::command();
    let sub_name = args.iter().skip(1).find(|a| !a.starts_with('-'))?;
    let sub = root.get_subcommands().find(|s| s.get_name() == sub_name)?;
    let names: Vec<&str> = sub
        .get_arguments()
        .flat_map(|a| a.get_long().into_iter().chain(a.get_all_aliases().into_iter().flatten()))
        .collect();
    let tip = match suggest(typed, &names) {
        Some(s) => format!("\n\n  tip: a similar argument exists: '--{s}'"),
        None => String::new(),
    };
    Some(format!(
        "error: unexpected argument '{typed}' found{tip}\n\nUsage: shrike {sub_name} [OPTIONS]\n\n\
         For more information, try 'shrike {sub_name} --help'."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[&str] = &[
        "rps",
        "connections",
        "concurrency",
        "max-requests-per-connection",
        "duration",
        "request-header",
        "timeout",
    ];

    #[test]
    fn typos_and_synonyms_find_the_flag() {
        assert_eq!(suggest("--rsp", FLAGS), Some("rps"));
        assert_eq!(suggest("--rate", FLAGS), Some("rps"));
        assert_eq!(suggest("--qps=100", FLAGS), Some("rps"));
        assert_eq!(suggest("--conections", FLAGS), Some("connections"));
        assert_eq!(suggest("--durtion", FLAGS), Some("duration"));
        assert_eq!(suggest("--threads", FLAGS), Some("concurrency"));
        assert_eq!(suggest("--frobnicate", FLAGS), None);
        assert_eq!(suggest("--x", FLAGS), None);
    }

    #[test]
    fn distance_counts_a_swap_once() {
        assert_eq!(osa_distance("rsp", "rps"), 1);
        assert_eq!(osa_distance("abc", "abc"), 0);
        assert_eq!(osa_distance("", "abc"), 3);
    }
}
