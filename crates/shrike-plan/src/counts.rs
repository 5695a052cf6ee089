//! What the planners count, one definition for capacity and sweeps. Server errors and client
//! overflow are kept apart: a request the client never sent because every connection was busy
//! says something about the client's connections, not about the server's failures.

use shrike_stats::{Counter, Counters};

/// Requests the server (or the path to it) failed: 4xx, 5xx and other statuses, protocol
/// error answers, timeouts, resets and connection failures.
pub(crate) fn server_errors(c: &Counters) -> u64 {
    [
        Counter::Http4xx,
        Counter::Http5xx,
        Counter::HttpXxx,
        Counter::AnswerErrors,
        Counter::RqTimeout,
        Counter::StreamResets,
        Counter::PoolConnectionFailure,
    ]
    .iter()
    .map(|&k| c.get(k))
    .sum()
}

/// Requests that were due while every connection was busy, and so never sent (open loop).
pub(crate) fn overflow(c: &Counters) -> u64 {
    c.get(Counter::PoolOverflow)
}

/// Responses that were not errors: 1xx, 2xx, 3xx and protocol answers that were not error
/// packets.
pub(crate) fn successes(c: &Counters) -> u64 {
    let good = [Counter::Http1xx, Counter::Http2xx, Counter::Http3xx, Counter::Answered];
    let good: u64 = good.iter().map(|&k| c.get(k)).sum();
    good.saturating_sub(c.get(Counter::AnswerErrors))
}
