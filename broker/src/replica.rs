//! `ReplicaManager`: the partitions this broker hosts, with the leader-side state Kafka
//! keeps next to each log (leader epoch, high watermark).
//!
//! Single node today: every partition is led here with an ISR of one, so the high
//! watermark follows the log end offset after each append. The fields and the checks
//! are the ones replication needs (HW <= LEO, leader epochs never go back); followers
//! and the ISR arrive with the replication issue.

use arc_swap::ArcSwap;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use strata_protocol::records::RecordSet;
use strata_storage::{AppendInfo, AppendOrigin, Log, LogConfig, LogManager, LogReadInfo, StorageError};
use tokio::sync::Notify;

fn now_ms() -> i64 {
    crate::handlers::now_ms()
}

/// One partition hosted by this broker.
#[derive(Debug)]
pub struct Partition {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub index: i32,
    /// The partition's log.
    pub log: Arc<Log>,
    leader_epoch: AtomicI32,
    high_watermark: AtomicI64,
    /// Fetches parked on this partition, woken by its next append.
    parked: Mutex<ParkedFetches>,
}

/// The parked fetches of one partition, each by a weak reference to its own `Notify`.
/// Registration drops dead entries once the list has doubled since the last prune, so
/// consumers long-polling a partition nobody writes to cannot grow it without bound.
#[derive(Debug, Default)]
struct ParkedFetches {
    waiters: Vec<Weak<Notify>>,
    prune_at: usize,
}

/// Entries a partition's parked list may reach before dead ones are pruned.
const PARKED_PRUNE_MIN: usize = 16;

impl Partition {
    /// A partition not yet hosted anywhere else (the replica manager creates them).
    fn new(topic: Arc<str>, index: i32, log: Arc<Log>) -> Partition {
        let leo = log.log_end_offset();
        Partition {
            topic,
            index,
            log,
            leader_epoch: AtomicI32::new(0),
            high_watermark: AtomicI64::new(leo),
            parked: Mutex::new(ParkedFetches::default()),
        }
    }

    /// Asks to be woken by the next append to this partition. `notify_one` keeps a
    /// permit, so an append between this call and the wait is not lost.
    pub fn park(&self, waker: &Arc<Notify>) {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        if parked.waiters.len() >= parked.prune_at.max(PARKED_PRUNE_MIN) {
            parked.waiters.retain(|w| w.strong_count() > 0);
            parked.prune_at = 2 * parked.waiters.len();
        }
        let weak = Arc::downgrade(waker);
        // A fetch woken by another of its partitions parks here again: once is enough.
        if !parked.waiters.iter().rev().take(8).any(|w| w.ptr_eq(&weak)) {
            parked.waiters.push(weak);
        }
    }

    /// Wakes every fetch parked on this partition (they re-read and park again if
    /// they still want more).
    fn wake_parked(&self) {
        let waiters = {
            let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
            parked.prune_at = 0;
            std::mem::take(&mut parked.waiters)
        };
        for waker in waiters.iter().filter_map(Weak::upgrade) {
            waker.notify_one();
        }
    }

    /// Fetches currently registered (live or not yet pruned), for tests.
    #[cfg(test)]
    fn parked_len(&self) -> usize {
        self.parked.lock().unwrap_or_else(|p| p.into_inner()).waiters.len()
    }

    /// The current leader epoch (KIP-101); only ever increases.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// Offsets below the high watermark are committed and visible to consumers.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Appends a producer's batches as leader and advances the high watermark (ISR of
    /// one: the leader's own log end offset).
    pub fn append_as_leader(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, StorageError> {
        self.append_with_origin(records, AppendOrigin::Client, now_ms)
    }

    /// Appends as leader on behalf of `origin` (a coordinator may write control batches
    /// and internal records that clients may not).
    pub fn append_with_origin(
        &self,
        records: Bytes,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let info = self.log.append_with_origin(records, self.leader_epoch(), origin, now_ms)?;
        self.advance_high_watermark(self.log.log_end_offset());
        self.wake_parked();
        Ok(info)
    }

    /// Moves the high watermark forward to `offset` (never backwards, never past the
    /// log end offset).
    pub fn advance_high_watermark(&self, offset: i64) {
        let leo = self.log.log_end_offset();
        assert!(offset <= leo, "high watermark {offset} beyond log end offset {leo}");
        self.high_watermark.fetch_max(offset, Ordering::AcqRel);
    }

    /// The last stable offset: below it no transaction is open, and it never exceeds
    /// the high watermark (LSO <= HW <= LEO).
    pub fn last_stable_offset(&self) -> i64 {
        let lso = self.log.last_stable_offset().min(self.high_watermark());
        debug_assert!(lso >= self.log.log_start_offset().min(self.high_watermark()));
        lso
    }

    /// Reads whole batches from `offset` for a consumer: nothing at or above the high
    /// watermark (`read_committed`: the last stable offset).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<LogReadInfo, StorageError> {
        let upper = if read_committed { self.last_stable_offset() } else { self.high_watermark() };
        self.log.read(offset, max_bytes, upper, min_one)
    }

