//! `LogManager`: all the partition logs of one log dir (`log.dirs` entry).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::checkpoint::sync_dir;
use crate::config::LogConfig;
use crate::error::{IoOp, Result, StorageError};
use crate::log::{partition_dir_name, Log};
use strata_protocol::codec::Uuid;

/// Marker file at the root of a log dir, written after every log was closed cleanly. Its
/// presence at start-up lets logs skip recovery; it is removed as soon as the manager
/// opens so a later crash is noticed.
pub const CLEAN_SHUTDOWN_FILE: &str = ".strata_cleanshutdown";

/// Directory name prefix of the controller's metadata log, which is not a partition log.
pub const METADATA_LOG_PREFIX: &str = "__cluster_metadata-";

/// Suffix of partition directories being deleted.
const DELETE_DIR_SUFFIX: &str = "-delete";

/// Owns the logs under one root directory. `Send + Sync`; logs are handed out as
/// `Arc<Log>`.
#[derive(Debug)]
pub struct LogManager {
    root: PathBuf,
    clean_shutdown: bool,
    logs: RwLock<HashMap<(String, i32), Arc<Log>>>,
}

/// Splits `<topic>-<partition>` at the last '-' (topic names may contain '-' and '.').
pub fn parse_partition_dir(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok()?;
    (!topic.is_empty() && partition >= 0 && partition.to_string() == name[topic.len() + 1..])
        .then_some((topic, partition))
}

impl LogManager {
    /// Opens `root` (creating it), removing leftovers of interrupted deletes and opening
    /// every `<topic>-<partition>` directory with `default_config` (the broker applies
    /// topic overrides afterwards with [`Log::update_config`]). Logs are recovered unless
    /// the clean-shutdown marker was present.
    pub fn open(root: &Path, default_config: LogConfig, now_ms: i64) -> Result<LogManager> {
        default_config.validate()?;
        std::fs::create_dir_all(root).map_err(|e| StorageError::io(IoOp::Open, root, 0, e))?;
        let marker = root.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        if clean_shutdown {
            std::fs::remove_file(&marker).map_err(|e| StorageError::io(IoOp::Delete, &marker, 0, e))?;
            sync_dir(root)?;
        }
        tracing::info!(root = %root.display(), clean_shutdown, "opening log dir");
        let mut logs = HashMap::new();
        let entries = std::fs::read_dir(root).map_err(|e| StorageError::io(IoOp::ListDir, root, 0, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io(IoOp::ListDir, root, 0, e))?;
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // Hidden directories belong to the broker (its topic store), not to logs, and
            // so does the controller's metadata log (`__cluster_metadata-0`, Kafka's name).
            if name.starts_with('.') || name.starts_with(METADATA_LOG_PREFIX) {
                continue;
            }
            if name.ends_with(DELETE_DIR_SUFFIX) {
                tracing::info!(dir = %path.display(), "removing partially deleted log");
                std::fs::remove_dir_all(&path).map_err(|e| StorageError::io(IoOp::Delete, &path, 0, e))?;
                continue;
            }
            let Some((topic, partition)) = parse_partition_dir(&name) else {
                tracing::warn!(dir = %path.display(), "ignoring directory that is not <topic>-<partition>");
                continue;
            };
            let log = Log::open(root, topic, partition, default_config.clone(), clean_shutdown, now_ms)?;
            logs.insert((topic.to_string(), partition), Arc::new(log));
        }
        Ok(LogManager { root: root.to_path_buf(), clean_shutdown, logs: RwLock::new(logs) })
    }

    /// The log dir.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the previous shutdown was clean (recovery was skipped).
    pub fn had_clean_shutdown(&self) -> bool {
        self.clean_shutdown
    }

