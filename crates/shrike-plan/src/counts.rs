//! What the planners count as a failed request, one definition for capacity and sweeps.

use shrike_stats::{Counter, Counters};

/// Requests that failed: 4xx, 5xx and other statuses, timeouts, resets, connection failures
/// and open-loop overflow.
pub(crate) fn failed(c: &Counters) -> u64 {
    [
        Counter::Http4xx,
        Counter::Http5xx,
        Counter::HttpXxx,
        Counter::RqTimeout,
        Counter::StreamResets,
        Counter::PoolConnectionFailure,
        Counter::PoolOverflow,
    ]
    .iter()
    .map(|&k| c.get(k))
    .sum()
}
