//! Nighthawk's remote request source, `nighthawk.request_source.NighthawkRequestSourceService`,
//! both sides.
//!
//! - [`RequestSourceApi`]: `shrike service --service dummy-request-source`. Without a file it
//!   answers as Nighthawk's dummy source does (endless requests carrying
//!   `x-from-remote-request-source: 1`); with a request file (Shrike's format) it serves that
//!   file's requests in order, each exactly once across every stream that asks (so N workers
//!   split the list), then ends each stream; `--repeat` starts over instead.
//! - [`streams`]: the client a run uses (`--request-source grpc://…`): one stream per worker,
//!   asking for [`BATCH`] requests at a time as Nighthawk's client does, and handing each to
//!   its worker through a bounded channel (its back-pressure is the flow control).
//!
//! Nighthawk's `RequestSpecifier` carries a method, path, authority, headers and a body
//! *length*: a request file's body content does not travel, only its size.

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use shrike_engine::{RemoteItem, RemoteRequest, RemoteStream, RunSpec};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::proto::envoy::config::core::v3::{HeaderMap, HeaderValue};
use super::proto::nighthawk::request_source::nighthawk_request_source_service_client::NighthawkRequestSourceServiceClient;
use super::proto::nighthawk::request_source::nighthawk_request_source_service_server::NighthawkRequestSourceService;
use super::proto::nighthawk::request_source::request_specifier::OneofHeaders;
use super::proto::nighthawk::request_source::{
    RequestSpecifier, RequestStreamRequest, RequestStreamResponse,
};
use crate::coordinator::{authorized, channel, ClientSecurity};

/// Requests a client asks for at once: few enough that workers sharing a finite list each
/// get a share, enough that one ask per batch costs nothing at high rates.
pub const BATCH: u64 = 32;
/// Requests a worker's channel holds ahead of its pacer.
const AHEAD: usize = 256;
/// Largest quantity one ask may name: a client cannot make the service queue unbounded work.
const MAX_ASK: u64 = 65_536;

/// What the source serves.
#[derive(Debug)]
pub enum Source {
    /// Nighthawk's dummy: endless empty requests with one marker header.
    Dummy,
    /// These requests, in order, once each across all streams (or over and over).
    List { requests: Vec<RequestSpecifier>, repeat: bool },
}

/// The request-source service.
#[derive(Clone)]
pub struct RequestSourceApi {
    source: Arc<Source>,
    next: Arc<Mutex<usize>>,
}

impl RequestSourceApi {
    pub fn new(source: Source) -> RequestSourceApi {
        RequestSourceApi { source: Arc::new(source), next: Arc::default() }
    }

    /// The next request to serve, or `None` once a non-repeating list is spent.
    fn take(&self) -> Option<RequestSpecifier> {
        match &*self.source {
            Source::Dummy => Some(RequestSpecifier {
                oneof_headers: Some(OneofHeaders::V3Headers(HeaderMap {
                    headers: vec![header("x-from-remote-request-source", "1")],
                })),
                ..RequestSpecifier::default()
            }),
            Source::List { requests, repeat } => {
                let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
                if requests.is_empty() || (!repeat && *next >= requests.len()) {
                    return None;
                }
                let r = requests[*next % requests.len()].clone();
                *next += 1;
                Some(r)
            }
        }
    }
}

fn header(k: &str, v: &str) -> HeaderValue {
    HeaderValue { key: k.to_string(), value: v.to_string(), raw_value: Vec::new() }
}

/// A request-file entry as Nighthawk's `RequestSpecifier`.
pub fn specifier(r: &shrike_engine::RequestSpec) -> RequestSpecifier {
    let headers = r.headers().iter().map(|(k, v)| header(k, v)).collect();
    RequestSpecifier {
        method: Some(r.method().to_string()),
        path: r.path().map(String::from),
        authority: None,
        content_length: Some(r.body_size()).filter(|n| *n > 0),
        oneof_headers: Some(OneofHeaders::V3Headers(HeaderMap { headers })),
    }
}

/// A jobs file's HTTP requests (`shrike jobs import`'s format), in the order they were sent:
/// each captured request's method, path, `host` (the authority) and headers, and its body's
/// length. Jobs that are not HTTP are an error naming the first.
pub fn from_jobs(jobs: shrike_jobs::JobReader) -> Result<Vec<RequestSpecifier>, String> {
    let mut timed = Vec::new();
    for job in jobs {
        let job = job.map_err(|e| e.to_string())?;
        if job.protocol != shrike_jobs::JobProtocol::Http {
            return Err(format!(
                "job {} is {}: a request source serves HTTP requests",
                job.id,
                job.protocol.name()
            ));
        }
        for (i, r) in job.requests.iter().enumerate() {
            let s = parse_http(r.body.data())
                .map_err(|why| format!("job {} request {i}: {why}", job.id))?;
            timed.push((job.start + r.at, timed.len(), s));
        }
    }
    // Send order; the index keeps equal times in file order.
    timed.sort_by_key(|(at, i, _)| (*at, *i));
    Ok(timed.into_iter().map(|(_, _, s)| s).collect())
}

