//! Runs a workload from its parsed command: discovers the cluster, starts producers
//! and/or consumers, prints the progress line every second and returns the summary.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cli::{
    CommonOpts, ConsumeCmd, ConsumerOpts, EndToEndCmd, Engine, Limit, ProduceCmd, ProducerOpts, StartFrom,
};
use crate::client_consume::{self, ClientConsumeSettings};
use crate::client_produce::ClientProducer;
use crate::cluster::{self, Negotiated, TopicLayout, Versions, EARLIEST, LATEST};
use crate::consume::{self, ConsumerSettings, StopWhen};
use crate::json::Json;
use crate::produce::{Producer, ProducerSettings, Quota, WallClock};
use crate::stats::{Meter, Summary};
use crate::txn::TxnVersions;

/// Default length of a run given neither --records nor --duration.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// How long a consumer waits for records that do not come before it stops.
const CONSUME_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long end-to-end consumers may trail the producers before records count as
/// lost.
const E2E_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a run produced: the text for people, the JSON for scripts, and whether every
/// record succeeded.
#[derive(Debug)]
pub struct Outcome {
    /// Human-readable summary.
    pub text: String,
    /// `--json` summary.
    pub json: Json,
    /// False if any record failed or went missing.
    pub ok: bool,
}

fn spawn_progress(meters: Vec<Arc<Meter>>, start: Instant, quiet: bool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if quiet {
            return;
        }
        let mut tick =
            tokio::time::interval_at((start + Duration::from_secs(1)).into(), Duration::from_secs(1));
        loop {
            tick.tick().await;
            for m in &meters {
                eprintln!("{}", m.progress_line(start));
            }
        }
    })
}

async fn discover(common: &CommonOpts) -> Result<(Versions, Negotiated)> {
    let versions = cluster::api_versions(&common.bootstrap, &common.client_id)
        .await
        .with_context(|| format!("asking {} for its API versions", common.bootstrap))?;
    let negotiated = Negotiated::from(&versions)?;
    Ok((versions, negotiated))
}

fn producer_settings(
    common: &CommonOpts,
    opts: &ProducerOpts,
    negotiated: &Negotiated,
    versions: &Versions,
    stamp_values: bool,
) -> Result<ProducerSettings> {
    let transactions = if opts.transactions { Some(TxnVersions::negotiate(versions)?) } else { None };
    Ok(ProducerSettings {
        client_id: common.client_id.clone(),
        version: negotiated.produce,
        acks: opts.acks,
        timeout_ms: 30_000,
        linger: Duration::from_millis(opts.linger_ms),
        batch_size: opts.batch_size,
        max_request_size: opts.max_request_size,
        buffer_memory: opts.buffer_memory as u64,
        compression: opts.compression.into(),
        max_in_flight: opts.max_in_flight,
        rate_per_producer: opts.rate_per_producer(),
        record_size: opts.record_size,
        keys: opts.key_distribution,
        stamp_values,
        bootstrap: common.bootstrap.clone(),
        transactions,
        transaction_records: opts.transaction_records.max(1),
    })
}

fn consumer_settings(
    common: &CommonOpts,
    opts: &ConsumerOpts,
    negotiated: &Negotiated,
    stamped: bool,
) -> ConsumerSettings {
    ConsumerSettings {
        client_id: common.client_id.clone(),
        version: negotiated.fetch,
        max_wait_ms: opts.fetch_max_wait_ms,
        max_bytes: opts.fetch_max_bytes,
        partition_max_bytes: opts.partition_max_bytes,
        check_crc: !opts.no_check_crc,
        read_committed: opts.read_committed,
        stamped,
    }
}

