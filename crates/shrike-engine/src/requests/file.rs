//! Request-list files.
//!
//! The format follows the file's extension:
//! - `.jsonl` / `.ndjson`: one JSON object per line; blank lines and lines starting with `#`
//!   are skipped.
//! - `.json`: a JSON array of entries, or JSON objects one after another (JSON Lines, and
//!   pretty-printed objects too).
//! - `.yaml` / `.yml`: a YAML sequence of entries.
//!
//! Each entry is an object with these fields (all optional; an empty entry is a GET of the
//! URL's path):
//! - `method`: `GET` by default;
//! - `path` (path and query, starting with `/`) or `url` (a full URL, which must name one of the
//!   run's endpoints by scheme, host and port: the entry is sent to that endpoint only); with
//!   neither, the endpoint's own path;
//! - `headers`: an object `{"name": "value"}` or a list of `"name: value"` strings;
//! - one body: `body` (inline text), `body_file` (a file's bytes, sent verbatim; relative paths
//!   are relative to the list file), or `json` (any JSON value, sent compactly, with
//!   `content-type: application/json` unless the entry sets one);
//! - `expect`: `{"status": 200}` or `{"status": [200, 201]}`; other statuses count in
//!   `benchmark.expectation_mismatch`.
//!
//! Placeholders ([`super::template`]) work in `path`, header values, `body` and string values
//! inside `json`. Every problem is reported with the file, the entry's line and what is wrong.
//!
//! Nighthawk's file-based request source (`nighthawk.file-based-request-source-plugin`) and
//! in-line options list are read by [`super::nighthawk::nighthawk_plugin`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::config::{Body, RequestSpec};
use crate::target::Target;

/// A request file that cannot be used; the message names the file, the line and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileError(pub(super) String);

/// Reads a request list. `endpoints` are the run's targets (a `url` entry must name one);
/// `headers` are added to every entry that does not set a header of the same name.
pub fn load(
    path: &Path,
    endpoints: &[Target],
    headers: &[(String, String)],
) -> Result<Vec<RequestSpec>, FileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| FileError(format!("cannot read request file {name}: {e}")))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&name, &ext, &text, &base, endpoints, headers)
}

/// A request list's text in the format `ext` names; body files are relative to `base`.
pub fn parse(
    name: &str,
    ext: &str,
    text: &str,
    base: &Path,
    endpoints: &[Target],
    headers: &[(String, String)],
) -> Result<Vec<RequestSpec>, FileError> {
    let raw = match ext {
        "jsonl" | "ndjson" => json_lines(name, text)?,
        "json" => json(name, text)?,
        "yaml" | "yml" => yaml(name, text)?,
        _ => {
            return Err(FileError(format!(
                "request file {name}: unknown format; name it .jsonl, .json, .yaml or .yml"
            )))
        }
    };
    if raw.is_empty() {
        return Err(FileError(format!("request file {name} has no entries")));
    }
    raw.into_iter()
        .map(|(at, e)| {
            let origin = format!("{name}:{at}");
            e.into_spec(base, endpoints, headers)
                .map(|s| s.with_origin(origin.clone()))
                .map_err(|msg| FileError(format!("{origin}: {msg}")))
        })
        .collect()
}

/// Where an entry starts: a line number, or an entry number when lines are unknown.
#[derive(Clone, Copy, Debug)]
pub(super) enum At {
    Line(usize),
    Entry(usize),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Line(n) => write!(f, "{n}"),
            At::Entry(n) => write!(f, "entry {n}"),
        }
    }
}

fn json_lines(name: &str, text: &str) -> Result<Vec<(At, RawEntry)>, FileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let e = serde_json::from_str::<RawEntry>(l)
            .map_err(|e| FileError(format!("{name}:{}: {e}", i + 1)))?;
        out.push((At::Line(i + 1), e));
    }
    Ok(out)
}

fn json(name: &str, text: &str) -> Result<Vec<(At, RawEntry)>, FileError> {
    if text.trim_start().starts_with('[') {
        let v: Vec<RawEntry> =
            serde_json::from_str(text).map_err(|e| FileError(format!("{name}: {e}")))?;
        return Ok(v.into_iter().enumerate().map(|(i, e)| (At::Entry(i + 1), e)).collect());
    }
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<RawEntry>();
    loop {
        // The entry starts at the first non-blank byte after the previous one.
        let offset = stream.byte_offset();
        let start = offset + (text[offset..].len() - text[offset..].trim_start().len());
        let line = text[..start].matches('\n').count() + 1;
        match stream.next() {
            None => return Ok(out),
            Some(Ok(e)) => out.push((At::Line(line), e)),
            Some(Err(e)) => return Err(FileError(format!("{name}: {e}"))),
        }
    }
}

