//! Server-wide mutable state shared by every connection: the few atomics Nighthawk's
//! per-request behaviours need, and per-connection totals.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::behaviour::Rng;
use crate::stats::Stats;

/// Keeps each hot atomic on its own cache line so that updating one does not invalidate the
/// other (or the read-mostly data next to it) on every core.
#[repr(align(128))]
#[derive(Debug, Default)]
struct CachePadded<T>(T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[derive(Debug)]
pub(crate) struct ServerState {
    epoch: Instant,
    /// Nanoseconds after `epoch` at which the latest request arrived; 0 before the first.
    last_arrival: CachePadded<AtomicU64>,
    active: CachePadded<AtomicUsize>,
    /// Touched once or twice per connection, never per request.
    totals: CachePadded<Totals>,
    stats: Stats,
    /// Seed of the fault and delay dice when a request gives none: differs per server run.
    seed: u64,
    /// Counts rolls, so each request gets its own random stream.
    draws: CachePadded<AtomicU64>,
}

/// Connection-level counts, reported by [`run`](crate::run) when it returns.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// TCP connections accepted (not those refused over the cap), whatever they then spoke,
    /// if anything: a client's connections opened ahead of its requests among them.
    pub(crate) accepted: AtomicU64,
    pub(crate) http1: AtomicU64,
    pub(crate) http2: AtomicU64,
    pub(crate) http3: AtomicU64,
    pub(crate) tls_handshakes: AtomicU64,
    pub(crate) tls_handshake_failures: AtomicU64,
}

impl Totals {
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ServerTotals {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerTotals {
            accepted_connections: get(&self.accepted),
            http1_connections: get(&self.http1),
            http2_connections: get(&self.http2),
            http3_connections: get(&self.http3),
            tls_handshakes: get(&self.tls_handshakes),
            tls_handshake_failures: get(&self.tls_handshake_failures),
        }
    }
}

/// What a server did over its lifetime, returned by [`run`](crate::run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerTotals {
    /// TCP connections accepted (not those refused over the cap), whether or not they sent
    /// anything.
    pub accepted_connections: u64,
    /// Connections that spoke HTTP/1.1 (over TLS or not).
    pub http1_connections: u64,
    /// Connections that spoke HTTP/2: by ALPN over TLS, by prior knowledge in plaintext.
    pub http2_connections: u64,
    /// QUIC connections that completed their handshake and spoke HTTP/3.
    pub http3_connections: u64,
    /// Completed TLS handshakes, over TCP and QUIC alike.
    pub tls_handshakes: u64,
    /// Handshakes (TCP or QUIC) that failed or timed out; each closed only its own connection.
    pub tls_handshake_failures: u64,
}

impl ServerState {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last_arrival: CachePadded::default(),
            active: CachePadded::default(),
            totals: CachePadded::default(),
            stats: Stats::new(),
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                ^ u64::from(std::process::id()).rotate_left(32),
            draws: CachePadded::default(),
        }
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A fresh random stream for one request; with `seed`, the n-th stream is always the same.
    pub(crate) fn rng(&self, seed: Option<u64>) -> Rng {
        let draw = self.draws.fetch_add(1, Ordering::Relaxed);
        Rng::new(seed.unwrap_or(self.seed), draw)
    }

    /// Records that a request arrived now. With `want_delta`, returns the nanoseconds since the
    /// previous arrival, or `None` for the server's first request (Nighthawk then omits the
    /// header too). Every request must call this, or the next delta would span several.
    pub(crate) fn arrival(&self, want_delta: bool) -> Option<u64> {
        // +1 keeps 0 free to mean "no request yet" even for an arrival at the epoch itself.
        let now =
            u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).saturating_add(1);
        if !want_delta {
            // A plain store is cheaper than a swap and loses nothing: only a request asking
            // for the delta needs the previous value.
            self.last_arrival.store(now, Ordering::Relaxed);
            return None;
        }
        let previous = self.last_arrival.swap(now, Ordering::Relaxed);
        // Another core may have stored a later instant between our clock read and the swap.
        let delta = if previous == 0 { 0 } else { now.saturating_sub(previous) };
        (delta > 0).then_some(delta)
    }

    /// Counts a request as active until the guard drops.
    pub(crate) fn begin_active(&self) -> ActiveGuard<'_> {
        self.active.fetch_add(1, Ordering::Relaxed);
        ActiveGuard(&self.active)
    }

    /// [`ServerState::begin_active`] for a request whose owner is not a scope (an HTTP/2
    /// connection's stream table): [`ServerState::leave_active`] must follow once.
    pub(crate) fn enter_active(&self) {
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn leave_active(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> &Totals {
        &self.totals
    }

    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

pub(crate) struct ActiveGuard<'a>(&'a AtomicUsize);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_arrival_has_no_delta() {
        let s = ServerState::new();
        assert_eq!(s.arrival(true), None);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(s.arrival(true).unwrap() >= 2_000_000);
    }

    #[test]
    fn plain_arrivals_still_move_the_reference() {
        let s = ServerState::new();
        s.arrival(false);
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.arrival(false);
        let delta = s.arrival(true).unwrap();
        assert!(delta < 20_000_000, "{delta}");
    }

    #[test]
    fn active_guard_counts() {
        let s = ServerState::new();
        let a = s.begin_active();
        let b = s.begin_active();
        assert_eq!(s.active(), 2);
        drop(a);
        drop(b);
        assert_eq!(s.active(), 0);
    }
}
