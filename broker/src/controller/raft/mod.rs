//! The Raft layer of the KRaft-style metadata quorum, built on openraft.
//!
//! [`MetadataQuorum`] replicates the metadata log (one [`MetadataBatch`] per entry) among
//! the voters of `controller.quorum.voters`, applies committed entries to a
//! [`crate::metadata::MetadataImage`] and publishes each new image to the broker's
//! [`MetadataCache`]. Nothing Kafka-protocol-specific happens here, and openraft's types
//! stay inside this folder: the controller talks to [`MetadataQuorum`], the controller
//! listener hands incoming StrataRaft frames to [`RaftRpcServer::serve`], and outgoing
//! RPCs go through a [`RaftTransport`] the caller supplies.
//!
//! On disk (the directory the broker passes, `<metadata.log.dir>/__cluster_metadata-0/`):
//! `raft.log` (checksummed entry frames), `vote.json`, `committed.json`,
//! `snapshot.json`, and `.lock` (layout and crash safety in `log_store.rs` and
//! `state_machine.rs`).
//!
//! Timing, from the `controller.quorum.*` settings (`raft_config`):
//! - election timeout: random between `election.timeout.ms` and twice that;
//! - heartbeat interval: `min(fetch.timeout.ms, election.timeout.ms) / 4`, so several
//!   heartbeats fit in the shortest election timeout (openraft also uses it as the
//!   deadline of each AppendEntries RPC);
//! - RPC timeouts and the commit deadline of [`MetadataQuorum::write`]:
//!   `request.timeout.ms`;
//! - snapshots every `metadata_snapshot_entries` entries; up to half of that (at most
//!   1000) of the snapshotted entries stay in the log so a briefly lagging voter catches
//!   up from the log rather than by snapshot;
//! - at most 64 entries per AppendEntries and 512 KiB per InstallSnapshot chunk, so one
//!   RPC fits its deadline (the heartbeat interval for AppendEntries) and a frame stays
//!   small (chunk bytes travel as a JSON array, about 4 bytes per byte).
//!
//! A full disk (`retry.rs`): the writes Raft needs durable are retried until they
//! succeed instead of failing, since openraft stops for good on a storage error. While
//! they fail, Raft waits, writes through this node time out, incoming RPCs are answered
//! with an error after the request timeout, and [`MetadataQuorum::is_leader_with_quorum`]
//! is false once the stall is older than the staleness allowed, so the controller steps
//! down and the other voters elect a leader that can write.

mod files;
mod log_store;
mod network;
mod retry;
mod state_machine;
#[cfg(test)]
mod tests;
mod types;

pub use files::StoreError;
pub use network::{RaftRpcServer, RaftTransport, RpcKind, ServeError, TransportError};

use crate::config::cluster::ClusterConfig;
use crate::metadata::{ApplyOutcome, MetadataBatch, MetadataCache};
use bytes::Bytes;
use files::DirLock;
use log_store::LogStore;
use network::NetworkFactory;
use openraft::error::{ClientWriteError, Fatal, InitializeError, RaftError};
use openraft::{BasicNode, RaftMetrics, ServerState, SnapshotPolicy};
use retry::WriteRetry;
use state_machine::StateMachine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use types::Raft;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the quorum could not start or a call on it failed.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// Raft node ids are not negative.
    #[error("node id {0} cannot be a voter id (it is negative)")]
    InvalidNodeId(i32),
    /// Only voters run the quorum.
    #[error("node {node_id} is not among the voters {voters:?}")]
    NotAVoter {
        /// This node.
        node_id: i32,
        /// The configured voters.
        voters: Vec<i32>,
    },
    /// The directory could not be opened or read back.
    #[error("metadata quorum directory {}: {source}", dir.display())]
    Storage {
        /// The directory.
        dir: PathBuf,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// The `controller.quorum.*` timings do not make a valid Raft configuration.
    #[error("controller.quorum timing settings: {0}")]
    Config(#[source] BoxError),
    /// This node is not the leader; `leader` is the one it knows of, if any.
    #[error("not the metadata quorum leader (leader: {leader:?})")]
    NotLeader {
        /// The leader's node id, if known.
        leader: Option<i32>,
    },
    /// The write was not committed in time (no quorum, or leadership is changing). Its
    /// outcome is unknown: it may still be committed later.
    #[error("the write was not committed within {timeout_ms} ms")]
    Timeout {
        /// The deadline (`controller.quorum.request.timeout.ms`).
        timeout_ms: u64,
    },
    /// The quorum has shut down.
    #[error("the metadata quorum has shut down")]
    Stopped,
    /// Raft failed in a way the caller cannot fix (a storage failure stops it).
    #[error("raft {op} failed: {source}")]
    Raft {
        /// What was being done.
        op: &'static str,
        /// Raft's error.
        #[source]
        source: BoxError,
    },
}

/// What this node is in the quorum right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuorumRole {
    /// The active controller's quorum member: the only one that accepts writes.
    Leader,
    /// Campaigning for leadership.
    Candidate,
    /// Replicating from the leader.
    Follower,
    /// Replicating without a vote (not a voter of the current membership).
    Learner,
    /// Shut down.
    Shutdown,
}

