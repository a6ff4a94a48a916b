//! Broker lifecycle on the active controller: registration, heartbeats, fencing of
//! silent brokers, unfencing of caught-up ones, and controlled shutdown (Kafka's
//! `ClusterControlManager` and `BrokerHeartbeatManager`).
//!
//! Heartbeat times are the active controller's soft state: they are not in the metadata
//! log. A controller that becomes active gives every registered broker a fresh session,
//! so a leader change never fences a broker that is still heartbeating.

use super::election;
use super::pending::Pending;
use super::ControllerState;
use crate::metadata::{BrokerRegistrationRecord, Endpoint, MetadataImage, MetadataRecord};
use std::sync::Arc;
use strata_protocol::ErrorCode;

/// A BrokerRegistration request, as the controller needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `node.id`.
    pub node_id: i32,
    /// The cluster the broker believes it belongs to (from its `meta.properties`), if any.
    pub cluster_id: Option<String>,
    /// Random per process start.
    pub incarnation_id: String,
    /// Its listeners.
    pub endpoints: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// A BrokerHeartbeat request, as the controller needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// The broker.
    pub node_id: i32,
    /// Its registration epoch.
    pub broker_epoch: i64,
    /// Highest metadata log index it has applied.
    pub current_metadata_offset: i64,
    /// It is not ready to lead or follow yet (still starting up).
    pub want_fence: bool,
    /// It is shutting down (SIGTERM).
    pub want_shut_down: bool,
}

/// The heartbeat's answer, as it will be once the decided records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeartbeatReply {
    /// NONE, or STALE_BROKER_EPOCH (re-register), ...
    pub error: Option<ErrorCode>,
    /// The broker has applied the metadata log up to its registration.
    pub is_caught_up: bool,
    /// The broker is fenced.
    pub is_fenced: bool,
    /// A controlled shutdown is complete: the broker may exit.
    pub should_shut_down: bool,
}

/// Per-broker soft state.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Session {
    /// Epoch of the registration the session belongs to.
    epoch: i64,
    /// Last heartbeat (or registration / controller takeover) time.
    last_contact_ms: i64,
    /// Metadata index after which a broker in controlled shutdown may exit.
    shutdown_offset: Option<u64>,
}

impl ControllerState {
    /// Validates a registration; the records to write, or the error to answer.
    pub fn register(
        &mut self,
        image: &Arc<MetadataImage>,
        r: &Registration,
        now_ms: i64,
    ) -> Result<Vec<MetadataRecord>, (ErrorCode, String)> {
        if let (Some(theirs), Some(ours)) = (&r.cluster_id, &image.cluster_id) {
            if theirs != ours {
                return Err((
                    ErrorCode::InconsistentClusterId,
                    format!("broker {} belongs to cluster {theirs}, this is cluster {ours}", r.node_id),
                ));
            }
        }
        let mut pending = Pending::new(image);
        if let Some(existing) = image.broker(r.node_id) {
            let restarted = existing.incarnation_id != r.incarnation_id && !existing.fenced;
            let session_valid = self.sessions.get(&r.node_id).is_some_and(|s| {
                s.epoch == existing.epoch && now_ms - s.last_contact_ms < self.settings.session_timeout_ms
            });
            let old_is_dead = self.settings.local_broker == Some(r.node_id);
            if restarted && session_valid && !old_is_dead {
                return Err((
                    ErrorCode::DuplicateBrokerRegistration,
                    format!(
                        "another broker is registered with node id {} and its session has not expired",
                        r.node_id
                    ),
                ));
            }
            if restarted {
                // The old incarnation went away uncleanly: fence it first, moving its
                // leaderships (with new leader epochs) as a session expiry would, so the new
                // one comes back as a follower or by a fresh election, never as the old leader.
                pending
                    .push(MetadataRecord::FenceBroker { node_id: r.node_id, broker_epoch: existing.epoch });
                self.move_away(&mut pending, r.node_id);
            }
        }
        pending.push(MetadataRecord::RegisterBroker(BrokerRegistrationRecord {
            node_id: r.node_id,
            incarnation_id: r.incarnation_id.clone(),
            endpoints: r.endpoints.clone(),
            rack: r.rack.clone(),
        }));
        Ok(pending.into_records())
    }

    /// A registration was written with `epoch`: its session starts now.
    pub fn registered(&mut self, node_id: i32, epoch: i64, now_ms: i64) {
        self.sessions.insert(node_id, Session { epoch, last_contact_ms: now_ms, shutdown_offset: None });
    }

