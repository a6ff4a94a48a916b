//! `ReplicaManager`: the partitions this broker hosts as leader or follower, created,
//! given roles and removed as the metadata image says (`apply`); each [`Partition`]
//! holds its log and its replication state.
//!
//! Lookups are lock-free (an immutable map swapped on change); creating and removing
//! partitions is serialised.

mod apply;
mod fetch_read;
pub mod hw_checkpoint;
mod parked;
mod partition;
pub mod write_health;

pub use apply::apply_image;
pub use fetch_read::ReadUpper;
pub use partition::{AppendError, FetchedFrom, IsrProposal, Partition, WaitError};

use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strata_protocol::codec::Uuid;
use strata_storage::{LogConfig, LogManager, StorageError};

/// Why a fetch read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The log refused the read (offset out of range, closed, ...).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading the segment file failed.
    #[error("reading log data failed: {0}")]
    Io(std::io::Error),
}

type PartitionMap = HashMap<String, HashMap<i32, Arc<Partition>>>;

/// All partitions this broker hosts, by topic then index.
#[derive(Debug)]
pub struct ReplicaManager {
    logs: LogManager,
    node_id: i32,
    partitions: ArcSwap<PartitionMap>,
    write: Mutex<()>,
    /// High watermarks read at start-up, used once per partition as it is hosted.
    initial_hw: Mutex<HashMap<(String, i32), i64>>,
    /// The broker's metrics; each hosted partition holds its topic's counters.
    metrics: Arc<crate::metrics::BrokerMetrics>,
}

impl ReplicaManager {
    /// Wraps an opened log manager; `node_id` is this broker.
    pub fn new(logs: LogManager, node_id: i32) -> ReplicaManager {
        let initial_hw = hw_checkpoint::read(logs.root());
        ReplicaManager {
            logs,
            node_id,
            partitions: ArcSwap::from_pointee(HashMap::new()),
            write: Mutex::new(()),
            initial_hw: Mutex::new(initial_hw),
            metrics: Arc::default(),
        }
    }

    /// The broker's metrics (the topic counters the partitions update live there).
    pub fn metrics(&self) -> &Arc<crate::metrics::BrokerMetrics> {
        &self.metrics
    }

    /// The partition, if hosted here.
    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions.load().get(topic)?.get(&index).cloned()
    }

    /// Every hosted partition of a topic.
    pub fn topic(&self, topic: &str) -> Vec<Arc<Partition>> {
        self.partitions.load().get(topic).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Every hosted partition.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions.load().values().flat_map(|m| m.values().cloned()).collect()
    }

    /// Hosts `topic`-`index` (opening or creating its log) unless it already is.
    pub fn ensure(
        &self,
        topic: &str,
        index: i32,
        topic_id: Uuid,
        config: &LogConfig,
    ) -> Result<Arc<Partition>, StorageError> {
        if let Some(p) = self.get(topic, index) {
            return Ok(p);
        }
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = self.get(topic, index) {
            return Ok(p);
        }
        let (log, replaced) = self.logs.get_or_create_for_topic(
            topic,
            index,
            topic_id,
            config.clone(),
            crate::clock::now_ms(),
        )?;
        log.update_config(config.clone())?;
        let checkpointed =
            self.initial_hw.lock().unwrap_or_else(|p| p.into_inner()).remove(&(topic.to_string(), index));
        // The checkpointed high watermark of a replaced log was the earlier topic's.
        let hw = checkpointed.filter(|_| !replaced).unwrap_or(0);
        let metrics = self.metrics.topic(topic);
        let partition =
            Arc::new(Partition::new(Arc::from(topic), index, topic_id, log, self.node_id, hw, metrics));
        let mut next = (**self.partitions.load()).clone();
        next.entry(topic.to_string()).or_default().insert(index, partition.clone());
        self.partitions.store(Arc::new(next));
        Ok(partition)
    }

    /// Stops hosting `topic`-`index`; with `delete`, removes its files.
    pub fn remove(&self, topic: &str, index: i32, delete: bool) -> Result<(), StorageError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.partitions.load_full();
        let Some(p) = current.get(topic).and_then(|m| m.get(&index)).cloned() else {
            if delete {
                self.logs.remove(topic, index)?;
            }
            return Ok(());
        };
        p.make_offline();
        let mut next = (*current).clone();
        if let Some(m) = next.get_mut(topic) {
            m.remove(&index);
            if m.is_empty() {
                next.remove(topic);
            }
        }
        self.partitions.store(Arc::new(next));
        if delete {
            self.logs.remove(topic, index)?;
        }
        Ok(())
    }

    /// Logs on disk that no hosted partition uses (a topic deleted while this broker was
    /// down, or a partition moved away).
    pub fn unhosted_logs(&self) -> Vec<(String, i32)> {
        let map = self.partitions.load();
        self.logs
            .all()
            .into_iter()
            .filter(|l| map.get(l.topic()).is_none_or(|m| !m.contains_key(&l.partition())))
            .map(|l| (l.topic().to_string(), l.partition()))
            .collect()
    }

    /// Applies a new log configuration to every hosted partition of `topic`.
    pub fn update_config(&self, topic: &str, config: &LogConfig) {
        for p in self.topic(topic) {
            if let Err(e) = p.log.update_config(config.clone()) {
                tracing::error!(topic, partition = p.index, error = %e, "config update refused by the log");
            }
        }
    }

    /// Raises the log start offset of a partition (DeleteRecords).
    pub fn delete_records(&self, p: &Partition, offset: i64) -> Result<i64, StorageError> {
        let low = p.log.delete_records_before(offset)?;
        p.clamp_high_watermark();
        Ok(low)
    }

    /// The log manager, for retention and flushing.
    pub fn logs(&self) -> &LogManager {
        &self.logs
    }

    /// Writes every hosted partition's high watermark to `replication-offset-checkpoint`.
    pub fn checkpoint_high_watermarks(&self) -> std::io::Result<()> {
        let mut entries: Vec<(String, i32, i64)> =
            self.all().iter().map(|p| (p.topic.to_string(), p.index, p.high_watermark())).collect();
        // Partitions not hosted yet keep the value read at start-up.
        for ((topic, index), hw) in self.initial_hw.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            entries.push((topic.clone(), *index, *hw));
        }
        entries.sort();
        hw_checkpoint::write(self.logs.root(), &entries)
    }

    /// Checkpoints high watermarks, then flushes and closes every log, writing the
    /// clean-shutdown marker.
    pub fn close(&self) -> Result<(), StorageError> {
        if let Err(e) = self.checkpoint_high_watermarks() {
            tracing::error!(error = %e, "cannot checkpoint high watermarks at shutdown");
        }
        for p in self.all() {
            p.make_offline();
        }
        self.logs.close_all()
    }
}

#[cfg(test)]
mod tests;
