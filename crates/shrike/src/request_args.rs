//! What `shrike run` sends: the single request's flags (Nighthawk's), a request file, Nighthawk's
//! request-source plugin, and what to read from responses.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::{json, Map, Value};
use shrike_engine::requests::{file, nighthawk};
use shrike_engine::{Body, RequestSource, RequestSpec, Target};

use crate::args::usage;

#[derive(Args, Debug, Clone)]
pub struct RequestArgs {
    /// Request method.
    #[arg(long, default_value = "GET", value_name = "METHOD")]
    pub request_method: String,
    /// Extra request header 'name: value' (repeatable). Values may hold placeholders
    /// ({{seq}}, {{worker}}, {{random_id}}, {{choice:a|b}}). With a request file, added to
    /// every entry that does not set the header itself.
    #[arg(long = "request-header", value_name = "HEADER")]
    pub request_headers: Vec<String>,
    /// Request body size in bytes (a body of 'a's, as Nighthawk sends).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub request_body_size: u32,
    /// Send this file's bytes as the request body, verbatim.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["request_body_size", "json_body"])]
    pub request_body_file: Option<PathBuf>,
    /// Send this JSON as the request body (validated; sets content-type: application/json
    /// unless a --request-header sets one). May hold placeholders.
    #[arg(long, value_name = "JSON", conflicts_with = "request_body_size")]
    pub json_body: Option<String>,
    /// A list of requests (JSON Lines, JSON or YAML by extension: .jsonl, .json, .yaml, .yml),
    /// used round robin by each worker. See the README for the format.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with_all = ["request_method", "request_body_size", "request_body_file", "json_body"]
    )]
    pub request_file: Option<PathBuf>,
    /// Nighthawk's request-source plugin config (JSON): the file-based or in-line options-list
    /// plugin, with optional num_requests (requests per worker, then the worker stops).
    #[arg(
        long,
        value_name = "JSON",
        conflicts_with_all = ["request_file", "request_method", "request_body_size", "request_body_file", "json_body"]
    )]
    pub request_source_plugin_config: Option<String>,
    /// Record this response header's value (integer nanoseconds, as the test server's
    /// emit_previous_request_delta_in_response_header sends) in
    /// benchmark_http_client.origin_latency_statistic.
    #[arg(long, value_name = "NAME")]
    pub latency_response_header_name: Option<String>,
}

impl RequestArgs {
    /// Builds the request source. `targets` are the run's endpoints (a request file's `url`
    /// entries must name one). Every problem is a usage error.
    pub fn build(&self, targets: &[Target]) -> anyhow::Result<RequestSource> {
        let headers = self
            .request_headers
            .iter()
            .map(|h| {
                RequestSpec::parse_header(h).map_err(|e| usage(format!("--request-header: {e}")))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut source = if let Some(path) = &self.request_file {
            let entries = file::load(path, targets, &headers).map_err(|e| usage(e.to_string()))?;
            RequestSource::list(entries).map_err(|e| usage(format!("--request-file: {e}")))?
        } else if let Some(cfg) = &self.request_source_plugin_config {
            let (entries, limit) =
                nighthawk::nighthawk_plugin(cfg, &headers).map_err(|e| usage(e.to_string()))?;
            let s = RequestSource::list(entries)
                .map_err(|e| usage(format!("--request-source-plugin-config: {e}")))?;
            match limit {
                Some(n) => s.with_limit(n),
                None => s,
            }
        } else {
            RequestSource::single(self.single(headers)?)
        };
        // Nighthawk's default is "": no header.
        if let Some(name) = self.latency_response_header_name.as_deref().filter(|n| !n.is_empty()) {
            source = source
                .with_latency_header(name)
                .map_err(|e| usage(format!("--latency-response-header-name: {e}")))?;
        }
        Ok(source)
    }

    /// The one request of a run without a request list.
    fn single(&self, headers: Vec<(String, String)>) -> anyhow::Result<RequestSpec> {
        let flags = "--request-method/--request-header";
        let spec = RequestSpec::try_new(&self.request_method, headers, self.request_body_size)
            .map_err(|e| usage(format!("{flags}: {e}")))?;
        if let Some(path) = &self.request_body_file {
            let bytes = std::fs::read(path).map_err(|e| {
                usage(format!("--request-body-file: cannot read {}: {e}", path.display()))
            })?;
            return spec
                .with_body(Body::Bytes(Arc::from(bytes)))
                .map_err(|e| usage(format!("--request-body-file: {e}")));
        }
        if let Some(j) = &self.json_body {
            return file::json_body(spec, j).map_err(|e| usage(format!("--json-body: {e}")));
        }
        Ok(spec)
    }

    /// The request part of the JSON result's `options`, under Nighthawk's names where it has
    /// them.
    pub fn options_json(&self, source: &RequestSource) -> Map<String, Value> {
        let mut m = Map::new();
        if let [one] = source.entries() {
            if self.request_file.is_none() && self.request_source_plugin_config.is_none() {
                m.insert(
                    "request_options".into(),
                    json!({
                        "request_method": one.method(),
                        "request_headers": one.headers().iter()
                            .map(|(k, v)| json!({"header": {"key": k, "value": v}}))
                            .collect::<Vec<_>>(),
                        "request_body_size": one.body_size(),
                        "request_body_file": self.request_body_file.as_ref().map(|p| p.display().to_string()),
                        "json_body": self.json_body,
                    }),
                );
            }
        }
        if let Some(p) = &self.request_file {
            m.insert("request_file".into(), json!(p.display().to_string()));
            m.insert("request_file_entries".into(), json!(source.entries().len()));
        }
        if let Some(c) = &self.request_source_plugin_config {
            m.insert("request_source_plugin_config".into(), json!(c));
        }
        if let Some(n) = source.limit() {
            m.insert("num_requests".into(), json!(n.get().to_string()));
        }
        m.insert(
            "latency_response_header_name".into(),
            json!(source.latency_header().unwrap_or("")),
        );
        m
    }
}
