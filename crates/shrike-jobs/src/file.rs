//! The jobs file: JSON Lines, one job per line, ordered by start time, so it streams. It may
//! be zstd-compressed (recognized by its magic number, whatever its name).
//!
//! ```text
//! {"shrike_jobs": 1, "protocol": "http", "source": "capture.pcap"}
//! {"job": 1, "start": 0.0, "connection": "session", "requests": [
//!     {"at": 0.0, "text": "GET / HTTP/1.1\r\nhost: a\r\n\r\n"},
//!     {"at": 0.25, "method": "POST", "path": "/cart", "headers": {"content-type": "text/plain"}, "body": "one"}]}
//! {"job": 2, "start": 0.1, "protocol": "mysql", "requests": [{"at": 0, "command": "query", "text": "SELECT 1"}]}
//! ```
//!
//! - The first line may be a header (`"shrike_jobs": 1`, the format version, and anything
//!   else as information); its `protocol` is every job's default. Blank lines are skipped.
//! - A job: `job` (its id), `start` (seconds from the file's origin, never less than the
//!   previous job's), `protocol` (`http`, `tcp`, `mysql`), `connection` (`session`, the
//!   default: one connection for the job; or `per_request`), `server` (where it went, for
//!   information), `login` (MySQL: `{"user": …, "database": …}`, the captured login, which
//!   replay uses unless told otherwise), `connect_ahead` (seconds before `start` that its
//!   connection opened: the captured SYN, which a replay opens it ahead by) and `requests`.
//! - A request: `at` (seconds from the job's start, never less than the previous request's),
//!   `pipelined` (HTTP: sent before the previous answer came, and replayed so), `response`
//!   (HTTP: the captured answer, `{"status": 200, "body_bytes": 1234}`, the size optional,
//!   which a replay compares its answers with), then its
//!   payload: `text` (UTF-8) or `base64` (anything), with `response_bytes` (the size
//!   of the captured answer) for tcp; for HTTP by hand, `method`, `path`, `headers` (an object
//!   or a list of pairs) and `body` (or `body_base64`), sent as HTTP/1.1 with a content-length;
//!   for MySQL, `command` (`query`, `init_db`, `ping`, `stmt_prepare`, `stmt_execute`,
//!   `stmt_close`, `reset_connection`, `quit`) with `text` (query, init_db, stmt_prepare),
//!   `statement` (the prepared statement's id) and `params` (JSON values; `{"base64": …}`
//!   for bytes).
//!
//! A line that breaks these rules is an error naming its line and field; nothing after a bad
//! line is guessed at.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::model::{
    Body, Captured, Connection, Job, JobProtocol, Login, MysqlCommand, MysqlValue, Request,
};

/// The format version this reads and writes.
pub const VERSION: u64 = 1;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What went wrong reading or writing a jobs file.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// A line that breaks the format: where, which field, and how.
    #[error("{path}:{line}: {field}: {message}")]
    Line { path: String, line: u64, field: String, message: String },
}

impl JobsError {
    /// The line a format error is on.
    pub fn line(&self) -> Option<u64> {
        match self {
            JobsError::Line { line, .. } => Some(*line),
            JobsError::Io { .. } => None,
        }
    }
}

/// The longest line (one job) a jobs file may have, written or read. Without it a line with
/// no end, or a small zstd frame that inflates to one, would grow the reader's buffer without
/// limit; 256 MiB is far past any captured session a replay could hold in memory anyway.
pub const MAX_LINE: usize = 256 << 20;

/// Reads jobs one line at a time: a file of any size needs the memory of one job.
pub struct JobReader {
    name: String,
    reader: Box<dyn BufRead + Send>,
    /// The line being read, kept between lines so blank ones cost no allocation.
    buf: String,
    line: u64,
    /// The header's defaults and information (empty without a header).
    header: Map<String, Value>,
    default_protocol: JobProtocol,
    last_start: Duration,
    /// A job read while looking for the header.
    pending: Option<Result<Job, JobsError>>,
}

