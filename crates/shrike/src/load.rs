//! The load a command puts on its target, read from `shrike run`'s flags: the flags are a JSON
//! merge patch over an optional `--spec` file (or the defaults), read into one [`RunSpec`], with
//! the built-in server started when nothing names a target. `run` runs it once; commands that
//! run a series of trials (capacity search, sweeps) vary it with [`LoadSpec::vary`], so every
//! trial is validated and explained the same way.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use shrike_engine::{RunSpec, SpecError};

use crate::args::usage;
use crate::embedded::EmbeddedServer;
use crate::run::RunArgs;

/// A validated load, with the built-in server it targets (if any) kept running.
pub(crate) struct LoadSpec {
    pub spec: RunSpec,
    /// The server started because nothing named a target; stops when this is dropped.
    pub server: Option<EmbeddedServer>,
    patch: Patch,
    file: Option<PathBuf>,
}

impl LoadSpec {
    /// The load `args` describe, exactly as `shrike run` would run it.
    pub fn from_args(args: &RunArgs) -> anyhow::Result<LoadSpec> {
        let patch = args.patch()?;
        let mut options = match &args.spec {
            Some(path) => read_spec_file(path)?,
            None => json!({}),
        };
        shrike_spec::json::merge(&mut options, &Value::Object(patch.0.clone()));
        // The built-in server: when nothing names a target, or a spec recorded a run against
        // it (whose port is gone) and no URL replaces it.
        let built_in = options.get("built_in_server").and_then(Value::as_bool) == Some(true);
        let server = if !has_target(&options) || (built_in && args.url.is_none()) {
            let server = EmbeddedServer::start()?;
            options["uri"] = json!(format!("http://{}/", server.addr));
            options["built_in_server"] = json!(true);
            Some(server)
        } else {
            None
        };
        let file = args.spec.clone();
        let spec = RunSpec::from_json(&options).map_err(|e| explain(e, &patch, file.as_deref()))?;
        Ok(LoadSpec { spec, server, patch, file })
    }

    /// This load with `changes` (a JSON merge patch of options: a trial's rate, connections,
    /// duration) applied and validated.
    pub fn vary(&self, changes: &Value) -> anyhow::Result<RunSpec> {
        self.spec.patched(changes).map_err(|e| self.explain(e))
    }

    /// A spec error in the words of the command line: flags, or the spec file's fields.
    pub fn explain(&self, e: SpecError) -> anyhow::Error {
        explain(e, &self.patch, self.file.as_deref())
    }
}

/// The options the user gave on the command line, as a JSON merge patch over the spec file
/// (or over the defaults). Each flag writes its option, and clears the options it replaces:
/// a URL replaces multi-target endpoints, `--rps` replaces stages, and so on.
pub(crate) struct Patch(pub(crate) Map<String, Value>);

impl Patch {
    pub(crate) fn set(&mut self, field: &str, v: impl Into<Value>) {
        self.0.insert(field.to_string(), v.into());
    }
    pub(crate) fn clear(&mut self, field: &str) {
        self.0.insert(field.to_string(), Value::Null);
    }
    pub(crate) fn set_in(&mut self, parent: &str, field: &str, v: impl Into<Value>) {
        let slot = self.0.entry(parent.to_string()).or_insert_with(|| json!({}));
        if let Some(o) = slot.as_object_mut() {
            o.insert(field.to_string(), v.into());
        }
    }
    pub(crate) fn opt<T: Into<Value> + Clone>(&mut self, field: &str, v: &Option<T>) {
        if let Some(v) = v {
            self.set(field, v.clone());
        }
    }
    pub(crate) fn list(&mut self, field: &str, v: &[String]) {
        if !v.is_empty() {
            self.set(field, v.to_vec());
        }
    }
    /// Whether the patch names `field` (`a.b` for nested options).
    fn names(&self, field: &str) -> bool {
        let mut parts = field.splitn(2, '.');
        let top = parts.next().unwrap_or_default();
        match (self.0.get(top), parts.next()) {
            (Some(v), None) => !v.is_null(),
            (Some(Value::Object(o)), Some(sub)) => o.contains_key(sub),
            _ => false,
        }
    }
}

/// The flag (or word) a user of the command line knows an option by.
fn flag_for(field: &str) -> String {
    let dashed = |s: &str| s.replace('_', "-");
    match field {
        "uri" => "URL".into(),
        "multi_target_endpoints" => "--multi-target-endpoint".into(),
        "requests_per_second" => "--rps".into(),
        "total_requests" => "--requests".into(),
        "failure_predicates" => "--failure-predicate".into(),
        "termination_predicates" => "--termination-predicate".into(),
        "labels" => "--label".into(),
        "tls" => "TLS".into(),
        "tls.ca" => "--tls-ca".into(),
        "tls.session_resumption" => "--tls-no-session-resumption".into(),
        "request_options" => "--request-method/--request-header".into(),
        "request_options.request_headers" => "--request-header".into(),
        f => match (f.strip_prefix("tls."), f.strip_prefix("request_options.")) {
            (Some(t), _) => format!("--tls-{}", dashed(t)),
            (_, Some(r)) => format!("--{}", dashed(r)),
            _ => format!("--{}", dashed(f)),
        },
    }
}

/// Rewrites a spec error for the command line: the field and any other option it mentions
/// become flags, unless they came from the spec file, which is then named.
fn explain(e: SpecError, patch: &Patch, file: Option<&Path>) -> anyhow::Error {
    let from_flags = patch.names(&e.field) || file.is_none();
    // The option names, from the canonical form of a default spec.
    let known = RunSpec::for_url("http://127.0.0.1/").map(|s| s.to_json()).unwrap_or_default();
    let is_option = |w: &str| known.get(w).is_some() || w.starts_with("request_");
    let reason = e
        .reason()
        .split_inclusive(|c: char| !(c.is_ascii_lowercase() || c == '_'))
        .map(|w| {
            let word = w.trim_end_matches(|c: char| !(c.is_ascii_lowercase() || c == '_'));
            if from_flags && word.contains('_') && is_option(word) {
                w.replacen(word, &flag_for(word), 1)
            } else {
                w.to_string()
            }
        })
        .collect::<String>();
    let field = match file {
        Some(f) if !from_flags => format!("{}: {}", f.display(), e.field),
        _ => flag_for(&e.field),
    };
    usage(e.with_message(reason).renamed(field).to_string())
}

/// The options of `path`: a spec (a JSON object of options) or a stored result's `options`.
fn read_spec_file(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--spec: cannot read {}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("--spec: {} is not JSON: {e}", path.display())))?;
    let stored = v.get("options").filter(|_| v.get("results").is_some());
    match stored.unwrap_or(&v) {
        o @ Value::Object(_) => Ok(o.clone()),
        _ => Err(usage(format!("--spec: {} holds no JSON object of options", path.display()))),
    }
}

/// Whether the options name any target.
fn has_target(options: &Value) -> bool {
    let set = |k: &str| options.get(k).is_some_and(|v| !v.is_null() && v != &json!([]));
    set("uri") || set("multi_target_endpoints") || set("multi_target")
}
