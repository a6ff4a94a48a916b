//! Command-line interface of `strata-perf`: one subcommand per workload, option names
//! close to Apache Kafka's perf tools and producer/consumer configuration keys.
//!
//! Parsing is separate from running so the options and their validation are unit-tested
//! without a broker.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use strata_protocol::records::Compression;

/// `strata-perf`: a load generator for Kafka-compatible brokers.
#[derive(Parser, Debug, Clone)]
#[command(name = "strata-perf", version, about, long_about = None)]
pub struct Cli {
    /// Workload to run.
    #[command(subcommand)]
    pub mode: Mode,
}

/// The workloads.
#[derive(Subcommand, Debug, Clone)]
pub enum Mode {
    /// Produce records as fast as allowed and report acknowledgement latency.
    Produce(ProduceCmd),
    /// Read records from a topic and report throughput.
    Consume(ConsumeCmd),
    /// Produce and consume at once; reports produce latency and end-to-end latency
    /// (scheduled send time to consumption).
    EndToEnd(EndToEndCmd),
    /// Measures this machine's loopback TCP bandwidth (no broker involved): the ceiling
    /// that broker throughput is compared against.
    Loopback(LoopbackCmd),
}

/// Options every broker workload shares.
#[derive(Args, Debug, Clone)]
pub struct CommonOpts {
    /// Bootstrap broker, host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to use.
    #[arg(long, default_value = "strata-perf")]
    pub topic: String,
    /// Stop after this many records in total (across producers or consumers).
    #[arg(long, conflicts_with = "duration")]
    pub records: Option<u64>,
    /// Stop after this many seconds (fractions allowed).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print a JSON summary on stdout at the end (progress lines stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// Do not print the progress line every second.
    #[arg(long)]
    pub quiet: bool,
    /// client.id sent in every request header.
    #[arg(long, default_value = "strata-perf")]
    pub client_id: String,
    /// What produces and consumes: the `strata-client` crate, or the hand-written wire
    /// code kept to compare the client against.
    #[arg(long, value_enum, default_value_t = Engine::Client)]
    pub engine: Engine,
}

/// The code that speaks to the broker.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `strata-client`'s Producer and Consumer, as an application would use them.
    Client,
    /// strata-perf's own batching and fetching on `strata-protocol` (no retries, no
    /// group protocol): a floor of per-record cost to compare the client against.
    Wire,
}

/// How record keys are chosen; keys decide partitions when present.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDistribution {
    /// Null keys; batches fill one partition at a time (sticky partitioning).
    None,
    /// Uniformly random 8-byte keys.
    Random,
    /// 8-byte keys counting up from 0 per producer.
    Sequential,
}

/// Compression codec for produced batches.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionArg {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// Snappy (xerial framing, as the Java producer writes).
    Snappy,
    /// LZ4 frame.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Compression {
        match c {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

/// Producer options.
#[derive(Args, Debug, Clone)]
pub struct ProducerOpts {
    /// Value size in bytes of each record (keys, when enabled, are 8 more bytes).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// How keys are chosen.
    #[arg(long, value_enum, default_value_t = KeyDistribution::None)]
    pub key_distribution: KeyDistribution,
    /// Offered load in records per second across all producers; 0 means as fast as
    /// the broker acknowledges. Latency is measured from each record's scheduled send
    /// time, so a stalled broker is charged for every record it delayed.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Acknowledgements required: 0, 1 or -1 (all).
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub acks: i16,
    /// How long a batch may wait for more records before it is sent.
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Maximum batch size in bytes per partition.
    #[arg(long, default_value_t = 16384)]
    pub batch_size: usize,
    /// Compression codec.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Partitions of the topic; it is created with this many if it does not exist.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Replication factor used when creating the topic.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    /// Concurrent producers, each with its own connections.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Produce requests in flight per connection (max.in.flight.requests.per.connection).
    #[arg(long, default_value_t = 5)]
    pub max_in_flight: usize,
    /// Largest produce request in bytes (max.request.size).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_request_size: usize,
    /// Bytes of sealed batches a producer buffers before it stops generating
    /// (buffer.memory).
    #[arg(long, default_value_t = 32 << 20)]
    pub buffer_memory: usize,
    /// Use transactions (needs InitProducerId, AddPartitionsToTxn and EndTxn).
    #[arg(long)]
    pub transactions: bool,
    /// Records per transaction with --transactions.
    #[arg(long, default_value_t = 10_000)]
    pub transaction_records: u64,
}

/// Where a consumer starts.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// The log start offset.
    Earliest,
    /// The log end offset at start-up.
    Latest,
}

