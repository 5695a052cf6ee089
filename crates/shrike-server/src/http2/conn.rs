//! One HTTP/2 connection as a state machine with no I/O of its own: [`Conn::receive`] takes
//! the bytes read, [`Conn::fire`] the timers that came due, and both leave the frames to send
//! in [`Conn::out`] for the driver to write in one go per wake-up.
//!
//! No stream has a task. A request that ends with its head and asks for nothing eventful is
//! answered while its HEADERS frame is read and never enters the stream table; the others
//! (request bodies, delays, paced bodies, bodies larger than the peer's windows) wait there
//! for a DATA frame, a WINDOW_UPDATE or a timer.
//!
//! Errors follow RFC 9113 §5.4: a connection error sends GOAWAY and ends the connection, a
//! stream error resets only its stream.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shrike_h2::frame::{self, Head};
use shrike_h2::hpack::Decoder;

use super::encode::{self, DefaultHead, Heads};
use super::request::{self, RequestHead};
use super::response::Payload;
use crate::behaviour::{self, Pacing, Schedule};
use crate::limits::{self, Limits};
use crate::server::Shared;
use crate::stats::LimitKind;

mod send;
mod tunnel;

pub(super) use tunnel::Dest;

/// Per-stream receive window: a request body of a few MiB streams without waiting for a
/// WINDOW_UPDATE per 64 KiB (the protocol default) on every round trip.
pub(super) const STREAM_WINDOW: u32 = 1 << 20;
/// Connection receive window: several streams uploading at once each get their full window.
pub(super) const CONNECTION_WINDOW: u32 = 16 << 20;
/// After refusing a body, how long the rest of it is still read and discarded before the
/// stream is reset with NO_ERROR. Ending it at once is what RFC 9113 §8.1 allows, but clients
/// such as curl 7.x then report a failed transfer instead of the 413; the HTTP/1.1 front end
/// lingers for the same reason.
const LINGER_TIME: Duration = Duration::from_secs(1);
/// Bytes of frames queued before the connection stops adding body data and lets the driver
/// write: bounds the buffer, however many streams have credit.
pub(super) const OUT_HIGH: usize = 256 * 1024;
/// How long the graceful shutdown's PING may go unanswered before the final GOAWAY goes anyway.
const PING_WAIT: Duration = Duration::from_secs(1);
/// The graceful shutdown's PING payload.
const SHUTDOWN_PING: [u8; 8] = *b"shrike\0\x01";
/// Streams remembered after they close, to tell a late frame on one from a frame on a stream
/// that never existed.
const CLOSED_KEPT: usize = 128;

/// Why the connection is ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Our final GOAWAY is out and no stream is left.
    Done,
    /// A connection error: GOAWAY with this code is queued; close once it is written.
    Error(u32),
}

/// Stream ids are unique odd numbers: they hash to themselves.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u32` is used for a `u32` key; this keeps any other input hashing too.
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Where a stream's response stands.
#[derive(Debug)]
enum Phase {
    /// The request body is still arriving; the response is planned.
    Body,
    /// The delay before the response.
    Delay,
    /// A stall fault before the head.
    Stall,
    /// The head is out; `left` bytes of body go as the windows allow, then the step after.
    Sending { left: u64, schedule: Option<Schedule> },
    /// A paced body's pause.
    Pause(Schedule),
    /// The response is complete but the request is not: its body is read and dropped until
    /// the linger ends.
    Linger,
    /// A `CONNECT` or CONNECT-UDP tunnel, opening or open.
    Tunnel(Box<tunnel::Tunnel>),
}

struct Stream {
    phase: Phase,
    /// The request's side has ended (END_STREAM seen).
    ended: bool,
    declared: Option<u64>,
    received: u64,
    /// Counted in the server's active requests.
    active: bool,
    /// The response was refused (413), so its body is sent whole and the request's discarded.
    refused: bool,
    head_only: bool,
    /// The head: a default one, encoded (indexed) when sent, or this block of literals.
    default: Option<DefaultHead>,
    block: Vec<u8>,
    payload: Payload,
    pacing: Pacing,
    send_window: i64,
    recv_window: i64,
    /// Receive credit used but not yet given back.
    recv_used: u32,
    queued: bool,
    wake: Option<Instant>,
}

