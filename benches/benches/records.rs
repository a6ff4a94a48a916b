//! Record-batch hot paths the broker runs on every produce and fetch: locating batches
//! in a buffer, validating their CRC-32C, decoding records, and building batches
//! (the producer side, for reference).

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use strata_protocol::records::{Compression, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};

/// A batch of `count` records with values of `value_size` bytes.
fn batch(count: usize, value_size: usize, compression: Compression) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).compression(compression);
    let value: Vec<u8> = (0..value_size).map(|i| b"strata log line "[i % 16]).collect();
    for i in 0..count {
        b.append(&NewRecord::new(1_700_000_000_000 + i as i64, None, Some(Bytes::from(value.clone()))))
            .expect("record fits");
    }
    b.build().expect("batch builds")
}

fn parse_and_crc(c: &mut Criterion) {
    // A 16 KiB batch: 15 records of 1 KiB, as a default-configured producer sends.
    let one = batch(15, 1024, Compression::None);
    let mut g = c.benchmark_group("record_batch");
    g.throughput(Throughput::Bytes(one.len() as u64));
    g.bench_function("parse_16k", |b| b.iter(|| RecordBatch::parse(black_box(&one)).expect("valid")));
    g.bench_function("parse_and_validate_crc_16k", |b| {
        b.iter(|| {
            let batch = RecordBatch::parse(black_box(&one)).expect("valid");
            batch.validate_crc().expect("crc matches");
        })
    });
    g.bench_function("decode_records_16k", |b| {
        b.iter(|| {
            let batch = RecordBatch::parse(black_box(&one)).expect("valid");
            batch.records(1 << 20).expect("records").collect_all().expect("decodes").len()
        })
    });
    // A 1 MiB fetch response worth of batches, iterated and CRC-checked.
    let mut many = BytesMut::new();
    while many.len() < 1 << 20 {
        many.extend_from_slice(&one);
    }
    let many = many.freeze();
    g.throughput(Throughput::Bytes(many.len() as u64));
    g.bench_function("iterate_and_validate_crc_1m", |b| {
        b.iter(|| {
            let mut n = 0;
            for batch in RecordBatches::new(black_box(many.clone())) {
                batch.expect("valid").validate_crc().expect("crc matches");
                n += 1;
            }
            n
        })
    });
    g.finish();
}

fn build(c: &mut Criterion) {
    let value = Bytes::from(vec![b'x'; 1024]);
    let mut g = c.benchmark_group("record_batch_build");
    g.throughput(Throughput::Bytes(15 * 1024));
    for (name, codec) in [("none", Compression::None), ("lz4", Compression::Lz4), ("zstd", Compression::Zstd)]
    {
        g.bench_function(format!("build_16k_{name}"), |b| {
            b.iter_batched(
                || RecordBatchBuilder::new(0).compression(codec),
                |mut builder| {
                    for i in 0..15 {
                        builder.append(&NewRecord::new(i, None, Some(value.clone()))).expect("fits");
                    }
                    builder.build().expect("builds")
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, parse_and_crc, build);
criterion_main!(benches);
