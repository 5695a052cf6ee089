//! The feeder: a thread that reads the jobs file as the replay goes, places each job on the
//! replay's timeline, turns it into the engine's fed session, and sends it to the workers in
//! turn. The engine's channels are bounded, so the feeder stays only a little ahead of the
//! clock and memory holds the running jobs, never the file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use shrike_engine::feed::{FedRequest, FedSession, FeedSender, HttpMeta, Payload};
use shrike_jobs::{Body, Connection, Job, JobProtocol, JobReader, JobsError, Login};

use crate::protocols::mysql::MysqlStep;
use crate::timeline::{TimeOptions, Timeline};
use crate::Shard;

/// What to replay of a jobs file, and how.
#[derive(Clone, Debug)]
pub struct FeedOptions {
    /// The protocol replayed; jobs of another are skipped (and counted).
    pub protocol: JobProtocol,
    pub time: TimeOptions,
    pub shard: Option<Shard>,
    /// HTTP: the Host header becomes this (`host:port`); `None` keeps the captured one.
    pub authority: Option<String>,
    /// HTTP: the target URL's path, put before every replayed path (`""` for `/`).
    pub path_prefix: String,
}

/// What the feeder did, readable while it runs.
#[derive(Debug, Default)]
pub struct FeedProgress {
    /// Jobs read from the file.
    pub read: AtomicU64,
    /// Jobs and requests handed to the engine.
    pub jobs: AtomicU64,
    pub requests: AtomicU64,
    /// Jobs skipped: another protocol, or no request.
    pub skipped: AtomicU64,
}

/// How the feeding ended.
#[derive(Debug)]
pub struct FeedEnd {
    /// The file was read to its end (false: a bad line, or the run stopped taking jobs).
    pub complete: bool,
    /// The bad line or read error that ended it, if any.
    pub error: Option<JobsError>,
}

/// A running feeder.
#[derive(Debug)]
pub struct Feeder {
    pub progress: Arc<FeedProgress>,
    handle: JoinHandle<FeedEnd>,
}

impl Feeder {
    /// Starts feeding `reader`'s jobs into `sender` on a thread of its own.
    pub fn start(
        reader: JobReader,
        sender: FeedSender,
        options: FeedOptions,
    ) -> std::io::Result<Feeder> {
        let progress = Arc::new(FeedProgress::default());
        let p = progress.clone();
        let handle = std::thread::Builder::new().name("shrike-feeder".into()).spawn(move || {
            let mut sender = sender;
            feed(reader, &mut |s| sender.send(s), &options, &p)
        })?;
        Ok(Feeder { progress, handle })
    }

    /// Waits for the feeder (it ends once the file is read, or the run took its last job).
    pub fn finish(self) -> FeedEnd {
        self.handle.join().unwrap_or(FeedEnd {
            complete: false,
            error: Some(JobsError::Io {
                path: "(feeder)".into(),
                source: std::io::Error::other("the feeder thread crashed"),
            }),
        })
    }
}

/// Feeds `reader`'s jobs to `send` (false: the run takes no more).
fn feed(
    reader: JobReader,
    send: &mut dyn FnMut(FedSession) -> bool,
    options: &FeedOptions,
    progress: &FeedProgress,
) -> FeedEnd {
    let mut timeline = Timeline::new(options.time);
    for (position, job) in reader.enumerate() {
        let job = match job {
            Ok(j) => j,
            // Nothing after a bad line is guessed at; the jobs fed so far still play.
            Err(error) => return FeedEnd { complete: false, error: Some(error) },
        };
        progress.read.fetch_add(1, Ordering::Relaxed);
        let held = options.shard.is_none_or(|s| s.holds(position as u64));
        if job.protocol != options.protocol || job.requests.is_empty() {
            if held {
                progress.skipped.fetch_add(1, Ordering::Relaxed);
            }
            continue;
        }
        // Every shard places every job, so all shards share one timeline: the same origin
        // (the file's first job, not the shard's) and the same idle compression. A shard
        // that placed only its own jobs would start them early by the gaps it did not see.
        let placed = timeline.place(&job);
        if !held {
            continue;
        }
        let session = session(&job, placed, options);
        let n = session.requests.len() as u64;
        if !send(session) {
            return FeedEnd { complete: false, error: None };
        }
        progress.jobs.fetch_add(1, Ordering::Relaxed);
        progress.requests.fetch_add(n, Ordering::Relaxed);
    }
    FeedEnd { complete: true, error: None }
}

