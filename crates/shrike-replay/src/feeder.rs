//! The feeder: a thread that reads the jobs file as the replay goes, places each job on the
//! replay's timeline, turns it into the engine's fed session, and sends it to the workers in
//! turn. The engine's channels are bounded, so the feeder stays only a little ahead of the
//! clock and memory holds the running jobs, never the file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use shrike_engine::feed::{Expected, FedRequest, FedSession, FeedSender, HttpMeta, Payload};
use shrike_jobs::{Body, Connection, Job, JobProtocol, JobReader, JobsError, Login, Request};

use crate::protocols::mysql::MysqlStep;
use crate::rewrite::Rewrites;
use crate::timeline::{Placed, TimeOptions, Timeline};
use crate::Shard;

/// The feeder thread's nice value: low enough that a worker sharing its core is rarely
/// kept from a release by it, high enough that it still keeps up in a saturated second
/// (weight 110 against a worker's 1024: about a tenth of the core).
const FEEDER_NICE: i32 = 10;

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
    /// HTTP: `--rewrite` rules.
    pub rewrites: Rewrites,
    /// Passes over the file (`--loop`): each starts when the one before it had its last
    /// request due, its jobs' times continued from there.
    pub loops: u32,
    /// HTTP: only requests to these hosts (`--host` globs, against each request's Host
    /// header); empty: every request.
    pub hosts: Vec<String>,
}

/// Opens the jobs file again, for the passes after the first.
pub type Reopen = Box<dyn FnMut() -> Result<JobReader, JobsError> + Send>;

