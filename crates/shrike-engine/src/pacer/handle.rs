//! Changing a running run's rate from outside it: a fleet's coordinator re-spreads a lost
//! generator's share over the generators left, each of which then sends `N/(N-1)` of its rate.
//!
//! Workers check one counter per release they compute (a relaxed load: nothing on the hot path
//! waits on it). A change scales the rest of the plan from the worker's last release on, so
//! what was planned before stays planned and the new rate starts without a catch-up burst;
//! a run with a total count (`-n`) scales what it has left to send by the same factor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Cloneable across threads; every worker of the run follows it.
#[derive(Clone, Debug, Default)]
pub struct RateHandle {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// How many changes were made: a worker that saw fewer applies the rest.
    changes: AtomicU64,
    factors: Mutex<Vec<f64>>,
}

impl RateHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Multiplies the rate (and a counted run's remaining count) by `factor` from each worker's
    /// next release on. Refuses (false) a factor that is not finite and positive.
    pub fn scale(&self, factor: f64) -> bool {
        if !(factor.is_finite() && factor > 0.0) {
            return false;
        }
        let mut factors = self.inner.factors.lock().unwrap_or_else(|p| p.into_inner());
        factors.push(factor);
        self.inner.changes.store(factors.len() as u64, Ordering::Release);
        true
    }

    /// The product of the changes made since `seen` (then brought up to date), if any.
    #[inline]
    pub(crate) fn since(&self, seen: &mut u64) -> Option<f64> {
        if self.inner.changes.load(Ordering::Relaxed) == *seen {
            return None;
        }
        self.changed_since(seen)
    }

    /// [`RateHandle::since`] once something changed: out of line, so that the check every
    /// release makes stays a load and a compare in the worker loop.
    #[cold]
    #[inline(never)]
    fn changed_since(&self, seen: &mut u64) -> Option<f64> {
        let factors = self.inner.factors.lock().unwrap_or_else(|p| p.into_inner());
        let from = usize::try_from(*seen).unwrap_or(usize::MAX).min(factors.len());
        *seen = factors.len() as u64;
        Some(factors[from..].iter().product())
    }
}

/// A worker's view of the handle: what it has applied so far.
#[derive(Debug, Default)]
pub(crate) struct Follower {
    handle: Option<RateHandle>,
    seen: u64,
}

impl Follower {
    pub(crate) fn new(handle: Option<RateHandle>) -> Follower {
        Follower { handle, seen: 0 }
    }

    /// A change not yet applied: the factor to apply now.
    #[inline]
    pub(crate) fn change(&mut self) -> Option<f64> {
        self.handle.as_ref()?.since(&mut self.seen)
    }

    /// Applies a change not yet applied to `pacer`; the factor, for the caller's count.
    #[inline]
    pub(crate) fn rescale(&mut self, pacer: &mut crate::pacer::Pacer) -> Option<f64> {
        let factor = self.change()?;
        pacer.rescale(factor);
        Some(factor)
    }
}

/// What is left of a `limit` with `issued` spent, once scaled by `factor`: the new limit.
pub(crate) fn scaled_limit(limit: u64, issued: u64, factor: f64) -> u64 {
    if limit == u64::MAX {
        return limit;
    }
    let left = limit.saturating_sub(issued) as f64 * factor;
    issued.saturating_add(left.round() as u64)
}
