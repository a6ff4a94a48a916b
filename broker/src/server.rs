//! The network shell and start-up order: binds the listeners (client listeners and, on
//! a controller, the controller listener), starts the controller quorum or the metadata
//! follower, then the broker's own tasks (registration and heartbeats, applying
//! metadata, replica fetchers, ISR checks, coordinators, maintenance). Everything
//! Kafka-specific happens in `connection` and `handlers`.

use crate::broker::Broker;
use crate::connection;
use crate::controller::raft::MetadataQuorum;
use crate::handlers::context::ListenerKind;
use crate::lifecycle::Lifecycle;
use crate::node::{Node, StartError};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running server: its bound addresses and a way to stop it.
#[derive(Debug)]
pub struct RunningServer {
    /// The address each listener is bound to (port 0 resolved), in `listeners` order.
    pub local_addrs: Vec<SocketAddr>,
    /// Where `GET /metrics` is served, if it is (`metrics.listener`).
    pub metrics_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    cleaner: Option<crate::log_cleaner::CleanerHandle>,
    lifecycle: Arc<Lifecycle>,
    quorum: Option<Arc<MetadataQuorum>>,
    broker: Arc<Broker>,
}

impl RunningServer {
    /// Shuts down cleanly: a controlled shutdown first (the controller moves this
    /// broker's leaderships away, so clients move on instead of timing out), then stops
    /// accepting, ends background tasks and closes every log, writing the
    /// clean-shutdown marker so the next start skips recovery.
    pub async fn shutdown(self) {
        let cluster = &self.broker.config.cluster;
        if cluster.broker && cluster.controlled_shutdown_enable && !cluster.single_node {
            tracing::info!("controlled shutdown: asking the controller to move leaderships away");
            let wait = Duration::from_millis(cluster.broker_session_timeout_ms.max(5000) * 2);
            self.lifecycle.controlled_shutdown(wait).await;
        }
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        if let Some(cleaner) = self.cleaner {
            let _ = tokio::task::spawn_blocking(move || cleaner.stop()).await;
        }
        if let Some(quorum) = self.quorum {
            quorum.shutdown().await;
        }
        let broker = self.broker.clone();
        let _ = tokio::task::spawn_blocking(move || broker.close()).await;
    }

    /// The shared broker state.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The address of the first client listener.
    pub fn client_addr(&self) -> Option<SocketAddr> {
        let cluster = &self.broker.config.cluster;
        self.broker
            .config
            .listeners
            .iter()
            .zip(&self.local_addrs)
            .find(|(l, _)| !cluster.is_controller_listener(&l.name))
            .map(|(_, a)| *a)
    }
}

/// Builds the services on `node`, binds every listener of its configuration and starts
/// serving.
pub async fn start(node: Arc<Node>) -> Result<RunningServer, StartError> {
    let broker = Broker::start(node.clone());
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut local_addrs = Vec::new();
    let mut tasks = Vec::new();
    let lifecycle = Arc::new(Lifecycle::default());
    for listener in &broker.config.listeners {
        let io = |e: std::io::Error| StartError::DataDir {
            path: format!("listener {}", listener.name).into(),
            source: e,
        };
        let addr = listener
            .bind_addr()
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())))?;
        let socket = TcpListener::bind(addr).await.map_err(io)?;
        let local = socket.local_addr().map_err(io)?;
        let kind = if broker.config.cluster.is_controller_listener(&listener.name) {
            ListenerKind::Controller
        } else {
            ListenerKind::Broker
        };
        tracing::info!(listener = %listener.name, address = %local, ?kind, "listening");
        local_addrs.push(local);
        broker.set_bound_port(&listener.name, local.port());
        // Client listeners accept once the broker is unfenced (connections wait in the
        // backlog until then), as Kafka enables request processing after unfencing.
        let gate = (kind == ListenerKind::Broker).then(|| lifecycle.clone());
        tasks.push(tokio::spawn(accept_loop(
            broker.clone(),
            socket,
            kind,
            listener.name.clone(),
            gate,
            shutdown_rx.clone(),
        )));
    }
    let quorum = if broker.config.cluster.controller {
        Some(node.start_controller().await?)
    } else {
        tasks.push(tokio::spawn(crate::controller::follower::run(node.clone())));
        None
    };
    let mut metrics_addr = None;
    if let Some(addr) = broker.config.metrics_listener {
        if let Some(socket) = crate::metrics::http::bind(addr).await {
            metrics_addr = socket.local_addr().ok();
            let serve =
                crate::metrics::http::serve(socket, broker.clone(), quorum.clone(), shutdown_rx.clone());
            tasks.push(tokio::spawn(serve));
        }
    }
    let mut cleaner = None;
    if broker.config.cluster.broker {
        tasks.push(tokio::spawn(crate::lifecycle::run(node.clone(), lifecycle.clone())));
        tasks.push(tokio::spawn(crate::metadata::listener::run(broker.clone(), lifecycle.clone())));
        tasks.push(tokio::spawn(crate::replication::run_isr_checks(broker.clone())));
        tasks.push(tokio::spawn(crate::producer_ids::run_refill(node.clone())));
        tasks.push(tokio::spawn(crate::background::run(broker.clone(), shutdown_rx.clone())));
        cleaner = crate::log_cleaner::start(&node);
    }
    Ok(RunningServer { local_addrs, metrics_addr, shutdown, tasks, cleaner, lifecycle, quorum, broker })
}