    /// Reads record data for a consumer fetch. A compacted log can hold batches the
    /// cleaner emptied (kept to preserve offsets or a producer's last sequence) and
    /// segments holding nothing else; a response made only of empty batches makes
    /// librdkafka take the data for a message too large to fetch. So when a read finds
    /// only empty batches, the following batches are appended (bounded by `max_bytes`),
    /// as a Kafka log whose cleaner merged those segments would return them.
    pub fn read_for_fetch(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<RecordSet, ReadError> {
        let info = self.read(offset, max_bytes, min_one, read_committed)?;
        let slice = info.records;
        if slice.len() as usize >= SENDFILE_MIN_BYTES {
            let first = slice.first_batch_header().map_err(ReadError::Io)?;
            if first.is_some_and(|h| h.records_count != 0) {
                // Holds records: sent from the page cache as it is, never read here.
                let mut set = RecordSet::new();
                set.push_external(Arc::new(slice));
                return Ok(set);
            }
        }
        let mut data = slice.read_bytes().map_err(ReadError::Io)?;
        let upper = if read_committed { self.last_stable_offset() } else { self.high_watermark() };
        for _ in 0..64 {
            let Some(next) = next_offset_if_only_empty_batches(&data) else { break };
            if next >= upper || data.len() >= max_bytes {
                break;
            }
            let more = self.read(next, max_bytes - data.len(), false, read_committed)?;
            let more = more.records.read_bytes().map_err(ReadError::Io)?;
            if more.is_empty() {
                break;
            }
            let mut joined = bytes::BytesMut::with_capacity(data.len() + more.len());
            joined.extend_from_slice(&data);
            joined.extend_from_slice(&more);
            data = joined.freeze();
        }
        Ok(RecordSet::from(data))
    }

    /// After truncation (DeleteRecords does not truncate; replication will) the high
    /// watermark must not exceed the log end.
    fn clamp_high_watermark(&self) {
        let leo = self.log.log_end_offset();
        self.high_watermark.fetch_min(leo, Ordering::AcqRel);
    }
}

/// Fetch reads shorter than this are copied into the response: below it a `sendfile`
/// per partition costs more than the copy it saves.
const SENDFILE_MIN_BYTES: usize = 16 * 1024;

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

/// If `data` is non-empty and holds only batches without records, the offset after
/// its last batch.
fn next_offset_if_only_empty_batches(data: &Bytes) -> Option<i64> {
    let mut next = None;
    for batch in strata_protocol::records::RecordBatches::new(data.clone()) {
        let batch = batch.ok()?;
        if batch.records_count() != 0 {
            return None;
        }
        next = Some(batch.next_offset());
    }
    next
}

type PartitionMap = HashMap<String, Arc<[Arc<Partition>]>>;

/// All partitions of this broker, by topic then index. Lookups are lock-free
/// (a snapshot map); creating and deleting topics is serialised.
#[derive(Debug)]
pub struct ReplicaManager {
    logs: LogManager,
    partitions: ArcSwap<PartitionMap>,
    write: Mutex<()>,
}

impl ReplicaManager {
    /// Wraps an opened log manager.
    pub fn new(logs: LogManager) -> ReplicaManager {
        ReplicaManager { logs, partitions: ArcSwap::from_pointee(HashMap::new()), write: Mutex::new(()) }
    }

    /// The partition, if hosted here.
    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let map = self.partitions.load();
        let parts = map.get(topic)?;
        usize::try_from(index).ok().and_then(|i| parts.get(i)).cloned()
    }

    /// Every partition of a topic.
    pub fn topic(&self, topic: &str) -> Option<Arc<[Arc<Partition>]>> {
        self.partitions.load().get(topic).cloned()
    }

