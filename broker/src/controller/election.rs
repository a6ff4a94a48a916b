//! Partition changes: who leads a partition and who is in its ISR, decided from the
//! metadata image alone (Kafka's `PartitionChangeBuilder`).
//!
//! The rules that keep acknowledged writes:
//! - a leader is only ever chosen from the ISR, in assignment order, among active
//!   (unfenced, not shutting down) brokers, unless unclean election is allowed;
//! - a broker leaving (fenced, shutting down) is removed from the ISR, except when it is
//!   the last member: then it stays, the partition goes offline (leader -1), and that
//!   broker, which holds everything acknowledged, is the one elected when it returns;
//! - every change bumps the partition epoch; a leader change bumps the leader epoch.

use crate::metadata::{MetadataImage, PartitionRecord};

/// No leader: the partition is offline.
pub const NO_LEADER: i32 = -1;

/// Why an election was done (for logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// Only from the ISR.
    Clean,
    /// From any live replica when no ISR member is live (data loss accepted).
    Unclean,
}

/// The partition with `leader` and `isr`, epochs bumped; `None` if nothing changes.
pub fn change(current: &PartitionRecord, leader: i32, isr: Vec<i32>) -> Option<PartitionRecord> {
    if leader == current.leader && isr == current.isr {
        return None;
    }
    let mut next = current.clone();
    if leader != current.leader {
        next.leader_epoch = current.leader_epoch + 1;
    }
    next.leader = leader;
    next.isr = isr;
    next.partition_epoch = current.partition_epoch + 1;
    debug_assert!(next.leader == NO_LEADER || next.isr.contains(&next.leader), "leader outside the ISR");
    Some(next)
}

/// The first active replica, in assignment order, that `eligible` accepts.
fn first_active(image: &MetadataImage, p: &PartitionRecord, eligible: impl Fn(i32) -> bool) -> Option<i32> {
    p.replicas.iter().copied().find(|&r| eligible(r) && image.is_active(r))
}

/// The leader the partition should have with its current ISR: the current leader if it
/// is still active and in the ISR, else the first active ISR member in assignment
/// order, else (only with `unclean`) the first active replica, which then becomes the
/// whole ISR.
pub fn elect(image: &MetadataImage, p: &PartitionRecord, unclean: bool) -> (i32, Vec<i32>, Election) {
    if p.leader != NO_LEADER && p.isr.contains(&p.leader) && image.is_active(p.leader) {
        return (p.leader, p.isr.clone(), Election::Clean);
    }
    if let Some(leader) = first_active(image, p, |r| p.isr.contains(&r)) {
        return (leader, p.isr.clone(), Election::Clean);
    }
    if unclean {
        if let Some(leader) = first_active(image, p, |_| true) {
            return (leader, vec![leader], Election::Unclean);
        }
    }
    (NO_LEADER, p.isr.clone(), Election::Clean)
}

/// The change when `broker` leaves (fenced or shutting down): out of the ISR unless it
/// is the last member, and a new leader if it led.
pub fn without_broker(
    image: &MetadataImage,
    p: &PartitionRecord,
    broker: i32,
    unclean: bool,
) -> Option<PartitionRecord> {
    let mut isr: Vec<i32> = p.isr.iter().copied().filter(|&r| r != broker).collect();
    if isr.is_empty() {
        isr = p.isr.clone();
    }
    let shrunk = PartitionRecord { isr, ..p.clone() };
    let (leader, isr, kind) = elect(image, &shrunk, unclean);
    log_unclean(p, leader, kind);
    change(p, leader, isr)
}

/// The change that gives an offline partition a leader, if one can be had now.
pub fn revive(image: &MetadataImage, p: &PartitionRecord, unclean: bool) -> Option<PartitionRecord> {
    let (leader, isr, kind) = elect(image, p, unclean);
    if leader == NO_LEADER {
        return None;
    }
    log_unclean(p, leader, kind);
    change(p, leader, isr)
}

/// The change that makes the preferred replica (first in the assignment) the leader, if
/// it is active, in the ISR, and not already leading.
pub fn preferred(
    image: &MetadataImage,
    p: &PartitionRecord,
) -> Result<Option<PartitionRecord>, PreferredError> {
    let Some(&first) = p.replicas.first() else {
        return Err(PreferredError::NotAvailable);
    };
    if p.leader == first {
        return Ok(None);
    }
    if !p.isr.contains(&first) || !image.is_active(first) {
        return Err(PreferredError::NotAvailable);
    }
    Ok(change(p, first, p.isr.clone()))
}

