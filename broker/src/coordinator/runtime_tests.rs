//! The coordinator runtime on its own: a toy shard (a key-value store per partition)
//! over a writer in memory whose leadership, high watermark and failures the tests set.
//! What the group and transaction coordinators rely on: loads replay the log, lost
//! leadership unloads, appends complete in order once replicated, failed or timed-out
//! appends are reported, waiting appends fail over, deadlines tick the shard, and
//! partitions led but not loaded yet are reported as such.

use super::runtime::{Coordinator, Events, Handled, Output, Shard};
use super::writer::{BatchContext, PartitionWriter, Wait};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_protocol::messages::heartbeat::HeartbeatResponse;
use strata_protocol::{ErrorCode, ResponseBody};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

const TOPIC: &str = "__toy";
/// Long enough for anything that should happen to happen.
const PATIENCE: Duration = Duration::from_secs(10);
/// Long enough to trust that something that should not happen did not.
const A_WHILE: Duration = Duration::from_millis(150);

#[derive(Debug, Default)]
struct MemPartition {
    log: Vec<(Bytes, Option<Bytes>)>,
    high_watermark: usize,
    leader: bool,
    epoch: i32,
}

/// A writer in memory: one log per partition of [`TOPIC`].
#[derive(Debug, Default)]
struct MemWriter {
    partitions: Mutex<HashMap<i32, MemPartition>>,
    fail_next: Mutex<Option<ErrorCode>>,
    changed: Arc<Notify>,
}

#[derive(Debug, Clone)]
struct MemAppended {
    partition: i32,
    end: usize,
    epoch: i32,
}

impl MemWriter {
    fn with<T>(&self, partition: i32, f: impl FnOnce(&mut MemPartition) -> T) -> T {
        let mut partitions = self.partitions.lock().unwrap();
        let out = f(partitions.entry(partition).or_default());
        drop(partitions);
        self.changed.notify_waiters();
        out
    }

    fn lead(&self, partition: i32, epoch: i32) {
        self.with(partition, |p| {
            p.leader = true;
            p.epoch = epoch;
        });
    }

    fn lose(&self, partition: i32) {
        self.with(partition, |p| p.leader = false);
    }

    fn replicate(&self, partition: i32, upto: usize) {
        self.with(partition, |p| p.high_watermark = upto);
    }

    fn seed(&self, partition: i32, key: &str, value: &str) {
        self.with(partition, |p| {
            p.log.push((Bytes::from(key.to_string()), Some(Bytes::from(value.to_string()))));
            p.high_watermark = p.log.len();
        });
    }
}

impl PartitionWriter for MemWriter {
    type Appended = MemAppended;

    fn append(
        &self,
        topic: &str,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        _producer: Option<(i64, i16)>,
        _now_ms: i64,
    ) -> Result<MemAppended, ErrorCode> {
        assert_eq!(topic, TOPIC);
        if let Some(code) = self.fail_next.lock().unwrap().take() {
            return Err(code);
        }
        self.with(partition, |p| {
            if !p.leader {
                return Err(ErrorCode::NotLeaderOrFollower);
            }
            p.log.extend_from_slice(records);
            Ok(MemAppended { partition, end: p.log.len(), epoch: p.epoch })
        })
    }

    fn replicated(&self, a: &MemAppended) -> Option<Result<(), ErrorCode>> {
        let partitions = self.partitions.lock().unwrap();
        let p = partitions.get(&a.partition)?;
        if !p.leader || p.epoch != a.epoch {
            return Some(Err(ErrorCode::NotLeaderOrFollower));
        }
        (p.high_watermark >= a.end).then_some(Ok(()))
    }

    fn wait_replicated(&self, _a: MemAppended, deadline: Instant) -> Wait {
        let changed = self.changed.clone();
        Box::pin(async move {
            let _ = tokio::time::timeout_at(deadline, changed.notified()).await;
        })
    }

    fn leads(&self, _topic: &str, partition: i32) -> bool {
        self.partitions.lock().unwrap().get(&partition).is_some_and(|p| p.leader)
    }

    fn replay(
        &self,
        _topic: &str,
        partition: i32,
        f: &mut dyn FnMut(BatchContext, Bytes, Option<Bytes>),
    ) -> Result<(), ErrorCode> {
        let log = self.partitions.lock().unwrap().get(&partition).map(|p| p.log.clone()).unwrap_or_default();
        let plain =
            BatchContext { producer_id: -1, producer_epoch: -1, is_transactional: false, is_control: false };
        for (key, value) in log {
            f(plain, key, value);
        }
        Ok(())
    }

