//! `strata cluster info`: cluster id, controller, brokers.

use crate::args::{ClientArgs, ClusterAction};
use crate::output::{emit, table};
use anyhow::Result;
use serde_json::json;
use strata_client::Client;

/// Runs one cluster action.
pub async fn run(client: Client, args: &ClientArgs, action: ClusterAction) -> Result<()> {
    match action {
        ClusterAction::Info => {
            let c = client.admin().describe_cluster().await?;
            let doc = json!({
                "cluster_id": c.cluster_id,
                "controller_id": c.controller_id,
                "brokers": c.brokers.iter().map(|b| json!({
                    "id": b.id, "host": b.host, "port": b.port, "rack": b.rack,
                })).collect::<Vec<_>>(),
            });
            emit(args.format, doc, || {
                println!("Cluster ID: {}", c.cluster_id.as_deref().unwrap_or("-"));
                println!("Controller: {}", c.controller_id);
                let rows: Vec<Vec<String>> = c
                    .brokers
                    .iter()
                    .map(|b| {
                        let marker = if b.id == c.controller_id { "*" } else { "" };
                        vec![
                            format!("{}{marker}", b.id),
                            b.host.clone(),
                            b.port.to_string(),
                            b.rack.clone().unwrap_or_else(|| "-".into()),
                        ]
                    })
                    .collect();
                table(&["ID", "HOST", "PORT", "RACK"], &rows);
            });
            Ok(())
        }
    }
}
