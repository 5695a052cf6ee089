//! The JSON result as YAML: the same document, value for value, in block style.
//!
//! The emitter is small and written here rather than taken from a crate (serde_yaml is
//! unmaintained). It walks the `serde_json::Value` of the JSON document, keeps key order, and
//! quotes every string that a YAML 1.1 or 1.2 reader could take for something else: numbers,
//! booleans (`yes`, `off`), null, timestamps, and anything with YAML syntax in it. Quoted strings
//! use double quotes with JSON-style escapes, which YAML's double-quoted style shares.

use std::fmt::Write as _;
use std::io;

use serde_json::{Number, Value};
use shrike_stats::RunResult;

use crate::json::to_json_value;

/// Writes `result` as a YAML document (the JSON document's values, in the same order).
pub fn write(result: &RunResult, out: &mut dyn io::Write) -> io::Result<()> {
    write_value(&to_json_value(result), out)
}

/// Writes any JSON value as a YAML document. `transform` uses it to pass a stored document
/// through untouched.
pub fn write_value(value: &Value, out: &mut dyn io::Write) -> io::Result<()> {
    out.write_all(to_string(value).as_bytes())
}

/// The YAML text of `value`, ending with a newline.
pub fn to_string(value: &Value) -> String {
    let mut s = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(m, 0, &mut s),
        Value::Array(a) if !a.is_empty() => sequence(a, 0, &mut s),
        v => {
            s.push_str(&scalar(v));
            s.push('\n');
        }
    }
    s
}

fn pad(indent: usize, s: &mut String) {
    s.extend(std::iter::repeat_n(' ', indent));
}

/// `true` for values written on their key's line: scalars and empty collections.
fn inline(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => true,
    }
}

fn mapping(m: &serde_json::Map<String, Value>, indent: usize, s: &mut String) {
    for (k, v) in m {
        pad(indent, s);
        s.push_str(&string(k));
        s.push(':');
        if inline(v) {
            s.push(' ');
            s.push_str(&scalar(v));
            s.push('\n');
        } else {
            s.push('\n');
            block(v, indent + 2, s);
        }
    }
}

fn sequence(a: &[Value], indent: usize, s: &mut String) {
    for v in a {
        if inline(v) {
            pad(indent, s);
            s.push_str("- ");
            s.push_str(&scalar(v));
            s.push('\n');
        } else if let Value::Object(m) = v {
            // Compact form: the mapping's first key shares the dash's line. Rendered at the
            // item's indent, then the first line's indent is replaced by the dash.
            let mut item = String::new();
            mapping(m, indent + 2, &mut item);
            pad(indent, s);
            s.push_str("- ");
            s.push_str(&item[indent + 2..]);
        } else {
            pad(indent, s);
            s.push_str("-\n");
            block(v, indent + 2, s);
        }
    }
}

fn block(v: &Value, indent: usize, s: &mut String) {
    match v {
        Value::Object(m) => mapping(m, indent, s),
        Value::Array(a) => sequence(a, indent, s),
        // Callers only pass non-inline values here.
        other => {
            pad(indent, s);
            s.push_str(&scalar(other));
            s.push('\n');
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(t) => string(t),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A number both YAML 1.1 and 1.2 readers resolve to the same value. YAML 1.1 (PyYAML, Go's
/// yaml.v2) only reads a float with a dot and a signed exponent, so `1e-7` becomes `1.0e-7`.
fn number(n: &Number) -> String {
    let t = n.to_string();
    if n.is_f64() {
        let (mantissa, exp) = match t.split_once(['e', 'E']) {
            Some((m, e)) => (m, Some(e)),
            None => (t.as_str(), None),
        };
        let mut out = mantissa.to_string();
        if !out.contains('.') {
            out.push_str(".0");
        }
        if let Some(e) = exp {
            out.push('e');
            if !e.starts_with(['-', '+']) {
                out.push('+');
            }
            out.push_str(e);
        }
        return out;
    }
    t
}

/// Words YAML 1.1 resolves to booleans or null; quoted so they stay strings.
const RESERVED: [&str; 14] =
    ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", "nan", "inf", "none", ""];

/// A string as a plain scalar when that is unambiguous, else double-quoted.
fn string(t: &str) -> String {
    let plain = t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && t.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
        && !RESERVED.contains(&t.to_ascii_lowercase().as_str());
    if plain {
        return t.to_string();
    }
    let mut s = String::with_capacity(t.len() + 2);
    s.push('"');
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            '\r' => s.push_str("\\r"),
            // Not printable in YAML's character set (C0/C1 controls, DEL, line and paragraph
            // separators, BOM): escaped so the stream stays valid.
            c if (c as u32) < 0x20
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}') =>
            {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn block_style_keeps_order_and_quotes_ambiguous_strings() {
        let v = json!({
            "z": 1, "a": [1, {"k": "v", "n": null}, [], {}], "s": "yes", "t": "2026-01-01",
            "e": {}, "f": 1e-7, "g": 300.0, "q": "a: b", "nested": [[1, 2]]
        });
        assert_eq!(
            to_string(&v),
            "z: 1\na:\n  - 1\n  - k: v\n    \"n\": null\n  - []\n  - {}\ns: \"yes\"\nt: \"2026-01-01\"\n\
             e: {}\nf: 1.0e-7\ng: 300.0\nq: \"a: b\"\nnested:\n  -\n    - 1\n    - 2\n"
        );
    }

    #[test]
    fn escapes_controls_and_quotes() {
        assert_eq!(string("a\"b\\c\n\u{1}\u{85}"), "\"a\\\"b\\\\c\\n\\u0001\\u0085\"");
        assert_eq!(string("worker_0"), "worker_0");
        assert_eq!(string("No"), "\"No\"");
        assert_eq!(string("0.5s"), "\"0.5s\"");
        assert_eq!(string("héllo"), "\"héllo\"");
        assert_eq!(to_string(&json!("x")), "x\n");
    }
}
