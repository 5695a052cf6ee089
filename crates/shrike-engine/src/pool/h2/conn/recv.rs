//! The server's frames, one at a time (RFC 9113 §6): each updates the connection or a stream,
//! and a violation is a connection error (GOAWAY) or a stream error (RST_STREAM) as the RFC
//! says, never a panic.

use super::frame::{self, Head};
use super::{conn_error, ConnError, Failure, Inner, Partial};
use super::{CONNECTION_WINDOW, HPACK_ENTRY_OVERHEAD, MAX_HEADER_LIST, STREAM_WINDOW};
use crate::requests::OriginLatency;

impl Inner {
    /// Dispatches one whole frame.
    pub(super) fn on_frame(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        if !self.settings_seen && h.kind != frame::SETTINGS {
            return conn_error(frame::PROTOCOL_ERROR, "the server's first frame is no SETTINGS");
        }
        if let Some(p) = &self.partial {
            if h.kind != frame::CONTINUATION || h.stream != p.stream {
                return conn_error(frame::PROTOCOL_ERROR, "a header block cut by another frame");
            }
        }
        match h.kind {
            frame::DATA => self.on_data(h, payload),
            frame::HEADERS => self.on_headers(h, payload),
            frame::CONTINUATION => self.on_continuation(h, payload),
            frame::RST_STREAM => self.on_rst(h, payload),
            frame::SETTINGS => self.on_settings(h, payload),
            frame::PING => self.on_ping(h, payload),
            frame::GOAWAY => self.on_goaway(h, payload),
            frame::WINDOW_UPDATE => self.on_window_update(h, payload),
            frame::PRIORITY if h.len != 5 => conn_error(frame::FRAME_SIZE_ERROR, "PRIORITY size"),
            frame::PUSH_PROMISE => {
                conn_error(frame::PROTOCOL_ERROR, "PUSH_PROMISE though push is disabled")
            }
            // PRIORITY is advisory; unknown types are ignored (RFC 9113 §5.5).
            _ => Ok(()),
        }
    }

    /// Frames on a stream we never opened are a connection error (§5.1, idle streams).
    fn check_stream(&self, h: Head) -> Result<(), ConnError> {
        if h.stream == 0 || h.stream >= self.next_id || h.stream.is_multiple_of(2) {
            return conn_error(
                frame::PROTOCOL_ERROR,
                format!("frame type {} on stream {}", h.kind, h.stream),
            );
        }
        Ok(())
    }

    fn on_data(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        self.check_stream(h)?;
        // Flow control counts the whole payload, padding included (§6.1).
        let len = payload.len() as u32;
        self.conn_unacked += len;
        if self.conn_unacked > CONNECTION_WINDOW {
            return conn_error(frame::FLOW_CONTROL_ERROR, "DATA beyond the connection window");
        }
        if self.conn_unacked >= CONNECTION_WINDOW / 2 {
            frame::put_window_update(&mut self.out, 0, self.conn_unacked);
            self.conn_unacked = 0;
        }
        let Some(data) = frame::unpad(h.flags, payload) else {
            return conn_error(frame::PROTOCOL_ERROR, "DATA padding longer than the frame");
        };
        let end = h.flags & frame::END_STREAM != 0;
        // A stream that already ended (we reset it) may still receive frames in flight.
        let Some(s) = self.live(h.stream) else { return Ok(()) };
        if s.status == 0 {
            self.malformed(h.stream, "DATA before the response head");
            return Ok(());
        }
        s.recv_unacked += len;
        if s.recv_unacked > STREAM_WINDOW {
            return conn_error(frame::FLOW_CONTROL_ERROR, "DATA beyond the stream window");
        }
        s.body_bytes += data.len() as u64;
        if end {
            self.finish(h.stream, Ok(()));
        } else if s.recv_unacked >= STREAM_WINDOW / 2 {
            let n = std::mem::take(&mut s.recv_unacked);
            frame::put_window_update(&mut self.out, h.stream, n);
        }
        Ok(())
    }

    fn on_headers(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        self.check_stream(h)?;
        let Some(mut fragment) = frame::unpad(h.flags, payload) else {
            return conn_error(frame::PROTOCOL_ERROR, "HEADERS padding longer than the frame");
        };
        if h.flags & frame::PRIORITY_FLAG != 0 {
            let Some(rest) = fragment.get(5..) else {
                return conn_error(frame::FRAME_SIZE_ERROR, "HEADERS too short for its priority");
            };
            fragment = rest;
        }
        let end_stream = h.flags & frame::END_STREAM != 0;
        self.block.clear();
        self.block.extend_from_slice(fragment);
        if h.flags & frame::END_HEADERS != 0 {
            return self.on_head(h.stream, end_stream);
        }
        self.partial = Some(Partial { stream: h.stream, end_stream });
        Ok(())
    }

    fn on_continuation(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Some(p) = self.partial.take() else {
            return conn_error(frame::PROTOCOL_ERROR, "CONTINUATION without HEADERS");
        };
        if self.block.len() + payload.len() > MAX_HEADER_LIST as usize {
            return conn_error(frame::ENHANCE_YOUR_CALM, "a response head over 64 KiB");
        }
        self.block.extend_from_slice(payload);
        if h.flags & frame::END_HEADERS != 0 {
            return self.on_head(p.stream, p.end_stream);
        }
        self.partial = Some(p);
        Ok(())
    }