    /// Every hosted partition.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions.load().values().flat_map(|p| p.iter().cloned()).collect()
    }

    /// Opens (creating or recovering) partitions `0..count` of `topic`; partitions
    /// already open are kept.
    pub fn ensure_topic(&self, topic: &str, count: i32, config: &LogConfig) -> Result<(), StorageError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.partitions.load_full();
        let existing = current.get(topic).cloned();
        let mut parts: Vec<Arc<Partition>> = existing.as_deref().map(<[_]>::to_vec).unwrap_or_default();
        let name: Arc<str> = Arc::from(topic);
        for index in parts.len() as i32..count {
            let log = self.logs.get_or_create(topic, index, config.clone(), now_ms())?;
            log.update_config(config.clone())?;
            parts.push(Arc::new(Partition::new(name.clone(), index, log)));
        }
        let mut next = (*current).clone();
        next.insert(topic.to_string(), parts.into());
        self.partitions.store(Arc::new(next));
        Ok(())
    }

    /// Applies a new log configuration to every partition of `topic`.
    pub fn update_config(&self, topic: &str, config: &LogConfig) {
        for p in self.topic(topic).iter().flat_map(|p| p.iter()) {
            if let Err(e) = p.log.update_config(config.clone()) {
                tracing::error!(topic, partition = p.index, error = %e, "config update refused by the log");
            }
        }
    }

    /// Stops hosting `topic` and deletes its files.
    pub fn delete_topic(&self, topic: &str) -> Result<(), StorageError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.partitions.load_full();
        let Some(parts) = current.get(topic).cloned() else {
            return Ok(());
        };
        let mut next = (*current).clone();
        next.remove(topic);
        self.partitions.store(Arc::new(next));
        for p in parts.iter() {
            self.logs.remove(topic, p.index)?;
        }
        Ok(())
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

    /// Flushes and closes every log, writing the clean-shutdown marker.
    pub fn close(&self) -> Result<(), StorageError> {
        self.logs.close_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use strata_protocol::records::{NewRecord, RecordBatchBuilder};

    fn batch() -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        b.append(&NewRecord::new(1, None, Some(Bytes::from_static(b"v")))).expect("append");
        b.build().expect("build")
    }

    /// Whether `waker` holds a wakeup: the notified future completes on its first poll.
    async fn woken(waker: &Notify) -> bool {
        tokio::time::timeout(Duration::ZERO, waker.notified()).await.is_ok()
    }

    fn replicas(dir: &std::path::Path) -> ReplicaManager {
        let logs = LogManager::open(dir, LogConfig::default(), 0).expect("log manager");
        let replicas = ReplicaManager::new(logs);
        replicas.ensure_topic("t", 2, &LogConfig::default()).expect("topic");
        replicas
    }

    #[tokio::test]
    async fn an_append_wakes_only_the_fetches_parked_on_its_partition() {
        let dir = tempfile::tempdir().expect("tempdir");
        let replicas = replicas(dir.path());
        let (p0, p1) = (replicas.get("t", 0).expect("p0"), replicas.get("t", 1).expect("p1"));
        let (on_p0, on_p1, on_both) =
            (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
        p0.park(&on_p0);
        p1.park(&on_p1);
        p0.park(&on_both);
        p1.park(&on_both);
        p0.append_as_leader(batch(), 0).expect("append");
        assert!(woken(&on_p0).await, "parked on the partition appended to");
        assert!(woken(&on_both).await, "parked on it among others");
        assert!(!woken(&on_p1).await, "parked elsewhere: not woken");
        // A wakeup is consumed: the next append needs a new registration.
        p0.append_as_leader(batch(), 0).expect("append");
        assert!(!woken(&on_p0).await, "not parked any more");
        p1.append_as_leader(batch(), 0).expect("append");
        assert!(woken(&on_p1).await);
    }

    #[tokio::test]
    async fn fetches_long_polling_an_idle_partition_do_not_pile_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let replicas = replicas(dir.path());
        let p = replicas.get("t", 0).expect("p0");
        let live = Arc::new(Notify::new());
        p.park(&live);
        for _ in 0..10_000 {
            let short_lived = Arc::new(Notify::new());
            p.park(&short_lived);
            p.park(&short_lived);
        }
        assert!(p.parked_len() <= 2 * PARKED_PRUNE_MIN, "{} entries kept", p.parked_len());
        p.append_as_leader(batch(), 0).expect("append");
        assert!(woken(&live).await, "a live fetch survives the pruning");
        assert_eq!(p.parked_len(), 0);
    }
}