    fn awaiting_load(&self, _topic: &str, owned: &BTreeMap<i32, i32>) -> BTreeSet<i32> {
        let partitions = self.partitions.lock().unwrap();
        partitions.iter().filter(|(i, p)| p.leader && !owned.contains_key(i)).map(|(i, _)| *i).collect()
    }
}

/// A request to the toy shard; answers carry a number in `throttle_time_ms`.
#[derive(Debug)]
enum Toy {
    /// Write `key=value` to the partition; answered once replicated.
    Put { partition: i32, key: &'static str, value: &'static str },
    /// How many keys the partition holds; COORDINATOR_LOAD_IN_PROGRESS while led but
    /// not loaded, NOT_COORDINATOR if not loaded.
    Count { partition: i32 },
    /// Answered `ms` after it arrived, by a tick.
    After { ms: i64 },
}

/// A key-value store per partition.
#[derive(Debug, Default)]
struct ToyShard {
    loaded: HashMap<i32, BTreeMap<Bytes, Bytes>>,
    loading: HashMap<i32, BTreeMap<Bytes, Bytes>>,
    awaiting: BTreeSet<i32>,
    /// Appends in flight: id → (request token, partition, key, value).
    appends: HashMap<u64, (u64, i32, Bytes, Bytes)>,
    next_append: u64,
    timers: Vec<(i64, u64)>,
    /// `resize` calls seen.
    sizes: Vec<i32>,
}

fn answer(token: u64, error: ErrorCode, number: i32) -> Output<ToyShard> {
    let response = HeartbeatResponse { throttle_time_ms: number, error_code: error.code() };
    Output::Respond { token, response: ResponseBody::Heartbeat(response) }
}

/// What a test inspects.
#[derive(Debug)]
struct Inspect(oneshot::Sender<(BTreeSet<i32>, Vec<i32>)>);

impl Shard for ToyShard {
    type Meta = u64;
    type Request = Toy;
    type Event = Inspect;
    type AppendId = u64;
    type Effect = std::convert::Infallible;
    const TOPIC: &'static str = TOPIC;
    const NAME: &'static str = "toy";

    fn token(meta: &u64) -> u64 {
        *meta
    }

    fn handle(&mut self, token: u64, request: Toy, now_ms: i64) -> Handled<Self> {
        match request {
            Toy::Put { partition, key, value } => {
                if !self.loaded.contains_key(&partition) {
                    return Handled::Later(vec![answer(token, ErrorCode::NotCoordinator, 0)]);
                }
                let id = self.next_append;
                self.next_append += 1;
                let (key, value) = (Bytes::from_static(key.as_bytes()), Bytes::from_static(value.as_bytes()));
                self.appends.insert(id, (token, partition, key.clone(), value.clone()));
                Handled::Later(vec![Output::Append {
                    id,
                    partition,
                    producer: None,
                    records: vec![(key, Some(value))],
                }])
            }
            Toy::Count { partition } => {
                let (error, count) = match self.loaded.get(&partition) {
                    Some(kv) => (ErrorCode::None, kv.len() as i32),
                    None if self.awaiting.contains(&partition) => (ErrorCode::CoordinatorLoadInProgress, 0),
                    None => (ErrorCode::NotCoordinator, 0),
                };
                let response = HeartbeatResponse { throttle_time_ms: count, error_code: error.code() };
                Handled::Now(ResponseBody::Heartbeat(response))
            }
            Toy::After { ms } => {
                self.timers.push((now_ms + ms, token));
                Handled::Later(Vec::new())
            }
        }
    }

    fn event(&mut self, Inspect(reply): Inspect, _now_ms: i64) -> Vec<Output<Self>> {
        let _ = reply.send((self.loaded.keys().copied().collect(), self.sizes.clone()));
        Vec::new()
    }

    fn tick(&mut self, now_ms: i64) -> Vec<Output<Self>> {
        let (due, later): (Vec<_>, Vec<_>) = self.timers.drain(..).partition(|(at, _)| *at <= now_ms);
        self.timers = later;
        due.into_iter().map(|(_, token)| answer(token, ErrorCode::None, 0)).collect()
    }

    fn next_deadline(&self) -> Option<i64> {
        self.timers.iter().map(|(at, _)| *at).min()
    }

