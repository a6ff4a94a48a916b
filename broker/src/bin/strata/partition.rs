//! `strata partition ...`: reassign partitions, list and cancel moves, elect leaders.

use crate::args::{ClientArgs, Election, Format, PartitionAction, PartitionMove};
use crate::output::{emit, ids, table};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use strata_client::admin::{Admin, AlterConfigOp, ConfigResource, ElectionType};
use strata_client::{Client, ErrorCode, TopicPartition};

/// How often `reassign --wait` asks whether the moves are done.
const WAIT_POLL: Duration = Duration::from_millis(500);

/// Runs one partition action.
pub async fn run(client: Client, args: &ClientArgs, action: PartitionAction) -> Result<()> {
    let admin = client.admin();
    match action {
        PartitionAction::Reassign { moves, wait, wait_timeout_ms, throttle } => {
            let wait = wait.then(|| Duration::from_millis(wait_timeout_ms));
            let Some(rate) = throttle else { return reassign(&admin, args.format, moves, wait).await };
            let throttled = Throttle::set(&admin, &moves, rate).await?;
            let moved = reassign(&admin, args.format, moves, wait).await;
            // Removed whether or not the moves finished, as a failed run must not leave the
            // brokers throttled.
            let removed = throttled.remove(&admin).await;
            moved.and(removed)
        }
        PartitionAction::Reassignments { topics } => {
            let mut moves = admin.list_partition_reassignments(None).await?;
            moves.retain(|m| topics.is_empty() || topics.contains(&m.partition.topic));
            moves.sort_by(|a, b| {
                (&a.partition.topic, a.partition.partition).cmp(&(&b.partition.topic, b.partition.partition))
            });
            let doc: Vec<Value> = moves
                .iter()
                .map(|m| {
                    json!({
                        "topic": m.partition.topic,
                        "partition": m.partition.partition,
                        "replicas": m.replicas,
                        "adding": m.adding,
                        "removing": m.removing,
                    })
                })
                .collect();
            emit(args.format, Value::Array(doc), || {
                let rows: Vec<Vec<String>> = moves
                    .iter()
                    .map(|m| {
                        vec![
                            m.partition.topic.clone(),
                            m.partition.partition.to_string(),
                            ids(&m.replicas),
                            ids(&m.adding),
                            ids(&m.removing),
                        ]
                    })
                    .collect();
                table(&["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"], &rows);
            });
            Ok(())
        }
        PartitionAction::CancelReassignment { partitions } => {
            let cancels: Vec<(TopicPartition, Option<Vec<i32>>)> =
                partitions.into_iter().map(|(t, p)| (TopicPartition::new(t, p), None)).collect();
            let results = admin.alter_partition_reassignments(&cancels).await?;
            report(args.format, &results, "cancelled", &[])
        }
        PartitionAction::ElectLeaders { partitions, election_type } => {
            let election = match election_type {
                Election::Preferred => ElectionType::Preferred,
                Election::Unclean => ElectionType::Unclean,
            };
            let named = if partitions.is_empty() { None } else { Some(expand(&admin, &partitions).await?) };
            let results = admin.elect_leaders(election, named.as_deref()).await?;
            // Kafka's tool reports a partition already led by the replica it would choose
            // apart from the elected ones, and does not fail for it.
            report(
                args.format,
                &results,
                "leader elected",
                &[(ErrorCode::ElectionNotNeeded, "already led by it")],
            )
        }
    }
}

