//! AlterPartition on the active controller: a partition leader asks to shrink or expand
//! its ISR. The request carries the leader epoch and partition epoch the leader knows;
//! anything stale is refused, so two concurrent changes cannot both win and an old
//! leader cannot overwrite a newer one's ISR (Kafka's
//! `ReplicationControlManager.alterPartition`, KIP-497, KIP-903).

use super::pending::Pending;
use super::ControllerState;
use crate::metadata::{MetadataImage, MetadataRecord, PartitionRecord};
use std::sync::Arc;
use strata_protocol::codec::Uuid;
use strata_protocol::ErrorCode;

/// One partition's requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// The topic.
    pub topic_id: Uuid,
    /// The partition.
    pub partition: i32,
    /// The leader epoch the leader knows.
    pub leader_epoch: i32,
    /// The partition epoch the leader knows.
    pub partition_epoch: i32,
    /// The ISR it wants, each member with its broker epoch (-1: not checked).
    pub new_isr: Vec<(i32, i64)>,
}

/// The whole request of one leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterIsr {
    /// The leader sending it.
    pub broker_id: i32,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The changes, per partition.
    pub changes: Vec<IsrChange>,
    /// Request version: below 2, ineligible replicas are OPERATION_NOT_ATTEMPTED.
    pub version: i16,
}

/// The outcome for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrOutcome {
    /// Applied (or already so): the partition's state once written.
    Done(PartitionRecord),
    /// Refused with this error.
    Refused(ErrorCode),
}

impl ControllerState {
    /// Decides an AlterPartition request: the records to write, and per change its
    /// outcome (in request order). A stale broker epoch refuses everything.
    pub fn alter_partition(
        &self,
        image: &Arc<MetadataImage>,
        request: &AlterIsr,
    ) -> Result<(Vec<MetadataRecord>, Vec<IsrOutcome>), ErrorCode> {
        let registered = image.broker(request.broker_id).is_some_and(|b| b.epoch == request.broker_epoch);
        if !registered {
            return Err(ErrorCode::StaleBrokerEpoch);
        }
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(request.changes.len());
        for change in &request.changes {
            let Some(topic) = pending.image().topic_by_id(change.topic_id) else {
                let code = if request.version >= 2 {
                    ErrorCode::UnknownTopicId
                } else {
                    ErrorCode::UnknownTopicOrPartition
                };
                outcomes.push(IsrOutcome::Refused(code));
                continue;
            };
            let Some(current) = topic.partition(change.partition).cloned() else {
                outcomes.push(IsrOutcome::Refused(ErrorCode::UnknownTopicOrPartition));
                continue;
            };
            match validate(pending.image(), request, change, &current) {
                Err(code) => {
                    tracing::info!(
                        topic = %topic.name,
                        partition = change.partition,
                        leader = request.broker_id,
                        error = code.name(),
                        "AlterPartition refused"
                    );
                    outcomes.push(IsrOutcome::Refused(code));
                }
                Ok(isr) if isr == current.isr => outcomes.push(IsrOutcome::Done(current)),
                Ok(isr) => {
                    let changed = PartitionRecord { isr, ..current.clone() };
                    // The ISR change may complete a reassignment (its last target replica
                    // caught up): then the same record drops the replicas it removes.
                    let next = match super::reassign::completed(&changed) {
                        Some(done) => {
                            let unclean = self.unclean_allowed(pending.image(), &topic.name);
                            let next = super::reassign::settle(pending.image(), &current, done, unclean);
                            tracing::info!(
                                topic = %topic.name,
                                partition = change.partition,
                                replicas = ?next.replicas,
                                leader = next.leader,
                                "partition reassignment completed"
                            );
                            next
                        }
                        None => PartitionRecord { partition_epoch: current.partition_epoch + 1, ..changed },
                    };
                    tracing::info!(
                        topic = %topic.name,
                        partition = change.partition,
                        isr = ?next.isr,
                        partition_epoch = next.partition_epoch,
                        "ISR changed"
                    );
                    outcomes.push(IsrOutcome::Done(next.clone()));
                    pending.push(MetadataRecord::Partition(next));
                }
            }
        }
        Ok((pending.into_records(), outcomes))
    }
}