    /// The log of `topic`-`partition`, created with `config` if absent. An existing log
    /// keeps its config (use [`Log::update_config`]).
    pub fn get_or_create(
        &self,
        topic: &str,
        partition: i32,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Arc<Log>> {
        if let Some(log) = self.get(topic, partition) {
            return Ok(log);
        }
        let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = logs.get(&(topic.to_string(), partition)) {
            return Ok(log.clone());
        }
        // A brand-new directory has nothing to recover.
        let log = Arc::new(Log::open(&self.root, topic, partition, config, true, now_ms)?);
        logs.insert((topic.to_string(), partition), log.clone());
        Ok(log)
    }

    /// The log of `topic`-`partition` of the topic with id `topic_id`, created if absent,
    /// and whether a directory of another topic of that name (deleted and created again
    /// while this broker was away) was deleted to make room for it. The directory's
    /// `partition.metadata` records the id; one without the file (written before this
    /// existed) is taken as the topic's and gets it. A zero id checks nothing.
    pub fn get_or_create_for_topic(
        &self,
        topic: &str,
        partition: i32,
        topic_id: Uuid,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<(Arc<Log>, bool)> {
        let log = self.get_or_create(topic, partition, config.clone(), now_ms)?;
        if topic_id.is_zero() {
            return Ok((log, false));
        }
        match crate::partition_metadata::read(log.dir()) {
            Some(Ok(id)) if id == topic_id => Ok((log, false)),
            Some(Ok(id)) => {
                tracing::warn!(
                    topic,
                    partition,
                    found = %id,
                    expected = %topic_id,
                    "the log on disk belongs to an earlier topic of this name; deleting it"
                );
                self.remove(topic, partition)?;
                let log = self.get_or_create(topic, partition, config, now_ms)?;
                record_topic_id(&log, topic_id);
                Ok((log, true))
            }
            found => {
                if found.is_some() {
                    tracing::warn!(topic, partition, "unreadable partition.metadata; rewriting it");
                }
                record_topic_id(&log, topic_id);
                Ok((log, false))
            }
        }
    }

    /// The log of `topic`-`partition`, if open.
    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Log>> {
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        logs.get(&(topic.to_string(), partition)).cloned()
    }

    /// Deletes the log of `topic`-`partition` and its directory. The directory is first
    /// renamed with a `-delete` suffix so a crash mid-way cannot resurrect it. Returns
    /// whether the log existed. Other holders of the `Arc<Log>` get `LogClosed`. Nothing
    /// is written first ([`Log::close_for_delete`]): deleting a topic is how an operator
    /// frees a full disk, where every write fails.
    pub fn remove(&self, topic: &str, partition: i32) -> Result<bool> {
        let removed = {
            let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
            logs.remove(&(topic.to_string(), partition))
        };
        let Some(log) = removed else { return Ok(false) };
        log.close_for_delete();
        let dir = self.root.join(partition_dir_name(topic, partition)?);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let doomed =
            self.root.join(format!("{}.{nanos}{DELETE_DIR_SUFFIX}", partition_dir_name(topic, partition)?));
        std::fs::rename(&dir, &doomed).map_err(|e| StorageError::io(IoOp::Rename, &dir, 0, e))?;
        sync_dir(&self.root)?;
        std::fs::remove_dir_all(&doomed).map_err(|e| StorageError::io(IoOp::Delete, &doomed, 0, e))?;
        Ok(true)
    }

    /// Every open log.
    pub fn all(&self) -> Vec<Arc<Log>> {
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        logs.values().cloned().collect()
    }

    /// Closes every log, then writes the clean-shutdown marker (only if all closed
    /// without error, so a failed close forces recovery next time).
    pub fn close_all(&self) -> Result<()> {
        let logs = self.all();
        let mut first_error = None;
        for log in logs {
            if let Err(e) = log.close() {
                tracing::error!(topic = log.topic(), partition = log.partition(), error = %e, "failed to close log");
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let marker = self.root.join(CLEAN_SHUTDOWN_FILE);
        std::fs::write(&marker, b"").map_err(|e| StorageError::io(IoOp::Write, &marker, 0, e))?;
        sync_dir(&self.root)
    }
}

/// Writes the log's `partition.metadata`; a failure (a full disk) only costs the check
/// until the next open, which writes it again, so it is logged and not passed on.
fn record_topic_id(log: &Log, topic_id: Uuid) {
    if let Err(e) = crate::partition_metadata::write(log.dir(), topic_id) {
        tracing::warn!(topic = log.topic(), partition = log.partition(), error = %e, "cannot write partition.metadata");
    }
}

#[cfg(test)]
mod tests {
    use super::parse_partition_dir;

    #[test]
    fn partition_dir_names() {
        assert_eq!(parse_partition_dir("orders-3"), Some(("orders", 3)));
        assert_eq!(parse_partition_dir("my-topic.v2-12"), Some(("my-topic.v2", 12)));
        assert_eq!(parse_partition_dir("__consumer_offsets-49"), Some(("__consumer_offsets", 49)));
        assert_eq!(parse_partition_dir("orders"), None);
        assert_eq!(parse_partition_dir("-1"), None);
        assert_eq!(parse_partition_dir("orders--1"), Some(("orders-", 1)));
        assert_eq!(parse_partition_dir("orders-01"), None);
        assert_eq!(parse_partition_dir("orders-x"), None);
    }
}
