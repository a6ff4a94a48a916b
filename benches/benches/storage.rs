//! Log hot paths, through `strata-storage`'s public API: appending a producer's 16 KiB
//! batch, locating an offset (sparse offset index plus segment scan, no data read),
//! and a fetch-sized read (locate plus a 1 MiB pread).
//!
//! Runs on a temp dir; the append benchmark empties its log every 512 appends (outside
//! the timed section) so a run never writes more than ~8 MiB to disk at once.

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_storage::{Log, LogConfig};

const NOW_MS: i64 = 1_700_000_000_000;
/// Appends between two truncations in the append benchmark.
const APPENDS_PER_ROUND: u64 = 512;

fn batch_16k() -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..15 {
        b.append(&NewRecord::new(NOW_MS + i, None, Some(Bytes::from(vec![b'v'; 1024])))).expect("fits");
    }
    b.build().expect("builds")
}

fn open(dir: &tempfile::TempDir, topic: &str) -> Log {
    let config = LogConfig { segment_bytes: 64 << 20, ..LogConfig::default() };
    Log::open(dir.path(), topic, 0, config, true, NOW_MS).expect("log opens")
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = open(&dir, "append");
    let batch = batch_16k();
    let mut g = c.benchmark_group("log");
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("append_16k_batch", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(APPENDS_PER_ROUND);
                let t = Instant::now();
                for _ in 0..n {
                    log.append(black_box(batch.clone()), 0, NOW_MS).expect("append");
                }
                timed += t.elapsed();
                done += n;
                log.truncate_to(0).expect("truncate");
            }
            timed
        })
    });
    g.finish();
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = open(&dir, "read");
    let batch = batch_16k();
    // 64 MiB in two segments: 4096 batches of 15 records.
    for _ in 0..4096 {
        log.append(batch.clone(), 0, NOW_MS).expect("append");
    }
    let end = log.log_end_offset();
    let mut g = c.benchmark_group("log");
    let mut offset = 0i64;
    let mut next_offset = move || {
        // A stride coprime with the record count visits offsets all over the log.
        offset = (offset + 7_919) % end;
        offset
    };
    g.throughput(Throughput::Elements(1));
    g.bench_function("locate_offset", |b| {
        b.iter(|| log.read(next_offset(), 1, end, true).expect("read").records.len())
    });
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("fetch_read_1m", |b| {
        b.iter(|| {
            let info = log.read(next_offset(), 1 << 20, end, true).expect("read");
            info.records.read_bytes().expect("pread").len()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = append, read
}
criterion_main!(benches);
