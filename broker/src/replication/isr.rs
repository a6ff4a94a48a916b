//! The leader's replication state of one partition as a pure state machine: follower
//! positions and times in, high-watermark moves and ISR change proposals out (Kafka's
//! `Partition` / `Replica` bookkeeping, KIP-497 pending ISR states).
//!
//! Rules kept here, which are the ones that lose acknowledged writes when broken:
//! - the high watermark is the smallest log end offset over the *maximal* ISR (the
//!   committed ISR plus members being added; members being removed still count until
//!   the controller commits their removal), and it never moves backwards;
//! - a follower whose log end offset is not known yet (just became leader) holds the
//!   high watermark where it is;
//! - a follower rejoins only once it holds everything this leader has acknowledged
//!   (its log end offset reached the high watermark and the start of this leader's
//!   epoch) and the controller sees it as alive;
//! - one ISR change is in flight at a time; `min.insync.replicas` is checked against
//!   the committed ISR.

use std::collections::BTreeMap;

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The follower's log end offset (its last fetch offset); -1 until it fetches.
    pub log_end_offset: i64,
    /// Last time the follower was caught up with the leader's log end offset.
    pub last_caught_up_ms: i64,
    /// Time of the follower's previous fetch, and the leader's log end offset then.
    last_fetch_ms: i64,
    last_fetch_leader_leo: i64,
    /// The broker epoch the follower fetched with (KIP-903); -1 if not sent.
    pub broker_epoch: i64,
    /// The follower's log start offset as its last fetch reported it; -1 until then.
    pub log_start_offset: i64,
}

impl FollowerProgress {
    /// A follower this leader has not heard from yet, counted as caught up `now_ms`, so
    /// a new leader does not shrink its ISR before followers had time to fetch.
    pub fn unknown(now_ms: i64) -> FollowerProgress {
        FollowerProgress {
            log_end_offset: -1,
            last_caught_up_ms: now_ms,
            last_fetch_ms: now_ms,
            last_fetch_leader_leo: -1,
            broker_epoch: -1,
            log_start_offset: -1,
        }
    }
}

/// An ISR change sent to the controller and not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIsr {
    /// The ISR asked for.
    pub isr: Vec<i32>,
}

/// The leader-side state of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderIsr {
    /// This broker.
    pub leader: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch of the committed state.
    pub partition_epoch: i32,
    /// Every replica.
    pub replicas: Vec<i32>,
    /// The committed ISR (from the metadata log).
    pub isr: Vec<i32>,
    /// The change in flight, if any.
    pub pending: Option<PendingIsr>,
    /// Followers by node id.
    pub followers: BTreeMap<i32, FollowerProgress>,
    /// The log end offset when this leader's epoch began: a follower must reach it
    /// before it rejoins (it then holds every record this leader may have acknowledged).
    pub epoch_start_offset: i64,
}

impl LeaderIsr {
    /// State for a broker that just became leader.
    pub fn new(
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        epoch_start_offset: i64,
        now_ms: i64,
    ) -> LeaderIsr {
        let followers = replicas
            .iter()
            .filter(|&&r| r != leader)
            .map(|&r| (r, FollowerProgress::unknown(now_ms)))
            .collect();
        LeaderIsr {
            leader,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            pending: None,
            followers,
            epoch_start_offset,
        }
    }

    /// Takes the replica set of a newer metadata record of the same leadership (a
    /// reassignment adds or removes replicas without a leader change): a replica added is
    /// tracked from now on, as not yet heard from; one removed is forgotten, so it neither
    /// rejoins the ISR nor holds the low watermark back.
    pub fn set_replicas(&mut self, replicas: Vec<i32>, now_ms: i64) {
        if replicas == self.replicas {
            return;
        }
        self.followers.retain(|id, _| replicas.contains(id));
        for &r in &replicas {
            if r != self.leader {
                self.followers.entry(r).or_insert_with(|| FollowerProgress::unknown(now_ms));
            }
        }
        self.replicas = replicas;
    }

