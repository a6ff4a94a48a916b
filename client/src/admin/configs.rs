//! Configs of topics and brokers: describe, and alter incrementally (KIP-339).

use super::topics::{all_failed, in_order};
use super::{check_code, wrong_api, Admin};
use crate::connection::Connection;
use crate::error::Result;
use std::collections::BTreeMap;
use strata_protocol::messages::describe_configs::{DescribeConfigsRequest, DescribeConfigsResource};
use strata_protocol::messages::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// The kind of thing a config belongs to, with Kafka's wire values.
///
/// ```
/// use strata_client::admin::ResourceType;
/// assert_eq!(ResourceType::Topic as i8, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// A topic (name: the topic).
    Topic = 2,
    /// A broker (name: its node id; "" for the cluster-wide default).
    Broker = 4,
    /// A broker's loggers (name: its node id).
    BrokerLogger = 8,
}

/// A topic or broker whose configs are described or altered.
///
/// ```
/// use strata_client::admin::ConfigResource;
/// let t = ConfigResource::topic("orders");
/// let b = ConfigResource::broker(1);
/// assert_eq!(b.name, "1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigResource {
    /// Kind.
    pub resource_type: ResourceType,
    /// Topic name or broker id.
    pub name: String,
}

impl ConfigResource {
    /// A topic's configs.
    pub fn topic(name: impl Into<String>) -> ConfigResource {
        ConfigResource { resource_type: ResourceType::Topic, name: name.into() }
    }

    /// Broker `id`'s configs.
    pub fn broker(id: i32) -> ConfigResource {
        ConfigResource { resource_type: ResourceType::Broker, name: id.to_string() }
    }

    /// The default of every broker (Kafka's `--entity-default`): a broker resource with
    /// the empty name, which any broker answers and a change of which every broker applies
    /// where it has no value of its own.
    ///
    /// ```
    /// use strata_client::admin::ConfigResource;
    /// assert_eq!(ConfigResource::broker_defaults().name, "");
    /// ```
    pub fn broker_defaults() -> ConfigResource {
        ConfigResource { resource_type: ResourceType::Broker, name: String::new() }
    }

    /// The broker a request about this resource must go to: a broker's own configs
    /// live on it (Kafka sends them there); topic configs any broker answers.
    fn broker_id(&self) -> Option<i32> {
        match self.resource_type {
            ResourceType::Topic => None,
            ResourceType::Broker | ResourceType::BrokerLogger => self.name.parse().ok(),
        }
    }
}

/// Where a config's value comes from (`DescribeConfigs` v1+).
///
/// ```
/// use strata_client::admin::ConfigSource;
/// assert_eq!(ConfigSource::from_i8(1), ConfigSource::DynamicTopic);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Not reported.
    Unknown,
    /// Set on the topic.
    DynamicTopic,
    /// Set dynamically on this broker.
    DynamicBroker,
    /// Set dynamically as the default of every broker.
    DynamicDefaultBroker,
    /// From the broker's properties file.
    StaticBroker,
    /// The built-in default.
    Default,
    /// A broker logger level.
    DynamicBrokerLogger,
}

impl ConfigSource {
    /// From the wire value.
    pub fn from_i8(v: i8) -> ConfigSource {
        match v {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            _ => ConfigSource::Unknown,
        }
    }

    /// Kafka's name of the source (its `ConfigSource` enum), as its tools print it.
    ///
    /// ```
    /// use strata_client::admin::ConfigSource;
    /// assert_eq!(ConfigSource::DynamicBroker.name(), "DYNAMIC_BROKER_CONFIG");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Unknown => "UNKNOWN",
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
        }
    }
}

/// One config of a resource.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// use strata_client::admin::ConfigResource;
/// for (_, entries) in admin.describe_configs(&[ConfigResource::topic("orders")]).await {
///     for e in entries? {
///         println!("{} = {:?} ({:?})", e.name, e.value, e.source);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Key.
    pub name: String,
    /// Value; `None` for a sensitive value or one without a value.
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Read-only (cannot be altered).
    pub read_only: bool,
    /// A password or similar, whose value is never returned.
    pub sensitive: bool,
}

impl ConfigEntry {
    /// True if the value is the built-in default (Kafka's `isDefault`).
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::Default
    }
}

/// How one config changes.
///
/// ```
/// use strata_client::admin::ConfigOpType;
/// assert_eq!(ConfigOpType::Subtract as i8, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigOpType {
    /// Set the value.
    Set = 0,
    /// Remove the value (back to the default).
    Delete = 1,
    /// Add to a list config.
    Append = 2,
    /// Remove from a list config.
    Subtract = 3,
}

/// One change of an incremental alter.
///
/// ```
/// use strata_client::admin::{AlterConfigOp, ConfigOpType};
/// let set = AlterConfigOp::set("retention.ms", "60000");
/// let delete = AlterConfigOp::delete("cleanup.policy");
/// assert_eq!((set.op, delete.value), (ConfigOpType::Set, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigOp {
    /// Key.
    pub name: String,
    /// The change.
    pub op: ConfigOpType,
    /// The value (none for `Delete`).
    pub value: Option<String>,
}

impl AlterConfigOp {
    /// `name` = `value`.
    pub fn set(name: impl Into<String>, value: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp { name: name.into(), op: ConfigOpType::Set, value: Some(value.into()) }
    }

    /// Back to the default.
    pub fn delete(name: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp { name: name.into(), op: ConfigOpType::Delete, value: None }
    }

    /// Adds `value` to the list config `name`.
    pub fn append(name: impl Into<String>, value: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp { name: name.into(), op: ConfigOpType::Append, value: Some(value.into()) }
    }

