//! Opening a partition directory: clean up leftovers of interrupted operations, open the
//! segments, recover after an unclean shutdown, settle the log start offset, rebuild
//! producer state and transaction indexes from the latest snapshot plus a replay, and
//! settle the leader epoch cache (rebuilt by the same replay if its checkpoint is
//! missing or corrupt).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{epochs, producers, LogInner};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{IoOp, Result, StorageError};
use crate::producer_state::ProducerStateManager;
use crate::segment::{
    remove_if_exists, LogSegment, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};

/// Suffix of a segment file written by the log cleaner but not yet swapped in.
const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment file ready to replace the segments it covers.
const SWAP_SUFFIX: &str = ".swap";

/// What the directory listing found.
#[derive(Debug, Default)]
struct DirListing {
    log_bases: Vec<i64>,
    index_files: Vec<(i64, PathBuf)>,
    swapped_bases: Vec<i64>,
}

/// Parses `<20 digits><suffix>` into the base offset.
fn parse_base(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Removes leftovers and completes interrupted swaps, then lists segment files.
///
/// - `.deleted` files belong to segments already removed from the log: delete them.
/// - `.cleaned` files are an unfinished cleaning: delete them (the originals are intact).
/// - a `.log.swap` file is a finished cleaning whose originals may already be gone: it is
///   renamed into place (its indexes are rebuilt, its transaction index by replay) and
///   the segments it covers are dropped once its range is known. Index `.swap` files are
///   deleted.
fn scan_dir(dir: &Path) -> Result<DirListing> {
    let mut listing = DirListing::default();
    let entries = std::fs::read_dir(dir).map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    for name in &names {
        let path = dir.join(name);
        if name.ends_with(DELETED_SUFFIX) || name.ends_with(CLEANED_SUFFIX) || name.ends_with(".tmp") {
            tracing::info!(file = %path.display(), "removing leftover file");
            remove_if_exists(&path)?;
        } else if let Some(original) = name.strip_suffix(SWAP_SUFFIX) {
            if let Some(base) = parse_base(original, LOG_SUFFIX) {
                tracing::warn!(file = %path.display(), "completing interrupted segment swap");
                let target = dir.join(original);
                std::fs::rename(&path, &target).map_err(|e| StorageError::io(IoOp::Rename, &path, 0, e))?;
                for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
                    remove_if_exists(&dir.join(format!("{}{suffix}", crate::segment::file_stem(base))))?;
                }
                listing.swapped_bases.push(base);
            } else {
                remove_if_exists(&path)?;
            }
        }
    }
    // List again: renames above may have changed the set of segment files.
    let entries = std::fs::read_dir(dir).map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io(IoOp::ListDir, dir, 0, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if let Some(base) = parse_base(&name, LOG_SUFFIX) {
            listing.log_bases.push(base);
        } else if let Some(base) = parse_base(&name, INDEX_SUFFIX)
            .or_else(|| parse_base(&name, TIME_INDEX_SUFFIX))
            .or_else(|| parse_base(&name, TXN_INDEX_SUFFIX))
        {
            listing.index_files.push((base, dir.join(&name)));
        }
    }
    listing.log_bases.sort_unstable();
    listing.log_bases.dedup();
    Ok(listing)
}

