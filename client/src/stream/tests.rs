//! The runtime end to end, in virtual time (tokio's paused clock on one thread, so the
//! schedule is deterministic and nothing sleeps for real): two scripted sources feed a
//! counting operator and a sink that writes into an in-memory transactional store. Tasks
//! fail at chosen points (mid-stream, between prepare and commit, at a snapshot) and the
//! job is run again from the checkpoint directory: the committed output must hold every
//! expected record exactly once, in order per key.

use super::*;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Input: (key, value) pairs; source `s` emits keys `s*10 + (i % 3)`.
fn script(source: u64, len: u64) -> Vec<(u64, u64)> {
    (0..len).map(|i| (source * 10 + i % 3, i)).collect()
}

struct ScriptSource {
    records: Vec<(u64, u64)>,
    pos: usize,
    chunk: usize,
    fail_at: Option<usize>,
    completed: Arc<Mutex<Vec<CheckpointId>>>,
}

impl Source for ScriptSource {
    type Out = (u64, u64);
    async fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
        self.pos = state.map_or(0, |b| u64::from_be_bytes(b[..8].try_into().unwrap()) as usize);
        Ok(())
    }
    async fn poll_next(&mut self) -> Result<Vec<(u64, u64)>, StreamError> {
        if self.pos >= self.records.len() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(Vec::new());
        }
        let end = (self.pos + self.chunk).min(self.records.len());
        if let Some(at) = self.fail_at.filter(|&at| (self.pos..end).contains(&at)) {
            return Err(StreamError::task("source", format!("injected failure at record {at}")));
        }
        let out = self.records[self.pos..end].to_vec();
        self.pos = end;
        // Time passes between polls, so barriers land between batches.
        tokio::time::sleep(Duration::from_millis(7)).await;
        Ok(out)
    }
    async fn snapshot(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
        Ok(Bytes::copy_from_slice(&(self.pos as u64).to_be_bytes()))
    }
    async fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), StreamError> {
        self.completed.lock().unwrap().push(id);
        Ok(())
    }
}

/// Emits (key, value, running count of key).
#[derive(Default)]
struct Counter {
    counts: KeyedState<u64, u64>,
    seen: u64,
    fail_after: Option<u64>,
}

impl Operator for Counter {
    type In = (u64, u64);
    type Out = (u64, u64, u64);
    fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
        if let Some(s) = state {
            self.counts = KeyedState::restore(s)?;
        }
        Ok(())
    }
    fn process(&mut self, _: usize, (k, v): (u64, u64), out: &mut Vec<Self::Out>) -> Result<(), StreamError> {
        self.seen += 1;
        if self.fail_after.is_some_and(|n| self.seen > n) {
            return Err(StreamError::task("operator", "injected failure"));
        }
        let c = self.counts.entry(k);
        *c += 1;
        out.push((k, v, *c));
        Ok(())
    }
    fn snapshot(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
        Ok(self.counts.snapshot())
    }
}

/// What the sink writes: (key, value, running count of the key).
type Out = (u64, u64, u64);

/// A transactional store: transactions are open, prepared (by id) or committed.
#[derive(Default)]
struct TxnStore {
    next_txn: u64,
    open: Option<(u64, Vec<Out>)>,
    prepared: BTreeMap<u64, Vec<Out>>,
    committed: Vec<Out>,
    aborted: u64,
}

struct StoreSink {
    store: Arc<Mutex<TxnStore>>,
    prepared: Option<u64>,
    committed_count: watch::Sender<usize>,
    /// Fail in `commit` of this checkpoint (after it is complete and written).
    fail_commit_of: Option<CheckpointId>,
}

impl StoreSink {
    fn publish(&self) {
        let n = self.store.lock().unwrap().committed.len();
        self.committed_count.send_replace(n);
    }
}

