//! The Nighthawk client flags that take Envoy configuration or name a service: TLS as an
//! Envoy transport socket, HTTP/3 protocol options, tracing, a remote request source, and
//! `--nighthawk-service`. Each is the typed edit of the run option of the same name, so the spec
//! (one set of rules for flags, spec files and the gRPC API) holds every rule.

use clap::Args;

use crate::args::usage;
use shrike_spec::SpecEdit;

#[derive(Args, Debug, Clone, Default)]
pub struct NighthawkArgs {
    /// TLS as Envoy's transport socket (JSON or Nighthawk's compact form):
    /// {name:"envoy.transport_sockets.tls",typed_config:{"@type":"type.googleapis.com/
    /// envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",sni:"…",
    /// common_tls_context:{tls_params:{cipher_suites:["ECDHE-RSA-AES128-GCM-SHA256"]}}}}.
    /// SNI, TLS versions, cipher suites, a trusted CA file and max_session_keys map onto
    /// Shrike's TLS; any other field is refused by name.
    #[arg(long, value_name = "JSON", conflicts_with = "tls_context")]
    pub transport_socket: Option<String>,
    /// Deprecated (as in Nighthawk): an UpstreamTlsContext by itself; use --transport-socket.
    #[arg(long, value_name = "JSON")]
    pub tls_context: Option<String>,
    /// HTTP/3 protocol options (Envoy's Http3ProtocolOptions, JSON):
    /// {quic_protocol_options:{max_concurrent_streams:N,initial_stream_window_size:BYTES,
    /// initial_connection_window_size:BYTES}}. Only with --protocol http3.
    #[arg(long, value_name = "JSON", conflicts_with = "max_concurrent_streams")]
    pub http3_protocol_options: Option<String>,
    /// Deprecated in Nighthawk: one stream per HTTP/2 connection (--max-concurrent-streams 1).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub experimental_h2_use_multiple_connections: Option<bool>,
    /// Send a Zipkin v2 span per traced request to this collector, and B3 headers with the
    /// request: zipkin://HOST:PORT/api/v2/spans.
    #[arg(long, value_name = "URI")]
    pub trace: Option<String>,
    /// The fraction of requests traced, in (0, 1] [default: 1].
    #[arg(long, value_name = "FRACTION", requires = "trace")]
    pub trace_sample_rate: Option<f64>,
    /// Stream the requests from a Nighthawk request-source service (each worker its own
    /// stream): grpc://HOST:PORT.
    #[arg(long, value_name = "URI")]
    pub request_source: Option<String>,
    /// Not implemented, as in Nighthawk (which rejects it too): accepted only to say so.
    #[arg(long, value_name = "JSON")]
    pub user_defined_plugin_config: Vec<String>,
    /// Tunnel every connection through this proxy with HTTP CONNECT: HOST:PORT,
    /// http://HOST:PORT or https://HOST:PORT (TLS to the proxy). TLS to an https:// target
    /// runs inside the tunnel.
    #[arg(long, value_name = "URI")]
    pub tunnel_uri: Option<String>,
    /// How tunnels are set up with the proxy: http1 (a CONNECT per TCP connection; the
    /// default), http2 (a CONNECT stream per connection, many on one proxy connection: TLS
    /// with ALPN h2, or h2c with prior knowledge; HTTP/3 load goes by CONNECT-UDP, a stream
    /// per QUIC connection, over TLS to the proxy) or http3 (a CONNECT stream per connection
    /// on a QUIC connection to the proxy, TLS required; HTTP/3 load goes by CONNECT-UDP with
    /// HTTP/3 datagrams, as MASQUE relays take it).
    #[arg(long, value_name = "http1|http2|http3", value_parser = crate::args::parse::protocol)]
    pub tunnel_protocol: Option<shrike_spec::Protocol>,
    /// TLS to the proxy, as an Envoy UpstreamTlsContext (JSON or Nighthawk's compact form):
    /// SNI, TLS versions, cipher suites and a trusted CA file, as --tls-context takes them.
    #[arg(long, value_name = "JSON")]
    pub tunnel_tls_context: Option<String>,
    /// A PEM file of extra trust roots for the proxy's certificate (as --tls-ca is for the
    /// target's).
    #[arg(long, value_name = "FILE")]
    pub tunnel_ca: Option<std::path::PathBuf>,
    /// Send the run to a service speaking Nighthawk's gRPC API (shrike service, or
    /// nighthawk_service) and write its result here: grpc://HOST:PORT.
    #[arg(long, value_name = "URI")]
    pub nighthawk_service: Option<String>,
}

impl NighthawkArgs {
    /// The Nighthawk flags given, each as its typed edit of the run's spec (those that take
    /// Envoy JSON are read by the spec, which names what is wrong inside them).
    pub fn edit(&self, mut e: SpecEdit) -> anyhow::Result<SpecEdit> {
        if !self.user_defined_plugin_config.is_empty() {
            return Err(usage(
                "--user-defined-plugin-config is not implemented (Nighthawk rejects it as \
                 unimplemented too); results carry no user-defined outputs",
            ));
        }
        if let Some(u) = &self.tunnel_uri {
            e = e.tunnel_uri(u);
        }
        if let Some(p) = self.tunnel_protocol {
            e = e.tunnel_protocol(p);
        }
        if let Some(j) = &self.tunnel_tls_context {
            e = e.tunnel_tls_context(j);
        }
        if let Some(f) = &self.tunnel_ca {
            e = e.tunnel_ca(f.clone());
        }
        if let Some(j) = &self.transport_socket {
            e = e.transport_socket(j);
        }
        if let Some(j) = &self.tls_context {
            e = e.tls_context(j);
        }
        if let Some(j) = &self.http3_protocol_options {
            e = e.http3_protocol_options(j);
        }
        if let Some(on) = self.experimental_h2_use_multiple_connections {
            e = e.h2_use_multiple_connections(on);
        }
        if let Some(t) = &self.trace {
            e = e.trace(t);
        }
        if let Some(r) = self.trace_sample_rate {
            e = e.trace_sample_rate(r);
        }
        if let Some(s) = &self.request_source {
            e = e.request_source(s);
        }
        Ok(e)
    }

    /// The service `--nighthawk-service` names, as `HOST:PORT`.
    pub fn service(&self) -> anyhow::Result<Option<String>> {
        let Some(uri) = &self.nighthawk_service else { return Ok(None) };
        let authority = shrike_spec::grpc_authority(uri).ok_or_else(|| {
            usage(format!("--nighthawk-service: expected grpc://HOST:PORT, got {uri:?}"))
        })?;
        Ok(Some(authority.to_string()))
    }
}
