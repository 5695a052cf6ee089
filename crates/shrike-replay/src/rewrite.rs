//! `--rewrite` rules: regular expressions with captures over what a replayed HTTP request
//! sends, as GoReplay's `--http-rewrite-url` and `--http-rewrite-header` do, so production
//! traffic can be pointed at a candidate whose routes or headers differ:
//!
//! - `path:REGEX=>REPLACEMENT` rewrites the request target (path and query);
//! - `header:NAME:REGEX=>REPLACEMENT` rewrites the value of each NAME header (any case).
//!
//! The replacement names captures as `$1` or `${name}` (`$$` is a dollar); a name the
//! expression has no group for is refused when the rule is read (the regex crate would expand
//! it to nothing). Rules apply in the order given, each to what the ones before it left, and
//! every match in the text is replaced. Each rule counts the requests it changed, so one
//! that never matched is reported.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use regex::Regex;

/// The rules, ready to apply. Clones share the counts of what each rule changed.
#[derive(Clone, Debug, Default)]
pub struct Rewrites {
    rules: Vec<Rule>,
    /// Per rule, the texts (paths, header values) it changed.
    hits: Arc<Vec<AtomicU64>>,
}

#[derive(Clone, Debug)]
struct Rule {
    /// The header rewritten (lowercase); `None`: the request target.
    header: Option<String>,
    pattern: Regex,
    replacement: String,
    /// As given, for the wire and the result's options.
    text: String,
}

impl PartialEq for Rewrites {
    fn eq(&self, o: &Rewrites) -> bool {
        self.texts() == o.texts()
    }
}

impl Rewrites {
    /// Reads rules as given on the command line; an error names the rule and what is wrong.
    pub fn parse(rules: &[String]) -> Result<Rewrites, String> {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|r| rule(r).map_err(|e| format!("{r:?}: {e}")))
            .collect::<Result<_, _>>()?;
        let hits = Arc::new(rules.iter().map(|_| AtomicU64::new(0)).collect());
        Ok(Rewrites { rules, hits })
    }

    /// Each rule as given, and how many paths or header values it changed so far.
    pub fn matched(&self) -> Vec<(String, u64)> {
        let hits = |i: usize| self.hits.get(i).map_or(0, |h| h.load(Ordering::Relaxed));
        self.rules.iter().enumerate().map(|(i, r)| (r.text.clone(), hits(i))).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules as they were given.
    pub fn texts(&self) -> Vec<String> {
        self.rules.iter().map(|r| r.text.clone()).collect()
    }

    /// The request target after the path rules (borrowed when no rule is for paths: most
    /// replays have none, and the feeder fits every request).
    pub fn path<'a>(&self, path: &'a str) -> std::borrow::Cow<'a, str> {
        match self.rules.iter().any(|r| r.header.is_none()) {
            true => self.apply(None, path).into(),
            false => path.into(),
        }
    }

    /// Header `name`'s value after its rules, if any rule is for it (values that are no UTF-8
    /// are left as they are).
    pub fn header(&self, name: &str, value: &[u8]) -> Option<Vec<u8>> {
        let ours = |r: &&Rule| r.header.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(name));
        if !self.rules.iter().any(|r| ours(&r)) {
            return None;
        }
        let text = std::str::from_utf8(value).ok()?;
        Some(self.apply(Some(name), text).into_bytes())
    }

    fn apply(&self, header: Option<&str>, text: &str) -> String {
        let mut out = text.to_string();
        for (i, r) in self.rules.iter().enumerate() {
            let applies = match (&r.header, header) {
                (None, None) => true,
                (Some(h), Some(name)) => h.eq_ignore_ascii_case(name),
                _ => false,
            };
            if !applies {
                continue;
            }
            if let std::borrow::Cow::Owned(changed) =
                r.pattern.replace_all(&out, r.replacement.as_str())
            {
                if let Some(h) = self.hits.get(i) {
                    h.fetch_add(1, Ordering::Relaxed);
                }
                out = changed;
            }
        }
        out
    }
}

fn rule(text: &str) -> Result<Rule, String> {
    let (header, rest) = if let Some(rest) = text.strip_prefix("path:") {
        (None, rest)
    } else if let Some(rest) = text.strip_prefix("header:") {
        let (name, rest) = rest.split_once(':').ok_or("expected header:NAME:REGEX=>REPLACEMENT")?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(format!("{name:?} is no header name"));
        }
        (Some(name.to_ascii_lowercase()), rest)
    } else {
        return Err("expected path:REGEX=>REPLACEMENT or header:NAME:REGEX=>REPLACEMENT".into());
    };
    let (pattern, replacement) = rest.split_once("=>").ok_or("expected REGEX=>REPLACEMENT")?;
    let pattern = Regex::new(pattern).map_err(|e| format!("not a regular expression: {e}"))?;
    check_references(replacement, &pattern)?;
    if header.is_none() && !replacement.starts_with('/') && !replacement.starts_with('$') {
        return Err("a path's replacement starts with / (or a capture that holds one)".into());
    }
    Ok(Rule { header, pattern, replacement: replacement.to_string(), text: text.to_string() })
}

