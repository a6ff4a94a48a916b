//! Random operations against a simple in-memory model of a log: appends of random
//! batches (all codecs), reads at random offsets with random limits, rolls, retention,
//! DeleteRecords, truncation, config changes, clean and unclean restarts, and torn tails,
//! plus idempotent and transactional producers: in-sequence sends, retries (answered as
//! duplicates with their original offsets), gaps and stale epochs (refused), epoch bumps
//! and COMMIT/ABORT markers; leader epochs (new epochs on appends and taken at the log
//! end, a replaced leader's append refused) and high watermark updates. After every
//! operation the log must match the model exactly, its first unstable offset (open
//! transactions and completed ones whose markers are at or above the high watermark)
//! and aborted transactions must match the model's transactions, and its leader epoch
//! entries and OffsetForLeaderEpoch answers must match the model's epochs.
//!
//! Reproduce a failure with `STRATA_MODEL_SEED=<seed> cargo test -p strata-storage --test log_model`.

mod common;
mod log_model_support;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use common::*;
use log_model_support::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_protocol::records::{Compression, EndTxnMarker, EndTxnMarkerBatch, NewRecord, RecordBatchBuilder};
use strata_storage::{AbortedTxn, AppendOrigin, Log, LogConfig, StorageError, TimestampAndOffset};

const TOPIC: &str = "model-topic";

struct Harness {
    rng: StdRng,
    root: tempfile::TempDir,
    log: Option<Log>,
    model: Model,
    config: LogConfig,
    now_ms: i64,
    counter: u64,
    seed: u64,
    /// The leader epoch appends are stamped with.
    epoch: i32,
}

impl Harness {
    fn log(&self) -> &Log {
        self.log.as_ref().expect("log open")
    }

    fn random_batch(&mut self) -> (Bytes, Vec<(i64, Bytes)>) {
        let codecs =
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
        let codec = codecs[self.rng.gen_range(0..codecs.len())];
        let n = self.rng.gen_range(1..=6);
        let mut builder = RecordBatchBuilder::new(self.rng.gen_range(-5..1_000)).compression(codec);
        let mut records = Vec::new();
        for _ in 0..n {
            self.counter += 1;
            let pad = "p".repeat(self.rng.gen_range(0..120));
            let value = Bytes::from(format!("s{}-{}-{pad}", self.seed, self.counter));
            let ts = self.now_ms + self.rng.gen_range(-300..300);
            builder.append(&NewRecord::new(ts, None, Some(value.clone()))).unwrap();
            records.push((ts, value));
        }
        (builder.build().unwrap(), records)
    }

    fn append(&mut self) {
        let count = self.rng.gen_range(1..=3);
        let mut payload = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..count {
            let (bytes, records) = self.random_batch();
            payload.push(bytes);
            expected.push(records);
        }
        let payload = concat(&payload);
        let info = match self.log().append(payload.clone(), self.epoch, self.now_ms) {
            Ok(info) => info,
            Err(StorageError::RecordSetTooLarge { size, segment_bytes }) => {
                assert!(size as u64 > segment_bytes && size == payload.len(), "seed {}", self.seed);
                return;
            }
            Err(e) => panic!("seed {}: append failed: {e:?}", self.seed),
        };
        assert_eq!(info.first_offset, self.model.log_end_offset, "seed {}", self.seed);
        for (records, bi) in expected.into_iter().zip(&info.batches) {
            assert_eq!(bi.base_offset, self.model.log_end_offset);
            self.model.log_end_offset += records.len() as i64;
            self.model.assign_epoch(self.epoch, bi.base_offset);
            self.model.batches.push(ModelBatch {
                base: bi.base_offset,
                epoch: self.epoch,
                size: bi.size_in_bytes,
                records,
                producer: None,
            });
        }
        assert_eq!(info.last_offset, self.model.log_end_offset - 1);
    }

    fn first_segment_base(&self) -> i64 {
        self.log().segment_base_offsets()[0]
    }

