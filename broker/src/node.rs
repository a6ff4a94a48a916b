//! The first layer of a broker's state, the [`Node`]: configuration, cluster identity,
//! the metadata image, the hosted partitions, topic defaults and quotas, the channel to
//! the controller and the connections to peers. It is built first (by [`Node::open`]) and
//! knows nothing of the services built on it (coordinators, ISR changes, replica
//! fetchers: [`crate::broker`]), so nothing points back up.

use crate::config::BrokerConfig;
use crate::controller::channel::ControllerChannel;
use crate::controller::raft::MetadataQuorum;
use crate::metadata::{MetadataCache, MetadataImage, MetadataRecord};
use crate::replica::{Partition, ReplicaManager};
use crate::replication::throttle;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::codec::Uuid;
use strata_protocol::ErrorCode;
use strata_storage::{LogManager, StorageError};

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory or `meta.properties` could not be used.
    #[error("cannot use data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `metadata.log.dir` cannot hold the metadata log (not a directory, or not
    /// writable): refused at start-up rather than when the first metadata write fails.
    #[error("metadata.log.dir={path} cannot be used: {source}")]
    MetadataLogDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `meta.properties` belongs to another node.
    #[error("meta.properties in {path} is for node.id {found}, but this broker is node.id {configured}")]
    NodeIdMismatch {
        /// The directory.
        path: std::path::PathBuf,
        /// node.id found on disk.
        found: i32,
        /// node.id configured.
        configured: i32,
    },
    /// The data directory belongs to another cluster than the quorum's.
    #[error(
        "meta.properties in {path} is for cluster {found}, but the controller quorum is cluster {quorum}"
    )]
    ClusterIdMismatch {
        /// The directory.
        path: std::path::PathBuf,
        /// cluster.id found on disk.
        found: String,
        /// The quorum's.
        quorum: String,
    },
    /// The topic store of an older single-node data directory could not be read.
    #[error(transparent)]
    Topics(#[from] crate::topics::TopicStoreError),
    /// A log could not be opened or recovered.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The controller quorum could not start.
    #[error("controller quorum: {0}")]
    Quorum(String),
    /// The data directory holds more segments than the open files limit allows.
    #[error("{0}")]
    OpenFilesLimit(String),
}

/// What every layer above reads: configuration, identity, metadata, partitions.
#[derive(Debug)]
pub struct Node {
    /// The validated configuration.
    pub config: BrokerConfig,
    /// The latest metadata image from the controller quorum.
    pub metadata: Arc<MetadataCache>,
    /// Hosted partitions.
    pub replicas: ReplicaManager,
    /// Counters for the metrics endpoint (shared with the hosted partitions).
    pub metrics: Arc<crate::metrics::BrokerMetrics>,
    /// Producer id blocks from the controller (InitProducerId).
    pub producer_ids: crate::producer_ids::ProducerIdManager,
    /// Open client connections against `max.connections` and `max.connections.per.ip`.
    pub connection_limits: Arc<crate::connection::limits::ConnectionLimits>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// The broker-level topic defaults in force: server.properties under the dynamic
    /// broker configs of the metadata (swapped when those change).
    topic_defaults: arc_swap::ArcSwap<crate::config::topic::TopicDefaults>,
    /// What this broker serves, as a leader, to throttled replicas out of the ISR
    /// (`leader.replication.throttled.rate`).
    pub leader_quota: throttle::ReplicationQuota,
    /// What this broker fetches, as a follower, for throttled replicas out of the ISR
    /// (`follower.replication.throttled.rate`).
    pub follower_quota: throttle::ReplicationQuota,
    /// The budget of request bytes in memory (`queued.max.request.bytes`; `None`: unbounded).
    pub request_memory: Option<Arc<crate::connection::limits::RequestMemory>>,
    /// The cluster id from `meta.properties`, until the quorum's is known.
    local_cluster_id: Mutex<Option<String>>,
    /// Random per process start (BrokerRegistration).
    pub incarnation_id: Uuid,
    broker_epoch: AtomicI64,
    channel: ControllerChannel,
    bound_ports: Mutex<HashMap<String, u16>>,
    /// Connections to other brokers' inter-broker listeners for control traffic
    /// (transaction markers, verification), by node id.
    peers: Mutex<HashMap<i32, Arc<crate::net::PeerClient>>>,
    /// Metadata records importing an older single-node data directory's topics.
    pub(crate) bootstrap_records: Mutex<Vec<MetadataRecord>>,
    /// The applied index of the last image applied to the hosted partitions.
    applied: tokio::sync::watch::Sender<u64>,
}

