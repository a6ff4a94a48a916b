//! One partition hosted by this broker: its log, and the replication state Kafka keeps
//! next to it (role, leader epoch, high watermark; as leader, the followers' positions
//! and the ISR).
//!
//! The role (leader, follower, neither) sits behind a read-write lock: appends as leader
//! and follower fetches hold it for reading, so no append can carry an epoch that a
//! role change has already retired; role changes take it for writing. The leader's
//! replication bookkeeping ([`LeaderIsr`], a pure state machine) sits in a mutex inside.
//! The high watermark, the leader epoch and "leads with an ISR of one" are mirrored in
//! atomics so the produce and fetch paths read them without locking.

use super::parked::ParkedFetches;
use crate::metadata::PartitionRecord;
use crate::replication::isr::{LeaderIsr, PendingIsr};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use strata_protocol::codec::Uuid;
use strata_protocol::records::RecordSet;
use strata_protocol::ErrorCode;
use strata_storage::{AppendInfo, AppendOrigin, Log, LogReadInfo, StorageError};
use tokio::sync::Notify;

/// What this broker is for the partition.
#[derive(Debug)]
enum Role {
    /// Neither leader nor follower: the partition is offline or not yet assigned.
    None,
    /// Leader, with the followers' bookkeeping.
    Leader(Mutex<LeaderIsr>),
    /// Follower of `leader`.
    Follower {
        /// The leader's node id.
        leader: i32,
    },
}

/// Why an append as leader was refused before reaching the log.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// This broker does not lead the partition (NOT_LEADER_OR_FOLLOWER).
    #[error("this broker is not the leader")]
    NotLeader,
    /// The log refused the batches.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why waiting for the high watermark ended without it passing the offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// Leadership moved (NOT_LEADER_OR_FOLLOWER).
    NotLeader,
    /// The deadline passed (REQUEST_TIMED_OUT).
    Timeout,
}

/// The leader and leader epoch a replica fetch was sent for: what a follower's log may
/// only be changed by while it still holds (the fetch's `current_leader_epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedFrom {
    /// The leader fetched from.
    pub leader: i32,
    /// The leader epoch the fetch named.
    pub leader_epoch: i32,
}

/// An ISR change the leader wants the controller to make (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition.
    pub partition: i32,
    /// The leader epoch it is based on.
    pub leader_epoch: i32,
    /// The partition epoch it is based on.
    pub partition_epoch: i32,
    /// The ISR wanted, with the broker epochs the followers fetched with.
    pub new_isr: Vec<(i32, i64)>,
}

/// One partition hosted by this broker.
#[derive(Debug)]
pub struct Partition {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub index: i32,
    /// Topic id (KIP-516).
    pub topic_id: Uuid,
    /// The partition's log.
    pub log: Arc<Log>,
    /// This broker's node id.
    node_id: i32,
    role: RwLock<Role>,
    leader_epoch: AtomicI32,
    high_watermark: AtomicI64,
    is_leader: AtomicBool,
    /// Leading with an ISR of this broker alone: the high watermark follows the log end.
    leader_only: AtomicBool,
    /// Size of the committed ISR while leading (`min.insync.replicas` checks).
    isr_size: AtomicUsize,
    /// Consumer fetches parked on this partition, woken when the high watermark moves
    /// (what they may read ends there).
    parked_consumers: ParkedFetches,
    /// Follower fetches parked on this partition, woken by appends (they read to the log
    /// end; the high watermark reaches them with their next fetch).
    parked_followers: ParkedFetches,
    /// Delayed `acks=all` produces and coordinator writes wait here for the high
    /// watermark (or a role change).
    hw_changed: Notify,
    /// DeleteRecords answers waiting for followers' log start offsets, woken by follower
    /// fetches while `low_watermark_waiters` is not zero.
    follower_fetched: Notify,
    low_watermark_waiters: AtomicUsize,
    /// The topic's counters, shared with its other partitions here.
    metrics: Arc<crate::metrics::TopicMetrics>,
    /// Whether appends are failing (a full disk), for the operator's log.
    write_health: super::write_health::WriteHealth,
}

