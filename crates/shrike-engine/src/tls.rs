//! Client TLS (rustls with the ring provider), configured once per run.
//!
//! Unlike Nighthawk, Shrike validates server certificates by default, against the system
//! roots plus any `--tls-ca` file: a benchmark that silently talks to the wrong server measures
//! the wrong thing. `insecure` skips chain and name checks but still verifies the handshake
//! signatures, so the session is at least bound to the certificate presented.
//!
//! The [`ClientConfig`] is built once and shared (`Arc`) by every worker; its session cache is
//! shared too, so a connection opened by any worker can resume a session another one made.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::config::Protocol;
pub use shrike_spec::{Http3Options, TlsOptions, TlsVersion};

/// The rustls version of a pinned [`TlsVersion`].
fn rustls_version(v: TlsVersion) -> &'static rustls::SupportedProtocolVersion {
    match v {
        TlsVersion::Tls12 => &rustls::version::TLS12,
        TlsVersion::Tls13 => &rustls::version::TLS13,
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read CA file {path}: {reason}")]
    CaFile { path: String, reason: String },
    #[error("unknown TLS cipher suite {name:?}; valid suites: {valid}")]
    UnknownSuite { name: String, valid: String },
    #[error("invalid TLS version range: {0}")]
    Versions(String),
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
    #[error("cannot use this TLS configuration for QUIC: {0}")]
    Quic(String),
    #[error("cannot build the certificate verifier: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
}

/// A run's TLS client: the shared rustls config and the name to verify.
#[derive(Clone)]
pub struct TlsClient {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: ServerName<'static>,
    /// The same rustls config wrapped for QUIC, built once per run for HTTP/3 runs.
    pub(crate) quic: Option<quinn::ClientConfig>,
    sni_override: bool,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

impl TlsClient {
    /// Builds the client for `host` (the URL host) speaking `protocol`.
    pub fn build(opts: &TlsOptions, host: &str, protocol: Protocol) -> Result<TlsClient, TlsError> {
        let mut provider = rustls::crypto::ring::default_provider();
        if !opts.cipher_suites.is_empty() {
            provider.cipher_suites = select_suites(&provider, &opts.cipher_suites)?;
        }
        let versions = if protocol == Protocol::Http3 {
            // QUIC is TLS 1.3 only (RFC 9001 §4.2): a range that excludes it cannot work, and
            // offering TLS 1.2 would only be ignored.
            if opts.max_version == Some(TlsVersion::Tls12) {
                return Err(TlsError::Versions("HTTP/3 (QUIC) requires TLS 1.3".into()));
            }
            vec![&rustls::version::TLS13]
        } else {
            select_versions(opts.min_version, opts.max_version)?
        };
        let algorithms = provider.signature_verification_algorithms;
        let provider = Arc::new(provider);
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| TlsError::Versions(e.to_string()))?;
        let mut config = if opts.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(SignaturesOnly(algorithms)))
                .with_no_client_auth()
        } else {
            let (roots, pinned) = roots(opts.ca_file.as_deref())?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedOrWebPki {
                    webpki,
                    pinned,
                    algorithms,
                }))
                .with_no_client_auth()
        };
        config.alpn_protocols = vec![protocol.alpn().to_vec()];
        if opts.no_session_resumption {
            config.resumption = Resumption::disabled();
        }
        let server_name = server_name(opts.sni.as_deref().unwrap_or(host))?;
        let config = Arc::new(config);
        let quic = if protocol == Protocol::Http3 {
            // Fails when no TLS 1.3 suite usable for QUIC's packet protection is enabled.
            let q = quinn::crypto::rustls::QuicClientConfig::try_from(config.clone())
                .map_err(|e| TlsError::Quic(e.to_string()))?;
            let mut client = quinn::ClientConfig::new(Arc::new(q));
            client.transport_config(Arc::new(quic_transport(Http3Options::default())));
            Some(client)
        } else {
            None
        };
        Ok(TlsClient { config, server_name, quic, sni_override: opts.sni.is_some() })
    }

    /// HTTP/3's QUIC flow-control windows as given (Nighthawk's `http3_protocol_options`);
    /// unset ones keep the defaults.
    pub fn with_quic_windows(mut self, h3: Http3Options) -> TlsClient {
        if let Some(q) = &mut self.quic {
            q.transport_config(Arc::new(quic_transport(h3)));
        }
        self
    }

    /// The same configuration (and session cache) for another host, as multi-target runs
    /// need; an explicit SNI override applies to every host.
    pub fn for_host(&self, host: &str) -> Result<TlsClient, TlsError> {
        let server_name =
            if self.sni_override { self.server_name.clone() } else { server_name(host)? };
        Ok(TlsClient { server_name, ..self.clone() })
    }

    /// How error messages name the peer: `(SNI name)` or `(no SNI)`.
    pub(crate) fn describe_sni(&self) -> String {
        match &self.server_name {
            ServerName::DnsName(d) => format!("SNI {}", d.as_ref()),
            _ => "no SNI".to_string(),
        }
    }

    /// The server name as quinn takes it (a string it parses back into a [`ServerName`]).
    pub(crate) fn server_name_str(&self) -> String {
        match &self.server_name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            // Invariant-free fallback: rustls may add variants; quinn validates the string.
            other => format!("{other:?}"),
        }
    }
}

