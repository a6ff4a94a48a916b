//! Group membership (the classic protocol) as a pure state machine, like the broker's
//! group coordinator: responses, times and the application's progress go in; the next
//! request to send and the rebalance callbacks to run come out. No sockets, no clock:
//! the async shell in the consumer's coordinator module executes what it asks for.
//!
//! The life of a member, as the Java consumer's `AbstractCoordinator` and
//! `ConsumerCoordinator` live it:
//! - find the coordinator (again after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or a
//!   lost connection);
//! - before joining, "prepare": an eager protocol revokes everything owned, a
//!   cooperative one nothing; a member whose generation was reset (UNKNOWN_MEMBER_ID,
//!   ILLEGAL_GENERATION) has *lost* what it owned. These callbacks run in the
//!   application's `poll` and the join waits for them, so offsets can be committed there;
//! - JoinGroup; MEMBER_ID_REQUIRED (KIP-394) hands out the member id to join again with;
//! - the leader runs the assignor on every member's subscription, then SyncGroup;
//! - with the assignment: eager members are assigned all of it; cooperative ones revoke
//!   what they lost and are assigned what they gained, and rejoin at once when they
//!   revoked anything, so the partitions reach their new owner (KIP-429);
//! - heartbeats every `heartbeat.interval.ms`; REBALANCE_IN_PROGRESS means rejoin,
//!   UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION mean partitions lost and rejoin,
//!   FENCED_INSTANCE_ID (another process took this static member's id) is fatal;
//! - on close a dynamic member sends LeaveGroup; a static one does not (KIP-345), so a
//!   restart within the session timeout keeps its assignment without a rebalance.

use crate::consumer::assignor::{GroupAssignment, MemberSubscription};
use crate::consumer::config::AssignmentStrategy;
use crate::consumer_protocol::{Assignment, Subscription, TopicPartitions, PROTOCOL_TYPE, VERSION};
use crate::error::{Error, Result};
use crate::types::{ConsumerGroupMetadata, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use strata_protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use strata_protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use strata_protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use strata_protocol::messages::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
use strata_protocol::ErrorCode;

/// The generation of a member outside any generation.
pub const NO_GENERATION: i32 = -1;

/// What the membership needs from its settings.
///
/// ```
/// use std::time::Duration;
/// use strata_client::consumer::membership::MembershipConfig;
/// use strata_client::consumer::AssignmentStrategy;
/// let c = MembershipConfig {
///     group_id: "g".into(),
///     group_instance_id: None,
///     session_timeout: Duration::from_secs(45),
///     rebalance_timeout: Duration::from_secs(300),
///     heartbeat_interval: Duration::from_secs(3),
///     strategies: vec![AssignmentStrategy::Range],
///     rack: None,
///     retry_backoff: Duration::from_millis(100),
///     max_poll_interval: Duration::from_secs(300),
/// };
/// assert_eq!(c.group_id, "g");
/// ```
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// The rebalance timeout sent in JoinGroup.
    pub rebalance_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `partition.assignment.strategy`, in preference order.
    pub strategies: Vec<AssignmentStrategy>,
    /// `client.rack`, sent in the subscription.
    pub rack: Option<String>,
    /// Pause before retrying after a retriable error.
    pub retry_backoff: Duration,
    /// `max.poll.interval.ms`: a member whose application has not polled for this long
    /// leaves the group, as the Java consumer's heartbeat thread makes it.
    pub max_poll_interval: Duration,
}

