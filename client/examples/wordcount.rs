//! Exactly-once word count on Strata (or any Kafka with KIP-939): reads lines from
//! `--input` (every partition), and for every word it reads writes one record to
//! `--output`, key = the word, value = that word's running count in decimal. A
//! `read_committed` reader of the output sees, for each word, the values 1, 2, ..., n in
//! order, each once, however often the job or the broker is killed.
//!
//! ```text
//! cargo run --release -p strata-client --example wordcount -- \
//!     --bootstrap-server 127.0.0.1:9092 --input lines --output counts --group wc \
//!     --checkpoint-dir /tmp/wc --checkpoint-interval-ms 500
//! ```
//!
//! It runs until SIGTERM or SIGINT, then takes a final checkpoint and exits 0; after a
//! crash it resumes from the latest complete checkpoint in `--checkpoint-dir`.

use bytes::Bytes;
use clap::Parser;
use std::time::Duration;
use strata_client::consumer::{ConsumerConfig, ConsumerRecord};
use strata_client::producer::{ProducerConfig, ProducerRecord};
use strata_client::stream::kafka::{KafkaSink, KafkaSource};
use strata_client::stream::{
    CheckpointId, CheckpointStore, Job, JobConfig, KeyedState, Operator, StreamError,
};

#[derive(Parser, Debug)]
#[command(about = "Exactly-once word count over Kafka topics")]
struct Args {
    #[arg(long)]
    bootstrap_server: String,
    #[arg(long)]
    input: String,
    #[arg(long)]
    output: String,
    #[arg(long)]
    group: String,
    #[arg(long)]
    checkpoint_dir: std::path::PathBuf,
    #[arg(long, default_value_t = 500)]
    checkpoint_interval_ms: u64,
    /// The sink's transactional id (default: `<group>-sink`); one running job per id.
    #[arg(long)]
    transactional_id: Option<String>,
    /// Fault injection for tests: abort the process once checkpoint N is complete, before
    /// the sink commits its transaction.
    #[arg(long, hide = true)]
    crash_before_commit: Option<u64>,
    /// Fault injection for tests: abort the process on restore, once the transaction the
    /// previous run left open is kept, before completing it.
    #[arg(long, hide = true)]
    crash_after_keep: bool,
}

/// Splits lines into words and counts each word; emits (word, running count).
#[derive(Default)]
struct WordCount {
    counts: KeyedState<String, u64>,
}

impl Operator for WordCount {
    type In = ConsumerRecord;
    type Out = (String, u64);

    fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
        if let Some(state) = state {
            self.counts = KeyedState::restore(state)?;
        }
        Ok(())
    }

    fn process(
        &mut self,
        _input: usize,
        record: ConsumerRecord,
        out: &mut Vec<(String, u64)>,
    ) -> Result<(), StreamError> {
        let Some(value) = record.value else { return Ok(()) };
        for word in String::from_utf8_lossy(&value).split_whitespace() {
            let n = self.counts.entry(word.to_string());
            *n += 1;
            out.push((word.to_string(), *n));
        }
        Ok(())
    }

    fn snapshot(&mut self, _id: CheckpointId) -> Result<Bytes, StreamError> {
        Ok(self.counts.snapshot())
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    #[cfg(not(feature = "fault-injection"))]
    if args.crash_before_commit.is_some() || args.crash_after_keep {
        anyhow::bail!(
            "this build has no fault injection: cargo build --release -p strata-client --features fault-injection --example wordcount"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut consumer = ConsumerConfig::new(&args.bootstrap_server);
    consumer.set("group.id", &args.group)?;
    consumer.set("auto.offset.reset", "earliest")?;
    consumer.set("isolation.level", "read_committed")?;
    let source = KafkaSource::new(consumer, &[args.input.as_str()]).await?;

    let mut producer = ProducerConfig::new(&args.bootstrap_server);
    let tid = args.transactional_id.clone().unwrap_or_else(|| format!("{}-sink", args.group));
    producer.set("transactional.id", &tid)?;
    producer.set("linger.ms", "5")?;
    let output = args.output.clone();
    let sink = KafkaSink::new(producer, move |(word, n): (String, u64)| {
        ProducerRecord::new(output.as_str()).key(word).value(n.to_string())
    })
    .await?;
    #[cfg(feature = "fault-injection")]
    let sink = match args.crash_before_commit {
        Some(n) => sink.crash_before_commit(n),
        None => sink,
    };
    #[cfg(feature = "fault-injection")]
    let sink = if args.crash_after_keep { sink.crash_after_keep() } else { sink };

    let store = CheckpointStore::open(&args.checkpoint_dir)?;
    let config = JobConfig {
        checkpoint_interval: Duration::from_millis(args.checkpoint_interval_ms),
        ..JobConfig::default()
    };
    let job = Job::new(config, store, vec![source], WordCount::default(), sink);
    let report = job.run(stop_signal()).await?;
    tracing::info!(checkpoint = report.last_completed, restored_from = ?report.restored_from, "wordcount stopped");
    Ok(())
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
