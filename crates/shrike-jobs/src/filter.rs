//! Part of a jobs file: a time window, chosen jobs, jobs (or requests) matching a pattern, a
//! deterministic sample, or one shard of N. Jobs keep their ids and times, so a filtered file
//! lines up with the original.

use std::time::Duration;

use crate::model::{Body, Job, JobProtocol};
use crate::stats;

pub use shrike_spec::Shard;

/// What to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Jobs starting at or after this offset from the first job's start…
    pub from: Option<Duration>,
    /// …and before this one.
    pub to: Option<Duration>,
    /// Job ids (inclusive ranges).
    pub jobs: Vec<(u64, u64)>,
    /// A glob (`*`, `?`) on each request's labels ([`labels`]): what `jobs stats` prints
    /// (`GET /index.html`, `query SELECT`), the same with the query or full text (`GET
    /// /index.html?x=1`, `query SELECT * FROM t`), for HTTP the path alone when the pattern
    /// starts with `/` (`/api/*`), and for TCP the payload as text.
    pub pattern: Option<String>,
    /// Keep only the matching requests (else whole jobs with any match).
    pub match_requests: bool,
    /// Keep this share of jobs (0..=1), chosen by job id and `seed`.
    pub sample: Option<f64>,
    pub seed: u64,
    pub shard: Option<Shard>,
}

impl Filter {
    /// The job as kept (possibly with fewer requests), or `None`. `position` is its place in
    /// the file (0-based) and `origin` the file's first job start.
    pub fn apply(&self, mut job: Job, position: u64, origin: Duration) -> Option<Job> {
        let offset = job.start.saturating_sub(origin);
        if self.from.is_some_and(|f| offset < f) || self.to.is_some_and(|t| offset >= t) {
            return None;
        }
        if !self.jobs.is_empty() && !self.jobs.iter().any(|(a, b)| (*a..=*b).contains(&job.id)) {
            return None;
        }
        if self.shard.is_some_and(|s| !s.holds(position)) {
            return None;
        }
        if let Some(p) = self.sample {
            if unit(job.id ^ self.seed.rotate_left(29)) >= p {
                return None;
            }
        }
        let Some(pattern) = &self.pattern else { return Some(job) };
        let matches =
            |body: &Body| labels(&job, body).iter().any(|l| glob(pattern.as_bytes(), l.as_bytes()));
        if !self.match_requests {
            return job.requests.iter().any(|r| matches(&r.body)).then_some(job);
        }
        let kept: Vec<_> = job.requests.iter().filter(|r| matches(&r.body)).cloned().collect();
        let first = kept.first()?.at;
        // The job now starts with its first kept request.
        job.start += first;
        job.requests = kept
            .into_iter()
            .map(|mut r| {
                r.at -= first;
                r
            })
            .collect();
        Some(job)
    }
}

/// Every label a request answers to, the one language of `jobs stats` and `jobs filter
/// --match`: the label `jobs stats` counts it under, the same with the query (HTTP) or the
/// statement's full text (MySQL), and for HTTP its path with and without the query.
pub fn labels(job: &Job, body: &Body) -> Vec<String> {
    let mut out = vec![stats::key(job, body, false), stats::key(job, body, true)];
    match (job.protocol, body) {
        (JobProtocol::Http, Body::Raw { .. }) => {
            let paths: Vec<String> = out
                .iter()
                .filter_map(|l| l.split_once(' ').map(|(_, path)| path.to_string()))
                .collect();
            out.extend(paths);
        }
        (_, Body::Mysql(c)) => out.push(match c {
            crate::model::MysqlCommand::Query(q) => format!("query {q}"),
            crate::model::MysqlCommand::Prepare { sql, .. } => format!("stmt_prepare {sql}"),
            crate::model::MysqlCommand::InitDb(db) => format!("init_db {db}"),
            other => other.name().to_string(),
        }),
        (_, Body::Raw { data, .. }) => out.push(String::from_utf8_lossy(data).into_owned()),
    }
    out.dedup();
    out
}

