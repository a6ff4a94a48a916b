//! Following the metadata log on a broker-only node (`process.roles=broker`): it pulls
//! the committed image from a controller (StrataMetadataFetch, long-polling) and
//! publishes it to the broker's metadata cache, moving to another voter when one does
//! not answer. Controllers answer from their applied (committed) state, so a broker
//! never sees an uncommitted change.

use crate::metadata::{ImageSnapshot, MetadataImage};
use crate::net::PeerClient;
use crate::node::Node;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::strata_metadata_fetch::StrataMetadataFetchRequest;
use strata_protocol::{RequestBody, ResponseBody};

/// How long a controller may hold a fetch waiting for news.
const MAX_WAIT_MS: i32 = 2000;

/// Pulls metadata until the server stops the task.
pub async fn run(node: Arc<Node>) {
    let voters = node.config.cluster.voters.clone();
    let node_id = node.config.node_id;
    let clients: Vec<(i32, PeerClient)> = voters
        .iter()
        .map(|v| {
            (v.id, PeerClient::new(format!("{}:{}", v.host, v.port), format!("strata-metadata-{node_id}")))
        })
        .collect();
    let mut at = 0usize;
    loop {
        let from = node.metadata.current().applied_index as i64;
        let Some((voter, client)) = clients.get(at % clients.len().max(1)) else { return };
        let request = StrataMetadataFetchRequest {
            node_id,
            from_index: if from == 0 { -1 } else { from },
            max_wait_ms: MAX_WAIT_MS,
        };
        let timeout = Duration::from_millis(MAX_WAIT_MS as u64 + 3000);
        match client.call(RequestBody::StrataMetadataFetch(request), 0, timeout).await {
            Ok(ResponseBody::StrataMetadataFetch(r)) if r.error_code == 0 => {
                if r.leader_id >= 0 {
                    node.controller_channel().set_hint(r.leader_id);
                }
                if let Some(snapshot) = r.snapshot {
                    match serde_json::from_slice::<ImageSnapshot>(&snapshot) {
                        Ok(s) if s.applied_index as i64 > from => {
                            node.metadata.publish(Arc::new(MetadataImage::from_snapshot(s)));
                        }
                        Ok(_) => {}
                        Err(e) => tracing::error!(voter, error = %e, "undecodable metadata snapshot"),
                    }
                }
            }
            other => {
                tracing::debug!(voter, answer = ?other.as_ref().map(|r| r.api_key()), "metadata fetch failed; trying the next voter");
                at += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
