//! Plain-text tables with aligned columns, shared by the text formats.

use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    /// Numbers line up on their last digit, which is what the eye compares.
    Right,
}

/// A table rendered with two spaces between columns and no trailing whitespace.
#[derive(Debug)]
pub(crate) struct Table {
    headers: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(headers: &[(&'static str, Align)]) -> Self {
        Table { headers: headers.to_vec(), rows: Vec::new() }
    }

    /// Adds a row; missing cells render empty and extra cells are ignored.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Appends the table to `out`, every line prefixed with `indent`.
    pub(crate) fn render(&self, indent: &str, out: &mut String) {
        let widths: Vec<usize> = self
            .headers
            .iter()
            .enumerate()
            .map(|(i, (h, _))| {
                let cells = self.rows.iter().filter_map(|r| r.get(i)).map(|c| width(c));
                cells.chain([width(h)]).max().unwrap_or(0)
            })
            .collect();
        let header: Vec<&str> = self.headers.iter().map(|(h, _)| *h).collect();
        self.line(indent, &header, &widths, out);
        for row in &self.rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            self.line(indent, &cells, &widths, out);
        }
    }

    fn line(&self, indent: &str, cells: &[&str], widths: &[usize], out: &mut String) {
        let mut line = String::from(indent);
        for (i, ((_, align), w)) in self.headers.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let cell = cells.get(i).copied().unwrap_or("");
            let pad = w.saturating_sub(width(cell));
            // Writing into a String cannot fail.
            let _ = match align {
                Align::Left => write!(line, "{cell}{:pad$}", ""),
                Align::Right => write!(line, "{:pad$}{cell}", ""),
            };
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// Display width in characters (unit names such as `µs` are not one byte wide).
fn width(s: &str) -> usize {
    s.chars().count()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&[("Name", Align::Left), ("Value", Align::Right)]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["longer".into(), "12345".into()]);
        t.row(vec!["µs".into()]);
        let mut out = String::new();
        t.render("  ", &mut out);
        assert_eq!(out, "  Name    Value\n  a           1\n  longer  12345\n  µs\n");
    }
}
