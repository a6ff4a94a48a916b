//! The broker's share-out of connections and request memory among clients.
//!
//! Connections: every client connection counts against `max.connections` (past it the
//! listeners stop accepting, so new connections wait in the kernel's backlog, as in
//! Kafka) and against its address's `max.connections.per.ip` (past it the connection is
//! closed as soon as it is accepted). A listener with a limit of its own
//! (`listener.name.<listener>.max.connections`) likewise stops accepting at it. Past
//! `max.connection.creation.rate` an accepted connection waits before it is served, and
//! past its listener's own `listener.name.<listener>.max.connection.creation.rate` too.
//! Every one of these limits can change at run time (dynamic broker configs).
//!
//! Request memory (`queued.max.request.bytes`, Kafka's memory pool): a connection takes
//! a request's length from a broker-wide budget when it reads the length prefix, before
//! it buffers the request's bytes, and gives it back once the request is handled. When
//! the budget is used up the connection stops reading its socket (TCP backpressure)
//! until memory is free. Requests larger than [`LARGE_REQUEST`] may hold at most
//! [`LARGE_SHARE`] of the budget between them, so a flood of half-sent large produce
//! requests leaves room for everyone else's ordinary requests; each is also bounded in
//! time by `socket.request.receive.timeout.ms`.

use crate::config::connections::ConnectionLimitsConfig;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Requests above this size draw on the large requests' share of the budget too.
pub const LARGE_REQUEST: usize = 8 * 1024 * 1024;

/// The part of `queued.max.request.bytes` that large requests may hold together, as a
/// fraction (numerator over 4).
pub const LARGE_SHARE: usize = 3;

/// Open connections, overall and by address.
#[derive(Debug)]
pub struct ConnectionLimits {
    /// The limits in force: server.properties with the dynamic broker configs applied.
    config: ArcSwap<ConnectionLimitsConfig>,
    open: AtomicUsize,
    /// Each listener's open connections and creation-rate bucket, by name in lower case
    /// (created at its first use: a listener's own limit may be set at any time).
    per_listener: Mutex<HashMap<String, Arc<ListenerConnections>>>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    closed: Notify,
    /// `max.connection.creation.rate`'s token bucket.
    creations: Mutex<Bucket>,
}

/// A listener's open connections and its own creation-rate bucket; its limits are in the
/// config in force, under its name.
#[derive(Debug)]
struct ListenerConnections {
    name: String,
    open: AtomicUsize,
    creations: Mutex<Bucket>,
}

/// A token bucket of connection creations: how many may still be created now (at most one
/// second's worth of the rate), as of the instant.
#[derive(Debug)]
struct Bucket(f64, Instant);

impl Bucket {
    fn full() -> Mutex<Bucket> {
        Mutex::new(Bucket(f64::MAX, Instant::now()))
    }

    /// Takes a token at `rate` a second, or says how long until one is there (a rate
    /// of 0 waits a second at a time, until it is raised).
    fn take(bucket: &Mutex<Bucket>, rate: usize) -> Option<Duration> {
        let mut bucket = bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(bucket.1).as_secs_f64();
        let burst = (rate as f64).max(1.0);
        bucket.0 = (bucket.0.min(burst) + elapsed * rate as f64).min(burst);
        bucket.1 = now;
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            return None;
        }
        Some(if rate == 0 {
            Duration::from_secs(1)
        } else {
            Duration::from_secs_f64((1.0 - bucket.0) / rate as f64).min(Duration::from_secs(1))
        })
    }
}

/// Why a connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyFromAddress {
    /// The address's limit.
    pub limit: usize,
}

/// Counts one open connection until dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
    counted: bool,
    listener: Arc<ListenerConnections>,
}

impl ConnectionLimits {
    /// Limits as configured.
    pub fn new(config: ConnectionLimitsConfig) -> Arc<ConnectionLimits> {
        Arc::new(ConnectionLimits {
            config: ArcSwap::from_pointee(config),
            open: AtomicUsize::new(0),
            per_listener: Mutex::new(HashMap::new()),
            per_ip: Mutex::new(HashMap::new()),
            closed: Notify::new(),
            creations: Bucket::full(),
        })
    }

