//! Produces `records` values of `size` bytes to `topic` as fast as the producer takes
//! them and prints the rate: a quick check of the producer's throughput.
//!
//! `cargo run --release -p strata-client --example produce_rate -- 127.0.0.1:9092 t 1000000 100 [key=value ...]`

use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;
use strata_client::producer::{Producer, ProducerConfig, ProducerRecord};

#[tokio::main]
async fn main() -> Result<(), strata_client::Error> {
    let args: Vec<String> = std::env::args().collect();
    let bootstrap = args.get(1).map_or("127.0.0.1:9092", String::as_str);
    let topic: Arc<str> = Arc::from(args.get(2).map_or("rate", String::as_str));
    let records: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let size: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(100);
    let mut config = ProducerConfig::new(bootstrap);
    for kv in args.iter().skip(5) {
        let (k, v) =
            kv.split_once('=').ok_or_else(|| strata_client::Error::config(format!("{kv}: not key=value")))?;
        config.set(k, v)?;
    }
    let producer = Producer::new(config).await?;
    let value = Bytes::from(vec![b'x'; size]);
    let start = Instant::now();
    let mut last = None;
    for _ in 0..records {
        last = Some(
            producer
                .send(ProducerRecord {
                    topic: topic.clone(),
                    value: Some(value.clone()),
                    ..Default::default()
                })
                .await?,
        );
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    let secs = start.elapsed().as_secs_f64();
    let m = producer.metrics();
    println!(
        "{records} records of {size} B in {secs:.2} s: {:.0} records/s, {:.1} MB/s; {} requests, {} acked, {} retried",
        records as f64 / secs,
        (records * size) as f64 / secs / 1e6,
        m.requests_sent,
        m.records_acked,
        m.batches_retried
    );
    producer.close().await
}
