//! What a jobs file holds, in one pass with bounded memory (a file of many GB needs the memory
//! of one job plus the tables below): duration, jobs, requests and bytes; the peak of
//! concurrent jobs (Apiary's count-concurrent-jobs) and when it happened; requests over time;
//! and requests by method and path (HTTP), by command (MySQL) or by server (TCP).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Duration;

use crate::model::{Body, Job, JobProtocol, MysqlCommand};

/// Distinct keys the per-path table keeps; the rest are counted together.
const MAX_KEYS: usize = 10_000;
/// Requests over time are counted in slots this wide, then shown in wider buckets.
const SLOT: Duration = Duration::from_millis(10);
/// Past this many slots (a file over a day long), slots become a second wide.
const MAX_SLOTS: usize = 10_000_000;

/// A key's share of requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyCount {
    pub requests: u64,
    pub bytes: u64,
}

#[derive(Debug)]
pub struct Stats {
    pub jobs: u64,
    pub requests: u64,
    pub bytes: u64,
    pub first_start: Option<Duration>,
    /// The latest time a request is due.
    pub end: Duration,
    pub by_protocol: BTreeMap<&'static str, u64>,
    pub by_connection: BTreeMap<&'static str, u64>,
    pub peak_jobs: u64,
    /// When the peak was first reached.
    pub peak_at: Duration,
    /// Requests by key (method and path, command, or server).
    pub keys: HashMap<String, KeyCount>,
    /// Requests in keys beyond [`MAX_KEYS`].
    pub other: KeyCount,
    slots: Vec<u64>,
    slot: Duration,
    running: BinaryHeap<Reverse<Duration>>,
    keep_query: bool,
}

impl Stats {
    pub fn new(keep_query: bool) -> Stats {
        Stats {
            jobs: 0,
            requests: 0,
            bytes: 0,
            first_start: None,
            end: Duration::ZERO,
            by_protocol: BTreeMap::new(),
            by_connection: BTreeMap::new(),
            peak_jobs: 0,
            peak_at: Duration::ZERO,
            keys: HashMap::new(),
            other: KeyCount::default(),
            slots: Vec::new(),
            slot: SLOT,
            running: BinaryHeap::new(),
            keep_query,
        }
    }

    /// Counts one job (jobs come in start order, as files hold them).
    pub fn add(&mut self, job: &Job) {
        self.jobs += 1;
        self.first_start.get_or_insert(job.start);
        self.end = self.end.max(job.end());
        *self.by_protocol.entry(job.protocol.name()).or_default() += 1;
        *self.by_connection.entry(job.connection.name()).or_default() += 1;
        // Running from its start to its last request: jobs that ended before this one
        // started no longer count.
        while self.running.peek().is_some_and(|Reverse(end)| *end < job.start) {
            self.running.pop();
        }
        self.running.push(Reverse(job.end()));
        if self.running.len() as u64 > self.peak_jobs {
            self.peak_jobs = self.running.len() as u64;
            self.peak_at = job.start;
        }
        for r in &job.requests {
            let bytes = match &r.body {
                Body::Raw { data, .. } => data.len() as u64,
                Body::Mysql(c) => mysql_bytes(c),
            };
            self.requests += 1;
            self.bytes += bytes;
            self.count_at(job.start + r.at);
            let key = key(job, &r.body, self.keep_query);
            let slot = if self.keys.len() < MAX_KEYS || self.keys.contains_key(&key) {
                self.keys.entry(key).or_default()
            } else {
                &mut self.other
            };
            slot.requests += 1;
            slot.bytes += bytes;
        }
    }

    fn count_at(&mut self, t: Duration) {
        let origin = self.first_start.unwrap_or_default();
        let mut i = (t.saturating_sub(origin).as_nanos() / self.slot.as_nanos()) as usize;
        if i >= MAX_SLOTS && self.slot == SLOT {
            // Coarser slots: a hundred of the old in one.
            let ratio = (Duration::from_secs(1).as_nanos() / SLOT.as_nanos()) as usize;
            let coarse: Vec<u64> = self.slots.chunks(ratio).map(|c| c.iter().sum()).collect();
            self.slots = coarse;
            self.slot = Duration::from_secs(1);
            i /= ratio;
        }
        if i >= self.slots.len() {
            self.slots.resize(i + 1, 0);
        }
        self.slots[i] += 1;
    }

