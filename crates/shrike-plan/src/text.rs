//! Plain-text tables for the planners' human reports.

use std::fmt::Write as _;

/// Right-aligned columns, two spaces apart, every line indented by two.
pub(crate) fn table(rows: &[Vec<String>], s: &mut String) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|x| x.chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&width).map(|(x, w)| format!("{x:>w$}")).collect();
        let _ = writeln!(s, "  {}", cells.join("  "));
    }
}
