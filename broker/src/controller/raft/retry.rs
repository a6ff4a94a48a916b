//! Retrying the metadata quorum's durable writes while they fail for an I/O reason (a
//! full disk, most often).
//!
//! openraft 0.9 treats every error its storage returns as fatal: the Raft core stops for
//! good and the node can neither write nor learn metadata until it is restarted. A full
//! disk is not fatal: it comes back when space is freed. So a write that Raft needs
//! durable (a log append, a truncation, the vote, a snapshot) is retried here, with
//! backoff, until it succeeds; meanwhile Raft waits for it, metadata writes through this
//! node time out, and [`WriteRetry::stalled_for`] tells the controller to stop acting as
//! the active one. The first failure of an episode is logged once (what failed, where,
//! and the free space there), and so is the recovery. Errors that retrying cannot cure
//! (an invariant, an encoding bug) are returned at once. [`WriteRetry::stop`] ends a
//! retry on shutdown, so a stuck node can still be stopped.

use super::files::{blocking, StoreError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The first pause after a failed write; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between two attempts: how late a write may notice freed space.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// The retry state shared by the log store, the state machine and the quorum handle.
#[derive(Debug, Clone)]
pub(crate) struct WriteRetry {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Since when writes have been failing; `None` while they succeed.
    failing_since: Mutex<Option<Instant>>,
    /// Failed attempts in the current episode.
    failed_attempts: AtomicU64,
    /// The current episode has been logged.
    logged: AtomicBool,
    stop_tx: watch::Sender<bool>,
}

impl Default for WriteRetry {
    fn default() -> WriteRetry {
        let (stop_tx, _) = watch::channel(false);
        WriteRetry {
            inner: Arc::new(Inner {
                failing_since: Mutex::new(None),
                failed_attempts: AtomicU64::new(0),
                logged: AtomicBool::new(false),
                stop_tx,
            }),
        }
    }
}

/// Whether retrying can cure `e`: an I/O error can (space freed, the disk back); the
/// others are bugs or corruption, which another attempt would only repeat.
fn retriable(e: &StoreError) -> bool {
    match e {
        StoreError::Io { .. } => true,
        StoreError::Corrupt { .. }
        | StoreError::Encode { .. }
        | StoreError::Locked { .. }
        | StoreError::Poisoned
        | StoreError::Join(_)
        | StoreError::Invariant(_) => false,
    }
}

impl WriteRetry {
    /// Runs the blocking `op` (named `what` in the log) until it succeeds, retrying I/O
    /// failures with backoff until [`WriteRetry::stop`]. `op` must be safe to repeat
    /// after a failure (every write here leaves the file as it was when it fails).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        what: &'static str,
        op: impl Fn() -> Result<T, StoreError> + Send + Sync + 'static,
    ) -> Result<T, StoreError> {
        let op = Arc::new(op);
        let mut stop = self.inner.stop_tx.subscribe();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let attempt = op.clone();
            match blocking(move || attempt()).await {
                Ok(value) => {
                    self.succeeded();
                    return Ok(value);
                }
                Err(e) if retriable(&e) && !*stop.borrow() => {
                    self.failed(what, &e);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.wait_for(|stopping| *stopping) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// How long writes have been failing, if they are.
    pub(crate) fn stalled_for(&self) -> Option<Duration> {
        self.inner.failing_since.lock().unwrap_or_else(PoisonError::into_inner).map(|since| since.elapsed())
    }

    /// Ends every retry in progress and refuses further ones (the quorum is shutting
    /// down): the pending write fails, which stops the Raft core.
    pub(crate) fn stop(&self) {
        self.inner.stop_tx.send_replace(true);
    }

    fn failed(&self, what: &'static str, e: &StoreError) {
        let attempts = self.inner.failed_attempts.fetch_add(1, Ordering::AcqRel) + 1;
        self.inner
            .failing_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        if self.inner.logged.swap(true, Ordering::AcqRel) {
            return;
        }
        let free = match e {
            StoreError::Io { path, .. } => {
                path.parent().and_then(crate::replica::write_health::free_bytes).map_or(-1, |b| b as i64)
            }
            _ => -1,
        };
        tracing::error!(
            op = what,
            error = %e,
            free_bytes = free,
            attempts,
            "cannot write the metadata log: retrying until it succeeds; metadata changes through \
             this node wait meanwhile and it does not act as the active controller"
        );
    }

    fn succeeded(&self) {
        let since = self.inner.failing_since.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(since) = since {
            let attempts = self.inner.failed_attempts.swap(0, Ordering::AcqRel);
            self.inner.logged.store(false, Ordering::Release);
            tracing::info!(
                failed_attempts = attempts,
                stalled_ms = since.elapsed().as_millis() as u64,
                "writes to the metadata log succeed again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn enospc() -> StoreError {
        StoreError::io("append", std::path::Path::new("/x/raft.log"), std::io::Error::from_raw_os_error(28))
    }

    #[tokio::test]
    async fn io_failures_are_retried_until_they_succeed_and_the_stall_is_visible() {
        let retry = WriteRetry::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let (seen, probe) = (calls.clone(), retry.clone());
        let watcher = tokio::spawn(async move {
            while probe.stalled_for().is_none() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let value = retry
            .run("append", move || match seen.fetch_add(1, Ordering::SeqCst) {
                0..=3 => Err(enospc()),
                n => Ok(n),
            })
            .await
            .expect("succeeds once the disk is back");
        assert_eq!(value, 4);
        watcher.await.expect("the stall was visible while retrying");
        assert!(retry.stalled_for().is_none(), "healthy again");
        assert_eq!(retry.inner.failed_attempts.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn other_errors_are_returned_at_once_and_stop_ends_a_retry() {
        let retry = WriteRetry::default();
        let err = retry.run("append", || -> Result<(), _> { Err(StoreError::Invariant("gap".into())) }).await;
        assert!(matches!(err, Err(StoreError::Invariant(_))));

        let stopper = retry.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stopper.stop();
        });
        let err = tokio::time::timeout(
            Duration::from_secs(5),
            retry.run("append", || -> Result<(), _> { Err(enospc()) }),
        )
        .await
        .expect("stop ends the retry");
        assert!(matches!(err, Err(StoreError::Io { .. })));
    }
}
