//! Every option of a run spec by name: the one table that JSON (spec files, stored results'
//! `options`, the gRPC API), errors and the command line take their names from.
//!
//! An option's name is its proto field name (`requests_per_second`), the snake_case key
//! Nighthawk's proto3 JSON writes; nested options are dotted paths (`tls.ca`). proto3 JSON
//! parsers also accept the lowerCamelCase form (`requestsPerSecond`, [`Opt::camel`]), and so
//! does Shrike's reader. The flag is what `shrike run` calls it, where the command line has
//! it: an error about an option given as a flag names the flag ([`crate::SpecError::render`]).

/// One option of a run spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Opt {
    /// The proto field name; a dotted path for a nested option (`tls.ca`).
    pub name: &'static str,
    /// How `shrike run` spells it, if it has a flag (`--rps`, `URL`).
    pub flag: Option<&'static str>,
}

impl Opt {
    /// The key within its parent object (`ca` for `tls.ca`).
    pub fn key(self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }

    /// proto3 JSON's lowerCamelCase of the key: `requests_per_second` → `requestsPerSecond`,
    /// `http3_protocol_options` → `http3ProtocolOptions`.
    pub fn camel(self) -> String {
        camel(self.key())
    }

    /// The name a user of the command line knows it by: its flag, else its name.
    pub fn flag_or_name(self) -> &'static str {
        self.flag.unwrap_or(self.name)
    }
}

/// proto3 JSON's lowerCamelCase of a snake_case field name: each `_` is dropped and the letter
/// after it upper-cased.
pub fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

