//! Periodic log maintenance: retention every `log.retention.check.interval.ms`,
//! expiry of idle producer ids every `producer.id.expiration.check.interval.ms`,
//! time-based flushing (`flush.ms`) every `log.flush.scheduler.interval.ms`, and the
//! high-watermark checkpoint every `replica.high.watermark.checkpoint.interval.ms`. Runs
//! on the blocking pool since it touches files.

use crate::broker::Broker;
use crate::clock::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Runs until `shutdown` turns true.
pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let retention_every = Duration::from_millis(broker.config.log_retention_check_interval_ms.max(1) as u64);
    let flush_every =
        Duration::from_millis(broker.config.log_flush_scheduler_interval_ms.clamp(1, 3_600_000) as u64);
    let producer_expiry_every =
        Duration::from_millis(broker.config.coordinators.producer_id_expiration_check_interval_ms);
    let mut producer_expiry = tokio::time::interval(producer_expiry_every);
    producer_expiry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut hw_checkpoint = tokio::time::interval(Duration::from_millis(
        broker.config.cluster.replica_high_watermark_checkpoint_interval_ms.max(1),
    ));
    hw_checkpoint.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retention = tokio::time::interval(retention_every);
    let mut flush = tokio::time::interval(flush_every);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = retention.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || apply_retention(&b)).await;
            }
            _ = producer_expiry.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let now = now_ms();
                    for p in b.replicas.all() {
                        if let Err(e) = p.log.remove_expired_producers(now) {
                            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "producer expiry failed");
                        }
                    }
                }).await;
            }
            _ = hw_checkpoint.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    if let Err(e) = b.replicas.checkpoint_high_watermarks() {
                        tracing::error!(error = %e, "cannot checkpoint high watermarks");
                    }
                }).await;
            }
            _ = flush.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let now = now_ms();
                    for p in b.replicas.all() {
                        if let Err(e) = p.log.maybe_flush(now) {
                            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
                        }
                    }
                }).await;
            }
        }
    }
}

fn apply_retention(broker: &Broker) {
    let now = now_ms();
    for p in broker.replicas.all() {
        match p.log.apply_retention_up_to(now, p.high_watermark()) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(topic = %p.topic, partition = p.index, segments = n, "retention deleted segments")
            }
            Err(e) => {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
            }
        }
    }
}
