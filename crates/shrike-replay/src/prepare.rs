//! A replay set up on the engine, one way for every caller (`shrike replay`, the service's
//! `Replay`, the coordinator's generators): the load is a `RunSpec` (target, workers, timeout,
//! outputs), the rest is [`ReplayOptions`], and the jobs come from a [`JobReader`] over a file
//! or a stream.

use serde_json::{json, Map, Value};
use shrike_engine::feed::{AdmissionHandle, FedProtocol, SerialProtocol};
use shrike_engine::{Ready, RunSpec, SpecError};
use shrike_jobs::{JobProtocol, JobReader};

use crate::feeder::{FeedEnd, FeedOptions, FeedProgress, Feeder, Reopen};
use crate::protocols::{Mysql, MysqlLogin, RawTcp, TcpFraming};
use crate::rewrite::Rewrites;
use crate::{Shard, TimeOptions};

/// Sessions queued ahead of their time, over all workers: the feeder stays only this far
/// ahead, and fills this much before the clock starts. Deep enough that a storm of new
/// sessions (10,000 starting within a second) is parsed before its second comes, not during
/// it; a few KiB each, so memory stays bounded whatever the file's size or the workers.
pub const FEED_DEPTH: usize = 16384;

/// The least a worker's channel holds, however many workers share [`FEED_DEPTH`].
const WORKER_DEPTH_MIN: usize = 1024;

/// How to play a jobs file, beyond the load.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    pub time: TimeOptions,
    pub shard: Option<Shard>,
    /// HTTP: send the captured Host header rather than the target's.
    pub keep_host: bool,
    /// HTTP: `--rewrite` rules over the paths and headers sent.
    pub rewrites: Rewrites,
    /// Passes over the file (`--loop`, at least 1): each starts when the one before it had
    /// its last request due. Needs a file it can read again ([`ReadyReplay::reading_again`]).
    pub loops: u32,
    /// TCP: how answers end; `None` takes what the jobs file recorded at import
    /// ([`TcpFraming::of_header`]): the delimiter its messages were split at, or the captured
    /// answer sizes for fixed-length frames.
    pub tcp: Option<TcpFraming>,
    /// MySQL: how each connection logs in.
    pub mysql: MysqlLogin,
    /// HTTP: the canary gate (`--canary-max-differences N`): the whole file is replayed, then
    /// the result fails if more than N answers differed from the captured ones.
    pub canary_max_differences: Option<u64>,
    /// HTTP: replay only the requests to these hosts (`--host` globs).
    pub hosts: Vec<String>,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            time: TimeOptions::default(),
            shard: None,
            keep_host: false,
            rewrites: Rewrites::default(),
            loops: 1,
            tcp: None,
            mysql: MysqlLogin { user: None, password: None, database: None },
            canary_max_differences: None,
            hosts: Vec::new(),
        }
    }
}

impl ReplayOptions {
    /// What the engine speaks for jobs of `protocol`: its own HTTP, or one of replay's.
    pub fn engine_protocol(
        &self,
        protocol: JobProtocol,
        header: &Map<String, Value>,
    ) -> FedProtocol {
        match protocol {
            JobProtocol::Http => FedProtocol::Http,
            JobProtocol::Tcp => {
                FedProtocol::Serial(SerialProtocol::new(RawTcp::new(self.tcp_framing(header))))
            }
            JobProtocol::Mysql => {
                FedProtocol::Serial(SerialProtocol::new(Mysql::new(self.mysql.clone())))
            }
        }
    }

    /// How TCP answers end for a jobs file with `header`: the flags' framing, else the
    /// file's, else a NUL delimiter (`--tcp-delimiter`'s default).
    pub fn tcp_framing(&self, header: &Map<String, Value>) -> TcpFraming {
        self.tcp
            .clone()
            .or_else(|| TcpFraming::of_header(header))
            .unwrap_or_else(|| TcpFraming::Delimiter(vec![0]))
    }

    /// The wire form (for the service). The MySQL password is included: it is what the
    /// generator logs in with. Results record [`record`], which leaves it out.
    pub fn to_json(&self) -> Value {
        json!({
            "time_scale": self.time.scale,
            "max_idle_ns": self.time.max_idle.map(|d| d.as_nanos() as u64),
            "shard": self.shard.map(|s| s.to_string()),
            "keep_host": self.keep_host,
            "rewrite": self.rewrites.texts(),
            "loops": self.loops,
            "tcp": self.tcp.as_ref().map_or(Value::Null, TcpFraming::to_json),
            "mysql_user": self.mysql.user,
            "mysql_password": self.mysql.password,
            "mysql_db": self.mysql.database,
            "canary_max_differences": self.canary_max_differences,
            "hosts": self.hosts,
        })
    }