/// HEADERS waiting for its CONTINUATION frames.
struct Partial {
    stream: u32,
    end_stream: bool,
    /// The HEADERS frame's priority names the stream itself (§5.3.1).
    self_dependent: bool,
    block: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goaway {
    None,
    /// GOAWAY(2^31-1) and a PING are out; the final GOAWAY follows the PING's ACK.
    Probing(Instant),
    /// The final GOAWAY, with the last stream it lets finish.
    Sent(u32),
}

pub(super) struct Conn {
    shared: Arc<Shared>,
    limits: Limits,
    max_streams: usize,
    decoder: Decoder,
    heads: Heads,
    request: RequestHead,
    /// Frames to write.
    pub(super) out: Vec<u8>,
    /// Bytes of the client preface still expected; then whether its SETTINGS came.
    preface_left: usize,
    settings_seen: bool,
    partial: Option<Partial>,
    send_window: i64,
    recv_window: i64,
    recv_used: u32,
    peer_window: i64,
    peer_max_frame: usize,
    streams: HashMap<u32, Stream, BuildHasherDefault<IdHasher>>,
    /// The highest stream id the client has opened.
    last_stream: u32,
    /// Recently closed streams, and whether we reset them (frames on those are ignored).
    closed: VecDeque<(u32, bool)>,
    accepted: u64,
    goaway: Goaway,
    ending: Option<Ending>,
    ready: VecDeque<u32>,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Finished responses' block buffers, reused.
    spare: Vec<Vec<u8>>,
    /// When the connection last had no stream (or was opened): the idle timeout counts from it.
    pub(super) quiet_since: Instant,
    /// Tunnels' destinations for the driver to open.
    opens: Vec<(u32, Dest)>,
}

impl Conn {
    pub(super) fn new(shared: Arc<Shared>, now: Instant) -> Conn {
        let limits = *shared.config.limits();
        let max_streams = shared.config.max_concurrent_streams().get();
        let mut out = Vec::with_capacity(4096);
        let mut settings = vec![
            (frame::SETTINGS_MAX_CONCURRENT_STREAMS, max_streams),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
            (frame::SETTINGS_MAX_HEADER_LIST_SIZE, limits.library_header_list_size()),
        ];
        if shared.config.proxy().is_some() {
            // CONNECT-UDP over HTTP/2 is an extended CONNECT (RFC 8441).
            settings.push((frame::SETTINGS_ENABLE_CONNECT_PROTOCOL, 1));
        }
        frame::put_settings(&mut out, &settings);
        frame::put_window_update(&mut out, 0, CONNECTION_WINDOW - 65_535);
        Conn {
            shared,
            limits,
            max_streams: max_streams as usize,
            decoder: Decoder::new(4096),
            heads: Heads::default(),
            request: RequestHead::default(),
            out,
            preface_left: frame::PREFACE.len(),
            settings_seen: false,
            partial: None,
            send_window: 65_535,
            recv_window: i64::from(CONNECTION_WINDOW),
            recv_used: 0,
            peer_window: 65_535,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            streams: HashMap::default(),
            last_stream: 0,
            closed: VecDeque::with_capacity(CLOSED_KEPT),
            accepted: 0,
            goaway: Goaway::None,
            ending: None,
            ready: VecDeque::new(),
            timers: BinaryHeap::new(),
            spare: Vec::new(),
            quiet_since: now,
            opens: Vec::new(),
        }
    }

    pub(super) fn ending(&self) -> Option<Ending> {
        self.ending
    }

    /// Requests accepted so far.
    pub(super) fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Whether any stream is open: the idle timeout runs only while none is.
    pub(super) fn is_busy(&self) -> bool {
        !self.streams.is_empty()
    }

    /// Whether body data waits for room in [`Conn::out`] (not for credit).
    pub(super) fn wants_room(&self) -> bool {
        !self.ready.is_empty() && self.send_window > 0
    }