/// What the feeder did, readable while it runs.
#[derive(Debug, Default)]
pub struct FeedProgress {
    /// Jobs read from the file.
    pub read: AtomicU64,
    /// Jobs and requests handed to the engine.
    pub jobs: AtomicU64,
    pub requests: AtomicU64,
    /// Jobs skipped: another protocol, or no request (none left to `--host`'s hosts, too).
    pub skipped: AtomicU64,
    /// Requests left out for going to another host than `--host`'s.
    pub other_hosts: AtomicU64,
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
    /// Starts feeding `reader`'s jobs into `sender` on a thread of its own (`reopen` reads
    /// the file again for each further pass, `options.loops`).
    pub fn start(
        reader: JobReader,
        reopen: Option<Reopen>,
        sender: FeedSender,
        options: FeedOptions,
    ) -> std::io::Result<Feeder> {
        let progress = Arc::new(FeedProgress::default());
        let p = progress.clone();
        let handle = std::thread::Builder::new().name("shrike-feeder".into()).spawn(move || {
            // Parsing and rewriting stay off a release's critical path: on a core shared with
            // a worker (a pinned client) the feeder runs while the worker waits. Its lead (a
            // channel's depth, filled before the clock starts) carries it through a burst.
            shrike_timer::lower_thread_priority(FEEDER_NICE);
            let mut sender = sender;
            feed(reader, reopen, &mut |s| sender.send(s), &options, &p)
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

/// Feeds `reader`'s jobs to `send` (false: the run takes no more), `options.loops` times
/// (`reopen` gives the file again).
fn feed(
    reader: JobReader,
    mut reopen: Option<Reopen>,
    send: &mut dyn FnMut(FedSession) -> bool,
    options: &FeedOptions,
    progress: &FeedProgress,
) -> FeedEnd {
    let mut timeline = Timeline::new(options.time);
    let mut reader = Some(reader);
    // Positions run on across passes, so shards keep dealing jobs evenly.
    let mut position = 0u64;
    // The file's span (its first job's start to its last request's), known after a pass.
    let (mut first, mut last) = (None::<Duration>, Duration::ZERO);
    for pass in 0..options.loops.max(1) {
        let pass_reader = match (reader.take(), reopen.as_mut()) {
            (Some(r), _) => r,
            (None, Some(again)) => match again() {
                Ok(r) => r,
                Err(error) => return FeedEnd { complete: false, error: Some(error) },
            },
            // No way to read it again (a stream): one pass is what there is.
            (None, None) => break,
        };
        let shift = last.saturating_sub(first.unwrap_or_default()) * pass;
        let pass_of = (shift, &mut position, &mut timeline);
        let (f, l) = match feed_pass(pass_reader, pass_of, send, options, progress) {
            Ok(span) => span,
            Err(end) => return end,
        };
        if pass == 0 {
            (first, last) = (f, l);
        }
    }
    FeedEnd { complete: true, error: None }
}

/// One pass over a file, its jobs `shift` later than they say: the span it read (first start,
/// last request due), or how the feeding ended early.
fn feed_pass(
    reader: JobReader,
    (shift, position, timeline): (Duration, &mut u64, &mut Timeline),
    send: &mut dyn FnMut(FedSession) -> bool,
    options: &FeedOptions,
    progress: &FeedProgress,
) -> Result<(Option<Duration>, Duration), FeedEnd> {
    let (mut first, mut last) = (None, Duration::ZERO);
    for job in reader {
        let at = *position;
        *position += 1;
        let mut job = match job {
            Ok(j) => j,
            // Nothing after a bad line is guessed at; the jobs fed so far still play.
            Err(error) => return Err(FeedEnd { complete: false, error: Some(error) }),
        };
        first.get_or_insert(job.start);
        last = last.max(job.end());
        job.start += shift;
        progress.read.fetch_add(1, Ordering::Relaxed);
        if !options.hosts.is_empty() && job.protocol == JobProtocol::Http {
            let before = job.requests.len();
            job.requests.retain(|r| to_hosts(&r.body, &options.hosts));
            progress.other_hosts.fetch_add((before - job.requests.len()) as u64, Ordering::Relaxed);
        }
        let held = options.shard.is_none_or(|s| s.holds(at));
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
            return Err(FeedEnd { complete: false, error: None });
        }
        progress.jobs.fetch_add(1, Ordering::Relaxed);
        progress.requests.fetch_add(n, Ordering::Relaxed);
    }
    Ok((first, last))
}

/// Whether an HTTP request (its captured bytes) goes to one of `hosts`, by its Host header.
fn to_hosts(body: &Body, hosts: &[String]) -> bool {
    let Body::Raw { data, .. } = body else { return false };
    let head = data.split(|&b| b == b'\n').skip(1).take_while(|l| l.len() > 1);
    let host = head.filter_map(|l| std::str::from_utf8(l).ok()).find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("host").then(|| value.trim().to_string())
    });
    host.is_some_and(|h| hosts.iter().any(|p| shrike_jobs::har::host_matches(p, &h)))
}

/// The engine's session for `job`, placed on the timeline.
fn session(job: &Job, placed: Placed, options: &FeedOptions) -> FedSession {
    let Placed { start, offsets, connect } = placed;
    let login = job.login.clone().map(Arc::new);
    let mut requests: Vec<FedRequest> = Vec::with_capacity(job.requests.len());
    for (r, at) in job.requests.iter().zip(offsets) {
        let payload = payload(job, r, login.as_ref(), options);
        match requests.last_mut() {
            // Pipelined behind the previous request: it leaves with it, on the same
            // connection, and its answer is read after the previous one's.
            Some(prev) if r.pipelined && options.protocol == JobProtocol::Http => {
                let mut data = Vec::with_capacity(prev.payload.data.len() + payload.data.len());
                data.extend_from_slice(&prev.payload.data);
                data.extend_from_slice(&payload.data);
                let mut meta = prev.payload.extra::<HttpMeta>().cloned().unwrap_or_default();
                meta.pipelined_heads.push(payload.extra::<HttpMeta>().is_some_and(|m| m.head));
                // Its answers are recorded together: none is compared with its capture.
                meta.expect = None;
                prev.payload = Payload::with(data, meta);
            }
            _ => requests.push(FedRequest { at, payload }),
        }
    }
    FedSession {
        start,
        connect,
        per_request_connections: job.connection == Connection::PerRequest,
        requests,
    }
}

/// A request's payload: its bytes, and what its protocol needs beyond them (HTTP/1.1: whether
/// it is HEAD; TCP: the captured answer's size; MySQL: the command itself and its session's
/// login).
fn payload(job: &Job, r: &Request, login: Option<&Arc<Login>>, options: &FeedOptions) -> Payload {
    match &r.body {
        Body::Raw { data, .. } if options.protocol == JobProtocol::Http => {
            let fit = crate::http::Fit {
                authority: options.authority.as_deref(),
                prefix: &options.path_prefix,
                rewrites: &options.rewrites,
            };
            let (data, head) = crate::http::for_target(data, &fit);
            // The captured answer, labelled as `jobs stats` labels requests; a request the
            // rewrite rules changed by what was sent, with what was captured beside it.
            let expect = r.response.map(|c| {
                let captured = shrike_jobs::stats::key(job, &r.body, false);
                let label = match options.rewrites.is_empty() {
                    true => captured,
                    false => {
                        let sent = shrike_jobs::stats::request_line(&data, false);
                        match sent == captured {
                            true => captured,
                            false => format!("{sent} (captured {captured})"),
                        }
                    }
                };
                Expected { label: label.into(), status: c.status, body_bytes: c.body_bytes }
            });
            Payload::with(data, HttpMeta { head, pipelined_heads: Vec::new(), expect })
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
        looped(text, shard, 1)
    }

    fn looped(text: &str, shard: Option<Shard>, loops: u32) -> Vec<Duration> {
        let open = {
            let text = text.to_string();
            move || JobReader::from_reader("t".into(), Box::new(std::io::Cursor::new(text.clone())))
        };
        let reader = open().unwrap();
        let reopen: Reopen = Box::new(open);
        let options = FeedOptions {
            protocol: JobProtocol::Http,
            time: TimeOptions { scale: 1.0, max_idle: Some(Duration::from_secs(1)) },
            shard,
            authority: None,
            path_prefix: String::new(),
            rewrites: Rewrites::default(),
            loops,
            hosts: Vec::new(),
        };
        let mut got = Vec::new();
        let end = feed(
            reader,
            Some(reopen),
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
        // Looped: each pass starts when the one before had its last request due (5.2 s, or
        // 1.7 s with the idle gap shrunk), and shards go on dealing across passes.
        assert_eq!(ms(&looped(&text, None, 2)), vec![0, 500, 1500, 1700, 1700, 2200, 3200, 3400]);
        assert_eq!(ms(&looped(&text, Shard::try_new(0, 3), 2)), vec![0, 1700, 3200]);
    }
}
