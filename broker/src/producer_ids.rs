//! Producer ids for InitProducerId, taken in blocks from the controller (KIP-730): the
//! controller records every block in the metadata log before handing it out, so no two
//! brokers, and no broker before and after a restart, ever hand out the same id.
//!
//! A block is fetched ahead of need (when 90% of the current one is used, as Kafka's
//! `RPCProducerIdManager` does), so InitProducerId rarely waits; while no id is left it
//! answers COORDINATOR_LOAD_IN_PROGRESS and the client retries.

use crate::node::Node;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::messages::allocate_producer_ids::AllocateProducerIdsRequest;
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy)]
struct Block {
    next: i64,
    end: i64,
    len: i64,
}

impl Block {
    /// 90% used (or more): time to fetch the next block.
    fn low(&self) -> bool {
        (self.end - self.next) * 10 <= self.len
    }
}

#[derive(Debug, Default)]
struct State {
    current: Option<Block>,
    prefetched: Option<Block>,
}

/// Hands out producer ids from controller-allocated blocks.
#[derive(Debug, Default)]
pub struct ProducerIdManager {
    state: Mutex<State>,
    /// Woken when a block should be fetched.
    want: Notify,
    /// Woken when a block arrived.
    arrived: Notify,
}

impl ProducerIdManager {
    /// A manager with no block yet.
    pub fn new() -> ProducerIdManager {
        ProducerIdManager::default()
    }

    /// A producer id never handed out before, or COORDINATOR_LOAD_IN_PROGRESS while no
    /// block is available (one is being fetched).
    pub fn next_id(&self) -> Result<i64, ErrorCode> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.current.is_none_or(|b| b.next >= b.end) {
            s.current = s.prefetched.take();
        }
        let Some(block) = s.current.as_mut().filter(|b| b.next < b.end) else {
            drop(s);
            self.want.notify_one();
            return Err(ErrorCode::CoordinatorLoadInProgress);
        };
        let id = block.next;
        block.next += 1;
        let low = block.low();
        if low && s.prefetched.is_none() {
            drop(s);
            self.want.notify_one();
        }
        Ok(id)
    }

    /// Like [`ProducerIdManager::next_id`], waiting up to `timeout` for a block.
    pub async fn next_id_waiting(&self, timeout: Duration) -> Result<i64, ErrorCode> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            match self.next_id() {
                Err(ErrorCode::CoordinatorLoadInProgress) => {}
                other => return other,
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return Err(ErrorCode::CoordinatorLoadInProgress);
            }
        }
    }

    fn needs_block(&self) -> bool {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.prefetched.is_none() && s.current.is_none_or(|b| b.low())
    }

    /// Adds the block `first..first + len` the controller allocated.
    pub fn add_block(&self, first: i64, len: i32) {
        let len = i64::from(len.max(0));
        let block = Block { next: first, end: first + len, len };
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.current.is_none_or(|b| b.next >= b.end) {
            s.current = Some(block);
        } else {
            s.prefetched = Some(block);
        }
        drop(s);
        self.arrived.notify_waiters();
    }
}

/// Fetches blocks from the controller whenever the manager runs low (until the server
/// stops the task).
pub async fn run_refill(node: Arc<Node>) {
    loop {
        if !node.producer_ids.needs_block() {
            let manager = &node.producer_ids;
            let want = manager.want.notified();
            tokio::pin!(want);
            want.as_mut().enable();
            let needed = manager.needs_block();
            if !needed {
                let _ = tokio::time::timeout(Duration::from_secs(5), want).await;
            }
            continue;
        }
        let epoch = node.broker_epoch();
        if epoch < 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let request = AllocateProducerIdsRequest { broker_id: node.config.node_id, broker_epoch: epoch };
        let timeout = Duration::from_millis(node.config.cluster.quorum_request_timeout_ms.max(1000));
        match node.controller_channel().call(RequestBody::AllocateProducerIds(request), 0, timeout).await {
            Ok(ResponseBody::AllocateProducerIds(r)) if r.error_code == 0 && r.producer_id_len > 0 => {
                tracing::debug!(
                    first = r.producer_id_start,
                    len = r.producer_id_len,
                    "producer id block allocated"
                );
                node.producer_ids.add_block(r.producer_id_start, r.producer_id_len);
            }
            other => {
                tracing::warn!(answer = ?other.as_ref().map(|r| r.api_key()), "producer id block not allocated; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_blocks_in_order_and_run_out_cleanly() {
        let m = ProducerIdManager::new();
        assert_eq!(m.next_id(), Err(ErrorCode::CoordinatorLoadInProgress));
        m.add_block(1000, 3);
        assert!(!m.needs_block(), "a fresh block");
        m.next_id().expect("id");
        m.next_id().expect("id");
        m.next_id().expect("id");
        assert!(m.needs_block(), "used up");
        m.add_block(5000, 2);
        m.add_block(9000, 10);
        let ids: Vec<i64> = (0..5).map(|_| m.next_id().expect("id")).collect();
        assert_eq!(ids, vec![5000, 5001, 9000, 9001, 9002]);
        assert!(!m.needs_block(), "half of the last block left");
    }
}
