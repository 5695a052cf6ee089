//! What `shrike run` sends: the single request's flags (Nighthawk's), a request file, Nighthawk's
//! request-source plugin, and what to read from responses. Each flag is a typed edit of the run
//! spec (`request_options`, `request_file`, …); the engine loads and checks the files.

use std::path::PathBuf;

use clap::Args;
use shrike_spec::SpecEdit;

#[derive(Args, Debug, Clone, Default)]
pub struct RequestArgs {
    /// Request method [default: GET].
    #[arg(long, value_name = "METHOD")]
    pub request_method: Option<String>,
    /// Extra request header 'name: value' (repeatable). Values may hold placeholders
    /// ({{seq}}, {{worker}}, {{random_id}}, {{choice:a|b}}). With a request file, added to
    /// every entry that does not set the header itself.
    #[arg(short = 'H', long = "request-header", value_name = "HEADER")]
    pub request_headers: Vec<String>,
    /// Request body size in bytes (a body of 'a's, as Nighthawk sends).
    #[arg(long, value_name = "BYTES")]
    pub request_body_size: Option<u32>,
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
    /// The request flags given, each as its typed edit of the run's spec.
    pub fn edit(&self, mut e: SpecEdit) -> SpecEdit {
        if let Some(m) = &self.request_method {
            e = e.request_method(m);
        }
        if !self.request_headers.is_empty() {
            e = e.request_headers(&self.request_headers);
        }
        if let Some(n) = self.request_body_size {
            e = e.request_body_size(n);
        }
        if let Some(f) = &self.request_body_file {
            e = e.request_body_file(f.clone());
        }
        if let Some(j) = &self.json_body {
            e = e.json_body(j);
        }
        if let Some(f) = &self.request_file {
            e = e.request_file(f.clone());
        }
        if let Some(c) = &self.request_source_plugin_config {
            e = e.request_source_plugin_config(c);
        }
        if let Some(h) = &self.latency_response_header_name {
            e = e.latency_response_header_name(h);
        }
        e
    }
}