/// QUIC transport settings for HTTP/3 runs.
fn quic_transport(h3: Http3Options) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    // A response slower than the idle timeout (30 s on both sides by default) must not kill
    // its connection: HTTP/2 over TCP has no such limit, and a slow server is what a load test
    // may be measuring. Pings well inside it keep connections alive.
    t.keep_alive_interval(Some(Duration::from_secs(10)));
    // Bodies are consumed as they arrive, so the window only bounds how far a server may send
    // ahead; as in the h2 pool, keep flow control out of the measurement of large responses.
    t.stream_receive_window(quinn::VarInt::from_u32(h3.stream_window.unwrap_or(16 * 1024 * 1024)));
    if let Some(w) = h3.connection_window {
        t.receive_window(quinn::VarInt::from_u32(w));
    }
    t
}

/// An IP literal becomes an IP server name: rustls then sends no SNI (RFC 6066 forbids literals
/// there) and validates against the certificate's IP SANs.
fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    match name.parse::<IpAddr>() {
        Ok(ip) => Ok(ServerName::IpAddress(ip.into())),
        Err(_) => ServerName::try_from(name.to_string())
            .map_err(|_| TlsError::ServerName(name.to_string())),
    }
}

/// Names of every cipher suite the ring provider supports (for error messages and help).
pub fn cipher_suite_names() -> Vec<String> {
    rustls::crypto::ring::ALL_CIPHER_SUITES.iter().map(|s| format!("{:?}", s.suite())).collect()
}

