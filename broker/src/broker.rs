//! The second layer of a broker's state: the services built on the [`Node`], in order
//! (group coordinator, transaction coordinator, ISR changes, replica fetchers), and the
//! [`Broker`] that request handlers see, which holds the node and its services.
//!
//! Each service gets the `Arc<Node>` (and the services before it) when it is built; none
//! holds the `Broker`, so the state forms no cycle and needs no lazy cells: a service's
//! task ends when its handle (owned by the `Broker`) is dropped or the server aborts it.

use crate::coordinator::group::service::GroupService;
use crate::coordinator::txn::service::TxnService;
use crate::node::Node;
use crate::replication::alter_isr::IsrChanges;
use crate::replication::fetcher::FetcherManager;
use std::sync::Arc;

/// The node and the services built on it: everything request handlers share.
///
/// It dereferences to the `Node`, so handlers read configuration, metadata and
/// partitions as `broker.config`, `broker.metadata`, `broker.replicas`.
#[derive(Debug)]
pub struct Broker {
    node: Arc<Node>,
    /// The group coordinator (`__consumer_offsets`).
    pub groups: GroupService,
    /// The transaction coordinator (`__transaction_state`); it tells the group
    /// coordinator of markers written to `__consumer_offsets`.
    pub transactions: TxnService,
    /// The queue of ISR changes to the controller.
    pub isr_changes: IsrChanges,
    /// Replica fetchers, by leader.
    pub fetchers: FetcherManager,
}

impl Broker {
    /// Builds the services on `node`, in dependency order, and starts their tasks (so it
    /// must run inside a Tokio runtime). The coordinators own nothing until the metadata
    /// says this broker leads partitions of their topics.
    pub fn start(node: Arc<Node>) -> Arc<Broker> {
        let groups = GroupService::start(node.clone());
        let transactions = TxnService::start(node.clone(), groups.clone());
        let isr_changes = IsrChanges::start(node.clone());
        let fetchers = FetcherManager::new(node.clone());
        Arc::new(Broker { node, groups, transactions, isr_changes, fetchers })
    }

    /// The node under the services, for tasks that need nothing else.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Stops the replica fetchers and closes every log cleanly.
    pub fn close(&self) {
        self.fetchers.shutdown();
        self.node.close();
    }
}

impl std::ops::Deref for Broker {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.node
    }
}
