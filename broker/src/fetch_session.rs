//! Incremental fetch sessions (KIP-227): a consumer of many partitions sends, after its
//! first full fetch, only the partitions whose fetch position changed (and those it
//! drops), and gets back only the partitions with something new (records, an error, a
//! moved high watermark, last stable or log start offset), instead of every partition
//! every time.
//!
//! The cache holds up to `max.incremental.fetch.session.cache.slots` sessions. A
//! session's state is the full fetch request it stands for, kept per partition, and what
//! the last answer told the client of each partition. The request handler turns an
//! incremental request into that full request ([`FetchSessionCache::begin`]), runs the
//! ordinary fetch on it, and hands the answer to [`FetchSessionCache::finish`], which
//! keeps only what the client does not know yet. No lock is held while the fetch waits.

use rand::Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use strata_protocol::codec::Uuid;
use strata_protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, PartitionData,
};
use strata_protocol::ErrorCode;

/// The epoch of a request that opens a session.
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a request that wants no session (or closes the one it names).
const FINAL_EPOCH: i32 = -1;
/// A session unused this long may be evicted for a new one (Kafka's
/// `min.incremental.fetch.session.eviction.ms` default).
const EVICTION_AGE: Duration = Duration::from_secs(120);

/// How a topic is named in a session's requests: by id from Fetch v13, by name before.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum TopicKey {
    Id([u8; 16]),
    Name(String),
}

impl TopicKey {
    fn of(version: i16, topic: &str, id: Uuid) -> TopicKey {
        if version >= 13 {
            TopicKey::Id(id.0)
        } else {
            TopicKey::Name(topic.to_string())
        }
    }
}

/// What the last answer told the client of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// One partition of a session: the request's fields for it and what was last sent.
#[derive(Debug, Clone)]
struct SessionPartition {
    key: TopicKey,
    topic: String,
    topic_id: Uuid,
    fetch: FetchPartition,
    sent: Option<Sent>,
}

#[derive(Debug)]
struct Session {
    /// A follower's: only another follower's larger session may evict it while it is
    /// in use (Kafka's privileged sessions).
    privileged: bool,
    /// The epoch the next request must carry.
    next_epoch: i32,
    last_used: Instant,
    /// Partitions in fetch order. Partitions that returned records move to the end, so a
    /// fetch that runs out of `max_bytes` does not starve the same partitions every time
    /// (as Kafka rotates); a topic is fetched where its first partition in this order is.
    partitions: BTreeMap<u64, SessionPartition>,
    /// Where each partition is in that order, by topic.
    index: HashMap<TopicKey, HashMap<i32, u64>>,
    next_order: u64,
}