impl Partition {
    /// A hosted partition with no role yet; its high watermark starts at `hw` (the
    /// checkpointed one), never above the log end.
    pub(super) fn new(
        topic: Arc<str>,
        index: i32,
        topic_id: Uuid,
        log: Arc<Log>,
        node_id: i32,
        hw: i64,
        metrics: Arc<crate::metrics::TopicMetrics>,
    ) -> Partition {
        let hw = hw.clamp(log.log_start_offset().min(log.log_end_offset()), log.log_end_offset());
        if let Err(e) = log.update_high_watermark(hw) {
            tracing::debug!(error = %e, "cannot pass the high watermark to the log");
        }
        Partition {
            topic,
            index,
            topic_id,
            log,
            node_id,
            role: RwLock::new(Role::None),
            leader_epoch: AtomicI32::new(-1),
            high_watermark: AtomicI64::new(hw),
            is_leader: AtomicBool::new(false),
            leader_only: AtomicBool::new(false),
            isr_size: AtomicUsize::new(0),
            parked_consumers: ParkedFetches::default(),
            parked_followers: ParkedFetches::default(),
            hw_changed: Notify::new(),
            follower_fetched: Notify::new(),
            low_watermark_waiters: AtomicUsize::new(0),
            metrics,
            write_health: Default::default(),
        }
    }

    /// The topic's counters (bytes in and out, requests), updated by the handlers.
    pub fn metrics(&self) -> &crate::metrics::TopicMetrics {
        &self.metrics
    }

