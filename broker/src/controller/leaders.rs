//! Elections the controller runs on request or on its own: ElectLeaders (preferred or
//! unclean), automatic leader rebalancing (`auto.leader.rebalance.enable`), and unclean
//! elections of offline partitions whose topic allows them.

use super::election::{self, PreferredError, NO_LEADER};
use super::pending::Pending;
use super::ControllerState;
use crate::metadata::{MetadataImage, MetadataRecord};
use std::collections::HashMap;
use std::sync::Arc;
use strata_protocol::ErrorCode;

/// ElectLeaders' election type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: move leadership to the preferred replica.
    Preferred,
    /// 1: elect any live replica of an offline partition.
    Unclean,
}

/// The outcome for one partition of an ElectLeaders request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionResult {
    /// Topic name.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// NONE when a leader was elected.
    pub error: ErrorCode,
    /// Why not, for the client.
    pub message: Option<String>,
}

impl ControllerState {
    /// ElectLeaders for `targets` (None: every partition, reporting only those elected
    /// or failed, as Kafka does).
    pub fn elect_leaders(
        &self,
        image: &Arc<MetadataImage>,
        kind: ElectionType,
        targets: Option<&[(String, i32)]>,
    ) -> (Vec<MetadataRecord>, Vec<ElectionResult>) {
        let all: Vec<(String, i32)>;
        let (list, report_not_needed) = match targets {
            Some(t) => (t, true),
            None => {
                all = image
                    .topics
                    .values()
                    .flat_map(|t| (0..t.partitions.len() as i32).map(move |i| (t.name.clone(), i)))
                    .collect();
                (all.as_slice(), false)
            }
        };
        let mut pending = Pending::new(image);
        let mut results = Vec::new();
        for (topic, partition) in list {
            let Some(p) = pending.image().partition(topic, *partition).cloned() else {
                // Kafka's texts (kafka-leader-election prints them).
                let message = if pending.image().topic(topic).is_none() {
                    format!("No such topic as {topic}")
                } else {
                    format!("No such partition as {topic}-{partition}")
                };
                results.push(ElectionResult {
                    topic: topic.clone(),
                    partition: *partition,
                    error: ErrorCode::UnknownTopicOrPartition,
                    message: Some(message),
                });
                continue;
            };
            let outcome = match kind {
                ElectionType::Preferred => match election::preferred(pending.image(), &p) {
                    Ok(None) => Err((ErrorCode::ElectionNotNeeded, "the preferred replica already leads")),
                    Ok(Some(change)) => Ok(change),
                    Err(PreferredError::NotAvailable) => Err((
                        ErrorCode::PreferredLeaderNotAvailable,
                        "the preferred replica is not in the ISR or not alive",
                    )),
                },
                ElectionType::Unclean => {
                    if p.leader != NO_LEADER {
                        Err((ErrorCode::ElectionNotNeeded, "the partition has a leader"))
                    } else {
                        election::revive(pending.image(), &p, true)
                            .ok_or((ErrorCode::EligibleLeadersNotAvailable, "no replica is alive"))
                    }
                }
            };
            match outcome {
                Ok(change) => {
                    tracing::info!(
                        topic,
                        partition,
                        leader = change.leader,
                        ?kind,
                        "leader elected on request"
                    );
                    pending.push(MetadataRecord::Partition(change));
                    results.push(ElectionResult {
                        topic: topic.clone(),
                        partition: *partition,
                        error: ErrorCode::None,
                        message: None,
                    });
                }
                Err((ErrorCode::ElectionNotNeeded, _)) if !report_not_needed => {}
                Err((error, message)) => results.push(ElectionResult {
                    topic: topic.clone(),
                    partition: *partition,
                    error,
                    message: Some(message.into()),
                }),
            }
        }
        (pending.into_records(), results)
    }