    /// One operation of a random producer.
    fn producer_op(&mut self) -> &'static str {
        let producer_id = PRODUCERS[self.rng.gen_range(0..PRODUCERS.len())];
        match (is_transactional(producer_id), self.rng.gen_range(0..10)) {
            (false, 4) => {
                self.produce(producer_id, true);
                "produce, new epoch"
            }
            (_, 5 | 6) => {
                self.retry(producer_id);
                "retry"
            }
            (_, 7) => {
                self.misbehave(producer_id);
                "misbehave"
            }
            (true, 8 | 9) => {
                self.end_txn(producer_id);
                "end transaction"
            }
            _ => {
                self.produce(producer_id, false);
                "produce"
            }
        }
    }

    /// Sends the producer's next batch in sequence (or the first of a new epoch).
    fn produce(&mut self, producer_id: i64, bump_epoch: bool) {
        let view = self.model.producer_view(producer_id);
        // When its last data batch went with a deleted segment, a restart may have left
        // the log knowing the producer from a later marker only (epoch, no sequence), as
        // Kafka does; the producer then starts a new epoch (KIP-360), as on
        // OUT_OF_ORDER_SEQUENCE.
        let first_base = self.first_segment_base();
        let lost = view.as_ref().is_some_and(|v| v.last_seq >= 0 && v.last_data_base < first_base);
        let (mut epoch, mut seq) = view.map_or((0, 0), |v| (v.epoch, v.last_seq + 1));
        if bump_epoch || lost {
            (epoch, seq) = (epoch + 1, 0);
        }
        let transactional = is_transactional(producer_id);
        let n = self.rng.gen_range(1..=4);
        let codec = [Compression::None, Compression::Lz4][self.rng.gen_range(0..2)];
        let mut builder = RecordBatchBuilder::new(0)
            .compression(codec)
            .producer(producer_id, epoch, seq)
            .transactional(transactional);
        let mut records = Vec::new();
        for _ in 0..n {
            self.counter += 1;
            let value = Bytes::from(format!("s{}-p{producer_id}-{}", self.seed, self.counter));
            let ts = self.now_ms + self.rng.gen_range(-300..300);
            builder.append(&NewRecord::new(ts, None, Some(value.clone()))).unwrap();
            records.push((ts, value));
        }
        let bytes = builder.build().unwrap();
        let ctx = format!("seed {} produce p{producer_id} e{epoch} s{seq}", self.seed);
        let info = self
            .log()
            .append(bytes.clone(), self.epoch, self.now_ms)
            .unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
        assert!(!info.duplicate, "{ctx}: taken for a duplicate");
        assert_eq!(info.first_offset, self.model.log_end_offset, "{ctx}");
        let meta =
            ProducerMeta { producer_id, epoch, last_seq: seq + n - 1, transactional, marker: None, bytes };
        self.push_producer_batch(&info, records, meta);
    }

    fn push_producer_batch(
        &mut self,
        info: &strata_storage::AppendInfo,
        records: Vec<(i64, Bytes)>,
        meta: ProducerMeta,
    ) {
        let bi = &info.batches[0];
        self.model.log_end_offset += records.len() as i64;
        self.model.assign_epoch(self.epoch, bi.base_offset);
        self.model.batches.push(ModelBatch {
            base: bi.base_offset,
            epoch: self.epoch,
            size: bi.size_in_bytes,
            records,
            producer: Some(meta),
        });
    }

    /// Resends one of the producer's last 5 batches still in a segment: a duplicate.
    fn retry(&mut self, producer_id: i64) {
        let Some(view) = self.model.producer_view(producer_id) else { return };
        let first_base = self.first_segment_base();
        let candidates: Vec<usize> =
            view.window.iter().copied().filter(|&i| self.model.batches[i].base >= first_base).collect();
        if candidates.is_empty() {
            return;
        }
        let b = &self.model.batches[candidates[self.rng.gen_range(0..candidates.len())]];
        let (base, last) = (b.base, b.last());
        let bytes = b.producer.as_ref().map(|p| p.bytes.clone()).unwrap();
        let ctx = format!("seed {} retry of p{producer_id} batch at {base}", self.seed);
        let info =
            self.log().append(bytes, self.epoch, self.now_ms).unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
        assert!(info.duplicate, "{ctx}: appended again at {}", info.first_offset);
        assert_eq!((info.first_offset, info.last_offset), (base, last), "{ctx}");
    }

    /// A gap, a stale epoch or a non-transactional batch inside a transaction, all
    /// refused, when the log must know the producer (its last batch is in a segment).
    fn misbehave(&mut self, producer_id: i64) {
        let Some(view) = self.model.producer_view(producer_id) else { return };
        if view.last_seq < 0 || view.last_data_base < self.first_segment_base() {
            return;
        }
        let transactional = is_transactional(producer_id);
        let (epoch, seq, transactional, what) = match self.rng.gen_range(0..3) {
            1 if view.epoch > 0 => (view.epoch - 1, 0, transactional, "stale epoch"),
            2 if view.open_txn.is_some() => (view.epoch, view.last_seq + 1, false, "non-transactional"),
            _ => (view.epoch, view.last_seq + 2, transactional, "gap"),
        };
        let bytes = producer_batch(producer_id, epoch, seq, 1, self.now_ms, transactional);
        let leo = self.log().log_end_offset();
        let result = self.log().append(bytes, self.epoch, self.now_ms);
        let ctx = format!("seed {} p{producer_id} {what}: {result:?}", self.seed);
        match what {
            "stale epoch" => {
                assert!(matches!(result, Err(StorageError::InvalidProducerEpoch { .. })), "{ctx}")
            }
            "gap" => assert!(matches!(result, Err(StorageError::OutOfOrderSequence { .. })), "{ctx}"),
            _ => assert!(matches!(result, Err(StorageError::InvalidTxnState { .. })), "{ctx}"),
        }
        assert_eq!(self.log().log_end_offset(), leo, "{ctx}");
    }

    /// The coordinator commits or aborts the producer's transaction (a marker without an
    /// open transaction is accepted and changes nothing).
    fn end_txn(&mut self, producer_id: i64) {
        let epoch = self.model.producer_view(producer_id).map_or(0, |v| v.epoch);
        let commit = self.rng.gen_bool(0.4);
        let marker = if commit { EndTxnMarker::commit(0) } else { EndTxnMarker::abort(0) };
        let bytes = EndTxnMarkerBatch {
            producer_id,
            producer_epoch: epoch,
            partition_leader_epoch: 1,
            timestamp: self.now_ms,
            marker,
        }
        .build(0)
        .unwrap();
        let ctx = format!("seed {} marker p{producer_id} commit {commit}", self.seed);
        let info = self
            .log()
            .append_with_origin(bytes.clone(), self.epoch, AppendOrigin::Coordinator, self.now_ms)
            .unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
        let records = vec![(self.now_ms, marker.encode_value())];
        let meta = ProducerMeta {
            producer_id,
            epoch,
            last_seq: -1,
            transactional: true,
            marker: Some(commit),
            bytes,
        };
        self.push_producer_batch(&info, records, meta);
    }

    /// First unstable offset and aborted transactions against the model's transactions.
    /// A transaction that started in a segment since deleted and was still open past it
    /// may be unknown to the log after a restart, or known from its first batch still in
    /// a segment (as in Kafka): such transactions are left out of the comparison.
    fn check_transactions(&mut self) {
        let first_base = self.first_segment_base();
        let (start, leo) = (self.model.log_start_offset, self.model.log_end_offset);
        let txns = self.model.transactions();
        let unstable = self.model.unstable_firsts();
        let hw = self.model.high_watermark;
        let ctx = format!("seed {} transactions {txns:?} first segment {first_base} hw {hw}", self.seed);
        if unstable.iter().all(|&first| first >= first_base) {
            let expected = unstable.iter().min().map(|&first| first.max(start));
            assert_eq!(self.log().first_unstable_offset(), expected, "{ctx}");
        }
        let straddling: Vec<i64> = txns
            .iter()
            .filter(|t| t.first_offset < first_base)
            .filter_map(|t| t.end.map(|(marker, _)| marker))
            .filter(|&marker| marker >= first_base)
            .collect();
        let from = self.rng.gen_range(start..=leo);
        let upper = self.rng.gen_range(from..=leo + 1);
        for (from, upper) in [(start, leo + 1), (from, upper)] {
            self.check_aborted(&txns, &straddling, from, upper, &ctx);
        }
    }

    fn check_aborted(&self, txns: &[ModelTxn], straddling: &[i64], from: i64, upper: i64, ctx: &str) {
        let expected: Vec<(i64, i64, i64)> = txns
            .iter()
            .filter_map(|t| match t.end {
                Some((marker, true))
                    if marker >= from && t.first_offset < upper && !straddling.contains(&marker) =>
                {
                    Some((t.producer_id, t.first_offset, marker))
                }
                _ => None,
            })
            .collect();
        let got: Vec<(i64, i64, i64)> = self
            .log()
            .aborted_transactions(from, upper)
            .unwrap()
            .iter()
            .map(|t: &AbortedTxn| (t.producer_id, t.first_offset, t.last_offset))
            .filter(|(_, _, marker)| !straddling.contains(marker))
            .collect();
        assert_eq!(got, expected, "{ctx} aborted in [{from}, {upper})");
    }

    fn read(&mut self) {
        let (lso, leo) = (self.model.log_start_offset, self.model.log_end_offset);
        let start = self.rng.gen_range(lso..=leo);
        let max_bytes = self.rng.gen_range(0..3_000);
        let max_offset = if self.rng.gen_bool(0.5) { i64::MAX } else { self.rng.gen_range(start..=leo + 2) };
        let min_one = self.rng.gen_bool(0.5);
        let ctx = format!("seed {} read({start}, {max_bytes}, {max_offset}, {min_one})", self.seed);
        let read = self.log().read(start, max_bytes, max_offset, min_one).unwrap();
        assert_eq!((read.log_start_offset, read.log_end_offset), (lso, leo), "{ctx}");
        let batches = batches_of(&read);
        if start == leo {
            assert!(batches.is_empty(), "{ctx}");
            return;
        }
        let Some(first_ix) = self.model.containing(start) else { panic!("{ctx}: model has no batch") };
        let first = &self.model.batches[first_ix];
        let first_allowed = first.base < max_offset && (min_one || first.size <= max_bytes);
        assert_eq!(!batches.is_empty(), first_allowed, "{ctx}");
        let total: usize = batches.iter().map(|b| b.size_in_bytes()).sum();
        assert!(total <= max_bytes || batches.len() == 1, "{ctx}: {total} bytes");
        for (k, batch) in batches.iter().enumerate() {
            let m = &self.model.batches[first_ix + k];
            assert!(batch.base_offset() < max_offset, "{ctx}");
            assert_eq!(
                (
                    batch.base_offset(),
                    batch.last_offset(),
                    batch.size_in_bytes(),
                    batch.partition_leader_epoch()
                ),
                (m.base, m.last(), m.size, m.epoch),
                "{ctx}"
            );
            let got: Vec<(i64, Bytes)> = batch
                .records(1 << 20)
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    (r.timestamp, r.value.unwrap())
                })
                .collect();
            assert_eq!(got, m.records, "{ctx}");
        }
    }

    fn retention(&mut self) {
        let retention_bytes = if self.rng.gen_bool(0.5) { self.rng.gen_range(0..20_000) } else { -1 };
        let retention_ms = if self.rng.gen_bool(0.5) { self.rng.gen_range(0..5_000) } else { -1 };
        let config = LogConfig { retention_bytes, retention_ms, ..self.config.clone() };
        self.log().update_config(config).unwrap();
        let before = self.model.log_start_offset;
        self.log().apply_retention(self.now_ms).unwrap();
        self.log().update_config(self.config.clone()).unwrap();
        let after = self.log().log_start_offset();
        let ctx = format!("seed {} retention {retention_bytes}B {retention_ms}ms", self.seed);
        assert!(after >= before, "{ctx}");
        assert!(
            after == before
                || after == self.model.log_end_offset
                || self.model.batches.iter().any(|b| b.base == after),
            "{ctx}: start offset {after} is not a batch boundary"
        );
        // Batches below the start offset stay in the model: they may still sit in a
        // segment that was not deleted, which a torn-tail computation must see.
        self.model.log_start_offset = after;
        self.model.epochs_and_hw_to_log_start();
    }

    fn delete_records(&mut self) {
        let offset = self.rng.gen_range(self.model.log_start_offset..=self.model.log_end_offset);
        assert_eq!(self.log().delete_records_before(offset).unwrap(), offset, "seed {}", self.seed);
        self.model.log_start_offset = offset;
        self.model.epochs_and_hw_to_log_start();
    }

    fn truncate(&mut self) {
        let offset = self.rng.gen_range(self.model.log_start_offset..=self.model.log_end_offset);
        if std::env::var_os("STRATA_MODEL_TRACE").is_some() {
            let bounds: Vec<(i64, i64)> = self.model.batches.iter().map(|b| (b.base, b.last())).collect();
            eprintln!("truncate_to({offset}) batches {bounds:?}");
        }
        self.log().truncate_to(offset).unwrap();
        if offset >= self.model.log_end_offset {
            // Still drops an epoch taken at the log end and not written in.
            self.model.epochs_and_hw_to_log_end();
            return;
        }
        let Some(ix) = self.model.containing(offset) else {
            panic!("seed {}: no batch at {offset}", self.seed)
        };
        let cut = self.model.batches[ix].base;
        if cut < self.model.log_start_offset {
            let start = self.model.log_start_offset;
            self.model.restart_empty_at(start);
        } else {
            self.model.batches.truncate(ix);
            self.model.log_end_offset = cut;
        }
        self.model.epochs_and_hw_to_log_end();
    }

    /// A restart. Everything is replicated first (the high watermark at the log end):
    /// a reopened log knows unreplicated transactions only from its replay after the
    /// snapshot it starts from, which the model does not track. After opening, the log
    /// is told the high watermark, as the broker does.
    fn reopen(&mut self, clean: bool) {
        self.set_high_watermark(self.model.log_end_offset);
        let log = self.log.take().expect("log open");
        if clean {
            log.close().unwrap();
        }
        drop(log);
        if !clean && self.rng.gen_bool(0.5) {
            self.tear_active_segment();
        }
        let log = Log::open(self.root.path(), TOPIC, 0, self.config.clone(), clean, self.now_ms).unwrap();
        self.log = Some(log);
        // Loading drops epochs at or after the log end (lost in a torn tail, or taken
        // at the log end and not written in).
        self.model.epochs_and_hw_to_log_end();
        self.set_high_watermark(self.model.high_watermark);
    }

    /// Tells the log the high watermark is `hw` (clamped to the log's bounds).
    fn set_high_watermark(&mut self, hw: i64) {
        let (start, end) = (self.model.log_start_offset, self.model.log_end_offset);
        let clamped = self.log().update_high_watermark(hw).unwrap();
        assert_eq!(clamped, hw.clamp(start, end), "seed {} high watermark {hw}", self.seed);
        self.model.high_watermark = clamped;
    }

    /// The high watermark moves, usually forward within the log, sometimes past its end
    /// (a follower hears of the leader's) or back (after a leader change).
    fn move_high_watermark(&mut self) {
        let (hw, end) = (self.model.high_watermark, self.model.log_end_offset);
        let target = match self.rng.gen_range(0..10) {
            0 => end + self.rng.gen_range(1..10),
            1 => self.rng.gen_range(self.model.log_start_offset..=hw),
            _ => self.rng.gen_range(hw..=end),
        };
        self.set_high_watermark(target);
    }

    /// The broker becomes leader in a newer epoch and, half the time, records it at the
    /// log end at once (as `makeLeader` does); then the replaced leader's append is
    /// refused.
    fn new_leader_epoch(&mut self) {
        self.epoch += self.rng.gen_range(1..=2);
        if self.rng.gen_bool(0.5) {
            let end = self.model.log_end_offset;
            self.log().assign_epoch_start_offset(self.epoch, end).unwrap();
            self.model.assign_epoch(self.epoch, end);
            let stale = self.log().append(batch("stale", 1, self.now_ms), self.epoch - 1, self.now_ms);
            assert!(
                matches!(stale, Err(StorageError::StaleLeaderEpoch { latest_epoch, .. }) if latest_epoch == self.epoch),
                "seed {}: {stale:?}",
                self.seed
            );
        }
    }

    /// Cuts bytes off the active segment (losing the batches they overlap) or appends
    /// garbage to it (losing nothing), as a crash mid-write would.
    fn tear_active_segment(&mut self) {
        let dir = self.root.path().join(format!("{TOPIC}-0"));
        let Some(active) = last_segment(&dir) else {
            return;
        };
        let len = std::fs::metadata(&active).unwrap().len();
        if len > 0 && self.rng.gen_bool(0.6) {
            let cut = self.rng.gen_range(1..=len.min(200));
            OpenOptions::new().write(true).open(&active).unwrap().set_len(len - cut).unwrap();
            let mut covered = 0u64;
            while covered < cut {
                let Some(b) = self.model.batches.pop() else {
                    break;
                };
                covered += b.size as u64;
                self.model.log_end_offset = b.base;
            }
            if self.model.log_end_offset < self.model.log_start_offset {
                let start = self.model.log_start_offset;
                self.model.restart_empty_at(start);
            }
        } else {
            let garbage: Vec<u8> = (0..self.rng.gen_range(1..100)).map(|_| self.rng.gen()).collect();
            OpenOptions::new().append(true).open(&active).unwrap().write_all(&garbage).unwrap();
        }
    }

    fn check_timestamps(&mut self) {
        let visible = self.model.visible();
        let ts = self.now_ms + self.rng.gen_range(-600..300);
        let expected = visible
            .iter()
            .find(|r| r.timestamp >= ts)
            .map(|r| TimestampAndOffset { timestamp: r.timestamp, offset: r.offset });
        assert_eq!(self.log().offset_for_timestamp(ts).unwrap(), expected, "seed {} ts {ts}", self.seed);
        if let Some(max) = self.log().max_timestamp().unwrap() {
            let rec = self.model.batches.iter().find_map(|b| {
                let i = (max.offset - b.base) as usize;
                (b.base <= max.offset && max.offset <= b.last()).then(|| b.records[i].0)
            });
            assert_eq!(rec, Some(max.timestamp), "seed {}: max timestamp {max:?} not in the log", self.seed);
            assert!(visible.iter().all(|r| r.timestamp <= max.timestamp), "seed {}", self.seed);
        } else {
            assert!(visible.is_empty(), "seed {}", self.seed);
        }
    }

    fn change_config(&mut self) {
        self.config.segment_bytes = [600, 2048, 8192][self.rng.gen_range(0..3)];
        self.config.index_interval_bytes = [0, 64, 500][self.rng.gen_range(0..3)];
        self.config.segment_index_bytes = [48, 240, 4096][self.rng.gen_range(0..3)];
        self.config.file_delete_delay_ms = [0, 100][self.rng.gen_range(0..2)];
        self.log().update_config(self.config.clone()).unwrap();
    }

    fn check(&mut self, op: &str) {
        let ctx = format!("seed {} after {op}", self.seed);
        let expected = &self.model.epochs;
        assert_eq!(self.log().leader_epoch_entries(), *expected, "{ctx}");
        assert_eq!(self.log().latest_epoch(), expected.last().map(|e| e.0), "{ctx}");
        for requested in [-1, 0, self.rng.gen_range(0..=self.epoch + 1), self.epoch] {
            let got = self.log().end_offset_for_epoch(requested);
            assert_eq!(got, self.model.end_offset_for(requested), "{ctx}: epoch {requested} in {expected:?}");
        }
        let log = self.log();
        assert_eq!(log.log_end_offset(), self.model.log_end_offset, "{ctx}");
        assert_eq!(log.log_start_offset(), self.model.log_start_offset, "{ctx}");
        // Reads and timestamp queries do not change the log: skip the full comparison.
        if op != "read" && op != "timestamps" {
            assert_eq!(read_all(log), self.model.visible(), "{ctx}");
        }
    }
}

