//! Acting on metadata: every published image is applied to the hosted partitions
//! (roles, creation, deletion), the replica fetchers are pointed at the new leaders,
//! and the coordinators learn which of their partitions this broker now leads. Nothing is
//! applied before the broker has the metadata up to its own registration (its own log
//! may be stale); once applied it is ready to be unfenced, and once it has applied its
//! unfencing, its client listeners open.

use crate::broker::Broker;
use crate::lifecycle::Lifecycle;
use crate::metadata::MetadataImage;
use std::sync::Arc;
use std::time::Duration;

/// Applies images as they are published, from the moment the broker has caught up with
/// the quorum's metadata, until the server stops the task.
pub async fn run(broker: Arc<Broker>, lifecycle: Arc<Lifecycle>) {
    let mut rx = broker.metadata.subscribe();
    let mut applied: Option<Arc<MetadataImage>> = None;
    let mut applied_ready = false;
    loop {
        let image = broker.metadata.current();
        let epoch = broker.broker_epoch();
        let caught_up = epoch >= 0 && image.applied_index as i64 >= epoch;
        let changed = applied.as_ref().is_none_or(|a| a.applied_index != image.applied_index);
        if let Some(id) = image.cluster_id.as_deref().filter(|_| changed) {
            if let Err(e) = broker.adopt_cluster_id(id) {
                tracing::error!(error = %e, "this data directory belongs to another cluster; stopping");
                std::process::exit(1);
            }
        }
        // Nothing reaches the partitions before the broker has caught up with the quorum's
        // metadata once (its first registration applied), as in Kafka: a restarted broker's
        // own metadata log may still name it leader of partitions that moved while it was
        // down, and acting on that (a coordinator loading and sending markers, a leader's
        // retention) would be a stale leader's work. After that first catch-up every image
        // is applied at once, through a later registration too (a broker the controller
        // fenced must still learn at once that it leads nothing any more).
        if (caught_up || applied_ready) && (changed || !applied_ready) {
            let previous = applied.clone();
            let next = image.clone();
            let node = broker.node().clone();
            let changes = tokio::task::spawn_blocking(move || {
                node.metrics.metadata_applied(previous.as_deref(), &next);
                let defaults_changed = node.apply_dynamic_configs(previous.as_deref(), &next);
                crate::replica::apply_image(
                    &node.replicas,
                    previous.as_deref().filter(|_| !defaults_changed),
                    &next,
                    &node.topic_defaults(),
                    caught_up,
                    crate::clock::now_ms(),
                )
            })
            .await;
            match changes {
                Ok(changes) => {
                    for (topic, index) in &changes.stop_fetching {
                        broker.fetchers.remove(topic, *index);
                    }
                    for (partition, leader) in changes.new_followers {
                        broker.fetchers.add(partition, leader);
                    }
                    crate::coordinator::leadership::update(&broker, &image);
                    broker.set_applied(image.applied_index);
                }
                Err(e) => tracing::error!(error = %e, "applying metadata panicked"),
            }
            let me = image.brokers.get(&broker.config.node_id);
            if me.is_some_and(|me| me.epoch == epoch && !me.fenced) {
                lifecycle.applied_unfenced();
            }
            applied = Some(image);
            if caught_up && !applied_ready {
                applied_ready = true;
                lifecycle.set_ready();
                tracing::info!(
                    applied_index = applied.as_ref().map_or(0, |a| a.applied_index),
                    "caught up with the metadata log"
                );
            }
        }
        // Also wake now and then: readiness depends on the broker epoch too.
        let _ = tokio::time::timeout(Duration::from_millis(100), rx.changed()).await;
    }
}
