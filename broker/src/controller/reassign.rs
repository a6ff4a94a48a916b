//! Partition reassignment on the active controller (KIP-455, Kafka's
//! `ReplicationControlManager.alterPartitionReassignments` and `PartitionChangeBuilder`):
//! AlterPartitionReassignments starts or cancels moves, ListPartitionReassignments lists
//! them, and the ISR changes leaders send complete them.
//!
//! A move of a partition from its replicas `C` to a target `T` is one record: replicas
//! become `T` followed by the rest of `C`, with `adding = T - C` and `removing = C - T`.
//! The brokers in `adding` host the partition and fetch it like any follower; once the
//! leader has let every replica of `T` into the ISR, a second record drops the others
//! (replicas `T`, ISR intersected with `T`, and a new leader from `T` if the old one is
//! not in it). A removed broker then deletes its copy, as one no longer assigned does.
//! Nothing acknowledged is lost on the way: the ISR only ever loses replicas once every
//! target replica is in it, and a leader is only elected from the ISR.

use super::election::{self, NO_LEADER};
use super::pending::Pending;
use super::ControllerState;
use crate::metadata::{MetadataImage, MetadataRecord, PartitionRecord};
use std::sync::Arc;
use strata_protocol::ErrorCode;

/// One partition's requested change: a target replica list, or `None` to cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignRequest {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The target replicas in preference order, or `None` to cancel.
    pub target: Option<Vec<i32>>,
}

/// The outcome for one partition: `Ok` when started, completed or cancelled.
pub type ReassignOutcome = Result<(), (ErrorCode, String)>;

