//! `leader-epoch-checkpoint` in the partition directory, in Kafka's exact format
//! (`LeaderEpochCheckpointFile`), so Kafka tools read it and a Kafka data dir is read here:
//!
//! ```text
//! 0                 version
//! 2                 number of entries
//! 0 0               epoch start_offset, one line per entry, oldest first
//! 3 120
//! ```
//!
//! Written whole to a temporary file, fsynced, renamed over the old one, and the
//! directory fsynced ([`crate::checkpoint::write_file_atomically`]). A file that is
//! missing, empty, unreadable or malformed is reported as such: the log then rebuilds
//! the cache from its batch headers rather than failing to open.

use std::path::Path;

use super::{EpochEntry, LeaderEpochCache};
use crate::checkpoint::write_file_atomically;
use crate::error::Result;

/// File name of the leader epoch checkpoint inside a partition directory.
pub(crate) const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
const VERSION: i32 = 0;
/// Larger files are not read (about 700,000 entries): a checkpoint that big is garbage.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Why a checkpoint could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnusableCheckpoint {
    /// No file (a new log, or one written before Strata had the cache).
    Missing,
    /// Empty (Kafka creates the file empty), unreadable, too large or malformed.
    Corrupt(&'static str),
}

/// Reads the checkpoint in `dir`.
pub(crate) fn read(dir: &Path) -> std::result::Result<LeaderEpochCache, UnusableCheckpoint> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let len = match std::fs::metadata(&path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(UnusableCheckpoint::Missing),
        Err(_) => return Err(UnusableCheckpoint::Corrupt("unreadable")),
    };
    if len > MAX_FILE_BYTES {
        return Err(UnusableCheckpoint::Corrupt("too large"));
    }
    let text = std::fs::read_to_string(&path).map_err(|_| UnusableCheckpoint::Corrupt("unreadable"))?;
    parse(&text).map_err(UnusableCheckpoint::Corrupt)
}

/// Parses the file's text, as strictly as Kafka's `CheckpointFile` reader (version 0, a
/// count, then exactly that many `epoch offset` lines) and a little more: the text must
/// end with a line end, as every writer's does, so a file cut inside its last number is
/// not taken for a shorter offset; the entries must be strictly increasing.
pub(crate) fn parse(text: &str) -> std::result::Result<LeaderEpochCache, &'static str> {
    if !text.ends_with('\n') {
        return Err(if text.is_empty() { "empty" } else { "no final line end" });
    }
    let mut lines = text.lines();
    let version = lines.next().ok_or("empty")?;
    if version.trim().parse::<i32>() != Ok(VERSION) {
        return Err("unknown version");
    }
    let count: usize = lines.next().ok_or("no entry count")?.trim().parse().map_err(|_| "bad entry count")?;
    // Never trust the count for an allocation: entries grow with the lines present.
    let mut entries = Vec::new();
    for line in lines {
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err("malformed entry line");
        };
        let epoch = epoch.parse().map_err(|_| "bad epoch")?;
        let start_offset = offset.parse().map_err(|_| "bad start offset")?;
        entries.push(EpochEntry { epoch, start_offset });
    }
    if entries.len() != count {
        return Err("entry count does not match the entries");
    }
    LeaderEpochCache::from_entries(entries).ok_or("entries not strictly increasing")
}

/// The file's text for `cache`.
pub(crate) fn format(cache: &LeaderEpochCache) -> String {
    let mut text = format!("{VERSION}\n{}\n", cache.entries().len());
    for entry in cache.entries() {
        text.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
    }
    text
}

/// Durably replaces the checkpoint in `dir` with `cache`.
pub(crate) fn write(dir: &Path, cache: &LeaderEpochCache) -> Result<()> {
    write_file_atomically(dir, LEADER_EPOCH_CHECKPOINT_FILE, format(cache).as_bytes())
}
