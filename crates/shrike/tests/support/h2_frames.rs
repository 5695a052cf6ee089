//! A raw HTTP/2 client over a TcpStream, frame by frame: enough to hold a connection idle,
//! send several requests in one write and see GOAWAY and RST_STREAM as the server sent them,
//! which curl and h2load do not show.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::h2_wire::{frame, ACK, END_HEADERS, END_STREAM};
pub use crate::support::h2_wire::{DATA, GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    fn word(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// GOAWAY's and RST_STREAM's error code.
    pub fn error_code(&self) -> u32 {
        match self.kind {
            GOAWAY => self.word(4),
            _ => self.word(0),
        }
    }

    /// GOAWAY's last stream id.
    pub fn last_stream(&self) -> u32 {
        self.word(0) & 0x7fff_ffff
    }

    fn ends_stream(&self) -> bool {
        matches!(self.kind, DATA | HEADERS) && self.flags & END_STREAM != 0
    }
}

pub struct H2Client {
    stream: TcpStream,
}

/// `GET /` with :authority t, in HPACK from the static table only (no dynamic state).
fn get_block() -> Vec<u8> {
    vec![0x82, 0x86, 0x84, 0x01, 0x01, b't']
}

impl H2Client {
    /// Connects and sends the preface and an empty SETTINGS frame, nothing else.
    pub fn connect(addr: &str) -> H2Client {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        stream.write_all(PREFACE).unwrap();
        stream.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
        H2Client { stream }
    }

    pub fn get(&mut self, id: u32) {
        self.get_many(&[id]);
    }

    /// One complete GET per stream id, all in one write.
    pub fn get_many(&mut self, ids: &[u32]) {
        let mut out = Vec::new();
        for &id in ids {
            out.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, &get_block()));
        }
        self.stream.write_all(&out).unwrap();
    }

    /// The next frame, acknowledging SETTINGS and PING on the way; `None` once the server has
    /// closed (or reset) the connection.
    pub fn next_frame(&mut self) -> Option<Frame> {
        let mut head = [0u8; 9];
        match self.stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => panic!("no frame in 5 s"),
            Err(_) => return None,
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        self.stream.read_exact(&mut payload).ok()?;
        let stream = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff;
        let f = Frame { kind: head[3], flags: head[4], stream, payload };
        // Writes may fail once the server has closed; the read after them says so.
        if f.kind == SETTINGS && f.flags & ACK == 0 {
            let _ = self.stream.write_all(&frame(SETTINGS, ACK, 0, &[]));
        }
        if f.kind == PING && f.flags & ACK == 0 {
            let _ = self.stream.write_all(&frame(PING, ACK, 0, &f.payload));
        }
        Some(f)
    }

    /// Reads stream `id`'s response to its end: the status (from HPACK's static table: 200 is
    /// index 8; anything else is reported as 0) and the DATA bytes.
    pub fn response(&mut self, id: u32) -> (u16, usize) {
        let (mut status, mut body) = (0, 0);
        loop {
            let f = self.next_frame().expect("connection open until the response ends");
            if f.stream != id {
                continue;
            }
            match f.kind {
                HEADERS if f.payload.first() == Some(&0x88) => status = 200,
                DATA => body += f.payload.len(),
                RST_STREAM => panic!("stream {id} reset: {f:?}"),
                _ => {}
            }
            if f.ends_stream() {
                return (status, body);
            }
        }
    }

    /// Every frame until the server closes the connection, which must happen within `limit`.
    pub fn frames_until_close(&mut self, limit: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + limit;
        let mut frames = Vec::new();
        while let Some(f) = self.next_frame() {
            frames.push(f);
            assert!(Instant::now() < deadline, "still open after {limit:?}: {frames:?}");
        }
        frames
    }
}
