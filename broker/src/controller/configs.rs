//! Config changes on the active controller: AlterConfigs (the given set replaces every
//! override) and IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT per key), for
//! TOPIC resources and for BROKER resources (dynamic broker configs: a node id, or `""`
//! for the cluster-wide default). The dynamic broker keys are the broker-level defaults of
//! topic configs (`log.retention.ms`, `compression.type`, ...), as in Kafka's
//! `DynamicLogConfig`; any other broker key is static (server.properties).

use super::pending::Pending;
use super::ControllerState;
use crate::config::topic::{self, Key, Kind};
use crate::metadata::MetadataImage;
use crate::metadata::MetadataRecord;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_protocol::messages::alter_configs::AlterConfigsResource;
use strata_protocol::messages::incremental_alter_configs as incremental;
use strata_protocol::ErrorCode;

/// The outcome of one resource: NONE, or an error and its message.
pub type ResourceOutcome = Result<(), (ErrorCode, String)>;

impl ControllerState {
    /// AlterConfigs for topic resources: records and one outcome per resource.
    pub fn alter_configs(
        &self,
        image: &Arc<MetadataImage>,
        resources: &[AlterConfigsResource],
        validate_only: bool,
    ) -> (Vec<crate::metadata::MetadataRecord>, Vec<ResourceOutcome>) {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(resources.len());
        for res in resources {
            let replace = |configs: &mut BTreeMap<String, String>| {
                configs.clear();
                for c in &res.configs {
                    if let Some(v) = &c.value {
                        configs.insert(c.name.clone(), v.clone());
                    }
                }
                Ok(())
            };
            let outcome = if res.resource_type == BROKER {
                alter_broker_configs(pending.image(), &res.resource_name, replace)
            } else {
                self.alter_topic_configs(pending.image(), &res.resource_name, replace)
            };
            outcomes.push(outcome.map(|record| {
                if !validate_only {
                    pending.push(record);
                }
            }));
        }
        (pending.into_records(), outcomes)
    }

    /// IncrementalAlterConfigs for topic resources: records and one outcome per resource.
    pub fn incremental_alter_configs(
        &self,
        image: &Arc<MetadataImage>,
        resources: &[incremental::AlterConfigsResource],
        validate_only: bool,
    ) -> (Vec<crate::metadata::MetadataRecord>, Vec<ResourceOutcome>) {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(resources.len());
        for res in resources {
            let outcome = if res.resource_type == BROKER {
                alter_broker_configs(pending.image(), &res.resource_name, |configs| {
                    apply_ops(configs, &res.configs, dynamic_broker_key)
                })
            } else {
                self.alter_topic_configs(pending.image(), &res.resource_name, |configs| {
                    apply_ops(configs, &res.configs, |name| {
                        topic::key(name)
                            .ok_or_else(|| (ErrorCode::InvalidConfig, format!("unknown topic config {name}")))
                    })
                })
            };
            outcomes.push(outcome.map(|record| {
                if !validate_only {
                    pending.push(record);
                }
            }));
        }
        (pending.into_records(), outcomes)
    }
}

/// The BROKER resource type.
const BROKER: i8 = 4;

/// The topic key whose broker-level default `name` is, if `name` can change at run time.
/// A security key (`ssl.*`, `sasl.*`, `listener.name.<l>.<mechanism>.sasl.jaas.config`,
/// `super.users`, ...) is refused with INVALID_CONFIG and a reason of its own: Kafka would
/// apply it, Strata cannot yet, and it must never be stored and silently ignored.
fn dynamic_broker_key(name: &str) -> Result<&'static Key, (ErrorCode, String)> {
    if crate::config::security::is_security_key(name) {
        return Err((
            ErrorCode::InvalidConfig,
            format!("{name}: security settings (TLS, SASL, ACLs) are not supported yet"),
        ));
    }
    crate::config::dynamic_broker_key(name).ok_or_else(|| {
        (ErrorCode::InvalidRequest, format!("Cannot update these configs dynamically: {name}"))
    })
}

