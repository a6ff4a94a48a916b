//! The async shell of the controller on a quorum voter.
//!
//! While this node is the Raft leader it is the *active controller*: one task takes the
//! controller requests (BrokerRegistration, BrokerHeartbeat, AlterPartition,
//! AllocateProducerIds, CreateTopics, ...) one at a time, asks [`ControllerState`] for
//! the records, writes them through the quorum, and answers once they are applied, so
//! the next decision sees them. On its own it fences brokers whose sessions expired,
//! elects leaders for offline partitions, and rebalances leaders. A voter that is not
//! the leader answers NOT_CONTROLLER, and the caller tries the leader.

use super::raft::{MetadataQuorum, QuorumError};
use super::ControllerState;
use crate::clock::now_ms;
use crate::metadata::{MetadataBatch, MetadataCache, MetadataRecord};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::{RequestBody, ResponseBody};
use tokio::sync::{mpsc, oneshot};

mod answers;
mod requests;

pub use answers::{is_not_controller as answers_not_controller, not_controller};

/// What the controller needs besides its decision settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The cluster id to write if the metadata log has none yet (from `meta.properties`,
    /// `cluster.id`, or a fresh one).
    pub proposed_cluster_id: String,
    /// Records to write once, when the metadata log holds no topic yet (the topics of a
    /// single-node data directory from before the controller existed).
    pub bootstrap_records: Vec<MetadataRecord>,
    /// The data directory whose single-node topic store the bootstrap records came
    /// from; renamed away once they are written.
    pub imported_store: Option<std::path::PathBuf>,
    /// How often leader duties run (session expiry, offline elections).
    pub tick: Duration,
    /// `auto.leader.rebalance.enable` and its interval.
    pub leader_rebalance_every: Option<Duration>,
    /// How long without a quorum's acknowledgement a leader keeps acting.
    pub stale_after: Duration,
}

/// How long a leader may go without a quorum's acknowledgement before it stops acting
/// as the controller: about an election timeout, after which the others elect a new one.
pub fn stale_after(config: &crate::config::cluster::ClusterConfig) -> Duration {
    Duration::from_millis(config.quorum_fetch_timeout_ms.max(config.quorum_election_timeout_ms))
}

struct Call {
    body: RequestBody,
    version: i16,
    reply: oneshot::Sender<ResponseBody>,
}

/// Handle to the controller of this voter.
#[derive(Clone)]
pub struct ControllerService {
    tx: mpsc::Sender<Call>,
    quorum: Arc<MetadataQuorum>,
    cache: Arc<MetadataCache>,
    stale_after: Duration,
}

impl std::fmt::Debug for ControllerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerService").field("leader", &self.quorum.leader()).finish()
    }
}

impl ControllerService {
    /// Starts the controller task over `quorum`.
    pub fn start(
        quorum: Arc<MetadataQuorum>,
        cache: Arc<MetadataCache>,
        state: ControllerState,
        config: ServiceConfig,
    ) -> ControllerService {
        let (tx, rx) = mpsc::channel(1024);
        let stale_after = config.stale_after;
        let task = Task {
            quorum: quorum.clone(),
            cache: cache.clone(),
            state,
            config,
            active: false,
            next_rebalance: None,
            write_failing: false,
        };
        tokio::spawn(task.run(rx));
        ControllerService { tx, quorum, cache, stale_after }
    }

    /// True while this voter is the active controller (Raft leader with a quorum that
    /// acknowledged it recently).
    pub fn is_active(&self) -> bool {
        self.quorum.is_leader_with_quorum(self.stale_after)
    }

    /// The active controller as this voter knows it (not itself while cut off from the
    /// quorum).
    pub fn leader(&self) -> Option<i32> {
        let leader = self.quorum.leader();
        if self.quorum.is_leader() && !self.is_active() {
            return None;
        }
        leader
    }

    /// The quorum, for the Raft RPCs and DescribeQuorum.
    pub fn quorum(&self) -> &Arc<MetadataQuorum> {
        &self.quorum
    }

    /// The metadata cache this voter publishes to.
    pub fn cache(&self) -> &Arc<MetadataCache> {
        &self.cache
    }

    /// Handles a controller request (answered with NOT_CONTROLLER unless active;
    /// DescribeQuorum from the quorum's status, NOT_LEADER_OR_FOLLOWER unless leader).
    pub async fn call(&self, body: RequestBody, version: i16) -> ResponseBody {
        if let RequestBody::DescribeQuorum(r) = &body {
            return super::quorum_answer::describe_quorum(r, &self.quorum.status()).into();
        }
        let fallback = not_controller(&body);
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Call { body, version, reply }).await.is_err() {
            return fallback;
        }
        rx.await.unwrap_or(fallback)
    }
}

