//! Tests of the transaction coordinator under deterministic time, through a harness that
//! plays the shell: it executes actions, acknowledges appends and markers (or holds them
//! for the test to complete), keeps the written log (round-tripped through the record
//! bytes), and checks that every request token is answered exactly once.

mod add_partitions;
mod admin;
mod end_txn;
mod init;
mod load;
mod random_ops;
mod record_format;
mod timeouts;
mod two_phase;

use std::collections::{HashMap, HashSet, VecDeque};
use strata_protocol::messages::add_partitions_to_txn::{AddPartitionsToTxnRequest, AddPartitionsToTxnTopic};
use strata_protocol::messages::end_txn::EndTxnRequest;
use strata_protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use strata_protocol::ErrorCode;

use super::records::RecordError;
use super::state::TxnSummary;
use super::*;

/// First producer id the harness hands out.
pub(super) const FIRST_PID: i64 = 1000;
/// Coordinator epoch of the harness's partitions.
pub(super) const COORDINATOR_EPOCH: i32 = 7;
pub(super) const TIMEOUT_MS: i32 = 60_000;
pub(super) const T0: i64 = 1_000_000;

/// 4 partitions, a 1 s abort scan and a short marker backoff.
pub(super) fn config() -> TxnConfig {
    TxnConfig {
        transaction_state_log_num_partitions: 4,
        offsets_topic_num_partitions: 8,
        abort_timed_out_transaction_cleanup_interval_ms: 1_000,
        marker_retry_backoff_ms: 50,
        ..TxnConfig::default()
    }
}

pub(super) fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// A WriteMarkers action as the harness saw it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Markers {
    pub id: MarkerId,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub result: TransactionResult,
    pub partitions: Vec<TopicPartition>,
}