/// Loads the log in `dir` (creating the directory if needed).
pub(super) fn load(dir: &Path, config: &LogConfig, clean_shutdown: bool, now_ms: i64) -> Result<LogInner> {
    std::fs::create_dir_all(dir).map_err(|e| StorageError::io(IoOp::Open, dir, 0, e))?;
    let listing = scan_dir(dir)?;
    for (base, path) in &listing.index_files {
        if listing.log_bases.binary_search(base).is_err() {
            tracing::info!(file = %path.display(), "removing index without a segment");
            remove_if_exists(path)?;
        }
    }
    let (mut segments, mut replay_from_at_most) =
        open_segments(dir, &listing, config, clean_shutdown, now_ms)?;

    let checkpointed = checkpoint::read_log_start_offset(dir);
    if segments.is_empty() {
        let base = checkpointed.unwrap_or(0);
        segments.insert(base, LogSegment::create(dir, base, config, now_ms)?);
    }
    let first_base = segments.keys().next().copied().unwrap_or(0);
    let (leader_epochs, mut rebuild_epochs) = epochs::read_checkpoint(dir);
    let mut inner = LogInner {
        segments,
        log_start_offset: checkpointed.unwrap_or(first_base).max(first_base),
        unflushed_messages: 0,
        last_flush_ms: now_ms,
        last_seen_ms: now_ms,
        pending_deletes: Vec::new(),
        producer_state: ProducerStateManager::new(dir)?,
        leader_epochs,
        high_watermark: None,
        closed: false,
    };
    let leo = inner.log_end_offset();
    if inner.log_start_offset > leo {
        // The tail that the start offset pointed into was lost (torn write after
        // DeleteRecords): keep the start offset monotonic and restart the log there.
        tracing::warn!(
            dir = %dir.display(),
            log_start_offset = inner.log_start_offset,
            log_end_offset = leo,
            "log start offset beyond recovered log end, starting an empty log at it"
        );
        let start = inner.log_start_offset;
        for (_, segment) in std::mem::take(&mut inner.segments) {
            segment.delete()?;
        }
        inner.segments.insert(start, LogSegment::create(dir, start, config, now_ms)?);
        inner.producer_state.delete_snapshots_where(|_| true)?;
        // As Kafka clears it: rebuilt from the (no) batches, and written.
        inner.leader_epochs.clear();
        rebuild_epochs = true;
        replay_from_at_most = start;
    }
    producers::rebuild_producer_state(
        &mut inner,
        replay_from_at_most,
        rebuild_epochs,
        now_ms,
        config.producer_id_expiration_ms,
    )?;
    epochs::settle_loaded(dir, &mut inner, rebuild_epochs)?;
    Ok(inner)
}

fn remove_segment_files(dir: &Path, base: i64) -> Result<()> {
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
        remove_if_exists(&dir.join(format!("{}{suffix}", crate::segment::file_stem(base))))?;
    }
    Ok(())
}

/// Opens segments oldest first. The last one is recovered when the shutdown was unclean.
/// If recovering a segment cut bytes off, every later segment is dropped too: offsets
/// after a corruption cannot be trusted to continue densely. A segment overlapping the
/// next one is cut back to it, except a swapped-in (cleaned) segment, which wins over
/// the segments it covers. Also returns the offset producer state must be replayed from
/// (at most) so that every transaction index in doubt is rebuilt: the base of the first
/// recovered, swapped-in or corrupt-index segment, else `i64::MAX`.
fn open_segments(
    dir: &Path,
    listing: &DirListing,
    config: &LogConfig,
    clean_shutdown: bool,
    now_ms: i64,
) -> Result<(BTreeMap<i64, LogSegment>, i64)> {
    let bases = &listing.log_bases;
    let mut segments: BTreeMap<i64, LogSegment> = BTreeMap::new();
    let mut replay_from_at_most = listing.swapped_bases.iter().copied().min().unwrap_or(i64::MAX);
    for (i, &base) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        if let Some((&prev_base, previous)) = segments.iter_mut().next_back() {
            if previous.next_offset() > base {
                if listing.swapped_bases.contains(&prev_base) {
                    tracing::warn!(dir = %dir.display(), segment = base, "removing segment replaced by a swap");
                    remove_segment_files(dir, base)?;
                    continue;
                }
                tracing::warn!(
                    segment = %previous.log_path().display(),
                    next_segment = base,
                    "segment overlaps the next one, truncating"
                );
                previous.truncate_to(base)?;
            }
        }
        let (segment, loaded) = LogSegment::open(dir, base, config, now_ms, last, last && !clean_shutdown)?;
        segments.insert(base, segment);
        if loaded.txn_index_suspect {
            replay_from_at_most = replay_from_at_most.min(base);
        }
        if loaded.truncated_bytes > 0 && !last {
            for &later in &bases[i + 1..] {
                tracing::warn!(dir = %dir.display(), segment = later, "dropping segment after a corrupt one");
                remove_segment_files(dir, later)?;
            }
            break;
        }
    }
    // The active segment may have been opened as inactive if later ones were dropped.
    if let Some(active) = segments.values_mut().next_back() {
        active.resize_indexes(config.segment_index_bytes)?;
    }
    Ok((segments, replay_from_at_most))
}
