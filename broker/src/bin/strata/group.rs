//! `strata group ...`: list, describe (members, assignments, offsets, lag), delete,
//! reset offsets.

use crate::args::{ClientArgs, Format, GroupAction, ResetTarget};
use crate::output::{emit, table};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use strata_client::admin::{Admin, GroupDescription, OffsetSpec};
use strata_client::{Client, IsolationLevel, OffsetAndMetadata, TopicPartition};

/// Runs one group action.
pub async fn run(client: Client, args: &ClientArgs, action: GroupAction) -> Result<()> {
    let admin = client.admin();
    match action {
        GroupAction::List => {
            let groups = admin.list_groups().await?;
            let doc: Vec<Value> = groups
                .iter()
                .map(|g| {
                    json!({"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type, "coordinator": g.coordinator})
                })
                .collect();
            emit(args.format, Value::Array(doc), || {
                let rows: Vec<Vec<String>> = groups
                    .iter()
                    .map(|g| {
                        vec![
                            g.group_id.clone(),
                            g.state.clone().unwrap_or_else(|| "-".into()),
                            g.protocol_type.clone(),
                            g.coordinator.to_string(),
                        ]
                    })
                    .collect();
                table(&["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"], &rows);
            });
            Ok(())
        }
        GroupAction::Describe { group } => describe(&admin, args.format, &group).await,
        GroupAction::Delete { groups } => {
            let results = admin.delete_groups(&groups).await;
            let failed = results.iter().filter(|(_, r)| r.is_err()).count();
            let doc: Vec<Value> = results
                .iter()
                .map(|(g, r)| match r {
                    Ok(()) => json!({"group": g, "error": null}),
                    Err(e) => {
                        json!({"group": g, "error": e.code().map(|c| c.name()), "message": e.to_string()})
                    }
                })
                .collect();
            emit(args.format, Value::Array(doc), || {
                for (g, r) in &results {
                    match r {
                        Ok(()) => println!("{g}: deleted"),
                        Err(e) => println!("{g}: failed: {e}"),
                    }
                }
            });
            if failed > 0 {
                bail!("{failed} of {} groups could not be deleted", results.len());
            }
            Ok(())
        }
        GroupAction::ResetOffsets { group, topics, target, execute } => {
            reset_offsets(&admin, args.format, &group, &topics, &target, execute).await
        }
    }
}

async fn describe(admin: &Admin, format: Format, group: &str) -> Result<()> {
    let (_, described) = admin.describe_groups(&[group.to_string()]).await.remove(0);
    let d = described?;
    let rows = offset_rows(admin, &d).await?;
    let doc = json!({
        "group": d.group_id,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "coordinator": d.coordinator,
        "members": d.members.iter().map(|m| json!({
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": m.assignment.iter().map(|tp| json!({"topic": tp.topic, "partition": tp.partition})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "offsets": rows,
    });
    emit(format, doc, || print_description(&d, &rows));
    Ok(())
}

/// One row per partition the group has a commit for or a member owns: committed
/// offset (from the coordinator), log end offset (from the leader), lag and owner.
async fn offset_rows(admin: &Admin, d: &GroupDescription) -> Result<Vec<Value>> {
    let committed = admin.list_group_offsets(&d.group_id, None).await?;
    let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (i, m) in d.members.iter().enumerate() {
        for tp in &m.assignment {
            owner.insert(tp.clone(), i);
        }
    }
    let partitions: BTreeSet<TopicPartition> = committed.keys().chain(owner.keys()).cloned().collect();
    let asked: Vec<(TopicPartition, OffsetSpec)> =
        partitions.iter().map(|tp| (tp.clone(), OffsetSpec::Latest)).collect();
    let ends: BTreeMap<TopicPartition, i64> = admin
        .list_offsets(&asked, IsolationLevel::ReadUncommitted)
        .await
        .into_iter()
        .filter_map(|(tp, r)| r.ok().map(|l| (tp, l.offset)))
        .collect();
    let rows: Vec<Value> = partitions
        .iter()
        .map(|tp| {
            let current = committed.get(tp).map(|o| o.offset);
            let end = ends.get(tp).copied();
            let member = owner.get(tp).map(|&i| &d.members[i]);
            json!({
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": current.zip(end).map(|(c, e)| (e - c).max(0)),
                "member_id": member.map(|m| &m.member_id),
                "host": member.map(|m| &m.client_host),
                "client_id": member.map(|m| &m.client_id),
            })
        })
        .collect();
    Ok(rows)
}

/// The text form of `strata group describe`, with Kafka's tool's columns.
fn print_description(d: &GroupDescription, rows: &[Value]) {
    if d.state == "Dead" && rows.is_empty() {
        println!("Consumer group '{}' does not exist.", d.group_id);
        return;
    }
    println!(
        "Group: {}\tState: {}\tProtocol: {}\tCoordinator: {}\tMembers: {}",
        d.group_id,
        d.state,
        if d.protocol.is_empty() { "-" } else { &d.protocol },
        d.coordinator,
        d.members.len()
    );
    let cell = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            [
                "topic",
                "partition",
                "current_offset",
                "log_end_offset",
                "lag",
                "member_id",
                "host",
                "client_id",
            ]
            .iter()
            .map(|k| cell(&r[*k]))
            .collect()
        })
        .collect();
    table(
        &[
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        &table_rows,
    );
    let idle: Vec<&str> =
        d.members.iter().filter(|m| m.assignment.is_empty()).map(|m| m.member_id.as_str()).collect();
    for m in idle {
        println!("(member {m} has no partitions)");
    }
}

async fn reset_offsets(
    admin: &Admin,
    format: Format,
    group: &str,
    topics: &[String],
    target: &ResetTarget,
    execute: bool,
) -> Result<()> {
    let (_, described) = admin.describe_groups(&[group.to_string()]).await.remove(0);
    let state = described?.state;
    if state != "Empty" && state != "Dead" {
        bail!("offsets can only be reset while group '{group}' is inactive, but its state is {state}");
    }
    let mut partitions = Vec::new();
    for (name, d) in admin.describe_topics(topics).await? {
        let d = d.map_err(|e| anyhow!("topic {name}: {e}"))?;
        partitions.extend(d.partitions.iter().map(|p| TopicPartition::new(name.clone(), p.partition)));
    }
    let earliest = offsets(admin, &partitions, OffsetSpec::Earliest).await?;
    let latest = offsets(admin, &partitions, OffsetSpec::Latest).await?;
    let mut plan: BTreeMap<TopicPartition, OffsetAndMetadata> = BTreeMap::new();
    for tp in &partitions {
        let (lo, hi) = (earliest[tp], latest[tp]);
        let offset = match (target.to_earliest, target.to_latest, target.to_offset) {
            (true, _, _) => lo,
            (_, true, _) => hi,
            (_, _, Some(n)) => n.clamp(lo, hi.max(lo)),
            _ => bail!("give --to-earliest, --to-latest or --to-offset"),
        };
        plan.insert(tp.clone(), OffsetAndMetadata::new(offset));
    }
    let mut failed = 0;
    if execute {
        for (tp, r) in admin.alter_group_offsets(group, &plan).await? {
            if let Err(e) = r {
                failed += 1;
                eprintln!("{tp}: {e}");
            }
        }
    }
    let doc = json!({
        "group": group,
        "executed": execute,
        "offsets": plan.iter().map(|(tp, o)| json!({"topic": tp.topic, "partition": tp.partition, "offset": o.offset})).collect::<Vec<_>>(),
    });
    emit(format, doc, || {
        let rows: Vec<Vec<String>> = plan
            .iter()
            .map(|(tp, o)| {
                vec![group.to_string(), tp.topic.clone(), tp.partition.to_string(), o.offset.to_string()]
            })
            .collect();
        table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows);
        if !execute {
            println!("(dry run: nothing committed; add --execute to commit these offsets)");
        }
    });
    if failed > 0 {
        bail!("{failed} partitions could not be reset");
    }
    Ok(())
}

async fn offsets(
    admin: &Admin,
    partitions: &[TopicPartition],
    spec: OffsetSpec,
) -> Result<BTreeMap<TopicPartition, i64>> {
    let asked: Vec<(TopicPartition, OffsetSpec)> = partitions.iter().map(|tp| (tp.clone(), spec)).collect();
    let mut out = BTreeMap::new();
    for (tp, r) in admin.list_offsets(&asked, IsolationLevel::ReadUncommitted).await {
        let listed = r.map_err(|e| anyhow!("{tp}: {e}"))?;
        out.insert(tp, listed.offset);
    }
    Ok(out)
}
