//! DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44): topic and
//! broker configs are described with their source and synonyms. Changes to TOPIC and
//! BROKER resources go to the active controller, which records them in the metadata log;
//! on a BROKER resource the broker-level topic defaults, the replication throttles and the
//! connection limits (a listener's own too) are dynamic (see `crate::config::dynamic_broker_key`),
//! everything else is static (server.properties).

use crate::config::connections::{listener_key, DYNAMIC_KEYS as CONNECTION_KEYS};
use crate::config::throttle::RATE_KEYS;
use crate::config::topic::{Key, Kind, Source, KEYS, TOPIC_ONLY_KEYS};
use crate::node::Node;
use std::borrow::Cow;
use std::collections::BTreeSet;
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
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Handles DescribeConfigs.
pub fn describe(node: &Node, version: i16, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
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
                    let image = node.metadata.current();
                    let Some(meta) = image.topic(&res.resource_name).cloned() else {
                        result.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        result.error_message = Some(format!("topic {} does not exist", res.resource_name));
                        return result;
                    };
                    let defaults = node.topic_defaults();
                    for k in KEYS.iter().chain(TOPIC_ONLY_KEYS).filter(|k| wanted(k.name)) {
                        let (value, source) = defaults.resolve(&meta.configs, k.name);
                        let mut synonyms = Vec::new();
                        if request.include_synonyms {
                            if let Some(v) = meta.configs.get(k.name) {
                                synonyms.push(synonym(k.name, v, Source::Topic as i8));
                            }
                            for (v, source) in defaults.levels(k.name) {
                                // A key without a broker-level default is its own synonym.
                                let name = if k.broker_key.is_empty() { k.name } else { k.broker_key };
                                synonyms.push(synonym(name, &v, source as i8));
                            }
                        }
                        result.configs.push(described(
                            k.name,
                            Some(value),
                            source,
                            false,
                            synonyms,
                            k.kind,
                            version,
                        ));
                    }
                }
                BROKER => {
                    let me = node.config.node_id.to_string();
                    if res.resource_name.is_empty() {
                        // The cluster-wide dynamic defaults alone, as Kafka describes them.
                        let image = node.metadata.current();
                        for (name, value) in image.broker_configs.get("").into_iter().flatten() {
                            if !wanted(name) {
                                continue;
                            }
                            let kind =
                                crate::config::dynamic_broker_key(name).map_or(Kind::STRING, |k| k.kind);
                            let source = Source::DynamicDefaultBroker;
                            let synonyms = if request.include_synonyms {
                                vec![synonym(name, value, source as i8)]
                            } else {
                                Vec::new()
                            };
                            result.configs.push(described(
                                name,
                                Some(value.clone()),
                                source,
                                false,
                                synonyms,
                                kind,
                                version,
                            ));
                        }
                        return result;
                    }
                    if res.resource_name != me {
                        result.error_code = ErrorCode::InvalidRequest.code();
                        result.error_message =
                            Some(format!("this is broker {me}, not {}", res.resource_name));
                        return result;
                    }
                    let include_synonyms = request.include_synonyms;
                    result.configs = broker_entries(node)
                        .into_iter()
                        .filter(|e| wanted(&e.name))
                        .map(|e| {
                            // No level: a key whose default is null, unset.
                            let (value, source) = e
                                .levels
                                .first()
                                .map_or((None, Source::Default), |(v, s)| (Some(v.clone()), *s));
                            let synonyms = if include_synonyms {
                                e.levels.iter().map(|(v, s)| synonym(&e.name, v, *s as i8)).collect()
                            } else {
                                Vec::new()
                            };
                            described(&e.name, value, source, !e.dynamic, synonyms, e.kind, version)
                        })
                        .collect();
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

/// One key of a BROKER resource as DescribeConfigs shows it.
struct BrokerEntry<'a> {
    name: Cow<'a, str>,
    /// Its values, highest precedence first; the last is the default (if it has one):
    /// empty for a key with a null default that is not set.
    levels: Vec<(String, Source)>,
    kind: Kind,
    /// Whether IncrementalAlterConfigs may change it (the topic defaults).
    dynamic: bool,
}

