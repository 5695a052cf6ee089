//! Raw TCP as the engine's [`Protocol`], for replaying captured non-HTTP traffic: each
//! request's bytes (its fed payload) are written as they are, and its answer is read as the
//! replay's [`TcpFraming`] says: up to a delimiter, a byte count (the size the captured server
//! sent: the payload's [`AnswerSize`]), or not at all.

use std::time::Instant;

use shrike_stats::Counter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use shrike_engine::protocol::{
    self, After, Answer, Endpoint, Failure, FailureClass, Io, OriginLatency, PoolCx, Protocol,
    Transport,
};

/// How a raw TCP answer ends.
#[derive(Clone, Debug, PartialEq)]
pub enum TcpFraming {
    /// At the first occurrence of these bytes (kept in the answer).
    Delimiter(Vec<u8>),
    /// After the request's [`AnswerSize`] (no answer is read for a request without one).
    Count,
    /// Not at all: the request is sent and the next one follows; nothing is read.
    None,
}

impl TcpFraming {
    /// The wire form: `{"delimiter": [bytes]}`, `"count"` or `"none"`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            TcpFraming::Delimiter(d) => serde_json::json!({"delimiter": d}),
            TcpFraming::Count => serde_json::json!("count"),
            TcpFraming::None => serde_json::json!("none"),
        }
    }

    /// The framing a jobs file's header recorded at import (`"tcp_framing": {"delimiter":
    /// [10]}` or `{"frame_length": 16}`): its delimiter, or for fixed-length messages the
    /// captured answer sizes.
    pub fn of_header(header: &serde_json::Map<String, serde_json::Value>) -> Option<TcpFraming> {
        let f = header.get("tcp_framing")?;
        if f.get("frame_length").is_some() {
            return Some(TcpFraming::Count);
        }
        let bytes: Vec<u8> = f
            .get("delimiter")?
            .as_array()?
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<_>>()?;
        (!bytes.is_empty()).then_some(TcpFraming::Delimiter(bytes))
    }
}

/// How many bytes the captured server answered a TCP message with: a payload's extra, for
/// [`TcpFraming::Count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerSize(pub u64);

/// Raw TCP to one endpoint.
#[derive(Clone, Debug)]
pub struct RawTcp {
    framing: TcpFraming,
}

impl RawTcp {
    pub fn new(framing: TcpFraming) -> RawTcp {
        RawTcp { framing }
    }
}

#[derive(Debug)]
pub struct Conn {
    stream: Transport,
    /// Bytes read and not yet part of an answer.
    buf: Vec<u8>,
}

/// Why a TCP exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("connection closed by the server{}", if *received { " mid-answer" } else { " before answering" })]
    Closed { received: bool },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the replayed payload is missing")]
    Missing,
}

impl Protocol for RawTcp {
    type Conn = Conn;
    type Error = TcpError;
    const CONNECTION_COUNTER: Counter = Counter::CxTcpTotal;

    async fn connect(&self, cx: &PoolCx, endpoint: &Endpoint, _: Option<u32>) -> Option<Conn> {
        let stream = protocol::connect(cx, endpoint).await?;
        Some(Conn { stream, buf: Vec::new() })
    }

    async fn exchange(
        &self,
        cx: &PoolCx,
        conn: &mut Conn,
        request: u32,
        io: &mut Io,
    ) -> Result<Answer, Failure<TcpError>> {
        let broken = |error| Failure { class: FailureClass::Broken, error };
        // A payload lives until its request finished, so only a bug could make it missing.
        let payload = cx
            .payload(request)
            .ok_or(Failure { class: FailureClass::Protocol, error: TcpError::Missing })?;
        io.sent = Some(Instant::now());
        let written = async {
            conn.stream.write_all(&payload.data).await?;
            conn.stream.flush().await
        };
        written.await.map_err(|e| broken(e.into()))?;
        io.tx = payload.data.len() as u64;
        let want = match &self.framing {
            TcpFraming::None => Some(0),
            TcpFraming::Count => Some(payload.extra::<AnswerSize>().map_or(0, |n| n.0) as usize),
            TcpFraming::Delimiter(_) => None,
        };
        // Where the delimiter search resumes: bytes already searched are not searched again
        // (but for a delimiter's worth that may straddle the last read).
        let mut searched = 0usize;
        let len = loop {
            let found = match (&self.framing, want) {
                (_, Some(n)) => (conn.buf.len() >= n).then_some(n),
                (TcpFraming::Delimiter(d), None) => {
                    let from = searched.saturating_sub(d.len().saturating_sub(1));
                    searched = conn.buf.len();
                    find(&conn.buf[from..], d).map(|at| from + at + d.len())
                }
                _ => Some(0),
            };
            if let Some(len) = found {
                break len;
            }
            let start = conn.buf.len();
            conn.buf.resize(start + 16 * 1024, 0);
            let n = conn.stream.read(&mut conn.buf[start..]).await;
            conn.buf.truncate(start + *n.as_ref().unwrap_or(&0));
            let n = n.map_err(|e| broken(e.into()))?;
            io.rx += n as u64;
            if n == 0 {
                let received = !conn.buf.is_empty();
                let class = if received { FailureClass::Broken } else { FailureClass::Unanswered };
                return Err(Failure { class, error: TcpError::Closed { received } });
            }
        };
        conn.buf.drain(..len);
        Ok(Answer {
            status: None,
            header_bytes: 0,
            body_bytes: len as u64,
            origin: OriginLatency::Absent,
            // Bytes beyond the answer belong to no request: the framing is lost.
            then: if conn.buf.is_empty() { After::Keep } else { After::Desync },
            error: None,
            more: Vec::new(),
        })
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::find;

    #[test]
    fn finds_delimiters() {
        assert_eq!(find(b"abc\0def", b"\0"), Some(3));
        assert_eq!(find(b"a\r\nb", b"\r\n"), Some(1));
        assert_eq!(find(b"abc", b"\n"), None);
    }
}