pub(super) struct Harness {
    pub c: TransactionCoordinator,
    pub now: i64,
    next_token: u64,
    issued: HashSet<RequestToken>,
    pub responses: HashMap<RequestToken, Response>,
    /// Records acknowledged so far, in log order, decoded back from their bytes.
    pub log: Vec<(i32, TxnRecord)>,
    /// When false, appends wait in `held` until `ack`/`fail`.
    pub auto_ack: bool,
    pub held: VecDeque<(AppendId, i32, Vec<TxnRecord>)>,
    /// When false, markers wait in `held_markers` until `complete_markers`.
    pub auto_markers: bool,
    pub held_markers: VecDeque<Markers>,
    /// Every WriteMarkers action issued, in order.
    pub markers: Vec<Markers>,
    /// Partitions the topic metadata knows (AddPartitionsToTxn's existence check).
    pub known_topics: Vec<String>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(config())
    }

    pub fn with_config(config: TxnConfig) -> Harness {
        let partitions = config.transaction_state_log_num_partitions;
        let mut next = FIRST_PID;
        let ids = Box::new(move || {
            next += 1;
            Ok(next - 1)
        });
        let mut h = Harness {
            c: TransactionCoordinator::new(config, ids),
            now: T0,
            next_token: 0,
            issued: HashSet::new(),
            responses: HashMap::new(),
            log: Vec::new(),
            auto_ack: true,
            held: VecDeque::new(),
            auto_markers: true,
            held_markers: VecDeque::new(),
            markers: Vec::new(),
            known_topics: vec!["t".into(), "u".into(), CONSUMER_OFFSETS_TOPIC.into()],
        };
        for p in 0..partitions {
            let a = h.c.begin_load(p, COORDINATOR_EPOCH, h.now);
            h.run(a);
            let a = h.c.complete_load(p, h.now);
            h.run(a);
        }
        h
    }

    pub fn meta(&mut self, api_version: i16) -> RequestMeta {
        self.next_token += 1;
        let token = RequestToken(self.next_token);
        self.issued.insert(token);
        RequestMeta { token, api_version }
    }

    /// Executes actions like the shell.
    pub fn run(&mut self, actions: Vec<Action>) {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Respond { token, response } => {
                    assert!(self.issued.contains(&token), "response to unknown token {token:?}");
                    let previous = self.responses.insert(token, response);
                    assert!(previous.is_none(), "token {token:?} answered twice");
                }
                Action::Append { id, partition, records } => {
                    for r in &records {
                        assert_eq!(
                            self.c.partition_for(&r.transactional_id),
                            partition,
                            "record in wrong partition"
                        );
                    }
                    if self.auto_ack {
                        self.write(partition, &records);
                        queue.extend(self.c.append_complete(id, Ok(()), self.now));
                    } else {
                        self.held.push_back((id, partition, records));
                    }
                }
                Action::WriteMarkers {
                    id,
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                    result,
                    partitions,
                    ..
                } => {
                    let m =
                        Markers { id, producer_id, producer_epoch, coordinator_epoch, result, partitions };
                    self.markers.push(m.clone());
                    if self.auto_markers {
                        let results: Vec<_> =
                            m.partitions.iter().map(|p| (p.clone(), ErrorCode::None)).collect();
                        queue.extend(self.c.markers_complete(id, &results, self.now));
                    } else {
                        self.held_markers.push_back(m);
                    }
                }
            }
        }
    }

    /// Appends records to the harness log through their bytes.
    fn write(&mut self, partition: i32, records: &[TxnRecord]) {
        for r in records {
            let decoded = TxnRecord::decode(r.key_bytes(), r.value_bytes()).unwrap().unwrap();
            assert_eq!(&decoded, r, "record does not round-trip");
            self.log.push((partition, decoded));
        }
    }

    /// Acknowledges the oldest held append.
    pub fn ack(&mut self) {
        let (id, partition, records) = self.held.pop_front().expect("no held append");
        self.write(partition, &records);
        let a = self.c.append_complete(id, Ok(()), self.now);
        self.run(a);
    }

    /// Fails the oldest held append with `error`.
    pub fn fail(&mut self, error: ErrorCode) {
        let (id, _, _) = self.held.pop_front().expect("no held append");
        let a = self.c.append_complete(id, Err(error), self.now);
        self.run(a);
    }

    /// Completes the oldest held markers with `error_of(partition)`.
    pub fn complete_markers(&mut self, error_of: impl Fn(&TopicPartition) -> ErrorCode) {
        let m = self.held_markers.pop_front().expect("no held markers");
        let results: Vec<_> = m.partitions.iter().map(|p| (p.clone(), error_of(p))).collect();
        let a = self.c.markers_complete(m.id, &results, self.now);
        self.run(a);
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        let a = self.c.tick(self.now);
        self.run(a);
    }

    pub fn response(&self, token: RequestToken) -> Option<&Response> {
        self.responses.get(&token)
    }

    pub fn init_response(&self, token: RequestToken) -> InitProducerIdResponse {
        match self.response(token) {
            Some(Response::InitProducerId(r)) => r.clone(),
            other => panic!("expected an InitProducerId response, got {other:?}"),
        }
    }

    /// Sends InitProducerId; returns its token.
    pub fn send_init(
        &mut self,
        version: i16,
        id: Option<&str>,
        timeout_ms: i32,
        pid_epoch: (i64, i16),
    ) -> RequestToken {
        let meta = self.meta(version);
        let request = InitProducerIdRequest {
            transactional_id: id.map(str::to_owned),
            transaction_timeout_ms: timeout_ms,
            producer_id: pid_epoch.0,
            producer_epoch: pid_epoch.1,
            ..Default::default()
        };
        let a = self.c.init_producer_id(&meta, &request, self.now);
        self.run(a);
        meta.token
    }

    /// InitProducerId v6 (KIP-939) with the two-phase-commit flags; its response.
    pub fn init_2pc(
        &mut self,
        id: &str,
        enable_2pc: bool,
        keep_prepared_txn: bool,
    ) -> InitProducerIdResponse {
        let meta = self.meta(6);
        let request = InitProducerIdRequest {
            transactional_id: Some(id.to_owned()),
            transaction_timeout_ms: TIMEOUT_MS,
            enable_2pc,
            keep_prepared_txn,
            ..Default::default()
        };
        let a = self.c.init_producer_id(&meta, &request, self.now);
        self.run(a);
        self.init_response(meta.token)
    }

    /// InitProducerId v4 without KIP-360 fields; returns (producer id, epoch) or panics.
    pub fn init(&mut self, id: &str) -> (i64, i16) {
        let token = self.send_init(4, Some(id), TIMEOUT_MS, (-1, -1));
        let r = self.init_response(token);
        assert_eq!(r.error_code, 0, "InitProducerId failed: {r:?}");
        (r.producer_id, r.producer_epoch)
    }

    /// InitProducerId v4 answered with an error: its code.
    pub fn init_error(&mut self, version: i16, id: &str, pid_epoch: (i64, i16)) -> i16 {
        let token = self.send_init(version, Some(id), TIMEOUT_MS, pid_epoch);
        self.init_response(token).error_code
    }

    /// AddPartitionsToTxn at `version` (<4); returns its token.
    pub fn send_add(
        &mut self,
        version: i16,
        id: &str,
        pid_epoch: (i64, i16),
        parts: &[(&str, i32)],
    ) -> RequestToken {
        let meta = self.meta(version);
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for (topic, p) in parts {
            match topics.iter_mut().find(|t| t.name == *topic) {
                Some(t) => t.partitions.push(*p),
                None => topics.push(AddPartitionsToTxnTopic { name: (*topic).into(), partitions: vec![*p] }),
            }
        }
        let request = AddPartitionsToTxnRequest {
            v3_and_below_transactional_id: id.into(),
            v3_and_below_producer_id: pid_epoch.0,
            v3_and_below_producer_epoch: pid_epoch.1,
            v3_and_below_topics: topics,
            ..Default::default()
        };
        let known = self.known_topics.clone();
        let exists = move |topic: &str, p: i32| known.iter().any(|t| t == topic) && (0..16).contains(&p);
        let a = self.c.add_partitions_to_txn(&meta, &request, &exists, self.now);
        self.run(a);
        meta.token
    }

    /// The per-partition errors of a v0-3 AddPartitionsToTxn response, sorted.
    pub fn add_errors(&self, token: RequestToken) -> Vec<(String, i32, i16)> {
        let Some(Response::AddPartitionsToTxn(r)) = self.response(token) else {
            panic!("expected an AddPartitionsToTxn response, got {:?}", self.response(token));
        };
        let mut out: Vec<_> = r
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| (t.name.clone(), p.partition_index, p.partition_error_code))
            })
            .collect();
        out.sort();
        out
    }

    /// AddPartitionsToTxn v3 that must succeed.
    pub fn add(&mut self, id: &str, pid_epoch: (i64, i16), parts: &[(&str, i32)]) {
        let token = self.send_add(3, id, pid_epoch, parts);
        let errors = self.add_errors(token);
        assert!(errors.iter().all(|e| e.2 == 0), "AddPartitionsToTxn failed: {errors:?}");
    }

    /// EndTxn at `version`; returns its token.
    pub fn send_end(&mut self, version: i16, id: &str, pid_epoch: (i64, i16), commit: bool) -> RequestToken {
        let meta = self.meta(version);
        let request = EndTxnRequest {
            transactional_id: id.into(),
            producer_id: pid_epoch.0,
            producer_epoch: pid_epoch.1,
            committed: commit,
        };
        let a = self.c.end_txn(&meta, &request, self.now);
        self.run(a);
        meta.token
    }

    /// The error code of an EndTxn response.
    pub fn end_error(&self, token: RequestToken) -> i16 {
        match self.response(token) {
            Some(Response::EndTxn(r)) => r.error_code,
            other => panic!("expected an EndTxn response, got {other:?}"),
        }
    }

    /// EndTxn v3 answered: its error code.
    pub fn end(&mut self, id: &str, pid_epoch: (i64, i16), commit: bool) -> i16 {
        let token = self.send_end(3, id, pid_epoch, commit);
        self.end_error(token)
    }

    pub fn issued_count(&self) -> u64 {
        self.issued.len() as u64
    }

    pub fn state(&self, id: &str) -> TxnState {
        self.c.transaction(id).expect("unknown transactional id").state
    }

    /// States of the records written for `id`, in log order (None for tombstones).
    pub fn logged_states(&self, id: &str) -> Vec<Option<TxnState>> {
        self.log
            .iter()
            .filter(|(_, r)| r.transactional_id == id)
            .map(|(_, r)| r.value.as_ref().map(|v| v.state().unwrap()))
            .collect()
    }
}

pub(super) fn code(e: ErrorCode) -> i16 {
    e.code()
}

#[test]
fn the_coordinator_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<TransactionCoordinator>();
    assert_send::<Action>();
}
