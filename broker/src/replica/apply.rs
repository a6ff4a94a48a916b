//! Applying a metadata image to the hosted partitions (Kafka's
//! `ReplicaManager.applyDelta`): partitions assigned to this broker are hosted and made
//! leader or follower as the image says; partitions no longer assigned here are dropped
//! and their logs deleted.

use super::{Partition, ReplicaManager};
use crate::config::topic::TopicDefaults;
use crate::metadata::MetadataImage;
use std::collections::HashSet;
use std::sync::Arc;

/// What changed, for the fetchers and the coordinators.
#[derive(Debug, Default)]
pub struct ReplicaChanges {
    /// Partitions this broker now leads with a new leader epoch.
    pub new_leaders: Vec<Arc<Partition>>,
    /// Partitions that must be fetched from a (new) leader: (partition, leader).
    pub new_followers: Vec<(Arc<Partition>, i32)>,
    /// Partitions no longer fetched: they are led here, offline, or gone.
    pub stop_fetching: Vec<(String, i32)>,
    /// Partitions no longer hosted here.
    pub removed: Vec<(String, i32)>,
}

/// Hosts and gives roles to every partition `image` assigns to this broker. With
/// `delete_unassigned`, logs of partitions the image does not assign here are deleted
/// (only once this broker has caught up with the metadata log, so a stale image never
/// deletes data). `previous` is the image applied before, to skip unchanged topics'
/// config updates.
pub fn apply_image(
    replicas: &ReplicaManager,
    previous: Option<&MetadataImage>,
    image: &MetadataImage,
    defaults: &TopicDefaults,
    delete_unassigned: bool,
    now_ms: i64,
) -> ReplicaChanges {
    let me = replicas.node_id;
    let mut changes = ReplicaChanges::default();
    let mut assigned: HashSet<(String, i32)> = HashSet::new();
    for topic in image.topics.values() {
        let unchanged_config = previous
            .and_then(|p| p.topic(&topic.name))
            .is_some_and(|old| old.id == topic.id && old.configs == topic.configs);
        let config = defaults.log_config(&topic.configs);
        for p in topic.partitions.iter().filter(|p| p.replicas.contains(&me)) {
            assigned.insert((topic.name.clone(), p.partition));
            let hosted = replicas.get(&topic.name, p.partition);
            if let Some(old) = hosted.as_ref().filter(|old| old.topic_id != topic.uuid()) {
                // The topic was deleted and created again under its name in one step of
                // the metadata this broker applies (it was away, or applied both at once):
                // the hosted log is the earlier topic's.
                tracing::info!(
                    topic = %topic.name,
                    partition = p.partition,
                    old_id = %old.topic_id,
                    new_id = %topic.uuid(),
                    "the topic was made again; replacing the earlier topic's log"
                );
                if let Err(e) = replicas.remove(&topic.name, p.partition, true) {
                    tracing::error!(topic = %topic.name, partition = p.partition, error = %e, "cannot remove partition");
                    continue;
                }
                changes.stop_fetching.push((topic.name.clone(), p.partition));
            }
            let existed = replicas.get(&topic.name, p.partition).is_some();
            let partition = match replicas.ensure(&topic.name, p.partition, topic.uuid(), &config) {
                Ok(partition) => partition,
                Err(e) => {
                    tracing::error!(topic = %topic.name, partition = p.partition, error = %e, "cannot host partition");
                    continue;
                }
            };
            if existed && !unchanged_config {
                if let Err(e) = partition.log.update_config(config.clone()) {
                    tracing::error!(topic = %topic.name, partition = p.partition, error = %e, "config update refused");
                }
            }
            if p.leader == me {
                if partition.make_leader(p, now_ms) {
                    changes.stop_fetching.push((topic.name.clone(), p.partition));
                    changes.new_leaders.push(partition);
                }
            } else if partition.make_follower(p) {
                if p.leader >= 0 {
                    changes.new_followers.push((partition, p.leader));
                } else {
                    changes.stop_fetching.push((topic.name.clone(), p.partition));
                }
            }
        }
    }
    for p in replicas.all() {
        let key = (p.topic.to_string(), p.index);
        if !assigned.contains(&key) {
            tracing::info!(topic = %p.topic, partition = p.index, "partition no longer assigned here; removing it");
            if let Err(e) = replicas.remove(&p.topic, p.index, true) {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "cannot remove partition");
            }
            changes.stop_fetching.push(key.clone());
            changes.removed.push(key);
        }
    }
    if delete_unassigned {
        for (topic, index) in replicas.unhosted_logs() {
            if !assigned.contains(&(topic.clone(), index)) {
                tracing::info!(topic = %topic, partition = index, "deleting a log the metadata does not assign here");
                if let Err(e) = replicas.remove(&topic, index, true) {
                    tracing::error!(topic = %topic, partition = index, error = %e, "cannot delete log");
                }
            }
        }
    }
    changes
}