    fn append_complete(&mut self, id: u64, result: Result<(), ErrorCode>, _now_ms: i64) -> Vec<Output<Self>> {
        let (token, partition, key, value) = self.appends.remove(&id).expect("an append in flight");
        match result {
            Ok(()) => {
                let kv = self.loaded.get_mut(&partition).expect("loaded");
                kv.insert(key, value);
                vec![answer(token, ErrorCode::None, kv.len() as i32)]
            }
            Err(code) => vec![answer(token, code, 0)],
        }
    }

    fn set_awaiting_load(&mut self, partitions: BTreeSet<i32>) {
        self.awaiting = partitions;
    }

    fn resize(&mut self, partitions: i32) {
        self.sizes.push(partitions);
    }

    fn begin_load(&mut self, partition: i32, _leader_epoch: i32, _now_ms: i64) -> Vec<Output<Self>> {
        self.loading.insert(partition, BTreeMap::new());
        Vec::new()
    }

    fn replay(
        &mut self,
        partition: i32,
        _batch: BatchContext,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<(), ()> {
        let kv = self.loading.get_mut(&partition).ok_or(())?;
        match value {
            Some(v) => kv.insert(key, v),
            None => kv.remove(&key),
        };
        Ok(())
    }

    fn complete_load(&mut self, partition: i32, _now_ms: i64) -> Vec<Output<Self>> {
        let kv = self.loading.remove(&partition).unwrap_or_default();
        self.loaded.insert(partition, kv);
        Vec::new()
    }

    fn unload(&mut self, partition: i32, _now_ms: i64) -> Vec<Output<Self>> {
        self.loaded.remove(&partition);
        // Appends of the partition still in flight complete with its leadership's loss.
        Vec::new()
    }

    fn start_effect(&mut self, effect: std::convert::Infallible, _events: Events<Self>) {
        match effect {}
    }
}

struct Harness {
    writer: Arc<MemWriter>,
    coordinator: Coordinator<ToyShard>,
    next_token: u64,
}

impl Harness {
    fn start(append_timeout: Duration) -> Harness {
        let writer = Arc::new(MemWriter::default());
        let coordinator = Coordinator::start(ToyShard::default(), writer.clone(), append_timeout);
        Harness { writer, coordinator, next_token: 1 }
    }

    /// Sends `request`; the answer arrives on the returned task.
    fn send(&mut self, request: Toy) -> tokio::task::JoinHandle<(ErrorCode, i32)> {
        let token = self.next_token;
        self.next_token += 1;
        let coordinator = self.coordinator.clone();
        tokio::spawn(async move {
            match coordinator.call(token, request).await {
                Some(ResponseBody::Heartbeat(r)) => {
                    (ErrorCode::from_code(r.error_code).expect("a known code"), r.throttle_time_ms)
                }
                other => panic!("unexpected answer {other:?}"),
            }
        })
    }

    async fn ask(&mut self, request: Toy) -> (ErrorCode, i32) {
        tokio::time::timeout(PATIENCE, self.send(request)).await.expect("answered in time").expect("task")
    }

    /// The partitions loaded and the `resize` calls seen, once everything sent before
    /// was handled.
    async fn inspect(&self) -> (BTreeSet<i32>, Vec<i32>) {
        let (reply, rx) = oneshot::channel();
        self.coordinator.notify(Inspect(reply));
        tokio::time::timeout(PATIENCE, rx).await.expect("inspected in time").expect("running")
    }

