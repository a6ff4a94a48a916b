//! The broker's channel to the active controller (Kafka's
//! `NodeToControllerChannelManager`): controller requests go to the voter believed to
//! be active (this node's own controller in-process when it is), and an answer of
//! NOT_CONTROLLER or a failed connection moves on to the next voter until the deadline.

use super::service::{answers_not_controller, ControllerService};
use crate::config::cluster::Voter;
use crate::net::{NetError, PeerClient};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use strata_protocol::{RequestBody, ResponseBody};

/// Why a controller request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// No voter answered as the active controller before the deadline.
    #[error("no active controller answered within {timeout_ms} ms (last error: {last})")]
    NoController {
        /// The deadline.
        timeout_ms: u64,
        /// The last failure seen.
        last: String,
    },
}

/// Sends controller requests to the active controller.
pub struct ControllerChannel {
    node_id: i32,
    voters: Vec<Voter>,
    local: OnceLock<ControllerService>,
    clients: Mutex<HashMap<i32, Arc<PeerClient>>>,
    /// The voter tried first: the last known active controller.
    hint: AtomicI32,
}

impl std::fmt::Debug for ControllerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerChannel").field("hint", &self.hint.load(Ordering::Relaxed)).finish()
    }
}

impl ControllerChannel {
    /// A channel from `node_id` to `voters`.
    pub fn new(node_id: i32, voters: Vec<Voter>) -> ControllerChannel {
        let first = voters.first().map_or(-1, |v| v.id);
        ControllerChannel {
            node_id,
            voters,
            local: OnceLock::new(),
            clients: Mutex::new(HashMap::new()),
            hint: AtomicI32::new(first),
        }
    }

    /// This node's own controller (it is a voter): requests to it skip the network.
    pub fn set_local(&self, service: ControllerService) {
        let _ = self.local.set(service);
    }

    /// This node's controller, if it is a voter.
    pub fn local(&self) -> Option<&ControllerService> {
        self.local.get()
    }

    /// Remembers `leader` as the active controller (from a metadata fetch answer).
    pub fn set_hint(&self, leader: i32) {
        if self.voters.iter().any(|v| v.id == leader) {
            self.hint.store(leader, Ordering::Relaxed);
        }
    }

    fn client(&self, voter: &Voter) -> Arc<PeerClient> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients
            .entry(voter.id)
            .or_insert_with(|| {
                Arc::new(PeerClient::new(
                    format!("{}:{}", voter.host, voter.port),
                    format!("strata-broker-{}", self.node_id),
                ))
            })
            .clone()
    }

    fn next_voter(&self, after: i32) -> i32 {
        let i =
            self.voters.iter().position(|v| v.id == after).map_or(0, |i| (i + 1) % self.voters.len().max(1));
        self.voters.get(i).map_or(-1, |v| v.id)
    }

    /// Sends `body` at `version` to the active controller and returns its answer.
    pub async fn call(
        &self,
        body: RequestBody,
        version: i16,
        timeout: Duration,
    ) -> Result<ResponseBody, ChannelError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last;
        let mut pause = Duration::from_millis(20);
        loop {
            if let Some(local) = self.local.get() {
                if let Some(leader) = local.leader() {
                    self.hint.store(leader, Ordering::Relaxed);
                }
            }
            let target = self.hint.load(Ordering::Relaxed);
            let answer: Result<ResponseBody, NetError> = match (self.local.get(), target == self.node_id) {
                (Some(local), true) => {
                    match tokio::time::timeout_at(deadline, local.call(body.clone(), version)).await {
                        Ok(response) => Ok(response),
                        Err(_) => Err(NetError::Timeout {
                            addr: "the local controller".into(),
                            after_ms: timeout.as_millis() as u64,
                        }),
                    }
                }
                _ => match self.voters.iter().find(|v| v.id == target) {
                    Some(voter) => {
                        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                        self.client(voter)
                            .call(body.clone(), version, left.max(Duration::from_millis(1)))
                            .await
                    }
                    None => Err(NetError::Connect {
                        addr: format!("voter {target}"),
                        reason: "not a voter".into(),
                    }),
                },
            };
            match answer {
                Ok(response) if !answers_not_controller(&response) => return Ok(response),
                Ok(_) => last = format!("voter {target} is not the active controller"),
                Err(e) => last = e.to_string(),
            }
            // Follow the local view of the leader if there is one, else try the next voter.
            let local_leader = self.local.get().and_then(|l| l.leader()).filter(|&l| l != target);
            self.hint.store(local_leader.unwrap_or_else(|| self.next_voter(target)), Ordering::Relaxed);
            if tokio::time::Instant::now() + pause >= deadline {
                return Err(ChannelError::NoController { timeout_ms: timeout.as_millis() as u64, last });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}