/// One voter as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterStatus {
    /// Its node id.
    pub node_id: i32,
    /// Its controller listener (`host:port`).
    pub addr: String,
    /// The last log index known to match the leader's: only on the leader, and `None`
    /// until the voter answered once.
    pub matched_index: Option<u64>,
}

/// The quorum's state for DescribeQuorum and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    /// This node.
    pub node_id: i32,
    /// Its role.
    pub role: QuorumRole,
    /// The leader as this node knows it.
    pub leader: Option<i32>,
    /// The Raft term (KRaft's leader epoch).
    pub term: u64,
    /// The last committed index (KRaft's high watermark minus one); `None` before any.
    pub committed_index: Option<u64>,
    /// The last index applied to the published image.
    pub applied_index: Option<u64>,
    /// The last index in the local log (KRaft's log end offset minus one).
    pub last_log_index: Option<u64>,
    /// The last index the current snapshot covers.
    pub snapshot_index: Option<u64>,
    /// Every voter of the current membership.
    pub voters: Vec<VoterStatus>,
    /// On the leader: how long ago a quorum last acknowledged it.
    pub millis_since_quorum_ack: Option<u64>,
}

/// A running member of the metadata quorum. Call [`MetadataQuorum::shutdown`] to stop it:
/// dropping the handle leaves the Raft tasks running.
pub struct MetadataQuorum {
    node_id: i32,
    raft: Raft,
    committed_index: Arc<AtomicU64>,
    leader: watch::Receiver<Option<i32>>,
    leader_task: tokio::task::JoinHandle<()>,
    write_timeout: Duration,
    /// The storage's retries of failing writes: a stall, and stopping them on shutdown.
    retry: WriteRetry,
    /// Completes when the last storage handle has closed the directory.
    released: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

impl std::fmt::Debug for MetadataQuorum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataQuorum").field("node_id", &self.node_id).finish_non_exhaustive()
    }
}

/// The openraft configuration for `config`'s quorum timings (mapping in the module doc).
fn raft_config(config: &ClusterConfig) -> Result<openraft::Config, QuorumError> {
    let election_ms = config.quorum_election_timeout_ms.max(2);
    let heartbeat_ms = (config.quorum_fetch_timeout_ms.min(election_ms) / 4).max(1);
    let snapshot_entries = config.metadata_snapshot_entries.max(1);
    let keep = (snapshot_entries / 2).min(1000);
    let raft = openraft::Config {
        cluster_name: "strata-metadata".into(),
        election_timeout_min: election_ms,
        election_timeout_max: election_ms * 2,
        heartbeat_interval: heartbeat_ms,
        install_snapshot_timeout: config.quorum_request_timeout_ms,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(snapshot_entries),
        max_in_snapshot_log_to_keep: keep,
        replication_lag_threshold: snapshot_entries + keep,
        max_payload_entries: 64,
        snapshot_max_chunk_size: 512 * 1024,
        ..openraft::Config::default()
    };
    raft.validate().map_err(|e| QuorumError::Config(Box::new(e)))
}

