//! Why a run got no successful response, and what to do about it: read from its counters
//! (which say what kind of failure it was) and its error summary (which says it in the
//! engine's own words, with the address). Capacity's NO ANSWER and a failed sweep point both
//! say it, so a refused connection never reads as "start lower".

use std::fmt;

use shrike_stats::{Counter, RunResult};

/// What kind of failure left a run without a successful response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    /// No connection could be made: nothing listens there (refused, unreachable).
    Connect,
    /// Connections were attempted and none was accepted within the timeout.
    ConnectTimeout,
    /// Connections were made and the TLS (or ALPN) handshake failed.
    Tls,
    /// Requests were sent and none was answered within the timeout.
    Timeouts,
    /// Every answer was an error status (4xx, 5xx) or an error packet.
    ErrorStatus,
    /// Connections were reset or closed before any answer.
    Other,
}

/// Why a run got no successful response: the kind, and the run's most frequent error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub kind: CauseKind,
    /// The run's most frequent error message (`connect to 127.0.0.1:9: Connection refused`),
    /// or for error statuses which ones.
    pub detail: String,
}

impl Cause {
    /// Why `result` had no successful response; `None` when it had one, or sent nothing.
    pub fn of(result: &RunResult) -> Option<Cause> {
        let c = &result.global.counters;
        if crate::counts::successes(c) > 0 {
            return None;
        }
        let tried = c.get(Counter::RqTotal) + c.get(Counter::PoolConnectionFailure);
        let failed_connects = c.get(Counter::CxConnectFail);
        if tried == 0 && failed_connects == 0 {
            return None;
        }
        let connected = c.get(Counter::CxTotal) > failed_connects;
        let kind = if c.responses() > 0 {
            CauseKind::ErrorStatus
        } else if c.get(Counter::CxProtocolError) > 0 {
            CauseKind::Tls
        } else if !connected && c.get(Counter::CxConnectTimeout) > 0 {
            CauseKind::ConnectTimeout
        } else if !connected && failed_connects > 0 {
            CauseKind::Connect
        } else if c.get(Counter::RqTimeout) > 0 {
            CauseKind::Timeouts
        } else {
            CauseKind::Other
        };
        let detail = match kind {
            CauseKind::ErrorStatus if result.global.status_codes.total() > 0 => {
                let codes: Vec<String> = result
                    .global
                    .status_codes
                    .non_zero()
                    .into_iter()
                    .map(|(code, n)| format!("{n}× {code}"))
                    .collect();
                format!("every response was an error status ({})", codes.join(", "))
            }
            _ => most_frequent(result)
                .unwrap_or_else(|| "no response (the error was not recorded)".into()),
        };
        Some(Cause { kind, detail })
    }

    /// What to do about it, in a few words.
    pub fn advice(&self) -> &'static str {
        match self.kind {
            CauseKind::Connect => "is the server running, and is the URL's address right?",
            CauseKind::ConnectTimeout => {
                "nothing accepted a connection: check the address, a firewall, or --timeout"
            }
            CauseKind::Tls => "check the URL's scheme (http or https) and the TLS flags",
            CauseKind::Timeouts => {
                "the server answered nothing within --timeout: it is stalled or far over its \
                 capacity at this load; start lower or give a longer --timeout"
            }
            CauseKind::ErrorStatus => {
                "the server refuses these requests: check the URL, method \
                 and headers with one request (curl) first"
            }
            CauseKind::Other => "see the errors in the run's result",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.advice())
    }
}

fn most_frequent(result: &RunResult) -> Option<String> {
    let mut errors: Vec<(&String, &u64)> = result.errors.iter().collect();
    errors.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    errors.first().map(|(m, _)| (*m).clone())
}
