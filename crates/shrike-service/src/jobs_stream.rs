//! A `Replay` call's jobs, as the blocking `Read` the jobs reader wants: a task moves the
//! client's chunks into a small bounded channel, the feeder thread reads them as the replay
//! goes. The channel's bound and the stream's flow control pace the client; the file is never
//! held whole. A stream that breaks mid-file reads as an error, which ends the feed with the
//! jobs before it played.

use std::io::{self, Read};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::proto::{replay_request::Part, ReplayRequest};

/// Chunks buffered between the stream and the feeder.
const CHUNKS: usize = 16;

pub struct StreamReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

/// Starts moving `stream`'s jobs chunks to the returned reader (on the current runtime).
pub fn reader(mut stream: tonic::Streaming<ReplayRequest>) -> StreamReader {
    let (tx, rx) = mpsc::channel(CHUNKS);
    tokio::spawn(async move {
        loop {
            let item = match stream.message().await {
                Ok(Some(ReplayRequest { part: Some(Part::Jobs(b)) })) => Ok(Bytes::from(b)),
                Ok(Some(_)) => Err(io::Error::other("a second start in the jobs stream")),
                Ok(None) => return,
                Err(status) => Err(io::Error::other(format!(
                    "the client's jobs stream broke: {}",
                    status.message()
                ))),
            };
            let failed = item.is_err();
            // The replay stopped reading (it ended or was cancelled): stop receiving.
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    StreamReader { rx, current: Bytes::new() }
}

impl Read for StreamReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            // Called on the feeder's (or a blocking task's) thread, never on the runtime.
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.current = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}