impl Sink for StoreSink {
    type In = (u64, u64, u64);
    async fn restore(&mut self, last: Option<(CheckpointId, Bytes)>) -> Result<(), StreamError> {
        let mut s = self.store.lock().unwrap();
        let keep =
            last.and_then(|(_, b)| (b.len() == 8).then(|| u64::from_be_bytes(b[..8].try_into().unwrap())));
        // Commit what the last complete checkpoint prepared; abort everything newer.
        if let Some(txn) = keep {
            if let Some(records) = s.prepared.remove(&txn) {
                s.committed.extend(records);
            }
        }
        let dropped = s.prepared.len() as u64 + u64::from(s.open.is_some());
        s.prepared.clear();
        s.open = None;
        s.aborted += dropped;
        drop(s);
        self.publish();
        Ok(())
    }
    async fn write(&mut self, records: Vec<Self::In>) -> Result<(), StreamError> {
        let mut s = self.store.lock().unwrap();
        if s.open.is_none() {
            s.next_txn += 1;
            s.open = Some((s.next_txn, Vec::new()));
        }
        s.open.as_mut().unwrap().1.extend(records);
        Ok(())
    }
    async fn prepare(&mut self, _: CheckpointId) -> Result<Bytes, StreamError> {
        let mut s = self.store.lock().unwrap();
        let Some((txn, records)) = s.open.take() else {
            self.prepared = None;
            return Ok(Bytes::new());
        };
        s.prepared.insert(txn, records);
        self.prepared = Some(txn);
        Ok(Bytes::copy_from_slice(&txn.to_be_bytes()))
    }
    async fn commit(&mut self, id: CheckpointId) -> Result<(), StreamError> {
        if self.fail_commit_of == Some(id) {
            return Err(StreamError::task("sink", "injected crash between prepare and commit"));
        }
        if let Some(txn) = self.prepared.take() {
            let mut s = self.store.lock().unwrap();
            let records = s.prepared.remove(&txn).expect("prepared transaction");
            s.committed.extend(records);
        }
        self.publish();
        Ok(())
    }
    async fn close(&mut self) -> Result<(), StreamError> {
        let mut s = self.store.lock().unwrap();
        if s.open.take().is_some() {
            s.aborted += 1;
        }
        Ok(())
    }
}

/// What a failure-free run commits: per key, values in order with counts 1, 2, ...
fn expected(len: u64) -> BTreeMap<u64, Vec<(u64, u64)>> {
    let mut by_key: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for s in 0..2 {
        for (k, v) in script(s, len) {
            let n = by_key.get(&k).map_or(0, Vec::len) as u64 + 1;
            by_key.entry(k).or_default().push((v, n));
        }
    }
    by_key
}