/// A captured HTTP/1.1 request's head as a specifier (the first request, if pipelined).
fn parse_http(data: &[u8]) -> Result<RequestSpecifier, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("an incomplete HTTP request head".into()),
        Err(e) => return Err(format!("not an HTTP request ({e})")),
    };
    let mut s = RequestSpecifier {
        method: req.method.map(String::from),
        path: req.path.map(String::from),
        ..RequestSpecifier::default()
    };
    let mut kept = Vec::new();
    let mut length = None;
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value).into_owned();
        match h.name.to_ascii_lowercase().as_str() {
            "host" => s.authority = Some(value),
            "content-length" => length = value.trim().parse::<u32>().ok(),
            // Chunked bodies travel as their length; the encoding is the client's own.
            "transfer-encoding" => {}
            name => kept.push(header(name, &value)),
        }
    }
    let body = data.len().saturating_sub(head);
    s.content_length = length.or_else(|| u32::try_from(body).ok()).filter(|n| *n > 0);
    s.oneof_headers = Some(OneofHeaders::V3Headers(HeaderMap { headers: kept }));
    Ok(s)
}

type ResponseStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<RequestStreamResponse, Status>> + Send>>;

#[tonic::async_trait]
impl NighthawkRequestSourceService for RequestSourceApi {
    type RequestStreamStream = ResponseStream;

    async fn request_stream(
        &self,
        request: Request<Streaming<RequestStreamRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let mut asks = request.into_inner();
        let (tx, rx) = mpsc::channel(BATCH as usize);
        let me = self.clone();
        tokio::spawn(async move {
            // Each ask is answered with as many requests as it names (bounded), until the
            // source is spent: then the stream ends, which tells the client so.
            while let Ok(Some(ask)) = asks.message().await {
                for _ in 0..ask.quantity.min(MAX_ASK) {
                    let Some(r) = me.take() else { return };
                    let response =
                        RequestStreamResponse { request_specifier: Some(r), expectations: None };
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// A specifier as the engine merges it over the run's request.
// Nighthawk's deprecated v2 header map is still read: older sources send it.
#[allow(deprecated)]
fn remote(s: RequestSpecifier) -> RemoteRequest {
    let headers = match s.oneof_headers {
        Some(OneofHeaders::V3Headers(m) | OneofHeaders::Headers(m)) => {
            m.headers.into_iter().map(|h| (h.key, h.value)).collect()
        }
        None => Vec::new(),
    };
    RemoteRequest {
        method: s.method,
        path: s.path,
        authority: s.authority,
        headers,
        content_length: s.content_length,
    }
}

/// Connects each of the spec's workers to its request source (`spec.requests().remote_source`)
/// on a thread of its own, and returns the workers' streams. A stream ends when its source
/// does; a failure arrives as an error item, then the end.
pub fn streams(spec: &RunSpec, security: &ClientSecurity) -> Result<Vec<RemoteStream>, String> {
    let Some(address) = spec.requests().remote_source.clone() else {
        return Ok(Vec::new());
    };
    let workers = spec.concurrency().workers().get();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("request source: cannot start its runtime: {e}"))?;
    let mut receivers = Vec::with_capacity(workers);
    let mut senders = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tx, rx) = mpsc::channel::<RemoteItem>(AHEAD);
        receivers.push(rx);
        senders.push(tx);
    }
    let security = security.clone();
    std::thread::Builder::new()
        .name("shrike-request-source".into())
        .spawn(move || {
            runtime.block_on(async move {
                let tasks: Vec<_> = senders
                    .into_iter()
                    .map(|tx| tokio::spawn(pump(address.clone(), security.clone(), tx)))
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            });
        })
        .map_err(|e| format!("request source: cannot start its thread: {e}"))?;
    Ok(receivers)
}

/// One worker's stream: asks for a batch, forwards it, asks again, until the source ends or
/// the worker stops listening.
async fn pump(address: String, security: ClientSecurity, tx: mpsc::Sender<RemoteItem>) {
    let fail = |why: String| {
        let (tx, address) = (tx.clone(), address.clone());
        async move {
            let _ = tx.send(Err(format!("request source grpc://{address}: {why}"))).await;
        }
    };
    let channel = match channel(&address, &security).await {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()).await,
    };
    let mut client = NighthawkRequestSourceServiceClient::new(channel);
    let (ask_tx, ask_rx) = mpsc::unbounded_channel();
    let _ = ask_tx.send(RequestStreamRequest { quantity: BATCH });
    let response = tokio::select! {
        r = client.request_stream(authorized(tokio_stream::wrappers::UnboundedReceiverStream::new(ask_rx), &security)) => r,
        () = tx.closed() => return,
    };
    let mut responses = match response {
        Ok(r) => r.into_inner(),
        Err(s) => return fail(format!("{:?}: {}", s.code(), s.message())).await,
    };
    let mut outstanding = BATCH;
    loop {
        let message = tokio::select! {
            m = responses.message() => m,
            () = tx.closed() => return,
        };
        match message {
            Ok(Some(r)) => {
                outstanding = outstanding.saturating_sub(1);
                if outstanding == 0 {
                    outstanding = BATCH;
                    let _ = ask_tx.send(RequestStreamRequest { quantity: BATCH });
                }
                let item = remote(r.request_specifier.unwrap_or_default());
                if tx.send(Ok(item)).await.is_err() {
                    return;
                }
            }
            // The source is spent: the worker's stream ends with it.
            Ok(None) => return,
            Err(s) => return fail(format!("{:?}: {}", s.code(), s.message())).await,
        }
    }
}
