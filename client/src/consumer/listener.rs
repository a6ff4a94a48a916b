//! The rebalance listener: the application's hooks into a rebalance, run from `poll`
//! (never from a background task), so it can commit offsets or snapshot and restore
//! state at the moment partitions change hands.

use crate::types::{OffsetAndMetadata, TopicPartition};
use std::collections::BTreeMap;

/// What a listener may do during a callback: read positions, ask for offsets to be
/// committed (synchronously, before the rebalance goes on), and set where assigned
/// partitions start (restored from the application's own store).
///
/// ```
/// use strata_client::consumer::{Rebalance, RebalanceListener};
/// use strata_client::TopicPartition;
/// struct CommitOnRevoke;
/// impl RebalanceListener for CommitOnRevoke {
///     fn on_partitions_revoked(&mut self, rebalance: &mut Rebalance, _partitions: &[TopicPartition]) {
///         rebalance.commit_positions();
///     }
/// }
/// ```
#[derive(Debug, Default)]
pub struct Rebalance {
    pub(crate) positions: BTreeMap<TopicPartition, i64>,
    pub(crate) commit: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
    pub(crate) seeks: BTreeMap<TopicPartition, i64>,
}

impl Rebalance {
    /// The consumer's positions (next offset to read) of the partitions it has now.
    pub fn positions(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.positions
    }

    /// Commits `offsets` before the rebalance continues (ignored for lost partitions:
    /// the member is no longer in the generation).
    pub fn commit(&mut self, offsets: BTreeMap<TopicPartition, OffsetAndMetadata>) {
        self.commit.get_or_insert_with(BTreeMap::new).extend(offsets);
    }

    /// Commits the current positions of the partitions being revoked (or all owned).
    pub fn commit_positions(&mut self) {
        let offsets = self.positions.iter().map(|(tp, o)| (tp.clone(), OffsetAndMetadata::new(*o))).collect();
        self.commit(offsets);
    }

    /// Starts an assigned partition at `offset` instead of its committed offset.
    pub fn seek(&mut self, tp: TopicPartition, offset: i64) {
        self.seeks.insert(tp, offset);
    }
}

/// Hooks called from `poll` when the group's assignment changes; all default to nothing
/// (lost defaults to revoked, as in Java).
///
/// A stream engine restoring each assigned partition from its own store:
///
/// ```
/// use std::collections::BTreeMap;
/// use strata_client::consumer::{Rebalance, RebalanceListener};
/// use strata_client::TopicPartition;
/// struct FromStore(BTreeMap<TopicPartition, i64>);
/// impl RebalanceListener for FromStore {
///     fn on_partitions_assigned(&mut self, rebalance: &mut Rebalance, partitions: &[TopicPartition]) {
///         for tp in partitions {
///             if let Some(offset) = self.0.get(tp) {
///                 rebalance.seek(tp.clone(), *offset);
///             }
///         }
///     }
/// }
/// ```
pub trait RebalanceListener: Send {
    /// `partitions` are about to go to another member: commit their offsets now.
    fn on_partitions_revoked(&mut self, rebalance: &mut Rebalance, partitions: &[TopicPartition]) {
        let _ = (rebalance, partitions);
    }
    /// `partitions` are now this member's (for cooperative protocols: only the new ones).
    fn on_partitions_assigned(&mut self, rebalance: &mut Rebalance, partitions: &[TopicPartition]) {
        let _ = (rebalance, partitions);
    }
    /// `partitions` were taken away without a chance to commit (the member fell out of
    /// its generation).
    fn on_partitions_lost(&mut self, rebalance: &mut Rebalance, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(rebalance, partitions);
    }
}

/// A listener that does nothing.
///
/// ```
/// let _ = strata_client::consumer::NoopListener;
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopListener;

impl RebalanceListener for NoopListener {}