/// Connects `count` producers of `engine`, then runs them from one common start until
/// `quota`.
async fn run_producers(
    engine: Engine,
    settings: &ProducerSettings,
    layout: &TopicLayout,
    count: usize,
    quota: impl Fn(Instant) -> Quota,
    meter: &Arc<Meter>,
) -> Result<(Instant, Duration)> {
    let clock = WallClock::now();
    let mut wire = Vec::new();
    let mut client = Vec::new();
    for i in 0..count {
        match engine {
            Engine::Wire => {
                wire.push(Producer::connect(i, settings.clone(), layout.clone(), meter.clone(), clock).await?)
            }
            Engine::Client => client.push(
                ClientProducer::connect(i, settings.clone(), &layout.topic, meter.clone(), clock).await?,
            ),
        }
    }
    let start = Instant::now();
    let quota = quota(start);
    let mut tasks = Vec::with_capacity(count);
    for (i, p) in wire.into_iter().enumerate() {
        tasks.push(tokio::spawn(p.begin(start).run(quota.split(count, i))));
    }
    for (i, p) in client.into_iter().enumerate() {
        tasks.push(tokio::spawn(p.begin(start).run(quota.split(count, i))));
    }
    let mut first_error = None;
    for t in tasks {
        if let Err(e) = t.await.context("producer task panicked").and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok((start, start.elapsed()))
}

/// Runs the consumers of `engine` until `stop`.
#[allow(clippy::too_many_arguments)]
async fn run_consumers(
    common: &CommonOpts,
    opts: &ConsumerOpts,
    settings: ConsumerSettings,
    layout: &TopicLayout,
    from: StartFrom,
    group: Option<String>,
    offsets: Vec<i64>,
    stop: Arc<StopWhen>,
    meter: Arc<Meter>,
) -> Result<()> {
    match common.engine {
        Engine::Wire => consume::run(settings, layout.clone(), opts.consumers, offsets, stop, meter).await,
        Engine::Client => {
            let client = ClientConsumeSettings {
                bootstrap: common.bootstrap.clone(),
                client_id: common.client_id.clone(),
                topic: layout.topic.clone(),
                from,
                group,
                stamped: settings.stamped,
            };
            client_consume::run(client, opts, offsets, stop, meter).await
        }
    }
}

/// The producers' stop condition. With an offered rate, a duration means "every
/// record due within it": a generator that fell behind still sends (and is charged
/// for) the whole backlog, so a stall cannot shrink the run. Unthrottled, it is a
/// deadline.
fn quota_for(limit: Limit, rate: f64) -> impl Fn(Instant) -> Quota {
    move |start| {
        let duration = match limit {
            Limit::Records(n) => return Quota::Records(n),
            Limit::Duration(d) => d,
            Limit::EndOfLog => DEFAULT_DURATION,
        };
        if rate > 0.0 {
            Quota::Records(records_due(rate, duration))
        } else {
            Quota::Until(start + duration)
        }
    }
}

/// Records due within `duration` at `rate` records/s (at least one).
fn records_due(rate: f64, duration: Duration) -> u64 {
    ((rate * duration.as_secs_f64()).ceil() as u64).max(1)
}

fn settings_json(opts: &ProducerOpts, layout: &TopicLayout) -> Json {
    Json::object()
        .with("partitions", layout.partition_count())
        .with("record_size", opts.record_size)
        .with("acks", i64::from(opts.acks))
        .with("offered_rate", opts.rate)
        .with("batch_size", opts.batch_size)
        .with("linger_ms", opts.linger_ms)
        .with("compression", format!("{:?}", opts.compression).to_lowercase())
        .with("producers", opts.producers)
}

fn outcome(summaries: &[&Summary], json: Json, lost: u64) -> Outcome {
    let mut text: Vec<String> = summaries.iter().map(|s| s.to_text()).collect();
    if lost > 0 {
        text.push(format!("{lost} expected records were not consumed"));
    }
    Outcome { text: text.join("\n"), json, ok: lost == 0 && summaries.iter().all(|s| s.error_records == 0) }
}

fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Client => "client",
        Engine::Wire => "wire",
    }
}

/// `strata-perf produce`.
pub async fn produce(cmd: ProduceCmd) -> Result<Outcome> {
    let ProduceCmd { common, producer } = cmd;
    producer.validate()?;
    let limit = common.limit(Limit::Duration(DEFAULT_DURATION))?;
    let (versions, negotiated) = discover(&common).await?;
    let settings = producer_settings(&common, &producer, &negotiated, &versions, false)?;
    let layout = cluster::ensure_topic(
        &common.bootstrap,
        &common.client_id,
        &versions,
        &common.topic,
        Some((producer.partitions, producer.replication_factor)),
    )
    .await?;
    let meter = Arc::new(Meter::new("produce"));
    let progress = spawn_progress(vec![meter.clone()], Instant::now(), common.quiet);
    let quota = quota_for(limit, producer.rate);
    let result = run_producers(common.engine, &settings, &layout, producer.producers, quota, &meter).await;
    progress.abort();
    let (_, elapsed) = result?;
    let summary = meter.summary(elapsed);
    let json = summary
        .to_json()
        .with("mode", "produce")
        .with("engine", engine_name(common.engine))
        .with("topic", common.topic.as_str())
        .with("settings", settings_json(&producer, &layout));
    Ok(outcome(&[&summary], json, 0))
}

