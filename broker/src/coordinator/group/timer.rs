//! Deadlines of the coordinator's timeouts. Nothing here sleeps: the shell asks for
//! [`Timers::next_deadline`] and calls the coordinator's `tick` when it passes.

use std::collections::{BTreeSet, HashMap};

/// What a timer is for; at most one timer per key is pending (scheduling replaces).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum TimerKey {
    /// A member's (or pending member's) session: expires it unless it heartbeats.
    Heartbeat { group: String, member: String },
    /// End of a group's join phase (rebalance timeout or initial delay).
    Join { group: String },
    /// End of a group's sync phase: members that did not sync are removed.
    Sync { group: String },
    /// Periodic offset expiry of one `__consumer_offsets` partition.
    OffsetExpiry { partition: i32 },
}

/// What to do when a timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimerTask {
    ExpireHeartbeat,
    CompleteJoin,
    /// Kafka's InitialDelayedJoin: `delay_ms` was the delay just waited, `remaining_ms`
    /// what is left of the rebalance timeout for further extensions.
    InitialJoin {
        delay_ms: i32,
        remaining_ms: i32,
    },
    ExpireSync {
        generation: i32,
    },
    ExpireOffsets,
}

#[derive(Debug, Default)]
pub(super) struct Timers {
    /// (deadline, sequence, key): the sequence orders timers with equal deadlines by
    /// scheduling order and tells a tick which timers existed when it started.
    queue: BTreeSet<(i64, u64, TimerKey)>,
    by_key: HashMap<TimerKey, (i64, u64, TimerTask)>,
    next_seq: u64,
}

impl Timers {
    /// Schedules `task` under `key` at `deadline_ms`, replacing any timer with that key.
    pub fn schedule(&mut self, key: TimerKey, deadline_ms: i64, task: TimerTask) {
        self.cancel(&key);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.insert((deadline_ms, seq, key.clone()));
        self.by_key.insert(key, (deadline_ms, seq, task));
    }

    pub fn cancel(&mut self, key: &TimerKey) {
        if let Some((deadline, seq, _)) = self.by_key.remove(key) {
            self.queue.remove(&(deadline, seq, key.clone()));
        }
    }

    /// Cancels every timer whose key satisfies `pred`.
    pub fn cancel_where(&mut self, mut pred: impl FnMut(&TimerKey) -> bool) {
        let keys: Vec<TimerKey> = self.by_key.keys().filter(|k| pred(k)).cloned().collect();
        for key in keys {
            self.cancel(&key);
        }
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.queue.first().map(|(deadline, _, _)| *deadline)
    }

    /// The sequence number the next scheduled timer will get.
    pub fn watermark(&self) -> u64 {
        self.next_seq
    }

    /// Removes and returns the earliest timer due at `now_ms` that was scheduled before
    /// `watermark`; timers scheduled while a tick runs wait for the next tick, so a
    /// zero timeout cannot spin a tick forever.
    pub fn pop_due(&mut self, now_ms: i64, watermark: u64) -> Option<(TimerKey, TimerTask)> {
        let due = self
            .queue
            .iter()
            .take_while(|(deadline, _, _)| *deadline <= now_ms)
            .find(|(_, seq, _)| *seq < watermark)
            .cloned()?;
        self.queue.remove(&due);
        let (_, _, key) = due;
        let (_, _, task) = self.by_key.remove(&key)?;
        Some((key, task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(g: &str) -> TimerKey {
        TimerKey::Join { group: g.into() }
    }

    #[test]
    fn reschedule_replaces_and_order_is_by_deadline_then_seq() {
        let mut t = Timers::default();
        t.schedule(join("a"), 10, TimerTask::CompleteJoin);
        t.schedule(join("b"), 5, TimerTask::CompleteJoin);
        t.schedule(join("a"), 5, TimerTask::CompleteJoin);
        assert_eq!(t.next_deadline(), Some(5));
        let w = t.watermark();
        assert_eq!(t.pop_due(4, w), None);
        assert_eq!(t.pop_due(5, w).map(|(k, _)| k), Some(join("b")));
        assert_eq!(t.pop_due(5, w).map(|(k, _)| k), Some(join("a")));
        assert_eq!(t.pop_due(100, w), None);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn timers_scheduled_during_a_tick_wait() {
        let mut t = Timers::default();
        t.schedule(join("a"), 0, TimerTask::CompleteJoin);
        let w = t.watermark();
        t.schedule(join("b"), 0, TimerTask::CompleteJoin);
        assert!(t.pop_due(0, w).is_some());
        assert!(t.pop_due(0, w).is_none());
        assert_eq!(t.next_deadline(), Some(0));
        t.cancel_where(|k| matches!(k, TimerKey::Join { .. }));
        assert_eq!(t.next_deadline(), None);
    }
}