    /// Handles a heartbeat: the records it calls for and the answer.
    pub fn heartbeat(
        &mut self,
        image: &Arc<MetadataImage>,
        hb: &Heartbeat,
        now_ms: i64,
    ) -> (Vec<MetadataRecord>, HeartbeatReply) {
        let Some(broker) = image.broker(hb.node_id).filter(|b| b.epoch == hb.broker_epoch) else {
            let reply = HeartbeatReply { error: Some(ErrorCode::StaleBrokerEpoch), ..Default::default() };
            return (Vec::new(), reply);
        };
        let session = self.sessions.entry(hb.node_id).or_default();
        if session.epoch != broker.epoch {
            *session = Session { epoch: broker.epoch, ..Session::default() };
        }
        session.last_contact_ms = now_ms;
        let is_caught_up = hb.current_metadata_offset >= broker.epoch;
        let mut reply =
            HeartbeatReply { error: None, is_caught_up, is_fenced: broker.fenced, should_shut_down: false };
        let mut pending = Pending::new(image);
        if hb.want_shut_down {
            if !broker.in_controlled_shutdown && !broker.fenced {
                pending.push(MetadataRecord::BeginControlledShutdown {
                    node_id: hb.node_id,
                    broker_epoch: broker.epoch,
                });
                self.move_away(&mut pending, hb.node_id);
                // The shutdown offset is set once the records are written (shutdown_written).
            } else if broker.fenced {
                reply.should_shut_down = true;
            } else {
                let offset = *session.shutdown_offset.get_or_insert(image.applied_index);
                if hb.current_metadata_offset >= offset as i64 && !image.leads_movable(hb.node_id) {
                    pending.push(MetadataRecord::FenceBroker {
                        node_id: hb.node_id,
                        broker_epoch: broker.epoch,
                    });
                    reply.should_shut_down = true;
                    reply.is_fenced = true;
                }
            }
        } else if broker.fenced && !hb.want_fence && is_caught_up && !broker.in_controlled_shutdown {
            pending.push(MetadataRecord::UnfenceBroker { node_id: hb.node_id, broker_epoch: broker.epoch });
            self.revive_offline(&mut pending);
            reply.is_fenced = false;
        }
        (pending.into_records(), reply)
    }

    /// The BeginControlledShutdown records of `node_id` were written at `index`.
    pub fn shutdown_written(&mut self, node_id: i32, index: u64) {
        if let Some(s) = self.sessions.get_mut(&node_id) {
            s.shutdown_offset = Some(index);
        }
    }

    /// Fences every unfenced broker whose session expired, moving its leaderships and
    /// taking it out of ISRs.
    pub fn expire_sessions(&mut self, image: &Arc<MetadataImage>, now_ms: i64) -> Vec<MetadataRecord> {
        let mut pending = Pending::new(image);
        let timeout = self.settings.session_timeout_ms;
        let expired: Vec<(i32, i64)> = image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter(|b| {
                let s = self.sessions.entry(b.node_id).or_insert(Session {
                    epoch: b.epoch,
                    last_contact_ms: now_ms,
                    shutdown_offset: None,
                });
                s.epoch == b.epoch && now_ms - s.last_contact_ms >= timeout
            })
            .map(|b| (b.node_id, b.epoch))
            .collect();
        for (node_id, broker_epoch) in expired {
            tracing::warn!(
                node_id,
                broker_epoch,
                session_timeout_ms = timeout,
                "broker session expired; fencing it"
            );
            pending.push(MetadataRecord::FenceBroker { node_id, broker_epoch });
            self.move_away(&mut pending, node_id);
        }
        pending.into_records()
    }

    /// Gives every registered broker a fresh session (this controller just became active).
    pub fn reset_sessions(&mut self, image: &MetadataImage, now_ms: i64) {
        self.sessions.clear();
        for b in image.brokers.values() {
            self.sessions.insert(
                b.node_id,
                Session { epoch: b.epoch, last_contact_ms: now_ms, shutdown_offset: None },
            );
        }
    }

    /// Takes `node_id` out of every ISR (unless it is the last member) and moves its
    /// leaderships to other ISR members.
    pub(super) fn move_away(&self, pending: &mut Pending, node_id: i32) {
        for (topic, p) in pending.partitions() {
            if p.isr.contains(&node_id) || p.leader == node_id {
                let unclean = self.unclean_allowed(pending.image(), &topic);
                let change = election::without_broker(pending.image(), &p, node_id, unclean);
                pending.push_partition(change);
            }
        }
    }