fn to_i32(id: u64) -> Option<i32> {
    i32::try_from(id).ok()
}

fn leader_of(m: &RaftMetrics<u64, BasicNode>) -> Option<i32> {
    if m.state == ServerState::Shutdown {
        return None;
    }
    m.current_leader.and_then(to_i32)
}

fn raft_error(op: &'static str) -> impl FnOnce(Fatal<u64>) -> QuorumError {
    move |e| match e {
        Fatal::Stopped => QuorumError::Stopped,
        e => QuorumError::Raft { op, source: Box::new(e) },
    }
}

impl MetadataQuorum {
    /// Opens the log and snapshot in `dir`, starts Raft for `node_id` with `voters`
    /// (id → `host:port` of its controller listener), and, if this node's storage is
    /// pristine, initialises the membership with exactly `voters`. Every voter does this;
    /// openraft documents that initialising several nodes with the same membership is
    /// safe. Once initialised, the stored membership wins over `voters`. Published images
    /// go to `cache`.
    pub async fn start(
        node_id: i32,
        voters: BTreeMap<i32, String>,
        dir: &Path,
        config: &ClusterConfig,
        cache: Arc<MetadataCache>,
        transport: Arc<dyn RaftTransport>,
    ) -> Result<MetadataQuorum, QuorumError> {
        let id = u64::try_from(node_id).map_err(|_| QuorumError::InvalidNodeId(node_id))?;
        if !voters.contains_key(&node_id) {
            return Err(QuorumError::NotAVoter { node_id, voters: voters.keys().copied().collect() });
        }
        let mut members = BTreeMap::new();
        // The membership names voters only: every voter initialises the same one, and
        // the transport resolves addresses from its own `controller.quorum.voters`
        // (each node may reach the others at addresses of its own, through a proxy).
        for voter in voters.keys() {
            let voter_id = u64::try_from(*voter).map_err(|_| QuorumError::InvalidNodeId(*voter))?;
            members.insert(voter_id, BasicNode::new(format!("voter-{voter}")));
        }
        let raft_config = Arc::new(raft_config(config)?);
        let owned_dir = dir.to_path_buf();
        let opened = files::blocking(move || {
            std::fs::create_dir_all(&owned_dir).map_err(|e| StoreError::io("create", &owned_dir, e))?;
            let (lock, released) = DirLock::acquire_watched(&owned_dir)?;
            let lock = Arc::new(lock);
            let retry = WriteRetry::with_reserve(&owned_dir);
            let store_retry = retry.clone();
            let log = LogStore::open(&owned_dir, lock.clone(), store_retry.clone())?;
            let sm = StateMachine::open(&owned_dir, cache, lock, store_retry)?;
            Ok((log, sm, released, retry))
        })
        .await;
        let (log, sm, released, retry) =
            opened.map_err(|source| QuorumError::Storage { dir: dir.to_path_buf(), source })?;
        let committed_index = log.committed_index();
        let network = NetworkFactory {
            node_id: id,
            transport,
            request_timeout: Duration::from_millis(config.quorum_request_timeout_ms),
            backoff: Duration::from_millis(raft_config.heartbeat_interval),
        };
        let raft = Raft::new(id, raft_config, network, log, sm).await.map_err(raft_error("start"))?;
        match initialize(&raft, members).await {
            Ok(true) => {}
            Ok(false) => warn_if_voters_changed(&raft, &voters),
            Err(e) => {
                let _ = raft.shutdown().await;
                return Err(e);
            }
        }
        let (leader, leader_task) = watch_leader(&raft);
        Ok(MetadataQuorum {
            node_id,
            raft,
            committed_index,
            leader,
            leader_task,
            write_timeout: Duration::from_millis(config.quorum_request_timeout_ms),
            retry,
            released: std::sync::Mutex::new(Some(released)),
        })
    }