/// Every key of this broker: the static ones of server.properties, then the broker-level
/// topic defaults with their dynamic values, sorted by name.
fn broker_entries(node: &Node) -> Vec<BrokerEntry<'_>> {
    let defaults = node.topic_defaults();
    // The static keys: every key the configuration parser reads but the dynamic ones,
    // described below with their levels (a listener's own limits only when set).
    let mut entries: Vec<BrokerEntry> = node
        .config
        .known
        .iter()
        .filter(|k| crate::config::dynamic_broker_key(&k.name).is_none())
        .map(|k| {
            let mut levels: Vec<_> = k.default.iter().map(|d| (d.clone(), Source::Default)).collect();
            if let Some(v) = node.config.raw.get(&k.name) {
                levels.insert(0, (v.clone(), Source::StaticBroker));
            }
            BrokerEntry { name: Cow::Borrowed(k.name.as_str()), levels, kind: k.kind, dynamic: false }
        })
        .collect();
    entries.extend(KEYS.iter().map(|k| BrokerEntry {
        name: Cow::Borrowed(k.broker_key),
        levels: defaults.levels(k.name),
        kind: k.kind,
        dynamic: true,
    }));
    let image = node.metadata.current();
    let me = node.config.node_id.to_string();
    // The dynamic keys that are no topic default: this broker's value, the cluster
    // default, server.properties (the connection limits), the built-in default (if the
    // key has one).
    let levels = |name: &str, file: Option<&String>, default: Option<&str>| {
        let mut levels = Vec::new();
        for (resource, source) in [(me.as_str(), Source::DynamicBroker), ("", Source::DynamicDefaultBroker)] {
            if let Some(v) = image.broker_configs.get(resource).and_then(|c| c.get(name)) {
                levels.push((v.clone(), source));
            }
        }
        if let Some(v) = file {
            levels.push((v.clone(), Source::StaticBroker));
        }
        if let Some(d) = default {
            levels.push((d.to_string(), Source::Default));
        }
        levels
    };
    let dynamic = |k: &'static Key, file: Option<&String>| BrokerEntry {
        name: Cow::Borrowed(k.name),
        levels: levels(k.name, file, Some(k.default)),
        kind: k.kind,
        dynamic: true,
    };
    // The throttle rates are dynamic-only keys (Kafka's `DynamicConfig.Broker`, not in its
    // broker config definition): described only when set, with no default level.
    entries.extend(RATE_KEYS.iter().filter_map(|k| {
        let levels = levels(k.name, None, None);
        (!levels.is_empty()).then_some(BrokerEntry {
            name: Cow::Borrowed(k.name),
            levels,
            kind: k.kind,
            dynamic: true,
        })
    }));
    entries.extend(CONNECTION_KEYS.iter().map(|k| dynamic(k, node.config.raw.get(k.name))));
    // Per-listener keys (`listener.name.plaintext.max.connections`) have no default:
    // described when set, as Kafka describes them; a listener's own connection limits are
    // dynamic, like the broker-wide ones, the other per-listener keys static.
    let mut listener_keys: BTreeSet<&str> =
        node.config.raw.keys().map(String::as_str).filter(|k| k.starts_with("listener.name.")).collect();
    for resource in [me.as_str(), ""] {
        let set = image.broker_configs.get(resource).into_iter().flatten();
        listener_keys.extend(set.map(|(k, _)| k.as_str()).filter(|k| listener_key(k).is_some()));
    }
    for name in listener_keys {
        let file = node.config.raw.get(name);
        let entry = match listener_key(name) {
            Some((_, key)) => BrokerEntry {
                name: Cow::Owned(name.to_string()),
                levels: levels(name, file, None),
                kind: key.kind,
                dynamic: true,
            },
            None => BrokerEntry {
                name: Cow::Owned(name.to_string()),
                levels: file.map(|v| vec![(v.clone(), Source::StaticBroker)]).unwrap_or_default(),
                kind: Kind::STRING,
                dynamic: false,
            },
        };
        entries.push(entry);
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.dedup_by(|a, b| a.name == b.name);
    entries
}

/// One described config; `config_type` only from v3, as Kafka answers.
fn described(
    name: &str,
    value: Option<String>,
    source: Source,
    read_only: bool,
    synonyms: Vec<DescribeConfigsSynonym>,
    kind: Kind,
    version: i16,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult {
        name: name.to_string(),
        value,
        read_only,
        is_default: source == Source::Default,
        config_source: source as i8,
        is_sensitive: false,
        synonyms,
        config_type: if version >= 3 { kind.type_code() } else { 0 },
        documentation: None,
    }
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym { name: name.to_string(), value: Some(value.to_string()), source }
}

