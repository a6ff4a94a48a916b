//! `cleaner-offset-checkpoint`: the offset up to which a log has been cleaned (its first
//! dirty offset), so the dirty ratio survives restarts.
//!
//! Kafka keeps one such file per log dir for all partitions; Strata keeps one per
//! partition directory, like its log start offset checkpoint, so a log owns its state and
//! cleaning one partition never rewrites a file shared with others. Same format: a
//! version line, then the offset. Written to a `.tmp` file, fsynced, renamed over the
//! old one (a leftover `.tmp` is removed when the log is loaded).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::checkpoint::sync_dir;
use crate::error::{IoOp, Result, StorageError};

/// File name of the cleaner checkpoint inside a partition directory.
pub(crate) const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
const VERSION: &str = "0";

/// The checkpointed first dirty offset; `None` if missing or unreadable (then the whole
/// log counts as dirty, which is always safe).
pub(crate) fn read(dir: &Path) -> Option<i64> {
    let path = dir.join(CLEANER_CHECKPOINT_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let mut lines = text.lines();
    let parsed = match (lines.next(), lines.next().map(|l| l.trim().parse::<i64>())) {
        (Some(VERSION), Some(Ok(offset))) if offset >= 0 => Some(offset),
        _ => None,
    };
    if parsed.is_none() {
        tracing::warn!(path = %path.display(), "malformed cleaner checkpoint, treating the log as dirty");
    }
    parsed
}

/// Durably replaces the checkpoint with `offset`.
pub(crate) fn write(dir: &Path, offset: i64) -> Result<()> {
    let path = dir.join(CLEANER_CHECKPOINT_FILE);
    let tmp = dir.join(format!("{CLEANER_CHECKPOINT_FILE}.tmp"));
    let write = |file: &mut File| -> std::io::Result<()> {
        file.write_all(format!("{VERSION}\n{offset}\n").as_bytes())?;
        file.sync_all()
    };
    let mut file = File::create(&tmp).map_err(|e| StorageError::io(IoOp::Open, &tmp, 0, e))?;
    write(&mut file).map_err(|e| StorageError::io(IoOp::Write, &tmp, 0, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(IoOp::Rename, &tmp, 0, e))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        write(dir.path(), 1234).unwrap();
        assert_eq!(read(dir.path()), Some(1234));
        std::fs::write(dir.path().join(CLEANER_CHECKPOINT_FILE), "0\n-5\n").unwrap();
        assert_eq!(read(dir.path()), None);
        std::fs::write(dir.path().join(CLEANER_CHECKPOINT_FILE), "9\n5\n").unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
