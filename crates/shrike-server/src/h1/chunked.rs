//! Incremental decoder for chunked request bodies that counts the data and keeps none of it.
//!
//! It is a byte-level state machine, so input may be split anywhere (inside a size line, a CRLF,
//! or a trailer) without buffering: every byte fed is consumed.

/// A chunk-size line longer than this (hex digits plus extensions) is treated as an attack.
const MAX_LINE: usize = 4096;
/// Trailer section limit, matching the request head limit.
const MAX_TRAILERS: usize = super::request::MAX_HEAD;
/// 16 hex digits fill a u64; more would overflow.
const MAX_SIZE_DIGITS: u8 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkedError {
    Malformed(&'static str),
    TooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size { value: u64, digits: u8 },
    Extension,
    SizeLf,
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    EndLf,
    Done,
}

#[derive(Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
    line: usize,
    trailers: usize,
    /// Size of the chunk whose size line is being finished.
    pending: u64,
    body: u64,
    max_body: u64,
}

impl ChunkedDecoder {
    pub(crate) fn new(max_body: u64) -> Self {
        Self {
            state: State::Size { value: 0, digits: 0 },
            line: 0,
            trailers: 0,
            pending: 0,
            body: 0,
            max_body,
        }
    }

    /// Consumes from `input` and reports how many bytes belonged to the body and whether it
    /// ended. Bytes after the end (a pipelined request) are not consumed.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), ChunkedError> {
        if self.state == State::Done {
            return Ok((0, true));
        }
        let mut i = 0;
        while i < input.len() {
            if let State::Data(remaining) = self.state {
                // Bulk skip: the data is the bulk of the body and needs no inspection.
                let available = (input.len() - i) as u64;
                let take = remaining.min(available);
                i += take as usize;
                self.state =
                    if take == remaining { State::DataCr } else { State::Data(remaining - take) };
                continue;
            }
            self.state = self.step(input[i])?;
            i += 1;
            if self.state == State::Done {
                return Ok((i, true));
            }
        }
        Ok((i, self.state == State::Done))
    }

    fn step(&mut self, b: u8) -> Result<State, ChunkedError> {
        use ChunkedError::Malformed;
        let next = match self.state {
            State::Size { value, digits } => {
                self.line += 1;
                match b {
                    _ if (b as char).is_ascii_hexdigit() => {
                        if digits == MAX_SIZE_DIGITS {
                            return Err(Malformed("chunk size too large"));
                        }
                        let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                        State::Size { value: value << 4 | digit, digits: digits + 1 }
                    }
                    _ if digits == 0 => return Err(Malformed("chunk size is not hexadecimal")),
                    b';' | b' ' | b'\t' => {
                        self.start_chunk(value)?;
                        State::Extension
                    }
                    b'\r' => {
                        self.start_chunk(value)?;
                        State::SizeLf
                    }
                    _ => return Err(Malformed("chunk size is not hexadecimal")),
                }
            }
            State::Extension => {
                self.line += 1;
                if self.line > MAX_LINE {
                    return Err(Malformed("chunk extension too long"));
                }
                match b {
                    b'\r' => State::SizeLf,
                    b'\n' => return Err(Malformed("bare LF in chunk size line")),
                    _ => State::Extension,
                }
            }
            State::SizeLf => {
                if b != b'\n' {
                    return Err(Malformed("chunk size line must end with CRLF"));
                }
                self.line = 0;
                match self.pending {
                    0 => State::TrailerStart,
                    n => State::Data(n),
                }
            }
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return Err(Malformed("chunk data must be followed by CRLF")),
            },
            State::DataLf => match b {
                b'\n' => State::Size { value: 0, digits: 0 },
                _ => return Err(Malformed("chunk data must be followed by CRLF")),
            },
            State::TrailerStart | State::Trailer => {
                self.trailers += 1;
                if self.trailers > MAX_TRAILERS {
                    return Err(Malformed("trailer section too large"));
                }
                match (self.state, b) {
                    (State::TrailerStart, b'\r') => State::EndLf,
                    (_, b'\r') => State::TrailerLf,
                    (_, b'\n') => return Err(Malformed("bare LF in trailer section")),
                    _ => State::Trailer,
                }
            }
            State::TrailerLf => match b {
                b'\n' => State::TrailerStart,
                _ => return Err(Malformed("trailer line must end with CRLF")),
            },
            State::EndLf => match b {
                b'\n' => State::Done,
                _ => return Err(Malformed("chunked body must end with CRLF")),
            },
            State::Data(_) | State::Done => self.state,
        };
        Ok(next)
    }

    /// The size has been read in full: count it now, so an oversized body is refused before
    /// its data is read.
    fn start_chunk(&mut self, size: u64) -> Result<(), ChunkedError> {
        self.body = self.body.checked_add(size).ok_or(ChunkedError::TooLarge)?;
        if self.body > self.max_body {
            return Err(ChunkedError::TooLarge);
        }
        self.pending = size;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] =
        b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";

    #[test]
    fn whole_body_then_next_request_untouched() {
        let mut input = BODY.to_vec();
        input.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut d = ChunkedDecoder::new(1 << 20);
        assert_eq!(d.feed(&input), Ok((BODY.len(), true)));
        assert_eq!(d.body, 31);
    }

    #[test]
    fn any_split_point() {
        for split in 0..=BODY.len() {
            let mut d = ChunkedDecoder::new(1 << 20);
            let (a, done) = d.feed(&BODY[..split]).unwrap();
            assert_eq!((a, done), (split, split == BODY.len()), "split {split}");
            assert_eq!(d.feed(&BODY[split..]), Ok((BODY.len() - split, true)));
        }
        let mut d = ChunkedDecoder::new(1 << 20);
        for b in BODY {
            d.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(d.feed(b""), Ok((0, true)));
    }

    #[test]
    fn no_trailers() {
        let mut d = ChunkedDecoder::new(10);
        assert_eq!(d.feed(b"0\r\n\r\n"), Ok((5, true)));
    }

    #[test]
    fn too_large_is_refused_at_the_size_line() {
        let mut d = ChunkedDecoder::new(10);
        assert_eq!(d.feed(b"5\r\nhello\r\n6\r\n"), Err(ChunkedError::TooLarge));
        let mut d = ChunkedDecoder::new(u64::MAX);
        assert!(d.feed(b"ffffffffffffffff\r\n").is_ok());
        let mut d = ChunkedDecoder::new(u64::MAX);
        assert!(matches!(d.feed(b"10000000000000000\r\n"), Err(ChunkedError::Malformed(_))));
    }

    #[test]
    fn malformed() {
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"5\nhello\r\n",
            b"5\r\nhelloXX",
            b"0\r\nbad\ntrailer",
            b"0\r\n\rX",
            b"-1\r\n",
        ] {
            let mut d = ChunkedDecoder::new(1 << 20);
            assert!(matches!(d.feed(bad), Err(ChunkedError::Malformed(_))), "{bad:?}");
        }
    }

    /// Random chunk layouts, random extensions and trailers, fed in random slices.
    #[test]
    fn randomized_bodies_and_splits() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..500 {
            let mut wire = Vec::new();
            let mut total = 0;
            for _ in 0..next(6) {
                let size = next(3000) + 1;
                total += size;
                wire.extend_from_slice(format!("{size:x}").as_bytes());
                if next(3) == 0 {
                    wire.extend_from_slice(b" ; name=\"v\"");
                }
                wire.extend_from_slice(b"\r\n");
                wire.extend((0..size).map(|i| b'a' + (i % 26) as u8));
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n");
            for t in 0..next(3) {
                wire.extend_from_slice(format!("x-t{t}: {t}\r\n").as_bytes());
            }
            wire.extend_from_slice(b"\r\n");
            let end = wire.len();
            wire.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");

            let mut d = ChunkedDecoder::new(u64::MAX);
            let mut at = 0;
            loop {
                let piece = (next(4000) as usize + 1).min(wire.len() - at);
                let (used, done) = d.feed(&wire[at..at + piece]).unwrap();
                at += used;
                if done {
                    break;
                }
                assert_eq!(used, piece, "an unfinished body consumes everything");
            }
            assert_eq!(at, end);
            assert_eq!(d.body, total);
        }
    }
}