/// Creates `dir` if needed and checks that files can be created in it (a probe file,
/// removed at once): a directory that is a file, or on a read-only file system, stops
/// the start with its name instead of failing the first write hours later.
fn check_writable_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if !dir.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"));
    }
    let probe = dir.join(".strata-write-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

impl Node {
    /// Opens the data directory: `meta.properties` and every log (recovering them if the
    /// last shutdown was not clean). Nothing is served yet: roles come from the metadata
    /// log once the server starts.
    pub fn open(config: BrokerConfig) -> Result<Arc<Node>, StartError> {
        let dir = config.data_dir().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StartError::DataDir { path: dir.clone(), source })?;
        if let Some(meta) = config.cluster.metadata_log_dir.as_ref().filter(|_| config.cluster.controller) {
            check_writable_dir(meta)
                .map_err(|source| StartError::MetadataLogDir { path: meta.clone(), source })?;
        }
        let cluster_id = load_meta_properties(&dir, config.node_id)?;
        let bootstrap_records = crate::topics::import_single_node_store(&dir, config.node_id)?;
        crate::limits::check_segments_fit(&dir).map_err(StartError::OpenFilesLimit)?;
        let logs = LogManager::open(
            &dir,
            config.topic_defaults.log_config(&Default::default()),
            crate::clock::now_ms(),
        )?;
        let replicas = ReplicaManager::new(logs, config.node_id);
        let channel = ControllerChannel::new(config.node_id, config.cluster.voters.clone());
        tracing::info!(node_id = config.node_id, cluster_id = ?cluster_id, "broker opened");
        Ok(Arc::new(Node {
            metrics: replicas.metrics().clone(),
            producer_ids: crate::producer_ids::ProducerIdManager::new(),
            metadata: Arc::new(MetadataCache::new()),
            replicas,
            connection_limits: crate::connection::limits::ConnectionLimits::new(config.connections.clone()),
            fetch_sessions: crate::fetch_session::FetchSessionCache::new(config.fetch_session_slots),
            topic_defaults: arc_swap::ArcSwap::from_pointee(config.topic_defaults.clone()),
            leader_quota: throttle::ReplicationQuota::default(),
            follower_quota: throttle::ReplicationQuota::default(),
            request_memory: config
                .connections
                .queued_max_request_bytes
                .map(crate::connection::limits::RequestMemory::new),
            local_cluster_id: Mutex::new(cluster_id),
            incarnation_id: crate::topics::new_topic_id(),
            broker_epoch: AtomicI64::new(-1),
            channel,
            bound_ports: Mutex::new(HashMap::new()),
            peers: Mutex::new(HashMap::new()),
            bootstrap_records: Mutex::new(bootstrap_records),
            applied: tokio::sync::watch::channel(0).0,
            config,
        }))
    }

    /// The cluster id: the quorum's once known, else the one in `meta.properties`.
    pub fn cluster_id(&self) -> String {
        if let Some(id) = self.metadata.current().cluster_id.clone() {
            return id;
        }
        self.local_cluster_id.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default()
    }

    /// The cluster id of `meta.properties`, if it has one.
    pub fn local_cluster_id(&self) -> Option<String> {
        self.local_cluster_id.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Checks the quorum's cluster id against `meta.properties` and records it there the
    /// first time.
    pub fn adopt_cluster_id(&self, quorum: &str) -> Result<(), StartError> {
        let mut local = self.local_cluster_id.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.config.data_dir();
        match local.as_deref() {
            Some(found) if found != quorum => Err(StartError::ClusterIdMismatch {
                path: dir.to_path_buf(),
                found: found.to_string(),
                quorum: quorum.to_string(),
            }),
            Some(_) => Ok(()),
            None => {
                write_meta_properties(dir, self.config.node_id, Some(quorum))
                    .map_err(|source| StartError::DataDir { path: dir.to_path_buf(), source })?;
                *local = Some(quorum.to_string());
                Ok(())
            }
        }
    }

    /// The broker-level topic defaults in force (static and dynamic).
    pub fn topic_defaults(&self) -> Arc<crate::config::topic::TopicDefaults> {
        self.topic_defaults.load_full()
    }

    /// Recomputes the topic defaults from the dynamic broker configs of `image`; true if
    /// they changed.
    pub fn apply_dynamic_configs(&self, previous: Option<&MetadataImage>, image: &MetadataImage) -> bool {
        if previous.is_some_and(|p| p.broker_configs == image.broker_configs) {
            return false;
        }
        let me = self.config.node_id.to_string();
        let defaults = self
            .config
            .topic_defaults
            .with_dynamic(image.broker_configs.get(""), image.broker_configs.get(&me));
        self.topic_defaults.store(Arc::new(defaults));
        let (mine, cluster) = (image.broker_configs.get(&me), image.broker_configs.get(""));
        self.leader_quota.set_rate(throttle::rate_of(throttle::LEADER_RATE, mine, cluster));
        self.follower_quota.set_rate(throttle::rate_of(throttle::FOLLOWER_RATE, mine, cluster));
        self.connection_limits.set_config(self.config.connections.with_dynamic(cluster, mine));
        true
    }

    /// The channel to the active controller.
    pub fn controller_channel(&self) -> &ControllerChannel {
        &self.channel
    }

    /// This broker's epoch from its registration (-1 before it registered).
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    /// Records the epoch the controller gave this broker's registration.
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    /// Records the port a listener actually bound (for `port 0` in tests).
    pub fn set_bound_port(&self, listener: &str, port: u16) {
        self.bound_ports.lock().unwrap_or_else(|p| p.into_inner()).insert(listener.to_string(), port);
    }

    /// The port a listener bound, if it has.
    pub fn bound_port(&self, listener: &str) -> Option<u16> {
        self.bound_ports.lock().unwrap_or_else(|p| p.into_inner()).get(listener).copied()
    }

    /// The endpoints this broker registers: its advertised broker listeners, with ports
    /// given as 0 replaced by the bound ones and unspecified hosts by loopback.
    pub fn advertised_endpoints(&self) -> Vec<crate::metadata::Endpoint> {
        self.config
            .advertised_listeners
            .iter()
            .map(|l| {
                let port = if l.port == 0 { self.bound_port(&l.name).unwrap_or(0) } else { l.port };
                let host = if l.host.is_empty() || l.host == "0.0.0.0" {
                    "127.0.0.1".to_string()
                } else {
                    l.host.clone()
                };
                crate::metadata::Endpoint { listener: l.name.clone(), host, port }
            })
            .collect()
    }

    /// The host and port clients of `listener` should use to reach this broker.
    pub fn advertised_address(&self, listener: &str) -> (String, i32) {
        let endpoints = self.advertised_endpoints();
        let e = endpoints.iter().find(|e| e.listener == listener).or(endpoints.first());
        e.map_or((String::from("127.0.0.1"), 0), |e| (e.host.clone(), i32::from(e.port)))
    }

    /// "host:port" of `node`'s inter-broker listener, from the metadata.
    pub fn inter_broker_address(&self, node: i32) -> Option<String> {
        let image = self.metadata.current();
        let b = image.broker(node)?;
        let e = b.endpoint(&self.config.cluster.inter_broker_listener_name).or(b.endpoints.first())?;
        Some(format!("{}:{}", e.host, e.port))
    }

    /// A control connection to `node`'s inter-broker listener (one per node, reconnected
    /// if the node's address changed).
    pub fn peer(&self, node: i32) -> Option<Arc<crate::net::PeerClient>> {
        let addr = self.inter_broker_address(node)?;
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let client = peers.entry(node).or_insert_with(|| {
            Arc::new(crate::net::PeerClient::new(
                addr.clone(),
                format!("strata-broker-{}", self.config.node_id),
            ))
        });
        if client.addr() != addr {
            *client =
                Arc::new(crate::net::PeerClient::new(addr, format!("strata-broker-{}", self.config.node_id)));
        }
        Some(client.clone())
    }

    /// The partition if this broker leads it; else the error a client should see
    /// (NOT_LEADER_OR_FOLLOWER if the partition exists elsewhere).
    pub fn leader_partition(&self, topic: &str, index: i32) -> Result<Arc<Partition>, ErrorCode> {
        match self.replicas.get(topic, index) {
            Some(p) if p.is_leader() => Ok(p),
            Some(_) => Err(ErrorCode::NotLeaderOrFollower),
            None => Err(unhosted_error(&self.metadata.current(), topic, index)),
        }
    }

    /// Records that the hosted partitions reflect the image at `index`.
    pub fn set_applied(&self, index: u64) {
        self.applied.send_replace(index);
    }

    /// Waits (up to `timeout`) until this broker's metadata shows every topic of `names`
    /// and, for partitions it leads, hosts them as leader: what a client that just
    /// created a topic here will ask for next. Returns the image it saw last.
    pub async fn await_topics_applied(
        &self,
        names: &[String],
        timeout: std::time::Duration,
    ) -> Arc<MetadataImage> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.applied.subscribe();
        let me = self.config.node_id;
        loop {
            let image = self.metadata.current();
            let shown = names.iter().all(|n| image.topic(n).is_some());
            // Applied here (partitions hosted, coordinators told) up to an image showing them.
            let applied = shown && *rx.borrow_and_update() >= image.applied_index;
            let ready = applied
                && names.iter().all(|n| {
                    image.topic(n).is_some_and(|t| {
                        t.partitions
                            .iter()
                            .filter(|p| p.leader == me)
                            .all(|p| self.replicas.get(n, p.partition).is_some_and(|x| x.is_leader()))
                    })
                });
            if ready {
                return image;
            }
            let mut changes = self.metadata.subscribe();
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return self.metadata.current(),
                _ = rx.changed() => {}
                _ = changes.changed() => {}
            }
        }
    }

    /// Waits (up to `timeout`) until this broker's metadata no longer shows `names`.
    pub async fn await_topics_gone(&self, names: &[String], timeout: std::time::Duration) {
        let names = names.to_vec();
        self.metadata.wait_for(timeout, move |i| names.iter().all(|n| i.topic(n).is_none())).await;
    }

    /// Starts this voter's share of the controller quorum (its Raft log in
    /// `<metadata.log.dir or first log.dirs>/__cluster_metadata-0/`) and its controller
    /// service, and connects the broker's controller channel to it.
    pub async fn start_controller(&self) -> Result<Arc<MetadataQuorum>, StartError> {
        let broker = self;
        let config = &broker.config;
        let c = &config.cluster;
        let voters: BTreeMap<i32, String> =
            c.voters.iter().map(|v| (v.id, format!("{}:{}", v.host, v.port))).collect();
        let root = c.metadata_log_dir.clone().unwrap_or_else(|| config.data_dir().to_path_buf());
        let dir = root.join(format!("{}0", strata_storage::METADATA_LOG_PREFIX));
        let transport =
            Arc::new(crate::controller::transport::PeerRaftTransport::new(config.node_id, &voters));
        let quorum =
            MetadataQuorum::start(config.node_id, voters, &dir, c, broker.metadata.clone(), transport)
                .await
                .map_err(|e| StartError::Quorum(e.to_string()))?;
        let quorum = Arc::new(quorum);
        let settings = crate::controller::ControllerSettings {
            session_timeout_ms: c.broker_session_timeout_ms as i64,
            unclean_leader_election_enable: c.unclean_leader_election_enable,
            num_partitions: config.num_partitions,
            default_replication_factor: config.default_replication_factor,
            leader_imbalance_per_broker_percentage: c.leader_imbalance_per_broker_percentage,
            delete_topic_enable: config.delete_topic_enable,
            topic_defaults: config.topic_defaults.clone(),
            local_broker: c.broker.then_some(config.node_id),
        };
        let proposed_cluster_id = broker
            .local_cluster_id()
            .or_else(|| config.cluster_id.clone())
            .unwrap_or_else(|| crate::topics::new_topic_id().to_string());
        let bootstrap_records =
            std::mem::take(&mut *broker.bootstrap_records.lock().unwrap_or_else(|p| p.into_inner()));
        let service_config = crate::controller::service::ServiceConfig {
            proposed_cluster_id,
            bootstrap_records,
            imported_store: Some(config.data_dir().to_path_buf()),
            tick: Duration::from_millis((c.broker_session_timeout_ms / 8).clamp(20, 500)),
            stale_after: crate::controller::service::stale_after(c),
            leader_rebalance_every: c
                .auto_leader_rebalance_enable
                .then(|| Duration::from_millis(c.leader_imbalance_check_interval_ms)),
        };
        let service = crate::controller::service::ControllerService::start(
            quorum.clone(),
            broker.metadata.clone(),
            crate::controller::ControllerState::new(settings),
            service_config,
        );
        broker.controller_channel().set_local(service);
        Ok(quorum)
    }

    /// Closes every log cleanly (once the services above have stopped).
    pub fn close(&self) {
        if let Err(e) = self.replicas.close() {
            tracing::error!(error = %e, "closing logs failed; the next start will recover them");
        }
    }
}