fn validate(
    image: &MetadataImage,
    request: &AlterIsr,
    change: &IsrChange,
    current: &PartitionRecord,
) -> Result<Vec<i32>, ErrorCode> {
    if change.leader_epoch > current.leader_epoch || change.partition_epoch > current.partition_epoch {
        // The leader knows more than we do: we are probably not the active controller.
        return Err(ErrorCode::NotController);
    }
    if change.leader_epoch < current.leader_epoch {
        return Err(ErrorCode::FencedLeaderEpoch);
    }
    if request.broker_id != current.leader {
        return Err(ErrorCode::InvalidRequest);
    }
    if change.partition_epoch < current.partition_epoch {
        return Err(ErrorCode::InvalidUpdateVersion);
    }
    let isr: Vec<i32> = change.new_isr.iter().map(|(id, _)| *id).collect();
    let mut distinct = isr.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != isr.len() || isr.iter().any(|r| !current.replicas.contains(r)) {
        return Err(ErrorCode::InvalidRequest);
    }
    if !isr.contains(&current.leader) {
        return Err(ErrorCode::InvalidRequest);
    }
    let ineligible = change.new_isr.iter().any(|&(id, epoch)| match image.broker(id) {
        None => true,
        Some(b) => b.in_controlled_shutdown || b.fenced || (epoch != -1 && epoch != b.epoch),
    });
    if ineligible {
        return Err(if request.version > 1 {
            ErrorCode::IneligibleReplica
        } else {
            ErrorCode::OperationNotAttempted
        });
    }
    Ok(isr)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cluster, topic};
    use super::*;

    fn request(image: &MetadataImage, leader: i32, change: IsrChange) -> AlterIsr {
        AlterIsr {
            broker_id: leader,
            broker_epoch: image.broker(leader).expect("b").epoch,
            changes: vec![change],
            version: 3,
        }
    }

    fn shrink_to(id: Uuid, isr: &[i32], leader_epoch: i32, partition_epoch: i32) -> IsrChange {
        IsrChange {
            topic_id: id,
            partition: 0,
            leader_epoch,
            partition_epoch,
            new_isr: isr.iter().map(|&b| (b, -1)).collect(),
        }
    }

    #[test]
    fn a_valid_shrink_bumps_the_partition_epoch_only() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        let id = topic(&mut image, "t", &[vec![1, 2, 3]]).0;
        let image = Arc::new(image);
        let (records, outcomes) =
            state.alter_partition(&image, &request(&image, 1, shrink_to(id, &[1, 2], 0, 0))).expect("ok");
        assert_eq!(records.len(), 1);
        match &outcomes[0] {
            IsrOutcome::Done(p) => {
                assert_eq!((p.isr.clone(), p.leader_epoch, p.partition_epoch), (vec![1, 2], 0, 1))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_expansion_that_brings_the_last_target_replica_in_completes_a_reassignment() {
        use crate::controller::reassign::ReassignRequest;
        let (mut image, state) = cluster(&[1, 2, 3, 4]);
        let id = topic(&mut image, "t", &[vec![1, 2, 3]]).0;
        let move_to = ReassignRequest { topic: "t".into(), partition: 0, target: Some(vec![1, 2, 4]) };
        let (records, _) = state.alter_reassignments(&Arc::new(image.clone()), &[move_to], true);
        image.apply_batch(600, &records);
        let image = Arc::new(image);
        let (records, outcomes) = state
            .alter_partition(&image, &request(&image, 1, shrink_to(id, &[1, 2, 3, 4], 0, 1)))
            .expect("ok");
        assert_eq!(records.len(), 1, "one record: the ISR change and the completion together");
        match &outcomes[0] {
            IsrOutcome::Done(p) => {
                assert_eq!((p.replicas.clone(), p.isr.clone()), (vec![1, 2, 4], vec![1, 2, 4]));
                assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
                assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 2), "the leader stays");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stale_requests_are_refused_with_kafkas_codes() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        let id = topic(&mut image, "t", &[vec![1, 2, 3]]).0;
        let image = Arc::new(image);
        let refused = |req: AlterIsr| match state.alter_partition(&image, &req).expect("ok").1.remove(0) {
            IsrOutcome::Refused(code) => code,
            IsrOutcome::Done(p) => panic!("accepted {p:?}"),
        };
        assert_eq!(
            refused(request(&image, 2, shrink_to(id, &[2], 0, 0))),
            ErrorCode::InvalidRequest,
            "not the leader"
        );
        assert_eq!(refused(request(&image, 1, shrink_to(id, &[1], 1, 0))), ErrorCode::NotController);
        let mut bumped = (*image).clone();
        let mut p = bumped.partition("t", 0).expect("p").clone();
        p.leader_epoch = 2;
        p.partition_epoch = 2;
        bumped.apply_batch(500, &[MetadataRecord::Partition(p)]);
        let bumped = Arc::new(bumped);
        let req = request(&bumped, 1, shrink_to(id, &[1], 1, 1));
        assert!(matches!(
            state.alter_partition(&bumped, &req).expect("ok").1[0],
            IsrOutcome::Refused(ErrorCode::FencedLeaderEpoch)
        ));
        let req = request(&bumped, 1, shrink_to(id, &[1], 2, 1));
        assert!(matches!(
            state.alter_partition(&bumped, &req).expect("ok").1[0],
            IsrOutcome::Refused(ErrorCode::InvalidUpdateVersion)
        ));
        assert_eq!(
            refused(request(&image, 1, shrink_to(id, &[2, 3], 0, 0))),
            ErrorCode::InvalidRequest,
            "ISR without its leader"
        );
        assert_eq!(
            refused(request(&image, 1, shrink_to(id, &[1, 4], 0, 0))),
            ErrorCode::InvalidRequest,
            "not a replica"
        );
        let stale = AlterIsr { broker_epoch: 1, ..request(&image, 1, shrink_to(id, &[1], 0, 0)) };
        assert_eq!(state.alter_partition(&image, &stale).expect_err("stale"), ErrorCode::StaleBrokerEpoch);
    }

    #[test]
    fn fenced_or_restarted_replicas_may_not_join() {
        let (mut image, state) = cluster(&[1, 2, 3]);
        let id = topic(&mut image, "t", &[vec![1, 2, 3]]).0;
        let epoch3 = image.broker(3).expect("3").epoch;
        let mut p = image.partition("t", 0).expect("p").clone();
        p.isr = vec![1, 2];
        p.partition_epoch = 1;
        image.apply_batch(
            600,
            &[MetadataRecord::Partition(p), MetadataRecord::FenceBroker { node_id: 3, broker_epoch: epoch3 }],
        );
        let image = Arc::new(image);
        let expand = IsrChange {
            topic_id: id,
            partition: 0,
            leader_epoch: 0,
            partition_epoch: 1,
            new_isr: vec![(1, -1), (2, -1), (3, epoch3)],
        };
        let outcome = state.alter_partition(&image, &request(&image, 1, expand.clone())).expect("ok").1;
        assert_eq!(outcome, vec![IsrOutcome::Refused(ErrorCode::IneligibleReplica)]);
        let old = AlterIsr { version: 1, ..request(&image, 1, expand) };
        assert_eq!(
            state.alter_partition(&image, &old).expect("ok").1,
            vec![IsrOutcome::Refused(ErrorCode::OperationNotAttempted)]
        );
    }
}
