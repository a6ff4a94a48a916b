//! `strata consume TOPIC`: prints records to stdout (`kafka-console-consumer.sh`, kcat's
//! consumer mode). With `--group` it is a member of the group and commits what it
//! printed (auto-commit, on revocation and on exit); without one it assigns itself the
//! topic's partitions and commits nothing. SIGINT and SIGTERM stop it between polls,
//! so it still commits and leaves the group.

use crate::args::{ConnectionArgs, ConsumeArgs, StartOffset};
use crate::signals::Shutdown;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_client::admin::OffsetSpec;
use strata_client::consumer::{Consumer, ConsumerConfig, ConsumerRecord, Rebalance, RebalanceListener};
use strata_client::{IsolationLevel, TopicPartition};

/// How long one poll waits, which bounds how late a signal is noticed.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);

/// The consumer settings: `-X` entries first, then the tool's own flags.
pub fn config(connection: &ConnectionArgs, args: &ConsumeArgs) -> strata_client::Result<ConsumerConfig> {
    let mut config = ConsumerConfig::new(&connection.bootstrap_server);
    config.client.client_id = "strata-cli".to_string();
    for (key, value) in &connection.settings {
        config.set(key, value)?;
    }
    if let Some(group) = &args.group {
        config.set("group.id", group)?;
    }
    if args.from_beginning {
        config.set("auto.offset.reset", "earliest")?;
    }
    if let Some(level) = &args.isolation_level {
        config.set("isolation.level", level)?;
    }
    if config.group_id.is_some() && (args.offset.is_some() || args.partition.is_some()) {
        return Err(strata_client::Error::config(
            "--offset and --partition are for consuming without a group (group.id is set)",
        ));
    }
    Ok(config)
}

/// Commits the positions of revoked partitions, which are those of what was printed.
struct CommitOnRevoke;

impl RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked(&mut self, rebalance: &mut Rebalance, _partitions: &[TopicPartition]) {
        rebalance.commit_positions();
    }
}

/// Consumes and prints until the count, the end or a signal.
pub async fn run(config: ConsumerConfig, args: ConsumeArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;
    let grouped = config.group_id.is_some();
    let committing = grouped && config.enable_auto_commit;
    let isolation = config.isolation_level;
    let mut consumer = Consumer::new(config).await.context("starting the consumer")?;
    let partitions = partitions(&consumer, &args).await?;
    if grouped {
        let listener: Box<dyn RebalanceListener> = if committing {
            Box::new(CommitOnRevoke)
        } else {
            Box::new(strata_client::consumer::NoopListener)
        };
        consumer.subscribe(&[args.topic.as_str()], listener)?;
    } else {
        consumer.assign(&partitions)?;
        let start = args.offset.unwrap_or(if args.from_beginning {
            StartOffset::Beginning
        } else {
            StartOffset::End
        });
        start_at(&mut consumer, &partitions, start, isolation).await?;
    }
    // The ends as known now: --exit-at-end stops there even if more is produced.
    let ends = if args.exit_at_end {
        Some(offsets(&consumer, &partitions, OffsetSpec::Latest, isolation).await?)
    } else {
        None
    };
    let result = consume(&mut consumer, &args, ends.as_ref(), &stop).await;
    let closed = consumer.close().await;
    result?;
    closed.context("committing and leaving the group")?;
    Ok(())
}

/// The poll loop. Positions are kept equal to what was printed (a batch cut short by
/// `-n` seeks back), so every commit covers exactly the printed records.
async fn consume(
    consumer: &mut Consumer,
    args: &ConsumeArgs,
    ends: Option<&BTreeMap<TopicPartition, i64>>,
    stop: &AtomicBool,
) -> Result<()> {
    // Not `stdout().lock()`: no lock is held across the polls' awaits.
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut printed: u64 = 0;
    loop {
        if stop.load(Ordering::Acquire) || args.count.is_some_and(|n| printed >= n) {
            break;
        }
        if ends.is_some_and(|ends| at_end(consumer, ends)) {
            break;
        }
        let records = consumer.poll(POLL_TIMEOUT).await?;
        let take = args.count.map_or(records.len(), |n| records.len().min((n - printed) as usize));
        for r in &records[..take] {
            if let Err(e) = args.format.write(&mut out, r) {
                return output_error(e);
            }
        }
        printed += take as u64;
        if take < records.len() {
            rewind(consumer, &records[take..])?;
        }
        if let Err(e) = out.flush() {
            return output_error(e);
        }
    }
    Ok(())
}