/// Consumer options.
#[derive(Args, Debug, Clone)]
pub struct ConsumerOpts {
    /// Concurrent consumers; partitions are split between them (no group protocol).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// fetch.max.bytes.
    #[arg(long, default_value_t = 50 << 20)]
    pub fetch_max_bytes: i32,
    /// max.partition.fetch.bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub partition_max_bytes: i32,
    /// fetch.max.wait.ms.
    #[arg(long, default_value_t = 500)]
    pub fetch_max_wait_ms: i32,
    /// Skip CRC validation of fetched batches (check.crcs=false).
    #[arg(long)]
    pub no_check_crc: bool,
    /// isolation.level=read_committed (with --transactions, end-to-end latency then
    /// includes the commit).
    #[arg(long)]
    pub read_committed: bool,
}

/// `strata-perf produce`.
#[derive(Args, Debug, Clone)]
pub struct ProduceCmd {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonOpts,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub producer: ProducerOpts,
}

/// `strata-perf consume`.
#[derive(Args, Debug, Clone)]
pub struct ConsumeCmd {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonOpts,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub consumer: ConsumerOpts,
    /// Where to start. Without --records or --duration the consumer stops at the end
    /// offsets seen at start-up.
    #[arg(long, value_enum, default_value_t = StartFrom::Earliest)]
    pub from: StartFrom,
    /// Consume as members of this consumer group (subscribe, partitions assigned by
    /// the group protocol, offsets committed) instead of splitting partitions
    /// statically; --consumers members join it. Client engine only.
    #[arg(long)]
    pub group: Option<String>,
}

/// `strata-perf end-to-end`.
#[derive(Args, Debug, Clone)]
pub struct EndToEndCmd {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: CommonOpts,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub producer: ProducerOpts,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub consumer: ConsumerOpts,
}

/// `strata-perf loopback`.
#[derive(Args, Debug, Clone)]
pub struct LoopbackCmd {
    /// Seconds to stream.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Parallel connections.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Bytes per write call.
    #[arg(long, default_value_t = 256 * 1024)]
    pub block_size: usize,
    /// Instead of bandwidth, measure the latency floor: offer this many MB/s to a
    /// null server that acknowledges each message, latency from scheduled send time.
    #[arg(long)]
    pub latency_at_mbps: Option<f64>,
    /// Message size of the latency floor run (a producer's batch).
    #[arg(long, default_value_t = 16 * 1024)]
    pub message_size: usize,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// When a workload stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// After this many records in total.
    Records(u64),
    /// After this long.
    Duration(Duration),
    /// At the end offsets seen at start-up (consumers only).
    EndOfLog,
}

impl CommonOpts {
    /// The stop condition; `default` applies when neither --records nor --duration
    /// was given.
    pub fn limit(&self, default: Limit) -> Result<Limit> {
        match (self.records, self.duration) {
            (Some(0), _) => bail!("--records must be at least 1"),
            (Some(n), _) => Ok(Limit::Records(n)),
            (None, Some(s)) if !(s > 0.0 && s.is_finite()) => {
                bail!("--duration must be a positive number of seconds, got {s}")
            }
            (None, Some(s)) => Ok(Limit::Duration(Duration::from_secs_f64(s))),
            (None, None) => Ok(default),
        }
    }
}

impl ProducerOpts {
    /// Checks the combinations clap cannot express.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.acks, -1..=1) {
            bail!("--acks must be -1, 0 or 1, got {}", self.acks);
        }
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            bail!("--rate must be >= 0, got {}", self.rate);
        }
        if self.partitions < 1 {
            bail!("--partitions must be at least 1");
        }
        if self.producers == 0 || self.max_in_flight == 0 {
            bail!("--producers and --max-in-flight must be at least 1");
        }
        if self.batch_size < 64 || self.max_request_size < self.batch_size {
            bail!("--batch-size must be >= 64 and <= --max-request-size");
        }
        if self.transactions && self.acks != -1 {
            bail!("--transactions needs --acks -1");
        }
        Ok(())
    }

    /// Offered load per producer in records/s (0 = unthrottled).
    pub fn rate_per_producer(&self) -> f64 {
        self.rate / self.producers as f64
    }
}

