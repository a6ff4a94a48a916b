//! The file primitives of the metadata quorum's directory: checksummed frames, atomic
//! replacement of small files, and the directory lock.
//!
//! Everything the Raft layer persists goes through these so that a crash at any point
//! leaves either the old or the new content of a file, never a mix: small files are
//! written to `<name>.tmp`, fsynced, renamed over `<name>` and the directory fsynced; the
//! log is a sequence of frames whose torn tail is detected by length and CRC on reopen.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Bytes of a frame header: `[u32 length][u32 crc32c]`, big-endian.
pub(crate) const FRAME_HEADER_BYTES: usize = 8;

/// The largest frame a reader accepts. A Raft entry is one metadata batch (a few KiB);
/// anything near this is a torn or corrupt length, not data.
pub(crate) const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// What went wrong with the quorum's files, naming the file and the operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A system call on a file or the directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done (`open`, `fsync`, `rename`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file that is only ever replaced atomically, or a checksummed frame, holds
    /// something that cannot be what Strata wrote.
    #[error("{} at byte {offset}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Serialising a value Strata owns failed (a bug, not an input problem).
    #[error("encoding {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Another quorum instance (this process or another) holds the directory.
    #[error("{} is locked by another metadata quorum instance", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A writer panicked while holding the log file; its state is unknown.
    #[error("the metadata log file lock is poisoned")]
    Poisoned,
    /// A blocking file task could not be joined (the runtime is shutting down).
    #[error("a blocking file task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// Openraft asked for something that would break the log's invariants.
    #[error("log invariant violated: {0}")]
    Invariant(String),
}

impl StoreError {
    /// An I/O error while doing `op` on `path`.
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> StoreError {
        StoreError::Io { op, path: path.to_path_buf(), source }
    }
}

/// Runs blocking file work off the async worker threads (fsync can take milliseconds).
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await?
}

/// Appends one frame holding `payload` to `out`.
pub(crate) fn encode_frame(out: &mut Vec<u8>, payload: &[u8]) -> Result<(), StoreError> {
    if payload.len() > MAX_FRAME_BYTES {
        return Err(StoreError::Invariant(format!(
            "a {}-byte frame exceeds the {MAX_FRAME_BYTES}-byte maximum",
            payload.len()
        )));
    }
    // The cast cannot truncate: MAX_FRAME_BYTES < u32::MAX.
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// The result of reading one frame at the start of a byte slice.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A complete frame whose checksum matches; `len` counts header and payload.
    Whole { payload: &'a [u8], len: usize },
    /// Nothing left.
    End,
    /// A frame that is cut short or fails its checksum: a write that did not finish.
    Torn { reason: &'static str },
}

/// Reads the frame at the start of `bytes`, trusting its length only as far as the bytes
/// actually present and [`MAX_FRAME_BYTES`].
pub(crate) fn decode_frame(bytes: &[u8]) -> Frame<'_> {
    if bytes.is_empty() {
        return Frame::End;
    }
    let Some((header, rest)) = bytes.split_first_chunk::<FRAME_HEADER_BYTES>() else {
        return Frame::Torn { reason: "frame header cut short" };
    };
    let [l0, l1, l2, l3, c0, c1, c2, c3] = *header;
    let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
    let crc = u32::from_be_bytes([c0, c1, c2, c3]);
    if len > MAX_FRAME_BYTES {
        return Frame::Torn { reason: "frame length beyond the maximum" };
    }
    let Some(payload) = rest.get(..len) else {
        return Frame::Torn { reason: "frame payload cut short" };
    };
    if crc32c::crc32c(payload) != crc {
        return Frame::Torn { reason: "frame checksum mismatch" };
    }
    Frame::Whole { payload, len: FRAME_HEADER_BYTES + len }
}

/// Replaces `dir/name` with `bytes` atomically: a crash leaves the old or the new file.
/// With `durable`, the data and the rename are fsynced before returning; without, the
/// replacement is atomic but may be lost in a crash (for values that are only hints).
pub(crate) fn atomic_write(dir: &Path, name: &str, bytes: &[u8], durable: bool) -> Result<(), StoreError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    file.write_all(bytes).map_err(|e| StoreError::io("write", &tmp, e))?;
    if durable {
        file.sync_all().map_err(|e| StoreError::io("fsync", &tmp, e))?;
    }
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &tmp, e))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads `dir/name`, or `None` if it does not exist.
pub(crate) fn read_optional(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path, e)),
    }
}

