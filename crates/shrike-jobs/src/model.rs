//! The replay model. A job is one client session as it was seen: what it spoke, whether it
//! kept one connection, and its requests, each at an offset from the job's start with the
//! exact bytes (or MySQL command) it sent. Replay plays each job's requests in order, a request
//! waiting for the previous answer, and jobs independently of one another.

use std::time::Duration;

/// What a job speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobProtocol {
    /// HTTP/1.1 requests as captured (replayed over HTTP/1.1, or HTTP/2 where asked).
    Http,
    /// Opaque messages; answers are framed by a delimiter or a byte count at replay.
    Tcp,
    /// MySQL client commands; replay logs in with its own credentials.
    Mysql,
}

impl JobProtocol {
    pub fn name(self) -> &'static str {
        match self {
            JobProtocol::Http => "http",
            JobProtocol::Tcp => "tcp",
            JobProtocol::Mysql => "mysql",
        }
    }

    pub fn parse(s: &str) -> Option<JobProtocol> {
        match s {
            "http" => Some(JobProtocol::Http),
            "tcp" => Some(JobProtocol::Tcp),
            "mysql" => Some(JobProtocol::Mysql),
            _ => None,
        }
    }
}

/// How a job uses connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    /// One connection for the whole job, opened for its first request and closed after its
    /// last: the captured TCP connection.
    Session,
    /// A new connection for every request (a client that did not keep connections alive).
    PerRequest,
}

impl Connection {
    pub fn name(self) -> &'static str {
        match self {
            Connection::Session => "session",
            Connection::PerRequest => "per_request",
        }
    }
}

/// One client session.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Unique within a file; kept by filters so a job can be found again.
    pub id: u64,
    /// When the job starts, from the file's time origin (its first job's first request, for
    /// an import).
    pub start: Duration,
    pub protocol: JobProtocol,
    pub connection: Connection,
    /// Where the captured client sent it (`10.0.0.5:8080`, or a HAR entry's origin), for
    /// reports and filters; replay sends to its own target.
    pub server: Option<String>,
    /// In order; offsets never decrease.
    pub requests: Vec<Request>,
    /// MySQL: who the captured client logged in as (its handshake response), which a replay
    /// logs in as unless told otherwise.
    pub login: Option<Login>,
    /// How long before its start the job's connection opened (the captured client's SYN),
    /// which a replay opens it ahead by; `None` (not captured, or a HAR entry) opens it for
    /// the first request.
    pub connect_ahead: Option<Duration>,
}

/// A captured MySQL login: the user and the database the session started in. The password
/// is not in a capture (only a scramble of it), so replay takes it from its own options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Login {
    pub user: String,
    pub database: Option<String>,
}

impl Job {
    /// When its last request is due, from the file's origin.
    pub fn end(&self) -> Duration {
        self.start + self.requests.last().map_or(Duration::ZERO, |r| r.at)
    }
}

/// One request of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Offset from the job's start.
    pub at: Duration,
    pub body: Body,
    /// HTTP: the client sent it before the previous request's answer came (pipelining); a
    /// replay sends it so too, on the same connection, instead of waiting.
    pub pipelined: bool,
    /// HTTP: what the captured server answered, which a replay compares its answer with (the
    /// canary diff).
    pub response: Option<Captured>,
}

/// A captured HTTP answer: its status, and its body's size where the capture showed it (as
/// the client reads bodies: a content-length's bytes, a chunked body's data, or all bytes to
/// the close).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    pub status: u16,
    pub body_bytes: Option<u64>,
}

/// What a request sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// Bytes exactly as the client sent them (an HTTP request with its headers and body, or a
    /// TCP message with its delimiter). `response_bytes` is how many bytes the captured server
    /// answered, where the capture showed it (a TCP reply's length).
    Raw { data: Vec<u8>, response_bytes: Option<u64> },
    /// A MySQL command.
    Mysql(MysqlCommand),
}

impl Body {
    /// The bytes a raw request sends (empty for MySQL commands).
    pub fn data(&self) -> &[u8] {
        match self {
            Body::Raw { data, .. } => data,
            Body::Mysql(_) => &[],
        }
    }
}

/// The MySQL commands replay runs. Login and authentication are replay's own; prepared
/// statements keep the capture's statement ids so executes find their statement.
#[derive(Clone, Debug, PartialEq)]
pub enum MysqlCommand {
    /// COM_QUERY.
    Query(String),
    /// COM_INIT_DB (`USE db`).
    InitDb(String),
    /// COM_PING.
    Ping,
    /// COM_STMT_PREPARE: the statement the captured server numbered `id`.
    Prepare { id: u32, sql: String },
    /// COM_STMT_EXECUTE of statement `id` with these parameters.
    Execute { id: u32, params: Vec<MysqlValue> },
    /// COM_STMT_CLOSE.
    Close { id: u32 },
    /// COM_RESET_CONNECTION.
    ResetConnection,
    /// COM_QUIT: the client said goodbye before closing (always a session's last command).
    Quit,
}

impl MysqlCommand {
    /// The command's name in the jobs file and in reports.
    pub fn name(&self) -> &'static str {
        match self {
            MysqlCommand::Query(_) => "query",
            MysqlCommand::InitDb(_) => "init_db",
            MysqlCommand::Ping => "ping",
            MysqlCommand::Prepare { .. } => "stmt_prepare",
            MysqlCommand::Execute { .. } => "stmt_execute",
            MysqlCommand::Close { .. } => "stmt_close",
            MysqlCommand::ResetConnection => "reset_connection",
            MysqlCommand::Quit => "quit",
        }
    }
}

/// A prepared statement's parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum MysqlValue {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Text, and anything sent as a string (dates, decimals).
    Text(String),
    Bytes(Vec<u8>),
}