/// A request (or a computation) the shell must carry out.
///
/// ```
/// # use std::time::{Duration, Instant};
/// # use strata_client::consumer::membership::{Action, Membership, MembershipConfig};
/// # use strata_client::consumer::AssignmentStrategy;
/// # let config = MembershipConfig { group_id: "g".into(), group_instance_id: None,
/// #     session_timeout: Duration::from_secs(45), rebalance_timeout: Duration::from_secs(300),
/// #     heartbeat_interval: Duration::from_secs(3), strategies: vec![AssignmentStrategy::Range],
/// #     rack: None, retry_backoff: Duration::from_millis(100), max_poll_interval: Duration::from_secs(300) };
/// let mut m = Membership::new(config, vec!["t".into()]);
/// let now = Instant::now();
/// assert!(matches!(m.next_action(now), Action::FindCoordinator));
/// m.on_coordinator(now, Ok(()));
/// let Action::Join(join) = m.next_action(now) else { panic!() };
/// assert_eq!((join.member_id.as_str(), join.protocol_type.as_str()), ("", "consumer"));
/// ```
#[derive(Debug, Clone)]
pub enum Action {
    /// Look the coordinator up (forgetting any cached one), then call
    /// [`Membership::on_coordinator`].
    FindCoordinator,
    /// Send JoinGroup, then call [`Membership::on_join`].
    Join(JoinGroupRequest),
    /// This member leads: run `strategy` on `members` and call
    /// [`Membership::on_assignment`].
    Assign {
        /// The protocol the coordinator chose.
        strategy: AssignmentStrategy,
        /// Every member's subscription.
        members: Vec<MemberSubscription>,
    },
    /// Send SyncGroup, then call [`Membership::on_sync`].
    Sync(SyncGroupRequest),
    /// Send Heartbeat, then call [`Membership::on_heartbeat`].
    Heartbeat(HeartbeatRequest),
    /// Send LeaveGroup (the answer does not matter): the application stopped polling
    /// for longer than `max.poll.interval.ms`.
    Leave(LeaveGroupRequest),
    /// Nothing before this time (or before another input).
    WaitUntil(Instant),
    /// Nothing until another input (a response, the callbacks done, a subscription).
    Idle,
}

/// A rebalance callback for the application's `poll` to run; the membership waits for
/// [`Membership::callbacks_done`] before it goes on.
///
/// ```
/// use strata_client::consumer::membership::Event;
/// use strata_client::TopicPartition;
/// let e = Event::Revoked(vec![TopicPartition::new("t", 0)]);
/// assert!(matches!(e, Event::Revoked(ref ps) if ps.len() == 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Give these up (commit their offsets now if you want to).
    Revoked(Vec<TopicPartition>),
    /// These are now yours.
    Assigned(Vec<TopicPartition>),
    /// These were taken away without a chance to commit (the member was fenced out of
    /// its generation); someone else may already own them.
    Lost(Vec<TopicPartition>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Must join; `prepared` says whether the pre-join callbacks were queued.
    Unjoined {
        prepared: bool,
    },
    Joining,
    Assigning,
    Syncing,
    Stable,
    Left,
}

/// One consumer's membership of its group: see the module documentation for its life,
/// and [`Action`] for a first step.
///
/// ```
/// # use std::time::{Duration, Instant};
/// # use strata_client::consumer::membership::{Membership, MembershipConfig};
/// # use strata_client::consumer::AssignmentStrategy;
/// # let config = MembershipConfig { group_id: "g".into(), group_instance_id: Some("i".into()),
/// #     session_timeout: Duration::from_secs(45), rebalance_timeout: Duration::from_secs(300),
/// #     heartbeat_interval: Duration::from_secs(3), strategies: vec![AssignmentStrategy::CooperativeSticky],
/// #     rack: None, retry_backoff: Duration::from_millis(100), max_poll_interval: Duration::from_secs(300) };
/// let mut m = Membership::new(config, vec!["t".into()]);
/// assert!(m.is_cooperative());
/// assert!(m.leave().is_none(), "static members never send LeaveGroup");
/// ```
#[derive(Debug)]
pub struct Membership {
    config: MembershipConfig,
    topics: Vec<String>,
    joined_topics: Vec<String>,
    coordinator_known: bool,
    phase: Phase,
    member_id: String,
    generation: i32,
    protocol: Option<AssignmentStrategy>,
    owned: BTreeSet<TopicPartition>,
    pending: Option<Action>,
    events: VecDeque<Event>,
    awaiting_callbacks: bool,
    heartbeat_in_flight: bool,
    last_poll: Option<Instant>,
    poll_expired: bool,
    assignment_snapshot: Option<BTreeMap<String, usize>>,
    next_heartbeat: Option<Instant>,
    retry_at: Option<Instant>,
    fatal: Option<Error>,
}

