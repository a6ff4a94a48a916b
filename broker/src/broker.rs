//! The broker's shared state: configuration, cluster identity, topics and partitions,
//! and the topic operations several APIs share (create on demand, delete).

use crate::config::BrokerConfig;
use crate::replica::ReplicaManager;
use crate::topics::{new_topic_id, validate_topic_name, TopicMeta, TopicRegistry, TopicStoreError};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
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
    /// The topic store failed.
    #[error(transparent)]
    Topics(#[from] TopicStoreError),
    /// A log could not be opened or recovered.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why a topic could not be created; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    /// INVALID_TOPIC_EXCEPTION.
    #[error("{0}")]
    InvalidName(String),
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic '{0}' already exists")]
    AlreadyExists(String),
    /// INVALID_PARTITIONS.
    #[error("{0}")]
    InvalidPartitions(String),
    /// INVALID_REPLICATION_FACTOR.
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// INVALID_CONFIG.
    #[error("{0}")]
    InvalidConfig(String),
    /// KAFKA_STORAGE_ERROR / UNKNOWN_SERVER_ERROR.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// UNKNOWN_SERVER_ERROR.
    #[error(transparent)]
    Store(#[from] TopicStoreError),
}

impl CreateTopicError {
    /// The Kafka error code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            CreateTopicError::InvalidName(_) => ErrorCode::InvalidTopicException,
            CreateTopicError::AlreadyExists(_) => ErrorCode::TopicAlreadyExists,
            CreateTopicError::InvalidPartitions(_) => ErrorCode::InvalidPartitions,
            CreateTopicError::InvalidReplicationFactor(_) => ErrorCode::InvalidReplicationFactor,
            CreateTopicError::InvalidConfig(_) => ErrorCode::InvalidConfig,
            CreateTopicError::Storage(e) => crate::errors::storage_error_code(e),
            CreateTopicError::Store(_) => ErrorCode::UnknownServerError,
        }
    }
}

/// Everything request handlers share.
#[derive(Debug)]
pub struct Broker {
    /// The validated configuration.
    pub config: BrokerConfig,
    /// The cluster id from `meta.properties`.
    pub cluster_id: String,
    /// Topic metadata.
    pub topics: TopicRegistry,
    /// Hosted partitions.
    pub replicas: ReplicaManager,
    /// Producer id allocation (InitProducerId).
    pub producer_ids: crate::producer_ids::ProducerIdManager,
    bound_ports: Mutex<HashMap<String, u16>>,
    groups: std::sync::OnceLock<crate::group_service::GroupService>,
    transactions: std::sync::OnceLock<crate::txn_service::TxnService>,
}