async fn accept_loop(
    broker: Arc<Broker>,
    socket: TcpListener,
    kind: ListenerKind,
    listener: String,
    gate: Option<Arc<Lifecycle>>,
    mut shutdown: watch::Receiver<bool>,
) {
    if let Some(lifecycle) = gate {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = lifecycle.wait_unfenced_once() => {}
        }
        tracing::info!(listener = %listener, "unfenced: accepting client connections");
    }
    let exempt = exempt_from_max_connections(&broker, kind, &listener);
    let listener: Arc<str> = Arc::from(listener);
    let limits = broker.connection_limits.clone();
    loop {
        if kind == ListenerKind::Broker {
            // At max.connections (or the listener's own), stop accepting: new
            // connections wait in the backlog.
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = limits.wait_for_room(&listener, !exempt) => {}
            }
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => {
                    if kind == ListenerKind::Broker {
                        // The limit may have been lowered (a dynamic config) while
                        // this listener waited in accept: the connection waits too.
                        // Past max.connection.creation.rate it waits for its turn.
                        tokio::select! {
                            _ = shutdown.changed() => return,
                            _ = limits.wait_to_serve(&listener, !exempt) => {}
                        }
                    }
                    let slot = match kind {
                        ListenerKind::Controller => None,
                        ListenerKind::Broker => match limits.admit(peer.ip(), &listener, !exempt) {
                            Ok(slot) => Some(slot),
                            Err(refused) => {
                                log_refused(peer, refused.limit);
                                drop(stream);
                                continue;
                            }
                        },
                    };
                    let _ = stream.set_nodelay(true);
                    let broker = broker.clone();
                    let shutdown = shutdown.clone();
                    let listener = listener.clone();
                    tokio::spawn(async move {
                        connection::serve(broker, stream, peer, kind, listener, slot, shutdown).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Controller listeners, and the inter-broker listener when clients have a listener of
/// their own, are not counted against `max.connections`, so replication and the quorum
/// keep working when clients use them all up (Kafka protects the inter-broker listener
/// the same way).
fn exempt_from_max_connections(broker: &Broker, kind: ListenerKind, listener: &str) -> bool {
    if kind == ListenerKind::Controller {
        return true;
    }
    let client_listeners = broker
        .config
        .listeners
        .iter()
        .filter(|l| !broker.config.cluster.controller_listener_names.contains(&l.name))
        .count();
    client_listeners > 1 && listener == broker.config.cluster.inter_broker_listener_name
}

/// Logs a connection refused for its address's limit, at most once a second.
fn log_refused(peer: std::net::SocketAddr, limit: usize) {
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now = crate::clock::now_ms();
    let last = LAST.load(std::sync::atomic::Ordering::Relaxed);
    if now - last >= 1000
        && LAST
            .compare_exchange(
                last,
                now,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
    {
        tracing::info!(%peer, limit, "connection refused: the address has max.connections.per.ip connections");
    }
}
