//! The one thing workers share: a stop signal carrying the reason the run ended.

use std::sync::{Arc, Mutex};

use shrike_stats::Termination;
use tokio::sync::Notify;

/// Cloneable across threads. The first stop request wins; later ones are ignored.
#[derive(Clone, Debug, Default)]
pub struct StopHandle {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    reason: Mutex<Option<Termination>>,
    stopped: std::sync::atomic::AtomicBool,
    notify: Notify,
}

impl StopHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every worker to stop. Returns true if this call was the one that stopped the run.
    pub fn request(&self, reason: Termination) -> bool {
        let mut guard = match self.inner.reason.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.is_some() {
            return false;
        }
        *guard = Some(reason);
        self.inner.stopped.store(true, std::sync::atomic::Ordering::Release);
        self.inner.notify.notify_waiters();
        true
    }

    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn reason(&self) -> Option<Termination> {
        match self.inner.reason.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Completes once a stop has been requested (immediately if it already was).
    pub async fn stopped(&self) {
        let notified = self.inner.notify.notified();
        tokio::pin!(notified);
        // Register interest before checking the flag, so a request between the check and the
        // await cannot be missed.
        notified.as_mut().enable();
        if self.is_stopped() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_reason_wins_and_wakes_waiters() {
        let s = StopHandle::new();
        let s2 = s.clone();
        let waiter = tokio::spawn(async move { s2.stopped().await });
        tokio::task::yield_now().await;
        assert!(s.request(Termination::Interrupted));
        assert!(!s.request(Termination::Completed));
        waiter.await.expect("waiter");
        assert_eq!(s.reason(), Some(Termination::Interrupted));
        s.stopped().await; // already stopped: returns at once
    }
}