fn by_key(committed: &[(u64, u64, u64)]) -> BTreeMap<u64, Vec<(u64, u64)>> {
    let mut out: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for &(k, v, c) in committed {
        out.entry(k).or_default().push((v, c));
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Faults {
    source_fail_at: Option<usize>,
    operator_fail_after: Option<u64>,
    fail_commit_of: Option<CheckpointId>,
}

struct Harness {
    dir: std::path::PathBuf,
    store: Arc<Mutex<TxnStore>>,
    len: u64,
    completed: Arc<Mutex<Vec<CheckpointId>>>,
}

impl Harness {
    fn new(name: &str, len: u64) -> Harness {
        let dir = std::env::temp_dir().join(format!("strata-job-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Harness { dir, store: Arc::default(), len, completed: Arc::default() }
    }

    /// Runs the job once; it stops when everything expected is committed, or fails.
    async fn run(&self, faults: Faults) -> Result<JobReport, StreamError> {
        let sources = (0..2)
            .map(|s| ScriptSource {
                records: script(s, self.len),
                pos: 0,
                chunk: 5,
                fail_at: if s == 1 { faults.source_fail_at } else { None },
                completed: self.completed.clone(),
            })
            .collect();
        let operator = Counter { fail_after: faults.operator_fail_after, ..Counter::default() };
        let (tx, mut rx) = watch::channel(0);
        let sink = StoreSink {
            store: self.store.clone(),
            prepared: None,
            committed_count: tx,
            fail_commit_of: faults.fail_commit_of,
        };
        let total = 2 * self.len as usize;
        let config = JobConfig { checkpoint_interval: Duration::from_millis(50), channel_capacity: 2 };
        let job = Job::new(config, CheckpointStore::open(&self.dir).unwrap(), sources, operator, sink);
        job.run(async move {
            let _ = rx.wait_for(|&n| n >= total).await;
        })
        .await
    }

    fn committed(&self) -> Vec<(u64, u64, u64)> {
        self.store.lock().unwrap().committed.clone()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_without_failures_commits_everything_once_and_stops_with_a_final_checkpoint() {
    let h = Harness::new("clean", 200);
    let report = h.run(Faults::default()).await.unwrap();
    assert_eq!(report.restored_from, None);
    assert!(report.checkpoints_completed >= 3, "{report:?}");
    assert_eq!(by_key(&h.committed()), expected(200));
    {
        let s = h.store.lock().unwrap();
        assert!(s.prepared.is_empty() && s.open.is_none(), "nothing left open");
    }
    // Both sources heard of every completed checkpoint, in order.
    let completed = h.completed.lock().unwrap().clone();
    let mut per_source: HashMap<CheckpointId, usize> = HashMap::new();
    for id in &completed {
        *per_source.entry(*id).or_default() += 1;
    }
    assert!(per_source.values().all(|&n| n == 2));
    assert_eq!(per_source.len() as u64, report.checkpoints_completed);
    // A second run resumes after the final checkpoint and has nothing to add.
    let again = h.run(Faults::default()).await.unwrap();
    assert_eq!(again.restored_from, Some(report.last_completed));
    assert_eq!(by_key(&h.committed()), expected(200));
}

#[tokio::test(start_paused = true)]
async fn failures_anywhere_resume_from_the_last_complete_checkpoint_exactly_once() {
    let h = Harness::new("faults", 300);
    let faults = [
        Faults { operator_fail_after: Some(137), ..Faults::default() },
        Faults { source_fail_at: Some(211), ..Faults::default() },
        Faults { operator_fail_after: Some(3), ..Faults::default() },
    ];
    for f in faults {
        let err = h.run(f).await.expect_err("the injected failure fails the job");
        assert!(matches!(err, StreamError::Task { .. }), "{err}");
    }
    // Output so far is a prefix of the exactly-once output for every key.
    let exp = expected(300);
    for (k, got) in by_key(&h.committed()) {
        assert_eq!(got[..], exp[&k][..got.len()], "key {k}");
    }
    h.run(Faults::default()).await.unwrap();
    assert_eq!(by_key(&h.committed()), exp);
    assert!(h.store.lock().unwrap().aborted > 0, "the failed runs left transactions to abort");
}

#[tokio::test(start_paused = true)]
async fn a_crash_between_prepare_and_commit_commits_the_prepared_transaction_on_restore() {
    let h = Harness::new("between", 150);
    // Checkpoint 2 is complete and written, but the sink dies before committing it.
    let err = h.run(Faults { fail_commit_of: Some(2), ..Faults::default() }).await.unwrap_err();
    assert!(err.to_string().contains("between prepare and commit"), "{err}");
    let before = h.committed().len();
    {
        let s = h.store.lock().unwrap();
        assert_eq!(s.prepared.len(), 1, "checkpoint 2's transaction is left prepared");
    }
    let store = CheckpointStore::open(&h.dir).unwrap();
    assert_eq!(store.latest().unwrap().map(|c| c.id), Some(2));
    let report = h.run(Faults::default()).await.unwrap();
    assert_eq!(report.restored_from, Some(2));
    assert!(h.committed().len() > before);
    assert_eq!(by_key(&h.committed()), expected(150), "committed once, never lost, never twice");
}