    /// The counters of `listener` (as `listeners` spells it, in any case).
    fn listener(&self, listener: &str) -> Arc<ListenerConnections> {
        let name = listener.to_ascii_lowercase();
        let mut all = self.per_listener.lock().unwrap_or_else(|p| p.into_inner());
        all.entry(name.clone())
            .or_insert_with(|| {
                Arc::new(ListenerConnections { name, open: AtomicUsize::new(0), creations: Bucket::full() })
            })
            .clone()
    }

    /// Waits until `listener` may accept another connection: fewer than
    /// `max.connections` are open (unless the listener is exempt from it, `counted`
    /// false) and fewer than the listener's own limit, if it has one. Both are re-read
    /// whenever a connection closes or the limits change.
    pub async fn wait_for_room(&self, listener: &str, counted: bool) {
        let own = self.listener(listener);
        loop {
            let notified = self.closed.notified();
            let config = self.config.load();
            let total_ok = !counted || self.open.load(Ordering::Acquire) < config.max_connections;
            let own_ok = config
                .per_listener
                .get(&own.name)
                .is_none_or(|&limit| own.open.load(Ordering::Acquire) < limit);
            drop(config);
            if total_ok && own_ok {
                return;
            }
            notified.await;
        }
    }

    /// Waits until an accepted connection may be served: room under the connection
    /// limits (which may have been lowered while the listener waited in accept), then
    /// its turn under `max.connection.creation.rate`.
    pub async fn wait_to_serve(&self, listener: &str, counted: bool) {
        self.wait_for_room(listener, counted).await;
        self.wait_to_create(listener, counted).await;
    }

    /// Waits until `max.connection.creation.rate` lets one more client connection be
    /// served (connections exempt from `max.connections`, `counted` false, are exempt
    /// from it too), then until the listener's own rate does, if it has one (whatever
    /// `counted` says): token buckets holding one second of their rate, re-read while
    /// waiting so a raised rate applies at once. A rate of 0 holds new connections
    /// until it is raised.
    pub async fn wait_to_create(&self, listener: &str, counted: bool) {
        if counted {
            while let Some(wait) = self.rate_wait(|c| Some(c.max_connection_creation_rate), &self.creations) {
                tokio::time::sleep(wait).await;
            }
        }
        let own = self.listener(listener);
        while let Some(wait) = self.rate_wait(|c| c.per_listener_rate.get(&own.name).copied(), &own.creations)
        {
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a token from `bucket` at the rate `rate` reads from the config in force;
    /// `None` when taken or when there is no rate to keep.
    fn rate_wait(
        &self,
        rate: impl Fn(&ConnectionLimitsConfig) -> Option<usize>,
        bucket: &Mutex<Bucket>,
    ) -> Option<Duration> {
        let rate = rate(&self.config.load()).filter(|r| *r < i32::MAX as usize)?;
        Bucket::take(bucket, rate)
    }

    /// Admits a connection from `ip` on `listener`; `counted` is false for connections
    /// exempt from `max.connections` (the inter-broker listener when it is a listener of
    /// its own). The listener's own count is kept whatever `counted` says.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        listener: &str,
        counted: bool,
    ) -> Result<ConnectionSlot, TooManyFromAddress> {
        let limit = self.config.load().limit_for(ip);
        {
            let mut per_ip = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
            let n = per_ip.entry(ip).or_insert(0);
            if *n >= limit {
                if *n == 0 {
                    per_ip.remove(&ip);
                }
                return Err(TooManyFromAddress { limit });
            }
            *n += 1;
        }
        if counted {
            self.open.fetch_add(1, Ordering::AcqRel);
        }
        let listener = self.listener(listener);
        listener.open.fetch_add(1, Ordering::AcqRel);
        Ok(ConnectionSlot { limits: self.clone(), ip, counted, listener })
    }

    /// Connections counted against `max.connections`.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// The limits in force.
    pub fn config(&self) -> Arc<ConnectionLimitsConfig> {
        self.config.load_full()
    }

    /// Puts new limits in force (a dynamic config changed): the connections accepted
    /// from now on are held to them; open ones stay. A listener waiting for room looks
    /// again, as a raised `max.connections` may let it accept.
    pub fn set_config(&self, config: ConnectionLimitsConfig) {
        if **self.config.load() == config {
            return;
        }
        self.config.store(Arc::new(config));
        self.closed.notify_waiters();
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        {
            let mut per_ip = self.limits.per_ip.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = per_ip.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    per_ip.remove(&self.ip);
                }
            }
        }
        self.listener.open.fetch_sub(1, Ordering::AcqRel);
        if self.counted {
            self.limits.open.fetch_sub(1, Ordering::AcqRel);
        }
        self.limits.closed.notify_waiters();
    }
}

