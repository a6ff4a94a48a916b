//! The log cleaner thread: compacts every log whose `cleanup.policy` contains
//! `compact` (including `__consumer_offsets` and `__transaction_state`), filthiest
//! first, never past a partition's high watermark or last stable offset.
//!
//! One plain thread (the work is blocking file I/O), woken every `log.cleaner.backoff.ms`
//! when nothing was due, and stopped by the broker's shutdown.

use crate::clock::now_ms;
use crate::node::Node;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_storage::{CleanOutcome, Cleaner, CleanerConfig};

/// Handle to stop the cleaner thread.
#[derive(Debug)]
pub struct CleanerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CleanerHandle {
    /// Asks the thread to stop after its current cleaning and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Starts the cleaner unless `log.cleaner.enable=false`.
pub fn start(node: &Arc<Node>) -> Option<CleanerHandle> {
    let settings = &node.config.coordinators;
    if !settings.log_cleaner_enable {
        return None;
    }
    let config = settings.cleaner.clone();
    let backoff = Duration::from_millis(settings.log_cleaner_backoff_ms);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let node = node.clone();
    let thread = std::thread::Builder::new()
        .name("log-cleaner".into())
        .spawn(move || run(node, config, backoff, flag))
        .map_err(|e| tracing::error!(error = %e, "cannot start the log cleaner"))
        .ok()?;
    Some(CleanerHandle { stop, thread: Some(thread) })
}

fn run(node: Arc<Node>, config: CleanerConfig, backoff: Duration, stop: Arc<AtomicBool>) {
    let mut cleaner = match Cleaner::new(config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid log cleaner configuration; compaction is off");
            return;
        }
    };
    while !stop.load(Ordering::Acquire) {
        let cleaned = clean_filthiest(&node, &mut cleaner);
        if !cleaned {
            std::thread::park_timeout(backoff);
        }
    }
}

/// Cleans the log with the highest dirty ratio that is due; true if one was cleaned.
fn clean_filthiest(broker: &Node, cleaner: &mut Cleaner) -> bool {
    let now = now_ms();
    let mut best: Option<(f64, Arc<crate::replica::Partition>)> = None;
    let mut dirtiest = 0.0f64;
    for p in broker.replicas.all() {
        if !p.log.config().cleanup_policy_compact {
            continue;
        }
        let inspected = Cleaner::inspect(&p.log, now, p.last_stable_offset());
        if let Ok(info) = &inspected {
            dirtiest = dirtiest.max(info.dirty_ratio);
        }
        match inspected {
            Ok(info) if info.should_clean => {
                if best.as_ref().is_none_or(|(ratio, _)| info.dirty_ratio > *ratio) {
                    best = Some((info.dirty_ratio, p));
                }
            }
            Ok(info) => {
                tracing::trace!(topic = %p.topic, partition = p.index, ?info, lso = p.last_stable_offset(), hw = p.high_watermark(), leo = p.log.log_end_offset(), "not due for cleaning");
            }
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot inspect log for cleaning")
            }
        }
    }
    broker.metrics.cleaner.set_max_dirty_ratio(dirtiest);
    let Some((_, p)) = best else { return false };
    match cleaner.clean(&p.log, now, p.last_stable_offset()) {
        Ok(stats) => {
            if stats.outcome == CleanOutcome::Cleaned {
                broker.metrics.cleaner.cleaned(stats.bytes_read, stats.bytes_written);
                tracing::info!(topic = %p.topic, partition = p.index, end_offset = stats.end_offset, "log cleaned");
                return true;
            }
            false
        }
        Err(e) => {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "log cleaning failed");
            false
        }
    }
}