impl Broker {
    /// Opens the data directory: `meta.properties`, the topic store, and every log
    /// (recovering them if the last shutdown was not clean).
    pub fn open(config: BrokerConfig) -> Result<Arc<Broker>, StartError> {
        let dir = config.data_dir().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StartError::DataDir { path: dir.clone(), source })?;
        let cluster_id = load_meta_properties(&dir, config.node_id, config.cluster_id.as_deref())?;
        let topics = TopicRegistry::open(&dir)?;
        let producer_ids = crate::producer_ids::ProducerIdManager::open(&dir)
            .map_err(|source| StartError::DataDir { path: dir.clone(), source })?;
        let logs = LogManager::open(
            &dir,
            config.topic_defaults.log_config(&BTreeMap::new()),
            crate::handlers::now_ms(),
        )?;
        let replicas = ReplicaManager::new(logs);
        let snapshot = topics.snapshot();
        for meta in snapshot.by_name.values() {
            let log_config = config.topic_defaults.log_config(&meta.configs);
            replicas.ensure_topic(&meta.name, meta.partitions, &log_config)?;
        }
        tracing::info!(topics = snapshot.by_name.len(), cluster_id = %cluster_id, "broker opened");
        Ok(Arc::new(Broker {
            config,
            cluster_id,
            topics,
            replicas,
            producer_ids,
            bound_ports: Mutex::new(HashMap::new()),
            groups: std::sync::OnceLock::new(),
            transactions: std::sync::OnceLock::new(),
        }))
    }

    /// The group coordinator; started on first use (needs a Tokio runtime).
    pub fn groups(self: &Arc<Self>) -> &crate::group_service::GroupService {
        self.groups.get_or_init(|| crate::group_service::GroupService::start(self))
    }

    /// The transaction coordinator; started on first use (needs a Tokio runtime).
    pub fn transactions(self: &Arc<Self>) -> &crate::txn_service::TxnService {
        self.transactions.get_or_init(|| crate::txn_service::TxnService::start(self))
    }

    /// Records the port a listener actually bound (for `port 0` in tests).
    pub fn set_bound_port(&self, listener: &str, port: u16) {
        self.bound_ports.lock().unwrap_or_else(|p| p.into_inner()).insert(listener.to_string(), port);
    }

    /// The host and port clients should use to reach this broker.
    pub fn advertised_address(&self) -> (String, i32) {
        let l = &self.config.advertised_listeners[0];
        let port = if l.port == 0 {
            let ports = self.bound_ports.lock().unwrap_or_else(|p| p.into_inner());
            ports.get(&l.name).copied().unwrap_or(0)
        } else {
            l.port
        };
        let host =
            if l.host.is_empty() || l.host == "0.0.0.0" { "127.0.0.1".to_string() } else { l.host.clone() };
        (host, i32::from(port))
    }

    /// Creates a topic. `partitions`/`replication_factor` of -1 take the broker
    /// defaults. With `validate_only` nothing is written.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, CreateTopicError> {
        validate_topic_name(name).map_err(CreateTopicError::InvalidName)?;
        let partitions = if partitions == -1 { self.config.num_partitions } else { partitions };
        if partitions <= 0 {
            return Err(CreateTopicError::InvalidPartitions(format!(
                "number of partitions must be larger than 0, got {partitions}"
            )));
        }
        let rf = if replication_factor == -1 {
            self.config.default_replication_factor
        } else {
            replication_factor
        };
        if rf <= 0 {
            return Err(CreateTopicError::InvalidReplicationFactor(format!(
                "replication factor must be larger than 0, got {rf}"
            )));
        }
        if rf > 1 {
            return Err(CreateTopicError::InvalidReplicationFactor(format!(
                "replication factor {rf} is larger than the number of brokers (1)"
            )));
        }
        for (k, v) in &configs {
            crate::config::topic::validate(k, v).map_err(|reason| {
                CreateTopicError::InvalidConfig(format!("invalid config {k}={v}: {reason}"))
            })?;
        }
        let log_config = self.config.topic_defaults.log_config(&configs);
        let created = self.topics.update(name, |old| {
            if let Some(old) = old {
                return (Some(old.clone()), Err(CreateTopicError::AlreadyExists(old.name.clone())));
            }
            let meta = TopicMeta {
                name: name.to_string(),
                id: new_topic_id(),
                partitions,
                configs: configs.clone(),
                internal: name.starts_with("__"),
            };
            if validate_only {
                (None, Ok(meta))
            } else {
                (Some(meta.clone()), Ok(meta))
            }
        })??;
        if !validate_only {
            self.replicas.ensure_topic(name, partitions, &log_config)?;
            tracing::info!(topic = name, partitions, "topic created");
        }
        Ok(Arc::new(created))
    }

    /// The topic, creating it with the broker defaults if `auto.create.topics.enable`
    /// allows and `allow` is true.
    pub fn get_or_auto_create(&self, name: &str, allow: bool) -> Result<Arc<TopicMeta>, ErrorCode> {
        if let Some(meta) = self.topics.get(name) {
            return Ok(meta);
        }
        if !(allow && self.config.auto_create_topics_enable) {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        match self.create_topic(name, -1, -1, BTreeMap::new(), false) {
            Ok(meta) => Ok(meta),
            Err(CreateTopicError::AlreadyExists(_)) => {
                self.topics.get(name).ok_or(ErrorCode::UnknownTopicOrPartition)
            }
            Err(e) => Err(e.code()),
        }
    }

    /// Deletes a topic and its data.
    pub fn delete_topic(&self, name: &str) -> Result<(), ErrorCode> {
        if !self.config.delete_topic_enable {
            return Err(ErrorCode::TopicDeletionDisabled);
        }
        let existed = self
            .topics
            .update(name, |old| (None, old.is_some()))
            .map_err(|_| ErrorCode::UnknownServerError)?;
        if !existed {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        self.replicas.delete_topic(name).map_err(|e| crate::errors::storage_error_code(&e))?;
        if let Some(groups) = self.groups.get() {
            groups.topics_deleted(vec![name.to_string()]);
        }
        tracing::info!(topic = name, "topic deleted");
        Ok(())
    }

    /// Flushes and closes every log, writing the clean-shutdown marker.
    pub fn close(&self) {
        if let Err(e) = self.replicas.close() {
            tracing::error!(error = %e, "closing logs failed; the next start will recover them");
        }
    }
}

/// Reads or creates `meta.properties` (Kafka's format: `version`, `node.id`,
/// `cluster.id`) and returns the cluster id.
fn load_meta_properties(dir: &Path, node_id: i32, configured: Option<&str>) -> Result<String, StartError> {
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
            if let Some(id) = props.get("cluster.id") {
                return Ok(id.clone());
            }
            Err(io(std::io::Error::new(std::io::ErrorKind::InvalidData, "meta.properties has no cluster.id")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let cluster_id = configured.map(str::to_string).unwrap_or_else(|| new_topic_id().to_string());
            let text = format!("#Written by Strata\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\n");
            let tmp = dir.join("meta.properties.tmp");
            std::fs::write(&tmp, text).map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            Ok(cluster_id)
        }
        Err(e) => Err(io(e)),
    }
}
