//! `nighthawk.client.NighthawkService/ExecutionStream`, served by `shrike service`.
//!
//! As in Nighthawk, each `StartRequest` on the stream runs one test and is answered by one
//! `ExecutionResponse`: the `Output`, plus an `error_detail` when the run failed (a failure
//! predicate fired). Options Shrike refuses are answered with `error_detail` alone, naming the
//! option, and the stream stays open for the next request. The rules of Shrike's own API
//! apply: authentication (in front of every service), the target allowlist, the per-run limits
//! and `--max-concurrent-runs`.
//!
//! Beyond Nighthawk (which answers both with an error): a `CancellationRequest` stops the run
//! in progress, whose response then carries what it measured; closing the stream stops it too.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use prost::Message as _;
use prost_reflect::{DynamicMessage, Value as PValue};
use shrike_engine::StopHandle;
use shrike_stats::Termination;
use tokio::sync::mpsc;
use tonic::{Code, Request, Response, Status, Streaming};

use super::proto::nighthawk::client::nighthawk_service_server::NighthawkService;
use super::wire::{self, Raw};
use crate::service::Inner;

const REQUEST: &str = "nighthawk.client.ExecutionRequest";
const RESPONSE: &str = "nighthawk.client.ExecutionResponse";

/// Nighthawk's service over the same state as `shrike.v1` (slots, runs, rules).
#[derive(Clone)]
pub struct NighthawkApi {
    inner: Arc<Inner>,
}

impl NighthawkApi {
    pub(crate) fn new(inner: Arc<Inner>) -> NighthawkApi {
        NighthawkApi { inner }
    }
}

/// The run in progress on one stream, stopped if the stream goes away.
type Current = Arc<Mutex<Option<StopHandle>>>;

fn current_stop(c: &Current) -> Option<StopHandle> {
    c.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn set_current(c: &Current, stop: Option<StopHandle>) {
    *c.lock().unwrap_or_else(|p| p.into_inner()) = stop;
}

/// The responses of one `ExecutionStream`. Dropped (the client left), it stops the run.
pub struct ResponseStream {
    rx: mpsc::UnboundedReceiver<Result<Raw, Status>>,
    current: Current,
}

impl tokio_stream::Stream for ResponseStream {
    type Item = Result<Raw, Status>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        if let Some(stop) = current_stop(&self.current) {
            stop.request(Termination::Interrupted);
        }
    }
}

#[tonic::async_trait]
impl NighthawkService for NighthawkApi {
    type ExecutionStreamStream = ResponseStream;

    async fn execution_stream(
        &self,
        request: Request<Streaming<Raw>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let (tx, rx) = mpsc::unbounded_channel();
        let current: Current = Arc::new(Mutex::new(None));
        let session = Session { inner: self.inner.clone(), tx, current: current.clone() };
        tokio::spawn(session.serve(request.into_inner()));
        Ok(Response::new(ResponseStream { rx, current }))
    }
}

struct Session {
    inner: Arc<Inner>,
    tx: mpsc::UnboundedSender<Result<Raw, Status>>,
    current: Current,
}

/// What a request asks for.
enum Ask {
    Start(DynamicMessage),
    Update,
    Cancel,
}

impl Session {
    async fn serve(self, mut requests: Streaming<Raw>) {
        let mut running: Option<tokio::task::JoinHandle<Raw>> = None;
        let mut open = true;
        loop {
            tokio::select! {
                done = async {
                    match running.as_mut() {
                        Some(h) => h.await,
                        None => std::future::pending().await,
                    }
                }, if running.is_some() => {
                    running = None;
                    set_current(&self.current, None);
                    let response = done.unwrap_or_else(|e| {
                        error_response(Code::Internal, &format!("the run ended abnormally: {e}"), "")
                    });
                    if self.tx.send(Ok(response)).is_err() || !open {
                        return;
                    }
                }
                msg = requests.message(), if open => match msg {
                    Ok(Some(raw)) => {
                        let reply = match ask(&raw) {
                            Err(e) => Some(error_response(Code::InvalidArgument, &e, "")),
                            Ok(Ask::Update) => Some(error_response(
                                Code::Unimplemented,
                                "update_request is not supported (Nighthawk has none either)",
                                "",
                            )),
                            Ok(Ask::Cancel) => match current_stop(&self.current) {
                                Some(stop) => {
                                    stop.request(Termination::Interrupted);
                                    None
                                }
                                None => Some(error_response(
                                    Code::FailedPrecondition,
                                    "cancellation_request: no run is in progress on this stream",
                                    "",
                                )),
                            },
                            Ok(Ask::Start(_)) if running.is_some() => Some(error_response(
                                Code::ResourceExhausted,
                                "a run is already in progress on this stream; send the next \
                                 start_request after its response",
                                "",
                            )),
                            Ok(Ask::Start(options)) => match self.start(&options).await {
                                Ok(handle) => {
                                    running = Some(handle);
                                    None
                                }
                                Err(response) => Some(response),
                            },
                        };
                        if let Some(r) = reply {
                            if self.tx.send(Ok(r)).is_err() {
                                return;
                            }
                        }
                    }
                    // The client closed its side (or went away): finish the run in progress.
                    Ok(None) | Err(_) => {
                        open = false;
                        if running.is_none() {
                            return;
                        }
                    }
                },
            }
        }
    }