    /// Appends `batch` through this node, which must be the leader; returns its log index
    /// and [`ApplyOutcome`] once it is committed and applied locally (so the cache already
    /// shows it). Not the leader: [`QuorumError::NotLeader`]. No commit within
    /// `controller.quorum.request.timeout.ms`: [`QuorumError::Timeout`] (outcome unknown).
    pub async fn write(&self, batch: MetadataBatch) -> Result<(u64, ApplyOutcome), QuorumError> {
        let write = self.raft.client_write(batch);
        match tokio::time::timeout(self.write_timeout, write).await {
            Err(_) => Err(QuorumError::Timeout { timeout_ms: self.write_timeout.as_millis() as u64 }),
            Ok(Ok(response)) => Ok((response.log_id.index, response.data)),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                Err(QuorumError::NotLeader { leader: f.leader_id.and_then(to_i32) })
            }
            Ok(Err(RaftError::APIError(e @ ClientWriteError::ChangeMembershipError(_)))) => {
                Err(QuorumError::Raft { op: "write", source: Box::new(e) })
            }
            Ok(Err(RaftError::Fatal(e))) => Err(raft_error("write")(e)),
        }
    }

    /// The current leader as this node knows it.
    pub fn leader(&self) -> Option<i32> {
        *self.leader.borrow()
    }

    /// True while this node is the leader (the only one whose writes can commit).
    ///
    /// An openraft 0.9 leader cut off from the majority does not step down by itself (no
    /// check-quorum): it stays "leader" until it hears a higher term, while its writes
    /// time out. [`QuorumStatus::millis_since_quorum_ack`] tells how stale it may be.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// True while this node is the leader and a quorum acknowledged it within
    /// `max_stale` (a single voter is its own quorum): the check-quorum openraft 0.9
    /// lacks, so a leader cut off from the majority stops acting as the controller and
    /// callers look for the new one. A leader that has not been able to write its log for
    /// longer than `max_stale` (a full disk) is not one either: its Raft core waits on the
    /// write, so its metrics are as stale as its leadership.
    pub fn is_leader_with_quorum(&self, max_stale: Duration) -> bool {
        if self.retry.stalled_for().is_some_and(|stalled| stalled > max_stale) {
            return false;
        }
        let m = self.raft.metrics().borrow().clone();
        if m.state != ServerState::Leader {
            return false;
        }
        let voters = m.membership_config.membership().voter_ids().count();
        voters <= 1 || m.millis_since_quorum_ack.is_some_and(|ms| ms <= max_stale.as_millis() as u64)
    }

    /// Follows the leader as this node knows it, so the controller task notices when it
    /// becomes or stops being the leader (`Some(own id)` ⇔ leader). `None` after shutdown.
    pub fn watch_leader(&self) -> watch::Receiver<Option<i32>> {
        self.leader.clone()
    }

    /// The quorum's state, for DescribeQuorum and metrics.
    pub fn status(&self) -> QuorumStatus {
        let m = self.raft.metrics().borrow().clone();
        let role = match m.state {
            ServerState::Leader => QuorumRole::Leader,
            ServerState::Candidate => QuorumRole::Candidate,
            ServerState::Follower => QuorumRole::Follower,
            ServerState::Learner => QuorumRole::Learner,
            ServerState::Shutdown => QuorumRole::Shutdown,
        };
        let membership = m.membership_config.membership();
        let voters = membership
            .voter_ids()
            .filter_map(|id| {
                let matched_index = match &m.replication {
                    Some(progress) => progress.get(&id).copied().flatten().map(|l| l.index),
                    None => None,
                };
                let addr = membership.get_node(&id).map(|n| n.addr.clone()).unwrap_or_default();
                Some(VoterStatus { node_id: to_i32(id)?, addr, matched_index })
            })
            .collect();
        let committed = self.committed_index.load(Ordering::Acquire);
        QuorumStatus {
            node_id: self.node_id,
            role,
            leader: leader_of(&m),
            term: m.current_term,
            committed_index: committed.checked_sub(1),
            applied_index: m.last_applied.map(|l| l.index),
            last_log_index: m.last_log_index,
            snapshot_index: m.snapshot.map(|l| l.index),
            voters,
            millis_since_quorum_ack: m.millis_since_quorum_ack,
        }
    }

    /// A handle that serves incoming Raft RPCs (what the controller listener calls for
    /// every StrataRaft frame); it stays valid until shutdown.
    pub fn rpc_server(&self) -> RaftRpcServer {
        RaftRpcServer::new(self.raft.clone(), self.write_timeout)
    }

    /// Serves one incoming Raft RPC of wire kind `kind` (see [`RaftRpcServer::serve`]).
    pub async fn serve_rpc(&self, kind: i8, payload: Bytes) -> Result<Bytes, ServeError> {
        network::serve_rpc(&self.raft, kind, payload, self.write_timeout).await
    }

    /// How long the metadata log's writes have been failing (a full disk), if they are.
    pub fn write_stalled_for(&self) -> Option<Duration> {
        self.retry.stalled_for()
    }

    /// Stops Raft and waits (up to 5 s) until its storage has closed the directory, so a
    /// new instance can open it at once. A write being retried (a full disk) is given up
    /// first, so the Raft core, which waits on it, can stop.
    pub async fn shutdown(&self) {
        self.retry.stop();
        match tokio::time::timeout(Duration::from_secs(10), self.raft.shutdown()).await {
            Err(_) => tracing::error!("the metadata quorum's raft task did not stop within 10 s"),
            // A write given up above ends the core with that error: expected here.
            Ok(Err(e)) => tracing::info!(error = %e, "the metadata quorum's raft task ended with an error"),
            Ok(Ok(())) => {}
        }
        let released = self.released.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(released) = released {
            if tokio::time::timeout(Duration::from_secs(5), released).await.is_err() {
                tracing::warn!(
                    node_id = self.node_id,
                    "the metadata quorum's storage was not released within 5 s"
                );
            }
        }
        self.leader_task.abort();
    }
}

