//! `--rewrite` rules: regular expressions with captures over what a replayed HTTP request
//! sends, as GoReplay's `--http-rewrite-url` and `--http-rewrite-header` do, so production
//! traffic can be pointed at a candidate whose routes or headers differ:
//!
//! - `path:REGEX=>REPLACEMENT` rewrites the request target (path and query);
//! - `header:NAME:REGEX=>REPLACEMENT` rewrites the value of each NAME header (any case).
//!
//! The replacement names captures as `$1` or `${name}` (`$$` is a dollar). Rules apply in
//! the order given, each to what the ones before it left, and every match in the text is
//! replaced.

use regex::Regex;

/// The rules, ready to apply.
#[derive(Clone, Debug, Default)]
pub struct Rewrites {
    rules: Vec<Rule>,
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
        let rules = rules.iter().map(|r| rule(r).map_err(|e| format!("{r:?}: {e}")));
        Ok(Rewrites { rules: rules.collect::<Result<_, _>>()? })
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
        for r in &self.rules {
            let applies = match (&r.header, header) {
                (None, None) => true,
                (Some(h), Some(name)) => h.eq_ignore_ascii_case(name),
                _ => false,
            };
            if applies {
                out = r.pattern.replace_all(&out, r.replacement.as_str()).into_owned();
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
    if header.is_none() && !replacement.starts_with('/') && !replacement.starts_with('$') {
        return Err("a path's replacement starts with / (or a capture that holds one)".into());
    }
    Ok(Rule { header, pattern, replacement: replacement.to_string(), text: text.to_string() })
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
    }
}
