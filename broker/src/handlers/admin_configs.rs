//! DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44): topic
//! configs are described with their source and synonyms and can be changed; broker
//! configs are described but static (set in `server.properties`), so altering them is
//! refused with INVALID_REQUEST and a message saying so.

use crate::broker::Broker;
use crate::config::topic::{Kind, Source, KEYS};
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
    ("queued.max.request.bytes", "268435456"),
    ("max.connections", "2147483647"),
    ("max.connections.per.ip", "2147483647"),
    ("max.connections.per.ip.overrides", ""),
    ("connections.max.idle.ms", "600000"),
    ("socket.request.receive.timeout.ms", "60000"),
    ("max.incremental.fetch.session.cache.slots", "1000"),
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
                    let image = broker.metadata.current();
                    let Some(meta) = image.topic(&res.resource_name).cloned() else {
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

/// Handles AlterConfigs: the given set replaces every override of a topic (forwarded to
/// the active controller); broker resources are refused here.
pub async fn alter(broker: &Broker, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let (topics, others): (Vec<_>, Vec<_>) =
        request.resources.iter().cloned().partition(|r| r.resource_type == TOPIC);
    let mut forwarded = Vec::new();
    if !topics.is_empty() {
        let body = RequestBody::AlterConfigs(AlterConfigsRequest {
            resources: topics,
            validate_only: request.validate_only,
        });
        if let ResponseBody::AlterConfigs(r) = super::forward::plain(broker, body).await {
            forwarded = r.responses;
        }
        await_configs(broker, &forwarded, request.validate_only).await;
    }
    let responses = request
        .resources
        .iter()
        .map(|res| {
            if res.resource_type == TOPIC {
                if let Some(r) = forwarded.iter().find(|r| r.resource_name == res.resource_name) {
                    return r.clone();
                }
            }
            let (code, message) = refusal(broker, res.resource_type, &res.resource_name);
            AlterConfigsResourceResponse {
                error_code: code.code(),
                error_message: Some(message),
                resource_type: res.resource_type,
                resource_name: res.resource_name.clone(),
            }
        })
        .collect();
    let _ = others;
    AlterConfigsResponse { responses, ..Default::default() }
}

/// Why a non-topic resource (or a topic the controller did not answer for) is refused.
fn refusal(broker: &Broker, resource_type: i8, name: &str) -> (ErrorCode, String) {
    match resource_type {
        BROKER => broker_alter_refused(broker, name),
        TOPIC => (ErrorCode::NotController, "no active controller answered".into()),
        other => (ErrorCode::InvalidRequest, format!("resource type {other} is not supported")),
    }
}

/// Waits briefly until this broker's metadata shows the config changes the controller
/// accepted, so a DescribeConfigs right after sees them.
async fn await_configs(broker: &Broker, accepted: &[AlterConfigsResourceResponse], validate_only: bool) {
    if validate_only || accepted.iter().all(|r| r.error_code != 0) {
        return;
    }
    let before = broker.metadata.current().applied_index;
    let _ = broker.metadata.wait_for(std::time::Duration::from_secs(2), |i| i.applied_index > before).await;
}

/// Handles IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT per key of a topic
/// (forwarded to the active controller); broker resources are refused here.
pub async fn incremental_alter(
    broker: &Broker,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let topics: Vec<_> = request.resources.iter().filter(|r| r.resource_type == TOPIC).cloned().collect();
    let mut forwarded = Vec::new();
    if !topics.is_empty() {
        let body = RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: topics,
            validate_only: request.validate_only,
        });
        if let ResponseBody::IncrementalAlterConfigs(r) = super::forward::plain(broker, body).await {
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
        await_configs(broker, &as_plain, request.validate_only).await;
    }
    let responses = request
        .resources
        .iter()
        .map(|res| {
            if res.resource_type == TOPIC {
                if let Some(r) = forwarded.iter().find(|r| r.resource_name == res.resource_name) {
                    return r.clone();
                }
            }
            let (code, message) = refusal(broker, res.resource_type, &res.resource_name);
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