impl ControllerState {
    /// Decides an AlterPartitionReassignments request: the records to write and one
    /// outcome per change, in request order. Without `allow_rf_change` (KIP-860) a
    /// target of another size than the partition's replica set is refused.
    pub fn alter_reassignments(
        &self,
        image: &Arc<MetadataImage>,
        changes: &[ReassignRequest],
        allow_rf_change: bool,
    ) -> (Vec<MetadataRecord>, Vec<ReassignOutcome>) {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(changes.len());
        for change in changes {
            let Some(current) = pending.image().partition(&change.topic, change.partition).cloned() else {
                outcomes.push(Err((
                    ErrorCode::UnknownTopicOrPartition,
                    format!("{}-{} does not exist", change.topic, change.partition),
                )));
                continue;
            };
            let unclean = self.unclean_allowed(pending.image(), &change.topic);
            let next = match &change.target {
                Some(target) => start(pending.image(), &current, target, allow_rf_change, unclean),
                None => cancel(pending.image(), &current, unclean),
            };
            match next {
                Ok(next) => {
                    if next != current {
                        tracing::info!(
                            topic = %change.topic,
                            partition = change.partition,
                            replicas = ?next.replicas,
                            adding = ?next.adding_replicas,
                            removing = ?next.removing_replicas,
                            leader = next.leader,
                            "partition reassignment {}",
                            if change.target.is_none() { "cancelled" } else { "started" }
                        );
                        pending.push(MetadataRecord::Partition(next));
                    }
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        (pending.into_records(), outcomes)
    }

    /// The reassignments in progress, by topic name: every one with `None`, else those
    /// of the named partitions (unknown ones are left out, as Kafka does).
    pub fn list_reassignments(
        &self,
        image: &MetadataImage,
        wanted: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<(String, Vec<PartitionRecord>)> {
        let in_progress = |p: &&PartitionRecord| is_reassigning(p);
        match wanted {
            None => {
                let mut out: Vec<(String, Vec<PartitionRecord>)> = image
                    .topics
                    .values()
                    .map(|t| (t.name.clone(), t.partitions.iter().filter(in_progress).cloned().collect()))
                    .filter(|(_, ps): &(String, Vec<PartitionRecord>)| !ps.is_empty())
                    .collect();
                out.sort_by(|a, b| a.0.cmp(&b.0));
                out
            }
            Some(wanted) => wanted
                .iter()
                .filter_map(|(name, indexes)| {
                    let t = image.topic(name)?;
                    let ps: Vec<PartitionRecord> =
                        indexes.iter().filter_map(|&i| t.partition(i)).filter(in_progress).cloned().collect();
                    (!ps.is_empty()).then(|| (name.clone(), ps))
                })
                .collect(),
        }
    }
}

/// True while a reassignment of `p` is in progress.
pub fn is_reassigning(p: &PartitionRecord) -> bool {
    !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty()
}

/// The replicas `p` had before its reassignment began (all of them if none is going on).
fn original_replicas(p: &PartitionRecord) -> Vec<i32> {
    p.replicas.iter().copied().filter(|r| !p.adding_replicas.contains(r)).collect()
}

fn invalid(message: String) -> (ErrorCode, String) {
    (ErrorCode::InvalidReplicaAssignment, message)
}

/// The change that starts moving `current` to `target` (from its original replicas, so
/// a new target replaces a reassignment in progress), completed at once when every
/// target replica is in the ISR already.
fn start(
    image: &MetadataImage,
    current: &PartitionRecord,
    target: &[i32],
    allow_rf_change: bool,
    unclean: bool,
) -> Result<PartitionRecord, (ErrorCode, String)> {
    if target.is_empty() {
        return Err(invalid("the target replica list is empty".into()));
    }
    let mut distinct = target.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != target.len() {
        return Err(invalid(format!("the target replicas {target:?} name a broker twice")));
    }
    if let Some(r) = target.iter().find(|&&r| r < 0 || image.broker(r).is_none()) {
        return Err(invalid(format!("broker {r} in the target replicas is not registered")));
    }
    let original = original_replicas(current);
    if !allow_rf_change && target.len() != original.len() {
        return Err((
            ErrorCode::InvalidReplicationFactor,
            format!("the replication factor would change from {} to {}", original.len(), target.len()),
        ));
    }
    let adding: Vec<i32> = target.iter().copied().filter(|r| !original.contains(r)).collect();
    let removing: Vec<i32> = original.iter().copied().filter(|r| !target.contains(r)).collect();
    let mut replicas = target.to_vec();
    replicas.extend(removing.iter().copied());
    let isr: Vec<i32> = current.isr.iter().copied().filter(|r| replicas.contains(r)).collect();
    if isr.is_empty() {
        return Err(invalid(format!(
            "no in-sync replica of the partition ({:?}) would remain a replica",
            current.isr
        )));
    }
    let next = PartitionRecord {
        replicas,
        isr,
        adding_replicas: adding,
        removing_replicas: removing,
        ..current.clone()
    };
    let next = completed(&next).unwrap_or(next);
    Ok(settle(image, current, next, unclean))
}

/// The change that puts `current` back on its original replicas.
fn cancel(
    image: &MetadataImage,
    current: &PartitionRecord,
    unclean: bool,
) -> Result<PartitionRecord, (ErrorCode, String)> {
    if !is_reassigning(current) {
        return Err((
            ErrorCode::NoReassignmentInProgress,
            "no reassignment of the partition is in progress".into(),
        ));
    }
    let replicas = original_replicas(current);
    let isr: Vec<i32> = current.isr.iter().copied().filter(|r| replicas.contains(r)).collect();
    if isr.is_empty() {
        return Err(invalid(format!(
            "none of the original replicas {replicas:?} is in sync (ISR {:?}): cancelling would lose records",
            current.isr
        )));
    }
    let next = PartitionRecord {
        replicas,
        isr,
        adding_replicas: vec![],
        removing_replicas: vec![],
        ..current.clone()
    };
    Ok(settle(image, current, next, unclean))
}

/// `p` with its reassignment done, if every target replica is in the ISR: replicas the
/// target, the ISR cut to it. Epochs and leader are left to [`settle`].
pub fn completed(p: &PartitionRecord) -> Option<PartitionRecord> {
    if !is_reassigning(p) {
        return None;
    }
    let target: Vec<i32> = p.replicas.iter().copied().filter(|r| !p.removing_replicas.contains(r)).collect();
    if !target.iter().all(|r| p.isr.contains(r)) {
        return None;
    }
    let isr = p.isr.iter().copied().filter(|r| target.contains(r)).collect();
    Some(PartitionRecord {
        replicas: target,
        isr,
        adding_replicas: vec![],
        removing_replicas: vec![],
        ..p.clone()
    })
}

/// `next`, a change of `current`, with a leader from its ISR (the current one if it is
/// still eligible) and its epochs bumped: the partition epoch always, the leader epoch
/// when the leader changes.
pub fn settle(
    image: &MetadataImage,
    current: &PartitionRecord,
    next: PartitionRecord,
    unclean: bool,
) -> PartitionRecord {
    let (leader, isr, _) = election::elect(image, &next, unclean);
    let mut next = PartitionRecord { leader, isr, ..next };
    if leader == NO_LEADER && current.leader != NO_LEADER && next.isr.contains(&current.leader) {
        // No eligible leader now (fenced): keep the one the ISR has, as an offline
        // partition keeps its last ISR member, rather than dropping leadership here.
        next.leader = current.leader;
    }
    next.leader_epoch = current.leader_epoch + i32::from(next.leader != current.leader);
    next.partition_epoch = current.partition_epoch + 1;
    debug_assert!(next.leader == NO_LEADER || next.isr.contains(&next.leader), "leader outside the ISR");
    debug_assert!(next.leader_epoch >= current.leader_epoch, "leader epochs never go back");
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::tests::{cluster, topic};

    fn request(topic: &str, target: Option<Vec<i32>>) -> ReassignRequest {
        ReassignRequest { topic: topic.into(), partition: 0, target }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        let index = image.applied_index + 1;
        image.apply_batch(index, records);
    }

    #[test]
    fn a_move_adds_the_new_replicas_first_and_drops_the_old_once_they_are_in_sync() {
        let (mut image, state) = cluster(&[1, 2, 3, 4]);
        topic(&mut image, "t", &[vec![1, 2, 3]]);
        let (records, outcomes) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![4, 2, 3]))], true);
        assert_eq!(outcomes, vec![Ok(())]);
        apply(&mut image, &records);
        let p = image.partition("t", 0).expect("t-0").clone();
        assert_eq!(p.replicas, vec![4, 2, 3, 1]);
        assert_eq!((p.adding_replicas.clone(), p.removing_replicas.clone()), (vec![4], vec![1]));
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1), "the leader stays for now");
        assert_eq!(p.isr, vec![1, 2, 3]);
        assert_eq!(state.list_reassignments(&image, None).len(), 1);

        // Broker 4 caught up: the leader's AlterPartition completes the move.
        let done = completed(&PartitionRecord { isr: vec![1, 2, 3, 4], ..p.clone() }).expect("complete");
        let done = settle(&image, &p, done, false);
        assert_eq!(done.replicas, vec![4, 2, 3]);
        assert_eq!(done.isr, vec![2, 3, 4]);
        assert!(done.adding_replicas.is_empty() && done.removing_replicas.is_empty());
        assert_eq!(done.leader, 4, "the old leader left: the first in-sync target replica leads");
        assert_eq!((done.leader_epoch, done.partition_epoch), (1, 2));
    }

    #[test]
    fn a_target_already_in_sync_completes_at_once() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        topic(&mut image, "t", &[vec![1, 2, 3]]);
        let (records, outcomes) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![2, 3]))], true);
        assert_eq!(outcomes, vec![Ok(())]);
        apply(&mut image, &records);
        let p = image.partition("t", 0).expect("t-0");
        assert_eq!((p.replicas.clone(), p.isr.clone(), p.leader), (vec![2, 3], vec![2, 3], 2));
        assert!(!is_reassigning(p));
        assert!(state.list_reassignments(&image, None).is_empty());
    }

    #[test]
    fn cancelling_goes_back_to_the_original_replicas() {
        let (mut image, state) = cluster(&[1, 2, 3, 4]);
        topic(&mut image, "t", &[vec![1, 2]]);
        let (records, _) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![3, 4]))], true);
        apply(&mut image, &records);
        assert_eq!(image.partition("t", 0).expect("t-0").replicas, vec![3, 4, 1, 2]);
        let (records, outcomes) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", None)], true);
        assert_eq!(outcomes, vec![Ok(())]);
        apply(&mut image, &records);
        let p = image.partition("t", 0).expect("t-0");
        assert_eq!((p.replicas.clone(), p.isr.clone(), p.leader), (vec![1, 2], vec![1, 2], 1));
        assert!(!is_reassigning(p));
        let (records, outcomes) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", None)], true);
        assert!(records.is_empty());
        assert_eq!(outcomes[0].as_ref().map_err(|e| e.0), Err(ErrorCode::NoReassignmentInProgress));
    }

    #[test]
    fn a_new_target_replaces_the_one_in_progress() {
        let (mut image, state) = cluster(&[1, 2, 3, 4, 5]);
        topic(&mut image, "t", &[vec![1, 2]]);
        let (records, _) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![1, 3]))], true);
        apply(&mut image, &records);
        let (records, _) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![1, 4]))], true);
        apply(&mut image, &records);
        let p = image.partition("t", 0).expect("t-0");
        assert_eq!(p.replicas, vec![1, 4, 2], "3 was being added for the old target only");
        assert_eq!((p.adding_replicas.clone(), p.removing_replicas.clone()), (vec![4], vec![2]));
    }

    #[test]
    fn bad_targets_are_refused_with_kafkas_codes() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        topic(&mut image, "t", &[vec![1, 2]]);
        let image = Arc::new(image);
        let code = |target: Option<Vec<i32>>, topic: &str, allow: bool| {
            let (records, outcomes) = state.alter_reassignments(&image, &[request(topic, target)], allow);
            let refused = outcomes[0].as_ref().err().map(|e| e.0);
            assert_eq!(records.is_empty(), refused.is_some(), "a record exactly when accepted");
            refused
        };
        assert_eq!(code(Some(vec![]), "t", true), Some(ErrorCode::InvalidReplicaAssignment));
        assert_eq!(code(Some(vec![1, 1]), "t", true), Some(ErrorCode::InvalidReplicaAssignment));
        assert_eq!(code(Some(vec![1, 9]), "t", true), Some(ErrorCode::InvalidReplicaAssignment));
        assert_eq!(code(Some(vec![1, 2, 3]), "t", false), Some(ErrorCode::InvalidReplicationFactor));
        assert_eq!(code(Some(vec![2, 3]), "nope", true), Some(ErrorCode::UnknownTopicOrPartition));
        assert_eq!(code(Some(vec![2, 1]), "t", false), None, "a reorder keeps the factor");
    }

    #[test]
    fn a_reorder_changes_the_preferred_leader_only() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        topic(&mut image, "t", &[vec![1, 2, 3]]);
        let (records, _) =
            state.alter_reassignments(&Arc::new(image.clone()), &[request("t", Some(vec![3, 1, 2]))], true);
        apply(&mut image, &records);
        let p = image.partition("t", 0).expect("t-0");
        assert_eq!((p.replicas.clone(), p.leader, p.leader_epoch), (vec![3, 1, 2], 1, 0));
        assert!(!is_reassigning(p));
    }
}
