//! The fetching side of an incremental fetch session (KIP-227, Kafka's
//! `FetchSessionHandler`), shared by the broker's replica fetchers and the client's
//! consumer: after a first full request, each request carries only the partitions whose
//! fetch fields changed and the ones no longer fetched, and the leader answers only the
//! partitions with something new. A fetcher of thousands of partitions on one broker
//! then sends and parses a handful per fetch rather than all of them.
//!
//! One request at a time per session: [`FetchSession::plan`] takes the fields of every
//! partition to fetch now and returns what the next request carries;
//! [`FetchSession::answered`] takes the broker's answer to it. Any error, or a failed
//! call ([`FetchSession::reset`]), starts over with a full request.
//!
//! ```
//! use strata_protocol::fetch_session::FetchSession;
//! use strata_protocol::messages::fetch::FetchPartition;
//! let at = |p: i32, offset: i64| (("t", p), FetchPartition { partition: p, fetch_offset: offset, ..Default::default() });
//! let mut session = FetchSession::default();
//! let first = session.plan(vec![at(0, 10), at(1, 20)]);
//! assert_eq!((first.id, first.epoch, first.partitions.len()), (0, 0, 2)); // full, opens one
//! session.answered(0, 42);
//! let next = session.plan(vec![at(0, 10), at(1, 25)]);
//! assert_eq!((next.id, next.epoch, next.partitions.len()), (42, 1, 1)); // only partition 1
//! ```

use crate::messages::fetch::FetchPartition;
use std::collections::HashMap;
use std::hash::Hash;

/// The epoch of a request that opens a session.
pub const INITIAL_EPOCH: i32 = 0;

/// One fetcher's session with one broker: which session it is in, the epoch its next
/// request carries, and what the broker's session holds of each partition (the fields
/// last sent). `K` names a partition: a topic id or name with the partition index.
#[derive(Debug)]
pub struct FetchSession<K> {
    /// 0: none (the next request is full and asks for one).
    id: i32,
    next_epoch: i32,
    sent: HashMap<K, FetchPartition>,
}

impl<K> Default for FetchSession<K> {
    fn default() -> Self {
        FetchSession { id: 0, next_epoch: INITIAL_EPOCH, sent: HashMap::new() }
    }
}

/// What one request carries: the session fields, the partitions to send and the
/// partitions to drop from the session (sorted).
#[derive(Debug, PartialEq)]
pub struct SessionPlan<K> {
    /// `session_id`.
    pub id: i32,
    /// `session_epoch`.
    pub epoch: i32,
    /// The partitions the request names.
    pub partitions: Vec<(K, FetchPartition)>,
    /// `forgotten_topics_data`.
    pub forgotten: Vec<K>,
}

impl<K: Hash + Eq + Clone + Ord> FetchSession<K> {
    /// The next request for `wanted` (every partition to fetch now): all of them when
    /// there is no session, else those new or changed since the last request, and the
    /// ones no longer wanted as forgotten.
    pub fn plan(&mut self, wanted: Vec<(K, FetchPartition)>) -> SessionPlan<K> {
        let full = self.id == 0;
        let mut now: HashMap<K, FetchPartition> = HashMap::with_capacity(wanted.len());
        let mut partitions = Vec::new();
        for (key, fp) in wanted {
            if full || self.sent.get(&key) != Some(&fp) {
                partitions.push((key.clone(), fp.clone()));
            }
            now.insert(key, fp);
        }
        let mut forgotten: Vec<K> = if full {
            Vec::new()
        } else {
            self.sent.keys().filter(|k| !now.contains_key(k)).cloned().collect()
        };
        forgotten.sort();
        self.sent = now;
        let epoch = if full { INITIAL_EPOCH } else { self.next_epoch };
        SessionPlan { id: self.id, epoch, partitions, forgotten }
    }