impl std::fmt::Debug for JobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobReader").field("name", &self.name).field("line", &self.line).finish()
    }
}

impl JobReader {
    /// Opens `path` (`-` is standard input), decompressing zstd when it starts with its magic.
    pub fn open(path: &Path) -> Result<JobReader, JobsError> {
        let name = path.display().to_string();
        let io = |source| JobsError::Io { path: name.clone(), source };
        let raw: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(std::io::stdin())
        } else {
            Box::new(File::open(path).map_err(io)?)
        };
        JobReader::from_reader(name, raw)
    }

    /// Reads a jobs file's bytes from `raw` (a stream: the service's Replay), decompressing
    /// zstd when it starts with its magic; `name` is how errors refer to it.
    pub fn from_reader(name: String, raw: Box<dyn Read + Send>) -> Result<JobReader, JobsError> {
        let io = |source| JobsError::Io { path: name.clone(), source };
        let mut buffered = BufReader::with_capacity(1 << 16, raw);
        let compressed = buffered.fill_buf().map_err(io)?.starts_with(&ZSTD_MAGIC);
        let reader: Box<dyn BufRead + Send> = if compressed {
            let decoder = zstd::stream::read::Decoder::with_buffer(buffered).map_err(io)?;
            Box::new(BufReader::with_capacity(1 << 16, decoder))
        } else {
            Box::new(buffered)
        };
        JobReader::new(name, reader)
    }

    /// Reads jobs from `reader`; `name` is how errors refer to it.
    pub fn new(name: String, reader: Box<dyn BufRead + Send>) -> Result<JobReader, JobsError> {
        let mut r = JobReader {
            name,
            reader,
            buf: String::new(),
            line: 0,
            header: Map::new(),
            default_protocol: JobProtocol::Http,
            last_start: Duration::ZERO,
            pending: None,
        };
        // The header, if there is one, is the first non-blank line.
        if let Some((n, v)) = r.next_value()? {
            match v.get("shrike_jobs") {
                Some(version) => r.read_header(n, version.clone(), v)?,
                None => r.pending = Some(r.job(n, v)),
            }
        }
        Ok(r)
    }

    /// The header's fields (`shrike_jobs`, `protocol`, `source`, …); empty without a header.
    pub fn header(&self) -> &Map<String, Value> {
        &self.header
    }

    fn read_header(&mut self, n: u64, version: Value, v: Value) -> Result<(), JobsError> {
        if version.as_u64() != Some(VERSION) {
            return Err(self.err(
                n,
                "shrike_jobs",
                format!("version {version} is not {VERSION}, the one this Shrike reads"),
            ));
        }
        let Value::Object(map) = v else { return Ok(()) };
        if let Some(p) = map.get("protocol") {
            self.default_protocol = protocol(p)
                .ok_or_else(|| self.err(n, "protocol", format!("{p} is not http, tcp or mysql")))?;
        }
        self.header = map;
        Ok(())
    }

    fn err(&self, line: u64, field: impl Into<String>, message: impl Into<String>) -> JobsError {
        JobsError::Line {
            path: self.name.clone(),
            line,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The next non-blank line as JSON, with its number.
    fn next_value(&mut self) -> Result<Option<(u64, Value)>, JobsError> {
        loop {
            self.buf.clear();
            let n = (&mut self.reader)
                .take(MAX_LINE as u64 + 1)
                .read_line(&mut self.buf)
                .map_err(|source| JobsError::Io { path: self.name.clone(), source })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            if n > MAX_LINE && !self.buf.ends_with('\n') {
                return Err(self.err(
                    self.line,
                    "(line)",
                    format!("longer than {} MiB, the most a jobs line may be", MAX_LINE >> 20),
                ));
            }
            if self.buf.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&self.buf).map_err(|e| JobsError::Line {
                path: self.name.clone(),
                line: self.line,
                field: "(line)".into(),
                message: format!("not JSON: {e}"),
            })?;
            return Ok(Some((self.line, v)));
        }
    }

    fn job(&mut self, n: u64, v: Value) -> Result<Job, JobsError> {
        let job = parse_job(&v, self.default_protocol).map_err(|(f, m)| self.err(n, f, m))?;
        if job.start < self.last_start {
            return Err(self.err(
                n,
                "start",
                format!(
                    "{}s comes before the previous job's {}s: jobs are ordered by start time \
                     (shrike jobs import writes them so)",
                    job.start.as_secs_f64(),
                    self.last_start.as_secs_f64()
                ),
            ));
        }
        self.last_start = job.start;
        Ok(job)
    }
}

