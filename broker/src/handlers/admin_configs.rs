//! DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44): topic
//! configs are described with their source and synonyms and can be changed; broker
//! configs are described but static (set in `server.properties`), so altering them is
//! refused with INVALID_REQUEST and a message saying so.

use crate::broker::Broker;
use crate::config::topic::{self, Kind, Source, KEYS};
use std::collections::BTreeMap;
use strata_protocol::messages::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};
use strata_protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use strata_protocol::messages::incremental_alter_configs::{
    self as incremental, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use strata_protocol::ErrorCode;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Broker keys described for a BROKER resource, with their defaults.
const BROKER_KEYS: &[(&str, &str)] = &[
    ("node.id", "0"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", ""),
    ("log.dirs", "./data"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("message.max.bytes", "1048588"),
    ("socket.request.max.bytes", "104857600"),
    ("log.retention.check.interval.ms", "300000"),
    ("queued.max.requests", "500"),
];

/// Handles DescribeConfigs.
pub fn describe(broker: &Broker, version: i16, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|res| {
            let mut result = DescribeConfigsResult {
                resource_type: res.resource_type,
                resource_name: res.resource_name.clone(),
                ..Default::default()
            };
            let wanted = |name: &str| {
                res.configuration_keys.as_ref().is_none_or(|keys| keys.iter().any(|k| k == name))
            };
            match res.resource_type {
                TOPIC => {
                    let Some(meta) = broker.topics.get(&res.resource_name) else {
                        result.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        result.error_message = Some(format!("topic {} does not exist", res.resource_name));
                        return result;
                    };
                    for k in KEYS.iter().filter(|k| wanted(k.name)) {
                        let (value, source) = broker.config.topic_defaults.resolve(&meta.configs, k.name);
                        let mut synonyms = Vec::new();
                        if request.include_synonyms {
                            if let Some(v) = meta.configs.get(k.name) {
                                synonyms.push(synonym(k.name, v, Source::Topic as i8));
                            }
                            if let Some(v) = broker.config.topic_defaults.get(k.name) {
                                synonyms.push(synonym(k.broker_key, &v, Source::StaticBroker as i8));
                            }
                            synonyms.push(synonym(k.broker_key, k.default, Source::Default as i8));
                        }
                        result.configs.push(DescribeConfigsResourceResult {
                            name: k.name.to_string(),
                            value: Some(value),
                            read_only: false,
                            is_default: source == Source::Default,
                            config_source: source as i8,
                            is_sensitive: false,
                            synonyms,
                            config_type: if version >= 3 { k.kind.type_code() } else { 0 },
                            documentation: None,
                        });
                    }
                }
                BROKER => {
                    let me = broker.config.node_id.to_string();
                    if !res.resource_name.is_empty() && res.resource_name != me {
                        result.error_code = ErrorCode::InvalidRequest.code();
                        result.error_message =
                            Some(format!("this is broker {me}, not {}", res.resource_name));
                        return result;
                    }
                    let mut keys: Vec<(&str, String, Kind)> =
                        BROKER_KEYS.iter().map(|(k, d)| (*k, d.to_string(), Kind::Enum(&[]))).collect();
                    keys.extend(KEYS.iter().map(|k| (k.broker_key, k.default.to_string(), k.kind)));
                    keys.sort_by(|a, b| a.0.cmp(b.0));
                    keys.dedup_by(|a, b| a.0 == b.0);
                    for (name, default, kind) in keys.into_iter().filter(|(k, _, _)| wanted(k)) {
                        let (value, source) = match broker.config.raw.get(name) {
                            Some(v) => (v.clone(), Source::StaticBroker),
                            None => (default, Source::Default),
                        };
                        let synonyms = if request.include_synonyms {
                            vec![synonym(name, &value, source as i8)]
                        } else {
                            Vec::new()
                        };
                        result.configs.push(DescribeConfigsResourceResult {
                            name: name.to_string(),
                            value: Some(value),
                            read_only: true,
                            is_default: source == Source::Default,
                            config_source: source as i8,
                            is_sensitive: false,
                            synonyms,
                            config_type: if version >= 3 { kind.type_code() } else { 0 },
                            documentation: None,
                        });
                    }
                }
                other => {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message = Some(format!("resource type {other} is not supported"));
                }
            }
            result
        })
        .collect();
    DescribeConfigsResponse { results, ..Default::default() }
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym { name: name.to_string(), value: Some(value.to_string()), source }
}

/// Applies `edit` to a topic's overrides, validates the result and stores it.
fn alter_topic(
    broker: &Broker,
    name: &str,
    validate_only: bool,
    edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), (ErrorCode, String)>,
) -> Result<(), (ErrorCode, String)> {
    let Some(meta) = broker.topics.get(name) else {
        return Err((ErrorCode::UnknownTopicOrPartition, format!("topic {name} does not exist")));
    };
    let mut configs = meta.configs.clone();
    edit(&mut configs)?;
    for (k, v) in &configs {
        topic::validate(k, v)
            .map_err(|reason| (ErrorCode::InvalidConfig, format!("invalid config {k}={v}: {reason}")))?;
    }
    if validate_only {
        return Ok(());
    }
    let stored = configs.clone();
    broker
        .topics
        .update(name, move |old| match old {
            Some(old) => {
                let mut m = old.clone();
                m.configs = stored;
                (Some(m), true)
            }
            None => (None, false),
        })
        .map_err(|e| (ErrorCode::UnknownServerError, e.to_string()))?
        .then_some(())
        .ok_or((ErrorCode::UnknownTopicOrPartition, format!("topic {name} was deleted")))?;
    broker.replicas.update_config(name, &broker.config.topic_defaults.log_config(&configs));
    Ok(())
}

fn broker_alter_refused(broker: &Broker, name: &str) -> (ErrorCode, String) {
    let me = broker.config.node_id.to_string();
    if !name.is_empty() && name != me {
        return (ErrorCode::InvalidRequest, format!("this is broker {me}, not {name}"));
    }
    (
        ErrorCode::InvalidRequest,
        "dynamic broker configuration is not supported; set it in server.properties and restart".into(),
    )
}

/// Handles AlterConfigs: the given set replaces every override of the topic.
pub fn alter(broker: &Broker, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|res| {
            let outcome = match res.resource_type {
                TOPIC => alter_topic(broker, &res.resource_name, request.validate_only, |configs| {
                    configs.clear();
                    for c in &res.configs {
                        if let Some(v) = &c.value {
                            configs.insert(c.name.clone(), v.clone());
                        }
                    }
                    Ok(())
                }),
                BROKER => Err(broker_alter_refused(broker, &res.resource_name)),
                other => Err((ErrorCode::InvalidRequest, format!("resource type {other} is not supported"))),
            };
            let (error_code, error_message) = split(outcome);
            AlterConfigsResourceResponse {
                error_code,
                error_message,
                resource_type: res.resource_type,
                resource_name: res.resource_name,
            }
        })
        .collect();
    AlterConfigsResponse { responses, ..Default::default() }
}

