//! The feeder: a thread that reads the jobs file as the replay goes, places each job on the
//! replay's timeline, turns it into the engine's fed session, and sends it to the workers in
//! turn. The engine's channels are bounded, so the feeder stays only a little ahead of the
//! clock and memory holds the running jobs, never the file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use shrike_engine::replay::{FedRequest, FedSession, FeedSender, Payload};
use shrike_jobs::{Body, Connection, Job, JobProtocol, JobReader, JobsError};

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
        let handle = std::thread::Builder::new()
            .name("shrike-feeder".into())
            .spawn(move || feed(reader, sender, &options, &p))?;
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

fn feed(
    reader: JobReader,
    mut sender: FeedSender,
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
        if options.shard.is_some_and(|s| !s.holds(position as u64)) {
            continue;
        }
        if job.protocol != options.protocol || job.requests.is_empty() {
            progress.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let session = session(&job, &mut timeline, options);
        let n = session.requests.len() as u64;
        if !sender.send(session) {
            return FeedEnd { complete: false, error: None };
        }
        progress.jobs.fetch_add(1, Ordering::Relaxed);
        progress.requests.fetch_add(n, Ordering::Relaxed);
    }
    FeedEnd { complete: true, error: None }
}

/// The engine's session for `job`.
fn session(job: &Job, timeline: &mut Timeline, options: &FeedOptions) -> FedSession {
    let (start, offsets) = timeline.place(job);
    let mut requests: Vec<FedRequest> = Vec::with_capacity(job.requests.len());
    for (r, at) in job.requests.iter().zip(offsets) {
        let payload = payload(&r.body, options);
        match requests.last_mut() {
            // Pipelined behind the previous request: it leaves with it, on the same
            // connection, and its answer is read after the previous one's.
            Some(prev) if r.pipelined && options.protocol == JobProtocol::Http => {
                let mut data = Vec::with_capacity(prev.payload.data.len() + payload.data.len());
                data.extend_from_slice(&prev.payload.data);
                data.extend_from_slice(&payload.data);
                prev.payload.data = Bytes::from(data);
                prev.payload.pipelined_heads.push(payload.head);
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

fn payload(body: &Body, options: &FeedOptions) -> Payload {
    let raw = |data: Vec<u8>, head, response_bytes| Payload {
        data: Bytes::from(data),
        head,
        response_bytes,
        mysql: None,
        pipelined_heads: Vec::new(),
    };
    match body {
        Body::Raw { data, response_bytes } if options.protocol == JobProtocol::Http => {
            let (data, head) = crate::http::for_target(data, options.authority.as_deref());
            raw(data, head, *response_bytes)
        }
        Body::Raw { data, response_bytes } => raw(data.clone(), false, *response_bytes),
        Body::Mysql(c) => {
            Payload { mysql: Some(Arc::new(c.clone())), ..raw(Vec::new(), false, None) }
        }
    }
}