/// Starts the moves and, with `wait`, waits until none of them is in progress.
async fn reassign(
    admin: &Admin,
    format: Format,
    moves: Vec<PartitionMove>,
    wait: Option<Duration>,
) -> Result<()> {
    let requested: Vec<(TopicPartition, Option<Vec<i32>>)> =
        moves.into_iter().map(|m| (TopicPartition::new(m.topic, m.partition), Some(m.replicas))).collect();
    let results = admin.alter_partition_reassignments(&requested).await?;
    report(format, &results, "moving", &[])?;
    let Some(timeout) = wait else { return Ok(()) };
    let started: Vec<TopicPartition> = results.into_iter().map(|(tp, _)| tp).collect();
    let deadline = Instant::now() + timeout;
    loop {
        let pending = admin.list_partition_reassignments(Some(&started)).await?;
        if pending.is_empty() {
            if format == Format::Text {
                println!("every move finished");
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = pending.iter().map(|m| m.partition.to_string()).collect();
            bail!("still moving after {} ms: {}", timeout.as_millis(), names.join(", "));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// What `--throttle` set, to remove it again: as Kafka's tool, the leader side names
/// the partitions' current replicas, the follower side the arriving ones, and every
/// broker taking part gets the rate both ways.
struct Throttle {
    topics: Vec<String>,
    brokers: Vec<i32>,
}

/// The topic keys and broker keys `--throttle` sets.
const THROTTLED_REPLICAS: [&str; 2] =
    ["leader.replication.throttled.replicas", "follower.replication.throttled.replicas"];
const THROTTLE_RATES: [&str; 2] =
    ["leader.replication.throttled.rate", "follower.replication.throttled.rate"];

impl Throttle {
    async fn set(admin: &Admin, moves: &[PartitionMove], rate: u64) -> Result<Throttle> {
        let mut topics: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
        let mut brokers = BTreeSet::new();
        let names: Vec<String> =
            moves.iter().map(|m| m.topic.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        let described: BTreeMap<String, _> = admin.describe_topics(&names).await?.into_iter().collect();
        for m in moves {
            let current = match described.get(&m.topic) {
                Some(Ok(d)) => {
                    d.partitions.iter().find(|p| p.partition == m.partition).map(|p| p.replicas.clone())
                }
                Some(Err(e)) => bail!("{}: {e}", m.topic),
                None => None,
            }
            .unwrap_or_default();
            let (leader, follower) = topics.entry(&m.topic).or_default();
            leader.extend(current.iter().map(|b| format!("{}:{b}", m.partition)));
            follower.extend(
                m.replicas.iter().filter(|b| !current.contains(b)).map(|b| format!("{}:{b}", m.partition)),
            );
            brokers.extend(current.iter().chain(&m.replicas).copied());
        }
        let mut changes: Vec<(ConfigResource, Vec<AlterConfigOp>)> = topics
            .iter()
            .map(|(topic, (leader, follower))| {
                let ops = [leader, follower]
                    .into_iter()
                    .zip(THROTTLED_REPLICAS)
                    .map(|(list, key)| AlterConfigOp::set(key, list.join(",")))
                    .collect();
                (ConfigResource::topic(*topic), ops)
            })
            .collect();
        changes.extend(brokers.iter().map(|b| {
            (
                ConfigResource::broker(*b),
                THROTTLE_RATES.iter().map(|k| AlterConfigOp::set(*k, rate.to_string())).collect(),
            )
        }));
        let throttle = Throttle {
            topics: topics.keys().map(|t| t.to_string()).collect(),
            brokers: brokers.into_iter().collect(),
        };
        if let Err(e) = apply(admin, changes).await {
            let _ = throttle.remove(admin).await;
            return Err(e);
        }
        eprintln!("throttled to {rate} bytes/s on brokers {}", ids(&throttle.brokers));
        Ok(throttle)
    }

    async fn remove(&self, admin: &Admin) -> Result<()> {
        let mut changes: Vec<(ConfigResource, Vec<AlterConfigOp>)> = self
            .topics
            .iter()
            .map(|t| {
                (
                    ConfigResource::topic(t),
                    THROTTLED_REPLICAS.iter().map(|k| AlterConfigOp::delete(*k)).collect(),
                )
            })
            .collect();
        changes.extend(self.brokers.iter().map(|b| {
            (ConfigResource::broker(*b), THROTTLE_RATES.iter().map(|k| AlterConfigOp::delete(*k)).collect())
        }));
        apply(admin, changes).await?;
        eprintln!("throttle removed");
        Ok(())
    }
}

/// Applies config changes, failing on the first resource refused.
async fn apply(admin: &Admin, changes: Vec<(ConfigResource, Vec<AlterConfigOp>)>) -> Result<()> {
    for (resource, result) in admin.incremental_alter_configs(&changes, false).await {
        if let Err(e) = result {
            bail!("setting the throttle on {:?} {}: {e}", resource.resource_type, resource.name);
        }
    }
    Ok(())
}

/// `TOPIC` (each of its partitions) and `TOPIC:PARTITION` as partitions.
async fn expand(admin: &Admin, names: &[String]) -> Result<Vec<TopicPartition>> {
    let mut out = Vec::new();
    let mut whole = Vec::new();
    for name in names {
        match name.rsplit_once(':').and_then(|(t, p)| Some((t, p.parse::<i32>().ok()?))) {
            Some((topic, partition)) if !topic.is_empty() && partition >= 0 => {
                out.push(TopicPartition::new(topic, partition))
            }
            _ => whole.push(name.clone()),
        }
    }
    if !whole.is_empty() {
        for (name, described) in admin.describe_topics(&whole).await? {
            match described {
                Ok(d) => {
                    out.extend(d.partitions.iter().map(|p| TopicPartition::new(name.clone(), p.partition)))
                }
                Err(e) => bail!("{name}: {e}"),
            }
        }
    }
    Ok(out)
}

/// Prints per-partition outcomes; fails if any failed with an error other than those
/// of `benign` (printed with their text).
fn report(
    format: Format,
    results: &[(TopicPartition, strata_client::Result<()>)],
    verb: &str,
    benign: &[(ErrorCode, &str)],
) -> Result<()> {
    let benign_text =
        |e: &strata_client::Error| benign.iter().find(|(c, _)| e.code() == Some(*c)).map(|(_, text)| *text);
    let failed =
        results.iter().filter(|(_, r)| r.as_ref().err().is_some_and(|e| benign_text(e).is_none())).count();
    let doc: Vec<Value> = results
        .iter()
        .map(|(tp, r)| match r {
            Ok(()) => json!({"topic": tp.topic, "partition": tp.partition, "error": null}),
            Err(e) => json!({
                "topic": tp.topic,
                "partition": tp.partition,
                "error": e.code().map(|c| c.name()),
                "message": e.to_string(),
            }),
        })
        .collect();
    emit(format, Value::Array(doc), || {
        for (tp, r) in results {
            match r {
                Ok(()) => println!("{tp}: {verb}"),
                Err(e) => match benign_text(e) {
                    Some(text) => println!("{tp}: {text}"),
                    None => println!("{tp}: failed: {e}"),
                },
            }
        }
    });
    if failed > 0 {
        bail!("{failed} of {} partitions failed", results.len());
    }
    Ok(())
}