/// A BROKER resource's dynamic configs after `edit`, every key dynamic and every value
/// valid; the resource is a node id or `""` (the cluster default), as Kafka requires.
fn alter_broker_configs(
    image: &MetadataImage,
    name: &str,
    edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), (ErrorCode, String)>,
) -> Result<MetadataRecord, (ErrorCode, String)> {
    if !name.is_empty() && name.parse::<i32>().is_err() {
        return Err((ErrorCode::InvalidRequest, format!("broker name {name} is not a node id or empty")));
    }
    let mut configs = image.broker_configs.get(name).cloned().unwrap_or_default();
    edit(&mut configs)?;
    for (k, v) in &configs {
        let key = dynamic_broker_key(k)?;
        // Kafka's broker refuses a bad dynamic value before forwarding it, as an invalid
        // request (its ConfigAdminManager), not INVALID_CONFIG as for a topic's config.
        topic::validate_key(key, v).map_err(|reason| {
            (
                ErrorCode::InvalidRequest,
                format!(
                    "Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): \
                     Invalid value {v} for configuration {k}: {reason}"
                ),
            )
        })?;
        if let Some(why) = refused_at_run_time(k, v) {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): \
                     Invalid dynamic configuration: {why}"
                ),
            ));
        }
    }
    Ok(MetadataRecord::BrokerConfig { resource_name: name.to_string(), configs })
}

/// What Kafka's listeners refuse when reconfigured although `server.properties` may say it:
/// a `max.connections` or `max.connection.creation.rate` (broker-wide or a listener's) that is
/// not positive, which would shut every new client out of a running broker.
fn refused_at_run_time(key: &str, value: &str) -> Option<String> {
    let bare =
        key.strip_prefix("listener.name.").and_then(|rest| rest.split_once('.')).map_or(key, |(_, k)| k);
    let limited = matches!(bare, "max.connections" | "max.connection.creation.rate");
    let positive = value.trim().parse::<f64>().is_ok_and(|n| n > 0.0);
    (limited && !positive).then(|| format!("Invalid {bare} {}", value.trim()))
}