/// The error for a partition this broker does not host.
pub fn unhosted_error(image: &MetadataImage, topic: &str, index: i32) -> ErrorCode {
    if image.partition(topic, index).is_some() {
        ErrorCode::NotLeaderOrFollower
    } else {
        ErrorCode::UnknownTopicOrPartition
    }
}

/// Reads or creates `meta.properties` (Kafka's format: `version`, `node.id`, and
/// `cluster.id` once the quorum's is known) and returns the cluster id it holds.
fn load_meta_properties(dir: &Path, node_id: i32) -> Result<Option<String>, StartError> {
    let path = dir.join("meta.properties");
    let io = |source| StartError::DataDir { path: path.clone(), source };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let props = crate::config::parse_properties(&text).unwrap_or_default();
            if let Some(found) = props.get("node.id").and_then(|v| v.parse::<i32>().ok()) {
                if found != node_id {
                    return Err(StartError::NodeIdMismatch {
                        path: dir.to_path_buf(),
                        found,
                        configured: node_id,
                    });
                }
            }
            Ok(props.get("cluster.id").cloned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_meta_properties(dir, node_id, None).map_err(io)?;
            Ok(None)
        }
        Err(e) => Err(io(e)),
    }
}

fn write_meta_properties(dir: &Path, node_id: i32, cluster_id: Option<&str>) -> std::io::Result<()> {
    let mut text = format!("#Written by Strata\nversion=1\nnode.id={node_id}\n");
    if let Some(id) = cluster_id {
        text.push_str(&format!("cluster.id={id}\n"));
    }
    let tmp = dir.join("meta.properties.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join("meta.properties"))
}