fn select_suites(
    provider: &CryptoProvider,
    names: &[String],
) -> Result<Vec<rustls::SupportedCipherSuite>, TlsError> {
    let all = rustls::crypto::ring::ALL_CIPHER_SUITES;
    names
        .iter()
        .map(|n| {
            all.iter()
                .find(|s| format!("{:?}", s.suite()).eq_ignore_ascii_case(n.trim()))
                .copied()
                .ok_or_else(|| TlsError::UnknownSuite {
                    name: n.clone(),
                    valid: cipher_suite_names().join(", "),
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|mut v| {
            // Keep the provider's preference order rather than the order given.
            v.sort_by_key(|s| {
                provider.cipher_suites.iter().position(|p| p.suite() == s.suite()).unwrap_or(0)
            });
            v.dedup_by_key(|s| s.suite());
            v
        })
}

fn select_versions(
    min: Option<TlsVersion>,
    max: Option<TlsVersion>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, TlsError> {
    let lo = min.unwrap_or(TlsVersion::Tls12);
    let hi = max.unwrap_or(TlsVersion::Tls13);
    if lo > hi {
        return Err(TlsError::Versions(format!(
            "the minimum ({lo:?}) is above the maximum ({hi:?})"
        )));
    }
    Ok([TlsVersion::Tls13, TlsVersion::Tls12]
        .into_iter()
        .filter(|v| (lo..=hi).contains(v))
        .map(rustls_version)
        .collect())
}

/// The system's trust roots plus `ca_file`'s certificates, and `ca_file`'s certificates alone
/// (the ones a server may present as its own; see [`PinnedOrWebPki`]).
fn roots(
    ca_file: Option<&Path>,
) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), TlsError> {
    let mut store = RootCertStore::empty();
    // Unparsable system certificates are skipped, as every TLS client does; a missing system
    // store just means only --tls-ca roots are trusted.
    let native = rustls_native_certs::load_native_certs();
    store.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let err = |reason: String| TlsError::CaFile { path: path.display().to_string(), reason };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let certs = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(format!("invalid PEM: {e}")))?;
        if certs.is_empty() {
            return Err(err("no PEM certificates (-----BEGIN CERTIFICATE-----) found".into()));
        }
        for c in &certs {
            store.add(c.clone()).map_err(|e| err(format!("invalid certificate: {e}")))?;
        }
        return Ok((store, certs));
    }
    Ok((store, Vec::new()))
}

/// The default verifier (webpki: chain to a root, name, dates, key usage), except that a server
/// certificate byte-identical to one in the `--tls-ca` file is trusted as itself, with only its
/// name and validity dates checked. That is how curl, Go and browsers treat an imported
/// self-signed certificate, and it is what `openssl req -x509` users expect: its certificates
/// are CA:TRUE, which webpki rightly refuses as a server's own (`CaUsedAsEndEntity`) when it
/// builds a chain. Pinning the exact bytes trusts nothing more than the user handed us.
#[derive(Debug)]
struct PinnedOrWebPki {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.pinned.iter().any(|p| p.as_ref() == end_entity.as_ref()) {
            return self.webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
        }
        check_validity(end_entity, now)?;
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    // The handshake is still signed with the presented certificate's key, pinned or not.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The validity-window check webpki makes, for a pinned certificate (which bypasses webpki's
/// chain building, where that check lives: neither rustls nor webpki exposes the dates).
fn check_validity(cert: &CertificateDer<'_>, now: UnixTime) -> Result<(), rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(CertificateError::BadEncoding);
    let (not_before, not_after) = validity(cert.as_ref()).ok_or_else(bad)?;
    let at = |secs: u64| UnixTime::since_unix_epoch(Duration::from_secs(secs));
    let secs = now.as_secs();
    if not_before > not_after {
        return Err(bad());
    }
    if secs < not_before {
        let not_before = at(not_before);
        return Err(CertificateError::NotValidYetContext { time: now, not_before }.into());
    }
    if secs > not_after {
        let not_after = at(not_after);
        return Err(CertificateError::ExpiredContext { time: now, not_after }.into());
    }
    Ok(())
}

/// One DER element at the start of `input`: its tag, its contents and what follows it.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // Long form: the low bits count the length bytes; 4 covers any certificate.
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        (bytes.iter().fold(0usize, |len, b| (len << 8) | usize::from(*b)), rest)
    };
    if rest.len() < len {
        return None;
    }
    let (contents, rest) = rest.split_at(len);
    Some((tag, contents, rest))
}

