//! The network shell: binds the listeners, accepts connections and runs one task per
//! connection. Everything Kafka-specific happens in `connection` and `handlers`.

use crate::broker::Broker;
use crate::connection;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running server: its bound addresses and a way to stop it.
#[derive(Debug)]
pub struct RunningServer {
    /// The address each listener is bound to (port 0 resolved).
    pub local_addrs: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    cleaner: Option<crate::log_cleaner::CleanerHandle>,
    broker: Arc<Broker>,
}

impl RunningServer {
    /// Stops accepting, lets background tasks end and closes every log cleanly
    /// (writing the clean-shutdown marker so the next start skips recovery).
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(cleaner) = self.cleaner {
            let _ = tokio::task::spawn_blocking(move || cleaner.stop()).await;
        }
        self.broker.close();
    }

    /// The shared broker state.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }
}

/// Binds every listener of `broker`'s configuration and starts serving.
pub async fn start(broker: Arc<Broker>) -> std::io::Result<RunningServer> {
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut local_addrs = Vec::new();
    let mut tasks = Vec::new();
    for listener in &broker.config.listeners {
        let addr = listener
            .bind_addr()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let socket = TcpListener::bind(addr).await?;
        let local = socket.local_addr()?;
        tracing::info!(listener = %listener.name, address = %local, "listening");
        local_addrs.push(local);
        broker.set_bound_port(&listener.name, local.port());
        tasks.push(tokio::spawn(accept_loop(broker.clone(), socket, shutdown_rx.clone())));
    }
    tasks.push(tokio::spawn(crate::background::run(broker.clone(), shutdown_rx.clone())));
    // Start the group coordinator now so an existing __consumer_offsets is loaded
    // before clients ask for their offsets.
    broker.groups();
    broker.transactions();
    let cleaner = crate::log_cleaner::start(&broker);
    Ok(RunningServer { local_addrs, shutdown, tasks, cleaner, broker })
}

async fn accept_loop(broker: Arc<Broker>, socket: TcpListener, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let broker = broker.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        connection::serve(broker, stream, peer, shutdown).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}