    /// Leads `led` (partition → epoch) in the writer and tells the coordinator so.
    async fn leadership(&self, led: &[(i32, i32)], partitions: i32) {
        for &(p, epoch) in led {
            self.writer.lead(p, epoch);
        }
        self.coordinator.leadership(led.iter().copied().collect(), partitions);
        self.inspect().await;
    }
}

async fn pending(task: &mut tokio::task::JoinHandle<(ErrorCode, i32)>) -> bool {
    tokio::time::timeout(A_WHILE, task).await.is_err()
}

async fn answered(task: tokio::task::JoinHandle<(ErrorCode, i32)>) -> (ErrorCode, i32) {
    tokio::time::timeout(PATIENCE, task).await.expect("answered in time").expect("task")
}

#[tokio::test]
async fn a_partition_led_is_replayed_from_its_log_and_unloaded_when_lost() {
    let mut h = Harness::start(PATIENCE);
    h.writer.seed(0, "a", "1");
    h.writer.seed(0, "b", "2");
    h.writer.seed(0, "a", "3");
    assert_eq!(h.ask(Toy::Count { partition: 0 }).await.0, ErrorCode::NotCoordinator);
    h.leadership(&[(0, 1)], 3).await;
    assert_eq!(h.inspect().await, (BTreeSet::from([0]), vec![3]), "loaded, sized once");
    assert_eq!(h.ask(Toy::Count { partition: 0 }).await, (ErrorCode::None, 2), "the log's keys");
    h.writer.lose(0);
    h.coordinator.leadership(BTreeMap::new(), 3);
    assert_eq!(h.inspect().await.0, BTreeSet::new(), "unloaded");
    assert_eq!(h.ask(Toy::Count { partition: 0 }).await.0, ErrorCode::NotCoordinator);
    // Led again in a new epoch: loaded again, with what the log holds now.
    h.writer.seed(0, "c", "4");
    h.leadership(&[(0, 2)], 3).await;
    assert_eq!(h.ask(Toy::Count { partition: 0 }).await, (ErrorCode::None, 3));
}

#[tokio::test]
async fn a_partition_led_but_not_yet_loaded_is_reported_as_loading() {
    let mut h = Harness::start(PATIENCE);
    h.writer.lead(1, 1);
    assert_eq!(h.ask(Toy::Count { partition: 1 }).await.0, ErrorCode::CoordinatorLoadInProgress);
    h.leadership(&[(1, 1)], 2).await;
    assert_eq!(h.ask(Toy::Count { partition: 1 }).await, (ErrorCode::None, 0));
}

#[tokio::test]
async fn appends_complete_in_order_once_replicated() {
    let mut h = Harness::start(PATIENCE);
    h.leadership(&[(0, 1)], 1).await;
    let mut first = h.send(Toy::Put { partition: 0, key: "a", value: "1" });
    let mut second = h.send(Toy::Put { partition: 0, key: "b", value: "2" });
    assert!(pending(&mut first).await && pending(&mut second).await, "nothing replicated yet");
    h.writer.replicate(0, 1);
    assert_eq!(answered(first).await, (ErrorCode::None, 1));
    assert!(pending(&mut second).await, "the second is not replicated yet");
    h.writer.replicate(0, 2);
    assert_eq!(answered(second).await, (ErrorCode::None, 2));
}

#[tokio::test]
async fn a_refused_append_is_reported_to_the_shard() {
    let mut h = Harness::start(PATIENCE);
    h.leadership(&[(0, 1)], 1).await;
    *h.writer.fail_next.lock().unwrap() = Some(ErrorCode::NotEnoughReplicas);
    assert_eq!(h.ask(Toy::Put { partition: 0, key: "a", value: "1" }).await.0, ErrorCode::NotEnoughReplicas);
    let next = h.send(Toy::Put { partition: 0, key: "a", value: "1" });
    h.writer.replicate(0, 1);
    assert_eq!(answered(next).await, (ErrorCode::None, 1), "the next append is unaffected");
}

#[tokio::test]
async fn an_append_never_replicated_times_out() {
    let mut h = Harness::start(Duration::from_millis(200));
    h.leadership(&[(0, 1)], 1).await;
    let started = Instant::now();
    let put = h.send(Toy::Put { partition: 0, key: "a", value: "1" });
    assert_eq!(answered(put).await.0, ErrorCode::RequestTimedOut);
    assert!(started.elapsed() >= Duration::from_millis(200), "not before the append timeout");
}

#[tokio::test]
async fn appends_waiting_when_leadership_moves_fail_over() {
    let mut h = Harness::start(PATIENCE);
    h.leadership(&[(0, 1)], 1).await;
    let mut put = h.send(Toy::Put { partition: 0, key: "a", value: "1" });
    assert!(pending(&mut put).await);
    h.writer.lose(0);
    assert_eq!(answered(put).await.0, ErrorCode::NotLeaderOrFollower, "failed at once, not at its timeout");
    h.coordinator.leadership(BTreeMap::new(), 1);
    assert_eq!(h.inspect().await.0, BTreeSet::new());
    assert_eq!(h.ask(Toy::Put { partition: 0, key: "a", value: "1" }).await.0, ErrorCode::NotCoordinator);
}

#[tokio::test]
async fn the_shard_is_ticked_at_its_deadline() {
    let mut h = Harness::start(PATIENCE);
    let started = Instant::now();
    let mut late = h.send(Toy::After { ms: 400 });
    let soon = h.send(Toy::After { ms: 100 });
    assert_eq!(answered(soon).await.0, ErrorCode::None);
    assert!(pending(&mut late).await, "not due yet");
    assert_eq!(answered(late).await.0, ErrorCode::None);
    assert!(started.elapsed() >= Duration::from_millis(400));
}