/// A certificate's notBefore and notAfter as Unix seconds (RFC 5280 §4.1: Certificate ->
/// tbsCertificate -> [version], serialNumber, signature, issuer, validity).
fn validity(cert: &[u8]) -> Option<(u64, u64)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, cert, _) = der_element(cert)? else { return None };
    let (SEQUENCE, tbs, _) = der_element(cert)? else { return None };
    let (mut tag, _, mut rest) = der_element(tbs)?;
    if tag == 0xa0 {
        // The explicit [0] version, absent from v1 certificates.
        (tag, _, rest) = der_element(rest)?;
    }
    if tag != 0x02 {
        return None; // serialNumber
    }
    let (SEQUENCE, _, rest) = der_element(rest)? else { return None }; // signature
    let (SEQUENCE, _, rest) = der_element(rest)? else { return None }; // issuer
    let (SEQUENCE, validity, _) = der_element(rest)? else { return None };
    let (tag, not_before, rest) = der_element(validity)?;
    let not_before = der_time(tag, not_before)?;
    let (tag, not_after, _) = der_element(rest)?;
    Some((not_before, der_time(tag, not_after)?))
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) as Unix seconds; RFC 5280
/// §4.1.2.5 allows only these forms. Times before 1970 count as 0.
fn der_time(tag: u8, value: &[u8]) -> Option<u64> {
    let digits = value.strip_suffix(b"Z")?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        digits.get(range)?.iter().try_fold(0i64, |n, d| Some(n * 10 + i64::from(d - b'0')))
    };
    let (year, rest) = match (tag, digits.len()) {
        // UTCTime years 50..99 are 19xx (RFC 5280 §4.1.2.5.1).
        (0x17, 12) => (num(0..2).map(|y| if y >= 50 { 1900 + y } else { 2000 + y })?, 2),
        (0x18, 14) => (num(0..4)?, 4),
        _ => return None,
    };
    let field = |i: usize| num(rest + 2 * i..rest + 2 * i + 2);
    let (month, day, hour, minute, second) =
        (field(0)?, field(1)?, field(2)?, field(3)?, field(4)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 59 {
        return None;
    }
    // Validated above: month 1..=12 and day 1..=31 fit u32.
    let days = shrike_stats::timestamp::days_from_civil(year, month as u32, day as u32);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(u64::try_from(secs).unwrap_or(0))
}