    /// Refuses to send a file's requests to several hosts at one target: a recording of a
    /// site and its CDN would load the site with the CDN's requests. The file's header names
    /// the hosts its jobs hold (`jobs import` writes them); `--host` picks one.
    pub fn check_hosts(&self, header: &Map<String, Value>) -> Result<(), String> {
        let hosts: Vec<&str> = header
            .get("hosts")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if hosts.len() < 2 || !self.hosts.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the jobs hold requests to {} hosts ({}): one target would get every host's \
             requests; pick one with --host (a glob, e.g. --host '{}')",
            hosts.len(),
            hosts.join(", "),
            hosts[0].split_once("://").map_or(hosts[0], |(_, a)| a)
        ))
    }

    /// Fails `result` if more of its answers differed from the captured ones than the canary
    /// gate allows; a replay that compared nothing passes it, and says so in the reason of
    /// nothing. Called once the whole file is replayed (the gate never stops a replay early).
    pub fn judge_canary(&self, result: &mut shrike_stats::RunResult) {
        let Some(max) = self.canary_max_differences else { return };
        let differed = result.global.counters.get(shrike_stats::Counter::CanaryDiffered);
        if differed > max {
            let matched = result.global.counters.get(shrike_stats::Counter::CanaryMatched);
            result.fail(format!(
                "{differed} of {} compared answers differ from the captured ones, above \
                 --canary-max-differences {max}",
                differed + matched
            ));
        }
    }

    /// Reads [`ReplayOptions::to_json`]'s form back; an error names the field.
    pub fn from_json(v: &Value) -> Result<ReplayOptions, String> {
        let d = ReplayOptions::default();
        let scale = v.get("time_scale").map_or(Some(1.0), Value::as_f64);
        let scale = scale
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or("replay.time_scale: must be a number above 0")?;
        let max_idle = match v.get("max_idle_ns") {
            None | Some(Value::Null) => None,
            Some(n) => Some(std::time::Duration::from_nanos(
                n.as_u64().ok_or("replay.max_idle_ns: must be a whole number")?,
            )),
        };
        let shard = match v.get("shard").and_then(Value::as_str) {
            None => None,
            Some(s) => Some(Shard::parse(s).map_err(|e| format!("replay.shard: {e}"))?),
        };
        let tcp = match v.get("tcp") {
            None | Some(Value::Null) => d.tcp,
            Some(Value::String(s)) if s == "count" => Some(TcpFraming::Count),
            Some(Value::String(s)) if s == "none" => Some(TcpFraming::None),
            Some(t) => {
                let bytes: Option<Vec<u8>> =
                    t.get("delimiter").and_then(Value::as_array).and_then(|a| {
                        a.iter().map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect()
                    });
                match bytes {
                    Some(b) if !b.is_empty() => Some(TcpFraming::Delimiter(b)),
                    _ => {
                        return Err(
                            "replay.tcp: expected \"count\", \"none\" or {\"delimiter\": [bytes]}"
                                .into(),
                        )
                    }
                }
            }
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(ReplayOptions {
            time: TimeOptions { scale, max_idle },
            shard,
            keep_host: v.get("keep_host").and_then(Value::as_bool).unwrap_or(false),
            loops: match v.get("loops") {
                None | Some(Value::Null) => 1,
                Some(n) => n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .ok_or("replay.loops: must be a whole number, at least 1")?,
            },
            rewrites: match v.get("rewrite") {
                None | Some(Value::Null) => Rewrites::default(),
                Some(r) => {
                    let texts: Vec<String> = serde_json::from_value(r.clone())
                        .map_err(|_| "replay.rewrite: must be a list of rules")?;
                    Rewrites::parse(&texts).map_err(|e| format!("replay.rewrite: {e}"))?
                }
            },
            tcp,
            mysql: MysqlLogin {
                user: text("mysql_user").or(d.mysql.user),
                password: text("mysql_password"),
                database: text("mysql_db"),
            },
            hosts: match v.get("hosts") {
                None | Some(Value::Null) => Vec::new(),
                Some(h) => serde_json::from_value(h.clone())
                    .map_err(|_| "replay.hosts: must be a list of host globs")?,
            },
            canary_max_differences: match v.get("canary_max_differences") {
                None | Some(Value::Null) => None,
                Some(n) => Some(
                    n.as_u64().ok_or("replay.canary_max_differences: must be a whole number")?,
                ),
            },
        })
    }
}

/// The protocol a jobs file's header names (its jobs' default), else HTTP.
pub fn protocol_of(reader: &JobReader) -> JobProtocol {
    reader
        .header()
        .get("protocol")
        .and_then(Value::as_str)
        .and_then(JobProtocol::parse)
        .unwrap_or(JobProtocol::Http)
}

/// A replay ready to go: the engine's prepared run, and the feeder to start beside it.
pub struct ReadyReplay {
    pub ready: Ready,
    pub protocol: JobProtocol,
    /// Closing it starts no new job (the first Ctrl-C, a cancelled replay).
    pub admission: AdmissionHandle,
    feeder: (JobReader, shrike_engine::feed::FeedSender, FeedOptions),
    reopen: Option<Reopen>,
}

impl std::fmt::Debug for ReadyReplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyReplay").field("protocol", &self.protocol).finish_non_exhaustive()
    }
}

