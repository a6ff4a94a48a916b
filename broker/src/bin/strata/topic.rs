//! `strata topic ...`: create, list, describe, delete, add partitions, alter configs.

use crate::args::{ClientArgs, Format, TopicAction};
use crate::output::{emit, ids, table};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use strata_client::admin::{ConfigResource, ConfigSource, NewPartitions, NewTopic};
use strata_client::Client;

/// Runs one topic action.
pub async fn run(client: Client, args: &ClientArgs, action: TopicAction) -> Result<()> {
    let admin = client.admin();
    match action {
        TopicAction::Create { name, partitions, replication_factor, configs, validate_only } => {
            let mut topic = NewTopic::new(name, partitions.unwrap_or(-1))
                .replication_factor(replication_factor.unwrap_or(-1));
            topic.configs = configs;
            let results = admin.create_topics(&[topic], validate_only).await;
            let verb = if validate_only { "would be created" } else { "created" };
            report(args.format, results, verb)
        }
        TopicAction::List { internal } => {
            let names = admin.list_topics(internal).await?;
            emit(args.format, json!(names), || names.iter().for_each(|n| println!("{n}")));
            Ok(())
        }
        TopicAction::Describe { names } => describe(&client, args.format, &names).await,
        TopicAction::Delete { names } => report(args.format, admin.delete_topics(&names).await, "deleted"),
        TopicAction::AddPartitions { name, partitions } => {
            let results =
                admin.create_partitions(&[NewPartitions::increase_to(name, partitions)], false).await;
            report(args.format, results, "grown")
        }
        TopicAction::AlterConfig { name, changes } => {
            let ops = crate::config::ops(changes)?;
            let results =
                admin.incremental_alter_configs(&[(ConfigResource::topic(&name), ops)], false).await;
            let results = results.into_iter().map(|(r, result)| (r.name, result)).collect();
            report(args.format, results, "altered")
        }
    }
}

/// Prints per-topic outcomes; fails if any topic failed.
fn report(format: Format, results: Vec<(String, strata_client::Result<()>)>, verb: &str) -> Result<()> {
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    let json: Vec<Value> = results
        .iter()
        .map(|(name, r)| match r {
            Ok(()) => json!({"name": name, "error": null}),
            Err(e) => json!({"name": name, "error": e.code().map(|c| c.name()), "message": e.to_string()}),
        })
        .collect();
    emit(format, Value::Array(json), || {
        for (name, r) in &results {
            match r {
                Ok(()) => println!("{name}: {verb}"),
                Err(e) => println!("{name}: failed: {e}"),
            }
        }
    });
    if failed > 0 {
        bail!("{failed} of {} failed", results.len());
    }
    Ok(())
}

async fn describe(client: &Client, format: Format, names: &[String]) -> Result<()> {
    let admin = client.admin();
    let described = admin.describe_topics(names).await?;
    // Configs only of the topics that exist.
    let resources: Vec<ConfigResource> =
        described.iter().filter(|(_, d)| d.is_ok()).map(|(n, _)| ConfigResource::topic(n)).collect();
    let mut configs: std::collections::HashMap<String, Vec<strata_client::admin::ConfigEntry>> = admin
        .describe_configs(&resources)
        .await
        .into_iter()
        .filter_map(|(r, c)| c.ok().map(|c| (r.name, c)))
        .collect();
    let mut docs = Vec::new();
    let mut failed = 0;
    for (name, d) in described {
        let d = match d {
            Ok(d) => d,
            Err(e) => {
                failed += 1;
                eprintln!("{name}: {e}");
                docs.push(
                    json!({"name": name, "error": e.code().map(|c| c.name()), "message": e.to_string()}),
                );
                continue;
            }
        };
        // The configs set on the topic, as Kafka's tool shows them.
        let overrides: Vec<(String, String)> = configs
            .remove(&name)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.source == ConfigSource::DynamicTopic)
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect();
        let replication = d.partitions.first().map_or(0, |p| p.replicas.len());
        docs.push(json!({
            "name": d.name,
            "id": d.id.to_string(),
            "internal": d.internal,
            "partition_count": d.partitions.len(),
            "replication_factor": replication,
            "configs": overrides.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "partitions": d.partitions.iter().map(|p| json!({
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
                "offline_replicas": p.offline_replicas,
                "error": p.error.map(|c| c.name()),
            })).collect::<Vec<_>>(),
        }));
        if format == Format::Text {
            let configs: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
                d.name,
                d.id,
                d.partitions.len(),
                replication,
                configs.join(",")
            );
            let rows: Vec<Vec<String>> = d
                .partitions
                .iter()
                .map(|p| {
                    vec![
                        p.partition.to_string(),
                        p.leader.to_string(),
                        ids(&p.replicas),
                        ids(&p.isr),
                        ids(&p.offline_replicas),
                    ]
                })
                .collect();
            table(&["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"], &rows);
        }
    }
    if format == Format::Json {
        println!("{}", Value::Array(docs));
    }
    if failed > 0 {
        bail!("{failed} of {} topics could not be described", names.len());
    }
    Ok(())
}