impl Session {
    fn new(now: Instant, privileged: bool) -> Session {
        Session {
            privileged,
            next_epoch: 1,
            last_used: now,
            partitions: BTreeMap::new(),
            index: HashMap::new(),
            next_order: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    fn upsert(&mut self, key: TopicKey, topic: &FetchTopic, fp: &FetchPartition) {
        if let Some(at) = self.index.get(&key).and_then(|t| t.get(&fp.partition)) {
            if let Some(p) = self.partitions.get_mut(at) {
                p.fetch = fp.clone();
            }
            return;
        }
        let at = self.next();
        self.index.entry(key.clone()).or_default().insert(fp.partition, at);
        self.partitions.insert(
            at,
            SessionPartition {
                key,
                topic: topic.topic.clone(),
                topic_id: topic.topic_id,
                fetch: fp.clone(),
                sent: None,
            },
        );
    }

    fn forget(&mut self, key: &TopicKey, partition: i32) {
        let Some(topic) = self.index.get_mut(key) else { return };
        if let Some(at) = topic.remove(&partition) {
            self.partitions.remove(&at);
        }
        if topic.is_empty() {
            self.index.remove(key);
        }
    }

    /// Moves the partitions in `served` (which returned records) to the end of the order.
    fn rotate(&mut self, served: &[(TopicKey, i32)]) {
        for (key, partition) in served {
            let to = self.next();
            let Some(slot) = self.index.get_mut(key).and_then(|t| t.get_mut(partition)) else { continue };
            let Some(entry) = self.partitions.remove(slot) else { continue };
            *slot = to;
            self.partitions.insert(to, entry);
        }
    }

    /// The full request this session stands for, with `template`'s other fields: each
    /// topic once, where its first partition comes in the order.
    fn full_request(&self, template: &FetchRequest) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut at: HashMap<&TopicKey, usize> = HashMap::new();
        for p in self.partitions.values() {
            let i = *at.entry(&p.key).or_insert_with(|| {
                topics.push(FetchTopic {
                    topic: p.topic.clone(),
                    topic_id: p.topic_id,
                    partitions: Vec::new(),
                });
                topics.len() - 1
            });
            topics[i].partitions.push(p.fetch.clone());
        }
        FetchRequest { topics, forgotten_topics_data: Vec::new(), ..template.clone() }
    }
}

/// What the handler does with a request.
#[derive(Debug)]
pub enum SessionPlan {
    /// No session: answer the request as it is, with session id 0.
    Sessionless,
    /// Answer the request as it is and open (or keep) session `id`: the answer is full.
    Full {
        /// The session's id.
        id: i32,
    },
    /// Answer `request` (the session's whole partition set), then pass the answer
    /// through [`FetchSessionCache::finish`] to keep only what changed.
    Incremental {
        /// The session's id.
        id: i32,
        /// The full request the session stands for.
        request: FetchRequest,
    },
    /// Refuse the request with this top-level error.
    Refuse(ErrorCode),
}

/// The broker's fetch sessions.
#[derive(Debug)]
pub struct FetchSessionCache {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    evictions: std::sync::atomic::AtomicU64,
}

impl FetchSessionCache {
    /// A cache of `slots` sessions (0: no sessions are ever opened).
    pub fn new(slots: usize) -> FetchSessionCache {
        FetchSessionCache { slots, sessions: Mutex::new(HashMap::new()), evictions: Default::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides how to answer `request` (Fetch `version`), updating the session it names.
    /// Versions before 7 get no session. Followers get sessions as consumers do (Kafka's
    /// replica fetchers use them), and theirs are privileged: a consumer's new session
    /// never evicts one in use.
    pub fn begin(&self, version: i16, request: &FetchRequest, follower: bool) -> SessionPlan {
        if version < 7 {
            return SessionPlan::Sessionless;
        }
        let (id, epoch) = (request.session_id, request.session_epoch);
        let now = Instant::now();
        match (id, epoch) {
            (0, FINAL_EPOCH) => SessionPlan::Sessionless,
            (_, INITIAL_EPOCH) => {
                // A full request closes the session it names, as Kafka's FetchManager does
                // (franz-go resets a session after a failed fetch by keeping its id with
                // epoch 0), then opens a new one.
                if id != 0 {
                    self.lock().remove(&id);
                }
                if self.slots == 0 {
                    return SessionPlan::Sessionless;
                }
                let mut session = Session::new(now, follower);
                for t in &request.topics {
                    for fp in &t.partitions {
                        session.upsert(TopicKey::of(version, &t.topic, t.topic_id), t, fp);
                    }
                }
                let size = session.partitions.len();
                let mut sessions = self.lock();
                if sessions.len() >= self.slots && !self.evict_for(&mut sessions, size, follower, now) {
                    return SessionPlan::Sessionless;
                }
                let id = new_id(&sessions);
                sessions.insert(id, session);
                SessionPlan::Full { id }
            }
            // An incremental request for no session: Kafka looks session 0 up and finds none.
            (0, _) => SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound),
            (id, FINAL_EPOCH) => {
                self.lock().remove(&id);
                SessionPlan::Sessionless
            }
            (id, epoch) => {
                let mut sessions = self.lock();
                let Some(session) = sessions.get_mut(&id) else {
                    return SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound);
                };
                if epoch != session.next_epoch {
                    return SessionPlan::Refuse(ErrorCode::InvalidFetchSessionEpoch);
                }
                session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                session.last_used = now;
                for forgotten in &request.forgotten_topics_data {
                    let key = TopicKey::of(version, &forgotten.topic, forgotten.topic_id);
                    for p in &forgotten.partitions {
                        session.forget(&key, *p);
                    }
                }
                for t in &request.topics {
                    for fp in &t.partitions {
                        session.upsert(TopicKey::of(version, &t.topic, t.topic_id), t, fp);
                    }
                }
                SessionPlan::Incremental { id, request: session.full_request(request) }
            }
        }
    }