/// Initialises a pristine node's membership and returns true; a node that already has a
/// log or a vote (from an earlier run, or from a peer that initialised first) is left as
/// it is (false).
async fn initialize(raft: &Raft, members: BTreeMap<u64, BasicNode>) -> Result<bool, QuorumError> {
    if raft.is_initialized().await.map_err(raft_error("initialize"))? {
        return Ok(false);
    }
    match raft.initialize(members).await {
        Ok(()) => {
            tracing::info!("initialised the metadata quorum membership");
            Ok(true)
        }
        Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
            tracing::info!(reason = %e, "metadata quorum already initialised");
            Ok(false)
        }
        Err(RaftError::APIError(e)) => Err(QuorumError::Raft { op: "initialize", source: Box::new(e) }),
        Err(RaftError::Fatal(e)) => Err(raft_error("initialize")(e)),
    }
}

/// Voters are fixed at initialisation (there is no reconfiguration yet): say so when the
/// configuration no longer matches what the log holds.
fn warn_if_voters_changed(raft: &Raft, voters: &BTreeMap<i32, String>) {
    let metrics = raft.metrics();
    let stored: Vec<i32> =
        metrics.borrow().membership_config.membership().voter_ids().filter_map(to_i32).collect();
    if !stored.iter().eq(voters.keys()) {
        tracing::warn!(
            configured = ?voters.keys().collect::<Vec<_>>(),
            ?stored,
            "controller.quorum.voters differs from the stored membership; the stored one is used"
        );
    }
}

/// Follows openraft's metrics and republishes only the leader, so watchers wake on
/// leadership changes rather than on every metrics update. The task ends when Raft's
/// metrics channel closes.
fn watch_leader(raft: &Raft) -> (watch::Receiver<Option<i32>>, tokio::task::JoinHandle<()>) {
    let mut metrics = raft.metrics();
    let (tx, leader) = watch::channel(leader_of(&metrics.borrow()));
    let task = tokio::spawn(async move {
        while metrics.changed().await.is_ok() {
            let now = leader_of(&metrics.borrow_and_update());
            tx.send_if_modified(|known| std::mem::replace(known, now) != now);
        }
        tx.send_replace(None);
    });
    (leader, task)
}
