//! AllocateProducerIds (KIP-730): brokers take producer ids in blocks from the
//! controller, so two brokers never hand out the same id; each block is recorded in the
//! metadata log before it is handed out, so a controller failover never hands out a
//! block twice either.

use super::ControllerState;
use crate::metadata::{MetadataImage, MetadataRecord};
use strata_protocol::ErrorCode;

/// Ids per block, as Kafka's controller hands them out.
pub const BLOCK_SIZE: i64 = 1000;

/// A block of producer ids: `first..first + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    /// First id of the block.
    pub first: i64,
    /// Number of ids.
    pub len: i32,
}

impl ControllerState {
    /// The next block for `broker_id`, and the record that reserves it.
    pub fn allocate_producer_ids(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(MetadataRecord, ProducerIdBlock), ErrorCode> {
        if image.broker(broker_id).is_none_or(|b| b.epoch != broker_epoch) {
            return Err(ErrorCode::StaleBrokerEpoch);
        }
        let first = image.next_producer_id;
        let Some(next) = first.checked_add(BLOCK_SIZE) else {
            return Err(ErrorCode::UnknownServerError);
        };
        let record = MetadataRecord::ProducerIds { node_id: broker_id, broker_epoch, next_producer_id: next };
        Ok((record, ProducerIdBlock { first, len: BLOCK_SIZE as i32 }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cluster;
    use super::*;

    #[test]
    fn blocks_never_overlap() {
        let (mut image, state) = cluster(&[1, 2]);
        let e1 = image.broker(1).expect("1").epoch;
        let e2 = image.broker(2).expect("2").epoch;
        let (r1, b1) = state.allocate_producer_ids(&image, 1, e1).expect("b1");
        image.apply_batch(100, &[r1]);
        let (r2, b2) = state.allocate_producer_ids(&image, 2, e2).expect("b2");
        image.apply_batch(101, &[r2]);
        assert_eq!((b1.first, b2.first), (0, BLOCK_SIZE));
        assert_eq!(image.next_producer_id, 2 * BLOCK_SIZE);
        assert_eq!(state.allocate_producer_ids(&image, 1, e1 + 7), Err(ErrorCode::StaleBrokerEpoch));
    }
}
