//! The broker's lifecycle with the controller (Kafka's `BrokerLifecycleManager`):
//! register (BrokerRegistration, retried until the controller accepts it), then
//! heartbeat every `broker.heartbeat.interval.ms` with the metadata index applied. The
//! broker asks to be unfenced once it has caught up with the metadata log and applied
//! it to its partitions; on SIGTERM it asks for a controlled shutdown and waits until
//! the controller has moved its leaderships away.

use crate::node::Node;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::broker_heartbeat::BrokerHeartbeatRequest;
use strata_protocol::messages::broker_registration::{BrokerRegistrationRequest, Listener};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};
use tokio::sync::{watch, Notify};

/// Shared flags between the lifecycle task and the rest of the broker.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// The broker's partitions reflect the metadata up to its registration: it may be
    /// unfenced.
    ready: AtomicBool,
    /// A controlled shutdown was asked for.
    shutting_down: AtomicBool,
    /// Wakes the heartbeat loop early.
    wake: Notify,
    /// Becomes true when the controller lets the broker go (or the wait gave up).
    may_exit: watch::Sender<bool>,
    /// Fenced as the controller last said.
    fenced: AtomicBool,
    /// Becomes true the first time the broker applies metadata that unfences it: client
    /// listeners start accepting then (connections wait in the backlog before), so a
    /// restarted broker answers its first requests as the leader it is again.
    unfenced_once: watch::Sender<bool>,
}

impl Lifecycle {
    /// Marks the broker ready to be unfenced.
    pub fn set_ready(&self) {
        if !self.ready.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// True once ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The broker has applied a metadata image in which its own registration is unfenced
    /// (the unfencing and the leaderships it revives come in one batch, so the partitions it
    /// leads are in place): client listeners may accept.
    pub fn applied_unfenced(&self) {
        self.unfenced_once.send_if_modified(|u| !std::mem::replace(u, true));
    }

    /// Waits until the broker has applied its own unfencing once.
    pub async fn wait_unfenced_once(&self) {
        let mut rx = self.unfenced_once.subscribe();
        let _ = rx.wait_for(|u| *u).await;
    }

    /// Asks the controller for a controlled shutdown and waits until it lets the broker
    /// go, at most `timeout`.
    pub async fn controlled_shutdown(&self, timeout: Duration) {
        let mut rx = self.may_exit.subscribe();
        self.shutting_down.store(true, Ordering::Release);
        self.wake.notify_one();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|go| *go)).await;
    }
}

/// How many shutdown heartbeats in a row may go unanswered before a broker that leads
/// nothing another replica could take over stops waiting for the controller.
const UNANSWERED_BEFORE_GIVING_UP: u32 = 3;

/// Registers and heartbeats until the server stops the task.
pub async fn run(node: Arc<Node>, lifecycle: Arc<Lifecycle>) {
    lifecycle.fenced.store(true, Ordering::Release);
    loop {
        let epoch = register(&node).await;
        node.set_broker_epoch(epoch);
        heartbeat_until_stale(&node, &lifecycle).await;
    }
}

/// Retries BrokerRegistration until it is accepted; returns the broker epoch.
async fn register(b: &Node) -> i64 {
    let mut pause = Duration::from_millis(50);
    loop {
        let request = BrokerRegistrationRequest {
            broker_id: b.config.node_id,
            cluster_id: b.local_cluster_id().unwrap_or_default(),
            incarnation_id: b.incarnation_id,
            listeners: b
                .advertised_endpoints()
                .into_iter()
                .map(|e| Listener { name: e.listener, host: e.host, port: e.port, security_protocol: 0 })
                .collect(),
            rack: b.config.rack.clone(),
            ..Default::default()
        };
        let timeout = Duration::from_millis(b.config.cluster.quorum_request_timeout_ms.max(1000));
        match b.controller_channel().call(RequestBody::BrokerRegistration(request), 2, timeout).await {
            Ok(ResponseBody::BrokerRegistration(r)) if r.error_code == 0 => {
                tracing::info!(broker_epoch = r.broker_epoch, "registered with the controller");
                return r.broker_epoch;
            }
            Ok(ResponseBody::BrokerRegistration(r)) => {
                let code = ErrorCode::from_code(r.error_code).unwrap_or(ErrorCode::UnknownServerError);
                tracing::info!(error = code.name(), "registration refused; retrying");
            }
            Ok(other) => tracing::error!(api = ?other.api_key(), "unexpected answer to BrokerRegistration"),
            Err(e) => tracing::debug!(error = %e, "registration not answered; retrying"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(1000));
    }
}

/// Heartbeats until the controller says the registration is stale (then returns: register
/// again).
async fn heartbeat_until_stale(b: &Node, lifecycle: &Lifecycle) {
    // Heartbeats in a row that asked to shut down and got no answer.
    let mut unanswered_shutdown = 0;
    loop {
        let interval = Duration::from_millis(b.config.cluster.broker_heartbeat_interval_ms);
        let shutting_down = lifecycle.shutting_down.load(Ordering::Acquire);
        let request = BrokerHeartbeatRequest {
            broker_id: b.config.node_id,
            broker_epoch: b.broker_epoch(),
            current_metadata_offset: b.metadata.current().applied_index as i64,
            want_fence: !lifecycle.is_ready(),
            want_shut_down: shutting_down,
            ..Default::default()
        };
        let timeout = interval.max(Duration::from_millis(1000));
        let answer = b.controller_channel().call(RequestBody::BrokerHeartbeat(request), 1, timeout).await;
        unanswered_shutdown = if shutting_down && answer.is_err() { unanswered_shutdown + 1 } else { 0 };
        if unanswered_shutdown >= UNANSWERED_BEFORE_GIVING_UP
            && !b.metadata.current().leads_movable(b.config.node_id)
        {
            // The quorum is gone (the whole cluster is stopping, or this broker is cut off
            // from it): no leadership can move without it, and none that could is led here.
            tracing::info!("the controller does not answer and no other replica could lead in this broker's place: shutting down without it");
            lifecycle.may_exit.send_replace(true);
        }
        match answer {
            Ok(ResponseBody::BrokerHeartbeat(r)) => match ErrorCode::from_code(r.error_code) {
                Some(ErrorCode::None) => {
                    let was = lifecycle.fenced.swap(r.is_fenced, Ordering::AcqRel);
                    if was != r.is_fenced {
                        tracing::info!(fenced = r.is_fenced, "controller changed this broker's fencing");
                    }
                    if r.should_shut_down {
                        lifecycle.may_exit.send_replace(true);
                    }
                }
                Some(ErrorCode::StaleBrokerEpoch) => {
                    tracing::warn!("the controller no longer knows this registration; registering again");
                    return;
                }
                other => tracing::debug!(error = ?other, "heartbeat refused"),
            },
            Ok(other) => tracing::error!(api = ?other.api_key(), "unexpected answer to BrokerHeartbeat"),
            Err(e) => tracing::debug!(error = %e, "heartbeat not answered"),
        }
        let pause = if shutting_down { interval.min(Duration::from_millis(200)) } else { interval };
        let _ = tokio::time::timeout(pause, lifecycle.wake.notified()).await;
    }
}