    /// Makes room for a new session of `size` partitions (`privileged`: a follower's), as
    /// Kafka's cache does: the least recently used session goes if it is idle for
    /// [`EVICTION_AGE`]; otherwise the weakest session (unprivileged before privileged,
    /// then fewer partitions) goes if the new one is stronger. False if none may go.
    fn evict_for(
        &self,
        sessions: &mut HashMap<i32, Session>,
        size: usize,
        privileged: bool,
        now: Instant,
    ) -> bool {
        let Some((&oldest, s)) = sessions.iter().min_by_key(|(_, s)| s.last_used) else { return true };
        let victim = if now.duration_since(s.last_used) >= EVICTION_AGE {
            oldest
        } else {
            let strength = |s: &Session| (s.privileged, s.partitions.len());
            let Some((&weakest, w)) = sessions.iter().min_by_key(|(_, s)| (strength(s), s.last_used)) else {
                return true;
            };
            if strength(w) >= (privileged, size) {
                return false;
            }
            weakest
        };
        sessions.remove(&victim);
        self.evictions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// Records what the answer to session `id`'s full request tells the client and,
    /// when `incremental`, removes from `response` every partition with nothing new.
    /// Sets the response's session id.
    pub fn finish(&self, id: i32, version: i16, response: &mut FetchResponse, incremental: bool) {
        response.session_id = id;
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(&id) else { return };
        let mut served = Vec::new();
        for topic in &mut response.responses {
            let key = TopicKey::of(version, &topic.topic, topic.topic_id);
            let Some(slots) = session.index.get(&key) else { continue };
            topic.partitions.retain(|pd| {
                let Some(at) = slots.get(&pd.partition_index).copied() else {
                    return true;
                };
                let Some(p) = session.partitions.get_mut(&at) else { return true };
                let now = sent(pd);
                let changed = p.sent != Some(now) || has_news(pd);
                p.sent = Some(now);
                if pd.records.as_ref().is_some_and(|r| !r.is_empty()) {
                    served.push((p.key.clone(), pd.partition_index));
                }
                !incremental || changed
            });
        }
        session.rotate(&served);
        if incremental {
            response.responses.retain(|t| !t.partitions.is_empty());
        }
    }

    /// Sessions open now and the partitions they hold (`NumIncrementalFetchSessions`,
    /// `NumIncrementalFetchPartitionsCached`), and evictions so far.
    pub fn stats(&self) -> (usize, usize, u64) {
        let sessions = self.lock();
        let partitions = sessions.values().map(|s| s.partitions.len()).sum();
        (sessions.len(), partitions, self.evictions.load(std::sync::atomic::Ordering::Relaxed))
    }
}

fn sent(pd: &PartitionData) -> Sent {
    Sent {
        high_watermark: pd.high_watermark,
        last_stable_offset: pd.last_stable_offset,
        log_start_offset: pd.log_start_offset,
    }
}

/// Whether a partition's answer carries something the client must see whatever it
/// was told before: records, an error, a diverging epoch or a leader.
fn has_news(pd: &PartitionData) -> bool {
    pd.records.as_ref().is_some_and(|r| !r.is_empty())
        || pd.error_code != 0
        || pd.diverging_epoch.epoch >= 0
        || pd.current_leader.leader_id >= 0
        || pd.preferred_read_replica >= 0
}

/// A random positive session id not in use.
fn new_id(sessions: &HashMap<i32, Session>) -> i32 {
    let mut rng = rand::thread_rng();
    loop {
        let id = rng.gen_range(1..i32::MAX);
        if !sessions.contains_key(&id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::fetch::{FetchableTopicResponse, ForgottenTopic};
    use strata_protocol::records::RecordSet;

    const V: i16 = 12;

    fn fp(partition: i32, offset: i64) -> FetchPartition {
        FetchPartition { partition, fetch_offset: offset, partition_max_bytes: 1 << 20, ..Default::default() }
    }

    fn request(id: i32, epoch: i32, topics: &[(&str, Vec<FetchPartition>)]) -> FetchRequest {
        FetchRequest {
            session_id: id,
            session_epoch: epoch,
            topics: topics
                .iter()
                .map(|(t, ps)| FetchTopic {
                    topic: t.to_string(),
                    partitions: ps.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// An answer to `req` where partition `p` of topic `t` has `hw` as its high
    /// watermark and records if `data`.
    fn answer(req: &FetchRequest, state: impl Fn(&str, i32) -> (i64, bool)) -> FetchResponse {
        FetchResponse {
            responses: req
                .topics
                .iter()
                .map(|t| FetchableTopicResponse {
                    topic: t.topic.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|fp| {
                            let (hw, data) = state(&t.topic, fp.partition);
                            PartitionData {
                                partition_index: fp.partition,
                                high_watermark: hw,
                                last_stable_offset: hw,
                                log_start_offset: 0,
                                records: Some(if data {
                                    RecordSet::from(bytes::Bytes::from_static(b"x"))
                                } else {
                                    RecordSet::new()
                                }),
                                ..Default::default()
                            }
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn partitions(r: &FetchResponse) -> Vec<(String, i32)> {
        r.responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), p.partition_index)))
            .collect()
    }

    #[test]
    fn a_session_answers_only_what_changed_and_tracks_positions() {
        let cache = FetchSessionCache::new(10);
        let first = request(0, 0, &[("a", vec![fp(0, 0), fp(1, 0)]), ("b", vec![fp(0, 5)])]);
        let SessionPlan::Full { id } = cache.begin(V, &first, false) else { panic!("a session opens") };
        let mut full = answer(&first, |_, _| (10, false));
        cache.finish(id, V, &mut full, false);
        assert_eq!(full.session_id, id);
        assert_eq!(partitions(&full).len(), 3, "the first answer is full");

        // Nothing changed: an empty incremental answer for the whole set.
        let SessionPlan::Incremental { request: whole, .. } = cache.begin(V, &request(id, 1, &[]), false)
        else {
            panic!("incremental")
        };
        assert_eq!(whole.topics.len(), 2);
        assert_eq!(whole.topics[0].partitions.len(), 2, "the session's partitions, grouped by topic");
        let mut r = answer(&whole, |_, _| (10, false));
        cache.finish(id, V, &mut r, true);
        assert!(r.responses.is_empty(), "{r:?}");

        // a-1 got records and b-0's high watermark moved: those two, nothing else.
        let SessionPlan::Incremental { request: whole, .. } = cache.begin(V, &request(id, 2, &[]), false)
        else {
            panic!()
        };
        let mut r = answer(&whole, |t, p| match (t, p) {
            ("a", 1) => (11, true),
            ("b", 0) => (12, false),
            _ => (10, false),
        });
        cache.finish(id, V, &mut r, true);
        assert_eq!(partitions(&r), vec![("a".into(), 1), ("b".into(), 0)]);

        // The client moves a-1's position; the session's request carries it.
        let SessionPlan::Incremental { request: whole, .. } =
            cache.begin(V, &request(id, 3, &[("a", vec![fp(1, 7)])]), false)
        else {
            panic!()
        };
        let offset = |t: &str, p: i32| {
            whole
                .topics
                .iter()
                .filter(|x| x.topic == t)
                .flat_map(|x| &x.partitions)
                .find(|x| x.partition == p)
                .map(|x| x.fetch_offset)
        };
        assert_eq!(offset("a", 1), Some(7));
        assert_eq!(offset("b", 0), Some(5), "untouched partitions keep theirs");
        assert_eq!(offset("a", 0), Some(0));
    }

    #[test]
    fn partitions_that_returned_records_go_to_the_end_of_the_order() {
        let cache = FetchSessionCache::new(10);
        let first = request(0, 0, &[("a", vec![fp(0, 0), fp(1, 0), fp(2, 0)]), ("b", vec![fp(0, 0)])]);
        let SessionPlan::Full { id } = cache.begin(V, &first, false) else { panic!() };
        let mut r = answer(&first, |t, p| (1, t == "a" && p == 0));
        cache.finish(id, V, &mut r, false);
        let SessionPlan::Incremental { request: whole, .. } = cache.begin(V, &request(id, 1, &[]), false)
        else {
            panic!()
        };
        let order: Vec<(String, i32)> = whole
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), p.partition)))
            .collect();
        // a-0 moved behind a's other partitions; the topic is where its first partition is.
        assert_eq!(order, vec![("a".into(), 1), ("a".into(), 2), ("a".into(), 0), ("b".into(), 0)]);
        // Once a-1 and a-2 are served too, b comes first.
        let mut r = answer(&whole, |t, p| (2, t == "a" && p != 0));
        cache.finish(id, V, &mut r, true);
        let SessionPlan::Incremental { request: whole, .. } = cache.begin(V, &request(id, 2, &[]), false)
        else {
            panic!()
        };
        assert_eq!(whole.topics[0].topic, "b");
    }

    #[test]
    fn forgotten_partitions_leave_and_new_ones_join_and_are_answered_at_once() {
        let cache = FetchSessionCache::new(10);
        let first = request(0, 0, &[("a", vec![fp(0, 0), fp(1, 0)])]);
        let SessionPlan::Full { id } = cache.begin(V, &first, false) else { panic!() };
        cache.finish(id, V, &mut answer(&first, |_, _| (1, false)), false);
        let mut next = request(id, 1, &[("c", vec![fp(2, 0)])]);
        next.forgotten_topics_data =
            vec![ForgottenTopic { topic: "a".into(), partitions: vec![0], ..Default::default() }];
        let SessionPlan::Incremental { request: whole, .. } = cache.begin(V, &next, false) else { panic!() };
        let mut r = answer(&whole, |_, _| (1, false));
        assert_eq!(partitions(&r), vec![("a".into(), 1), ("c".into(), 2)]);
        cache.finish(id, V, &mut r, true);
        assert_eq!(partitions(&r), vec![("c".into(), 2)], "the new partition is answered, a-1 is unchanged");
        assert_eq!(cache.stats(), (1, 2, 0));
    }

    #[test]
    fn wrong_epochs_unknown_ids_and_closing() {
        let cache = FetchSessionCache::new(10);
        let first = request(0, 0, &[("a", vec![fp(0, 0)])]);
        let SessionPlan::Full { id } = cache.begin(V, &first, false) else { panic!() };
        assert!(matches!(
            cache.begin(V, &request(id, 2, &[]), false),
            SessionPlan::Refuse(ErrorCode::InvalidFetchSessionEpoch)
        ));
        assert!(matches!(cache.begin(V, &request(id, 1, &[]), false), SessionPlan::Incremental { .. }));
        assert!(
            matches!(
                cache.begin(V, &request(id, 1, &[]), false),
                SessionPlan::Refuse(ErrorCode::InvalidFetchSessionEpoch)
            ),
            "an epoch is used once"
        );
        assert!(matches!(
            cache.begin(V, &request(id ^ 1, 1, &[]), false),
            SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound)
        ));
        assert!(matches!(
            cache.begin(V, &request(0, 3, &[]), false),
            SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound)
        ));
        assert!(matches!(cache.begin(V, &request(id, -1, &[]), false), SessionPlan::Sessionless), "closed");
        assert!(matches!(
            cache.begin(V, &request(id, 2, &[]), false),
            SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound)
        ));
        assert_eq!(cache.stats().0, 0);
    }

    #[test]
    fn a_full_request_naming_a_session_closes_it_and_opens_a_new_one() {
        let cache = FetchSessionCache::new(10);
        let first = request(0, 0, &[("a", vec![fp(0, 0)])]);
        let SessionPlan::Full { id } = cache.begin(V, &first, false) else { panic!() };
        assert!(matches!(cache.begin(V, &request(id, 1, &[]), false), SessionPlan::Incremental { .. }));
        // franz-go's reset after a failed fetch: the same id, epoch 0, every partition again.
        let again = request(id, 0, &[("a", vec![fp(0, 0)]), ("b", vec![fp(1, 0)])]);
        let SessionPlan::Full { id: new_id } = cache.begin(V, &again, false) else { panic!("refused") };
        assert_ne!(new_id, id);
        assert_eq!(cache.stats().0, 1, "the named session is closed, not kept beside the new one");
        assert!(matches!(
            cache.begin(V, &request(id, 2, &[]), false),
            SessionPlan::Refuse(ErrorCode::FetchSessionIdNotFound)
        ));
        assert!(matches!(cache.begin(V, &request(new_id, 1, &[]), false), SessionPlan::Incremental { .. }));
    }

    #[test]
    fn old_versions_and_a_full_cache_get_no_session() {
        let cache = FetchSessionCache::new(1);
        let one = request(0, 0, &[("a", vec![fp(0, 0), fp(1, 0)])]);
        assert!(matches!(cache.begin(6, &one, false), SessionPlan::Sessionless));
        assert!(matches!(cache.begin(V, &one, false), SessionPlan::Full { .. }));
        let smaller = request(0, 0, &[("b", vec![fp(0, 0)])]);
        assert!(
            matches!(cache.begin(V, &smaller, false), SessionPlan::Sessionless),
            "a busy, larger session stays"
        );
        let larger = request(0, 0, &[("c", vec![fp(0, 0), fp(1, 0), fp(2, 0)])]);
        assert!(
            matches!(cache.begin(V, &larger, false), SessionPlan::Full { .. }),
            "a larger one takes its slot"
        );
        assert_eq!(cache.stats(), (1, 3, 1));
        assert!(matches!(FetchSessionCache::new(0).begin(V, &one, false), SessionPlan::Sessionless));
    }

    #[test]
    fn a_followers_session_is_evicted_only_by_a_larger_followers_session() {
        let cache = FetchSessionCache::new(1);
        let two = request(0, 0, &[("a", vec![fp(0, 0), fp(1, 0)])]);
        assert!(matches!(cache.begin(V, &two, true), SessionPlan::Full { .. }));
        let consumer = request(0, 0, &[("c", vec![fp(0, 0), fp(1, 0), fp(2, 0)])]);
        assert!(
            matches!(cache.begin(V, &consumer, false), SessionPlan::Sessionless),
            "a consumer's larger session does not evict a follower's in use"
        );
        let follower = request(0, 0, &[("b", vec![fp(0, 0), fp(1, 0), fp(2, 0)])]);
        assert!(
            matches!(cache.begin(V, &follower, true), SessionPlan::Full { .. }),
            "a larger follower's does"
        );
        assert_eq!(cache.stats(), (1, 3, 1));
        // And a follower's session evicts a consumer's whatever their sizes.
        let cache = FetchSessionCache::new(1);
        assert!(matches!(cache.begin(V, &consumer, false), SessionPlan::Full { .. }));
        let one = request(0, 0, &[("a", vec![fp(0, 0)])]);
        assert!(matches!(cache.begin(V, &one, true), SessionPlan::Full { .. }));
        assert_eq!(cache.stats(), (1, 1, 1));
    }
}