    /// Elects leaders for offline partitions that can have one now.
    pub(super) fn revive_offline(&self, pending: &mut Pending) {
        for (topic, p) in pending.partitions() {
            if p.leader == election::NO_LEADER {
                let unclean = self.unclean_allowed(pending.image(), &topic);
                let change = election::revive(pending.image(), &p, unclean);
                pending.push_partition(change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cluster, settings, topic};
    use super::super::ControllerSettings;
    use super::*;

    #[test]
    fn a_new_registration_starts_fenced_and_a_caught_up_heartbeat_unfences_it() {
        let mut image = MetadataImage::default();
        let mut state = ControllerState::new(settings());
        let r = Registration {
            node_id: 1,
            cluster_id: None,
            incarnation_id: "a".into(),
            endpoints: vec![],
            rack: None,
        };
        let records = state.register(&Arc::new(image.clone()), &r, 0).expect("accepted");
        let epoch = image.apply_batch(5, &records).broker_epoch.expect("epoch");
        state.registered(1, epoch, 0);
        let image = Arc::new(image);
        let hb = Heartbeat {
            node_id: 1,
            broker_epoch: epoch,
            current_metadata_offset: 4,
            want_fence: false,
            want_shut_down: false,
        };
        let (records, reply) = state.heartbeat(&image, &hb, 10);
        assert!(records.is_empty() && reply.is_fenced && !reply.is_caught_up, "not caught up yet");
        let hb = Heartbeat { current_metadata_offset: 5, ..hb };
        let (records, reply) = state.heartbeat(&image, &hb, 20);
        assert_eq!(records, vec![MetadataRecord::UnfenceBroker { node_id: 1, broker_epoch: epoch }]);
        assert!(!reply.is_fenced && reply.is_caught_up);
        let stale = Heartbeat { broker_epoch: epoch - 1, ..hb };
        assert_eq!(state.heartbeat(&image, &stale, 30).1.error, Some(ErrorCode::StaleBrokerEpoch));
    }

    #[test]
    fn a_second_process_with_the_same_id_is_refused_while_the_first_heartbeats() {
        let (image, mut state) = cluster(&[1, 2, 3]);
        let image = Arc::new(image);
        state.reset_sessions(&image, 1000);
        let r = Registration {
            node_id: 2,
            cluster_id: None,
            incarnation_id: "other".into(),
            endpoints: vec![],
            rack: None,
        };
        let err = state.register(&image, &r, 2000).expect_err("duplicate");
        assert_eq!(err.0, ErrorCode::DuplicateBrokerRegistration);
        // Once the session expired the restart is accepted.
        assert!(state.register(&image, &r, 1000 + settings().session_timeout_ms).is_ok());
        let wrong = Registration { cluster_id: Some("elsewhere".into()), ..r };
        assert_eq!(
            state.register(&image, &wrong, 99_999).expect_err("cluster").0,
            ErrorCode::InconsistentClusterId
        );
    }

    #[test]
    fn a_restart_of_the_broker_in_the_controllers_own_process_fences_the_old_one_at_once() {
        let (mut image, _) = cluster(&[1, 2]);
        topic(&mut image, "t", &[vec![1, 2], vec![1]]);
        let before = image.partition("t", 0).expect("p0").leader_epoch;
        let image = Arc::new(image);
        let mut state = ControllerState::new(ControllerSettings { local_broker: Some(1), ..settings() });
        state.reset_sessions(&image, 1000);
        let old_epoch = image.broker(1).expect("registered").epoch;
        let r = Registration {
            node_id: 1,
            cluster_id: None,
            incarnation_id: "restarted".into(),
            endpoints: vec![],
            rack: None,
        };
        // Well within the old session: accepted, the old incarnation fenced first.
        let records = state.register(&image, &r, 1500).expect("the old incarnation is dead");
        assert_eq!(records[0], MetadataRecord::FenceBroker { node_id: 1, broker_epoch: old_epoch });
        assert!(
            matches!(records.last(), Some(MetadataRecord::RegisterBroker(b)) if b.incarnation_id == "restarted")
        );
        let mut next = (*image).clone();
        next.apply_batch(900, &records);
        let moved = next.partition("t", 0).expect("p0");
        assert_eq!(
            (moved.leader, moved.isr.clone()),
            (2, vec![2]),
            "leadership moved to the other ISR member"
        );
        let alone = next.partition("t", 1).expect("p1");
        assert_eq!(alone.leader, election::NO_LEADER, "its only replica waits for the new incarnation");
        assert!(moved.leader_epoch > before);
        // A broker in another process still waits out the old session.
        let r2 = Registration { node_id: 2, incarnation_id: "other".into(), ..r };
        assert_eq!(
            state.register(&image, &r2, 1500).expect_err("duplicate").0,
            ErrorCode::DuplicateBrokerRegistration
        );
    }

    #[test]
    fn a_silent_broker_is_fenced_and_its_leaderships_move() {
        let (mut image, mut state) = cluster(&[1, 2, 3]);
        let t = topic(&mut image, "t", &[vec![1, 2, 3], vec![2, 3, 1]]);
        let image = Arc::new(image);
        state.reset_sessions(&image, 0);
        for node in [2, 3] {
            let b = image.broker(node).expect("b");
            let hb = Heartbeat {
                node_id: node,
                broker_epoch: b.epoch,
                current_metadata_offset: 100,
                want_fence: false,
                want_shut_down: false,
            };
            state.heartbeat(&image, &hb, 8000);
        }
        assert!(state.expire_sessions(&image, 8999).is_empty());
        let records = state.expire_sessions(&image, 9000);
        let mut next = (*image).clone();
        next.apply_batch(200, &records);
        assert!(next.broker(1).expect("1").fenced);
        let p0 = next.partition("t", 0).expect("p0");
        assert_eq!((p0.leader, p0.isr.clone(), p0.leader_epoch), (2, vec![2, 3], 1));
        let p1 = next.partition("t", 1).expect("p1");
        assert_eq!((p1.leader, p1.isr.clone(), p1.leader_epoch), (2, vec![2, 3], 0));
        let _ = t;
    }

    #[test]
    fn controlled_shutdown_moves_leadership_then_lets_the_broker_go() {
        let (mut image, mut state) = cluster(&[1, 2]);
        topic(&mut image, "t", &[vec![1, 2]]);
        let image = Arc::new(image);
        let epoch = image.broker(1).expect("1").epoch;
        let hb = Heartbeat {
            node_id: 1,
            broker_epoch: epoch,
            current_metadata_offset: 100,
            want_fence: false,
            want_shut_down: true,
        };
        let (records, reply) = state.heartbeat(&image, &hb, 0);
        assert!(!reply.should_shut_down);
        let mut next = (*image).clone();
        next.apply_batch(300, &records);
        state.shutdown_written(1, 300);
        assert_eq!(next.partition("t", 0).expect("p").leader, 2);
        let next = Arc::new(next);
        let (_, reply) = state.heartbeat(&next, &Heartbeat { current_metadata_offset: 299, ..hb }, 10);
        assert!(!reply.should_shut_down, "has not seen the change yet");
        let (records, reply) = state.heartbeat(&next, &Heartbeat { current_metadata_offset: 300, ..hb }, 20);
        assert!(reply.should_shut_down);
        assert_eq!(records, vec![MetadataRecord::FenceBroker { node_id: 1, broker_epoch: epoch }]);
    }

    #[test]
    fn an_unfenced_isr_member_revives_an_offline_partition() {
        let (mut image, mut state) = cluster(&[2]);
        topic(&mut image, "t", &[vec![1, 2]]);
        // Broker 1 registered but fenced; the partition's ISR is [1] and it is offline.
        let id = image.topic("t").expect("t").id;
        image.apply_batch(
            400,
            &[MetadataRecord::Partition(crate::metadata::PartitionRecord {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1],
                leader: -1,
                leader_epoch: 3,
                partition_epoch: 3,
                adding_replicas: vec![],
                removing_replicas: vec![],
            })],
        );
        let records = state
            .register(
                &Arc::new(image.clone()),
                &Registration {
                    node_id: 1,
                    cluster_id: None,
                    incarnation_id: "x".into(),
                    endpoints: vec![],
                    rack: None,
                },
                0,
            )
            .expect("ok");
        let epoch = image.apply_batch(401, &records).broker_epoch.expect("epoch");
        let image = Arc::new(image);
        let hb = Heartbeat {
            node_id: 1,
            broker_epoch: epoch,
            current_metadata_offset: 401,
            want_fence: false,
            want_shut_down: false,
        };
        let (records, _) = state.heartbeat(&image, &hb, 0);
        let mut next = (*image).clone();
        next.apply_batch(402, &records);
        let p = next.partition("t", 0).expect("p");
        assert_eq!((p.leader, p.leader_epoch), (1, 4));
    }
}
