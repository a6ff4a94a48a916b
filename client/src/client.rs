//! The core every producer, consumer and admin shares: the cluster view, refreshed from
//! Metadata responses, and the connections to its brokers. It finds partition leaders,
//! the controller and group / transaction coordinators, and sends requests with retries
//! where a request may safely be sent again.

use crate::config::ClientConfig;
use crate::connection::pool::Pool;
use crate::connection::Connection;
use crate::error::{refreshes_coordinator, Error, Result};
use crate::metadata::{BrokerAddress, Cluster, LeaderHint};
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use strata_protocol::messages::find_coordinator::FindCoordinatorRequest;
use strata_protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};

/// The kind of coordinator FindCoordinator looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoordinatorKind {
    /// A consumer group's coordinator (key: the group id).
    Group = 0,
    /// A transactional producer's coordinator (key: the transactional id).
    Transaction = 1,
}

struct Inner {
    config: ClientConfig,
    pool: Pool,
    cluster: ArcSwap<Cluster>,
    coordinators: Mutex<HashMap<(CoordinatorKind, String), BrokerAddress>>,
    next_bootstrap: AtomicUsize,
    closed: AtomicBool,
}

/// A handle on the cluster; cheap to clone, shared by everything built on it.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("bootstrap", &self.inner.config.bootstrap_servers).finish()
    }
}

impl Client {
    /// Connects to the first bootstrap server that answers and learns the brokers.
    pub async fn connect(config: ClientConfig) -> Result<Client> {
        Client::connect_with_in_flight(config, 64).await
    }

    /// Like [`Client::connect`], with at most `max_in_flight` requests outstanding per
    /// broker connection (the producer's `max.in.flight.requests.per.connection`).
    pub async fn connect_with_in_flight(config: ClientConfig, max_in_flight: usize) -> Result<Client> {
        if config.bootstrap_servers.is_empty() {
            return Err(Error::config("bootstrap.servers is empty"));
        }
        let client = Client {
            inner: Arc::new(Inner {
                pool: Pool::new(config.clone(), max_in_flight),
                config,
                cluster: ArcSwap::from_pointee(Cluster::default()),
                coordinators: Mutex::new(HashMap::new()),
                next_bootstrap: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
            }),
        };
        client.refresh_metadata(&[]).await?;
        Ok(client)
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The current cluster view (no request).
    pub fn cluster(&self) -> Arc<Cluster> {
        self.inner.cluster.load_full()
    }

    /// Closes every connection; later calls fail with [`Error::Closed`].
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.pool.close_all();
    }

    /// Moves partitions to the leaders Produce or Fetch answers named (KIP-951) without a
    /// Metadata request, as [`Cluster::with_leaders`] applies them, and returns the
    /// positions in `hints` of those that applied: the rest still need a refresh.
    pub fn update_leaders(&self, hints: &[LeaderHint], endpoints: &[BrokerAddress]) -> Vec<usize> {
        if hints.is_empty() {
            return Vec::new();
        }
        let mut applied = Vec::new();
        self.inner.cluster.rcu(|current| match current.with_leaders(hints, endpoints) {
            Some((next, a)) => {
                applied = a;
                Arc::new(next)
            }
            None => {
                applied.clear();
                current.clone()
            }
        });
        applied
    }

    /// Describes `topics` (none: only the brokers) and merges them into the view.
    pub async fn refresh_metadata(&self, topics: &[String]) -> Result<Arc<Cluster>> {
        self.metadata_request(Some(topics), false).await
    }

    /// Like [`Client::refresh_metadata`], letting the broker create missing topics
    /// (`allow.auto.create.topics`, as a producer's first send does).
    pub async fn refresh_metadata_creating(&self, topics: &[String]) -> Result<Arc<Cluster>> {
        self.metadata_request(Some(topics), true).await
    }

    /// Describes every topic; the view then holds exactly the cluster's topics.
    pub async fn refresh_all_topics(&self) -> Result<Arc<Cluster>> {
        self.metadata_request(None, false).await
    }

