//! Topic names and ids: Kafka's naming rules, fresh topic ids, and the import of the
//! per-topic files older single-node data directories kept under `.strata-topics/`
//! (topics now live in the controller's metadata log).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strata_protocol::codec::Uuid;

/// What the cluster knows about one topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicMeta {
    /// The topic name.
    pub name: String,
    /// Its id (KIP-516), never zero.
    pub id: Uuid,
    /// Number of partitions, numbered from 0.
    pub partitions: i32,
    /// Config overrides set on the topic.
    pub configs: BTreeMap<String, String>,
    /// True for internal topics (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
}

/// Why a topic name is invalid (INVALID_TOPIC_EXCEPTION).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be \"{name}\""));
    }
    if name.len() > 249 {
        return Err(format!("topic name is longer than 249 characters ({})", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("topic name {name:?} contains illegal character {c:?}; legal: [a-zA-Z0-9._-]"));
    }
    Ok(())
}

/// Errors of the registry's persistence.
#[derive(Debug, thiserror::Error)]
pub enum TopicStoreError {
    /// Reading or writing a topic file failed.
    #[error("topic store I/O on {path} while {action}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A topic file could not be parsed.
    #[error("corrupt topic file {0}")]
    Corrupt(PathBuf),
}

/// Reads the topics of a single-node data directory from before the controller quorum
/// (`<data_dir>/.strata-topics/`, one file per topic) and its producer-id block
/// (`.strata-producer-ids`), as the metadata records that recreate them with the same ids
/// on `node_id`. The active controller writes them once, into an empty metadata log;
/// then [`mark_imported`] renames the old store away.
pub fn import_single_node_store(
    data_dir: &Path,
    node_id: i32,
) -> Result<Vec<crate::metadata::MetadataRecord>, TopicStoreError> {
    use crate::metadata::{MetadataRecord, PartitionRecord, TopicId};
    let dir = data_dir.join(".strata-topics");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let io = |path: &Path, action, source| TopicStoreError::Io { path: path.to_path_buf(), action, source };
    let mut metas = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| io(&dir, "listing the topic store", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io(&dir, "listing the topic store", e))?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tmp") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, "reading a topic file", e))?;
        metas.push(parse_topic_file(&text).ok_or_else(|| TopicStoreError::Corrupt(path.clone()))?);
    }
    metas.sort_by(|a, b| a.name.cmp(&b.name));
    let mut records = Vec::new();
    for m in metas {
        let topic_id = TopicId(m.id);
        records.push(MetadataRecord::Topic { name: m.name.clone(), topic_id });
        if !m.configs.is_empty() {
            records.push(MetadataRecord::TopicConfig { topic_id, configs: m.configs.clone() });
        }
        for partition in 0..m.partitions {
            records.push(MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition,
                replicas: vec![node_id],
                isr: vec![node_id],
                leader: node_id,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            }));
        }
    }
    if let Ok(text) = std::fs::read_to_string(data_dir.join(".strata-producer-ids")) {
        if let Ok(next) = text.trim().parse::<i64>() {
            records.push(MetadataRecord::ProducerIds { node_id, broker_epoch: -1, next_producer_id: next });
        }
    }
    Ok(records)
}

/// Renames the imported single-node store away so it is never imported twice.
pub fn mark_imported(data_dir: &Path) {
    for name in [".strata-topics", ".strata-producer-ids"] {
        let from = data_dir.join(name);
        if from.exists() {
            if let Err(e) = std::fs::rename(&from, data_dir.join(format!("{name}.imported"))) {
                tracing::error!(path = %from.display(), error = %e, "cannot rename the imported topic store");
            }
        }
    }
}

/// A fresh random topic id (never zero, like Kafka's `Uuid.randomUuid`).
pub fn new_topic_id() -> Uuid {
    loop {
        let id = Uuid(*uuid::Uuid::new_v4().as_bytes());
        if !id.is_zero() {
            return id;
        }
    }
}

fn parse_topic_file(text: &str) -> Option<TopicMeta> {
    let mut meta = TopicMeta {
        name: String::new(),
        id: Uuid::ZERO,
        partitions: 0,
        configs: BTreeMap::new(),
        internal: false,
    };
    for line in text.lines() {
        let (k, v) = line.split_once('=')?;
        match k {
            "name" => meta.name = v.to_string(),
            "id" => meta.id = Uuid(*uuid::Uuid::parse_str(v).ok()?.as_bytes()),
            "partitions" => meta.partitions = v.parse().ok()?,
            "internal" => meta.internal = v == "true",
            _ => {
                meta.configs.insert(k.strip_prefix("config.")?.to_string(), v.to_string());
            }
        }
    }
    (!meta.name.is_empty() && !meta.id.is_zero() && meta.partitions > 0).then_some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_single_node_store_imports_with_its_ids_configs_and_producer_ids_once() {
        use crate::metadata::MetadataRecord;
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join(".strata-topics");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(
            store.join("orders"),
            "name=orders\nid=6f1c3a52-8f0e-4d43-9a4b-0c1d2e3f4a5b\npartitions=2\ninternal=false\nconfig.cleanup.policy=compact\n",
        )
        .unwrap();
        std::fs::write(store.join("half-written.tmp"), "name=").unwrap();
        std::fs::write(dir.path().join(".strata-producer-ids"), "5000\n").unwrap();

        let records = import_single_node_store(dir.path(), 7).unwrap();
        let id = match &records[0] {
            MetadataRecord::Topic { name, topic_id } => {
                assert_eq!(name, "orders");
                *topic_id
            }
            other => panic!("first record {other:?}"),
        };
        assert_eq!(uuid::Uuid::from_bytes(id.0 .0).to_string(), "6f1c3a52-8f0e-4d43-9a4b-0c1d2e3f4a5b");
        assert!(matches!(&records[1], MetadataRecord::TopicConfig { configs, .. }
            if configs.get("cleanup.policy").map(String::as_str) == Some("compact")));
        let partitions: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(partitions.len(), 2);
        assert!(partitions.iter().all(|p| p.replicas == vec![7] && p.isr == vec![7] && p.leader == 7));
        assert!(matches!(
            records.last(),
            Some(MetadataRecord::ProducerIds { node_id: 7, next_producer_id: 5000, .. })
        ));

        mark_imported(dir.path());
        assert!(import_single_node_store(dir.path(), 7).unwrap().is_empty());
        assert!(dir.path().join(".strata-topics.imported").is_dir());
    }

    #[test]
    fn a_corrupt_topic_file_is_an_error_not_a_silent_skip() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join(".strata-topics");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("x"), "garbage").unwrap();
        assert!(matches!(import_single_node_store(dir.path(), 1), Err(TopicStoreError::Corrupt(_))));
    }
}