impl Iterator for JobReader {
    type Item = Result<Job, JobsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        match self.next_value() {
            Ok(Some((n, v))) => Some(self.job(n, v)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

type FieldError = (String, String);

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    (field.into(), message.into())
}

fn protocol(v: &Value) -> Option<JobProtocol> {
    v.as_str().and_then(JobProtocol::parse)
}

fn seconds(v: Option<&Value>, field: &str) -> Result<Duration, FieldError> {
    let v = v.ok_or_else(|| bad(field, "missing (seconds, a number)"))?;
    let s = v.as_f64().ok_or_else(|| bad(field, format!("{v} is not a number of seconds")))?;
    if !(0.0..1e12).contains(&s) {
        return Err(bad(field, format!("{s} is not a time ≥ 0")));
    }
    // The format keeps microseconds: round, so what was written reads back exactly.
    Ok(Duration::from_micros((s * 1e6).round() as u64))
}

fn parse_job(v: &Value, default: JobProtocol) -> Result<Job, FieldError> {
    let o = v.as_object().ok_or_else(|| bad("(line)", "a job is a JSON object"))?;
    for k in o.keys() {
        let known = [
            "job",
            "start",
            "protocol",
            "connection",
            "server",
            "login",
            "connect_ahead",
            "requests",
        ];
        if !known.contains(&k.as_str()) {
            return Err(bad(
                k.as_str(),
                "unknown field (a job has job, start, protocol, connection, server, login, \
                 connect_ahead, requests)",
            ));
        }
    }
    let id = o
        .get("job")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("job", "missing (the job's id, a whole number)"))?;
    let start = seconds(o.get("start"), "start")?;
    let protocol = match o.get("protocol") {
        None => default,
        Some(p) => {
            protocol(p).ok_or_else(|| bad("protocol", format!("{p} is not http, tcp or mysql")))?
        }
    };
    let connection = match o.get("connection").map(|c| c.as_str()) {
        None | Some(Some("session")) => Connection::Session,
        Some(Some("per_request")) => Connection::PerRequest,
        Some(_) => return Err(bad("connection", "expected \"session\" or \"per_request\"")),
    };
    let server = match o.get("server") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("server", "expected a string")),
    };
    let login = match o.get("login") {
        None | Some(Value::Null) => None,
        Some(l) => Some(login(l, protocol)?),
    };
    let connect_ahead = match o.get("connect_ahead") {
        None | Some(Value::Null) => None,
        v => Some(seconds(v, "connect_ahead")?),
    };
    let list = o
        .get("requests")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("requests", "missing (a list of requests)"))?;
    let mut requests = Vec::with_capacity(list.len());
    let mut last = Duration::ZERO;
    for (i, r) in list.iter().enumerate() {
        let at = |f: &str| format!("requests[{i}].{f}");
        let req = parse_request(r, protocol).map_err(|(f, m)| (at(&f), m))?;
        if req.at < last {
            return Err(bad(at("at"), "goes back in time: requests are in order"));
        }
        last = req.at;
        requests.push(req);
    }
    if let Some(i) = requests.iter().position(|r| matches!(r.body, Body::Mysql(MysqlCommand::Quit)))
    {
        if i + 1 != requests.len() {
            return Err(bad(
                format!("requests[{i}].command"),
                "quit ends a session: it comes last",
            ));
        }
    }
    Ok(Job { id, start, protocol, connection, server, requests, login, connect_ahead })
}

