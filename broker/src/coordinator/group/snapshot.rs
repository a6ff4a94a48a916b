//! What the metrics endpoint reads of the group coordinator: group counts by state and
//! every committed offset, copied out of the coordinator task once per scrape (lag is
//! computed against the partitions' high watermarks outside it).

use super::{GroupCoordinator, GroupState};

/// The coordinator's groups as one scrape sees them.
#[derive(Debug, Default, Clone)]
pub struct GroupsSnapshot {
    /// Groups per state: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub by_state: [u64; 5],
    /// (group, topic, partition, committed offset) of every committed offset.
    pub committed: Vec<(String, String, i32, i64)>,
    /// Rebalances the coordinator started since the broker started.
    pub rebalances: u64,
}

impl GroupsSnapshot {
    /// The states in the order of [`GroupsSnapshot::by_state`].
    pub const STATES: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];
}

impl GroupCoordinator {
    /// Counts the groups this coordinator holds by state and copies their committed
    /// offsets (transactional offsets not yet committed are left out, as OffsetFetch
    /// leaves them out).
    pub fn snapshot(&self) -> GroupsSnapshot {
        let mut s = GroupsSnapshot { rebalances: self.rebalances, ..Default::default() };
        for g in self.groups.values() {
            if let Some(i) = GroupsSnapshot::STATES.iter().position(|st| *st == g.state) {
                s.by_state[i] += 1;
            }
            for (topic, partitions) in &g.offsets {
                for (partition, c) in partitions {
                    s.committed.push((
                        g.group_id.clone(),
                        topic.clone(),
                        *partition,
                        c.offset.committed_offset,
                    ));
                }
            }
        }
        s.committed.sort();
        s
    }
}
