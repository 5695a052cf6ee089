//! Serving `shrike.v1` on a listener until a shutdown future resolves, with gRPC health
//! (unauthenticated, for Kubernetes probes), server reflection and the service behind
//! authentication: a bearer token, mTLS with a client CA, or both.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Status};

use crate::nighthawk::proto::nighthawk::client::nighthawk_service_server::NighthawkServiceServer;
use crate::proto::shrike_server::ShrikeServer;
use crate::service::{ServiceConfig, ShrikeService};

/// The encoded descriptors of `shrike.v1`, for reflection.
pub const DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/shrike_v1_descriptor.bin"));

/// Largest message either side accepts: a long run's result (every statistic's histogram)
/// outgrows gRPC's 4 MiB default.
pub const MAX_MESSAGE: usize = 256 << 20;

/// How clients prove who they are.
#[derive(Clone, Default)]
pub struct Security {
    /// Required as `authorization: Bearer TOKEN` on every call but health checks.
    pub token: Option<String>,
    /// The server's certificate chain and key, PEM: the service speaks TLS.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    /// Clients must present a certificate signed by this CA (PEM): mutual TLS.
    pub client_ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for Security {
    // The token never appears in logs, not even in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls.is_some())
            .field("client_ca", &self.client_ca.is_some())
            .finish()
    }
}

impl Security {
    /// Whether clients must authenticate.
    pub fn authenticates(&self) -> bool {
        self.token.is_some() || self.client_ca.is_some()
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("TLS: {0}")]
    Tls(String),
    #[error("--client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)")]
    ClientCaWithoutTls,
    #[error("serving: {0}")]
    Transport(String),
}

/// Checks the bearer token in constant time, so a wrong guess learns nothing from timing.
#[derive(Clone)]
struct Auth(Option<Arc<[u8]>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(want) = &self.0 else { return Ok(req) };
        let got = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .ok_or_else(|| {
                Status::unauthenticated("missing bearer token (metadata authorization: Bearer …)")
            })?;
        let got = got.trim().as_bytes();
        let mut diff = u8::from(got.len() != want.len());
        for (i, w) in want.iter().enumerate() {
            diff |= w ^ got.get(i).copied().unwrap_or(0);
        }
        if diff != 0 {
            return Err(Status::unauthenticated("the bearer token is not this service's"));
        }
        Ok(req)
    }
}

/// The transport: HTTP/2 keepalive, and TLS (with client certificates) when configured.
fn builder(security: &Security) -> Result<tonic::transport::Server, ServeError> {
    // A coordinator that vanishes without a reset is found dead by HTTP/2 pings, and its
    // dropped stream stops its run: a lost client never leaves load running.
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(20)));
    match (&security.tls, &security.client_ca) {
        (Some((cert, key)), ca) => {
            let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
            if let Some(ca) = ca {
                tls = tls.client_ca_root(Certificate::from_pem(ca));
            }
            builder = builder.tls_config(tls).map_err(|e| ServeError::Tls(e.to_string()))?;
        }
        (None, Some(_)) => return Err(ServeError::ClientCaWithoutTls),
        (None, None) => {}
    }
    Ok(builder)
}

/// Serves Nighthawk's request source (`--service dummy-request-source`) until `shutdown`
/// resolves, with health, reflection and the same authentication as the execution service.
pub async fn serve_request_source(
    listener: TcpListener,
    source: crate::nighthawk::request_source::Source,
    security: Security,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    use crate::nighthawk::proto::nighthawk::request_source::nighthawk_request_source_service_server::NighthawkRequestSourceServiceServer;
    use crate::nighthawk::request_source::RequestSourceApi;
    let auth = Auth(security.token.as_ref().map(|t| Arc::from(t.as_bytes())));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<NighthawkRequestSourceServiceServer<RequestSourceApi>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::nighthawk::DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| ServeError::Transport(format!("reflection: {e}")))?;
    let api = NighthawkRequestSourceServiceServer::new(RequestSourceApi::new(source));
    builder(&security)?
        .add_service(health)
        .add_service(InterceptedService::new(reflection, auth.clone()))
        .add_service(InterceptedService::new(api, auth))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await
        .map_err(|e| ServeError::Transport(format!("{e:#}")))
}

/// Serves until `shutdown` resolves; then stops the runs in progress (their streams end with
/// what they measured) and drains.
pub async fn serve(
    listener: TcpListener,
    config: ServiceConfig,
    security: Security,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let service = ShrikeService::new(config);
    let auth = Auth(security.token.as_ref().map(|t| Arc::from(t.as_bytes())));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<ShrikeServer<ShrikeService>>().await;
    reporter.set_serving::<NighthawkServiceServer<crate::nighthawk::service::NighthawkApi>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(crate::nighthawk::DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| ServeError::Transport(format!("reflection: {e}")))?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(crate::nighthawk::DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| ServeError::Transport(format!("reflection: {e}")))?;
    let shrike = ShrikeServer::new(service.clone())
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    // Nighthawk's API over the same runs, slots and rules.
    let nighthawk = NighthawkServiceServer::new(service.nighthawk())
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);

    let mut builder = builder(&security)?;
    let stopping = service.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.stop_all();
    };
    builder
        .add_service(health)
        .add_service(InterceptedService::new(reflection, auth.clone()))
        .add_service(InterceptedService::new(reflection_alpha, auth.clone()))
        .add_service(InterceptedService::new(shrike, auth.clone()))
        .add_service(InterceptedService::new(nighthawk, auth))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await
        .map_err(|e| ServeError::Transport(format!("{e:#}")))
}
