//! MySQL as the engine's [`Protocol`], for replaying captured database sessions: each connection logs in
//! as its session's captured user, into its captured database (either overridden by the
//! replay's options), with the replay's password (a capture holds only a scramble of the
//! client's), then runs each fed command as captured, reading every result set to its end. A
//! server error is an answer (the connection stays, as it did for the captured client),
//! tallied by its error code and SQLSTATE class; a broken connection fails the exchange. A
//! captured COM_QUIT is sent as the client sent it, so the server sees a goodbye and not an
//! aborted connection.
//!
//! The client is `mysql_async`, maintained and complete (prepared statements, multiple result
//! sets); its connection does its own TCP connect, so counting and error notes mirror the
//! engine's own connect. Each request's command is its payload's extra (`MysqlCommand`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn as Client, OptsBuilder, Params, Statement, Value};
use shrike_jobs::{Login, MysqlCommand, MysqlValue};
use shrike_stats::Counter;

use shrike_engine::protocol::{
    After, Answer, Endpoint, Failure, FailureClass, Io, OriginLatency, PoolCx, Protocol,
};

/// Who a MySQL replay logs in as, where the options say: a user or database given here
/// overrides each session's captured one. The password is always the replay's (a capture
/// holds only a scramble of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlLogin {
    /// The user every connection logs in as; `None`: its session's captured user (else
    /// [`DEFAULT_USER`]).
    pub user: Option<String>,
    pub password: Option<String>,
    /// The database each connection starts in; `None`: its session's captured one.
    pub database: Option<String>,
}

/// The user a session logs in as when neither the options nor its capture name one.
pub const DEFAULT_USER: &str = "root";

impl MysqlLogin {
    /// The user and database a session captured as `captured` logs in with.
    pub fn for_session(&self, captured: Option<&Login>) -> (String, Option<String>) {
        let user = self.user.clone().or_else(|| captured.map(|l| l.user.clone()));
        let database = self.database.clone().or_else(|| captured.and_then(|l| l.database.clone()));
        (user.unwrap_or_else(|| DEFAULT_USER.into()), database)
    }
}

/// What a replayed MySQL request carries: its command, and its session's captured login (for
/// the connection it opens).
#[derive(Debug)]
pub struct MysqlStep {
    pub command: MysqlCommand,
    pub login: Option<Arc<Login>>,
}

#[derive(Clone, Debug)]
pub struct Mysql {
    login: MysqlLogin,
}

impl Mysql {
    pub fn new(login: MysqlLogin) -> Mysql {
        Mysql { login }
    }
}

pub struct Conn {
    /// `None` once the session said goodbye (COM_QUIT).
    client: Option<Client>,
    /// Prepared statements by the id the captured server gave them.
    statements: HashMap<u32, Statement>,
}

/// Why a MySQL exchange failed (server errors are answers, not failures).
#[derive(Debug, thiserror::Error)]
pub enum MysqlError {
    #[error("MySQL: {0}")]
    Client(mysql_async::Error),
    #[error("the replayed command is missing")]
    Missing,
}

impl Protocol for Mysql {
    type Conn = Conn;
    type Error = MysqlError;
    const CONNECTION_COUNTER: Counter = Counter::CxMysqlTotal;

    async fn connect(&self, cx: &PoolCx, endpoint: &Endpoint, first: Option<u32>) -> Option<Conn> {
        let payload = first.and_then(|r| cx.payload(r));
        let captured = payload.as_ref().and_then(|p| p.extra::<MysqlStep>()?.login.clone());
        let (user, database) = self.login.for_session(captured.as_deref());
        let mut last_err = String::new();
        for addr in &endpoint.target.addrs {
            let opts = OptsBuilder::default()
                .ip_or_hostname(addr.ip().to_string())
                .tcp_port(addr.port())
                .prefer_socket(false)
                .user(Some(user.clone()))
                .pass(self.login.password.clone())
                .db_name(database.clone());
            match tokio::time::timeout(cx.connect_timeout(), Client::new(opts)).await {
                Ok(Ok(client)) => {
                    cx.count(Counter::CxTotal, 1);
                    return Some(Conn { client: Some(client), statements: HashMap::new() });
                }
                Ok(Err(e)) => last_err = format!("MySQL login to {addr}: {e}"),
                Err(_) => {
                    let t = cx.connect_timeout().as_secs_f64();
                    last_err = format!("MySQL login to {addr}: timed out after {t}s");
                }
            }
        }
        cx.count(Counter::CxConnectFail, 1);
        cx.note_error(|| last_err);
        None
    }

