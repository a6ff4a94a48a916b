//! The settings of the group and transaction coordinators, the log cleaner and producer-id
//! expiry: Kafka's `offsets.*`, `group.*`, `transaction.*` and `log.cleaner.*` keys, checked
//! at start-up like every other key (a value that is no number stops the broker and names
//! the key) and described by DescribeConfigs with their defaults.

use super::{ConfigError, Parser};
use crate::coordinator::group::GroupConfig;
use crate::coordinator::txn::TxnConfig;
use strata_storage::{CleanerConfig, StorageError};

/// Largest value of a key Kafka types INT.
const INT_MAX: i64 = i32::MAX as i64;

/// The background services' settings, with Kafka's defaults where Strata has no reason to
/// differ.
#[derive(Debug, Clone)]
pub struct CoordinatorsConfig {
    /// The group coordinator (`offsets.topic.num.partitions`, `group.*`, `offsets.retention.*`).
    pub group: GroupConfig,
    /// `offsets.commit.timeout.ms` (5000): how long an offset commit waits for its append.
    pub offsets_commit_timeout_ms: u64,
    /// `offsets.topic.segment.bytes` (104857600): `__consumer_offsets`' segment size.
    pub offsets_topic_segment_bytes: i64,
    /// The transaction coordinator (`transaction.*`); the partition counts are replaced by
    /// those of the internal topics once they exist.
    pub txn: TxnConfig,
    /// `transaction.state.log.segment.bytes` (104857600): `__transaction_state`'s segment size.
    pub transaction_state_log_segment_bytes: i64,
    /// `producer.id.expiration.check.interval.ms` (600000): how often idle producer ids
    /// are expired from the logs.
    pub producer_id_expiration_check_interval_ms: u64,
    /// `log.cleaner.enable` (true): whether compacted topics are cleaned.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms` (15000): the cleaner's pause when nothing needs cleaning.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size` (Strata: 16 MiB, about 700,000 keys per cleaning,
    /// where Kafka takes 128 MiB; set the key to change it) and `log.cleaner.io.buffer.size`.
    pub cleaner: CleanerConfig,
}

/// Strata's default `log.cleaner.dedupe.buffer.size`: a small broker's memory.
const DEDUPE_BUFFER_BYTES: i64 = 16 << 20;

impl CoordinatorsConfig {
    pub(super) fn parse(p: &mut Parser<'_>, two_phase_commit_enable: bool) -> Result<Self, ConfigError> {
        let g = GroupConfig::default();
        let t = TxnConfig::default();
        let offsets_topic_num_partitions =
            p.int_in("offsets.topic.num.partitions", i64::from(g.offsets_topic_num_partitions), 1, INT_MAX)?
                as i32;
        let group = GroupConfig {
            offsets_topic_num_partitions,
            group_min_session_timeout_ms: p.int_in(
                "group.min.session.timeout.ms",
                i64::from(g.group_min_session_timeout_ms),
                0,
                INT_MAX,
            )? as i32,
            group_max_session_timeout_ms: p.int_in(
                "group.max.session.timeout.ms",
                i64::from(g.group_max_session_timeout_ms),
                0,
                INT_MAX,
            )? as i32,
            group_initial_rebalance_delay_ms: p.int_in(
                "group.initial.rebalance.delay.ms",
                i64::from(g.group_initial_rebalance_delay_ms),
                0,
                INT_MAX,
            )? as i32,
            group_max_size: p.int_in("group.max.size", INT_MAX, 1, INT_MAX)? as usize,
            offset_metadata_max_bytes: p.int_in(
                "offset.metadata.max.bytes",
                g.offset_metadata_max_bytes as i64,
                0,
                INT_MAX,
            )? as usize,
            offsets_retention_ms: p.int_in(
                "offsets.retention.minutes",
                g.offsets_retention_ms / 60_000,
                1,
                INT_MAX,
            )? * 60_000,
            offsets_retention_check_interval_ms: p.int_in(
                "offsets.retention.check.interval.ms",
                g.offsets_retention_check_interval_ms,
                1,
                i64::MAX,
            )?,
            ..g
        };
        let offsets_commit_timeout_ms = p.int_in("offsets.commit.timeout.ms", 5_000, 1, INT_MAX)? as u64;
        let offsets_topic_segment_bytes = p.int_in("offsets.topic.segment.bytes", 104_857_600, 1, INT_MAX)?;
        let txn = TxnConfig {
            transaction_state_log_num_partitions: p.int_in(
                "transaction.state.log.num.partitions",
                i64::from(t.transaction_state_log_num_partitions),
                1,
                INT_MAX,
            )? as i32,
            offsets_topic_num_partitions,
            transaction_max_timeout_ms: p.int_in(
                "transaction.max.timeout.ms",
                i64::from(t.transaction_max_timeout_ms),
                1,
                INT_MAX,
            )? as i32,
            transactional_id_expiration_ms: p.int_in(
                "transactional.id.expiration.ms",
                t.transactional_id_expiration_ms,
                1,
                INT_MAX,
            )?,
            abort_timed_out_transaction_cleanup_interval_ms: p.int_in(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                t.abort_timed_out_transaction_cleanup_interval_ms,
                1,
                INT_MAX,
            )?,
            remove_expired_transaction_cleanup_interval_ms: p.int_in(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                t.remove_expired_transaction_cleanup_interval_ms,
                1,
                INT_MAX,
            )?,
            two_phase_commit_enable,
            ..t
        };
        let transaction_state_log_segment_bytes =
            p.int_in("transaction.state.log.segment.bytes", 104_857_600, 1, INT_MAX)?;
        let producer_id_expiration_check_interval_ms =
            p.int_in("producer.id.expiration.check.interval.ms", 600_000, 1, INT_MAX)? as u64;
        let c = CleanerConfig::default();
        let log_cleaner_enable = p.bool("log.cleaner.enable", true)?;
        let log_cleaner_backoff_ms = p.int_in("log.cleaner.backoff.ms", 15_000, 0, i64::MAX)?.max(1) as u64;
        let cleaner = CleanerConfig {
            dedupe_buffer_bytes: p.int_in(
                "log.cleaner.dedupe.buffer.size",
                DEDUPE_BUFFER_BYTES,
                0,
                i64::MAX,
            )? as usize,
            io_buffer_bytes: p.int_in("log.cleaner.io.buffer.size", c.io_buffer_bytes as i64, 1, INT_MAX)?
                as usize,
            ..c
        };
        if let Err(e) = cleaner.validate() {
            let key = match e {
                StorageError::InvalidConfig { key, .. } => key,
                _ => "log.cleaner.dedupe.buffer.size",
            };
            return Err(p.invalid(key, "too small for the cleaner (its key map needs room for a few keys)"));
        }
        Ok(CoordinatorsConfig {
            group,
            offsets_commit_timeout_ms,
            offsets_topic_segment_bytes,
            txn,
            transaction_state_log_segment_bytes,
            producer_id_expiration_check_interval_ms,
            log_cleaner_enable,
            log_cleaner_backoff_ms,
            cleaner,
        })
    }
}