    /// Removes `value` from the list config `name`.
    pub fn subtract(name: impl Into<String>, value: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp { name: name.into(), op: ConfigOpType::Subtract, value: Some(value.into()) }
    }
}

impl Admin {
    async fn config_connection(&self, broker: Option<i32>) -> Result<Connection> {
        match broker {
            Some(id) => self.client.broker(id).await,
            None => self.client.any_connection().await,
        }
    }

    /// Describes the configs of `resources` (DescribeConfigs): topics to any broker, a
    /// broker's to that broker. One result per resource, in request order;
    /// UNKNOWN_TOPIC_OR_PARTITION at once for a topic that does not exist.
    pub async fn describe_configs(
        &self,
        resources: &[ConfigResource],
    ) -> Vec<(ConfigResource, Result<Vec<ConfigEntry>>)> {
        let keys = resources.to_vec();
        let results = self
            .per_item(keys.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| async move {
                let mut out = Vec::new();
                for (broker, group) in per_broker(pending) {
                    let request = DescribeConfigsRequest {
                        resources: group
                            .iter()
                            .map(|r| DescribeConfigsResource {
                                resource_type: r.resource_type as i8,
                                resource_name: r.name.clone(),
                                configuration_keys: None,
                            })
                            .collect(),
                        include_synonyms: false,
                        include_documentation: false,
                    };
                    let answer = match self.config_connection(broker).await {
                        Ok(conn) => conn.call(RequestBody::DescribeConfigs(request)).await,
                        Err(e) => Err(e),
                    };
                    match answer {
                        Ok(ResponseBody::DescribeConfigs(r)) => {
                            for res in r.results {
                                let Some(key) = group.iter().find(|k| {
                                    k.name == res.resource_name && k.resource_type as i8 == res.resource_type
                                }) else {
                                    continue;
                                };
                                let entries =
                                    check_code(res.error_code, res.error_message.as_deref()).map(|_| {
                                        res.configs
                                            .into_iter()
                                            .map(|c| ConfigEntry {
                                                source: if c.config_source == -1 && c.is_default {
                                                    ConfigSource::Default
                                                } else {
                                                    ConfigSource::from_i8(c.config_source)
                                                },
                                                name: c.name,
                                                value: c.value,
                                                read_only: c.read_only,
                                                sensitive: c.is_sensitive,
                                            })
                                            .collect()
                                    });
                                out.push((key.clone(), entries));
                            }
                        }
                        Ok(_) => out.extend(all_failed(group, wrong_api(ApiKey::DescribeConfigs))),
                        Err(e) => out.extend(all_failed(group, e)),
                    }
                }
                out
            })
            .await;
        in_order(keys, results)
    }

    /// Changes configs one key at a time (IncrementalAlterConfigs, KIP-339): keys not
    /// named keep their values. One result per resource; INVALID_CONFIG for a bad key or
    /// value, and nothing of that resource changes.
    pub async fn incremental_alter_configs(
        &self,
        changes: &[(ConfigResource, Vec<AlterConfigOp>)],
        validate_only: bool,
    ) -> Vec<(ConfigResource, Result<()>)> {
        let ops: BTreeMap<ConfigResource, &Vec<AlterConfigOp>> =
            changes.iter().map(|(r, o)| (r.clone(), o)).collect();
        let ops = &ops;
        let keys: Vec<ConfigResource> = changes.iter().map(|(r, _)| r.clone()).collect();
        let results = self
            .per_item(keys.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| async move {
                let mut out = Vec::new();
                for (broker, group) in per_broker(pending) {
                    let request = IncrementalAlterConfigsRequest {
                        resources: group
                            .iter()
                            .map(|r| AlterConfigsResource {
                                resource_type: r.resource_type as i8,
                                resource_name: r.name.clone(),
                                configs: ops[r]
                                    .iter()
                                    .map(|o| AlterableConfig {
                                        name: o.name.clone(),
                                        config_operation: o.op as i8,
                                        value: o.value.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                        validate_only,
                    };
                    let answer = match self.config_connection(broker).await {
                        Ok(conn) => conn.call(RequestBody::IncrementalAlterConfigs(request)).await,
                        Err(e) => Err(e),
                    };
                    match answer {
                        Ok(ResponseBody::IncrementalAlterConfigs(r)) => {
                            for res in r.responses {
                                if let Some(key) = group.iter().find(|k| {
                                    k.name == res.resource_name && k.resource_type as i8 == res.resource_type
                                }) {
                                    out.push((
                                        key.clone(),
                                        check_code(res.error_code, res.error_message.as_deref()),
                                    ));
                                }
                            }
                        }
                        Ok(_) => out.extend(all_failed(group, wrong_api(ApiKey::IncrementalAlterConfigs))),
                        Err(e) => out.extend(all_failed(group, e)),
                    }
                }
                out
            })
            .await;
        in_order(keys, results)
    }
}

/// Resources grouped by the broker their request must go to (`None`: any broker).
fn per_broker(resources: Vec<ConfigResource>) -> BTreeMap<Option<i32>, Vec<ConfigResource>> {
    let mut groups: BTreeMap<Option<i32>, Vec<ConfigResource>> = BTreeMap::new();
    for r in resources {
        groups.entry(r.broker_id()).or_default().push(r);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_configs_go_to_their_broker_and_topic_configs_anywhere() {
        let groups = per_broker(vec![
            ConfigResource::topic("a"),
            ConfigResource::broker(2),
            ConfigResource::topic("b"),
            ConfigResource { resource_type: ResourceType::Broker, name: String::new() },
        ]);
        assert_eq!(groups[&None].len(), 3, "topics and the cluster default go anywhere");
        assert_eq!(groups[&Some(2)], vec![ConfigResource::broker(2)]);
    }
}
