//! Connections by broker address, made on first use and made again after a failure.
//! Concurrent callers asking for the same broker share one connection attempt.

use super::Connection;
use crate::config::ClientConfig;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

type Slot = Arc<OnceCell<Connection>>;

/// The connections of one client.
#[derive(Debug)]
pub struct Pool {
    config: ClientConfig,
    max_in_flight: usize,
    slots: Mutex<HashMap<String, Slot>>,
}

impl Pool {
    /// An empty pool whose connections allow `max_in_flight` outstanding requests each.
    pub fn new(config: ClientConfig, max_in_flight: usize) -> Pool {
        Pool { config, max_in_flight, slots: Mutex::new(HashMap::new()) }
    }

    /// The connection to `addr`, connecting if there is none or the last one failed.
    pub async fn get(&self, addr: &str) -> Result<Connection> {
        self.get_keyed(addr, addr).await
    }

    /// A second connection to `addr`, apart from the one [`Pool::get`] gives, for the
    /// group and transaction coordinator: a broker answers one connection's requests in
    /// order, so a JoinGroup the coordinator holds for the whole rebalance would
    /// otherwise hold up every fetch behind it (the Java client does the same, with a
    /// coordinator node id of `i32::MAX - id`).
    pub async fn get_for_coordinator(&self, addr: &str) -> Result<Connection> {
        self.get_keyed(&format!("coordinator/{addr}"), addr).await
    }

    async fn get_keyed(&self, key: &str, addr: &str) -> Result<Connection> {
        loop {
            let slot = self.slot(key);
            let conn = slot
                .get_or_try_init(|| Connection::connect(addr, &self.config, self.max_in_flight))
                .await?
                .clone();
            if !conn.is_closed() {
                return Ok(conn);
            }
            self.forget(key, &slot);
        }
    }

    /// The connection to `addr` if one is made and open; never connects.
    pub fn get_if_open(&self, addr: &str) -> Option<Connection> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(addr).and_then(|s| s.get()).filter(|c| !c.is_closed()).cloned()
    }

    /// Drops the connection to `addr` (after a failure the caller saw), so the next
    /// [`Pool::get`] connects again.
    pub fn reset(&self, addr: &str) {
        let removed = self.slots.lock().unwrap_or_else(|p| p.into_inner()).remove(addr);
        if let Some(conn) = removed.as_ref().and_then(|s| s.get()) {
            conn.close();
        }
    }

    /// Closes every connection.
    pub fn close_all(&self) {
        let slots: Vec<Slot> =
            self.slots.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, s)| s).collect();
        for conn in slots.iter().filter_map(|s| s.get()) {
            conn.close();
        }
    }

    fn slot(&self, addr: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(addr.to_string()).or_default().clone()
    }

    /// Removes `slot` if it is still the one for `addr` (a newer connection stays).
    fn forget(&self, addr: &str, slot: &Slot) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.get(addr).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(addr);
        }
    }
}