/// Removes a leftover `<name>.tmp` of an interrupted [`atomic_write`].
pub(crate) fn remove_stale_tmp(dir: &Path, name: &str) -> Result<(), StoreError> {
    let tmp = dir.join(format!("{name}.tmp"));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {
            tracing::info!(path = %tmp.display(), "removed the leftover of an interrupted write");
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove", &tmp, e)),
    }
}

/// Fsyncs a directory so that renames and creations in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("fsync", dir, e))
}

/// An exclusive `flock` on `<dir>/.lock`, held for as long as any part of a quorum
/// instance (log store, state machine, snapshot builder) may still write to the
/// directory: two instances writing one metadata log would corrupt it.
#[derive(Debug)]
pub(crate) struct DirLock {
    file: Option<File>,
    /// Told when the lock is released, so a shutdown can wait for the last writer.
    released: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Close (and so unlock) before telling anyone the lock is free.
        drop(self.file.take());
        if let Some(tx) = self.released.take() {
            let _ = tx.send(());
        }
    }
}

impl DirLock {
    /// Takes the lock, failing at once if another instance holds it.
    #[cfg(test)]
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock, StoreError> {
        Ok(DirLock::acquire_watched(dir)?.0)
    }

    /// Takes the lock, and returns a receiver that completes once it is released.
    pub(crate) fn acquire_watched(
        dir: &Path,
    ) -> Result<(DirLock, tokio::sync::oneshot::Receiver<()>), StoreError> {
        let path = dir.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                return Err(StoreError::Locked { path });
            }
            return Err(StoreError::io("flock", &path, err));
        }
        // The lock is released when the descriptor is closed (on drop).
        let (tx, rx) = tokio::sync::oneshot::channel();
        Ok((DirLock { file: Some(file), released: Some(tx) }, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_torn_tails_are_detected() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, b"hello").expect("encode");
        encode_frame(&mut buf, b"world!").expect("encode");
        let Frame::Whole { payload, len } = decode_frame(&buf) else { panic!("first frame") };
        assert_eq!(payload, b"hello");
        assert_eq!(decode_frame(&buf[len..]), Frame::Whole { payload: b"world!", len: 14 });
        assert_eq!(decode_frame(&buf[buf.len()..]), Frame::End);
        for cut in 1..14 {
            assert!(matches!(decode_frame(&buf[len..len + cut]), Frame::Torn { .. }), "cut at {cut}");
        }
        let mut flipped = buf.clone();
        flipped[FRAME_HEADER_BYTES] ^= 1;
        assert!(matches!(decode_frame(&flipped), Frame::Torn { reason: "frame checksum mismatch" }));
        let huge = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1];
        assert!(matches!(decode_frame(&huge), Frame::Torn { .. }));
    }

    #[test]
    fn atomic_write_replaces_and_the_lock_is_exclusive() {
        let dir = tempfile::tempdir().expect("tempdir");
        atomic_write(dir.path(), "f", b"one", true).expect("write");
        atomic_write(dir.path(), "f", b"two", false).expect("write");
        assert_eq!(read_optional(dir.path(), "f").expect("read").as_deref(), Some(&b"two"[..]));
        assert!(read_optional(dir.path(), "missing").expect("read").is_none());
        let lock = DirLock::acquire(dir.path()).expect("first lock");
        assert!(matches!(DirLock::acquire(dir.path()), Err(StoreError::Locked { .. })));
        drop(lock);
        DirLock::acquire(dir.path()).expect("lock after release");
    }
}