struct Task {
    quorum: Arc<MetadataQuorum>,
    cache: Arc<MetadataCache>,
    state: ControllerState,
    config: ServiceConfig,
    active: bool,
    next_rebalance: Option<tokio::time::Instant>,
    /// The last metadata write failed (warned once until one succeeds).
    write_failing: bool,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Call>) {
        let mut leader = self.quorum.watch_leader();
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                call = rx.recv() => {
                    let Some(call) = call else { return };
                    // The caller gave up (its deadline passed while earlier calls waited
                    // on writes): deciding it now would only change metadata unasked.
                    if call.reply.is_closed() {
                        continue;
                    }
                    self.check_leadership().await;
                    let response = if self.active {
                        self.handle(call.body, call.version).await
                    } else {
                        not_controller(&call.body)
                    };
                    let _ = call.reply.send(response);
                }
                changed = leader.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.check_leadership().await;
                }
                _ = tick.tick() => {
                    self.check_leadership().await;
                    if self.active {
                        self.leader_duties().await;
                    }
                }
            }
        }
    }

    /// Notices becoming (or ceasing to be) the active controller. On becoming it, writes
    /// a no-op first so everything committed before is applied here, then the cluster
    /// id and bootstrap topics if the log has none, and starts every broker's session
    /// afresh.
    async fn check_leadership(&mut self) {
        let leading = self.quorum.is_leader_with_quorum(self.config.stale_after);
        if leading == self.active {
            return;
        }
        if !leading {
            tracing::info!("no longer the active controller");
            self.active = false;
            return;
        }
        if self.write(vec![MetadataRecord::Noop]).await.is_err() {
            return;
        }
        let image = self.cache.current();
        let mut records = Vec::new();
        if image.cluster_id.is_none() {
            records.push(MetadataRecord::ClusterId { cluster_id: self.config.proposed_cluster_id.clone() });
        }
        let importing = image.topics.is_empty() && !self.config.bootstrap_records.is_empty();
        if importing {
            tracing::info!(
                records = self.config.bootstrap_records.len(),
                "importing the topics of this data directory"
            );
            records.extend(self.config.bootstrap_records.iter().cloned());
        }
        if !records.is_empty() && self.write(records).await.is_err() {
            return;
        }
        if !self.config.bootstrap_records.is_empty() {
            self.config.bootstrap_records.clear();
            if let Some(dir) = self.config.imported_store.take() {
                crate::topics::mark_imported(&dir);
            }
        }
        let image = self.cache.current();
        self.state.reset_sessions(&image, now_ms());
        self.next_rebalance = self.config.leader_rebalance_every.map(|d| tokio::time::Instant::now() + d);
        self.active = true;
        tracing::info!(cluster_id = ?image.cluster_id, brokers = image.brokers.len(), "became the active controller");
    }

    /// Session expiry, offline-partition elections, periodic leader rebalancing.
    async fn leader_duties(&mut self) {
        let image = self.cache.current();
        let mut records = self.state.expire_sessions(&image, now_ms());
        if records.is_empty() {
            records = self.state.elect_offline(&image);
        }
        if records.is_empty() && self.next_rebalance.is_some_and(|t| t <= tokio::time::Instant::now()) {
            records = self.state.rebalance_leaders(&image);
            self.next_rebalance = self.config.leader_rebalance_every.map(|d| tokio::time::Instant::now() + d);
        }
        if !records.is_empty() {
            let _ = self.write(records).await;
        }
    }

    /// Writes `records` as one entry; the log index once applied here.
    async fn write(
        &mut self,
        records: Vec<MetadataRecord>,
    ) -> Result<(u64, crate::metadata::ApplyOutcome), QuorumError> {
        match self.quorum.write(MetadataBatch(records)).await {
            Ok(done) => {
                if std::mem::take(&mut self.write_failing) {
                    tracing::info!("metadata writes succeed again");
                }
                Ok(done)
            }
            Err(e) => {
                // Once per episode: a full metadata disk fails every write for as long as
                // it lasts, and the quorum's storage logs the cause.
                if !std::mem::replace(&mut self.write_failing, true) {
                    tracing::warn!(error = %e, "metadata write failed; answering NOT_CONTROLLER");
                }
                if matches!(e, QuorumError::NotLeader { .. }) {
                    self.active = false;
                }
                Err(e)
            }
        }
    }
}
