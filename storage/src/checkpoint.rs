//! Small durable files: the per-partition log start offset checkpoint, and the atomic
//! replace that every checkpoint file of a partition (cleaner, leader epochs) goes through.
//!
//! Kafka keeps one `log-start-offset-checkpoint` per log dir; Strata keeps one per
//! partition directory so that a log owns all of its state and no cross-partition lock is
//! needed. The format mirrors Kafka's checkpoint files: a version line, then the value.
//! Writes go to a temporary file that is fsynced and renamed over the old one.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::error::{IoOp, Result, StorageError};

/// File name of the log start offset checkpoint inside a partition directory.
pub(crate) const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
const VERSION: &str = "0";

/// Reads the checkpoint; `None` if it is missing or unreadable (then the first segment's
/// base offset is the log start offset, which is always safe).
pub(crate) fn read_log_start_offset(dir: &Path) -> Option<i64> {
    let path = dir.join(LOG_START_OFFSET_FILE);
    read_offset_file(&path).unwrap_or_else(|()| {
        tracing::warn!(path = %path.display(), "malformed log start offset checkpoint, ignoring");
        None
    })
}

/// Reads a one-offset checkpoint file (`version` line, then a non-negative offset):
/// `Ok(None)` if it does not exist, `Err` if it is not in that form.
pub(crate) fn read_offset_file(path: &Path) -> std::result::Result<Option<i64>, ()> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let mut lines = text.lines();
    match (lines.next(), lines.next().map(|l| l.trim().parse::<i64>())) {
        (Some(VERSION), Some(Ok(offset))) if offset >= 0 => Ok(Some(offset)),
        _ => Err(()),
    }
}

/// Durably replaces the checkpoint with `offset`.
pub(crate) fn write_log_start_offset(dir: &Path, offset: i64) -> Result<()> {
    write_offset_file(dir, LOG_START_OFFSET_FILE, offset)
}

/// Durably replaces the one-offset checkpoint file `name` in `dir` (temp file, fsync,
/// rename, fsync of the directory).
pub(crate) fn write_offset_file(dir: &Path, name: &str, offset: i64) -> Result<()> {
    write_file_atomically(dir, name, format!("{VERSION}\n{offset}\n").as_bytes())
}

/// Durably replaces the file `name` in `dir` with `contents`: written to `<name>.tmp`
/// (which `Log::open` removes if a crash leaves it), fsynced, renamed over `name`, then
/// the directory is fsynced, so a reader sees either the old or the new file, whole.
pub(crate) fn write_file_atomically(dir: &Path, name: &str, contents: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let write = |file: &mut File| -> std::io::Result<()> {
        file.write_all(contents)?;
        file.sync_all()
    };
    let mut file = File::create(&tmp).map_err(|e| StorageError::io(IoOp::Open, &tmp, 0, e))?;
    write(&mut file).map_err(|e| StorageError::io(IoOp::Write, &tmp, 0, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(IoOp::Rename, &tmp, 0, e))?;
    sync_dir(dir)
}

/// Replaces the file `name` in `dir` with `contents` as [`write_file_atomically`] does
/// (a reader sees the old file or the new one, whole) but leaves it to the kernel to
/// write back: for files a crash may lose without harm (`partition.metadata`, rewritten
/// when missing), where an fsync per partition would slow creating many partitions.
pub(crate) fn write_file_unsynced(dir: &Path, name: &str, contents: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, contents).map_err(|e| StorageError::io(IoOp::Write, &tmp, 0, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(IoOp::Rename, &tmp, 0, e))
}

/// fsyncs a directory so a rename or create in it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StorageError::io(IoOp::Sync, dir, 0, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_log_start_offset(dir.path()), None);
        write_log_start_offset(dir.path(), 42).unwrap();
        assert_eq!(read_log_start_offset(dir.path()), Some(42));
        std::fs::write(dir.path().join(LOG_START_OFFSET_FILE), "0\nnope\n").unwrap();
        assert_eq!(read_log_start_offset(dir.path()), None);
        std::fs::write(dir.path().join(LOG_START_OFFSET_FILE), "7\n1\n").unwrap();
        assert_eq!(read_log_start_offset(dir.path()), None);
    }
}