impl ConsumerOpts {
    /// Checks the combinations clap cannot express.
    pub fn validate(&self) -> Result<()> {
        if self.consumers == 0 {
            bail!("--consumers must be at least 1");
        }
        if self.fetch_max_bytes < 1 || self.partition_max_bytes < 1 {
            bail!("--fetch-max-bytes and --partition-max-bytes must be positive");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("strata-perf").chain(args.iter().copied()))
    }

    #[test]
    fn produce_defaults_match_kafka_producer_defaults() {
        let Mode::Produce(p) = parse(&["produce"]).unwrap().mode else { panic!("not produce") };
        assert_eq!(p.common.bootstrap, "127.0.0.1:9092");
        assert_eq!(p.producer.acks, 1);
        assert_eq!(p.producer.batch_size, 16384);
        assert_eq!(p.producer.max_in_flight, 5);
        assert_eq!(p.producer.record_size, 1024);
        assert_eq!(p.producer.compression, CompressionArg::None);
        assert_eq!(p.common.limit(Limit::Records(7)).unwrap(), Limit::Records(7));
        p.producer.validate().unwrap();
    }

    #[test]
    fn produce_options_parse() {
        let cli = parse(&[
            "produce",
            "--bootstrap",
            "10.0.0.1:9093",
            "--records",
            "20000",
            "--acks",
            "-1",
            "--compression",
            "zstd",
            "--key-distribution",
            "sequential",
            "--rate",
            "50000",
            "--producers",
            "2",
            "--partitions",
            "4",
            "--linger-ms",
            "0",
            "--json",
        ])
        .unwrap();
        let Mode::Produce(p) = cli.mode else { panic!("not produce") };
        assert_eq!(p.common.bootstrap, "10.0.0.1:9093");
        assert_eq!(p.common.limit(Limit::EndOfLog).unwrap(), Limit::Records(20000));
        assert_eq!(p.producer.acks, -1);
        assert_eq!(Compression::from(p.producer.compression), Compression::Zstd);
        assert_eq!(p.producer.key_distribution, KeyDistribution::Sequential);
        assert_eq!(p.producer.rate_per_producer(), 25000.0);
        assert_eq!(p.producer.partitions, 4);
        assert_eq!(p.producer.linger_ms, 0);
        assert!(p.common.json);
        p.producer.validate().unwrap();
    }

    #[test]
    fn records_and_duration_conflict() {
        assert!(parse(&["produce", "--records", "1", "--duration", "1"]).is_err());
    }

    #[test]
    fn invalid_values_are_refused() {
        let bad = |args: &[&str]| {
            let Mode::Produce(p) = parse(args).unwrap().mode else { panic!("not produce") };
            p.producer.validate().is_err() || p.common.limit(Limit::EndOfLog).is_err()
        };
        assert!(bad(&["produce", "--acks", "2"]));
        assert!(bad(&["produce", "--rate=-5"]));
        assert!(bad(&["produce", "--records", "0"]));
        assert!(bad(&["produce", "--duration", "0"]));
        assert!(bad(&["produce", "--partitions", "0"]));
        assert!(bad(&["produce", "--transactions"]));
        assert!(parse(&["produce", "--compression", "brotli"]).is_err());
        assert!(parse(&["produce", "--key-distribution", "zipf"]).is_err());
    }

    #[test]
    fn consume_and_end_to_end_parse() {
        let Mode::Consume(c) = parse(&["consume", "--from", "latest", "--consumers", "3"]).unwrap().mode
        else {
            panic!("not consume")
        };
        assert_eq!(c.from, StartFrom::Latest);
        assert_eq!(c.consumer.consumers, 3);
        assert_eq!(c.common.limit(Limit::EndOfLog).unwrap(), Limit::EndOfLog);
        c.consumer.validate().unwrap();
        let Mode::EndToEnd(e) = parse(&["end-to-end", "--duration", "2.5", "--rate", "100"]).unwrap().mode
        else {
            panic!("not end-to-end")
        };
        assert_eq!(e.common.limit(Limit::EndOfLog).unwrap(), Limit::Duration(Duration::from_millis(2500)));
        assert_eq!(e.producer.rate, 100.0);
        assert!(matches!(parse(&["loopback", "--duration", "1"]).unwrap().mode, Mode::Loopback(_)));
    }
}
