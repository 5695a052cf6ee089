//! A run sent to a service speaking Nighthawk's API (`shrike run --nighthawk-service`):
//! Shrike's own service, or Nighthawk's `nighthawk_service`.
//!
//! The spec becomes `CommandLineOptions`; options Nighthawk has no field for are refused
//! before anything is sent, since the service would run without them. The `Output` that comes
//! back becomes Shrike's result, so every output format works on it. A stop (Ctrl-C) sends a
//! `CancellationRequest`: Shrike's service then answers with what the run measured so far.

use prost::Message as _;
use prost_reflect::{DynamicMessage, Value as PValue};
use shrike_engine::{RunSpec, StopHandle};
use shrike_stats::RunResult;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::proto::nighthawk::client::nighthawk_service_client::NighthawkServiceClient;
use super::wire::{self, Raw};
use crate::coordinator::{authorized, channel, ClientSecurity};
use crate::server::MAX_MESSAGE;

/// Why a run sent to a Nighthawk service gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NighthawkError {
    /// The spec has options Nighthawk's API cannot carry.
    #[error("{0}")]
    Unsupported(String),
    #[error("connecting to {address}: {why}")]
    Connect { address: String, why: String },
    #[error("the service refused the run: {code:?}: {message}")]
    Refused { code: tonic::Code, message: String },
    #[error("the service answered {code:?}: {message}")]
    Failed { code: tonic::Code, message: String },
    #[error("the service's answer: {0}")]
    Protocol(String),
}

/// What the service answered.
pub struct Answered {
    pub result: RunResult,
    /// The `error_detail` that came with the output (a failed run), if any.
    pub error: Option<String>,
}

/// Sends `spec` to the Nighthawk service at `address` (`HOST:PORT`) and waits for its answer.
/// `stop` cancels the run (its result still comes back from a Shrike service).
pub fn execute(
    spec: &RunSpec,
    address: &str,
    security: &ClientSecurity,
    stop: &StopHandle,
) -> Result<Answered, NighthawkError> {
    let (options, shrike_only) = super::options::from_spec(spec);
    if !shrike_only.is_empty() {
        return Err(NighthawkError::Unsupported(format!(
            "Nighthawk's API has no field for {}; run it here, or with --remote on Shrike's own \
             API",
            shrike_only.join(", ")
        )));
    }
    let options = wire::from_json(super::options::OPTIONS, &options)
        .map_err(|e| NighthawkError::Unsupported(format!("the options as Nighthawk's: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NighthawkError::Connect { address: address.into(), why: e.to_string() })?;
    let mut answered = runtime.block_on(run(options, address, security, stop))?;
    // Nighthawk's Output does not say how a run ended: it is judged here, as the run would be
    // judged where it ran, and a failure the service reports fails it.
    let r = &mut answered.result;
    if let Some(t) = stop.reason() {
        // Cancelled here: the Output reads as complete, but the run was stopped.
        r.termination = t;
    }
    r.judge(match spec.tolerates_failures() {
        true => shrike_stats::Unanswered::Tolerated,
        false => shrike_stats::Unanswered::Fails,
    });
    if let Some(e) = &answered.error {
        r.fail(format!("the service reports: {e}"));
    }
    Ok(answered)
}

async fn run(
    options: DynamicMessage,
    address: &str,
    security: &ClientSecurity,
    stop: &StopHandle,
) -> Result<Answered, NighthawkError> {
    let connect = |why: String| NighthawkError::Connect { address: address.into(), why };
    let channel = channel(address, security).await.map_err(|e| connect(e.to_string()))?;
    let mut client = NighthawkServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(request("start_request", Some(options)));
    let mut responses = client
        .execution_stream(authorized(UnboundedReceiverStream::new(rx), security))
        .await
        .map_err(|s| status_error(&s))?
        .into_inner();
    let mut cancelled = false;
    let raw = loop {
        tokio::select! {
            () = stop.stopped(), if !cancelled => {
                cancelled = true;
                let _ = tx.send(request("cancellation_request", None));
            }
            msg = responses.message() => match msg {
                Ok(Some(raw)) => break raw,
                Ok(None) => {
                    return Err(NighthawkError::Protocol("the stream ended without a response".into()))
                }
                Err(s) => return Err(status_error(&s)),
            },
        }
    };
    drop(tx);
    answer(&raw)
}

/// An `ExecutionRequest` with one of its `command_specific_options` set.
fn request(which: &str, options: Option<DynamicMessage>) -> Raw {
    let desc = wire::message("nighthawk.client.ExecutionRequest");
    let mut msg = DynamicMessage::new(desc.clone());
    let inner_desc = desc.get_field_by_name(which).and_then(|f| f.kind().as_message().cloned());
    if let Some(inner_desc) = inner_desc {
        let mut inner = DynamicMessage::new(inner_desc);
        if let Some(o) = options {
            inner.set_field_by_name("options", PValue::Message(o));
        }
        msg.set_field_by_name(which, PValue::Message(inner));
    }
    Raw(msg.encode_to_vec())
}

fn answer(raw: &Raw) -> Result<Answered, NighthawkError> {
    let msg = wire::decode("nighthawk.client.ExecutionResponse", &raw.0)
        .map_err(|e| NighthawkError::Protocol(e.to_string()))?;
    let error = msg.has_field_by_name("error_detail").then(|| {
        let status = msg.get_field_by_name("error_detail");
        let status = status.as_ref().and_then(|v| v.as_message());
        let code =
            status.and_then(|s| s.get_field_by_name("code")).and_then(|c| c.as_i32()).unwrap_or(2);
        let message = status
            .and_then(|s| s.get_field_by_name("message"))
            .and_then(|m| m.as_str().map(String::from))
            .unwrap_or_default();
        (tonic::Code::from_i32(code), message)
    });
    if !msg.has_field_by_name("output") {
        let (code, message) = error.unwrap_or((tonic::Code::Unknown, "no output".into()));
        return Err(match code {
            tonic::Code::InvalidArgument
            | tonic::Code::PermissionDenied
            | tonic::Code::Unauthenticated
            | tonic::Code::ResourceExhausted => NighthawkError::Refused { code, message },
            _ => NighthawkError::Failed { code, message },
        });
    }
    let output = msg.get_field_by_name("output");
    let output = output
        .as_ref()
        .and_then(|v| v.as_message())
        .ok_or_else(|| NighthawkError::Protocol("output is not a message".into()))?;
    let result = super::output::from_output(output).map_err(NighthawkError::Protocol)?;
    Ok(Answered { result, error: error.map(|(_, m)| m) })
}

fn status_error(s: &tonic::Status) -> NighthawkError {
    match s.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            NighthawkError::Refused { code: s.code(), message: s.message().to_string() }
        }
        code => NighthawkError::Failed { code, message: s.message().to_string() },
    }
}