    /// The view, refreshing `topic` first if it is unknown, has a partition without a
    /// leader, or was described more than `metadata.max.age.ms` ago.
    pub async fn cluster_with(&self, topic: &str) -> Result<Arc<Cluster>> {
        let cluster = self.cluster();
        let fresh =
            cluster.described_at.get(topic).is_some_and(|t| t.elapsed() < self.inner.config.metadata_max_age);
        let complete = cluster.topic(topic).is_some_and(|t| {
            t.error.is_none() && !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader >= 0)
        });
        if fresh && complete {
            return Ok(cluster);
        }
        self.refresh_metadata(&[topic.to_string()]).await
    }

    async fn metadata_request(&self, topics: Option<&[String]>, auto_create: bool) -> Result<Arc<Cluster>> {
        let request = MetadataRequest {
            topics: topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic { name: Some(t.clone()), ..Default::default() })
                    .collect()
            }),
            allow_auto_topic_creation: auto_create,
            ..Default::default()
        };
        let response = self.call_any(RequestBody::Metadata(request)).await?;
        let ResponseBody::Metadata(r) = response else {
            return Err(Error::protocol("?", "Metadata answered with another API"));
        };
        let next = Arc::new(self.cluster().merged(&r, topics.is_none(), Instant::now()));
        self.inner.cluster.store(next.clone());
        Ok(next)
    }

    /// The connection to broker `id`, as the view knows it.
    pub async fn broker(&self, id: i32) -> Result<Connection> {
        self.check_open()?;
        let addr = match self.cluster().brokers.get(&id) {
            Some(b) => b.addr(),
            None => {
                let cluster = self.refresh_metadata(&[]).await?;
                cluster.brokers.get(&id).map(BrokerAddress::addr).ok_or_else(|| {
                    Error::connection(&format!("broker {id}"), "not in the cluster metadata")
                })?
            }
        };
        self.inner.pool.get(&addr).await
    }

    /// The connection to `addr` (host:port).
    pub async fn connection(&self, addr: &str) -> Result<Connection> {
        self.check_open()?;
        self.inner.pool.get(addr).await
    }

    /// The open connection to broker `id`, if there is one now: never connects or waits
    /// (the producer's sender sends only to brokers it is connected to and connects to
    /// the others in the background, as Kafka's `NetworkClient.ready` does).
    pub fn connected(&self, id: i32) -> Option<Connection> {
        let cluster = self.cluster();
        let broker = cluster.brokers.get(&id)?;
        self.inner.pool.get_if_open(&broker.addr())
    }

    /// Drops the connection to broker `id` after a failure seen on it.
    pub fn reset_broker(&self, id: i32) {
        if let Some(b) = self.cluster().brokers.get(&id) {
            self.inner.pool.reset(&b.addr());
        }
    }

    /// The connection to the leader of `topic`-`partition` and its node id, refreshing
    /// the metadata when the leader is unknown.
    pub async fn leader(&self, topic: &str, partition: i32) -> Result<(i32, Connection)> {
        let mut cluster = self.cluster_with(topic).await?;
        for attempt in 0..3u32 {
            if let Some(b) = cluster.leader(topic, partition) {
                let id = b.id;
                return Ok((id, self.broker(id).await?));
            }
            if let Some(code) = cluster.topic(topic).and_then(|t| t.error) {
                return Err(Error::kafka(code));
            }
            tokio::time::sleep(self.inner.config.backoff(attempt)).await;
            cluster = self.refresh_metadata(&[topic.to_string()]).await?;
        }
        Err(Error::kafka(strata_protocol::ErrorCode::LeaderNotAvailable))
    }

    /// The connection to the controller (CreateTopics, DeleteTopics, ... go there on
    /// brokers before KIP-590 forwarding; any broker works on Strata).
    pub async fn controller(&self) -> Result<Connection> {
        let cluster = self.cluster();
        let id = if cluster.controller_id >= 0 {
            cluster.controller_id
        } else {
            self.refresh_metadata(&[]).await?.controller_id
        };
        if id >= 0 {
            return self.broker(id).await;
        }
        self.any_connection().await
    }

    /// Some live connection: a known broker, else a bootstrap server, in turn.
    pub async fn any_connection(&self) -> Result<Connection> {
        self.check_open()?;
        let mut addrs: Vec<String> = self.cluster().brokers.values().map(BrokerAddress::addr).collect();
        addrs.extend(self.inner.config.bootstrap_servers.iter().cloned());
        let start = self.inner.next_bootstrap.fetch_add(1, Ordering::Relaxed);
        let mut last = None;
        for i in 0..addrs.len() {
            match self.inner.pool.get(&addrs[(start + i) % addrs.len()]).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::config("no brokers to connect to")))
    }

    /// Sends a request any broker can answer (Metadata, DescribeCluster, ListGroups of
    /// one broker, ...), trying others on connection failures, up to
    /// `request.timeout.ms` of retries.
    pub async fn call_any(&self, body: RequestBody) -> Result<ResponseBody> {
        let deadline = Instant::now() + self.inner.config.request_timeout;
        let mut attempt = 0;
        loop {
            let result = match self.any_connection().await {
                Ok(conn) => conn.call(body.clone()).await,
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.is_retriable() && e.code().is_none() && Instant::now() < deadline => {
                    tracing::debug!(error = %e, "retrying on another broker");
                    tokio::time::sleep(self.inner.config.backoff(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The coordinator of `key` (a group id or a transactional id) and its connection,
    /// from the cache or FindCoordinator (retried while COORDINATOR_NOT_AVAILABLE). The
    /// connection is a dedicated one, never the one fetches and produces use.
    pub async fn coordinator(&self, kind: CoordinatorKind, key: &str) -> Result<(i32, Connection)> {
        let cached = self
            .inner
            .coordinators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(kind, key.to_string()))
            .cloned();
        if let Some(b) = cached {
            match self.inner.pool.get_for_coordinator(&b.addr()).await {
                Ok(conn) => return Ok((b.id, conn)),
                Err(_) => self.forget_coordinator(kind, key),
            }
        }
        let deadline = Instant::now() + self.inner.config.request_timeout;
        let mut attempt = 0;
        loop {
            match self.find_coordinator(kind, key).await {
                Ok(b) => {
                    let conn = self.inner.pool.get_for_coordinator(&b.addr()).await?;
                    self.inner
                        .coordinators
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert((kind, key.to_string()), b.clone());
                    return Ok((b.id, conn));
                }
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    tokio::time::sleep(self.inner.config.backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Forgets the cached coordinator of `key` (after NOT_COORDINATOR and friends).
    pub fn forget_coordinator(&self, kind: CoordinatorKind, key: &str) {
        self.inner.coordinators.lock().unwrap_or_else(|p| p.into_inner()).remove(&(kind, key.to_string()));
    }

    /// Forgets the coordinator if `e` says it moved; true if it did.
    pub fn on_coordinator_error(&self, kind: CoordinatorKind, key: &str, e: &Error) -> bool {
        let moved = match e {
            Error::Kafka { code, .. } => refreshes_coordinator(*code),
            Error::Connection { .. } | Error::Protocol { .. } | Error::Timeout(_) => true,
            _ => false,
        };
        if moved {
            self.forget_coordinator(kind, key);
        }
        moved
    }

    async fn find_coordinator(&self, kind: CoordinatorKind, key: &str) -> Result<BrokerAddress> {
        let conn = self.any_connection().await?;
        let version = conn.version(ApiKey::FindCoordinator)?;
        let request = FindCoordinatorRequest {
            key: key.to_string(),
            key_type: kind as i8,
            coordinator_keys: vec![key.to_string()],
        };
        let ResponseBody::FindCoordinator(r) =
            conn.call_at(version, RequestBody::FindCoordinator(request)).await?.body
        else {
            return Err(Error::protocol(conn.addr(), "FindCoordinator answered with another API"));
        };
        if version >= 4 {
            let c = r
                .coordinators
                .first()
                .ok_or_else(|| Error::protocol(conn.addr(), "no coordinator in the answer"))?;
            if let Some(e) = Error::from_code(c.error_code, c.error_message.as_deref()) {
                return Err(e);
            }
            Ok(BrokerAddress { id: c.node_id, host: c.host.clone(), port: c.port, rack: None })
        } else {
            if let Some(e) = Error::from_code(r.error_code, r.error_message.as_deref()) {
                return Err(e);
            }
            Ok(BrokerAddress { id: r.node_id, host: r.host.clone(), port: r.port, rack: None })
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}