fn yaml(name: &str, text: &str) -> Result<Vec<(At, RawEntry)>, FileError> {
    let v: Vec<RawEntry> = serde_norway::from_str(text)
        .map_err(|e| FileError(format!("{name}: {e} (expected a YAML list of request entries)")))?;
    Ok(with_lines(text, v))
}

/// Pairs YAML list items with their lines: the lines starting with `- ` at the smallest such
/// indentation are the top-level items (block style). Flow-style lists fall back to entry
/// numbers.
pub(super) fn with_lines<T>(text: &str, items: Vec<T>) -> Vec<(At, T)> {
    let dashes: Vec<(usize, usize)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim_start();
            (t == "-" || t.starts_with("- ")).then(|| (i + 1, l.len() - t.len()))
        })
        .collect();
    let min = dashes.iter().map(|d| d.1).min().unwrap_or(0);
    let lines: Vec<usize> = dashes.iter().filter(|d| d.1 == min).map(|d| d.0).collect();
    let exact = lines.len() == items.len();
    items
        .into_iter()
        .enumerate()
        .map(|(i, e)| (if exact { At::Line(lines[i]) } else { At::Entry(i + 1) }, e))
        .collect()
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    method: Option<String>,
    path: Option<String>,
    url: Option<String>,
    headers: Option<Headers>,
    body: Option<String>,
    body_file: Option<PathBuf>,
    json: Option<serde_json::Value>,
    expect: Option<Expect>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Expect {
    status: Statuses,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum Statuses {
    One(u16),
    Many(Vec<u16>),
}

/// Headers in file order: an object or a list of `name: value` strings.
#[derive(Debug, Default)]
struct Headers(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Headers, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Headers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of header values or a list of \"name: value\" strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Headers, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Scalar>()? {
                    out.push((k, v.0));
                }
                Ok(Headers(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Headers, A::Error> {
                let mut out = Vec::new();
                while let Some(raw) = s.next_element::<String>()? {
                    let h = RequestSpec::parse_header(&raw).map_err(serde::de::Error::custom)?;
                    out.push(h);
                }
                Ok(Headers(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A header value: a string, or a number or boolean written without quotes (YAML).
#[derive(Debug)]
pub(super) struct Scalar(pub(super) String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => Ok(Scalar(s)),
            v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_)) => {
                Ok(Scalar(v.to_string()))
            }
            other => Err(serde::de::Error::custom(format!(
                "a header value must be a string, got {other}"
            ))),
        }
    }
}

impl RawEntry {
    fn into_spec(
        self,
        base: &Path,
        endpoints: &[Target],
        defaults: &[(String, String)],
    ) -> Result<RequestSpec, FileError> {
        let mut headers = self.headers.unwrap_or_default().0;
        for (k, v) in defaults {
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)) {
                headers.push((k.clone(), v.clone()));
            }
        }
        let method = self.method.as_deref().unwrap_or("GET");
        let mut spec =
            RequestSpec::try_new(method, headers, 0).map_err(|e| FileError(e.to_string()))?;
        let bodies = [self.body.is_some(), self.body_file.is_some(), self.json.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if bodies > 1 {
            return Err(FileError("give one of body, body_file and json".into()));
        }
        if let Some(b) = self.body {
            spec = spec.with_body(Body::Text(b.into())).map_err(|e| FileError(e.to_string()))?;
        }
        if let Some(f) = self.body_file {
            let p = if f.is_absolute() { f } else { base.join(f) };
            let bytes = std::fs::read(&p)
                .map_err(|e| FileError(format!("cannot read body_file {}: {e}", p.display())))?;
            spec = spec
                .with_body(Body::Bytes(Arc::from(bytes)))
                .map_err(|e| FileError(e.to_string()))?;
        }
        if let Some(j) = self.json {
            spec = json_body(spec, &j.to_string())?;
        }
        match (self.path, self.url) {
            (Some(_), Some(_)) => {
                return Err(FileError("give either path or url, not both".into()))
            }
            (Some(p), None) => spec = spec.with_path(&p).map_err(|e| FileError(e.to_string()))?,
            (None, Some(u)) => {
                let t = Target::parse_unresolved(&u).map_err(|e| FileError(e.to_string()))?;
                let i = endpoints
                    .iter()
                    .position(|ep| {
                        ep.scheme == t.scheme && ep.port == t.port && ep.host.eq_ignore_ascii_case(&t.host)
                    })
                    .ok_or_else(|| {
                        let list: Vec<String> = endpoints.iter().map(Target::url).collect();
                        FileError(format!(
                            "url {u} is not one of the run's endpoints ({}): a request list may only name endpoints given on the command line",
                            list.join(", ")
                        ))
                    })?;
                spec =
                    spec.with_path(&t.path).map_err(|e| FileError(e.to_string()))?.with_endpoint(i);
            }
            (None, None) => {}
        }
        if let Some(e) = self.expect {
            let list = match e.status {
                Statuses::One(s) => vec![s],
                Statuses::Many(v) if v.is_empty() => {
                    return Err(FileError("expect.status must list at least one status".into()))
                }
                Statuses::Many(v) => v,
            };
            spec = spec.with_expect(list).map_err(|e| FileError(e.to_string()))?;
        }
        Ok(spec)
    }
}

/// Sets a JSON body (which may hold placeholders) and `content-type: application/json`
/// unless the request has a content type. The body must be JSON once rendered: checked on a
/// sample rendering, so `{"n": {{seq}}}` passes and a typo fails.
pub fn json_body(spec: RequestSpec, text: &str) -> Result<RequestSpec, FileError> {
    let spec = spec.with_body(Body::Text(text.into())).map_err(|e| FileError(e.to_string()))?;
    let sample = spec.body().template().sample();
    serde_json::from_slice::<serde_json::Value>(&sample)
        .map_err(|e| FileError(format!("the JSON body is not valid JSON: {e}")))?;
    spec.with_default_header("content-type", "application/json")
        .map_err(|e| FileError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shrike-reqfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn endpoints() -> Vec<Target> {
        vec![Target::parse_unresolved("http://127.0.0.1:8080/").expect("url")]
    }

    #[test]
    fn jsonl_entries() {
        let p = write(
            "a.jsonl",
            "# comment\n{\"path\":\"/a\"}\n\n{\"method\":\"post\",\"url\":\"http://127.0.0.1:8080/b?x=1\",\"headers\":{\"x-b\":\"2\",\"x-a\":1},\"json\":{\"k\":\"{{seq}}\"},\"expect\":{\"status\":[200,201]}}\n",
        );
        let specs = load(&p, &endpoints(), &[("x-a".into(), "cli".into())]).expect("load");
        assert_eq!(specs.len(), 2);
        assert_eq!((specs[0].method(), specs[0].path()), ("GET", Some("/a")));
        assert_eq!(specs[0].headers(), &[("x-a".to_string(), "cli".to_string())]);
        assert!(specs[0].origin().is_some_and(|o| o.ends_with("a.jsonl:2")));
        let b = &specs[1];
        assert_eq!((b.method(), b.path(), b.endpoint()), ("POST", Some("/b?x=1"), Some(0)));
        assert_eq!(b.expect(), Some(&[200, 201][..]));
        let names: Vec<&str> = b.headers().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["x-b", "x-a", "content-type"]);
        assert!(b.is_templated());
    }

    #[test]
    fn yaml_entries_and_errors_name_the_line() {
        let p = write(
            "b.yaml",
            "- path: /one\n  headers: [\"x-a: 1\"]\n- path: /two\n  method: G ET\n",
        );
        let e = load(&p, &endpoints(), &[]).unwrap_err().to_string();
        assert!(e.contains("b.yaml:3:") && e.contains("invalid request method"), "{e}");
        let p = write("c.yml", "- url: http://127.0.0.1:9999/\n");
        let e = load(&p, &endpoints(), &[]).unwrap_err().to_string();
        assert!(e.contains("c.yml:1:") && e.contains("not one of the run's endpoints"), "{e}");
        let p = write("d.jsonl", "{\"path\":\"/\"}\n{\"pth\":\"/\"}\n");
        let e = load(&p, &endpoints(), &[]).unwrap_err().to_string();
        assert!(e.contains("d.jsonl:2:") && e.contains("unknown field `pth`"), "{e}");
        let p = write("e.jsonl", "{\"path\":\"/{{sequence}}\"}\n");
        let e = load(&p, &endpoints(), &[]).unwrap_err().to_string();
        assert!(e.contains("e.jsonl:1:") && e.contains("unknown placeholder"), "{e}");
        let p = write("f.json", "{\"path\":\"/a\"}\n{\n  \"json\": {\"a\": {{seq}}}\n}\n");
        let e = load(&p, &endpoints(), &[]).unwrap_err().to_string();
        assert!(e.contains("f.json"), "{e}");
    }
}