/// `--tls-insecure`: any certificate chain and name is accepted, but the handshake signature
/// must still be valid for the presented certificate.
#[derive(Debug)]
struct SignaturesOnly(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for SignaturesOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// Advice appended to a failed certificate check where the cause is a common set-up mistake
/// rather than an attack. Matched on the error text because the same webpki error reaches us
/// wrapped differently by rustls (TCP) and quinn (QUIC).
/// A proxy's certificate (`proxy`) is trusted through the tunnel's own flags, never the
/// target's.
pub(crate) fn certificate_hint(error: &str, proxy: bool) -> &'static str {
    if proxy {
        return if error.contains("CaUsedAsEndEntity") {
            " (the proxy presents a CA certificate as its own: pass that very certificate with \
             --tunnel-ca to trust it, or re-issue it with `-addext \
             basicConstraints=critical,CA:FALSE`)"
        } else if error.contains("UnknownIssuer") {
            " (pass the proxy's issuing CA with --tunnel-ca, or a trusted CA in \
             --tunnel-tls-context)"
        } else {
            ""
        };
    }
    if error.contains("CaUsedAsEndEntity") {
        // `openssl req -x509` marks its certificate CA:TRUE; webpki (rightly) refuses that as a
        // server's own unless the user pinned that very certificate with --tls-ca.
        " (the server presents a CA certificate as its own, as `openssl req -x509` makes by \
         default: pass that very certificate with --tls-ca to trust it, re-issue it with \
         `-addext basicConstraints=critical,CA:FALSE`, or sign a leaf certificate with that \
         CA; --tls-insecure skips verification)"
    } else if error.contains("UnknownIssuer") {
        " (pass the issuing CA with --tls-ca, or skip verification with --tls-insecure)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_times_are_unix_seconds() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"200101000000Z"), Some(1_577_836_800));
        assert_eq!(der_time(0x18, b"20240229235959Z"), Some(1_709_251_199));
        assert_eq!(der_time(0x18, b"99991231235959Z"), Some(253_402_300_799));
        assert_eq!(der_time(0x17, b"500101000000Z"), Some(0), "1950 is before the epoch");
        for bad in [&b"200101000000"[..], b"2001010000Z", b"201301000000Z", b"20010100+000Z"] {
            assert_eq!(der_time(0x17, bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(der_time(0x04, b"200101000000Z"), None);
    }

    #[test]
    fn versions_parse_and_range() {
        assert_eq!(TlsVersion::parse("1.2"), Some(TlsVersion::Tls12));
        assert_eq!(TlsVersion::parse("TLSv1.3"), Some(TlsVersion::Tls13));
        assert_eq!(TlsVersion::parse("1.1"), None);
        assert_eq!(select_versions(None, None).map(|v| v.len()).ok(), Some(2));
        assert_eq!(select_versions(Some(TlsVersion::Tls13), None).map(|v| v.len()).ok(), Some(1));
        assert!(select_versions(Some(TlsVersion::Tls13), Some(TlsVersion::Tls12)).is_err());
    }

    #[test]
    fn suites_by_name() {
        let opts = TlsOptions {
            cipher_suites: vec!["tls13_aes_128_gcm_sha256".into()],
            insecure: true,
            ..TlsOptions::default()
        };
        let c = TlsClient::build(&opts, "localhost", Protocol::Http2).expect("valid");
        assert_eq!(c.config.alpn_protocols, vec![b"h2".to_vec()]);
        assert_eq!(c.describe_sni(), "SNI localhost");
        let opts = TlsOptions { cipher_suites: vec!["RC4_MD5".into()], ..TlsOptions::default() };
        let e = TlsClient::build(&opts, "localhost", Protocol::Http1).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("TLS13_AES_256_GCM_SHA384"), "{e}");
        // A TLS 1.2-only suite with TLS 1.3 pinned leaves nothing to negotiate.
        let opts = TlsOptions {
            cipher_suites: vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()],
            min_version: Some(TlsVersion::Tls13),
            ..TlsOptions::default()
        };
        assert!(TlsClient::build(&opts, "localhost", Protocol::Http1).is_err());
    }

    #[test]
    fn http3_is_tls13_only_with_a_quic_config() {
        let opts = TlsOptions { insecure: true, ..TlsOptions::default() };
        let c = TlsClient::build(&opts, "127.0.0.1", Protocol::Http3).expect("valid");
        assert_eq!(c.config.alpn_protocols, vec![b"h3".to_vec()]);
        assert!(c.quic.is_some());
        assert_eq!(c.server_name_str(), "127.0.0.1");
        assert_eq!(
            c.for_host("example.com").map(|c| c.server_name_str()).ok().as_deref(),
            Some("example.com")
        );
        assert!(TlsClient::build(&opts, "h", Protocol::Http2).is_ok_and(|c| c.quic.is_none()));
        let opts = TlsOptions { max_version: Some(TlsVersion::Tls12), ..opts };
        let e = TlsClient::build(&opts, "h", Protocol::Http3).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("TLS 1.3"), "{e}");
    }

    #[test]
    fn ip_hosts_send_no_sni_and_ca_errors_are_clear() {
        let c =
            TlsClient::build(&TlsOptions::default(), "127.0.0.1", Protocol::Http1).expect("valid");
        assert_eq!(c.describe_sni(), "no SNI");
        assert_eq!(
            c.for_host("example.com").map(|c| c.describe_sni()).ok().as_deref(),
            Some("SNI example.com")
        );
        let opts = TlsOptions { sni: Some("fixed".into()), ..TlsOptions::default() };
        let c = TlsClient::build(&opts, "a", Protocol::Http1).expect("valid");
        assert_eq!(c.for_host("b").map(|c| c.describe_sni()).ok().as_deref(), Some("SNI fixed"));
        let opts = TlsOptions { ca_file: Some("/no/such/ca.pem".into()), ..TlsOptions::default() };
        let e = TlsClient::build(&opts, "h", Protocol::Http1).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("/no/such/ca.pem"), "{e}");
    }
}
