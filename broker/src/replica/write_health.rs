//! Makes failing writes visible: an append that fails for an I/O reason (a full disk,
//! most often) is answered with KAFKA_STORAGE_ERROR and the producer retries, so
//! without a log line an operator sees only producers timing out. Each partition logs
//! the first failure with its directory and the free space there, again at most once a
//! minute while writes keep failing, and one line when a write succeeds again.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use strata_storage::StorageError;

/// While writes keep failing, a partition repeats its error this often.
const REPEAT_MS: i64 = 60_000;

/// Whether a partition's last write failed, and when that was last logged.
#[derive(Debug, Default)]
pub struct WriteHealth {
    failing: AtomicBool,
    last_logged_ms: AtomicI64,
    /// Failed writes since the last success (reported with the next log line).
    failures: AtomicI64,
}

impl WriteHealth {
    /// A write succeeded (one relaxed load unless writes had been failing).
    pub fn succeeded(&self, topic: &str, partition: i32, dir: &Path) {
        if self.failing.load(Ordering::Relaxed) && self.failing.swap(false, Ordering::AcqRel) {
            let failed = self.failures.swap(0, Ordering::AcqRel);
            tracing::info!(
                topic,
                partition,
                dir = %dir.display(),
                failed_writes = failed,
                "writes to the log succeed again"
            );
        }
    }

    /// A write failed with `error`; logs it if it is an I/O failure and the first one
    /// or a minute after the last line.
    pub fn failed(&self, topic: &str, partition: i32, dir: &Path, error: &StorageError, now_ms: i64) {
        if !matches!(error, StorageError::Io { .. }) {
            return;
        }
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        let first = !self.failing.swap(true, Ordering::AcqRel);
        let last = self.last_logged_ms.load(Ordering::Acquire);
        if !first && now_ms - last < REPEAT_MS {
            return;
        }
        if self.last_logged_ms.compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let free = free_bytes(dir);
        tracing::error!(
            topic,
            partition,
            dir = %dir.display(),
            free_bytes = free.map_or(-1, |b| b as i64),
            failed_writes = failures,
            error = %error,
            "cannot write to the log: appends are answered with KAFKA_STORAGE_ERROR until space or the disk comes back"
        );
    }
}

/// Bytes available to unprivileged writers on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    volume_bytes(dir).ok().map(|v| v.usable_bytes)
}

/// The size of the file system (volume) holding a directory and what is left of it,
/// as Java's `FileStore.getTotalSpace` / `getUsableSpace` give them to Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeBytes {
    /// Size of the volume (`f_blocks * f_frsize`).
    pub total_bytes: u64,
    /// Bytes unprivileged writers may still use (`f_bavail * f_frsize`).
    pub usable_bytes: u64,
}

/// `statvfs` of the file system holding `dir`; fails if `dir` is gone or unreadable.
pub fn volume_bytes(dir: &Path) -> std::io::Result<VolumeBytes> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `st` a struct we own.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok(VolumeBytes {
        total_bytes: (st.f_blocks as u64).saturating_mul(frsize),
        usable_bytes: (st.f_bavail as u64).saturating_mul(frsize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_storage::IoOp;

    fn io_error() -> StorageError {
        StorageError::Io {
            op: IoOp::Append,
            path: "/x".into(),
            position: 0,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }
    }

    #[test]
    fn the_first_failure_is_logged_then_once_a_minute_and_recovery_once() {
        let h = WriteHealth::default();
        let dir = Path::new("/");
        h.failed("t", 0, dir, &io_error(), 1_000);
        assert_eq!(h.last_logged_ms.load(Ordering::Relaxed), 1_000);
        h.failed("t", 0, dir, &io_error(), 2_000);
        assert_eq!(h.last_logged_ms.load(Ordering::Relaxed), 1_000, "not again within a minute");
        h.failed("t", 0, dir, &io_error(), 61_000);
        assert_eq!(h.last_logged_ms.load(Ordering::Relaxed), 61_000);
        assert_eq!(h.failures.load(Ordering::Relaxed), 3);
        h.succeeded("t", 0, dir);
        assert!(!h.failing.load(Ordering::Relaxed));
        assert_eq!(h.failures.load(Ordering::Relaxed), 0);
        h.failed("t", 0, dir, &io_error(), 62_000);
        assert_eq!(h.last_logged_ms.load(Ordering::Relaxed), 62_000, "a new episode logs at once");
    }

    #[test]
    fn free_space_is_read_from_the_file_system() {
        assert!(free_bytes(Path::new("/")).is_some());
        assert!(free_bytes(Path::new("/no/such/dir")).is_none());
    }
}