/// Whether the active controller handles changes to this resource type.
fn forwarded_type(resource_type: i8) -> bool {
    resource_type == TOPIC || resource_type == BROKER
}

/// Handles AlterConfigs: the given set replaces every override of a topic or every
/// dynamic config of a broker resource (forwarded to the active controller).
pub async fn alter(node: &Node, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let topics: Vec<_> =
        request.resources.iter().filter(|r| forwarded_type(r.resource_type)).cloned().collect();
    let mut forwarded = Vec::new();
    if !topics.is_empty() {
        let body = RequestBody::AlterConfigs(AlterConfigsRequest {
            resources: topics,
            validate_only: request.validate_only,
        });
        // Before the forward: the change is applied here at a later index, possibly
        // before the controller's answer arrives.
        let before = node.metadata.current().applied_index;
        if let ResponseBody::AlterConfigs(r) = super::forward::plain(node, body).await {
            forwarded = r.responses;
        }
        await_configs(node, &forwarded, request.validate_only, before).await;
    }
    let responses = request
        .resources
        .iter()
        .map(|res| {
            if forwarded_type(res.resource_type) {
                if let Some(r) = forwarded
                    .iter()
                    .find(|r| r.resource_type == res.resource_type && r.resource_name == res.resource_name)
                {
                    return r.clone();
                }
            }
            let (code, message) = refusal(res.resource_type);
            AlterConfigsResourceResponse {
                error_code: code.code(),
                error_message: Some(message),
                resource_type: res.resource_type,
                resource_name: res.resource_name.clone(),
            }
        })
        .collect();
    AlterConfigsResponse { responses, ..Default::default() }
}

/// Why a resource is refused: a type not supported, or no controller answered for it.
fn refusal(resource_type: i8) -> (ErrorCode, String) {
    if forwarded_type(resource_type) {
        (ErrorCode::NotController, "no active controller answered".into())
    } else {
        (ErrorCode::InvalidRequest, format!("resource type {resource_type} is not supported"))
    }
}

/// Waits briefly until this broker's metadata shows the config changes the controller
/// accepted (applied past `before`, the index when the request was forwarded), so a
/// DescribeConfigs right after sees them. Reading `before` only after the answer made
/// every call whose change was already applied wait out the whole timeout.
async fn await_configs(
    node: &Node,
    accepted: &[AlterConfigsResourceResponse],
    validate_only: bool,
    before: u64,
) {
    if validate_only || accepted.iter().all(|r| r.error_code != 0) {
        return;
    }
    let _ = node.metadata.wait_for(std::time::Duration::from_secs(2), |i| i.applied_index > before).await;
}

/// Handles IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT per key of a topic
/// or a broker resource (forwarded to the active controller).
pub async fn incremental_alter(
    node: &Node,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let topics: Vec<_> =
        request.resources.iter().filter(|r| forwarded_type(r.resource_type)).cloned().collect();
    let mut forwarded = Vec::new();
    if !topics.is_empty() {
        let body = RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: topics,
            validate_only: request.validate_only,
        });
        // Before the forward: the change is applied here at a later index, possibly
        // before the controller's answer arrives.
        let before = node.metadata.current().applied_index;
        if let ResponseBody::IncrementalAlterConfigs(r) = super::forward::plain(node, body).await {
            forwarded = r.responses;
        }
        let as_plain: Vec<AlterConfigsResourceResponse> = forwarded
            .iter()
            .map(|r| AlterConfigsResourceResponse {
                error_code: r.error_code,
                error_message: r.error_message.clone(),
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
            })
            .collect();
        await_configs(node, &as_plain, request.validate_only, before).await;
    }
    let responses = request
        .resources
        .iter()
        .map(|res| {
            if forwarded_type(res.resource_type) {
                if let Some(r) = forwarded
                    .iter()
                    .find(|r| r.resource_type == res.resource_type && r.resource_name == res.resource_name)
                {
                    return r.clone();
                }
            }
            let (code, message) = refusal(res.resource_type);
            incremental::AlterConfigsResourceResponse {
                error_code: code.code(),
                error_message: Some(message),
                resource_type: res.resource_type,
                resource_name: res.resource_name.clone(),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse { responses, ..Default::default() }
}
