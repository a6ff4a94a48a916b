//! Topic config changes on the active controller: AlterConfigs (the given set replaces
//! every override) and IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT per key),
//! for TOPIC resources. The forwarding broker answers BROKER resources itself.

use super::pending::Pending;
use super::ControllerState;
use crate::config::topic::{self, Kind};
use crate::metadata::MetadataImage;
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
            let outcome = self.alter_topic_configs(pending.image(), &res.resource_name, |configs| {
                configs.clear();
                for c in &res.configs {
                    if let Some(v) = &c.value {
                        configs.insert(c.name.clone(), v.clone());
                    }
                }
                Ok(())
            });
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
            let outcome = self.alter_topic_configs(pending.image(), &res.resource_name, |configs| {
                apply_ops(configs, &res.configs)
            });
            outcomes.push(outcome.map(|record| {
                if !validate_only {
                    pending.push(record);
                }
            }));
        }
        (pending.into_records(), outcomes)
    }
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