/// `strata-perf consume`.
pub async fn consume(cmd: ConsumeCmd) -> Result<Outcome> {
    let ConsumeCmd { common, consumer, from, group } = cmd;
    consumer.validate()?;
    if group.is_some() && common.engine == Engine::Wire {
        bail!("--group needs --engine client (the wire engine has no group protocol)");
    }
    let limit = common.limit(Limit::EndOfLog)?;
    let (versions, negotiated) = discover(&common).await?;
    let layout =
        cluster::ensure_topic(&common.bootstrap, &common.client_id, &versions, &common.topic, None).await?;
    let start_at = match from {
        StartFrom::Earliest => EARLIEST,
        StartFrom::Latest => LATEST,
    };
    let offsets =
        cluster::list_offsets(&layout, negotiated.list_offsets, &common.client_id, start_at).await?;
    let end_offsets = match limit {
        Limit::EndOfLog => {
            Some(cluster::list_offsets(&layout, negotiated.list_offsets, &common.client_id, LATEST).await?)
        }
        _ => None,
    };
    let meter = Arc::new(Meter::new("consume"));
    let start = Instant::now();
    let stop = Arc::new(StopWhen {
        records: match limit {
            Limit::Records(n) => n,
            _ => u64::MAX,
        }
        .into(),
        until: match limit {
            Limit::Duration(d) => Some(start + d),
            _ => None,
        },
        end_offsets,
        idle_timeout: Some(CONSUME_IDLE_TIMEOUT),
    });
    let settings = consumer_settings(&common, &consumer, &negotiated, false);
    let progress = spawn_progress(vec![meter.clone()], start, common.quiet);
    let result =
        run_consumers(&common, &consumer, settings, &layout, from, group, offsets, stop, meter.clone()).await;
    progress.abort();
    result?;
    let summary = meter.summary(start.elapsed());
    let json = summary
        .to_json()
        .with("mode", "consume")
        .with("engine", engine_name(common.engine))
        .with("topic", common.topic.as_str())
        .with("partitions", layout.partition_count());
    let missing = match limit {
        Limit::Records(n) => n.saturating_sub(summary.records),
        _ => 0,
    };
    Ok(outcome(&[&summary], json, missing))
}

/// `strata-perf end-to-end`.
pub async fn end_to_end(cmd: EndToEndCmd) -> Result<Outcome> {
    let EndToEndCmd { common, producer, consumer } = cmd;
    producer.validate()?;
    consumer.validate()?;
    if producer.record_size < crate::payload::STAMP_BYTES {
        bail!("end-to-end needs --record-size of at least {} bytes", crate::payload::STAMP_BYTES);
    }
    let limit = common.limit(Limit::Duration(DEFAULT_DURATION))?;
    let (versions, negotiated) = discover(&common).await?;
    let settings = producer_settings(&common, &producer, &negotiated, &versions, true)?;
    let layout = cluster::ensure_topic(
        &common.bootstrap,
        &common.client_id,
        &versions,
        &common.topic,
        Some((producer.partitions, producer.replication_factor)),
    )
    .await?;
    let offsets = cluster::list_offsets(&layout, negotiated.list_offsets, &common.client_id, LATEST).await?;
    let produced = Arc::new(Meter::new("produce"));
    let consumed = Arc::new(Meter::new("end-to-end"));
    // No idle timeout: producers may pause (a slow start, a low rate); the drain
    // timeout below bounds the wait once they are done.
    let stop =
        Arc::new(StopWhen { records: u64::MAX.into(), until: None, end_offsets: None, idle_timeout: None });
    let consumers = {
        let (common, consumer, layout) = (common.clone(), consumer.clone(), layout.clone());
        let settings = consumer_settings(&common, &consumer, &negotiated, true);
        let (stop, consumed) = (stop.clone(), consumed.clone());
        tokio::spawn(async move {
            let from = StartFrom::Latest;
            run_consumers(&common, &consumer, settings, &layout, from, None, offsets, stop, consumed).await
        })
    };
    let progress = spawn_progress(vec![produced.clone(), consumed.clone()], Instant::now(), common.quiet);
    let quota = quota_for(limit, producer.rate);
    let result = run_producers(common.engine, &settings, &layout, producer.producers, quota, &produced).await;
    let (start, produce_elapsed) = match result {
        Ok(r) => r,
        Err(e) => {
            progress.abort();
            consumers.abort();
            return Err(e);
        }
    };
    stop.records.store(produced.records(), Ordering::Relaxed);
    let consumers = tokio::time::timeout(E2E_DRAIN_TIMEOUT, consumers).await;
    progress.abort();
    match consumers {
        Ok(joined) => joined.context("consumer task panicked")??,
        Err(_) => eprintln!("consumers did not catch up within {E2E_DRAIN_TIMEOUT:?}"),
    }
    let consume_elapsed = start.elapsed();
    let p = produced.summary(produce_elapsed);
    let c = consumed.summary(consume_elapsed);
    let lost = p.records.saturating_sub(c.records);
    let json = Json::object()
        .with("mode", "end-to-end")
        .with("engine", engine_name(common.engine))
        .with("topic", common.topic.as_str())
        .with("settings", settings_json(&producer, &layout))
        .with("produce", p.to_json())
        .with("consume", c.to_json())
        .with("missing", lost);
    Ok(outcome(&[&p, &c], json, lost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rated_duration_becomes_the_records_due_in_it() {
        let start = Instant::now();
        let d = Limit::Duration(Duration::from_secs(2));
        assert!(matches!(quota_for(d, 1000.0)(start), Quota::Records(2000)));
        assert!(matches!(quota_for(d, 0.0)(start), Quota::Until(t) if t == start + Duration::from_secs(2)));
        assert!(matches!(quota_for(Limit::Records(7), 1000.0)(start), Quota::Records(7)));
        assert_eq!(records_due(0.1, Duration::from_secs(1)), 1);
    }
}