    /// Decodes a whole head block in `self.block` (always, to keep the HPACK table in step)
    /// and applies it to its stream: the response head, an informational head, or trailers.
    fn on_head(&mut self, id: u32, end_stream: bool) -> Result<(), ConnError> {
        let mut status: Option<Result<u16, ()>> = None;
        let mut size = 0u64;
        let mut origin = OriginLatency::Absent;
        let latency = self.latency_header.as_ref().map(|n| n.as_str().as_bytes());
        let block = std::mem::take(&mut self.block);
        let decoded = self.decoder.decode(&block, |name, value| {
            size += (name.len() + value.len()) as u64 + HPACK_ENTRY_OVERHEAD;
            if name == b":status" {
                status = Some(parse_status(value));
            } else if latency == Some(name) {
                origin = OriginLatency::parse(value);
            }
        });
        self.block = block;
        if let Err(e) = decoded {
            return conn_error(frame::COMPRESSION_ERROR, e.to_string());
        }
        let Some(s) = self.live(id) else { return Ok(()) };
        if s.status != 0 {
            // Trailers: they end the stream, and are not counted.
            if !end_stream {
                self.malformed(id, "trailers without END_STREAM");
            } else {
                self.finish(id, Ok(()));
            }
            return Ok(());
        }
        match status {
            Some(Ok(st)) if (100..200).contains(&st) => {
                // An informational head (100 Continue, 103): the final one follows.
                if end_stream || st == 101 {
                    self.malformed(id, "an informational head that ends the stream");
                }
            }
            Some(Ok(st)) => {
                s.status = st;
                s.header_bytes = size;
                s.origin = origin;
                if end_stream {
                    self.finish(id, Ok(()));
                }
            }
            Some(Err(())) => self.malformed(id, "a :status that is no three-digit code"),
            None => self.malformed(id, "a response head without :status"),
        }
        Ok(())
    }

    fn on_rst(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        self.check_stream(h)?;
        let Ok(code) = <[u8; 4]>::try_from(payload) else {
            return conn_error(frame::FRAME_SIZE_ERROR, "RST_STREAM size");
        };
        self.finish(h.stream, Err(Failure::Reset(u32::from_be_bytes(code))));
        Ok(())
    }

    fn on_settings(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return conn_error(frame::PROTOCOL_ERROR, "SETTINGS on a stream");
        }
        if h.flags & frame::ACK != 0 {
            return match payload.is_empty() {
                true => Ok(()),
                false => conn_error(frame::FRAME_SIZE_ERROR, "a SETTINGS ack with a payload"),
            };
        }
        if !payload.len().is_multiple_of(6) {
            return conn_error(frame::FRAME_SIZE_ERROR, "SETTINGS size");
        }
        for e in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([e[0], e[1]]);
            let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            match id {
                frame::SETTINGS_ENABLE_PUSH if v > 1 => {
                    return conn_error(frame::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH above 1");
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => {
                    self.max_send_streams = v;
                    for w in self.room_waiters.drain(..) {
                        w.wake();
                    }
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    let v = i64::from(v);
                    if v > frame::MAX_WINDOW {
                        return conn_error(
                            frame::FLOW_CONTROL_ERROR,
                            "an initial window over 2^31-1",
                        );
                    }
                    let delta = v - self.initial_send_window;
                    self.initial_send_window = v;
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return conn_error(
                                frame::FLOW_CONTROL_ERROR,
                                "a stream window over 2^31-1",
                            );
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return conn_error(
                            frame::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        );
                    }
                    // Larger frames save little and hold the socket longer per stream.
                    self.max_frame = (v as usize).min(64 * 1024);
                }
                // The encoder never indexes, so the table size does not matter to it; the
                // server's header list limit is its own to enforce.
                frame::SETTINGS_HEADER_TABLE_SIZE | frame::SETTINGS_MAX_HEADER_LIST_SIZE => {}
                _ => {}
            }
        }
        frame::put(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
        self.settings_seen = true;
        self.queue_bodies();
        Ok(())
    }

    fn on_ping(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 || payload.len() != 8 {
            return conn_error(frame::FRAME_SIZE_ERROR, "PING size or stream");
        }
        if h.flags & frame::ACK == 0 {
            frame::put(&mut self.out, frame::PING, frame::ACK, 0, payload);
        }
        Ok(())
    }

    fn on_goaway(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 || payload.len() < 8 {
            return conn_error(frame::FRAME_SIZE_ERROR, "GOAWAY size or stream");
        }
        let last =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
        let last = self.goaway.map_or(last, |(l, _)| l.min(last));
        self.goaway = Some((last, code));
        // Streams above the last one the server will process were not processed: they fail
        // as refused, to be retried elsewhere.
        let cut: Vec<u32> = self.streams.keys().copied().filter(|&id| id > last).collect();
        for id in cut {
            self.finish(id, Err(Failure::GoAway(code)));
        }
        for w in self.room_waiters.drain(..) {
            w.wake();
        }
        Ok(())
    }

    fn on_window_update(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Ok(b) = <[u8; 4]>::try_from(payload) else {
            return conn_error(frame::FRAME_SIZE_ERROR, "WINDOW_UPDATE size");
        };
        let inc = i64::from(u32::from_be_bytes(b) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 {
                return conn_error(frame::PROTOCOL_ERROR, "a zero WINDOW_UPDATE");
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                return conn_error(frame::FLOW_CONTROL_ERROR, "a connection window over 2^31-1");
            }
        } else {
            self.check_stream(h)?;
            let Some(s) = self.live(h.stream) else { return Ok(()) };
            s.send_window += inc;
            if inc == 0 || s.send_window > frame::MAX_WINDOW {
                self.malformed(h.stream, "a zero or overflowing stream WINDOW_UPDATE");
            }
        }
        self.queue_bodies();
        Ok(())
    }
}

/// `:status` must be exactly three digits (RFC 9113 §8.3.2, RFC 9110 §15).
fn parse_status(v: &[u8]) -> Result<u16, ()> {
    match v {
        [a, b, c] if v.iter().all(u8::is_ascii_digit) => {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(()),
    }
}