macro_rules! options {
    ($($(#[$doc:meta])* $id:ident = $name:literal $(=> $flag:literal)?;)*) => {
        $($(#[$doc])* pub const $id: Opt = Opt { name: $name, flag: options!(@flag $($flag)?) };)*
        /// Every option, in the order the canonical JSON writes them.
        pub const ALL: &[Opt] = &[$($id),*];
    };
    (@flag) => { None };
    (@flag $flag:literal) => { Some($flag) };
}

options! {
    URI = "uri" => "URL";
    MULTI_TARGET_ENDPOINTS = "multi_target_endpoints" => "--multi-target-endpoint";
    MULTI_TARGET_PATH = "multi_target_path" => "--multi-target-path";
    MULTI_TARGET_USE_HTTPS = "multi_target_use_https" => "--multi-target-use-https";
    /// Nighthawk's object form of the three above.
    MULTI_TARGET = "multi_target";
    /// The target is the built-in test server the command line starts.
    BUILT_IN_SERVER = "built_in_server";
    CONNECTIONS = "connections" => "--connections";
    ADDRESS_FAMILY = "address_family" => "--address-family";
    H1_REUSE = "experimental_h1_connection_reuse_strategy"
        => "--experimental-h1-connection-reuse-strategy";
    DURATION = "duration" => "--duration";
    NO_DURATION = "no_duration" => "--no-duration";
    TIMEOUT = "timeout" => "--timeout";
    CONCURRENCY = "concurrency" => "--concurrency";
    /// Written for readers of a result (the workers `auto` came to); ignored when read.
    WORKERS = "workers";
    PROTOCOL = "protocol" => "--protocol";
    /// Nighthawk's deprecated switch for `protocol: http2`.
    H2 = "h2" => "--h2";
    MAX_CONCURRENT_STREAMS = "max_concurrent_streams" => "--max-concurrent-streams";
    MAX_ACTIVE_REQUESTS = "max_active_requests" => "--max-active-requests";
    HTTP3_PROTOCOL_OPTIONS = "http3_protocol_options" => "--http3-protocol-options";
    H2_MULTIPLE_CONNECTIONS = "experimental_h2_use_multiple_connections"
        => "--experimental-h2-use-multiple-connections";
    TRACE = "trace" => "--trace";
    TRACE_SAMPLE_RATE = "trace_sample_rate" => "--trace-sample-rate";
    TLS = "tls" => "TLS";
    TLS_CA = "tls.ca" => "--tls-ca";
    TLS_INSECURE = "tls.insecure" => "--tls-insecure";
    TLS_SNI = "tls.sni" => "--tls-sni";
    TLS_MIN_VERSION = "tls.min_version" => "--tls-min-version";
    TLS_MAX_VERSION = "tls.max_version" => "--tls-max-version";
    TLS_CIPHER_SUITES = "tls.cipher_suites" => "--tls-cipher-suites";
    TLS_SESSION_RESUMPTION = "tls.session_resumption" => "--tls-no-session-resumption";
    TRANSPORT_SOCKET = "transport_socket" => "--transport-socket";
    TLS_CONTEXT = "tls_context" => "--tls-context";
    MAX_PENDING_REQUESTS = "max_pending_requests" => "--max-pending-requests";
    MAX_REQUESTS_PER_CONNECTION = "max_requests_per_connection"
        => "--max-requests-per-connection";
    TOTAL_REQUESTS = "total_requests" => "--requests";
    OPEN_LOOP = "open_loop" => "--open-loop";
    BURST_SIZE = "burst_size" => "--burst-size";
    JITTER_UNIFORM = "jitter_uniform" => "--jitter-uniform";
    PREFETCH_CONNECTIONS = "prefetch_connections" => "--prefetch-connections";
    RETRY_UNANSWERED = "retry_unanswered" => "--retry-unanswered";
    FAILURE_PREDICATES = "failure_predicates" => "--failure-predicate";
    TERMINATION_PREDICATES = "termination_predicates" => "--termination-predicate";
    NO_DEFAULT_FAILURE_PREDICATES = "no_default_failure_predicates"
        => "--no-default-failure-predicates";
    OUTPUT_FORMAT = "output_format" => "--output-format";
    VERBOSITY = "verbosity" => "--verbosity";
    LABELS = "labels" => "--label";
    REQUEST_OPTIONS = "request_options" => "--request-method/--request-header";
    REQUEST_METHOD = "request_options.request_method" => "--request-method";
    REQUEST_HEADERS = "request_options.request_headers" => "--request-header";
    REQUEST_BODY_SIZE = "request_options.request_body_size" => "--request-body-size";
    REQUEST_BODY_FILE = "request_options.request_body_file" => "--request-body-file";
    JSON_BODY = "request_options.json_body" => "--json-body";
    REQUEST_FILE = "request_file" => "--request-file";
    REQUEST_SOURCE_PLUGIN_CONFIG = "request_source_plugin_config"
        => "--request-source-plugin-config";
    REQUEST_SOURCE = "request_source" => "--request-source";
    LATENCY_HEADER = "latency_response_header_name" => "--latency-response-header-name";
    REQUESTS_PER_SECOND = "requests_per_second" => "--rps";
    RAMP_DURATION = "ramp_duration" => "--ramp-duration";
    STAGES = "stages" => "--stages";
    TUNNEL_OPTIONS = "tunnel_options" => "tunnel options";
    TUNNEL_URI = "tunnel_options.tunnel_uri" => "--tunnel-uri";
    TUNNEL_PROTOCOL = "tunnel_options.tunnel_protocol" => "--tunnel-protocol";
    TUNNEL_TLS_CONTEXT = "tunnel_options.tunnel_tls_context" => "--tunnel-tls-context";
    TUNNEL_CA = "tunnel_options.tunnel_ca" => "--tunnel-ca";
    /// Nighthawk's linear-ramping rate limiter plugin: a ramp asked for Nighthawk's way.
    RATE_LIMITER_PLUGIN_CONFIG = "rate_limiter_plugin_config" => "--rate-limiter-plugin-config";
    IDLE_STRATEGY = "sequencer_idle_strategy" => "--sequencer-idle-strategy";
    IO_BACKEND = "io_backend" => "--io-backend";
    READ_COALESCE = "read_coalesce" => "--read-coalesce";
    MAX_LATENESS = "max_lateness" => "--max-lateness";
    SIMPLE_WARMUP = "simple_warmup" => "--simple-warmup";
    START_AT = "start_at" => "--start-at";
    /// An older name of `start_at`, read and never written.
    SCHEDULED_START = "scheduled_start";
    SHARD = "shard" => "--shard";
    /// The run's id (Nighthawk's execution id): shards of one run share it.
    EXECUTION_ID = "execution_id" => "--execution-id";
    BIND_ADDRESS = "bind_address" => "--bind-address";
    UPSTREAM_BIND_CONFIG = "upstream_bind_config" => "--upstream-bind-config";
    STATS_INTERVAL = "stats_interval" => "--stats-interval";
    METRICS_LISTEN = "metrics_listen" => "--metrics-listen";
    STATSD = "statsd" => "--statsd";
    STATS_SINKS = "stats_sinks" => "--stats-sinks";
    STATS_FLUSH_INTERVAL = "stats_flush_interval" => "--stats-flush-interval";
    STATS_FLUSH_INTERVAL_DURATION = "stats_flush_interval_duration"
        => "--stats-flush-interval-duration";
    NO_PROGRESS = "no_progress" => "--no-progress";
    /// Written by older Shrikes for readers of a result; ignored when read.
    REQUEST_FILE_ENTRIES = "request_file_entries";
    NUM_REQUESTS = "num_requests";
    /// Nighthawk options Shrike refuses (see the reader).
    USER_DEFINED_PLUGIN_CONFIGS = "user_defined_plugin_configs" => "--user-defined-plugin-config";
    NIGHTHAWK_SERVICE = "nighthawk_service" => "--nighthawk-service";
}

/// The option named `name` (a proto field name or dotted path), if the spec has it.
pub fn find(name: &str) -> Option<Opt> {
    ALL.iter().copied().find(|o| o.name == name)
}

/// How the command line names what `path` names in a spec: the option's flag, or for a path
/// inside an option (`transport_socket.typed_config.sni`) the flag of the option it is in and
/// the rest of the path. Paths no option holds are returned as they are.
pub fn flag_for(path: &str) -> String {
    if let Some(o) = find(path) {
        return o.flag_or_name().to_string();
    }
    let mut prefix = path;
    while let Some((head, _)) = prefix.rsplit_once('.') {
        if let Some(o) = find(head).filter(|o| o.flag.is_some()) {
            return format!("{} ({})", o.flag_or_name(), &path[head.len() + 1..]);
        }
        prefix = head;
    }
    path.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_is_protos() {
        assert_eq!(REQUESTS_PER_SECOND.camel(), "requestsPerSecond");
        assert_eq!(HTTP3_PROTOCOL_OPTIONS.camel(), "http3ProtocolOptions");
        assert_eq!(H1_REUSE.camel(), "experimentalH1ConnectionReuseStrategy");
        assert_eq!(TLS_CA.camel(), "ca");
        assert_eq!(REQUEST_METHOD.camel(), "requestMethod");
    }

    #[test]
    fn names_are_unique_and_flags_too() {
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert_ne!(a.name, b.name);
                assert!(a.flag.is_none() || a.flag != b.flag, "{} and {}", a.name, b.name);
            }
        }
    }

    #[test]
    fn paths_inside_an_option_name_its_flag() {
        assert_eq!(flag_for("requests_per_second"), "--rps");
        assert_eq!(flag_for("tls.ca"), "--tls-ca");
        assert_eq!(
            flag_for("transport_socket.typed_config.sni"),
            "--transport-socket (typed_config.sni)"
        );
        assert_eq!(flag_for("sessions"), "sessions");
    }
}