fn apply_ops(
    configs: &mut BTreeMap<String, String>,
    ops: &[incremental::AlterableConfig],
    lookup: impl Fn(&str) -> Result<&'static Key, (ErrorCode, String)>,
) -> Result<(), (ErrorCode, String)> {
    for (i, op) in ops.iter().enumerate() {
        if ops[..i].iter().any(|o| o.name == op.name) {
            return Err((ErrorCode::InvalidRequest, format!("config {} appears more than once", op.name)));
        }
        let key = lookup(&op.name)?;
        let value = op.value.clone().unwrap_or_default();
        match op.config_operation {
            0 => {
                configs.insert(op.name.clone(), value);
            }
            1 => {
                configs.remove(&op.name);
            }
            2 | 3 => {
                if !matches!(key.kind, Kind::List(_) | Kind::ReplicaList) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::tests::cluster;

    fn op(name: &str, operation: i8, value: Option<&str>) -> incremental::AlterableConfig {
        incremental::AlterableConfig {
            name: name.into(),
            config_operation: operation,
            value: value.map(str::to_string),
        }
    }

    fn broker_resource(
        name: &str,
        ops: Vec<incremental::AlterableConfig>,
    ) -> incremental::AlterConfigsResource {
        incremental::AlterConfigsResource { resource_type: BROKER, resource_name: name.into(), configs: ops }
    }

    #[test]
    fn connection_limits_that_would_shut_clients_out_are_refused_at_run_time() {
        let (_image, state) = cluster(&[1]);
        let image = Arc::new(_image);
        let cases = [
            ("max.connections", "0", Some(ErrorCode::InvalidRequest)),
            ("max.connections", "1", None),
            ("max.connection.creation.rate", "0", Some(ErrorCode::InvalidRequest)),
            ("max.connection.creation.rate", "2", None),
            ("listener.name.plaintext.max.connections", "0", Some(ErrorCode::InvalidRequest)),
            ("listener.name.plaintext.max.connections", "5", None),
        ];
        for (key, value, want) in cases {
            let (_, outcomes) = state.incremental_alter_configs(
                &image,
                &[broker_resource("1", vec![op(key, 0, Some(value))])],
                true,
            );
            let got = outcomes[0].as_ref().err();
            assert_eq!(got.map(|e| e.0), want, "{key}={value}: {got:?}");
            if let Some((_, message)) = got {
                assert!(
                    message.contains(&format!(
                        "Invalid {} {value}",
                        key.trim_start_matches("listener.name.plaintext.")
                    )),
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn dynamic_broker_configs_are_recorded_per_resource_and_checked() {
        let (mut image, state) = cluster(&[1, 2]);
        let image_arc = Arc::new(image.clone());
        let resources = vec![
            broker_resource(
                "",
                vec![op("compression.type", 0, Some("zstd")), op("log.cleanup.policy", 2, Some("compact"))],
            ),
            broker_resource("2", vec![op("log.retention.ms", 0, Some("1000"))]),
            broker_resource("1", vec![op("log.dirs", 0, Some("/x"))]),
            broker_resource("1", vec![op("compression.type", 0, Some("brotli"))]),
            broker_resource("b", vec![op("compression.type", 0, Some("gzip"))]),
        ];
        let (records, outcomes) = state.incremental_alter_configs(&image_arc, &resources, false);
        let codes: Vec<Option<ErrorCode>> = outcomes.iter().map(|o| o.as_ref().err().map(|e| e.0)).collect();
        assert_eq!(
            codes,
            vec![
                None,
                None,
                Some(ErrorCode::InvalidRequest),
                Some(ErrorCode::InvalidRequest),
                Some(ErrorCode::InvalidRequest)
            ]
        );
        assert_eq!(records.len(), 2, "{records:?}");
        image.apply_batch(100, &records);
        let cluster_default = &image.broker_configs[""];
        assert_eq!(cluster_default["compression.type"], "zstd");
        assert_eq!(cluster_default["log.cleanup.policy"], "delete,compact", "APPEND starts from the default");
        assert_eq!(image.broker_configs["2"]["log.retention.ms"], "1000");

        // DELETE of the last key removes the resource; validate_only writes nothing.
        let image_arc = Arc::new(image.clone());
        let (records, _) = state.incremental_alter_configs(
            &image_arc,
            &[broker_resource("2", vec![op("log.retention.ms", 1, None)])],
            true,
        );
        assert!(records.is_empty());
        let (records, _) = state.incremental_alter_configs(
            &image_arc,
            &[broker_resource("2", vec![op("log.retention.ms", 1, None)])],
            false,
        );
        image.apply_batch(101, &records);
        assert!(!image.broker_configs.contains_key("2"));
        let snapshot = MetadataImage::from_snapshot(image.to_snapshot());
        assert_eq!(snapshot.broker_configs, image.broker_configs, "kept in snapshots");
    }

    #[test]
    fn security_keys_are_refused_with_invalid_config_and_never_stored() {
        use strata_protocol::messages::alter_configs::AlterableConfig;
        let (image, state) = cluster(&[1]);
        let image = Arc::new(image);
        for key in ["ssl.keystore.location", "listener.name.client.plain.sasl.jaas.config", "super.users"] {
            for name in ["", "1"] {
                let (records, outcomes) = state.incremental_alter_configs(
                    &image,
                    &[broker_resource(name, vec![op(key, 0, Some("x"))])],
                    false,
                );
                let (code, message) = outcomes[0].clone().unwrap_err();
                assert_eq!(code, ErrorCode::InvalidConfig, "{key}");
                assert!(message.contains(key) && message.contains("not supported yet"), "{message}");
                assert!(records.is_empty(), "{key}: {records:?}");
                // Legacy AlterConfigs too.
                let legacy = AlterConfigsResource {
                    resource_type: BROKER,
                    resource_name: name.into(),
                    configs: vec![AlterableConfig { name: key.into(), value: Some("x".into()) }],
                };
                let (records, outcomes) = state.alter_configs(&image, &[legacy], false);
                assert_eq!(outcomes[0].clone().unwrap_err().0, ErrorCode::InvalidConfig, "{key}");
                assert!(records.is_empty(), "{key}: {records:?}");
            }
        }
    }

    #[test]
    fn dynamic_defaults_rank_between_topic_overrides_and_server_properties() {
        let static_defaults = crate::config::BrokerConfig::default().topic_defaults;
        let cluster: BTreeMap<String, String> = [("compression.type".to_string(), "lz4".to_string())].into();
        let mine: BTreeMap<String, String> = [("compression.type".to_string(), "gzip".to_string())].into();
        let d = static_defaults.with_dynamic(Some(&cluster), None);
        assert_eq!(
            d.resolve(&BTreeMap::new(), "compression.type"),
            ("lz4".into(), topic::Source::DynamicDefaultBroker)
        );
        let d = static_defaults.with_dynamic(Some(&cluster), Some(&mine));
        assert_eq!(
            d.resolve(&BTreeMap::new(), "compression.type"),
            ("gzip".into(), topic::Source::DynamicBroker)
        );
        let overrides: BTreeMap<String, String> =
            [("compression.type".to_string(), "zstd".to_string())].into();
        assert_eq!(d.resolve(&overrides, "compression.type"), ("zstd".into(), topic::Source::Topic));
        assert_eq!(
            d.log_config(&BTreeMap::new()).compression,
            Some(strata_protocol::records::Compression::Gzip)
        );
        let levels: Vec<topic::Source> = d.levels("compression.type").into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            levels,
            vec![topic::Source::DynamicBroker, topic::Source::DynamicDefaultBroker, topic::Source::Default]
        );
    }
}
