//! Replication between brokers: the leader's ISR and high-watermark bookkeeping as a
//! pure state machine ([`isr`]), the follower fetch loops ([`fetcher`]), sending ISR
//! changes to the controller ([`alter_isr`]), the replica a consumer should read from
//! (KIP-392, [`read_replica`]), and the periodic ISR lag check.

pub mod alter_isr;
pub mod fetcher;
pub mod isr;
pub mod read_replica;
pub mod throttle;

use crate::broker::Broker;
use std::sync::Weak;
use std::time::Duration;

/// Every `replica.lag.time.max.ms / 2` (as Kafka's `isr-expiration` task), proposes
/// removing followers that fell behind from the ISRs this broker leads.
pub async fn run_isr_checks(broker: Weak<Broker>) {
    let every = match broker.upgrade() {
        Some(b) => Duration::from_millis((b.config.cluster.replica_lag_time_max_ms / 2).max(10) as u64),
        None => return,
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(b) = broker.upgrade() else { return };
        let now = crate::clock::now_ms();
        let lag = b.config.cluster.replica_lag_time_max_ms;
        for p in b.replicas.all().into_iter().filter(|p| p.is_leader()) {
            if let Some(proposal) = p.maybe_shrink_isr(now, lag) {
                b.isr_changes().submit(p, proposal);
            }
        }
    }
}
