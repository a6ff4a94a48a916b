//! The topic registry: names, ids, partition counts and per-topic config overrides.
//!
//! Single-node for now: the registry persists itself as one small file per topic under
//! `<log.dir>/.strata-topics/`, written atomically (temp file + rename). Readers take an
//! immutable snapshot through `ArcSwap`, so Metadata and Produce never wait on an admin
//! request. When the controller quorum lands, this file store is replaced by its
//! replicated metadata log; the snapshot interface stays.

use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

/// An immutable view of every topic.
#[derive(Debug, Default)]
pub struct TopicsSnapshot {
    /// Topics by name.
    pub by_name: BTreeMap<String, Arc<TopicMeta>>,
    /// Topic names by id.
    pub by_id: BTreeMap<Uuid, String>,
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

/// The registry; writes are serialised by a mutex and published as a new snapshot.
#[derive(Debug)]
pub struct TopicRegistry {
    dir: PathBuf,
    write: Mutex<()>,
    snapshot: ArcSwap<TopicsSnapshot>,
}

impl TopicRegistry {
    /// Loads every topic file under `<data_dir>/.strata-topics`.
    pub fn open(data_dir: &Path) -> Result<TopicRegistry, TopicStoreError> {
        let dir = data_dir.join(".strata-topics");
        let io =
            |path: &Path, action, source| TopicStoreError::Io { path: path.to_path_buf(), action, source };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, "creating the topic store", e))?;
        let mut snap = TopicsSnapshot::default();
        let entries = std::fs::read_dir(&dir).map_err(|e| io(&dir, "listing the topic store", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(&dir, "listing the topic store", e))?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| io(&path, "reading a topic file", e))?;
            let meta = parse_topic_file(&text).ok_or_else(|| TopicStoreError::Corrupt(path.clone()))?;
            snap.by_id.insert(meta.id, meta.name.clone());
            snap.by_name.insert(meta.name.clone(), Arc::new(meta));
        }
        Ok(TopicRegistry { dir, write: Mutex::new(()), snapshot: ArcSwap::from_pointee(snap) })
    }

    /// The current view.
    pub fn snapshot(&self) -> Arc<TopicsSnapshot> {
        self.snapshot.load_full()
    }

    /// One topic, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.snapshot.load().by_name.get(name).cloned()
    }

    /// Applies `change` to the topic named `name` (None = absent) and persists the
    /// result; returns what `change` returned. The closure runs under the write lock, so
    /// check-then-act (create if absent) is atomic.
    pub fn update<R>(
        &self,
        name: &str,
        change: impl FnOnce(Option<&TopicMeta>) -> (Option<TopicMeta>, R),
    ) -> Result<R, TopicStoreError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.snapshot.load_full();
        let old = current.by_name.get(name).map(|m| m.as_ref());
        let (new, out) = change(old);
        if new.as_ref() == old {
            return Ok(out);
        }
        let path = self.dir.join(name);
        match &new {
            Some(meta) => {
                let tmp = self.dir.join(format!("{name}.tmp"));
                let io = |action, source| TopicStoreError::Io { path: tmp.clone(), action, source };
                std::fs::write(&tmp, render_topic_file(meta)).map_err(|e| io("writing a topic file", e))?;
                std::fs::rename(&tmp, &path).map_err(|e| io("renaming a topic file", e))?;
            }
            None => {
                if let Err(e) = std::fs::remove_file(&path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(TopicStoreError::Io { path, action: "removing a topic file", source: e });
                    }
                }
            }
        }
        let mut next = TopicsSnapshot { by_name: current.by_name.clone(), by_id: current.by_id.clone() };
        if let Some(old) = old {
            next.by_id.remove(&old.id);
            next.by_name.remove(&old.name);
        }
        if let Some(meta) = new {
            next.by_id.insert(meta.id, meta.name.clone());
            next.by_name.insert(meta.name.clone(), Arc::new(meta));
        }
        self.snapshot.store(Arc::new(next));
        Ok(out)
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

fn render_topic_file(m: &TopicMeta) -> String {
    let mut out = format!(
        "name={}\nid={}\npartitions={}\ninternal={}\n",
        m.name,
        uuid::Uuid::from_bytes(m.id.0),
        m.partitions,
        m.internal
    );
    for (k, v) in &m.configs {
        out.push_str(&format!("config.{k}={v}\n"));
    }
    out
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
    fn registry_persists_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        let meta = TopicMeta {
            name: "t".into(),
            id: new_topic_id(),
            partitions: 3,
            configs: [("retention.ms".to_string(), "1000".to_string())].into(),
            internal: false,
        };
        let m2 = meta.clone();
        reg.update("t", move |_| (Some(m2), ())).unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert_eq!(reg.get("t").as_deref(), Some(&meta));
        assert_eq!(reg.snapshot().by_id.get(&meta.id).map(String::as_str), Some("t"));
        reg.update("t", |_| (None, ())).unwrap();
        assert!(TopicRegistry::open(dir.path()).unwrap().get("t").is_none());
    }
}
