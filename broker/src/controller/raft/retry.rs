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
//!
//! The space reserve: the metadata log shares the data disk unless `metadata.log.dir`
//! says otherwise, and the way out of a full data disk is a metadata write (deleting a
//! topic). So the directory keeps `space.reserve`, [`RESERVE_BYTES`] of zeros written
//! while there is room; the first write that fails for want of space removes it and
//! tries again at once, and it is written again once the file system has room for it
//! several times over.

use super::files::{blocking, StoreError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The first pause after a failed write; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between two attempts: how late a write may notice freed space.
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// Bytes kept in reserve for the metadata log: room for about a hundred metadata
/// records (a topic deletion is one), small next to any disk.
pub(crate) const RESERVE_BYTES: usize = 64 << 10;
/// The reserve file's name, inside the quorum's directory.
pub(crate) const RESERVE_FILE: &str = "space.reserve";
/// The reserve is written again only once this many times its size is free.
const REFILL_FACTOR: u64 = 8;

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
    /// The reserve file, if this instance keeps one.
    reserve: Option<std::path::PathBuf>,
    /// The reserve was used (or could not be written) and is to be written again.
    reserve_missing: AtomicBool,
    stop_tx: watch::Sender<bool>,
}

impl Default for WriteRetry {
    /// Retries without a space reserve.
    fn default() -> WriteRetry {
        WriteRetry::new(None)
    }
}

/// Whether `e` is a lack of space (ENOSPC, or a quota: EDQUOT).
fn out_of_space(e: &StoreError) -> bool {
    matches!(e, StoreError::Io { source, .. }
        if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
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
    /// Retries that keep a space reserve in `dir` (see the module doc). Blocking: writes
    /// the reserve now if it is missing and there is room.
    pub(crate) fn with_reserve(dir: &std::path::Path) -> WriteRetry {
        let retry = WriteRetry::new(Some(dir.join(RESERVE_FILE)));
        retry.inner.reserve_missing.store(true, Ordering::Release);
        retry.refill_reserve();
        retry
    }

    fn new(reserve: Option<std::path::PathBuf>) -> WriteRetry {
        let (stop_tx, _) = watch::channel(false);
        WriteRetry {
            inner: Arc::new(Inner {
                failing_since: Mutex::new(None),
                failed_attempts: AtomicU64::new(0),
                logged: AtomicBool::new(false),
                reserve,
                reserve_missing: AtomicBool::new(false),
                stop_tx,
            }),
        }
    }

    /// Removes the reserve to make room; true if there was one to remove.
    fn release_reserve(&self) -> bool {
        let Some(path) = self.inner.reserve.as_ref() else { return false };
        match std::fs::remove_file(path) {
            Ok(()) => {
                self.inner.reserve_missing.store(true, Ordering::Release);
                tracing::warn!(
                    path = %path.display(),
                    bytes = RESERVE_BYTES,
                    "the metadata log's disk is full: using its reserved space"
                );
                true
            }
            Err(_) => false,
        }
    }

    /// Writes the reserve if it is missing and the file system has ample room (blocking;
    /// best effort: a failure leaves it missing, to be tried after a later write).
    fn refill_reserve(&self) {
        let Some(path) = self.inner.reserve.as_ref() else { return };
        if !self.inner.reserve_missing.load(Ordering::Acquire) {
            return;
        }
        let room = path.parent().and_then(crate::replica::write_health::free_bytes).unwrap_or(0);
        if room < RESERVE_BYTES as u64 * REFILL_FACTOR {
            return;
        }
        let written = std::fs::write(path, vec![0u8; RESERVE_BYTES]);
        match written {
            Ok(()) => self.inner.reserve_missing.store(false, Ordering::Release),
            Err(e) => {
                let _ = std::fs::remove_file(path);
                tracing::debug!(error = %e, "cannot write the metadata log's space reserve yet");
            }
        }
    }

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
                    if self.inner.reserve_missing.load(Ordering::Acquire) {
                        let retry = self.clone();
                        let _ = tokio::task::spawn_blocking(move || retry.refill_reserve()).await;
                    }
                    return Ok(value);
                }
                Err(e) if out_of_space(&e) && self.release_reserve() => {}
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
    async fn the_reserve_makes_room_once_and_is_written_again_when_there_is_room() {
        let dir = tempfile::tempdir().expect("tempdir");
        let retry = tokio::task::spawn_blocking({
            let dir = dir.path().to_path_buf();
            move || WriteRetry::with_reserve(&dir)
        })
        .await
        .expect("open");
        let reserve = dir.path().join(RESERVE_FILE);
        assert_eq!(std::fs::metadata(&reserve).expect("reserve").len(), RESERVE_BYTES as u64);
        // A write that fails for want of space until the reserve is gone.
        let probe = reserve.clone();
        let value = retry
            .run("append", move || if probe.exists() { Err(enospc()) } else { Ok(7) })
            .await
            .expect("the reserve made room");
        assert_eq!(value, 7);
        assert!(retry.stalled_for().is_none(), "no stall: the retry was immediate");
        // The next write refills it (the temp dir has room).
        retry.run("append", || Ok(())).await.expect("write");
        assert!(reserve.exists(), "written again");
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