    async fn exchange(
        &self,
        cx: &PoolCx,
        conn: &mut Conn,
        request: u32,
        io: &mut Io,
    ) -> Result<Answer, Failure<MysqlError>> {
        // A payload lives until its request finished, so only a bug could make it missing.
        let missing = || Failure { class: FailureClass::Protocol, error: MysqlError::Missing };
        let payload = cx.payload(request).ok_or_else(missing)?;
        let step = payload.extra::<MysqlStep>().ok_or_else(missing)?;
        io.sent = Some(Instant::now());
        if step.command == MysqlCommand::Quit {
            // COM_QUIT has no answer: the server closes. A connection already gone (the
            // server closed it) has nobody left to tell.
            if let Some(client) = conn.client.take() {
                client.disconnect().await.map_err(|e| Failure {
                    class: FailureClass::Broken,
                    error: MysqlError::Client(e),
                })?;
            }
            return Ok(answer(None, After::Ended));
        }
        let error = match run(conn, &step.command).await {
            Ok(rows) => {
                cx.count(Counter::MysqlRows, rows);
                None
            }
            Err(Ran::Server { code, state }) => Some(server_error(code, &state)),
            Err(Ran::Unprepared(id)) => Some(format!(
                "MySQL: statement {id} executed but not prepared in this job (prepared before \
                 the capture began?)"
            )),
            Err(Ran::Broken(e)) => {
                return Err(Failure { class: FailureClass::Broken, error: MysqlError::Client(e) })
            }
        };
        Ok(answer(error, After::Keep))
    }
}

fn answer(error: Option<String>, then: After) -> Answer {
    Answer {
        status: None,
        header_bytes: 0,
        body_bytes: 0,
        origin: OriginLatency::Absent,
        then,
        error,
        more: Vec::new(),
    }
}

/// How a command ran, short of succeeding.
enum Ran {
    /// The server answered with an error packet.
    Server { code: u16, state: String },
    /// An execute of a statement this job never prepared.
    Unprepared(u32),
    /// The connection failed (or the session already quit).
    Broken(mysql_async::Error),
}

impl From<mysql_async::Error> for Ran {
    fn from(e: mysql_async::Error) -> Ran {
        match e {
            mysql_async::Error::Server(s) => Ran::Server { code: s.code, state: s.state },
            e => Ran::Broken(e),
        }
    }
}

/// Runs one command, reading every result set to its end; the rows read.
async fn run(conn: &mut Conn, command: &MysqlCommand) -> Result<u64, Ran> {
    let Some(c) = conn.client.as_mut() else {
        return Err(Ran::Broken(mysql_async::DriverError::ConnectionClosed.into()));
    };
    let mut rows = 0u64;
    match command {
        MysqlCommand::Query(sql) => {
            let mut result = c.query_iter(sql.as_str()).await?;
            while !result.is_empty() {
                result.for_each(|_| rows += 1).await?;
            }
        }
        // COM_INIT_DB has no call of its own in the client; USE is its SQL twin.
        MysqlCommand::InitDb(db) => {
            c.query_drop(format!("USE `{}`", db.replace('`', "``"))).await?
        }
        MysqlCommand::Ping => c.ping().await?,
        MysqlCommand::Prepare { id, sql } => {
            let statement = c.prep(sql.as_str()).await?;
            conn.statements.insert(*id, statement);
        }
        MysqlCommand::Execute { id, params } => {
            let statement = conn.statements.get(id).ok_or(Ran::Unprepared(*id))?;
            let params = match params.is_empty() {
                true => Params::Empty,
                false => Params::Positional(params.iter().map(value).collect()),
            };
            let mut result = c.exec_iter(statement, params).await?;
            while !result.is_empty() {
                result.for_each(|_| rows += 1).await?;
            }
        }
        MysqlCommand::Close { id } => {
            if let Some(statement) = conn.statements.remove(id) {
                c.close(statement).await?;
            }
        }
        MysqlCommand::ResetConnection => {
            c.reset().await?;
            // The server forgot every prepared statement.
            conn.statements.clear();
        }
        // Sent by `exchange` (it ends the connection).
        MysqlCommand::Quit => {}
    }
    Ok(rows)
}

fn value(v: &MysqlValue) -> Value {
    match v {
        MysqlValue::Null => Value::NULL,
        MysqlValue::Int(i) => Value::Int(*i),
        MysqlValue::UInt(u) => Value::UInt(*u),
        MysqlValue::Float(f) => Value::Double(*f),
        MysqlValue::Text(s) => Value::Bytes(s.clone().into_bytes()),
        MysqlValue::Bytes(b) => Value::Bytes(b.clone()),
    }
}

/// The tally key of a server error: its code, SQLSTATE and the state's class, never its
/// message (which names tables and values, and would make every error its own kind).
fn server_error(code: u16, state: &str) -> String {
    let class = match state.get(..2).unwrap_or("") {
        "08" => "connection exception",
        "0A" => "feature not supported",
        "21" => "cardinality violation",
        "22" => "data exception",
        "23" => "integrity constraint violation",
        "25" => "invalid transaction state",
        "28" => "invalid authorization",
        "3D" => "invalid catalog name",
        "40" => "transaction rollback",
        "42" => "syntax error or access rule violation",
        "HY" => "general error",
        _ => "other",
    };
    format!("MySQL error {code} (SQLSTATE {state}: {class})")
}

#[cfg(test)]
mod tests {
    use super::server_error;

    #[test]
    fn errors_are_keyed_by_code_and_class() {
        assert_eq!(
            server_error(1146, "42S02"),
            "MySQL error 1146 (SQLSTATE 42S02: syntax error or access rule violation)"
        );
        assert_eq!(
            server_error(1062, "23000"),
            "MySQL error 1062 (SQLSTATE 23000: integrity constraint violation)"
        );
    }
}