/// A closed stdout (`| head`) ends the tool as a success; other write errors fail it.
fn output_error(e: std::io::Error) -> Result<()> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(anyhow!(e).context("writing stdout"))
    }
}

/// Moves each partition back to its first record not printed.
fn rewind(consumer: &mut Consumer, unprinted: &[ConsumerRecord]) -> Result<()> {
    let mut first: BTreeMap<i32, (&str, i64)> = BTreeMap::new();
    for r in unprinted {
        first.entry(r.partition).or_insert((&r.topic, r.offset));
    }
    for (partition, (topic, offset)) in first {
        consumer.seek(&TopicPartition::new(topic, partition), offset)?;
    }
    Ok(())
}

/// Whether every assigned partition's position reached the end it had at the start.
fn at_end(consumer: &Consumer, ends: &BTreeMap<TopicPartition, i64>) -> bool {
    let assigned = consumer.assignment();
    let positions = consumer.positions();
    !assigned.is_empty()
        && assigned.iter().all(|tp| match (positions.get(tp), ends.get(tp)) {
            (Some(position), Some(end)) => position >= end,
            // A partition that did not exist at the start has no end to reach.
            (Some(_), None) => true,
            (None, _) => false,
        })
}

/// The topic's partitions (only `--partition` if given), refusing a missing topic.
async fn partitions(consumer: &Consumer, args: &ConsumeArgs) -> Result<Vec<TopicPartition>> {
    let admin = consumer.client().admin();
    let (_, described) = admin
        .describe_topics(std::slice::from_ref(&args.topic))
        .await?
        .pop()
        .ok_or_else(|| anyhow!("no metadata for topic {}", args.topic))?;
    let described = described.with_context(|| format!("topic {}", args.topic))?;
    let all: Vec<TopicPartition> =
        described.partitions.iter().map(|p| TopicPartition::new(args.topic.clone(), p.partition)).collect();
    match args.partition {
        None => Ok(all),
        Some(p) if all.iter().any(|tp| tp.partition == p) => {
            Ok(vec![TopicPartition::new(args.topic.clone(), p)])
        }
        Some(p) => bail!("topic {} has no partition {p} (it has {})", args.topic, all.len()),
    }
}

/// Puts every assigned partition at `start`.
async fn start_at(
    consumer: &mut Consumer,
    partitions: &[TopicPartition],
    start: StartOffset,
    isolation: IsolationLevel,
) -> Result<()> {
    match start {
        StartOffset::Beginning => consumer.seek_to_beginning(partitions),
        StartOffset::End => consumer.seek_to_end(partitions),
        StartOffset::At(offset) => {
            for tp in partitions {
                consumer.seek(tp, offset)?;
            }
        }
        StartOffset::BeforeEnd(n) => {
            let starts = offsets(consumer, partitions, OffsetSpec::Earliest, isolation).await?;
            let ends = offsets(consumer, partitions, OffsetSpec::Latest, isolation).await?;
            for tp in partitions {
                consumer.seek(tp, ends[tp].saturating_sub(n).max(starts[tp]))?;
            }
        }
    }
    Ok(())
}

/// One offset per partition (the last stable offset for `Latest` under read_committed).
async fn offsets(
    consumer: &Consumer,
    partitions: &[TopicPartition],
    spec: OffsetSpec,
    isolation: IsolationLevel,
) -> Result<BTreeMap<TopicPartition, i64>> {
    let asked: Vec<(TopicPartition, OffsetSpec)> = partitions.iter().map(|tp| (tp.clone(), spec)).collect();
    let mut out = BTreeMap::new();
    for (tp, listed) in consumer.client().admin().list_offsets(&asked, isolation).await {
        out.insert(tp.clone(), listed.with_context(|| format!("offsets of {tp}"))?.offset);
    }
    Ok(out)
}

/// Sets `stop` on SIGINT or SIGTERM; the poll loop sees it within one poll (a poll is
/// not cancelled: records it took would be lost to the positions).
fn watch_signals(stop: Arc<AtomicBool>) -> Result<()> {
    let mut shutdown = Shutdown::new()?;
    tokio::spawn(async move {
        shutdown.recv().await;
        stop.store(true, Ordering::Release);
    });
    Ok(())
}