fn last_segment(dir: &Path) -> Option<std::path::PathBuf> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop()
}

fn run(seed: u64, ops: usize) {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 64,
        segment_index_bytes: 240,
        ..small_config()
    };
    let log = Log::open(root.path(), TOPIC, 0, config.clone(), true, 0).unwrap();
    let mut h = Harness {
        rng: StdRng::seed_from_u64(seed),
        root,
        log: Some(log),
        model: Model::default(),
        config,
        now_ms: 1_000_000,
        counter: 0,
        seed,
        epoch: 0,
    };
    for _ in 0..ops {
        h.now_ms += h.rng.gen_range(0..80);
        let op = match h.rng.gen_range(0..100) {
            0..=27 => {
                h.append();
                "append"
            }
            28..=44 => h.producer_op(),
            45..=59 => {
                h.read();
                "read"
            }
            60..=64 => {
                h.log().roll().unwrap();
                "roll"
            }
            65..=69 => {
                h.retention();
                "retention"
            }
            70..=73 => {
                h.delete_records();
                "delete_records"
            }
            74..=78 => {
                h.truncate();
                "truncate"
            }
            79..=82 => {
                h.reopen(true);
                "clean reopen"
            }
            83..=87 => {
                h.reopen(false);
                "unclean reopen"
            }
            88..=91 => {
                h.check_timestamps();
                "timestamps"
            }
            92..=93 => {
                h.new_leader_epoch();
                "new leader epoch"
            }
            94..=97 => {
                h.move_high_watermark();
                "high watermark"
            }
            _ => {
                h.change_config();
                "config"
            }
        };
        h.log().maybe_flush(h.now_ms).unwrap();
        if std::env::var_os("STRATA_MODEL_TRACE").is_some() {
            eprintln!(
                "{op}: model [{}, {}) log [{}, {}) segments {:?}",
                h.model.log_start_offset,
                h.model.log_end_offset,
                h.log().log_start_offset(),
                h.log().log_end_offset(),
                h.log().segment_base_offsets()
            );
        }
        h.check(op);
        h.check_transactions();
    }
}

#[test]
fn random_operations_match_the_model() {
    if let Some(seed) = std::env::var("STRATA_MODEL_SEED").ok().and_then(|s| s.parse().ok()) {
        run(seed, 600);
        return;
    }
    for seed in 0..8 {
        run(seed, 300);
    }
}
