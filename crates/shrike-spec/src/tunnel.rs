//! Nighthawk's `tunnel_options`: load carried to the target through a terminating proxy
//! (`--tunnel-uri`, `--tunnel-protocol`, `--tunnel-tls-context`). Each connection of the run
//! is an HTTP `CONNECT` tunnel through the proxy (over HTTP/1.1, or a stream of an HTTP/2 or
//! HTTP/3 connection to it); TLS to the target, when the target is `https://`, runs inside
//! it. HTTP/3 load goes by CONNECT-UDP (RFC 9298) over an HTTP/2 or HTTP/3 tunnel, each QUIC
//! connection its own stream.
//!
//! HTTP/3 load over an HTTP/1.1 tunnel, which Nighthawk refuses, is refused with its reason.
//! Nighthawk refuses HTTP/3 over HTTP/3 too; Shrike carries it, as MASQUE relays speak only
//! that.

use serde_json::{json, Map, Value};

use crate::error::SpecError;
use crate::msg;
use crate::names::{self as n, Opt};
use crate::nighthawk::TlsPatch;
use crate::types::{Protocol, TlsOptions};

/// Where and how the run's connections are tunnelled.
#[derive(Clone, Debug, PartialEq)]
pub struct TunnelSpec {
    /// The proxy as given: `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`.
    pub uri: String,
    /// The proxy's host (IPv6 without brackets) and port.
    pub host: String,
    pub port: u16,
    /// How the tunnel is set up with the proxy.
    pub protocol: Protocol,
    /// TLS to the proxy (an `https://` tunnel URI or a tunnel TLS context); `None`: plain TCP.
    pub tls: Option<TlsOptions>,
    /// The tunnel TLS context as given (an Envoy `UpstreamTlsContext`), written back as given.
    pub tls_context: Option<Value>,
    /// Shrike's `--tunnel-ca` as given (in `tls` too).
    pub ca: Option<std::path::PathBuf>,
}

/// The tunnel options as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GivenTunnel {
    pub(crate) uri: Option<String>,
    pub(crate) protocol: Option<Protocol>,
    /// The context as given and what it sets.
    pub(crate) tls_context: Option<(Value, TlsPatch)>,
    /// Shrike's `--tunnel-ca`: extra trust roots for the proxy's certificate.
    pub(crate) ca: Option<std::path::PathBuf>,
}

fn must(o: Opt, why: impl Into<crate::error::Message>) -> SpecError {
    SpecError::must(o, why)
}

impl GivenTunnel {
    /// The tunnel of a run whose load speaks `load`, or `None` without a tunnel URI.
    pub(crate) fn resolve(&self, load: Protocol) -> Result<Option<TunnelSpec>, SpecError> {
        let Some(uri) = self.uri.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
            if let Some(o) = self.given_without_uri() {
                return Err(must(o, msg!("needs ", n::TUNNEL_URI, " (the proxy)")));
            }
            return Ok(None);
        };
        let (scheme_tls, host, port) = parse_uri(uri)?;
        let protocol = self.protocol.unwrap_or(Protocol::Http1);
        check_pair(load, protocol, scheme_tls || self.tls_context.is_some())?;
        let tls = match (scheme_tls || self.tls_context.is_some(), &self.tls_context) {
            (false, _) => {
                if self.ca.is_some() {
                    return Err(must(
                        n::TUNNEL_CA,
                        msg!(
                            "needs TLS to the proxy (an https:// ",
                            n::TUNNEL_URI,
                            " or ",
                            n::TUNNEL_TLS_CONTEXT,
                            ")"
                        ),
                    ));
                }
                None
            }
            (true, patch) => Some(tls_options(patch.as_ref().map(|(_, p)| p), self.ca.clone())?),
        };
        Ok(Some(TunnelSpec {
            uri: uri.to_string(),
            host,
            port,
            protocol,
            tls,
            tls_context: self.tls_context.as_ref().map(|(v, _)| v.clone()),
            ca: self.ca.clone(),
        }))
    }

    fn given_without_uri(&self) -> Option<Opt> {
        if self.protocol.is_some() {
            Some(n::TUNNEL_PROTOCOL)
        } else if self.tls_context.is_some() {
            Some(n::TUNNEL_TLS_CONTEXT)
        } else if self.ca.is_some() {
            Some(n::TUNNEL_CA)
        } else {
            None
        }
    }

    /// The options `t` was resolved from.
    pub(crate) fn of(t: Option<&TunnelSpec>) -> GivenTunnel {
        let Some(t) = t else { return GivenTunnel::default() };
        let tls_context = t.tls_context.clone().map(|v| {
            // It parsed when the spec was made.
            let patch = crate::nighthawk::tls_context(v.clone(), n::TUNNEL_TLS_CONTEXT.name)
                .unwrap_or_default();
            (v, patch)
        });
        let ca = t.ca.clone();
        GivenTunnel { uri: Some(t.uri.clone()), protocol: Some(t.protocol), tls_context, ca }
    }
}