/// A uniform value in [0, 1) from `x` (SplitMix64's finalizer): the same job id and seed
/// always fall the same way.
fn unit(x: u64) -> f64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether `text` matches `pattern` whole: `*` is any run of bytes, `?` any one byte.
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it is trying to cover up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` take one more byte and try again.
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Connection, Request};

    #[test]
    fn globs() {
        assert!(glob(b"GET /api/*", b"GET /api/cart?x=1"));
        assert!(glob(b"* /api/*/items", b"POST /api/7/items"));
        assert!(glob(b"?ET *", b"GET /"));
        assert!(!glob(b"GET /api/*", b"POST /api/x"));
        assert!(glob(b"*", b""));
        assert!(!glob(b"a*b", b"acbd"));
        assert!(glob(b"a*b*c", b"aXbYbZc"));
    }

    fn job(id: u64, start_ms: u64, paths: &[&str]) -> Job {
        Job {
            id,
            start: Duration::from_millis(start_ms),
            protocol: JobProtocol::Http,
            connection: Connection::Session,
            server: None,
            login: None,
            connect_ahead: None,
            requests: paths
                .iter()
                .enumerate()
                .map(|(i, p)| Request {
                    at: Duration::from_millis(100 * i as u64),
                    pipelined: false,
                    response: None,
                    body: Body::Raw {
                        data: format!("GET {p} HTTP/1.1\r\n\r\n").into_bytes(),
                        response_bytes: None,
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn windows_ids_patterns_and_requests() {
        let origin = Duration::from_millis(1000);
        let f = Filter {
            from: Some(Duration::from_millis(500)),
            to: Some(Duration::from_secs(2)),
            ..Filter::default()
        };
        assert!(f.apply(job(1, 1200, &["/"]), 0, origin).is_none());
        assert!(f.apply(job(2, 1500, &["/"]), 1, origin).is_some());
        assert!(f.apply(job(3, 3000, &["/"]), 2, origin).is_none());
        let f = Filter { jobs: vec![(2, 4)], ..Filter::default() };
        assert!(
            f.apply(job(1, 0, &["/"]), 0, origin).is_none()
                && f.apply(job(4, 0, &["/"]), 0, origin).is_some()
        );
        let f = Filter { pattern: Some("GET /api/*".into()), ..Filter::default() };
        assert!(f.apply(job(1, 0, &["/", "/home"]), 0, origin).is_none());
        assert_eq!(f.apply(job(1, 0, &["/", "/api/x"]), 0, origin).unwrap().requests.len(), 2);
        let f = Filter {
            pattern: Some("GET /api/*".into()),
            match_requests: true,
            ..Filter::default()
        };
        let kept = f.apply(job(1, 1000, &["/", "/api/x", "/b", "/api/y"]), 0, origin).unwrap();
        assert_eq!(kept.requests.len(), 2);
        assert_eq!(kept.start, Duration::from_millis(1100));
        assert_eq!(kept.requests[1].at, Duration::from_millis(200));
    }

    #[test]
    fn patterns_match_the_labels_jobs_stats_prints() {
        let origin = Duration::ZERO;
        let keeps = |pattern: &str, path: &str| {
            let f = Filter { pattern: Some(pattern.into()), ..Filter::default() };
            f.apply(job(1, 0, &[path]), 0, origin).is_some()
        };
        // `jobs stats` prints `GET /index.html` for `/index.html?v=3`: that label matches it.
        assert!(keeps("GET /index.html", "/index.html?v=3"));
        assert!(keeps("GET /index.html?v=*", "/index.html?v=3"));
        // A pattern that starts with / is the path alone, with or without its query.
        assert!(keeps("/api/*", "/api/items?page=2"));
        assert!(keeps("/index.html", "/index.html?v=3"));
        assert!(!keeps("/api/*", "/static/app.js"));
        assert!(!keeps("POST /index.html", "/index.html"));
    }

    #[test]
    fn samples_are_stable_and_shards_partition() {
        let f = Filter { sample: Some(0.1), seed: 7, ..Filter::default() };
        let kept: Vec<u64> = (1..=10_000)
            .filter(|&id| f.apply(job(id, 0, &["/"]), id, Duration::ZERO).is_some())
            .collect();
        assert!((900..1100).contains(&kept.len()), "{}", kept.len());
        let again: Vec<u64> = (1..=10_000)
            .filter(|&id| f.apply(job(id, 0, &["/"]), id, Duration::ZERO).is_some())
            .collect();
        assert_eq!(kept, again);
        let shards: Vec<Shard> = (0..3).map(|i| Shard::parse(&format!("{i}/3")).unwrap()).collect();
        for pos in 0..30 {
            assert_eq!(shards.iter().filter(|s| s.holds(pos)).count(), 1);
        }
        assert!(
            Shard::parse("3/3").is_err()
                && Shard::parse("4/3").is_err()
                && Shard::parse("x").is_err()
        );
    }
}
