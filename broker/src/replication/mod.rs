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
use std::sync::Arc;
use std::time::Duration;

/// Every `replica.lag.time.max.ms / 2` (as Kafka's `isr-expiration` task), proposes
/// removing followers that fell behind from the ISRs this broker leads.
pub async fn run_isr_checks(broker: Arc<Broker>) {
    let every = Duration::from_millis((broker.config.cluster.replica_lag_time_max_ms / 2).max(10) as u64);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = crate::clock::now_ms();
        let lag = broker.config.cluster.replica_lag_time_max_ms;
        for p in broker.replicas.all().into_iter().filter(|p| p.is_leader()) {
            if let Some(proposal) = p.maybe_shrink_isr(now, lag) {
                broker.isr_changes.submit(p, proposal);
            }
        }
    }
}
