//! The broker's share-out of connections and request memory among clients.
//!
//! Connections: every client connection counts against `max.connections` (past it the
//! listeners stop accepting, so new connections wait in the kernel's backlog, as in
//! Kafka) and against its address's `max.connections.per.ip` (past it the connection is
//! closed as soon as it is accepted). A listener with a limit of its own
//! (`listener.name.<listener>.max.connections`) likewise stops accepting at it. Past
//! `max.connection.creation.rate` an accepted connection waits before it is served.
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
    /// The limits in force: server.properties with the dynamic broker configs applied
    /// (the per-listener limits stay those of the file).
    config: ArcSwap<ConnectionLimitsConfig>,
    open: AtomicUsize,
    /// Open connections of the listeners with a limit of their own, by name.
    per_listener: HashMap<String, Arc<ListenerConnections>>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    closed: Notify,
    /// `max.connection.creation.rate`'s token bucket: connections that may still be
    /// created now (at most one second's worth), as of `at`.
    creations: Mutex<(f64, Instant)>,
}

/// A listener's own `max.connections` and its open connections.
#[derive(Debug)]
struct ListenerConnections {
    limit: usize,
    open: AtomicUsize,
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
    listener: Option<Arc<ListenerConnections>>,
}

impl ConnectionLimits {
    /// Limits as configured.
    pub fn new(config: ConnectionLimitsConfig) -> Arc<ConnectionLimits> {
        let per_listener = config
            .per_listener
            .iter()
            .map(|(name, &limit)| {
                (name.clone(), Arc::new(ListenerConnections { limit, open: AtomicUsize::new(0) }))
            })
            .collect();
        Arc::new(ConnectionLimits {
            config: ArcSwap::from_pointee(config),
            open: AtomicUsize::new(0),
            per_listener,
            per_ip: Mutex::new(HashMap::new()),
            closed: Notify::new(),
            creations: Mutex::new((f64::MAX, Instant::now())),
        })
    }

    /// Waits until `listener` may accept another connection: fewer than
    /// `max.connections` are open (unless the listener is exempt from it, `counted`
    /// false) and fewer than the listener's own limit, if it has one.
    pub async fn wait_for_room(&self, listener: &str, counted: bool) {
        let own = self.per_listener.get(listener);
        loop {
            let notified = self.closed.notified();
            let total_ok = !counted || self.open.load(Ordering::Acquire) < self.config.load().max_connections;
            let own_ok = own.is_none_or(|l| l.open.load(Ordering::Acquire) < l.limit);
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
        self.wait_to_create(counted).await;
    }

    /// Waits until `max.connection.creation.rate` lets one more client connection be
    /// served (at once for connections exempt from `max.connections`, `counted` false):
    /// a token bucket holding one second of the rate, re-read while waiting so a raised
    /// rate applies at once. A rate of 0 holds new connections until it is raised.
    pub async fn wait_to_create(&self, counted: bool) {
        if !counted {
            return;
        }
        loop {
            let rate = self.config.load().max_connection_creation_rate;
            if rate >= i32::MAX as usize {
                return;
            }
            let wait = {
                let mut bucket = self.creations.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let elapsed = now.saturating_duration_since(bucket.1).as_secs_f64();
                let burst = (rate as f64).max(1.0);
                bucket.0 = (bucket.0.min(burst) + elapsed * rate as f64).min(burst);
                bucket.1 = now;
                if bucket.0 >= 1.0 {
                    bucket.0 -= 1.0;
                    return;
                }
                if rate == 0 {
                    Duration::from_secs(1)
                } else {
                    Duration::from_secs_f64((1.0 - bucket.0) / rate as f64).min(Duration::from_secs(1))
                }
            };
            tokio::time::sleep(wait).await;
        }
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
        let listener = self.per_listener.get(listener).cloned();
        if let Some(l) = &listener {
            l.open.fetch_add(1, Ordering::AcqRel);
        }
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
        if let Some(l) = &self.listener {
            l.open.fetch_sub(1, Ordering::AcqRel);
        }
        if self.counted {
            self.limits.open.fetch_sub(1, Ordering::AcqRel);
        }
        if self.counted || self.listener.is_some() {
            self.limits.closed.notify_waiters();
        }
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
            per_listener: [("INTERNAL".to_string(), 1)].into_iter().collect(),
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
}
