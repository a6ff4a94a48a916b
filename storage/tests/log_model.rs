//! Random operations against a simple in-memory model of a log: appends of random
//! batches (all codecs), reads at random offsets with random limits, rolls, retention,
//! DeleteRecords, truncation, config changes, clean and unclean restarts, and torn tails.
//! After every operation the log must match the model exactly.
//!
//! Reproduce a failure with `STRATA_MODEL_SEED=<seed> cargo test -p strata-storage --test log_model`.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder};
use strata_storage::{Log, LogConfig, StorageError, TimestampAndOffset};

const TOPIC: &str = "model-topic";

#[derive(Debug, Clone)]
struct ModelBatch {
    base: i64,
    size: usize,
    records: Vec<(i64, Bytes)>,
}

impl ModelBatch {
    fn last(&self) -> i64 {
        self.base + self.records.len() as i64 - 1
    }
}

/// The model: every batch still in the log (including ones below the log start offset
/// that live in a segment not yet deleted), and the two offsets.
#[derive(Debug, Default)]
struct Model {
    batches: Vec<ModelBatch>,
    log_start_offset: i64,
    log_end_offset: i64,
}

impl Model {
    fn visible(&self) -> Vec<Rec> {
        self.batches
            .iter()
            .flat_map(|b| {
                b.records.iter().enumerate().map(|(i, (ts, v))| Rec {
                    offset: b.base + i as i64,
                    timestamp: *ts,
                    value: v.clone(),
                })
            })
            .filter(|r| r.offset >= self.log_start_offset)
            .collect()
    }

    fn containing(&self, offset: i64) -> Option<usize> {
        self.batches.iter().position(|b| b.base <= offset && offset <= b.last())
    }

    fn restart_empty_at(&mut self, offset: i64) {
        self.batches.clear();
        self.log_start_offset = offset;
        self.log_end_offset = offset;
    }
}

struct Harness {
    rng: StdRng,
    root: tempfile::TempDir,
    log: Option<Log>,
    model: Model,
    config: LogConfig,
    now_ms: i64,
    counter: u64,
    seed: u64,
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
        let info = match self.log().append(payload.clone(), 1, self.now_ms) {
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
            self.model.batches.push(ModelBatch { base: bi.base_offset, size: bi.size_in_bytes, records });
        }
        assert_eq!(info.last_offset, self.model.log_end_offset - 1);
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
                (batch.base_offset(), batch.last_offset(), batch.size_in_bytes()),
                (m.base, m.last(), m.size),
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
    }

    fn delete_records(&mut self) {
        let offset = self.rng.gen_range(self.model.log_start_offset..=self.model.log_end_offset);
        assert_eq!(self.log().delete_records_before(offset).unwrap(), offset, "seed {}", self.seed);
        self.model.log_start_offset = offset;
    }

    fn truncate(&mut self) {
        let offset = self.rng.gen_range(self.model.log_start_offset..=self.model.log_end_offset);
        if std::env::var_os("STRATA_MODEL_TRACE").is_some() {
            let bounds: Vec<(i64, i64)> = self.model.batches.iter().map(|b| (b.base, b.last())).collect();
            eprintln!("truncate_to({offset}) batches {bounds:?}");
        }
        self.log().truncate_to(offset).unwrap();
        if offset >= self.model.log_end_offset {
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
    }

    fn reopen(&mut self, clean: bool) {
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

    fn check(&self, op: &str) {
        let log = self.log();
        let ctx = format!("seed {} after {op}", self.seed);
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
    };
    for _ in 0..ops {
        h.now_ms += h.rng.gen_range(0..80);
        let op = match h.rng.gen_range(0..100) {
            0..=39 => {
                h.append();
                "append"
            }
            40..=59 => {
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
            88..=95 => {
                h.check_timestamps();
                "timestamps"
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