fn split(outcome: Result<(), (ErrorCode, String)>) -> (i16, Option<String>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(message)),
    }
}

/// Handles IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT per key.
pub fn incremental_alter(
    broker: &Broker,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|res| {
            let outcome = match res.resource_type {
                TOPIC => alter_topic(broker, &res.resource_name, request.validate_only, |configs| {
                    apply_ops(configs, &res.configs)
                }),
                BROKER => Err(broker_alter_refused(broker, &res.resource_name)),
                other => Err((ErrorCode::InvalidRequest, format!("resource type {other} is not supported"))),
            };
            let (error_code, error_message) = split(outcome);
            incremental::AlterConfigsResourceResponse {
                error_code,
                error_message,
                resource_type: res.resource_type,
                resource_name: res.resource_name,
            }
        })
        .collect();
    IncrementalAlterConfigsResponse { responses, ..Default::default() }
}

fn apply_ops(
    configs: &mut BTreeMap<String, String>,
    ops: &[incremental::AlterableConfig],
) -> Result<(), (ErrorCode, String)> {
    for (i, op) in ops.iter().enumerate() {
        if ops[..i].iter().any(|o| o.name == op.name) {
            return Err((ErrorCode::InvalidRequest, format!("config {} appears more than once", op.name)));
        }
        let key = topic::key(&op.name)
            .ok_or_else(|| (ErrorCode::InvalidConfig, format!("unknown topic config {}", op.name)))?;
        let value = op.value.clone().unwrap_or_default();
        match op.config_operation {
            0 => {
                configs.insert(op.name.clone(), value);
            }
            1 => {
                configs.remove(&op.name);
            }
            2 | 3 => {
                if !matches!(key.kind, Kind::List(_)) {
                    return Err((
                        ErrorCode::InvalidConfig,
                        format!("{} is not a list; APPEND/SUBTRACT do not apply", op.name),
                    ));
                }
                let current = configs.get(&op.name).cloned().unwrap_or_else(|| key.default.to_string());
                let mut items: Vec<String> =
                    current.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                for v in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if op.config_operation == 2 {
                        if !items.iter().any(|i| i == v) {
                            items.push(v.to_string());
                        }
                    } else {
                        items.retain(|i| i != v);
                    }
                }
                configs.insert(op.name.clone(), items.join(","));
            }
            other => return Err((ErrorCode::InvalidRequest, format!("unknown config operation {other}"))),
        }
    }
    Ok(())
}