fn login(v: &Value, protocol: JobProtocol) -> Result<Login, FieldError> {
    if protocol != JobProtocol::Mysql {
        return Err(bad("login", "only MySQL jobs have a login"));
    }
    let expected = || bad("login", "expected {\"user\": …, \"database\": …} (database optional)");
    let o = v.as_object().ok_or_else(expected)?;
    if o.keys().any(|k| k != "user" && k != "database") {
        return Err(expected());
    }
    let user = o.get("user").and_then(Value::as_str).ok_or_else(expected)?.to_string();
    let database = match o.get("database") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(expected()),
    };
    Ok(Login { user, database })
}

fn parse_request(v: &Value, protocol: JobProtocol) -> Result<Request, FieldError> {
    let o = v.as_object().ok_or_else(|| bad("", "a request is a JSON object"))?;
    let at = seconds(o.get("at"), "at")?;
    let text = |k: &str| -> Result<Option<String>, FieldError> {
        match o.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(k, "expected a string")),
        }
    };
    let b64 = |k: &str| -> Result<Option<Vec<u8>>, FieldError> {
        text(k)?
            .map(|s| base64::engine::general_purpose::STANDARD.decode(s.as_bytes()))
            .transpose()
            .map_err(|e| bad(k, format!("not base64: {e}")))
    };
    let body = match protocol {
        JobProtocol::Mysql => Body::Mysql(parse_mysql(o)?),
        _ if protocol == JobProtocol::Http && o.contains_key("method") => {
            Body::Raw { data: http_by_hand(o)?, response_bytes: None }
        }
        _ => {
            let data =
                match (text("text")?, b64("base64")?) {
                    (Some(t), None) => t.into_bytes(),
                    (None, Some(b)) => b,
                    (Some(_), Some(_)) => return Err(bad("text", "give text or base64, not both")),
                    (None, None) => return Err(bad(
                        "text",
                        "missing: a request sends text, base64 (or, over http, method and path)",
                    )),
                };
            let response_bytes = match o.get("response_bytes") {
                None | Some(Value::Null) => None,
                Some(n) => {
                    Some(n.as_u64().ok_or_else(|| bad("response_bytes", "expected a byte count"))?)
                }
            };
            Body::Raw { data, response_bytes }
        }
    };
    let pipelined = match o.get("pipelined") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) if protocol == JobProtocol::Http => true,
        Some(Value::Bool(true)) => {
            return Err(bad("pipelined", "only HTTP requests are pipelined"))
        }
        Some(_) => return Err(bad("pipelined", "expected true or false")),
    };
    let response = match o.get("response") {
        None | Some(Value::Null) => None,
        Some(_) if protocol != JobProtocol::Http => {
            return Err(bad("response", "only HTTP requests have a captured response"))
        }
        Some(r) => Some(captured(r)?),
    };
    Ok(Request { at, body, pipelined, response })
}

fn captured(v: &Value) -> Result<Captured, FieldError> {
    let expected = || bad("response", "expected {\"status\": 200, \"body_bytes\": 1234}");
    let o = v.as_object().ok_or_else(expected)?;
    if o.keys().any(|k| k != "status" && k != "body_bytes") {
        return Err(expected());
    }
    let status = o
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| bad("response.status", "expected an HTTP status (100-999)"))?;
    let body_bytes = match o.get("body_bytes") {
        None | Some(Value::Null) => None,
        Some(n) => {
            Some(n.as_u64().ok_or_else(|| bad("response.body_bytes", "expected a byte count"))?)
        }
    };
    Ok(Captured { status, body_bytes })
}