    /// Takes the broker's answer to the last planned request: its top-level error code
    /// and `session_id`, the session it answered in (0: none, so the next request is
    /// full again).
    pub fn answered(&mut self, error_code: i16, session_id: i32) {
        if error_code != 0 || session_id == 0 || (self.id != 0 && session_id != self.id) {
            // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, a session the broker
            // did not keep, or any refusal: start over with a full request.
            self.reset();
            return;
        }
        self.next_epoch = if self.id == 0 || self.next_epoch == i32::MAX { 1 } else { self.next_epoch + 1 };
        self.id = session_id;
    }

    /// Forgets the session (the call failed, or its answer was not read): the next
    /// request is full and opens a new one.
    pub fn reset(&mut self) {
        *self = FetchSession::default();
    }

    /// Whether the broker keeps a session for this fetcher (its requests are incremental).
    pub fn is_open(&self) -> bool {
        self.id != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn at(partition: i32, offset: i64) -> ((u8, i32), FetchPartition) {
        ((9, partition), FetchPartition { partition, fetch_offset: offset, ..Default::default() })
    }

    #[test]
    fn a_session_sends_everything_first_then_only_what_changed_and_what_was_dropped() {
        let mut s = FetchSession::default();
        let first = s.plan(vec![at(0, 10), at(1, 20), at(2, 30)]);
        assert_eq!(
            (first.id, first.epoch, first.partitions.len()),
            (0, INITIAL_EPOCH, 3),
            "full, opening one"
        );
        assert!(first.forgotten.is_empty());
        s.answered(0, 77);
        assert!(s.is_open());
        // Partition 1 got records (its fetch offset moved); partition 2 went away.
        let next = s.plan(vec![at(0, 10), at(1, 25)]);
        assert_eq!((next.id, next.epoch), (77, 1));
        assert_eq!(next.partitions, vec![at(1, 25)]);
        assert_eq!(next.forgotten, vec![(9, 2)]);
        s.answered(0, 77);
        let idle = s.plan(vec![at(0, 10), at(1, 25)]);
        assert_eq!((idle.epoch, idle.partitions.len(), idle.forgotten.len()), (2, 0, 0), "nothing changed");
        s.answered(0, 77);
        // A partition coming back is sent whole again.
        let back = s.plan(vec![at(0, 10), at(1, 25), at(2, 31)]);
        assert_eq!((back.epoch, back.partitions.clone()), (3, vec![at(2, 31)]));
    }

    #[test]
    fn a_lost_or_refused_session_starts_over_with_a_full_request() {
        let wanted = || vec![at(0, 1), at(1, 2)];
        let mut s = FetchSession::default();
        s.plan(wanted());
        s.answered(0, 5);
        s.plan(wanted());
        s.answered(ErrorCode::FetchSessionIdNotFound.code(), 0);
        assert!(!s.is_open());
        let again = s.plan(wanted());
        assert_eq!((again.id, again.epoch, again.partitions.len()), (0, INITIAL_EPOCH, 2));
        // A broker that keeps no session (its cache is full) gets full requests.
        s.answered(0, 0);
        let full = s.plan(wanted());
        assert_eq!((full.id, full.epoch, full.partitions.len()), (0, INITIAL_EPOCH, 2));
        s.answered(0, 8);
        assert_eq!(s.plan(wanted()).id, 8);
        // An answer in another session than ours, or a failed call, resets too.
        s.answered(0, 9);
        assert_eq!(s.plan(wanted()).partitions.len(), 2);
        s.answered(0, 10);
        s.reset();
        assert_eq!(s.plan(wanted()).epoch, INITIAL_EPOCH);
    }

    #[test]
    fn the_epoch_wraps_past_its_largest_value_to_one() {
        let mut s = FetchSession::default();
        s.plan(vec![at(0, 1)]);
        s.answered(0, 3);
        s.next_epoch = i32::MAX;
        assert_eq!(s.plan(vec![at(0, 1)]).epoch, i32::MAX);
        s.answered(0, 3);
        assert_eq!(s.plan(vec![at(0, 1)]).epoch, 1);
    }
}
