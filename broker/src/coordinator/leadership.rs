//! Telling the coordinators which partitions of their topics this broker leads: the
//! group coordinator lives on the leaders of `__consumer_offsets`, the transaction
//! coordinator on those of `__transaction_state`. Called after every metadata image is
//! applied to the hosted partitions.

use crate::broker::Broker;
use crate::coordinator::internal_topics::CONSUMER_OFFSETS;
use crate::coordinator::internal_topics::TRANSACTION_STATE;
use crate::metadata::MetadataImage;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Partitions of `topic` led here (partition → leader epoch) and the partition count.
fn led(image: &MetadataImage, topic: &str, me: i32) -> Option<(BTreeMap<i32, i32>, i32)> {
    let t = image.topic(topic)?;
    let led = t.partitions.iter().filter(|p| p.leader == me).map(|p| (p.partition, p.leader_epoch)).collect();
    Some((led, t.partitions.len() as i32))
}

/// Passes the current leaderships to both coordinators.
pub fn update(broker: &Arc<Broker>, image: &MetadataImage) {
    let me = broker.config.node_id;
    let (partitions, count) = led(image, CONSUMER_OFFSETS, me).unwrap_or_default();
    broker.groups.leadership(partitions, count);
    let (partitions, count) = led(image, TRANSACTION_STATE, me).unwrap_or_default();
    broker.transactions.leadership(partitions, count);
}