/// Refuses a replacement that names a group the expression does not have, read as the regex
/// crate reads it: `$$` is a dollar; `${name}` runs to its brace; otherwise the name is the
/// longest run of letters, digits and underscores (so `$1a` names a group "1a").
fn check_references(replacement: &str, pattern: &Regex) -> Result<(), String> {
    let groups = pattern.captures_len() - 1;
    let names: Vec<&str> = pattern.capture_names().flatten().collect();
    let have = || match (groups, names.is_empty()) {
        (0, _) => "no groups".to_string(),
        (1, true) => "1 group ($1)".to_string(),
        (n, true) => format!("{n} groups ($1 to ${n})"),
        (n, false) => format!("{n} groups ($1 to ${n}; named {})", names.join(", ")),
    };
    let mut rest = replacement;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            rest = after;
            continue;
        }
        let (name, braced) = match rest.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) => {
                    let name = &inner[..end];
                    rest = &inner[end + 1..];
                    (name, true)
                }
                // No closing brace: the dollar is literal.
                None => continue,
            },
            None => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                rest = &rest[end..];
                (name, false)
            }
        };
        if name.is_empty() {
            continue;
        }
        let known = match name.parse::<usize>() {
            Ok(n) => n <= groups,
            Err(_) => names.contains(&name),
        };
        if !known {
            let spelled = if braced { format!("${{{name}}}") } else { format!("${name}") };
            let hint = match (braced, name.find(|c: char| !c.is_ascii_digit())) {
                (false, Some(k)) if k > 0 => {
                    format!(
                        " (read as a group named {name:?}: write ${{{}}}{})",
                        &name[..k],
                        &name[k..]
                    )
                }
                _ => String::new(),
            };
            return Err(format!("{spelled}: the expression has {}{hint}", have()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rules(r: &[&str]) -> Rewrites {
        Rewrites::parse(&r.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn paths_and_headers_are_rewritten_in_order_with_captures() {
        let r = rules(&[
            r"path:^/v1/user/([^/]+)/ping=>/v2/user/$1/ping",
            r"path:^/v2/=>/api/v2/",
            r"header:User-Agent:^curl/(\S+)$=>canary-of-curl-${1}",
        ]);
        assert_eq!(r.path("/v1/user/ann/ping?x=1"), "/api/v2/user/ann/ping?x=1");
        assert_eq!(r.path("/other"), "/other");
        assert_eq!(r.header("user-agent", b"curl/8.5.0").unwrap(), b"canary-of-curl-8.5.0");
        assert_eq!(r.header("accept", b"*/*"), None);
    }

    #[test]
    fn bad_rules_name_the_rule_and_the_problem() {
        let bad = |r: &str| Rewrites::parse(&[r.to_string()]).unwrap_err();
        assert!(bad("/a=>/b").contains("expected path:REGEX"), "{}", bad("/a=>/b"));
        assert!(bad("path:(=>/b").contains("not a regular expression"));
        assert!(bad("path:/a").contains("REGEX=>REPLACEMENT"));
        assert!(bad("path:/a=>b").contains("starts with /"));
        assert!(bad("header::x=>y").contains("no header name"));
        assert!(bad("header:host").contains("header:NAME"));
        // Groups the expression does not have, which the regex crate expands to nothing.
        assert_eq!(
            bad("path:^/api/(.*)=>/v2/$2"),
            "\"path:^/api/(.*)=>/v2/$2\": $2: the expression has 1 group ($1)"
        );
        assert!(
            bad("path:^/(\\d+)=>/$1a").contains("write ${1}a"),
            "{}",
            bad("path:^/(\\d+)=>/$1a")
        );
        assert!(bad("path:^/(?P<id>x)=>/${name}").contains("named id"));
        // What is fine: $$, a braced group, a named one, a literal dollar without a name.
        for ok in ["path:^/(a)(?P<b>b)=>/$1/${2}/$b/${b}/$$/$", "header:x:^(.*)$=>${1}x"] {
            assert!(Rewrites::parse(&[ok.to_string()]).is_ok(), "{ok}");
        }
    }

    #[test]
    fn each_rule_counts_what_it_changed() {
        let r = rules(&[r"path:^/a/=>/b/", r"path:^/never/=>/x/"]);
        let shared = r.clone();
        assert_eq!(shared.path("/a/1"), "/b/1");
        assert_eq!(shared.path("/c"), "/c");
        assert_eq!(
            r.matched(),
            vec![("path:^/a/=>/b/".to_string(), 1), ("path:^/never/=>/x/".to_string(), 0)]
        );
    }
}