/// The target URL's path as a prefix for replayed paths: `/prefix/` and `/prefix` give
/// `/prefix`, `/` gives nothing. A query on the target has no place before a path: dropped.
pub fn path_prefix(spec: &RunSpec) -> String {
    let urls = spec.urls();
    let path = urls.first().map_or("/", |u| u.path.as_str());
    let path = path.split('?').next().unwrap_or_default();
    path.trim_end_matches('/').to_string()
}

/// Prepares `spec`'s run to replay `reader`'s jobs as `options` say.
pub fn prepare(
    spec: &RunSpec,
    options: &ReplayOptions,
    reader: JobReader,
) -> Result<ReadyReplay, SpecError> {
    let protocol = protocol_of(&reader);
    let authority = match options.keep_host {
        true => None,
        false => spec.urls().first().map(|u| u.authority.clone()),
    };
    let path_prefix = path_prefix(spec);
    let feed_options = FeedOptions {
        protocol,
        time: options.time,
        shard: options.shard,
        authority,
        path_prefix,
        rewrites: options.rewrites.clone(),
        loops: options.loops,
        hosts: options.hosts.clone(),
    };
    let workers = spec.concurrency().workers().get();
    let depth = (FEED_DEPTH / workers).max(WORKER_DEPTH_MIN);
    let (sender, feed) = shrike_engine::feed::feed(workers, depth);
    let admission = sender.admission();
    let engine_protocol = options.engine_protocol(protocol, reader.header());
    let ready = shrike_engine::Run::new(spec).fed(feed, engine_protocol).prepare()?;
    let feeder = (reader, sender, feed_options);
    Ok(ReadyReplay { ready, protocol, admission, feeder, reopen: None })
}

impl ReadyReplay {
    /// Starts the feeder thread and hands back the run to execute.
    pub fn start(self) -> std::io::Result<(Ready, Feeder)> {
        let (reader, sender, options) = self.feeder;
        let feeder = Feeder::start(reader, self.reopen, sender, options)?;
        Ok((self.ready, feeder))
    }

    /// How the file is read again for `--loop`'s further passes (without it, a replay of a
    /// stream plays one pass).
    pub fn reading_again(mut self, reopen: Reopen) -> ReadyReplay {
        self.reopen = Some(reopen);
        self
    }
}

/// `options.replay` in a result: how the file was played and how much of it (no password).
pub fn record(
    file: &str,
    options: &ReplayOptions,
    protocol: JobProtocol,
    fed: &FeedProgress,
    end: &FeedEnd,
    path_prefix: &str,
) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    json!({
        "file": file,
        "protocol": protocol.name(),
        "path_prefix": match protocol {
            JobProtocol::Http => path_prefix,
            _ => "",
        },
        "time_scale": options.time.scale,
        "max_idle": options.time.max_idle.map(shrike_stats::duration::format_proto),
        "shard": options.shard.map(|s| s.to_string()),
        "keep_host": options.keep_host,
        "rewrite": options.rewrites.texts(),
        // What each rule changed (paths or header values): a rule at 0 never matched.
        "rewrite_matched": options.rewrites.matched().into_iter()
            .map(|(rule, n)| serde_json::json!({"rule": rule, "changed": n}))
            .collect::<Vec<_>>(),
        "loops": options.loops,
        "jobs_read": fed.read.load(Relaxed),
        "jobs": fed.jobs.load(Relaxed),
        "requests": fed.requests.load(Relaxed),
        "jobs_skipped": fed.skipped.load(Relaxed),
        "canary_max_differences": options.canary_max_differences,
        "hosts": options.hosts,
        "requests_to_other_hosts": fed.other_hosts.load(Relaxed),
        "file_complete": end.complete,
        "file_error": end.error.as_ref().map(ToString::to_string),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_travel_and_come_back() {
        let o = ReplayOptions {
            time: TimeOptions {
                scale: 2.5,
                max_idle: Some(std::time::Duration::from_millis(1500)),
            },
            shard: Shard::try_new(1, 3),
            keep_host: true,
            rewrites: Rewrites::parse(&["path:^/a=>/b".into()]).unwrap(),
            loops: 3,
            tcp: Some(TcpFraming::Delimiter(b"\r\n".to_vec())),
            mysql: MysqlLogin {
                user: Some("app".into()),
                password: Some("pw".into()),
                database: Some("shop".into()),
            },
            canary_max_differences: Some(3),
            hosts: vec!["shop.example".into()],
        };
        assert_eq!(ReplayOptions::from_json(&o.to_json()).unwrap(), o);
        for t in [Some(TcpFraming::Count), Some(TcpFraming::None), None] {
            let o = ReplayOptions { tcp: t, ..ReplayOptions::default() };
            assert_eq!(ReplayOptions::from_json(&o.to_json()).unwrap(), o);
        }
        assert!(ReplayOptions::from_json(&json!({"time_scale": 0}))
            .unwrap_err()
            .contains("time_scale"));
        assert!(ReplayOptions::from_json(&json!({"shard": "3/3"})).unwrap_err().contains("shard"));
        assert!(ReplayOptions::from_json(&json!({"tcp": {"delimiter": []}}))
            .unwrap_err()
            .contains("tcp"));
    }
}