    /// The earliest timer: a stream's, or the graceful shutdown's PING wait.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let stream = self.timers.peek().map(|Reverse((at, _))| *at);
        let ping = match self.goaway {
            Goaway::Probing(since) => Some(since + PING_WAIT),
            _ => None,
        };
        match (stream, ping) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Consumes every complete frame at the start of `buf` and returns how many bytes that
    /// was. Stops early once the connection is ending.
    pub(super) fn receive(&mut self, buf: &[u8], now: Instant) -> usize {
        let mut at = 0;
        if self.preface_left > 0 {
            let start = frame::PREFACE.len() - self.preface_left;
            let n = self.preface_left.min(buf.len());
            if buf[..n] != frame::PREFACE[start..start + n] {
                self.fail(frame::PROTOCOL_ERROR);
                return buf.len();
            }
            self.preface_left -= n;
            at = n;
        }
        while self.ending.is_none() {
            let Some(header) = buf.get(at..at + frame::HEADER_LEN) else { break };
            let Ok(header) = <&[u8; frame::HEADER_LEN]>::try_from(header) else { break };
            let head = Head::parse(header);
            if head.len > frame::DEFAULT_MAX_FRAME {
                // We never raise SETTINGS_MAX_FRAME_SIZE (§4.2).
                self.fail(frame::FRAME_SIZE_ERROR);
                break;
            }
            let end = at + frame::HEADER_LEN + head.len;
            let Some(payload) = buf.get(at + frame::HEADER_LEN..end) else { break };
            at = end;
            if let Err(code) = self.frame(head, payload, now) {
                self.fail(code);
            }
        }
        self.give_back_credit();
        if self.ending.is_some() {
            return buf.len();
        }
        at
    }

    /// One frame. `Err` is a connection error.
    fn frame(&mut self, head: Head, payload: &[u8], now: Instant) -> Result<(), u32> {
        if !self.settings_seen {
            // §3.4: the preface's SETTINGS comes first.
            if head.kind != frame::SETTINGS || head.flags & frame::ACK != 0 {
                return Err(frame::PROTOCOL_ERROR);
            }
            self.settings_seen = true;
        }
        if let Some(partial) = &self.partial {
            if head.kind != frame::CONTINUATION || head.stream != partial.stream {
                return Err(frame::PROTOCOL_ERROR);
            }
        }
        match head.kind {
            frame::DATA => self.data(head, payload),
            frame::HEADERS => self.headers(head, payload, now),
            frame::CONTINUATION => self.continuation(head, payload, now),
            frame::PRIORITY => {
                if head.stream == 0 {
                    return Err(frame::PROTOCOL_ERROR);
                }
                if payload.len() != 5 {
                    self.reset(head.stream, frame::FRAME_SIZE_ERROR);
                    return Ok(());
                }
                if depends_on(payload) == head.stream {
                    self.reset(head.stream, frame::PROTOCOL_ERROR);
                }
                Ok(())
            }
            frame::RST_STREAM => {
                if head.stream == 0 {
                    return Err(frame::PROTOCOL_ERROR);
                }
                if payload.len() != 4 {
                    return Err(frame::FRAME_SIZE_ERROR);
                }
                if head.stream > self.last_stream {
                    return Err(frame::PROTOCOL_ERROR);
                }
                // The client gave up: free the slot (and the active count) at once.
                self.close(head.stream);
                Ok(())
            }
            frame::SETTINGS => self.settings(head, payload),
            frame::PUSH_PROMISE => Err(frame::PROTOCOL_ERROR),
            frame::PING => {
                if head.stream != 0 {
                    return Err(frame::PROTOCOL_ERROR);
                }
                if payload.len() != 8 {
                    return Err(frame::FRAME_SIZE_ERROR);
                }
                if head.flags & frame::ACK == 0 {
                    frame::put(&mut self.out, frame::PING, frame::ACK, 0, payload);
                } else if payload == SHUTDOWN_PING && matches!(self.goaway, Goaway::Probing(_)) {
                    self.final_goaway();
                }
                Ok(())
            }
            frame::GOAWAY => {
                if head.stream != 0 {
                    return Err(frame::PROTOCOL_ERROR);
                }
                if payload.len() < 8 {
                    return Err(frame::FRAME_SIZE_ERROR);
                }
                Ok(())
            }
            frame::WINDOW_UPDATE => self.window_update(head, payload),
            // §5.5: unknown frame types are ignored.
            _ => Ok(()),
        }
    }

    fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), u32> {
        if head.stream != 0 {
            return Err(frame::PROTOCOL_ERROR);
        }
        if head.flags & frame::ACK != 0 {
            return if payload.is_empty() { Ok(()) } else { Err(frame::FRAME_SIZE_ERROR) };
        }
        if !payload.len().is_multiple_of(6) {
            return Err(frame::FRAME_SIZE_ERROR);
        }
        for setting in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([setting[0], setting[1]]);
            let value = u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => return Err(frame::PROTOCOL_ERROR),
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > frame::MAX_WINDOW {
                        return Err(frame::FLOW_CONTROL_ERROR);
                    }
                    // §6.9.2: the change applies to every open stream's window at once.
                    let delta = i64::from(value) - self.peer_window;
                    self.peer_window = i64::from(value);
                    for (&id, s) in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return Err(frame::FLOW_CONTROL_ERROR);
                        }
                        if delta > 0 && s.wants_credit() && !s.queued {
                            s.queued = true;
                            self.ready.push_back(id);
                        }
                    }
                }
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    self.heads.table.set_peer_limit(value as usize);
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME as u32..=(1 << 24) - 1).contains(&value) {
                        return Err(frame::PROTOCOL_ERROR);
                    }
                    self.peer_max_frame = value as usize;
                }
                // Unknown settings are ignored (§6.5.2).
                _ => {}
            }
        }
        frame::put(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
        Ok(())
    }

    fn window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), u32> {
        if payload.len() != 4 {
            return Err(frame::FRAME_SIZE_ERROR);
        }
        let increment = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & !(1 << 31),
        );
        if head.stream == 0 {
            if increment == 0 {
                return Err(frame::PROTOCOL_ERROR);
            }
            self.send_window += increment;
            if self.send_window > frame::MAX_WINDOW {
                return Err(frame::FLOW_CONTROL_ERROR);
            }
            return Ok(());
        }
        if head.stream > self.last_stream {
            return Err(frame::PROTOCOL_ERROR);
        }
        let Some(s) = self.streams.get_mut(&head.stream) else { return Ok(()) };
        if increment == 0 {
            self.reset(head.stream, frame::PROTOCOL_ERROR);
            return Ok(());
        }
        s.send_window += increment;
        if s.send_window > frame::MAX_WINDOW {
            self.reset(head.stream, frame::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if s.wants_credit() && !s.queued {
            s.queued = true;
            self.ready.push_back(head.stream);
        }
        Ok(())
    }

    fn data(&mut self, head: Head, payload: &[u8]) -> Result<(), u32> {
        if head.stream == 0 {
            return Err(frame::PROTOCOL_ERROR);
        }
        if head.stream > self.last_stream {
            // §5.1: DATA on an idle stream.
            return Err(frame::PROTOCOL_ERROR);
        }
        // The whole frame, padding included, counts against the windows (§6.9.1).
        let len = payload.len() as u32;
        self.recv_window -= i64::from(len);
        if self.recv_window < 0 {
            return Err(frame::FLOW_CONTROL_ERROR);
        }
        self.recv_used += len;
        let body = frame::unpad(head.flags, payload).ok_or(frame::PROTOCOL_ERROR)?;
        let end = head.flags & frame::END_STREAM != 0;
        let Some(s) = self.streams.get_mut(&head.stream) else {
            if !self.was_reset_by_us(head.stream) {
                self.reset(head.stream, frame::STREAM_CLOSED);
            }
            return Ok(());
        };
        if s.ended {
            self.reset(head.stream, frame::STREAM_CLOSED);
            return Ok(());
        }
        s.recv_window -= i64::from(len);
        if s.recv_window < 0 {
            self.reset(head.stream, frame::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        // A tunnel's bytes get their stream credit back once written to the destination;
        // padding at once.
        let tunnel = matches!(s.phase, Phase::Tunnel(_));
        s.recv_used += if tunnel { len - body.len() as u32 } else { len };
        s.received += body.len() as u64;
        s.ended = end;
        let stats = self.shared.state.stats();
        match s.phase {
            Phase::Tunnel(_) => {
                s.tunnel_data(body);
                if end {
                    self.tunnel_client_ended(head.stream);
                }
            }
            Phase::Body => {
                stats.request_body(body.len() as u64);
                if s.declared.is_some_and(|d| s.received > d || (end && s.received != d)) {
                    // §8.1.1: content-length disagrees with the DATA frames.
                    self.reset(head.stream, frame::PROTOCOL_ERROR);
                    return Ok(());
                }
                if s.received > self.shared.config.max_body_size() {
                    let message =
                        behaviour::body_too_large(None, self.shared.config.max_body_size());
                    s.block.clear();
                    s.default = None;
                    s.payload = encode::error(&mut s.block, 413, &message, s.head_only);
                    s.pacing = Pacing::default();
                    s.refused = true;
                    self.respond(head.stream);
                } else if end {
                    self.respond(head.stream);
                }
            }
            Phase::Linger if end => self.close(head.stream),
            _ => {}
        }
        Ok(())
    }

    fn headers(&mut self, head: Head, payload: &[u8], now: Instant) -> Result<(), u32> {
        if head.stream == 0 {
            return Err(frame::PROTOCOL_ERROR);
        }
        let mut fragment = frame::unpad(head.flags, payload).ok_or(frame::PROTOCOL_ERROR)?;
        let mut self_dependent = false;
        if head.flags & frame::PRIORITY_FLAG != 0 {
            if fragment.len() < 5 {
                return Err(frame::FRAME_SIZE_ERROR);
            }
            self_dependent = depends_on(fragment) == head.stream;
            fragment = &fragment[5..];
        }
        let end_stream = head.flags & frame::END_STREAM != 0;
        if head.flags & frame::END_HEADERS == 0 {
            let mut block = Vec::with_capacity(fragment.len() * 2);
            block.extend_from_slice(fragment);
            let stream = head.stream;
            self.partial = Some(Partial { stream, end_stream, self_dependent, block });
            return Ok(());
        }
        self.block(head.stream, end_stream, self_dependent, fragment, now)
    }

    fn continuation(&mut self, head: Head, payload: &[u8], now: Instant) -> Result<(), u32> {
        let Some(mut partial) = self.partial.take() else {
            return Err(frame::PROTOCOL_ERROR);
        };
        // Bounds what a CONTINUATION flood can make us buffer (twice the list size we
        // advertise, already far past what is answered with more than a bare 431).
        if partial.block.len() + payload.len() > 2 * self.limits.library_header_list_size() as usize
        {
            return Err(frame::ENHANCE_YOUR_CALM);
        }
        partial.block.extend_from_slice(payload);
        if head.flags & frame::END_HEADERS == 0 {
            self.partial = Some(partial);
            return Ok(());
        }
        let Partial { stream, end_stream, self_dependent, block } = partial;
        self.block(stream, end_stream, self_dependent, &block, now)
    }

    /// A complete header block on `id`: a new request, or trailers.
    fn block(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
        now: Instant,
    ) -> Result<(), u32> {
        if id.is_multiple_of(2) {
            return Err(frame::PROTOCOL_ERROR);
        }
        if id <= self.last_stream {
            self.trailers(id, end_stream, block)?;
            if self_dependent {
                self.reset(id, frame::PROTOCOL_ERROR);
            }
            return Ok(());
        }
        self.last_stream = id;
        let keep = self.limits.library_header_list_size() as usize;
        let verdict = self
            .request
            .decode(&mut self.decoder, block, keep)
            .map_err(|_| frame::COMPRESSION_ERROR)?;
        if let Goaway::Sent(last) = self.goaway {
            if id > last {
                // §6.8: streams past the final GOAWAY are ignored.
                return Ok(());
            }
        }
        // RFC 8441 §3: `:protocol` is malformed unless we offered extended CONNECT.
        let unoffered = self.request.protocol().is_some() && self.shared.config.proxy().is_none();
        if verdict.is_err() || self_dependent || unoffered {
            self.reset(id, frame::PROTOCOL_ERROR);
            return Ok(());
        }
        self.accepted += 1;
        if self.limits.is_last(self.accepted - 1) || self.streams.len() >= self.max_streams {
            // Past the request cap (sent before the client saw our GOAWAY) or the advertised
            // concurrency: safe for the client to retry elsewhere.
            self.reset(id, frame::REFUSED_STREAM);
            return Ok(());
        }
        if self.limits.is_last(self.accepted) && self.goaway == Goaway::None {
            self.shared.state.stats().limit(LimitKind::MaxRequestsReached);
            self.shutdown(now);
        }
        self.quiet_since = now;
        self.request_head(id, end_stream);
        Ok(())
    }

    fn trailers(&mut self, id: u32, end_stream: bool, block: &[u8]) -> Result<(), u32> {
        let verdict = request::decode_trailers(&mut self.decoder, block)
            .map_err(|_| frame::COMPRESSION_ERROR)?;
        let open = self.streams.get(&id).is_some_and(|s| !s.ended);
        if !open {
            if self.was_reset_by_us(id) {
                return Ok(());
            }
            // §5.1: HEADERS on a closed stream; on one that never opened, §5.1.1's ordering.
            let known = self.closed.iter().any(|&(c, _)| c == id) || self.streams.contains_key(&id);
            return Err(if known { frame::STREAM_CLOSED } else { frame::PROTOCOL_ERROR });
        }
        if !end_stream || verdict.is_err() {
            // §8.1: a second HEADERS must end the stream, and trailers carry no pseudo-fields.
            self.reset(id, frame::PROTOCOL_ERROR);
            return Ok(());
        }
        let Some(s) = self.streams.get_mut(&id) else { return Ok(()) };
        s.ended = true;
        match s.phase {
            // §8.5: a tunnel's stream carries DATA only.
            Phase::Tunnel(_) => self.reset(id, frame::PROTOCOL_ERROR),
            Phase::Body if s.declared.is_some_and(|d| d != s.received) => {
                self.reset(id, frame::PROTOCOL_ERROR);
            }
            Phase::Body => self.respond(id),
            Phase::Linger => self.close(id),
            _ => {}
        }
        Ok(())
    }

    /// A new request's head, decoded into `self.request`.
    fn request_head(&mut self, id: u32, end_stream: bool) {
        if self.request.method() == b"CONNECT" {
            return self.connect_head(id, end_stream);
        }
        let head_only = self.request.method() == b"HEAD";
        let mut block = self.out_scratch();
        let stats = self.shared.state.stats();
        let refusal = if self.request.list_size > self.limits.library_header_list_size() as usize {
            // Far past the cap: refused without a word, as the advertised limit allows, and
            // not counted as a limit (the fields were not even kept).
            stats.refused(431);
            Some(encode::bare(&mut block, 431))
        } else if let Some((kind, why)) =
            limits::refusal(&self.limits, self.request.field_count, self.request.list_size)
        {
            // Only the stream is refused: the connection's other streams are intact.
            stats.limit(kind);
            stats.refused(431);
            Some(encode::error(&mut block, 431, &why, head_only))
        } else {
            let max_body = self.shared.config.max_body_size();
            self.request.content_length.filter(|&len| len > max_body).map(|len| {
                // Refused before reading a byte, as HTTP/1.1 does.
                stats.refused(413);
                let why = behaviour::body_too_large(Some(len), max_body);
                encode::error(&mut block, 413, &why, head_only)
            })
        };
        let (payload, pacing, refused, default) = match refusal {
            Some(payload) => (payload, Pacing::default(), true, None),
            None => {
                let planned =
                    self.heads.for_request(&self.shared, &self.request, head_only, &mut block);
                (planned.payload, planned.pacing, false, planned.default)
            }
        };
        let mut s = Stream {
            phase: Phase::Body,
            ended: end_stream,
            declared: self.request.content_length,
            received: 0,
            active: false,
            refused,
            head_only,
            default,
            block,
            payload,
            pacing,
            send_window: self.peer_window,
            recv_window: i64::from(STREAM_WINDOW),
            recv_used: 0,
            queued: false,
            wake: None,
        };
        if end_stream && !pacing.is_eventful() && s.declared.is_none_or(|d| d == 0) {
            // The fast path: the whole response now, and no entry in the table unless its
            // body outgrows the windows.
            self.send_head(id, &mut s);
            if s.done() {
                self.recycle(s.block);
                self.remember(id, false);
                return;
            }
        } else if refused {
            s.phase = Phase::Body;
            self.streams.insert(id, s);
            self.respond(id);
            return;
        } else if !end_stream {
            // Counted while it may wait, as Nighthawk counts requests for its linear delay.
            self.shared.state.enter_active();
            s.active = true;
            self.streams.insert(id, s);
            return;
        } else if s.declared.is_some_and(|d| d != 0) {
            self.streams.insert(id, s);
            self.reset(id, frame::PROTOCOL_ERROR);
            return;
        } else {
            self.shared.state.enter_active();
            s.active = true;
            self.streams.insert(id, s);
            self.respond(id);
            return;
        }
        self.streams.insert(id, s);
    }

    /// Begins a graceful shutdown (RFC 9113 §6.8): GOAWAY(2^31-1) and a PING; the final
    /// GOAWAY names the last stream the PING's round trip let in.
    pub(super) fn shutdown(&mut self, now: Instant) {
        if self.goaway != Goaway::None || self.ending.is_some() {
            return;
        }
        frame::put_goaway(&mut self.out, (1 << 31) - 1, frame::NO_ERROR);
        frame::put(&mut self.out, frame::PING, 0, 0, &SHUTDOWN_PING);
        self.goaway = Goaway::Probing(now);
    }

    fn final_goaway(&mut self) {
        frame::put_goaway(&mut self.out, self.last_stream, frame::NO_ERROR);
        self.goaway = Goaway::Sent(self.last_stream);
        self.after_close();
    }

    /// Ends the connection at once with GOAWAY(`code`): a connection error, a timeout
    /// (NO_ERROR) or a fault.
    pub(super) fn fail(&mut self, code: u32) {
        if self.ending.is_none() {
            frame::put_goaway(&mut self.out, self.last_stream, code);
            self.ending = Some(Ending::Error(code));
        }
    }

    /// Counts a limit and ends the connection with GOAWAY(NO_ERROR).
    pub(super) fn time_out(&mut self, kind: LimitKind) {
        self.shared.state.stats().limit(kind);
        self.fail(frame::NO_ERROR);
    }

    /// A stream error: RST_STREAM(`code`), and the stream is gone.
    fn reset(&mut self, id: u32, code: u32) {
        frame::put_rst(&mut self.out, id, code);
        self.close(id);
        if let Some(entry) = self.closed.iter_mut().find(|(c, _)| *c == id) {
            entry.1 = true;
        } else {
            self.remember(id, true);
        }
    }

    fn close(&mut self, id: u32) {
        if let Some(s) = self.streams.remove(&id) {
            self.finish(id, &s);
        }
    }

    /// The bookkeeping of a stream taken out of the table for good.
    fn finish(&mut self, id: u32, s: &Stream) {
        if s.active {
            self.shared.state.leave_active();
        }
        self.remember(id, false);
        self.after_close();
    }

    /// Checks whether the connection is done once a stream closed.
    fn after_close(&mut self) {
        if self.streams.is_empty() {
            self.quiet_since = Instant::now();
            if matches!(self.goaway, Goaway::Sent(_)) && self.ending.is_none() {
                self.ending = Some(Ending::Done);
            }
        }
    }

    fn remember(&mut self, id: u32, reset: bool) {
        if self.closed.len() == CLOSED_KEPT {
            self.closed.pop_front();
        }
        self.closed.push_back((id, reset));
    }

    fn was_reset_by_us(&self, id: u32) -> bool {
        self.closed.iter().any(|&(c, reset)| c == id && reset)
    }

    /// A block buffer for the next response, reusing a finished one's.
    fn out_scratch(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    fn recycle(&mut self, mut block: Vec<u8>) {
        block.clear();
        if self.spare.len() < 4 {
            self.spare.push(block);
        }
    }

    /// Returns receive credit once half a window has been used: the data is dropped as it
    /// arrives, so the credit is free at once.
    fn give_back_credit(&mut self) {
        if self.recv_used >= CONNECTION_WINDOW / 2 {
            frame::put_window_update(&mut self.out, 0, self.recv_used);
            self.recv_window += i64::from(self.recv_used);
            self.recv_used = 0;
        }
        for (&id, s) in &mut self.streams {
            if s.recv_used >= STREAM_WINDOW / 2 && !s.ended {
                frame::put_window_update(&mut self.out, id, s.recv_used);
                s.recv_window += i64::from(s.recv_used);
                s.recv_used = 0;
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        for s in self.streams.values() {
            if s.active {
                self.shared.state.leave_active();
            }
        }
    }
}

/// The stream a PRIORITY frame, or a HEADERS frame's priority, depends on.
fn depends_on(priority: &[u8]) -> u32 {
    u32::from_be_bytes([priority[0], priority[1], priority[2], priority[3]]) & !(1 << 31)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tunnel_tests;