    /// From the first job's start to the last request's time.
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.first_start.unwrap_or_default())
    }

    /// The width of the rate buckets: `want` (rounded to the slot), else a round width that
    /// gives 20 to 60 rows.
    pub fn bucket(&self, want: Option<Duration>) -> Duration {
        if let Some(w) = want {
            let n = (w.as_nanos() / self.slot.as_nanos()).max(1) as u32;
            return self.slot * n;
        }
        const NICE_MS: [u64; 20] = [
            10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
            120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000,
        ];
        let d = self.duration().as_millis() as u64;
        let w = NICE_MS.iter().copied().find(|w| d / w <= 60).unwrap_or(7_200_000);
        Duration::from_millis(w).max(self.slot)
    }

    /// Requests per bucket of `width` (a multiple of the slot), from the first job's start.
    pub fn rate(&self, width: Duration) -> Vec<u64> {
        let per = (width.as_nanos() / self.slot.as_nanos()).max(1) as usize;
        self.slots.chunks(per).map(|c| c.iter().sum()).collect()
    }

    /// The keys with the most requests, most first.
    pub fn top(&self, n: usize) -> Vec<(&str, &KeyCount)> {
        let mut all: Vec<(&str, &KeyCount)> =
            self.keys.iter().map(|(k, v)| (k.as_str(), v)).collect();
        all.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(b.0)));
        all.truncate(n);
        all
    }
}

/// What a request is counted under.
pub fn key(job: &Job, body: &Body, keep_query: bool) -> String {
    match (job.protocol, body) {
        (JobProtocol::Http, Body::Raw { data, .. }) => request_line(data, keep_query),
        (_, Body::Mysql(c)) => mysql_key(c),
        (_, _) => job.server.clone().unwrap_or_else(|| "(unknown server)".into()),
    }
}

/// `GET /path` from an HTTP request (the query left out unless asked).
pub fn request_line(data: &[u8], keep_query: bool) -> String {
    let line = data.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return "(not HTTP)".into();
    };
    let target = if keep_query { target } else { target.split('?').next().unwrap_or(target) };
    format!("{method} {target}")
}

fn mysql_key(c: &MysqlCommand) -> String {
    match c {
        MysqlCommand::Query(q) => {
            let word: String =
                q.trim_start().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            format!("query {}", word.to_ascii_uppercase())
        }
        other => other.name().to_string(),
    }
}

fn mysql_bytes(c: &MysqlCommand) -> u64 {
    match c {
        MysqlCommand::Query(t) | MysqlCommand::InitDb(t) => t.len() as u64,
        MysqlCommand::Prepare { sql, .. } => sql.len() as u64,
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Connection, Request};

    fn job(start_ms: u64, ats_ms: &[u64], path: &str) -> Job {
        Job {
            id: start_ms,
            start: Duration::from_millis(start_ms),
            protocol: JobProtocol::Http,
            connection: Connection::Session,
            server: None,
            login: None,
            connect_ahead: None,
            requests: ats_ms
                .iter()
                .map(|&a| Request {
                    at: Duration::from_millis(a),
                    pipelined: false,
                    response: None,
                    body: Body::Raw {
                        data: format!("GET {path}?q=1 HTTP/1.1\r\n\r\n").into_bytes(),
                        response_bytes: None,
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn peak_concurrency_rate_and_paths() {
        let mut s = Stats::new(false);
        // Jobs running: [0,1000], [100,300], [200,1500], [1200,1300], [2000,2000].
        for j in [
            job(0, &[0, 1000], "/a"),
            job(100, &[0, 200], "/a"),
            job(200, &[0, 1300], "/b"),
            job(1200, &[0, 100], "/c"),
            job(2000, &[0], "/a"),
        ] {
            s.add(&j);
        }
        assert_eq!((s.jobs, s.requests), (5, 9));
        assert_eq!(s.peak_jobs, 3);
        assert_eq!(s.peak_at, Duration::from_millis(200));
        assert_eq!(s.duration(), Duration::from_millis(2000));
        assert_eq!(s.bucket(None), Duration::from_millis(50));
        let per_second = s.rate(Duration::from_secs(1));
        assert_eq!(per_second, vec![4, 4, 1]);
        let top = s.top(2);
        assert_eq!(top[0], ("GET /a", &KeyCount { requests: 5, bytes: 5 * 23 }));
        assert_eq!(top[1].0, "GET /b");
        let mut q = Stats::new(true);
        q.add(&job(0, &[0], "/a"));
        assert_eq!(q.top(1)[0].0, "GET /a?q=1");
    }
}