/// Why a preferred election could not be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferredError {
    /// The preferred replica is not in the ISR or not active
    /// (PREFERRED_LEADER_NOT_AVAILABLE).
    NotAvailable,
}

fn log_unclean(p: &PartitionRecord, leader: i32, kind: Election) {
    if kind == Election::Unclean {
        tracing::warn!(
            topic_id = %String::from(p.topic_id),
            partition = p.partition,
            leader,
            "unclean leader election: a replica outside the ISR leads; acknowledged records may be lost"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{BrokerRegistrationRecord, MetadataRecord, TopicId};
    use strata_protocol::codec::Uuid;

    fn image(active: &[i32], fenced: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (i, &b) in active.iter().chain(fenced).enumerate() {
            let index = 10 + i as u64;
            image.apply_batch(
                index,
                &[MetadataRecord::RegisterBroker(BrokerRegistrationRecord {
                    node_id: b,
                    incarnation_id: String::new(),
                    endpoints: vec![],
                    rack: None,
                })],
            );
            if active.contains(&b) {
                image.apply_batch(
                    index,
                    &[MetadataRecord::UnfenceBroker { node_id: b, broker_epoch: index as i64 }],
                );
            }
        }
        image
    }

    fn p(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord {
            topic_id: TopicId(Uuid([1; 16])),
            partition: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 5,
            partition_epoch: 9,
            adding_replicas: vec![],
            removing_replicas: vec![],
        }
    }

    #[test]
    fn a_leaving_follower_leaves_the_isr_and_the_leader_stays() {
        let img = image(&[1, 2], &[3]);
        let next = without_broker(&img, &p(&[1, 2, 3], &[1, 2, 3], 1), 3, false).expect("change");
        assert_eq!((next.leader, next.isr.clone()), (1, vec![1, 2]));
        assert_eq!((next.leader_epoch, next.partition_epoch), (5, 10), "no leader change: same leader epoch");
    }

    #[test]
    fn a_leaving_leader_is_replaced_by_the_next_isr_member() {
        let img = image(&[2, 3], &[1]);
        let next = without_broker(&img, &p(&[1, 2, 3], &[1, 3], 1), 1, false).expect("change");
        assert_eq!((next.leader, next.isr.clone()), (3, vec![3]), "2 is not in the ISR");
        assert_eq!(next.leader_epoch, 6);
    }

    #[test]
    fn the_last_isr_member_stays_and_the_partition_goes_offline() {
        let img = image(&[2, 3], &[1]);
        let next = without_broker(&img, &p(&[1, 2, 3], &[1], 1), 1, false).expect("change");
        assert_eq!((next.leader, next.isr.clone()), (NO_LEADER, vec![1]));
        // When 1 comes back it is elected, not 2 or 3.
        let back = image(&[1, 2, 3], &[]);
        let revived = revive(&back, &next, false).expect("revived");
        assert_eq!((revived.leader, revived.leader_epoch), (1, 7));
        assert!(revive(&img, &next, false).is_none(), "no ISR member alive: stays offline");
    }

    #[test]
    fn unclean_election_takes_any_live_replica_only_when_allowed() {
        let img = image(&[2, 3], &[1]);
        let offline = p(&[1, 2, 3], &[1], NO_LEADER);
        assert!(revive(&img, &offline, false).is_none());
        let next = revive(&img, &offline, true).expect("unclean");
        assert_eq!((next.leader, next.isr.clone()), (2, vec![2]));
    }

    #[test]
    fn preferred_election_needs_the_first_replica_in_sync_and_active() {
        let img = image(&[1, 2, 3], &[]);
        assert_eq!(preferred(&img, &p(&[1, 2, 3], &[1, 2, 3], 1)), Ok(None));
        let next = preferred(&img, &p(&[1, 2, 3], &[1, 2, 3], 2)).expect("ok").expect("change");
        assert_eq!((next.leader, next.leader_epoch), (1, 6));
        assert_eq!(preferred(&img, &p(&[1, 2, 3], &[2, 3], 2)), Err(PreferredError::NotAvailable));
    }
}