/// The engine's session for `job`, placed on the timeline at `(start, offsets)`.
fn session(job: &Job, placed: (Duration, Vec<Duration>), options: &FeedOptions) -> FedSession {
    let (start, offsets) = placed;
    let login = job.login.clone().map(Arc::new);
    let mut requests: Vec<FedRequest> = Vec::with_capacity(job.requests.len());
    for (r, at) in job.requests.iter().zip(offsets) {
        let payload = payload(&r.body, login.as_ref(), options);
        match requests.last_mut() {
            // Pipelined behind the previous request: it leaves with it, on the same
            // connection, and its answer is read after the previous one's.
            Some(prev) if r.pipelined && options.protocol == JobProtocol::Http => {
                let mut data = Vec::with_capacity(prev.payload.data.len() + payload.data.len());
                data.extend_from_slice(&prev.payload.data);
                data.extend_from_slice(&payload.data);
                let mut meta = prev.payload.extra::<HttpMeta>().cloned().unwrap_or_default();
                meta.pipelined_heads.push(payload.extra::<HttpMeta>().is_some_and(|m| m.head));
                prev.payload = Payload::with(data, meta);
            }
            _ => requests.push(FedRequest { at, payload }),
        }
    }
    FedSession {
        start,
        per_request_connections: job.connection == Connection::PerRequest,
        requests,
    }
}

/// A request's payload: its bytes, and what its protocol needs beyond them (HTTP/1.1: whether
/// it is HEAD; TCP: the captured answer's size; MySQL: the command itself and its session's
/// login).
fn payload(body: &Body, login: Option<&Arc<Login>>, options: &FeedOptions) -> Payload {
    match body {
        Body::Raw { data, .. } if options.protocol == JobProtocol::Http => {
            let (data, head) =
                crate::http::for_target(data, options.authority.as_deref(), &options.path_prefix);
            Payload::with(data, HttpMeta { head, pipelined_heads: Vec::new() })
        }
        Body::Raw { data, response_bytes: Some(n) } => {
            Payload::with(data.clone(), crate::protocols::AnswerSize(*n))
        }
        Body::Raw { data, response_bytes: None } => Payload::bytes(data.clone()),
        Body::Mysql(c) => {
            let step = MysqlStep { command: c.clone(), login: login.cloned() };
            Payload::with(Bytes::new(), step)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sessions(text: &str, shard: Option<Shard>) -> Vec<Duration> {
        let reader =
            JobReader::from_reader("t".into(), Box::new(std::io::Cursor::new(text.to_string())))
                .unwrap();
        let options = FeedOptions {
            protocol: JobProtocol::Http,
            time: TimeOptions { scale: 1.0, max_idle: Some(Duration::from_secs(1)) },
            shard,
            authority: None,
            path_prefix: String::new(),
        };
        let mut got = Vec::new();
        let end = feed(
            reader,
            &mut |s| {
                got.push(s.start);
                true
            },
            &options,
            &FeedProgress::default(),
        );
        assert!(end.complete);
        got
    }

    #[test]
    fn shards_keep_the_whole_files_timeline() {
        // Jobs at 0, 0.5, 5 (an idle gap shrunk to 1 s: due at 1.5) and 5.2 s.
        let text = [0.0, 0.5, 5.0, 5.2]
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{{\"job\": {i}, \"start\": {t}, \"requests\": [{{\"at\": 0, \"text\": \"GET / HTTP/1.1\\r\\n\\r\\n\"}}]}}\n"))
            .collect::<String>();
        let all = sessions(&text, None);
        let ms = |v: &[Duration]| v.iter().map(|d| d.as_millis()).collect::<Vec<_>>();
        assert_eq!(ms(&all), vec![0, 500, 1500, 1700]);
        // Each shard's jobs are due when the whole file has them, not from its own first job.
        assert_eq!(ms(&sessions(&text, Shard::try_new(0, 2))), vec![0, 1500]);
        assert_eq!(ms(&sessions(&text, Shard::try_new(1, 2))), vec![500, 1700]);
    }
}