    /// Automatic leader rebalancing: for every broker whose share of partitions it
    /// prefers but does not lead exceeds `leader.imbalance.per.broker.percentage`, moves
    /// those leaderships back to it where it is in sync.
    pub fn rebalance_leaders(&self, image: &Arc<MetadataImage>) -> Vec<MetadataRecord> {
        let mut preferred: HashMap<i32, (usize, usize)> = HashMap::new();
        for p in image.topics.values().flat_map(|t| t.partitions.iter()) {
            if let Some(&first) = p.replicas.first() {
                let entry = preferred.entry(first).or_default();
                entry.0 += 1;
                if p.leader != first {
                    entry.1 += 1;
                }
            }
        }
        let threshold = f64::from(self.settings.leader_imbalance_per_broker_percentage) / 100.0;
        let imbalanced: Vec<i32> = preferred
            .into_iter()
            .filter(|(b, (total, not_led))| {
                image.is_active(*b) && *total > 0 && (*not_led as f64 / *total as f64) > threshold
            })
            .map(|(b, _)| b)
            .collect();
        let mut pending = Pending::new(image);
        for (_, p) in pending.partitions() {
            if p.replicas.first().is_some_and(|f| imbalanced.contains(f)) {
                if let Ok(change) = election::preferred(pending.image(), &p) {
                    pending.push_partition(change);
                }
            }
        }
        if !pending.is_empty() {
            tracing::info!(brokers = ?imbalanced, "rebalancing partition leaders to their preferred replicas");
        }
        pending.into_records()
    }

    /// Elects leaders for offline partitions that can have one now: clean elections
    /// (an ISR member is back) always, unclean ones where the topic allows them.
    pub fn elect_offline(&self, image: &Arc<MetadataImage>) -> Vec<MetadataRecord> {
        let mut pending = Pending::new(image);
        self.revive_offline(&mut pending);
        pending.into_records()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cluster, topic};
    use super::*;

    #[test]
    fn preferred_election_reports_per_partition() {
        let (mut image, state) = cluster(&[1, 2]);
        topic(&mut image, "t", &[vec![1, 2], vec![2, 1]]);
        let mut p0 = image.partition("t", 0).expect("p0").clone();
        p0.leader = 2;
        p0.leader_epoch = 1;
        p0.partition_epoch = 1;
        image.apply_batch(50, &[MetadataRecord::Partition(p0)]);
        let image = Arc::new(image);
        let targets = vec![("t".to_string(), 0), ("t".to_string(), 1), ("u".to_string(), 0)];
        let (records, results) = state.elect_leaders(&image, ElectionType::Preferred, Some(&targets));
        assert_eq!(records.len(), 1);
        let codes: Vec<ErrorCode> = results.iter().map(|r| r.error).collect();
        assert_eq!(
            codes,
            vec![ErrorCode::None, ErrorCode::ElectionNotNeeded, ErrorCode::UnknownTopicOrPartition]
        );
        let (_, all) = state.elect_leaders(&image, ElectionType::Preferred, None);
        assert_eq!(all.len(), 1, "partitions needing no election are not reported: {all:?}");
    }

    #[test]
    fn rebalancing_moves_leaders_back_to_their_preferred_replica() {
        let (mut image, state) = cluster(&[1, 2]);
        topic(&mut image, "t", &[vec![1, 2], vec![1, 2], vec![2, 1]]);
        for i in 0..2 {
            let mut p = image.partition("t", i).expect("p").clone();
            p.leader = 2;
            p.leader_epoch = 1;
            p.partition_epoch = 1;
            image.apply_batch(60 + i as u64, &[MetadataRecord::Partition(p)]);
        }
        let image = Arc::new(image);
        let records = state.rebalance_leaders(&image);
        let mut next = (*image).clone();
        next.apply_batch(70, &records);
        assert_eq!(next.partition("t", 0).expect("p").leader, 1);
        assert_eq!(next.partition("t", 1).expect("p").leader, 1);
        assert!(state.rebalance_leaders(&Arc::new(next)).is_empty(), "balanced now");
    }
}
