//! `strata config describe|alter`: the configs of a topic, of one broker, or of every
//! broker's defaults, as `kafka-configs.sh --entity-type topics|brokers` shows and
//! changes them.

use crate::args::{ClientArgs, ConfigAction, ConfigChanges, ConfigEntity, Format};
use crate::output::{emit, table};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use strata_client::admin::{AlterConfigOp, ConfigResource, ConfigSource};
use strata_client::Client;

/// Runs one config action.
pub async fn run(client: Client, args: &ClientArgs, action: ConfigAction) -> Result<()> {
    let admin = client.admin();
    match action {
        ConfigAction::Describe { entity, all } => {
            let (resource, own) = resource(&entity);
            let Some((_, entries)) = admin.describe_configs(std::slice::from_ref(&resource)).await.pop()
            else {
                bail!("no answer for {}", label(&resource));
            };
            let entries = match entries {
                Ok(entries) => entries,
                Err(e) => bail!("{}: {e}", label(&resource)),
            };
            // As kafka-configs.sh --describe: the values set on the entity itself, unless
            // every config is asked for.
            let shown: Vec<_> = entries.into_iter().filter(|e| all || e.source == own).collect();
            let doc: Vec<Value> = shown
                .iter()
                .map(|e| {
                    json!({
                        "name": e.name,
                        "value": e.value,
                        "source": e.source.name(),
                        "read_only": e.read_only,
                        "sensitive": e.sensitive,
                    })
                })
                .collect();
            emit(args.format, Value::Array(doc), || {
                println!("Configs of {}:", label(&resource));
                let rows: Vec<Vec<String>> = shown
                    .iter()
                    .map(|e| {
                        let value = match (&e.value, e.sensitive) {
                            (_, true) => "(sensitive)".to_string(),
                            (Some(v), false) => v.clone(),
                            (None, false) => "(null)".to_string(),
                        };
                        vec![e.name.clone(), value, e.source.name().to_string()]
                    })
                    .collect();
                table(&["NAME", "VALUE", "SOURCE"], &rows);
            });
            Ok(())
        }
        ConfigAction::Alter { entity, changes } => {
            let (resource, _) = resource(&entity);
            let ops = ops(changes)?;
            let what = label(&resource);
            let result = admin.incremental_alter_configs(&[(resource, ops)], false).await.pop();
            let error = match result {
                Some((_, Ok(()))) => None,
                Some((_, Err(e))) => Some(e),
                None => bail!("no answer for {what}"),
            };
            let doc = match &error {
                None => json!({"entity": what, "error": null}),
                Some(e) => {
                    json!({"entity": what, "error": e.code().map(|c| c.name()), "message": e.to_string()})
                }
            };
            // A failure in text mode is the error line alone (on stderr, exit status 1).
            if error.is_none() || args.format == Format::Json {
                emit(args.format, doc, || println!("{what}: altered"));
            }
            match error {
                None => Ok(()),
                Some(e) => bail!("{what}: {e}"),
            }
        }
    }
}

/// The changes as incremental-alter operations; refuses an empty change.
pub fn ops(changes: ConfigChanges) -> Result<Vec<AlterConfigOp>> {
    let ConfigChanges { set, delete, append, subtract } = changes;
    let mut ops: Vec<AlterConfigOp> = set.into_iter().map(|(k, v)| AlterConfigOp::set(k, v)).collect();
    ops.extend(delete.into_iter().map(AlterConfigOp::delete));
    ops.extend(append.into_iter().map(|(k, v)| AlterConfigOp::append(k, v)));
    ops.extend(subtract.into_iter().map(|(k, v)| AlterConfigOp::subtract(k, v)));
    if ops.is_empty() {
        bail!("nothing to change: give --set, --delete, --append or --subtract");
    }
    Ok(ops)
}

/// The resource named and the source of the values set on it.
fn resource(entity: &ConfigEntity) -> (ConfigResource, ConfigSource) {
    match (&entity.topic, entity.broker) {
        (Some(topic), _) => (ConfigResource::topic(topic), ConfigSource::DynamicTopic),
        (None, Some(id)) => (ConfigResource::broker(id), ConfigSource::DynamicBroker),
        (None, None) => (ConfigResource::broker_defaults(), ConfigSource::DynamicDefaultBroker),
    }
}

/// How the tool names a resource: `topic orders`, `broker 1`, `broker defaults`.
fn label(resource: &ConfigResource) -> String {
    match resource.resource_type {
        strata_client::admin::ResourceType::Topic => format!("topic {}", resource.name),
        _ if resource.name.is_empty() => "broker defaults".to_string(),
        _ => format!("broker {}", resource.name),
    }
}
