//! Nighthawk's documentation writes JSON options as YAML flow, e.g. the test server's
//! `{response_body_size:20, static_delay: "0s"}` or the client's
//! `--upstream-bind-config {source_address:{address:"127.0.0.1",port_value:0}}`, which Envoy
//! accepts because it falls back to YAML. Users copy those lines, so this rewrites that subset
//! into JSON: bare keys and bare non-numeric scalars become strings and single-quoted strings
//! become double-quoted. It is only consulted after strict JSON has failed, so well-formed JSON
//! never pays for it. One reader for every such option: the config header, the bind config,
//! the request-source plugin config and the stats sinks.

/// Strict JSON, else the relaxed form. The error is strict JSON's, which names the first place
/// the input stopped being JSON.
pub fn parse(input: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(input).or_else(|strict| {
        to_json(input).and_then(|json| serde_json::from_str(&json).ok()).ok_or(strict)
    })
}

/// Returns `None` when the input is not even relaxed YAML flow (an unterminated string).
pub fn to_json(input: &str) -> Option<String> {
    let mut out = String::with_capacity(input.len() + 16);
    let mut rest = input;
    while let Some(c) = rest.chars().next() {
        match c {
            '{' | '}' | '[' | ']' | ',' | ':' => {
                out.push(c);
                rest = &rest[1..];
            }
            c if c.is_whitespace() => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
            '"' => {
                let len = double_quoted_len(rest)?;
                out.push_str(&rest[..len]);
                rest = &rest[len..];
            }
            '\'' => {
                let (value, len) = single_quoted(rest)?;
                push_json_string(&mut out, &value);
                rest = &rest[len..];
            }
            _ => {
                let end = rest.find([',', ':', '{', '}', '[', ']']).unwrap_or(rest.len());
                let token = rest[..end].trim_end();
                if is_json_literal(token) {
                    out.push_str(token);
                } else {
                    push_json_string(&mut out, token);
                }
                rest = &rest[token.len()..];
            }
        }
    }
    Some(out)
}

/// Length of a JSON string literal at the start of `s`, quotes included.
fn double_quoted_len(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate().skip(1) {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// YAML single-quoted scalar: `''` stands for one quote, nothing else is special.
fn single_quoted(s: &str) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut i = 1;
    loop {
        let at = s[i..].find('\'')? + i;
        value.push_str(&s[i..at]);
        if s[at + 1..].starts_with('\'') {
            value.push('\'');
            i = at + 2;
        } else {
            return Some((value, at + 1));
        }
    }
}

fn is_json_literal(token: &str) -> bool {
    matches!(token, "true" | "false" | "null")
        || serde_json::from_str::<serde_json::Number>(token).is_ok()
}

fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::{parse, to_json};

    #[test]
    fn bare_keys_are_quoted_but_strings_are_not_touched() {
        assert_eq!(to_json(r#"{a:"x,b:1", b: {c:2}}"#).unwrap(), r#"{"a":"x,b:1", "b": {"c":2}}"#);
        assert_eq!(to_json(r#"{"a":"b:c"}"#).unwrap(), r#"{"a":"b:c"}"#);
        let v = parse(r#"{source_address:{address:"127.0.0.1",port_value:0}}"#).unwrap();
        assert_eq!(v["source_address"]["address"], "127.0.0.1");
        assert_eq!(v["source_address"]["port_value"], 0);
        assert!(parse("{a: 'x}").is_err());
    }

    #[test]
    fn nighthawk_readme_example() {
        assert_eq!(
            to_json(r#"{response_body_size:20, static_delay: "0s"}"#).unwrap(),
            r#"{"response_body_size":20, "static_delay": "0s"}"#
        );
    }

    #[test]
    fn bare_and_single_quoted_values() {
        let json = to_json(
            "{static_delay: 0.5s, response_headers: [{header: {key: 'x-a', value: 'it''s'}, append: true}]}",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["static_delay"], "0.5s");
        assert_eq!(v["response_headers"][0]["header"]["value"], "it's");
        assert_eq!(v["response_headers"][0]["append"], true);
    }

    #[test]
    fn unterminated_strings_are_rejected() {
        assert_eq!(to_json(r#"{a: "x}"#), None);
        assert_eq!(to_json("{a: 'x}"), None);
    }
}