/// The broker-wide budget of request bytes (`queued.max.request.bytes`).
#[derive(Debug)]
pub struct RequestMemory {
    capacity: usize,
    large_capacity: usize,
    all: Arc<Semaphore>,
    large: Arc<Semaphore>,
}

/// Request bytes held until dropped.
#[derive(Debug)]
pub struct MemoryPermit {
    _all: OwnedSemaphorePermit,
    _large: Option<OwnedSemaphorePermit>,
}

impl RequestMemory {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: usize) -> Arc<RequestMemory> {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        let large_capacity = (capacity / 4 * LARGE_SHARE).max(1);
        Arc::new(RequestMemory {
            capacity,
            large_capacity,
            all: Arc::new(Semaphore::new(capacity)),
            large: Arc::new(Semaphore::new(large_capacity)),
        })
    }

    /// What a request of `size` bytes takes of the budget and of the large requests'
    /// share: its size, up to that share for a large request (one larger than the share
    /// is received alone among large requests, and leaves the rest to the others).
    fn cost(&self, size: usize) -> (u32, Option<u32>) {
        if size > LARGE_REQUEST {
            let n = size.min(self.large_capacity) as u32;
            return (n, Some(n));
        }
        (size.clamp(1, self.capacity) as u32, None)
    }

    /// The memory of a `size`-byte request if it is free now.
    pub fn try_take(&self, size: usize) -> Option<MemoryPermit> {
        let (all, large) = self.cost(size);
        let large = match large {
            Some(n) => Some(self.large.clone().try_acquire_many_owned(n).ok()?),
            None => None,
        };
        let all = self.all.clone().try_acquire_many_owned(all).ok()?;
        Some(MemoryPermit { _all: all, _large: large })
    }

    /// The memory of a `size`-byte request, waiting until it is free (in arrival order).
    pub async fn take(&self, size: usize) -> MemoryPermit {
        let (all, large) = self.cost(size);
        let large = match large {
            Some(n) => Some(self.large.clone().acquire_many_owned(n).await.expect("never closed")),
            None => None,
        };
        let all = self.all.clone().acquire_many_owned(all).await.expect("never closed");
        MemoryPermit { _all: all, _large: large }
    }

    /// Bytes of the budget (`MemoryPoolAvailable` + `MemoryPoolUsed`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of the budget not held by a request now (`MemoryPoolAvailable`).
    pub fn available(&self) -> usize {
        self.all.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_requests_leave_a_quarter_for_the_others() {
        let m = RequestMemory::new(64 << 20);
        let a = m.try_take(100 << 20).expect("a request larger than the budget is taken alone");
        assert!(m.try_take(9 << 20).is_none(), "large requests hold their whole share");
        let small = m.try_take(1 << 20).expect("ordinary requests still fit");
        assert_eq!(m.available(), (16 << 20) - (1 << 20));
        drop(a);
        assert!(m.try_take(9 << 20).is_some());
        drop(small);
    }

    #[test]
    fn memory_comes_back_when_the_permit_drops() {
        let m = RequestMemory::new(1000);
        let p = m.try_take(600).unwrap();
        assert!(m.try_take(600).is_none());
        drop(p);
        assert_eq!(m.available(), 1000);
        let zero = m.try_take(0).unwrap();
        assert_eq!(m.available(), 999, "an empty request still takes a byte");
        drop(zero);
    }

    #[tokio::test]
    async fn a_waiting_request_gets_its_memory_when_it_frees() {
        let m = RequestMemory::new(1000);
        let held = m.try_take(1000).unwrap();
        let m2 = m.clone();
        let waiter = tokio::spawn(async move { m2.take(500).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        let _p = waiter.await.unwrap();
        assert_eq!(m.available(), 500);
    }

    #[test]
    fn per_address_limits_and_the_total() {
        let config = ConnectionLimitsConfig {
            max_connections: 3,
            max_connections_per_ip: 2,
            per_ip_overrides: [("127.0.0.2".parse().unwrap(), 0)].into_iter().collect(),
            ..Default::default()
        };
        let limits = ConnectionLimits::new(config);
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        let a = limits.admit(one, "PLAINTEXT", true).unwrap();
        let _b = limits.admit(one, "PLAINTEXT", true).unwrap();
        assert_eq!(limits.admit(one, "PLAINTEXT", true).unwrap_err(), TooManyFromAddress { limit: 2 });
        assert!(limits.admit("127.0.0.2".parse().unwrap(), "PLAINTEXT", true).is_err(), "override of 0");
        let _c = limits.admit("127.0.0.3".parse().unwrap(), "PLAINTEXT", true).unwrap();
        let _exempt = limits.admit("127.0.0.4".parse().unwrap(), "PLAINTEXT", false).unwrap();
        assert_eq!(limits.open(), 3);
        drop(a);
        assert_eq!(limits.open(), 2);
        let _d = limits.admit(one, "PLAINTEXT", true).expect("room again for that address");
    }

    #[tokio::test]
    async fn a_listener_with_a_limit_of_its_own_waits_at_it_even_when_exempt_from_the_total() {
        let config = ConnectionLimitsConfig {
            max_connections: 2,
            per_listener: [("internal".to_string(), 1)].into_iter().collect(),
            ..Default::default()
        };
        let limits = ConnectionLimits::new(config);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let _a = limits.admit(ip, "PLAINTEXT", true).unwrap();
        let _b = limits.admit(ip, "PLAINTEXT", true).unwrap();
        // PLAINTEXT is at max.connections; INTERNAL (exempt) is below its own limit.
        limits.wait_for_room("INTERNAL", false).await;
        let internal = limits.admit(ip, "INTERNAL", false).unwrap();
        assert_eq!(limits.open(), 2, "the exempt listener is not in the total");
        let waiter = {
            let limits = limits.clone();
            tokio::spawn(async move { limits.wait_for_room("INTERNAL", false).await })
        };
        let plaintext = {
            let limits = limits.clone();
            tokio::spawn(async move { limits.wait_for_room("PLAINTEXT", true).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished() && !plaintext.is_finished());
        drop(internal);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("room on INTERNAL")
            .unwrap();
        assert!(!plaintext.is_finished(), "PLAINTEXT is still at max.connections");
        plaintext.abort();
    }

    #[tokio::test]
    async fn a_listeners_own_limit_and_rate_set_at_run_time_hold_its_next_connections() {
        let limits = ConnectionLimits::new(ConnectionLimitsConfig::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let open = limits.admit(ip, "INTERNAL", false).unwrap();
        // A limit of 1 set on the listener while one connection is open: the next waits.
        let mut config = ConnectionLimitsConfig::default();
        config.per_listener.insert("internal".into(), 1);
        limits.set_config(config.clone());
        let waiter = {
            let limits = limits.clone();
            tokio::spawn(async move { limits.wait_for_room("INTERNAL", false).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "INTERNAL is at its own limit");
        limits.wait_for_room("PLAINTEXT", true).await;
        // Raising it lets the waiting one in while the first stays open.
        config.per_listener.insert("internal".into(), 2);
        limits.set_config(config.clone());
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("room after the raise").unwrap();
        drop(open);

        // A rate of 0 on the listener holds even exempt connections; other listeners go.
        config.per_listener_rate.insert("internal".into(), 0);
        limits.set_config(config.clone());
        limits.wait_to_create("INTERNAL", false).await; // the bucket's first second's worth
        let held = {
            let limits = limits.clone();
            tokio::spawn(async move { limits.wait_to_create("INTERNAL", false).await })
        };
        tokio::time::timeout(Duration::from_secs(5), limits.wait_to_create("PLAINTEXT", true))
            .await
            .expect("other listeners are not paced");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!held.is_finished(), "a rate of 0 holds the listener's next connection");
        config.per_listener_rate.remove("internal");
        limits.set_config(config);
        tokio::time::timeout(Duration::from_secs(5), held)
            .await
            .expect("served once the rate is lifted")
            .unwrap();
    }
}