impl Membership {
    /// A member that has not joined yet and subscribes to `topics`.
    pub fn new(config: MembershipConfig, topics: Vec<String>) -> Membership {
        Membership {
            config,
            topics,
            joined_topics: Vec::new(),
            coordinator_known: false,
            phase: Phase::Unjoined { prepared: false },
            member_id: String::new(),
            generation: NO_GENERATION,
            protocol: None,
            owned: BTreeSet::new(),
            pending: None,
            events: VecDeque::new(),
            awaiting_callbacks: false,
            heartbeat_in_flight: false,
            next_heartbeat: None,
            retry_at: None,
            fatal: None,
            last_poll: None,
            poll_expired: false,
            assignment_snapshot: None,
        }
    }

    /// True if every configured strategy is cooperative.
    pub fn is_cooperative(&self) -> bool {
        self.config.strategies.iter().all(|s| s.is_cooperative())
    }

    /// The partitions this member owns now.
    pub fn owned(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// The subscribed topics.
    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// True between a completed SyncGroup and the next rebalance.
    pub fn is_stable(&self) -> bool {
        self.phase == Phase::Stable
    }

    /// The error that ended the membership (FENCED_INSTANCE_ID, an authorization
    /// failure, ...), if any.
    pub fn fatal(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// The generation and member id to commit offsets with, and for a transactional
    /// producer's `send_offsets_to_transaction`.
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    /// Changes the subscription: the member rejoins with it.
    pub fn subscribe(&mut self, topics: Vec<String>) {
        if topics != self.topics {
            self.topics = topics;
            self.request_rejoin();
        }
    }

    /// Asks for a rebalance (new subscription, metadata change, a revoke to finish).
    pub fn request_rejoin(&mut self) {
        if matches!(self.phase, Phase::Stable) {
            self.phase = Phase::Unjoined { prepared: false };
        }
    }

    /// The callbacks to run now (the shell runs them, then calls
    /// [`Membership::callbacks_done`]).
    pub fn take_events(&mut self) -> Vec<Event> {
        self.events.drain(..).collect()
    }

    /// True while queued callbacks have not been run.
    pub fn awaiting_callbacks(&self) -> bool {
        self.awaiting_callbacks
    }

    /// The application ran the callbacks taken with [`Membership::take_events`].
    pub fn callbacks_done(&mut self) {
        if self.events.is_empty() {
            self.awaiting_callbacks = false;
        }
    }

    /// The application polled at `now`: a member that left after a poll timeout joins
    /// again.
    pub fn on_poll(&mut self, now: Instant) {
        self.last_poll = Some(now);
        self.poll_expired = false;
    }

    /// The leader's view of the partition counts it assigned with (Java's assignment
    /// snapshot).
    pub fn set_assignment_snapshot(&mut self, counts: BTreeMap<String, usize>) {
        self.assignment_snapshot = Some(counts);
    }

    /// Fresh metadata for the subscribed topics: a leader whose assignment was made with
    /// other partition counts (partitions added, a topic created) rebalances again.
    pub fn on_metadata(&mut self, counts: &BTreeMap<String, usize>) {
        if self.phase != Phase::Stable {
            return;
        }
        if let Some(snapshot) = &self.assignment_snapshot {
            let changed = self
                .topics
                .iter()
                .any(|t| snapshot.get(t).copied().unwrap_or(0) != counts.get(t).copied().unwrap_or(0));
            if changed {
                self.assignment_snapshot = None;
                self.request_rejoin();
            }
        }
    }

    /// What to do next at `now`.
    pub fn next_action(&mut self, now: Instant) -> Action {
        if self.fatal.is_some() || self.phase == Phase::Left || self.poll_expired {
            return Action::Idle;
        }
        let poll_deadline = self.last_poll.map(|t| t + self.config.max_poll_interval);
        if poll_deadline.is_some_and(|d| d <= now) && self.generation != NO_GENERATION {
            tracing::warn!(group = %self.config.group_id, "no poll within max.poll.interval.ms: leaving the group");
            self.poll_expired = true;
            let leave = (self.config.group_instance_id.is_none() && !self.member_id.is_empty())
                .then(|| self.leave_request("consumer poll timeout has expired"));
            self.reset(true);
            self.pending = None;
            return leave.map(Action::Leave).unwrap_or(Action::Idle);
        }
        // Callbacks hold back the rebalance, not the heartbeats: a member whose
        // application is slow to poll after an assignment stays in the group.
        if self.awaiting_callbacks && self.phase != Phase::Stable {
            return Action::Idle;
        }
        if let Some(a) = self.pending.take() {
            return a;
        }
        if let Some(at) = self.retry_at {
            if at > now {
                return Action::WaitUntil(at);
            }
            self.retry_at = None;
        }
        match self.phase {
            Phase::Unjoined { prepared: false } => {
                self.prepare_rejoin();
                self.phase = Phase::Unjoined { prepared: true };
                if self.awaiting_callbacks {
                    return Action::Idle;
                }
                self.next_action(now)
            }
            Phase::Unjoined { prepared: true } => {
                if !self.coordinator_known {
                    return Action::FindCoordinator;
                }
                self.phase = Phase::Joining;
                self.joined_topics = self.topics.clone();
                Action::Join(self.join_request())
            }
            Phase::Joining | Phase::Assigning | Phase::Syncing | Phase::Left => Action::Idle,
            Phase::Stable => {
                if self.heartbeat_in_flight {
                    return Action::Idle;
                }
                if !self.coordinator_known {
                    return Action::FindCoordinator;
                }
                match self.next_heartbeat {
                    Some(at) if at > now => Action::WaitUntil(poll_deadline.map_or(at, |d| d.min(at))),
                    _ => {
                        self.heartbeat_in_flight = true;
                        Action::Heartbeat(HeartbeatRequest {
                            group_id: self.config.group_id.clone(),
                            generation_id: self.generation,
                            member_id: self.member_id.clone(),
                            group_instance_id: self.config.group_instance_id.clone(),
                        })
                    }
                }
            }
        }
    }

    /// Java's `onJoinPrepare`: what the member gives up before it joins.
    fn prepare_rejoin(&mut self) {
        if self.owned.is_empty() {
            return;
        }
        if self.generation == NO_GENERATION {
            let lost: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
            self.emit(Event::Lost(lost));
        } else if !self.is_cooperative() {
            let revoked: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
            self.emit(Event::Revoked(revoked));
        } else {
            // Cooperative: keep everything still subscribed.
            let (keep, gone): (BTreeSet<_>, BTreeSet<_>) =
                std::mem::take(&mut self.owned).into_iter().partition(|tp| self.topics.contains(&tp.topic));
            self.owned = keep;
            if !gone.is_empty() {
                self.emit(Event::Revoked(gone.into_iter().collect()));
            }
        }
    }

    fn emit(&mut self, event: Event) {
        self.events.push_back(event);
        self.awaiting_callbacks = true;
    }

    fn join_request(&self) -> JoinGroupRequest {
        let owned = group_by_topic(&self.owned);
        let subscription = Subscription {
            topics: self.topics.clone(),
            user_data: None,
            owned_partitions: owned,
            generation_id: self.generation,
            rack_id: self.config.rack.clone(),
        };
        let metadata = subscription.encode(VERSION);
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            session_timeout_ms: millis_i32(self.config.session_timeout),
            rebalance_timeout_ms: millis_i32(self.config.rebalance_timeout),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: self
                .config
                .strategies
                .iter()
                .map(|s| JoinGroupRequestProtocol { name: s.name().to_string(), metadata: metadata.clone() })
                .collect(),
            reason: None,
        }
    }

    /// The coordinator was found (or not).
    pub fn on_coordinator(&mut self, now: Instant, result: Result<()>) {
        match result {
            Ok(()) => self.coordinator_known = true,
            Err(e) if e.is_retriable() => self.backoff(now),
            Err(e) => self.fatal = Some(e),
        }
    }

    /// The JoinGroup response (or the failure to get one).
    pub fn on_join(&mut self, now: Instant, result: Result<JoinGroupResponse>) {
        if self.phase != Phase::Joining {
            return;
        }
        self.phase = Phase::Unjoined { prepared: true };
        let r = match result {
            Ok(r) => r,
            Err(e) => return self.on_transport_error(now, e),
        };
        if r.error_code == 0 {
            {
                self.member_id = r.member_id.clone();
                self.generation = r.generation_id;
                let name = r.protocol_name.clone().unwrap_or_default();
                let Some(strategy) = AssignmentStrategy::from_name(&name) else {
                    self.fatal =
                        Some(Error::state(format!("the group chose protocol {name:?} this consumer lacks")));
                    return;
                };
                self.protocol = Some(strategy);
                // KIP-814 (v9): a static leader rejoining an unchanged group must not
                // assign; the coordinator keeps the current assignment.
                if r.leader == r.member_id && !r.skip_assignment {
                    self.phase = Phase::Assigning;
                    let members = r
                        .members
                        .iter()
                        .map(|m| MemberSubscription {
                            member_id: m.member_id.clone(),
                            group_instance_id: m.group_instance_id.clone(),
                            subscription: Subscription::decode(&m.metadata)
                                .map(|(_, s)| s)
                                .unwrap_or_default(),
                        })
                        .collect();
                    self.pending = Some(Action::Assign { strategy, members });
                } else {
                    self.assignment_snapshot = None;
                    self.phase = Phase::Syncing;
                    self.pending = Some(Action::Sync(self.sync_request(Vec::new())));
                }
            }
            return;
        }
        match ErrorCode::from_code(r.error_code) {
            Some(ErrorCode::MemberIdRequired) => self.member_id = r.member_id,
            Some(ErrorCode::UnknownMemberId) => self.reset(true),
            Some(ErrorCode::IllegalGeneration) => self.reset(false),
            Some(code) => self.on_error_code(now, code),
            None => self.on_error_code(now, ErrorCode::UnknownServerError),
        }
    }

    /// The leader's computed assignment.
    pub fn on_assignment(&mut self, assignment: &GroupAssignment) {
        if self.phase != Phase::Assigning {
            return;
        }
        // Assignment versions 0-3 share one layout; v0 is read by every client.
        let assignments = assignment
            .iter()
            .map(|(member, partitions)| SyncGroupRequestAssignment {
                member_id: member.clone(),
                assignment: Assignment {
                    assigned_partitions: group_by_topic(partitions.iter()),
                    user_data: None,
                }
                .encode(0),
            })
            .collect();
        self.phase = Phase::Syncing;
        self.pending = Some(Action::Sync(self.sync_request(assignments)));
    }

    fn sync_request(&self, assignments: Vec<SyncGroupRequestAssignment>) -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: Some(PROTOCOL_TYPE.to_string()),
            protocol_name: self.protocol.map(|p| p.name().to_string()),
            assignments,
        }
    }

    /// The SyncGroup response (or the failure to get one).
    pub fn on_sync(&mut self, now: Instant, result: Result<SyncGroupResponse>) {
        if self.phase != Phase::Syncing {
            return;
        }
        self.phase = Phase::Unjoined { prepared: true };
        let r = match result {
            Ok(r) => r,
            Err(e) => return self.on_transport_error(now, e),
        };
        if r.error_code != 0 {
            return match ErrorCode::from_code(r.error_code) {
                Some(ErrorCode::RebalanceInProgress) => self.phase = Phase::Unjoined { prepared: false },
                Some(ErrorCode::UnknownMemberId) => self.reset(true),
                Some(ErrorCode::IllegalGeneration) => self.reset(false),
                Some(code) => self.on_error_code(now, code),
                None => self.on_error_code(now, ErrorCode::UnknownServerError),
            };
        }
        let assignment = match Assignment::decode(&r.assignment) {
            Ok((_, a)) => a,
            Err(e) => {
                self.fatal = Some(Error::protocol("coordinator", format!("undecodable assignment: {e:?}")));
                return;
            }
        };
        let assigned: BTreeSet<TopicPartition> = assignment
            .assigned_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| TopicPartition::new(t.topic.as_str(), *p)))
            .collect();
        self.phase = Phase::Stable;
        self.next_heartbeat = Some(now + self.config.heartbeat_interval);
        let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
        self.owned = assigned;
        if !revoked.is_empty() {
            self.emit(Event::Revoked(revoked));
            // Rejoin, so the revoked partitions reach their new owner (KIP-429).
            self.phase = Phase::Unjoined { prepared: false };
        }
        self.emit(Event::Assigned(added));
        if self.topics != self.joined_topics {
            // The subscription changed while this join was under way.
            self.phase = Phase::Unjoined { prepared: false };
        }
    }

    /// The Heartbeat response (or the failure to get one).
    pub fn on_heartbeat(&mut self, now: Instant, result: Result<HeartbeatResponse>) {
        self.heartbeat_in_flight = false;
        if self.phase != Phase::Stable {
            return;
        }
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                self.coordinator_known = false;
                return if e.is_retriable() { self.backoff(now) } else { self.fatal = Some(e) };
            }
        };
        self.next_heartbeat = Some(now + self.config.heartbeat_interval);
        if r.error_code == 0 {
            return;
        }
        match ErrorCode::from_code(r.error_code) {
            Some(ErrorCode::RebalanceInProgress) => self.phase = Phase::Unjoined { prepared: false },
            Some(ErrorCode::UnknownMemberId) => self.reset(true),
            Some(ErrorCode::IllegalGeneration) => self.reset(false),
            Some(ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable) => {
                self.coordinator_known = false;
                self.backoff(now);
            }
            Some(code) if crate::error::retriable(code) => self.backoff(now),
            Some(code) => self.fatal = Some(Error::kafka(code)),
            None => self.backoff(now),
        }
    }

    /// Leaves the group (on close). Returns the LeaveGroup to send, `None` for a static
    /// member or one that never joined; what it owned is revoked.
    pub fn leave(&mut self) -> Option<LeaveGroupRequest> {
        let joined = !self.member_id.is_empty();
        let owned: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        if !owned.is_empty() {
            self.emit(Event::Revoked(owned));
        }
        self.phase = Phase::Left;
        if self.config.group_instance_id.is_some() || !joined {
            return None;
        }
        Some(self.leave_request("the consumer is being closed"))
    }

    fn leave_request(&self, reason: &str) -> LeaveGroupRequest {
        LeaveGroupRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            members: vec![MemberIdentity {
                member_id: self.member_id.clone(),
                group_instance_id: None,
                reason: Some(reason.to_string()),
            }],
        }
    }

    /// Java's `resetStateAndGeneration`: out of the generation (what is owned is lost at
    /// the next prepare), keeping the member id unless the coordinator forgot it.
    fn reset(&mut self, member_id_too: bool) {
        self.generation = NO_GENERATION;
        if member_id_too {
            self.member_id.clear();
        }
        self.phase = Phase::Unjoined { prepared: false };
    }

    fn on_transport_error(&mut self, now: Instant, e: Error) {
        match e.code() {
            Some(code) => self.on_error_code(now, code),
            None if e.is_retriable() => {
                self.coordinator_known = false;
                self.backoff(now);
            }
            None => self.fatal = Some(e),
        }
    }

    fn on_error_code(&mut self, now: Instant, code: ErrorCode) {
        match code {
            ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                self.coordinator_known = false;
                self.backoff(now);
            }
            ErrorCode::CoordinatorLoadInProgress | ErrorCode::RebalanceInProgress => self.backoff(now),
            code if crate::error::retriable(code) => self.backoff(now),
            code => self.fatal = Some(Error::kafka(code)),
        }
    }

    fn backoff(&mut self, now: Instant) {
        self.retry_at = Some(now + self.config.retry_backoff);
    }
}

fn millis_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

fn group_by_topic<'a>(partitions: impl IntoIterator<Item = &'a TopicPartition>) -> Vec<TopicPartitions> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    by_topic.into_iter().map(|(t, partitions)| TopicPartitions { topic: t.to_string(), partitions }).collect()
}

#[cfg(test)]
mod tests;
