//! `cleaner-offset-checkpoint`: the offset up to which a log has been cleaned (its first
//! dirty offset), so the dirty ratio survives restarts. `cleaner-delete-horizon`: the
//! earliest delete horizon the last cleaning left in the log (Strata's own file), so a
//! restarted broker still comes back for expired tombstones and markers.
//!
//! Kafka keeps one such file per log dir for all partitions; Strata keeps one per
//! partition directory, like its log start offset checkpoint, so a log owns its state and
//! cleaning one partition never rewrites a file shared with others. Same format: a
//! version line, then the offset. Written to a `.tmp` file, fsynced, renamed over the
//! old one (a leftover `.tmp` is removed when the log is loaded).

use std::path::Path;

use crate::checkpoint::{read_offset_file, write_offset_file};
use crate::error::{IoOp, Result, StorageError};

/// File name of the cleaner checkpoint inside a partition directory.
pub(crate) const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// File name of the pending delete horizon inside a partition directory.
pub(crate) const HORIZON_FILE: &str = "cleaner-delete-horizon";

/// The checkpointed first dirty offset; `None` if missing or unreadable (then the whole
/// log counts as dirty, which is always safe).
pub(crate) fn read(dir: &Path) -> Option<i64> {
    let path = dir.join(CLEANER_CHECKPOINT_FILE);
    read_offset_file(&path).unwrap_or_else(|()| {
        tracing::warn!(path = %path.display(), "malformed cleaner checkpoint, treating the log as dirty");
        None
    })
}

/// Durably replaces the checkpoint with `offset`.
pub(crate) fn write(dir: &Path, offset: i64) -> Result<()> {
    write_offset_file(dir, CLEANER_CHECKPOINT_FILE, offset)
}

/// The pending delete horizon; `None` if there is none, or the file is unreadable (then
/// expired tombstones and markers wait for the next cleaning the dirty ratio starts).
pub(crate) fn read_horizon(dir: &Path) -> Option<i64> {
    let path = dir.join(HORIZON_FILE);
    read_offset_file(&path).unwrap_or_else(|()| {
        tracing::warn!(path = %path.display(), "malformed cleaner delete horizon, ignoring it");
        None
    })
}

/// Durably records the pending delete horizon; `None` removes the file.
pub(crate) fn write_horizon(dir: &Path, horizon_ms: Option<i64>) -> Result<()> {
    let Some(ms) = horizon_ms else {
        let path = dir.join(HORIZON_FILE);
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StorageError::io(IoOp::Delete, path, 0, e))
            }
            _ => Ok(()),
        };
    };
    write_offset_file(dir, HORIZON_FILE, ms.max(0))
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

    #[test]
    fn horizon_round_trip_and_removal() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_horizon(dir.path()), None);
        write_horizon(dir.path(), Some(1_700_000_000_000)).unwrap();
        assert_eq!(read_horizon(dir.path()), Some(1_700_000_000_000));
        write_horizon(dir.path(), None).unwrap();
        assert_eq!(read_horizon(dir.path()), None);
        write_horizon(dir.path(), None).unwrap();
    }
}