    /// Checks and starts a run; its response comes from the returned task.
    async fn start(&self, options: &DynamicMessage) -> Result<tokio::task::JoinHandle<Raw>, Raw> {
        let execution_id = options
            .get_field_by_name("execution_id")
            .and_then(|v| match v.as_ref() {
                PValue::Message(m) => {
                    m.get_field_by_name("value").and_then(|s| s.as_str().map(String::from))
                }
                _ => None,
            })
            .unwrap_or_default();
        let refuse = |s: Status| error_response(s.code(), s.message(), &execution_id);
        let json = super::options::to_spec_json(options)
            .map_err(|e| error_response(Code::InvalidArgument, &e, &execution_id))?;
        let spec = self.inner.spec_from_json(&json, false).map_err(refuse)?;
        let permit = self.inner.permit().map_err(refuse)?;
        let ready = self.inner.prepare(&spec).await.map_err(refuse)?;
        let (id, stop) = self.inner.register(&execution_id).map_err(refuse)?;
        set_current(&self.current, Some(stop.clone()));
        let inner = self.inner.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let result = ready.execute(&stop);
            inner.runs().remove(&id);
            drop(permit);
            match result {
                Err(e) => {
                    error_response(Code::Internal, &format!("the run could not start: {e}"), &id)
                }
                Ok(result) => {
                    let output = match super::output::to_output(&result, &spec) {
                        Ok(o) => o,
                        Err(e) => return error_response(Code::Internal, &e, &id),
                    };
                    let failed =
                        result.verdict.reason().map(|why| format!("the run failed: {why}"));
                    response(Some(output), failed.map(|m| (Code::Internal, m)), &id)
                }
            }
        }))
    }
}

/// Which of the request's `command_specific_options` is set.
fn ask(raw: &Raw) -> Result<Ask, String> {
    let msg = wire::decode(REQUEST, &raw.0).map_err(|e| format!("ExecutionRequest: {e}"))?;
    if msg.has_field_by_name("start_request") {
        let start = msg.get_field_by_name("start_request");
        let options = start
            .as_ref()
            .and_then(|v| v.as_message())
            .and_then(|s| s.get_field_by_name("options"))
            .and_then(|o| o.as_message().cloned())
            .ok_or("start_request.options is missing")?;
        Ok(Ask::Start(options))
    } else if msg.has_field_by_name("update_request") {
        Ok(Ask::Update)
    } else if msg.has_field_by_name("cancellation_request") {
        Ok(Ask::Cancel)
    } else {
        Err("ExecutionRequest sets none of start_request, update_request, cancellation_request"
            .into())
    }
}

fn error_response(code: Code, message: &str, id: &str) -> Raw {
    response(None, Some((code, message.to_string())), id)
}

/// An `ExecutionResponse`: the output, an error (as a `google.rpc.Status`), the execution id.
fn response(output: Option<DynamicMessage>, error: Option<(Code, String)>, id: &str) -> Raw {
    let mut msg = DynamicMessage::new(wire::message(RESPONSE));
    if let Some(o) = output {
        msg.set_field_by_name("output", PValue::Message(o));
    }
    if let Some((code, message)) = error {
        let mut status = DynamicMessage::new(wire::message("google.rpc.Status"));
        status.set_field_by_name("code", PValue::I32(code as i32));
        status.set_field_by_name("message", PValue::String(message));
        msg.set_field_by_name("error_detail", PValue::Message(status));
    }
    if !id.is_empty() {
        msg.set_field_by_name("execution_id", PValue::String(id.to_string()));
    }
    Raw(msg.encode_to_vec())
}