    /// The current leader epoch (KIP-101); only ever increases.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// Checks a request's `current_leader_epoch` (KIP-320; -1 = not sent) against this
    /// replica's: the current epoch, or UNKNOWN_LEADER_EPOCH when the client is ahead (this
    /// broker has not applied the change yet) and FENCED_LEADER_EPOCH when it is behind.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<i32, ErrorCode> {
        let epoch = self.leader_epoch();
        match current_leader_epoch {
            c if c < 0 || c == epoch => Ok(epoch),
            c if c > epoch => Err(ErrorCode::UnknownLeaderEpoch),
            _ => Err(ErrorCode::FencedLeaderEpoch),
        }
    }

    /// Offsets below the high watermark are committed and visible to consumers.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// True while this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Acquire)
    }

    /// Size of the committed ISR (0 unless leading).
    pub fn isr_size(&self) -> usize {
        self.isr_size.load(Ordering::Acquire)
    }

    /// The leader this broker follows, if it is a follower.
    pub fn follower_of(&self) -> Option<i32> {
        match &*self.read_role() {
            Role::Follower { leader } => Some(*leader),
            _ => None,
        }
    }

    fn read_role(&self) -> std::sync::RwLockReadGuard<'_, Role> {
        self.role.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_role(&self) -> std::sync::RwLockWriteGuard<'_, Role> {
        self.role.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks to be woken when there is more for this fetch to read: for a consumer, the
    /// next high watermark move; for a follower, the next append.
    pub fn park(&self, waker: &Arc<Notify>, follower: bool) {
        if follower {
            self.parked_followers.park(waker);
        } else {
            self.parked_consumers.park(waker);
        }
    }

    /// Consumer fetches registered (live or not yet pruned), for tests.
    #[cfg(test)]
    pub(super) fn parked_len(&self) -> usize {
        self.parked_consumers.len()
    }

    /// Becomes (or stays) leader as `record` says. Returns true if this is a new
    /// leadership (a new leader epoch): followers' positions start unknown, the epoch's
    /// start offset is recorded in the leader epoch cache, and the fetcher must stop
    /// fetching the partition.
    pub fn make_leader(&self, record: &PartitionRecord, now_ms: i64) -> bool {
        let mut role = self.write_role();
        let current = self.leader_epoch();
        if record.leader_epoch < current {
            return false;
        }
        if let Role::Leader(state) = &*role {
            if record.leader_epoch == current {
                // Same leadership: the controller may have changed the ISR itself (a
                // fenced follower removed).
                let mut l = state.lock().unwrap_or_else(|p| p.into_inner());
                // The replica set always follows the image: an AlterPartition answer may
                // have brought this partition epoch's ISR already, but not its replicas
                // (a reassignment completed by that ISR change).
                if record.partition_epoch >= l.partition_epoch {
                    l.set_replicas(record.replicas.clone(), now_ms);
                }
                if record.partition_epoch > l.partition_epoch {
                    let before = l.isr.len();
                    l.committed(record.isr.clone(), record.partition_epoch);
                    self.metrics.isr_changed(before, l.isr.len());
                }
                self.publish_isr(&l);
                drop(l);
                drop(role);
                self.maybe_advance_high_watermark();
                return false;
            }
        }
        let leo = self.log.log_end_offset();
        if let Err(e) = self.log.assign_epoch_start_offset(record.leader_epoch, leo) {
            tracing::error!(topic = %self.topic, partition = self.index, error = %e, "cannot record the leader epoch start");
        }
        let state = LeaderIsr::new(
            self.node_id,
            record.leader_epoch,
            record.partition_epoch,
            record.replicas.clone(),
            record.isr.clone(),
            leo,
            now_ms,
        );
        self.publish_isr(&state);
        self.leader_epoch.store(record.leader_epoch, Ordering::Release);
        *role = Role::Leader(Mutex::new(state));
        self.is_leader.store(true, Ordering::Release);
        drop(role);
        tracing::info!(
            topic = %self.topic,
            partition = self.index,
            leader_epoch = record.leader_epoch,
            isr = ?record.isr,
            log_end_offset = leo,
            high_watermark = self.high_watermark(),
            "became leader"
        );
        self.maybe_advance_high_watermark();
        self.role_changed();
        true
    }

    /// Becomes (or stays) a follower of `record.leader`. Returns true if the leader or
    /// the epoch changed, so the fetcher must (re)start fetching from the new leader
    /// (which first checks the log for divergence).
    pub fn make_follower(&self, record: &PartitionRecord) -> bool {
        let mut role = self.write_role();
        let current = self.leader_epoch();
        if record.leader_epoch < current {
            return false;
        }
        if let Role::Follower { leader } = &*role {
            if *leader == record.leader && record.leader_epoch == current {
                return false;
            }
        }
        self.is_leader.store(false, Ordering::Release);
        self.leader_only.store(false, Ordering::Release);
        self.isr_size.store(0, Ordering::Release);
        self.leader_epoch.store(record.leader_epoch, Ordering::Release);
        *role = if record.leader >= 0 { Role::Follower { leader: record.leader } } else { Role::None };
        drop(role);
        tracing::info!(
            topic = %self.topic,
            partition = self.index,
            leader = record.leader,
            leader_epoch = record.leader_epoch,
            "became follower"
        );
        self.role_changed();
        true
    }

    /// Drops any role (the partition is being removed from this broker).
    pub fn make_offline(&self) {
        let mut role = self.write_role();
        self.is_leader.store(false, Ordering::Release);
        self.leader_only.store(false, Ordering::Release);
        self.isr_size.store(0, Ordering::Release);
        *role = Role::None;
        drop(role);
        self.role_changed();
    }

    fn publish_isr(&self, l: &LeaderIsr) {
        self.isr_size.store(l.isr.len(), Ordering::Release);
        self.leader_only.store(l.leader_only(), Ordering::Release);
    }

    /// Wakes everything waiting on this partition after a role change.
    fn role_changed(&self) {
        self.hw_changed.notify_waiters();
        self.parked_consumers.wake_all();
        self.parked_followers.wake_all();
    }

    /// Appends a producer's batches as leader (stamped with the leader epoch) and moves
    /// the high watermark as far as the ISR allows.
    pub fn append_as_leader(
        &self,
        records: Bytes,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let role = self.read_role();
        if !matches!(&*role, Role::Leader(_)) {
            return Err(AppendError::NotLeader);
        }
        let info = self
            .log
            .append_with_origin(records, self.leader_epoch(), origin, now_ms)
            .map_err(|e| self.write_failed(e, now_ms))?;
        self.write_health.succeeded(&self.topic, self.index, self.log.dir());
        if self.leader_only.load(Ordering::Acquire) {
            self.advance_high_watermark(self.log.log_end_offset());
        } else if let Role::Leader(state) = &*role {
            let hw =
                state.lock().unwrap_or_else(|p| p.into_inner()).high_watermark(self.log.log_end_offset());
            self.advance_high_watermark(hw);
        }
        drop(role);
        // Followers long-polling this partition fetch the new data.
        self.parked_followers.wake_all();
        Ok(info)
    }

    /// While leading: each follower's log end offset as of its last fetch (-1 before
    /// its first), by node id; empty otherwise.
    pub fn follower_log_end_offsets(&self) -> Vec<(i32, i64)> {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return Vec::new() };
        let l = state.lock().unwrap_or_else(|p| p.into_inner());
        l.followers.iter().map(|(id, f)| (*id, f.log_end_offset)).collect()
    }

    /// While leading: the followers a consumer at `fetch_offset` may be sent to read from
    /// (KIP-392): in the committed ISR, holding the offset (log end at or past it, log
    /// start not past it), as (node id, log end offset, last caught up ms). Empty otherwise.
    pub fn read_replica_candidates(&self, fetch_offset: i64) -> Vec<(i32, i64, i64)> {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return Vec::new() };
        let l = state.lock().unwrap_or_else(|p| p.into_inner());
        l.followers
            .iter()
            .filter(|(id, f)| {
                l.isr.contains(id) && f.log_end_offset >= fetch_offset && f.log_start_offset <= fetch_offset
            })
            .map(|(id, f)| (*id, f.log_end_offset, f.last_caught_up_ms))
            .collect()
    }

    /// Records a follower's fetch at `fetch_offset` (its log end offset) answered with
    /// the leader's log end offset `leader_leo`; moves the high watermark and returns an
    /// ISR expansion to propose, if the follower caught up. `eligible(node, broker
    /// epoch)` says whether the controller would accept the node into the ISR. `None`
    /// (and no effect) when not leading or `follower` is not a replica.
    #[allow(clippy::too_many_arguments)]
    pub fn on_follower_fetch(
        &self,
        follower: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        broker_epoch: i64,
        leader_leo: i64,
        now_ms: i64,
        eligible: impl Fn(i32, i64) -> bool,
    ) -> Option<IsrProposal> {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return None };
        let mut l = state.lock().unwrap_or_else(|p| p.into_inner());
        if !l.on_fetch(follower, fetch_offset, broker_epoch, leader_leo, now_ms) {
            return None;
        }
        l.note_log_start(follower, log_start_offset);
        if self.low_watermark_waiters.load(Ordering::Acquire) > 0 {
            self.follower_fetched.notify_waiters();
        }
        let hw = l.high_watermark(self.log.log_end_offset());
        let proposal =
            l.expansion(hw.max(self.high_watermark()), eligible).map(|isr| self.propose(&mut l, isr));
        drop(l);
        drop(role);
        self.advance_high_watermark(hw);
        proposal
    }

    /// An ISR shrink to propose if followers fell more than `lag_time_max_ms` behind.
    pub fn maybe_shrink_isr(&self, now_ms: i64, lag_time_max_ms: i64) -> Option<IsrProposal> {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return None };
        let mut l = state.lock().unwrap_or_else(|p| p.into_inner());
        let isr = l.shrink(now_ms, lag_time_max_ms)?;
        tracing::info!(
            topic = %self.topic,
            partition = self.index,
            isr = ?l.isr,
            new_isr = ?isr,
            lag_time_max_ms,
            "shrinking the ISR: followers fell behind"
        );
        Some(self.propose(&mut l, isr))
    }

    fn propose(&self, l: &mut LeaderIsr, isr: Vec<i32>) -> IsrProposal {
        // One change in flight per partition: what keeps the ISR queue (IsrChanges) bounded.
        debug_assert!(l.pending.is_none(), "an ISR change proposed while another is pending");
        let new_isr = isr
            .iter()
            .map(|&r| {
                (r, if r == self.node_id { -1 } else { l.followers.get(&r).map_or(-1, |f| f.broker_epoch) })
            })
            .collect();
        l.pending = Some(PendingIsr { isr });
        self.leader_only.store(false, Ordering::Release);
        IsrProposal {
            topic_id: self.topic_id,
            partition: self.index,
            leader_epoch: l.leader_epoch,
            partition_epoch: l.partition_epoch,
            new_isr,
        }
    }

    /// The controller answered an ISR change of `leader_epoch`: `Some((isr, partition
    /// epoch))` if committed, `None` if refused (the pending change is dropped; a later
    /// fetch or check proposes again).
    pub fn isr_change_answered(&self, leader_epoch: i32, committed: Option<(Vec<i32>, i32)>) {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return };
        let mut l = state.lock().unwrap_or_else(|p| p.into_inner());
        if l.leader_epoch != leader_epoch {
            return;
        }
        match committed {
            Some((isr, partition_epoch)) => {
                tracing::info!(topic = %self.topic, partition = self.index, ?isr, partition_epoch, "ISR change committed");
                let before = l.isr.len();
                l.committed(isr, partition_epoch);
                self.metrics.isr_changed(before, l.isr.len());
            }
            None => l.pending = None,
        }
        self.publish_isr(&l);
        drop(l);
        drop(role);
        self.maybe_advance_high_watermark();
        // Delayed produces recheck min.insync.replicas against the new ISR.
        self.hw_changed.notify_waiters();
    }

    /// Recomputes the leader's high watermark (after an ISR change).
    fn maybe_advance_high_watermark(&self) {
        let role = self.read_role();
        if let Role::Leader(state) = &*role {
            let hw =
                state.lock().unwrap_or_else(|p| p.into_inner()).high_watermark(self.log.log_end_offset());
            drop(role);
            self.advance_high_watermark(hw);
        }
    }

    /// As a follower: the leader's high watermark from a fetch response; ours is the
    /// smaller of it and our log end offset (never backwards).
    pub fn update_follower_high_watermark(&self, leader_hw: i64) {
        self.advance_high_watermark(leader_hw.min(self.log.log_end_offset()));
    }

    /// Moves the high watermark forward to `offset` (never backwards, never past the log
    /// end offset); wakes parked fetches and delayed produces when it moves.
    fn advance_high_watermark(&self, offset: i64) {
        let leo = self.log.log_end_offset();
        assert!(offset <= leo, "high watermark {offset} beyond log end offset {leo}");
        let old = self.high_watermark.fetch_max(offset, Ordering::AcqRel);
        if offset > old {
            self.tell_log(offset);
            self.parked_consumers.wake_all();
            self.hw_changed.notify_waiters();
        }
    }

    /// Passes a high watermark move to the log (it decides which completed transactions
    /// are stable); a closed log (shutdown, deletion) has nothing left to decide.
    fn tell_log(&self, hw: i64) {
        if let Err(e) = self.log.update_high_watermark(hw) {
            tracing::debug!(topic = %self.topic, partition = self.index, error = %e, "high watermark not passed to the log");
        }
    }

    /// As a follower of `fetched.leader` in `fetched.leader_epoch` (what the fetch that
    /// brought them was sent for): appends batches the leader sent, keeping their offsets
    /// and epochs. `Ok(None)` when this replica no longer follows that leader in that epoch
    /// (a role change landed while the fetch was in flight): the answer is stale and
    /// nothing is written. Checked under the role lock, so no role change can come between
    /// the check and the write (a new leader must never append an old leader's answer).
    pub fn append_as_follower(
        &self,
        records: Bytes,
        fetched: FetchedFrom,
    ) -> Result<Option<AppendInfo>, StorageError> {
        let role = self.read_role();
        if !self.follows(&role, fetched) {
            return Ok(None);
        }
        let info =
            self.log.append_as_follower(records).map_err(|e| self.write_failed(e, crate::clock::now_ms()))?;
        drop(role);
        self.write_health.succeeded(&self.topic, self.index, self.log.dir());
        Ok(Some(info))
    }

    /// Whether `role` (held) is following `fetched.leader` in `fetched.leader_epoch`.
    fn follows(&self, role: &Role, fetched: FetchedFrom) -> bool {
        matches!(role, Role::Follower { leader } if *leader == fetched.leader)
            && self.leader_epoch() == fetched.leader_epoch
    }

    /// Notes a failed append for the operator's log and hands the error back.
    fn write_failed(&self, e: StorageError, now_ms: i64) -> StorageError {
        self.write_health.failed(&self.topic, self.index, self.log.dir(), &e, now_ms);
        e
    }

    /// As a follower of `fetched.leader` in `fetched.leader_epoch`: cuts the log back to
    /// `offset` (divergence from that leader); the high watermark follows if it was above.
    /// Returns false, and cuts nothing, when this replica no longer follows that leader in
    /// that epoch (never truncate as leader: the log is the source of truth).
    pub fn truncate_to(&self, offset: i64, fetched: FetchedFrom) -> Result<bool, StorageError> {
        let role = self.read_role();
        if !self.follows(&role, fetched) {
            return Ok(false);
        }
        self.log.truncate_to(offset)?;
        drop(role);
        self.clamp_high_watermark();
        Ok(true)
    }

    /// As a follower of `fetched.leader` in `fetched.leader_epoch`, behind that leader's
    /// log start: empties the log and restarts it at `offset` (Kafka's
    /// `truncateFullyAndStartAt`); nothing if this replica no longer follows it.
    pub fn restart_log_at(&self, offset: i64, fetched: FetchedFrom) -> Result<(), StorageError> {
        let role = self.read_role();
        if !self.follows(&role, fetched) {
            return Ok(());
        }
        self.log.restart_at(offset)?;
        drop(role);
        self.high_watermark.store(offset, Ordering::Release);
        let _ = self.log.update_high_watermark(offset);
        Ok(())
    }

    /// After truncation or DeleteRecords the high watermark must not exceed the log end.
    pub(super) fn clamp_high_watermark(&self) {
        let leo = self.log.log_end_offset();
        self.high_watermark.fetch_min(leo, Ordering::AcqRel);
        self.tell_log(self.high_watermark());
    }

    /// Waits until the high watermark passes `offset` while this broker still leads in
    /// `leader_epoch`, or `deadline`.
    pub async fn wait_for_high_watermark(
        &self,
        offset: i64,
        leader_epoch: i32,
        deadline: tokio::time::Instant,
    ) -> Result<(), WaitError> {
        loop {
            let notified = self.hw_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let still_leading = || self.is_leader() && self.leader_epoch() == leader_epoch;
            if !still_leading() {
                return Err(WaitError::NotLeader);
            }
            let passed = self.high_watermark() > offset;
            // Re-check after reading the high watermark: only a high watermark this
            // leadership advanced counts.
            if !still_leading() {
                return Err(WaitError::NotLeader);
            }
            if passed {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(WaitError::Timeout);
            }
        }
    }

    /// The low watermark while leading (see [`crate::replication::isr::LeaderIsr::low_watermark`]);
    /// `None` on a follower.
    pub fn low_watermark(&self, alive: impl Fn(i32) -> bool) -> Option<i64> {
        let role = self.read_role();
        let Role::Leader(state) = &*role else { return None };
        let l = state.lock().unwrap_or_else(|p| p.into_inner());
        Some(l.low_watermark(self.log.log_start_offset(), alive))
    }

    /// Waits until every live replica's log start offset reached `offset` (Kafka's
    /// DelayedDeleteRecords), re-checking after each follower fetch; the low watermark
    /// then, or why not.
    pub async fn wait_for_low_watermark(
        &self,
        offset: i64,
        leader_epoch: i32,
        deadline: tokio::time::Instant,
        alive: impl Fn(i32) -> bool,
    ) -> Result<i64, (WaitError, i64)> {
        /// Counts a waiter while it waits, also when its future is dropped mid-wait.
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.low_watermark_waiters.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.low_watermark_waiters);
        loop {
            let notified = self.follower_fetched.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let low = match self.low_watermark(&alive) {
                Some(low) if self.leader_epoch() == leader_epoch => low,
                _ => break Err((WaitError::NotLeader, -1)),
            };
            if low >= offset {
                break Ok(low);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break Err((WaitError::Timeout, low));
            }
        }
    }

    /// The last stable offset: below it no transaction is open or undecided, and it
    /// never exceeds the high watermark (LSO <= HW <= LEO).
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        let lso = self.log.last_stable_offset().min(hw);
        debug_assert!(lso >= self.log.log_start_offset().min(hw));
        lso
    }

    /// Reads whole batches from `offset` for a consumer: nothing at or above the high
    /// watermark (`read_committed`: the last stable offset).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<LogReadInfo, StorageError> {
        let upper = if read_committed { self.last_stable_offset() } else { self.high_watermark() };
        self.log.read(offset, max_bytes, upper, min_one)
    }

    /// Reads up to the log end (a follower's fetch, or a coordinator loading its state
    /// as the new leader).
    pub fn read_to_log_end(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<LogReadInfo, StorageError> {
        self.log.read(offset, max_bytes, i64::MAX, min_one)
    }

    /// Reads record data for a fetch: see `fetch_read::read_for_fetch`.
    pub fn read_for_fetch(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        bound: i64,
    ) -> Result<RecordSet, super::ReadError> {
        super::fetch_read::read_for_fetch(self, offset, max_bytes, min_one, bound)
    }
}
