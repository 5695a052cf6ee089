//! HTTP/2 misbehaviour, prior-knowledge h2c over a raw socket. Frames are written by hand (a
//! 9-byte header and a payload, RFC 9113 §4.1) and a response head is the one HPACK byte 0x88
//! (static-table entry 8, `:status: 200`), so the fixture needs no codec that would keep it
//! honest. The client's frames are read only as far as the cases need: SETTINGS and PING are
//! acknowledged, a stream's HEADERS and its END_STREAM trigger the case.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use super::{Out, Tally};

#[derive(Clone, Copy, Debug)]
pub enum H2 {
    /// The first stream gets its response head and part of a body, then a GOAWAY (NO_ERROR,
    /// last stream that one), then the connection closes.
    GoawayMidStream,
    /// Every stream is reset (INTERNAL_ERROR), with the same RST_STREAM sent 32 times over.
    ResetFlood,
    /// SETTINGS_INITIAL_WINDOW_SIZE 0, never raised: a request body can never be sent. A
    /// request without one is answered.
    ZeroWindow,
    /// The default 65,535-byte window and never a WINDOW_UPDATE: a request body larger than
    /// that never finishes. A request is answered once its body has ended.
    NoWindowUpdate,
    /// The first stream's body never ends, sent as fast as the socket takes it, flow control
    /// ignored.
    EndlessData,
    /// The first stream's response head never ends: CONTINUATION frames forever.
    EndlessContinuation,
}

use crate::support::h2_wire::{
    frame, ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, RST_STREAM,
    SETTINGS,
};

const INTERNAL_ERROR: u32 = 0x2;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// HPACK for `:status: 200`: indexed field, static-table entry 8.
const STATUS_200: &[u8] = &[0x88];

fn settings(entries: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = entries
        .iter()
        .flat_map(|(id, v)| [&id.to_be_bytes()[..], &v.to_be_bytes()].concat())
        .collect();
    frame(SETTINGS, 0, 0, &payload)
}

/// A full-size (16,384-byte) header block fragment of literal fields (without indexing, new
/// name: RFC 7541 §6.2.2), each `x-more` with a 100-byte value.
fn header_block_fragment() -> Vec<u8> {
    let mut field = vec![0x00, 6];
    field.extend_from_slice(b"x-more");
    field.push(100);
    field.extend_from_slice(&[b'v'; 100]);
    field.repeat(16_384 / field.len())
}

pub(super) async fn serve(sock: TcpStream, case: H2, tally: &Tally) -> std::io::Result<()> {
    let (rd, wr) = sock.into_split();
    let mut rx = Frames { rd, tally };
    let mut out = Out { wr, tally };
    let mut preface = [0u8; 24];
    rx.rd.read_exact(&mut preface).await?;
    tally.received(preface.len());
    let ours = match case {
        H2::ZeroWindow => settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]),
        _ => settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 100)]),
    };
    out.send(&ours).await?;
    while let Some((kind, flags, stream, payload)) = rx.next().await? {
        match kind {
            SETTINGS if flags & ACK == 0 => out.send(&frame(SETTINGS, ACK, 0, &[])).await?,
            PING if flags & ACK == 0 => out.send(&frame(PING, ACK, 0, &payload)).await?,
            GOAWAY => return Ok(()),
            HEADERS => {
                tally.request();
                if !on_request(case, stream, flags & END_STREAM != 0, &mut out).await? {
                    return Ok(());
                }
            }
            // A request body ended (what the flow-control cases wait for): answer it.
            DATA if flags & END_STREAM != 0 => answer(stream, &mut out).await?,
            _ => {}
        }
    }
    Ok(())
}

async fn answer(stream: u32, out: &mut Out<'_>) -> std::io::Result<()> {
    out.send(&frame(HEADERS, END_HEADERS | END_STREAM, stream, STATUS_200)).await?;
    out.tally.answered();
    Ok(())
}

/// Does the case's thing to a new stream. False when the connection is to close.
async fn on_request(
    case: H2,
    stream: u32,
    ended: bool,
    out: &mut Out<'_>,
) -> std::io::Result<bool> {
    match case {
        H2::GoawayMidStream => {
            out.send(&frame(HEADERS, END_HEADERS, stream, STATUS_200)).await?;
            out.send(&frame(DATA, 0, stream, b"the first half of")).await?;
            let mut goaway = stream.to_be_bytes().to_vec();
            goaway.extend_from_slice(&0u32.to_be_bytes());
            out.send(&frame(GOAWAY, 0, 0, &goaway)).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(false);
        }
        H2::ResetFlood => {
            let rst = frame(RST_STREAM, 0, stream, &INTERNAL_ERROR.to_be_bytes());
            out.send(&rst.repeat(32)).await?;
        }
        H2::ZeroWindow | H2::NoWindowUpdate if ended => answer(stream, out).await?,
        H2::ZeroWindow | H2::NoWindowUpdate => {}
        H2::EndlessData => {
            out.send(&frame(HEADERS, END_HEADERS, stream, STATUS_200)).await?;
            out.forever(&frame(DATA, 0, stream, &[b'd'; 16_384])).await?;
        }
        H2::EndlessContinuation => {
            out.send(&frame(HEADERS, 0, stream, STATUS_200)).await?;
            out.forever(&frame(CONTINUATION, 0, stream, &header_block_fragment())).await?;
        }
    }
    Ok(true)
}

/// The client's frames.
struct Frames<'a> {
    rd: OwnedReadHalf,
    tally: &'a Tally,
}

impl Frames<'_> {
    /// The next frame as (type, flags, stream, payload); `None` once the client closed.
    async fn next(&mut self) -> std::io::Result<Option<(u8, u8, u32, Vec<u8>)>> {
        let mut head = [0u8; 9];
        match self.rd.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        self.rd.read_exact(&mut payload).await?;
        self.tally.received(head.len() + len);
        Ok(Some((head[3], head[4], stream, payload)))
    }
}
