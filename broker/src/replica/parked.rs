//! The fetches parked on one partition, each by a weak reference to its own `Notify`.
//! Registration drops dead entries once the list has doubled since the last prune, so
//! consumers long-polling a partition nobody writes to cannot grow it without bound.

use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Entries a partition's parked list may reach before dead ones are pruned.
pub(super) const PARKED_PRUNE_MIN: usize = 16;

/// Parked fetches of one partition.
#[derive(Debug, Default)]
pub(super) struct ParkedFetches {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    waiters: Vec<Weak<Notify>>,
    prune_at: usize,
}

impl ParkedFetches {
    /// Asks to be woken by the next wake-up. `notify_one` keeps a permit, so a wake-up
    /// between this call and the wait is not lost.
    pub(super) fn park(&self, waker: &Arc<Notify>) {
        let mut parked = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if parked.waiters.len() >= parked.prune_at.max(PARKED_PRUNE_MIN) {
            parked.waiters.retain(|w| w.strong_count() > 0);
            parked.prune_at = 2 * parked.waiters.len();
        }
        let weak = Arc::downgrade(waker);
        // A fetch woken by another of its partitions parks here again: once is enough.
        if !parked.waiters.iter().rev().take(8).any(|w| w.ptr_eq(&weak)) {
            parked.waiters.push(weak);
        }
    }

    /// Wakes every parked fetch (they re-read and park again if they still want more).
    pub(super) fn wake_all(&self) {
        let waiters = {
            let mut parked = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if parked.waiters.is_empty() {
                return;
            }
            parked.prune_at = 0;
            std::mem::take(&mut parked.waiters)
        };
        for waker in waiters.iter().filter_map(Weak::upgrade) {
            waker.notify_one();
        }
    }

    /// Registered entries (live or not yet pruned), for tests.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).waiters.len()
    }
}