    /// The ISR the high watermark is computed over: committed plus pending additions.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut out = self.isr.clone();
        if let Some(p) = &self.pending {
            for r in &p.isr {
                if !out.contains(r) {
                    out.push(*r);
                }
            }
        }
        out
    }

    /// True when the ISR is the leader alone and no change is pending: the high
    /// watermark simply follows the leader's log end offset.
    pub fn leader_only(&self) -> bool {
        self.pending.is_none() && self.isr.len() == 1 && self.isr[0] == self.leader
    }

    /// The high watermark the ISR allows, given the leader's log end offset: the
    /// smallest log end offset over the maximal ISR. The caller only ever moves the
    /// high watermark forward with it.
    pub fn high_watermark(&self, leader_leo: i64) -> i64 {
        let mut hw = leader_leo;
        let mut unknown = false;
        for r in self.maximal_isr() {
            if r == self.leader {
                continue;
            }
            let leo = self.followers.get(&r).map_or(-1, |f| f.log_end_offset);
            unknown |= leo < 0;
            hw = hw.min(leo);
        }
        // The rules above: no member of the maximal ISR lacks what the high watermark
        // covers, and one not heard from holds it where it is (-1: no move).
        debug_assert!(hw <= leader_leo, "high watermark {hw} past the leader's log end {leader_leo}");
        debug_assert!(!unknown || hw < 0, "a member not heard from must hold the high watermark");
        hw
    }

    /// The low watermark (DeleteRecords' answer, as Kafka's `lowWatermarkIfLeader`): the
    /// smallest log start offset of the leader and of every follower on a live broker
    /// (`alive`); a follower not heard from since this leadership began counts as -1.
    pub fn low_watermark(&self, leader_log_start: i64, alive: impl Fn(i32) -> bool) -> i64 {
        self.followers
            .iter()
            .filter(|(id, _)| alive(**id))
            .map(|(_, f)| f.log_start_offset)
            .fold(leader_log_start, i64::min)
    }

    /// Records the log start offset a follower's fetch reported.
    pub fn note_log_start(&mut self, follower: i32, log_start_offset: i64) {
        if let Some(f) = self.followers.get_mut(&follower) {
            f.log_start_offset = log_start_offset;
        }
    }

    /// Records a fetch of `follower` at `fetch_offset` (its log end offset), answered
    /// when the leader's log end offset was `leader_leo`. Returns false for a node that
    /// is not a follower of this partition.
    pub fn on_fetch(
        &mut self,
        follower: i32,
        fetch_offset: i64,
        broker_epoch: i64,
        leader_leo: i64,
        now_ms: i64,
    ) -> bool {
        let Some(p) = self.followers.get_mut(&follower) else { return false };
        // Caught up now, or caught up with where the leader was at the previous fetch.
        if fetch_offset >= leader_leo {
            p.last_caught_up_ms = now_ms;
        } else if p.last_fetch_leader_leo >= 0 && fetch_offset >= p.last_fetch_leader_leo {
            p.last_caught_up_ms = p.last_caught_up_ms.max(p.last_fetch_ms);
        }
        p.log_end_offset = fetch_offset;
        p.last_fetch_ms = now_ms;
        p.last_fetch_leader_leo = leader_leo;
        p.broker_epoch = broker_epoch;
        true
    }

    /// The ISR to propose when a follower should join: it is out of the maximal ISR, its
    /// log end offset reached `high_watermark` and the epoch start offset, and
    /// `eligible` (alive in the metadata) accepts it. `None` while a change is pending.
    pub fn expansion(&self, high_watermark: i64, eligible: impl Fn(i32, i64) -> bool) -> Option<Vec<i32>> {
        if self.pending.is_some() {
            return None;
        }
        let joining: Vec<i32> = self
            .followers
            .iter()
            .filter(|(r, p)| {
                !self.isr.contains(r)
                    && p.log_end_offset >= high_watermark
                    && p.log_end_offset >= self.epoch_start_offset
                    && eligible(**r, p.broker_epoch)
            })
            .map(|(r, _)| *r)
            .collect();
        if joining.is_empty() {
            return None;
        }
        // A follower rejoins only holding everything this leader may have acknowledged.
        debug_assert!(joining
            .iter()
            .all(|r| self.followers[r].log_end_offset >= high_watermark.max(self.epoch_start_offset)));
        let mut isr = self.isr.clone();
        isr.extend(joining);
        Some(isr)
    }

    /// The ISR to propose when followers fell behind: members other than the leader not
    /// caught up within `lag_time_max_ms`. `None` while a change is pending or if all are
    /// in sync.
    pub fn shrink(&self, now_ms: i64, lag_time_max_ms: i64) -> Option<Vec<i32>> {
        if self.pending.is_some() {
            return None;
        }
        let out_of_sync: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.leader)
            .filter(|r| self.followers.get(r).is_none_or(|p| now_ms - p.last_caught_up_ms > lag_time_max_ms))
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        let isr: Vec<i32> = self.isr.iter().copied().filter(|r| !out_of_sync.contains(r)).collect();
        debug_assert!(
            !self.isr.contains(&self.leader) || isr.contains(&self.leader),
            "the leader never shrinks itself out of its ISR"
        );
        Some(isr)
    }

    /// The committed state from the controller (AlterPartition answer or a metadata
    /// record of the same leader epoch): replaces the ISR if it is newer, and ends a
    /// pending change that it answers or supersedes.
    pub fn committed(&mut self, isr: Vec<i32>, partition_epoch: i32) {
        if partition_epoch < self.partition_epoch {
            return;
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader() -> LeaderIsr {
        LeaderIsr::new(1, 3, 7, vec![1, 2, 3], vec![1, 2, 3], 100, 0)
    }

    #[test]
    fn replicas_added_by_a_reassignment_are_tracked_and_removed_ones_forgotten() {
        let mut s = leader();
        s.on_fetch(2, 150, 9, 150, 10);
        s.set_replicas(vec![1, 2, 3, 4], 20);
        assert_eq!(s.followers.get(&2).map(|f| f.log_end_offset), Some(150), "progress kept");
        assert!(s.on_fetch(4, 150, 9, 150, 30), "the added replica's fetches count");
        s.committed(vec![1, 2, 3, 4], 8);
        assert_eq!(s.high_watermark(150), -1, "replica 3 not heard from yet");
        s.set_replicas(vec![1, 2, 4], 40);
        s.committed(vec![1, 2, 4], 9);
        assert!(!s.on_fetch(3, 150, 9, 150, 50), "a removed replica is no follower");
        assert_eq!(s.high_watermark(150), 150);
        assert_eq!(s.expansion(150, |_, _| true), None, "a removed replica never rejoins");
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member() {
        let mut s = leader();
        assert_eq!(s.high_watermark(150), -1, "followers not heard from: no move");
        s.on_fetch(2, 150, 9, 150, 10);
        assert_eq!(s.high_watermark(150), -1);
        s.on_fetch(3, 120, 9, 150, 10);
        assert_eq!(s.high_watermark(150), 120);
        // A follower out of the ISR does not hold the high watermark back.
        s.committed(vec![1, 2], 8);
        assert_eq!(s.high_watermark(150), 150);
    }

    #[test]
    fn a_pending_shrink_still_counts_the_member_being_removed() {
        let mut s = leader();
        s.on_fetch(2, 150, 9, 150, 10);
        s.on_fetch(3, 110, 9, 150, 10);
        s.pending = Some(PendingIsr { isr: vec![1, 2] });
        assert_eq!(s.high_watermark(150), 110, "3 may still be elected until the shrink is committed");
        s.committed(vec![1, 2], 8);
        assert_eq!(s.high_watermark(150), 150);
    }

    #[test]
    fn a_pending_expansion_counts_the_new_member_at_once() {
        let mut s = LeaderIsr::new(1, 3, 7, vec![1, 2, 3], vec![1, 2], 100, 0);
        s.on_fetch(2, 150, 9, 150, 10);
        s.on_fetch(3, 140, 9, 150, 10);
        assert_eq!(s.high_watermark(150), 150);
        assert_eq!(s.expansion(150, |_, _| true), None, "3 has not reached the high watermark");
        s.on_fetch(3, 150, 9, 150, 20);
        assert_eq!(s.expansion(150, |_, _| true), Some(vec![1, 2, 3]));
        assert_eq!(s.expansion(150, |r, _| r != 3), None, "the controller sees 3 as fenced");
        s.pending = Some(PendingIsr { isr: vec![1, 2, 3] });
        s.on_fetch(2, 160, 9, 170, 30);
        assert_eq!(s.high_watermark(170), 150, "3 counts while its addition is pending");
    }

    #[test]
    fn a_follower_must_reach_the_start_of_the_leaders_epoch_to_rejoin() {
        let mut s = LeaderIsr::new(1, 3, 7, vec![1, 2], vec![1], 100, 0);
        s.on_fetch(2, 90, 9, 100, 10);
        assert_eq!(s.expansion(90, |_, _| true), None, "below the epoch start offset");
        s.on_fetch(2, 100, 9, 100, 20);
        assert_eq!(s.expansion(100, |_, _| true), Some(vec![1, 2]));
    }

    #[test]
    fn lagging_followers_are_proposed_for_removal() {
        let mut s = leader();
        s.on_fetch(2, 150, 9, 150, 1000);
        s.on_fetch(3, 100, 9, 150, 1000);
        assert_eq!(s.shrink(20_000, 30_000), None, "everyone caught up recently enough");
        assert_eq!(s.shrink(30_500, 30_000), Some(vec![1, 2]), "3 was last caught up at 0");
        // Reaching where the leader was at the previous fetch counts as caught up at
        // the previous fetch's time.
        s.on_fetch(3, 120, 9, 150, 20_000);
        s.on_fetch(3, 150, 9, 200, 25_000);
        assert_eq!(s.followers[&3].last_caught_up_ms, 20_000);
        assert_eq!(s.shrink(30_500, 30_000), None);
    }

    #[test]
    fn a_stale_commit_does_not_overwrite_a_newer_one() {
        let mut s = leader();
        s.committed(vec![1, 2], 9);
        s.committed(vec![1, 2, 3], 8);
        assert_eq!((s.isr.clone(), s.partition_epoch), (vec![1, 2], 9));
    }
}