/// `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT` (the scheme's port by default):
/// whether the scheme asks for TLS, the host and the port.
fn parse_uri(uri: &str) -> Result<(bool, String, u16), SpecError> {
    let bad = |why: &str| {
        SpecError::invalid(
            n::TUNNEL_URI,
            format!(
                "{why}; expected HOST:PORT, http://HOST:PORT or https://HOST:PORT, got {uri:?}"
            ),
        )
    };
    let (tls, default_port, rest) = if let Some(r) = uri.strip_prefix("https://") {
        (true, Some(443), r)
    } else if let Some(r) = uri.strip_prefix("http://") {
        (false, Some(80), r)
    } else if uri.contains("://") {
        return Err(bad("the scheme must be http or https"));
    } else {
        (false, None, uri)
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return Err(bad("a proxy is an address, with no path, query or user"));
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            (h, after.strip_prefix(':'))
        }
        None => match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        },
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match (port, default_port) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| bad("bad port"))?,
        (None, Some(p)) => p,
        (None, None) => return Err(bad("no port")),
    };
    Ok((tls, host.to_string(), port))
}

/// Refuses the pairs of load and tunnel protocol that cannot work.
fn check_pair(load: Protocol, tunnel: Protocol, tls: bool) -> Result<(), SpecError> {
    let o = n::TUNNEL_PROTOCOL;
    match (load, tunnel) {
        (Protocol::Http3, Protocol::Http1) => Err(must(
            o,
            "http1 cannot carry HTTP/3 load (a CONNECT tunnel is TCP; Nighthawk refuses the \
             pair too): HTTP/3 load is tunnelled by CONNECT-UDP over an http2 or http3 tunnel",
        )),
        (Protocol::Http3, Protocol::Http2) if !tls => Err(must(
            n::TUNNEL_TLS_CONTEXT,
            msg!(
                "(or an https:// ",
                n::TUNNEL_URI,
                ") is required to carry HTTP/3 load: CONNECT-UDP goes over TLS to the proxy, as \
                 in Nighthawk"
            ),
        )),
        (_, Protocol::Http3) if !tls => Err(must(
            n::TUNNEL_TLS_CONTEXT,
            msg!(
                "(or an https:// ",
                n::TUNNEL_URI,
                ") is required for an http3 tunnel: QUIC to the proxy is TLS, as in Nighthawk"
            ),
        )),
        (_, Protocol::Http1 | Protocol::Http2 | Protocol::Http3) => Ok(()),
    }
}

/// TLS to the proxy: its context's settings, and `--tunnel-ca` beside (not over) a context's
/// trusted CA.
fn tls_options(
    patch: Option<&TlsPatch>,
    ca: Option<std::path::PathBuf>,
) -> Result<TlsOptions, SpecError> {
    let p = patch.cloned().unwrap_or_default();
    if ca.is_some() && p.ca_file.is_some() {
        return Err(must(
            n::TUNNEL_CA,
            msg!("cannot be used with a trusted CA in ", n::TUNNEL_TLS_CONTEXT),
        ));
    }
    if let (Some(lo), Some(hi)) = (p.min_version, p.max_version) {
        if lo > hi {
            return Err(must(
                n::TUNNEL_TLS_CONTEXT,
                "sets a minimum TLS version above the maximum",
            ));
        }
    }
    Ok(TlsOptions {
        ca_file: ca.or(p.ca_file),
        insecure: false,
        sni: p.sni,
        min_version: p.min_version,
        max_version: p.max_version,
        cipher_suites: p.cipher_suites.unwrap_or_default(),
        no_session_resumption: p.no_session_resumption.unwrap_or(false),
    })
}

/// `tunnel_options` as Nighthawk's proto3 JSON writes it, with Shrike's `tunnel_ca`.
pub(crate) fn to_json(t: &TunnelSpec) -> Value {
    let mut o = Map::new();
    o.insert("tunnel_uri".into(), json!(t.uri));
    o.insert("tunnel_protocol".into(), json!(t.protocol.name().to_ascii_uppercase()));
    if let Some(c) = &t.tls_context {
        o.insert("tunnel_tls_context".into(), c.clone());
    }
    if let Some(ca) = &t.ca {
        o.insert("tunnel_ca".into(), json!(ca.display().to_string()));
    }
    Value::Object(o)
}
