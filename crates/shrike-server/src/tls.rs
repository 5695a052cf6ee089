//! TLS for the test server: certificates from PEM or generated on the spot, rustls with the ring
//! provider, and ALPN offering `h2` and `http/1.1` so one port serves both protocols. The same
//! certificate serves HTTP/3, whose QUIC handshake needs a configuration of its own (TLS 1.3
//! only, ALPN `h3`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// ALPN identifiers in preference order: a client offering both gets HTTP/2.
pub(crate) const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP1: &[u8] = b"http/1.1";
/// RFC 9114's identifier; QUIC connections offering anything else are refused.
const ALPN_H3: &[u8] = b"h3";

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no PEM certificate found in the certificate input")]
    NoCertificate,
    #[error("invalid PEM certificate: {0}")]
    InvalidCertificate(String),
    #[error("no PEM private key (PKCS#8, PKCS#1 or SEC1) found in the key input")]
    NoPrivateKey,
    #[error("invalid PEM private key: {0}")]
    InvalidPrivateKey(String),
    /// The certificate and key were read but rustls refused them (e.g. they do not match, or
    /// the key type is unsupported).
    #[error("unusable certificate or key: {0}")]
    Rejected(String),
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(String),
}

/// A server certificate chain and key, ready to serve: TLS 1.2 and 1.3 via rustls (ring), ALPN
/// `h2` then `http/1.1`, stateless session tickets, and `SSLKEYLOGFILE` honoured for packet
/// captures. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    rustls: Arc<rustls::ServerConfig>,
    /// For QUIC: the same certificate, TLS 1.3 only (QUIC has no other), ALPN `h3`.
    quic: Arc<rustls::ServerConfig>,
}

impl TlsConfig {
    /// From PEM text: `cert_chain` holds the leaf certificate first, then any intermediates;
    /// `key` holds the leaf's private key.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::InvalidCertificate(e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate);
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| match e {
            rustls_pki_types::pem::Error::NoItemsFound => TlsError::NoPrivateKey,
            e => TlsError::InvalidPrivateKey(e.to_string()),
        })?;
        Self::from_der(certs, key)
    }

    /// From PEM files, as `--tls-cert` and `--tls-key` name them.
    pub fn from_pem_files(cert_chain: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
        };
        Self::from_pem(&read(cert_chain)?, &read(key)?)
    }

    fn from_der(
        certs: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, TlsError> {
        let rustls = server_config(
            &[&rustls::version::TLS13, &rustls::version::TLS12],
            certs.clone(),
            key.clone_key(),
            &[ALPN_H2, ALPN_HTTP1],
        )?;
        let quic = server_config(&[&rustls::version::TLS13], certs, key, &[ALPN_H3])?;
        Ok(Self { rustls: Arc::new(rustls), quic: Arc::new(quic) })
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.rustls.clone())
    }

    pub(crate) fn quic(&self) -> Arc<rustls::ServerConfig> {
        self.quic.clone()
    }
}

fn server_config(
    versions: &[&'static rustls::SupportedProtocolVersion],
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
) -> Result<rustls::ServerConfig, TlsError> {
    let rejected = |e: rustls::Error| TlsError::Rejected(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(rejected)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(rejected)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    // Stateless tickets let clients resume without the server keeping a session cache
    // whose size would have to track the connection count of the load test.
    config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(rejected)?;
    // Writes nothing unless SSLKEYLOGFILE is set.
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

/// A freshly generated self-signed certificate (ECDSA P-256) and its key, in PEM. Clients
/// verify the server by trusting the certificate itself (`curl --cacert cert.pem`).
#[derive(Clone)]
pub struct SelfSignedCert {
    cert_pem: String,
    key_pem: String,
    names: Vec<String>,
}

impl std::fmt::Debug for SelfSignedCert {
    // The private key stays out of logs and panic messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSignedCert").field("names", &self.names).finish_non_exhaustive()
    }
}

impl SelfSignedCert {
    /// The names a loopback test server is reached by.
    pub const LOOPBACK_NAMES: [&'static str; 3] = ["localhost", "127.0.0.1", "::1"];

    /// Generates a certificate valid for `names`: DNS names, or IP addresses in their usual
    /// text form, which become IP subject alternative names.
    pub fn generate(names: &[&str]) -> Result<Self, TlsError> {
        let fail = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names.clone()).map_err(fail)?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, "shrike test server");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let cert = params.self_signed(&key).map_err(fail)?;
        Ok(Self { cert_pem: cert.pem(), key_pem: key.serialize_pem(), names })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn tls_config(&self) -> Result<TlsConfig, TlsError> {
        TlsConfig::from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_load() {
        let cert = SelfSignedCert::generate(&SelfSignedCert::LOOPBACK_NAMES).unwrap();
        assert!(cert.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(cert.key_pem().contains("PRIVATE KEY"));
        assert!(!format!("{cert:?}").contains("PRIVATE"));
        let tls = cert.tls_config().unwrap();
        assert_eq!(tls.rustls.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(tls.quic.alpn_protocols, [b"h3".to_vec()]);
    }

    #[test]
    fn bad_pem_is_named() {
        let cert = SelfSignedCert::generate(&["localhost"]).unwrap();
        let other = SelfSignedCert::generate(&["localhost"]).unwrap();
        let pem = cert.cert_pem().as_bytes();
        let key = cert.key_pem().as_bytes();
        assert!(matches!(TlsConfig::from_pem(b"", key), Err(TlsError::NoCertificate)));
        assert!(matches!(TlsConfig::from_pem(pem, b"junk"), Err(TlsError::NoPrivateKey)));
        // A key that does not belong to the certificate.
        let mismatched = TlsConfig::from_pem(pem, other.key_pem().as_bytes());
        assert!(matches!(mismatched, Err(TlsError::Rejected(_))), "{mismatched:?}");
        let missing = TlsConfig::from_pem_files(Path::new("/nonexistent/c.pem"), Path::new("k"));
        let err = missing.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/c.pem"), "{err}");
    }
}
