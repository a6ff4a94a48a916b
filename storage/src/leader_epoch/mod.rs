//! `LeaderEpochCache` (KIP-101, KIP-279): for each leader epoch of a partition, the
//! offset of its first record, so that replicas can find where their logs diverge from
//! the leader's (OffsetForLeaderEpoch, and the DivergingEpoch of a Fetch since KIP-320)
//! instead of truncating to a high watermark that may be stale.
//!
//! Kafka's `LeaderEpochFileCache` as a pure core: [`LeaderEpochCache`] applies Kafka's
//! rules to an ordered list of [`EpochEntry`]; the [`crate::Log`] owns one under its
//! lock, decides when to call it (appends, truncations, log start moves, loading) and
//! persists it with [`checkpoint`] whenever it changes, which is rare (a new epoch or a
//! truncation), never per append.
//!
//! Invariant: entries are strictly increasing both in epoch and in start offset.

pub(crate) mod checkpoint;

/// Kafka's `UNDEFINED_EPOCH`: no leader epoch.
pub(crate) const UNDEFINED_EPOCH: i32 = -1;

/// One leader epoch and the offset of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochEntry {
    /// The leader epoch (>= 0).
    pub(crate) epoch: i32,
    /// Offset of the first record written in that epoch (>= 0).
    pub(crate) start_offset: i64,
}

/// The epochs of one partition, oldest first, with Kafka's rules for changing them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache (a new log, or one whose checkpoint must be rebuilt).
    pub(crate) fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// A cache holding `entries` as read from a checkpoint; `None` unless they are
    /// non-negative and strictly increasing in both epoch and start offset, which every
    /// cache this crate writes is (a file breaking it is treated as corrupt).
    pub(crate) fn from_entries(entries: Vec<EpochEntry>) -> Option<Self> {
        let valid = entries.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0)
            && entries.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
        valid.then_some(LeaderEpochCache { entries })
    }

    /// The entries, oldest first.
    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry: the epoch of the last batch written (or of the leadership just
    /// taken, see [`crate::Log::assign_epoch_start_offset`]).
    pub(crate) fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch, what a follower sends as `LastFetchedEpoch`.
    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The oldest entry (its start is the log start offset once retention moved it).
    pub(crate) fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Whether a batch stamped with `epoch` starts a new epoch: `epoch` is a real epoch
    /// (>= 0; Kafka ignores -1) newer than the latest. Equal or older epochs record
    /// nothing.
    pub(crate) fn is_new_epoch(&self, epoch: i32) -> bool {
        epoch >= 0 && self.latest_epoch().is_none_or(|latest| epoch > latest)
    }

    /// Records that `epoch` starts at `start_offset`; returns whether the cache changed.
    ///
    /// The same epoch as the latest is a no-op. A newer epoch first removes, newest
    /// first, the entries that would break monotonicity (Kafka's
    /// `maybeTruncateNonMonotonicEntries`: epoch >= `epoch` or start offset >=
    /// `start_offset`), e.g. an epoch assigned at the log end by a leader that then wrote
    /// nothing. Panics if `epoch` is older than the latest or negative, or if
    /// `start_offset` is negative: leader epochs never go back, and callers check
    /// (with [`Self::is_new_epoch`]) before calling.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        assert!(epoch >= 0 && start_offset >= 0, "invalid leader epoch entry ({epoch}, {start_offset})");
        if let Some(latest) = self.latest_entry() {
            if latest.epoch == epoch {
                return false;
            }
            assert!(epoch > latest.epoch, "leader epoch {epoch} after newer epoch {}", latest.epoch);
        }
        let mut removed = Vec::new();
        while let Some(last) = self.entries.last().copied() {
            if last.epoch < epoch && last.start_offset < start_offset {
                break;
            }
            removed.push(last);
            self.entries.pop();
        }
        // Removing only an entry at the same offset is expected (no data was written in
        // its epoch); anything more means the cache was ahead of the log.
        if removed.len() > 1 || removed.first().is_some_and(|e| e.start_offset != start_offset) {
            tracing::warn!(epoch, start_offset, ?removed, "new leader epoch removed conflicting entries");
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        true
    }

    /// Kafka's `endOffsetFor`: the epoch and end offset a leader answers to
    /// OffsetForLeaderEpoch(`requested`), where an epoch's end offset is the start offset
    /// of the next epoch, or `log_end_offset` for the latest one.
    ///
    /// - `requested` is the latest epoch: (latest, `log_end_offset`);
    /// - some epoch is newer than `requested`: the newest epoch <= `requested` and the
    ///   start offset of the first epoch > `requested`; if every known epoch is newer
    ///   (the older ones went with retention), (`requested`, start of the earliest
    ///   entry), as Kafka does since 2.1 (KAFKA-7415), so the follower truncates to
    ///   where the leader's log begins;
    /// - `requested` is [`UNDEFINED_EPOCH`], newer than every epoch, or the cache is
    ///   empty: `None`, Kafka's (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) = (-1, -1).
    pub(crate) fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> Option<(i32, i64)> {
        if requested == UNDEFINED_EPOCH {
            return None;
        }
        if self.latest_epoch()? == requested {
            return Some((requested, log_end_offset));
        }
        let higher = self.entries.iter().position(|e| e.epoch > requested)?;
        let end_offset = self.entries[higher].start_offset;
        let found_epoch = higher.checked_sub(1).map_or(requested, |floor| self.entries[floor].epoch);
        Some((found_epoch, end_offset))
    }

    /// The epoch of the record at `offset`: the newest epoch starting at or before it.
    pub(crate) fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries.iter().take_while(|e| e.start_offset <= offset).last().map(|e| e.epoch)
    }

    /// Removes the entries starting at or after `end_offset` (the log was truncated
    /// there, or an epoch was assigned at a log end that did not last); returns whether
    /// any was removed.
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        if end_offset >= 0 {
            while self.entries.last().is_some_and(|e| e.start_offset >= end_offset) {
                self.entries.pop();
            }
        }
        self.entries.len() != before
    }

    /// The log now starts at `start_offset` (retention, DeleteRecords): the entries
    /// starting at or before it are removed, and the newest of them comes back starting
    /// at `start_offset`, since its epoch still holds the records from there (Kafka's
    /// `truncateFromStart`, which keeps an entry at exactly `start_offset`). Returns
    /// whether the cache changed.
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let covered = self.entries.iter().take_while(|e| e.start_offset <= start_offset).count();
        let Some(newest_covered) = covered.checked_sub(1).map(|i| self.entries[i]) else {
            return false;
        };
        let moved = EpochEntry { epoch: newest_covered.epoch, start_offset };
        let changed = covered > 1 || newest_covered != moved;
        self.entries.splice(..covered, [moved]);
        changed
    }

    /// Removes every entry (the log was emptied); returns whether there were any.
    pub(crate) fn clear(&mut self) -> bool {
        let had_entries = !self.entries.is_empty();
        self.entries.clear();
        had_entries
    }
}

#[cfg(test)]
mod tests;
