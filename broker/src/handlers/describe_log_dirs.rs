//! DescribeLogDirs (35): what each log directory of this broker holds, as Kafka answers
//! it: per directory its error, absolute path, every partition log in it with its size on
//! disk (the bytes of its segment files, Kafka's `UnifiedLog.size`) and offset lag, from
//! v4 (KIP-827) the size and usable space of the volume it is on, and from v5 (KIP-1066)
//! whether it is cordoned (never, here).
//!
//! Strata has one log directory (the first of `log.dirs`; JBOD is not built), so the
//! answer has one entry and no future replicas (`is_future_key` is always false: there is
//! no AlterReplicaLogDirs to create them). `kafka-reassign-partitions` asks this of every
//! broker to print the replicas' current log dirs before it submits a reassignment.

use crate::errors::LogDirError;
use crate::node::Node;
use crate::replica::write_health::{volume_bytes, VolumeBytes};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use strata_protocol::messages::describe_log_dirs::{
    DescribeLogDirsPartition, DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeLogDirsResult,
    DescribeLogDirsTopic,
};

/// Kafka's `INVALID_OFFSET_LAG`: the lag of a log whose partition this broker does not
/// host (a stray log awaiting deletion).
const INVALID_OFFSET_LAG: i64 = -1;

/// Handles DescribeLogDirs: null `topics` describes every partition log in the dir;
/// otherwise only the named partitions this broker has a log for (others are left out,
/// as Kafka leaves them out).
pub fn handle(node: &Node, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let root = node.replicas.logs().root();
    let log_dir = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let result = match volume(&log_dir) {
        Ok(space) => DescribeLogDirsResult {
            error_code: 0,
            log_dir: log_dir.display().to_string(),
            topics: topics(node, request.topics.as_deref()),
            total_bytes: clamp_i64(space.total_bytes),
            usable_bytes: clamp_i64(space.usable_bytes),
            // KIP-1066 cordons one of several dirs; Strata's one dir always takes replicas.
            is_cordoned: false,
        },
        Err(e) => {
            tracing::warn!(error = %e, "log dir described as failed");
            DescribeLogDirsResult {
                error_code: crate::errors::log_dir_error_code(&e).code(),
                log_dir: log_dir.display().to_string(),
                ..Default::default()
            }
        }
    };
    DescribeLogDirsResponse { throttle_time_ms: 0, error_code: 0, results: vec![result] }
}

fn volume(dir: &Path) -> Result<VolumeBytes, LogDirError> {
    volume_bytes(dir).map_err(|source| LogDirError::Unreadable { path: dir.to_path_buf(), source })
}

fn clamp_i64(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// The partition logs of the dir, by topic (sorted, so answers are stable), filtered by
/// the request's topics.
fn topics(
    node: &Node,
    wanted: Option<&[strata_protocol::messages::describe_log_dirs::DescribableLogDirTopic]>,
) -> Vec<DescribeLogDirsTopic> {
    let wanted: Option<HashSet<(&str, i32)>> = wanted
        .map(|ts| ts.iter().flat_map(|t| t.partitions.iter().map(|&p| (t.topic.as_str(), p))).collect());
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for log in node.replicas.logs().all() {
        let (topic, index) = (log.topic(), log.partition());
        if wanted.as_ref().is_some_and(|w| !w.contains(&(topic, index))) {
            continue;
        }
        // Kafka's lag of a current log: how far its end is below the high watermark,
        // which for a hosted replica is 0 (a follower's high watermark never passes its
        // log end).
        let offset_lag = node
            .replicas
            .get(topic, index)
            .map_or(INVALID_OFFSET_LAG, |p| (p.high_watermark() - log.log_end_offset()).max(0));
        by_topic.entry(topic.to_string()).or_default().push(DescribeLogDirsPartition {
            partition_index: index,
            partition_size: clamp_i64(log.size_in_bytes()),
            offset_lag,
            is_future_key: false,
        });
    }
    by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic { name, partitions }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::ErrorCode;

    #[test]
    fn a_dir_that_cannot_be_stated_is_a_storage_error() {
        let e = volume(Path::new("/nonexistent/strata-log-dir")).expect_err("no such dir");
        assert!(e.to_string().contains("/nonexistent/strata-log-dir"), "{e}");
        assert_eq!(crate::errors::log_dir_error_code(&e), ErrorCode::KafkaStorageError);
    }

    #[test]
    fn a_live_dir_has_a_volume_with_usable_space_within_its_size() {
        let dir = tempfile::tempdir().expect("tmp");
        let v = volume(dir.path()).expect("statvfs");
        assert!(v.total_bytes > 0 && v.usable_bytes <= v.total_bytes, "{v:?}");
    }
}