/// An HTTP/1.1 request from `method`, `path`, `headers` and `body`.
fn http_by_hand(o: &Map<String, Value>) -> Result<Vec<u8>, FieldError> {
    let method = o
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("method", "expected a string"))?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(bad("method", format!("{method:?} is not an HTTP method")));
    }
    let path = match o.get("path") {
        None => "/",
        Some(p) => p.as_str().ok_or_else(|| bad("path", "expected a string"))?,
    };
    if path.is_empty() || path.contains([' ', '\r', '\n']) {
        return Err(bad("path", format!("{path:?} is not a request target")));
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    match o.get("headers") {
        None => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let v =
                    v.as_str().ok_or_else(|| bad(format!("headers.{k}"), "expected a string"))?;
                headers.push((k.clone(), v.to_string()));
            }
        }
        Some(Value::Array(list)) => {
            for (i, pair) in list.iter().enumerate() {
                match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(k), Value::String(v)]) => {
                        headers.push((k.clone(), v.clone()))
                    }
                    _ => return Err(bad(format!("headers[{i}]"), "expected [name, value]")),
                }
            }
        }
        Some(_) => return Err(bad("headers", "expected an object or a list of [name, value]")),
    }
    for (k, v) in &headers {
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(bad("headers", format!("{k:?} is not a header name")));
        }
        if v.contains(['\r', '\n']) {
            return Err(bad(format!("headers.{k}"), "a value holds no line break"));
        }
    }
    let body = match (o.get("body"), o.get("body_base64")) {
        (Some(Value::String(s)), None) => s.clone().into_bytes(),
        (None, Some(Value::String(s))) => base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map_err(|e| bad("body_base64", format!("not base64: {e}")))?,
        (None, None) => Vec::new(),
        (Some(_), Some(_)) => return Err(bad("body", "give body or body_base64, not both")),
        _ => return Err(bad("body", "expected a string")),
    };
    let mut out = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    let has_length = headers.iter().any(|(k, _)| {
        k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
    });
    for (k, v) in &headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if !has_length && (!body.is_empty() || !matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS"))
    {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    Ok(out)
}

fn parse_mysql(o: &Map<String, Value>) -> Result<MysqlCommand, FieldError> {
    let command = o.get("command").and_then(Value::as_str).ok_or_else(|| {
        bad("command", "missing (query, init_db, ping, stmt_prepare, stmt_execute, stmt_close, reset_connection, quit)")
    })?;
    let text = || -> Result<String, FieldError> {
        o.get("text")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad("text", format!("{command} needs its text")))
    };
    let statement = || -> Result<u32, FieldError> {
        o.get("statement")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad("statement", format!("{command} needs the statement's id")))
    };
    Ok(match command {
        "query" => MysqlCommand::Query(text()?),
        "init_db" => MysqlCommand::InitDb(text()?),
        "ping" => MysqlCommand::Ping,
        "stmt_prepare" => MysqlCommand::Prepare { id: statement()?, sql: text()? },
        "stmt_execute" => {
            let params = match o.get("params") {
                None => Vec::new(),
                Some(Value::Array(list)) => list
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        mysql_value(p).ok_or_else(|| {
                            bad(
                                format!("params[{i}]"),
                                "expected null, a number, a string or {\"base64\": …}",
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(bad("params", "expected a list")),
            };
            MysqlCommand::Execute { id: statement()?, params }
        }
        "stmt_close" => MysqlCommand::Close { id: statement()? },
        "reset_connection" => MysqlCommand::ResetConnection,
        "quit" => MysqlCommand::Quit,
        other => {
            return Err(bad("command", format!("{other:?} is not a MySQL command replay runs")))
        }
    })
}

fn mysql_value(v: &Value) -> Option<MysqlValue> {
    Some(match v {
        Value::Null => MysqlValue::Null,
        Value::Bool(b) => MysqlValue::Int(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => MysqlValue::Int(i),
            (None, Some(u), _) => MysqlValue::UInt(u),
            (_, _, Some(f)) => MysqlValue::Float(f),
            _ => return None,
        },
        Value::String(s) => MysqlValue::Text(s.clone()),
        Value::Object(o) if o.len() == 1 => {
            let b = o.get("base64")?.as_str()?;
            MysqlValue::Bytes(base64::engine::general_purpose::STANDARD.decode(b).ok()?)
        }
        _ => return None,
    })
}

/// Writes jobs as they come; `.zst` paths are zstd-compressed. A file is written under a
/// temporary name in its directory and takes its own name only in [`JobWriter::finish`], so
/// no reader (or a later replay) ever sees half a jobs file, a failed import leaves what was
/// there before, and filtering a file onto itself does not truncate its input.
pub struct JobWriter {
    path: PathBuf,
    out: Sink,
    /// The temporary file (`None` for standard output, or once renamed).
    temp: Option<PathBuf>,
    /// The line being written, serialized whole first so one over `MAX_LINE` is never written.
    scratch: Vec<u8>,
    lines: u64,
}

enum Sink {
    Stdout(BufWriter<std::io::Stdout>),
    File(BufWriter<File>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl std::fmt::Debug for JobWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobWriter").field("path", &self.path).finish()
    }
}

impl JobWriter {
    /// Creates `path` (`-` is standard output) and writes the header: the format version,
    /// the default protocol and `info`'s fields (the source, how it was made).
    pub fn create(
        path: &Path,
        protocol: JobProtocol,
        info: Map<String, Value>,
    ) -> Result<JobWriter, JobsError> {
        let io = |source| JobsError::Io { path: path.display().to_string(), source };
        let (out, temp) = if path == Path::new("-") {
            (Sink::Stdout(BufWriter::new(std::io::stdout())), None)
        } else {
            let temp = temp_path(path);
            let file = BufWriter::new(File::create(&temp).map_err(io)?);
            let out = if path.extension().is_some_and(|e| e == "zst") {
                match zstd::stream::write::Encoder::new(file, 3) {
                    Ok(z) => Sink::Zstd(z),
                    Err(e) => {
                        let _ = std::fs::remove_file(&temp);
                        return Err(io(e));
                    }
                }
            } else {
                Sink::File(file)
            };
            (out, Some(temp))
        };
        let mut w =
            JobWriter { path: path.to_path_buf(), out, temp, scratch: Vec::new(), lines: 0 };
        let mut header = Map::new();
        header.insert("shrike_jobs".into(), json!(VERSION));
        header.insert("protocol".into(), json!(protocol.name()));
        header.extend(info);
        w.line(&Value::Object(header))?;
        Ok(w)
    }

    fn line(&mut self, v: &Value) -> Result<(), JobsError> {
        // The path is formatted only for an error: this runs once per job written.
        let io = |path: &Path, source| JobsError::Io { path: path.display().to_string(), source };
        self.lines += 1;
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, v).map_err(|e| io(&self.path, e.into()))?;
        if self.scratch.len() > MAX_LINE {
            let size = self.scratch.len() >> 20;
            self.scratch = Vec::new();
            return Err(JobsError::Line {
                path: self.path.display().to_string(),
                line: self.lines,
                field: "(line)".into(),
                message: format!(
                    "this job is {size} MiB as a line, more than the {} MiB a jobs line may be",
                    MAX_LINE >> 20
                ),
            });
        }
        self.scratch.push(b'\n');
        let w: &mut dyn Write = match &mut self.out {
            Sink::Stdout(w) => w,
            Sink::File(w) => w,
            Sink::Zstd(w) => w,
        };
        w.write_all(&self.scratch).map_err(|e| io(&self.path, e))?;
        if self.scratch.capacity() > 1 << 20 {
            self.scratch = Vec::new(); // one huge job does not keep its buffer for the rest
        }
        Ok(())
    }

    pub fn write(&mut self, job: &Job) -> Result<(), JobsError> {
        self.line(&job_json(job))
    }

    /// Flushes (and ends the compressed stream), makes the file durable and gives it its name:
    /// a file is complete only after this.
    pub fn finish(mut self) -> Result<(), JobsError> {
        let path = self.path.display().to_string();
        let io = |source| JobsError::Io { path: path.clone(), source };
        let stdout = Sink::Stdout(BufWriter::new(std::io::stdout()));
        let file = match std::mem::replace(&mut self.out, stdout) {
            Sink::Stdout(mut w) => return w.flush().map_err(io),
            Sink::File(w) => w.into_inner().map_err(|e| io(e.into_error()))?,
            Sink::Zstd(w) => {
                w.finish().map_err(&io)?.into_inner().map_err(|e| io(e.into_error()))?
            }
        };
        file.sync_all().map_err(&io)?;
        if let Some(temp) = self.temp.take() {
            if let Err(e) = std::fs::rename(&temp, &self.path) {
                let _ = std::fs::remove_file(&temp);
                return Err(io(e));
            }
        }
        Ok(())
    }
}

impl Drop for JobWriter {
    /// Unfinished (an error, an interrupted import): the temporary file goes, and the target
    /// stays as it was.
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// A hidden name beside `path`, in the same directory so the rename is atomic.
fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Seconds, rounded to the microsecond the format keeps.
fn secs(d: Duration) -> Value {
    json!((d.as_micros() as f64) / 1e6)
}

/// A job as its line holds it.
pub fn job_json(job: &Job) -> Value {
    let requests: Vec<Value> = job
        .requests
        .iter()
        .map(|r| {
            let mut o = Map::new();
            o.insert("at".into(), secs(r.at));
            if r.pipelined {
                o.insert("pipelined".into(), json!(true));
            }
            if let Some(c) = &r.response {
                let mut v = json!({"status": c.status});
                if let Some(n) = c.body_bytes {
                    v["body_bytes"] = json!(n);
                }
                o.insert("response".into(), v);
            }
            match &r.body {
                Body::Raw { data, response_bytes } => {
                    match std::str::from_utf8(data) {
                        Ok(t) => o.insert("text".into(), json!(t)),
                        Err(_) => o.insert(
                            "base64".into(),
                            json!(base64::engine::general_purpose::STANDARD.encode(data)),
                        ),
                    };
                    if let Some(n) = response_bytes {
                        o.insert("response_bytes".into(), json!(n));
                    }
                }
                Body::Mysql(c) => mysql_json(c, &mut o),
            }
            Value::Object(o)
        })
        .collect();
    let mut o = Map::new();
    o.insert("job".into(), json!(job.id));
    o.insert("start".into(), secs(job.start));
    o.insert("protocol".into(), json!(job.protocol.name()));
    o.insert("connection".into(), json!(job.connection.name()));
    if let Some(s) = &job.server {
        o.insert("server".into(), json!(s));
    }
    if let Some(l) = &job.login {
        o.insert("login".into(), json!({"user": l.user, "database": l.database}));
    }
    if let Some(d) = job.connect_ahead {
        o.insert("connect_ahead".into(), secs(d));
    }
    o.insert("requests".into(), Value::Array(requests));
    Value::Object(o)
}

fn mysql_json(c: &MysqlCommand, o: &mut Map<String, Value>) {
    o.insert("command".into(), json!(c.name()));
    match c {
        MysqlCommand::Query(t) | MysqlCommand::InitDb(t) => {
            o.insert("text".into(), json!(t));
        }
        MysqlCommand::Prepare { id, sql } => {
            o.insert("statement".into(), json!(id));
            o.insert("text".into(), json!(sql));
        }
        MysqlCommand::Execute { id, params } => {
            o.insert("statement".into(), json!(id));
            let ps: Vec<Value> = params
                .iter()
                .map(|p| match p {
                    MysqlValue::Null => Value::Null,
                    MysqlValue::Int(i) => json!(i),
                    MysqlValue::UInt(u) => json!(u),
                    MysqlValue::Float(f) => json!(f),
                    MysqlValue::Text(s) => json!(s),
                    MysqlValue::Bytes(b) => {
                        json!({"base64": base64::engine::general_purpose::STANDARD.encode(b)})
                    }
                })
                .collect();
            o.insert("params".into(), Value::Array(ps));
        }
        MysqlCommand::Close { id } => {
            o.insert("statement".into(), json!(id));
        }
        MysqlCommand::Ping | MysqlCommand::ResetConnection | MysqlCommand::Quit => {}
    }
}
