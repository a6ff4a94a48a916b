//! The group consumer, behaving like Kafka's Java consumer with the classic group
//! protocol: subscribe (group membership, rebalances, a listener called from `poll`) or
//! assign partitions by hand; fetch with prefetch; commit and read committed offsets;
//! and a checkpoint API ([`Consumer::positions`] / [`Consumer::restore_positions`]) for
//! stream engines that keep their positions themselves.
//!
//! Fetches go through incremental fetch sessions (KIP-227), one per broker, to a
//! partition's leader or to the follower a leader names as preferred read replica for the
//! consumer's `client.rack` (KIP-392); the fetch cycle is in `fetching.rs`.
//!
//! Not (yet) done: truncation detection with OffsetForLeaderEpoch after a leader change
//! (KIP-320: the leader epoch is sent and committed, not validated), pattern subscriptions,
//! rack-aware assignment, and the next-generation group protocol (KIP-848).
//!
//! ```no_run
//! # async fn demo() -> Result<(), strata_client::Error> {
//! use std::time::Duration;
//! use strata_client::consumer::{Consumer, ConsumerConfig, NoopListener};
//! let mut config = ConsumerConfig::new("127.0.0.1:9092");
//! config.set("group.id", "billing")?;
//! config.set("auto.offset.reset", "earliest")?;
//! let mut consumer = Consumer::new(config).await?;
//! consumer.subscribe(&["orders"], Box::new(NoopListener))?;
//! loop {
//!     for record in consumer.poll(Duration::from_millis(500)).await? {
//!         println!("{}-{}@{}", record.topic, record.partition, record.offset);
//!     }
//!     consumer.commit_sync(None).await?;
//! }
//! # }
//! ```

pub mod assignor;
mod config;
mod coordinator;
mod fetcher;
mod fetching;
mod listener;
pub mod membership;
mod positions;
mod record;

pub use config::{AssignmentStrategy, ConsumerConfig, OffsetReset};
pub use listener::{NoopListener, Rebalance, RebalanceListener};
pub use record::ConsumerRecord;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::types::{ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition};
use coordinator::Group;
use fetcher::{BrokerSession, FetchOutcome};
use membership::{Event, Membership, MembershipConfig};
use positions::{Buffered, Positions};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::{JoinHandle, JoinSet};

/// A Kafka consumer. Not shared between tasks: `poll` and the others take `&mut self`,
/// as the Java consumer is single-threaded; the group membership's heartbeats run in
/// a background task of their own.
///
/// Manual assignment, restarting from a checkpoint the application stored:
///
/// ```no_run
/// # async fn demo(checkpoint: std::collections::BTreeMap<strata_client::TopicPartition, i64>)
/// # -> Result<(), strata_client::Error> {
/// use std::time::Duration;
/// use strata_client::consumer::{Consumer, ConsumerConfig};
/// use strata_client::TopicPartition;
/// let mut consumer = Consumer::new(ConsumerConfig::new("127.0.0.1:9092")).await?;
/// consumer.assign(&[TopicPartition::new("events", 0)])?;
/// consumer.restore_positions(&checkpoint)?;
/// let records = consumer.poll(Duration::from_secs(1)).await?;
/// let next_checkpoint = consumer.positions();
/// # let _ = (records, next_checkpoint);
/// # Ok(()) }
/// ```
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    group: Option<Arc<Group>>,
    driver: Option<JoinHandle<()>>,
    listener: Option<Box<dyn RebalanceListener>>,
    positions: Positions,
    buffered: Buffered,
    fetches: JoinSet<FetchOutcome>,
    fetching: HashSet<TopicPartition>,
    /// The fetch in flight per task: its broker and partitions, released if the task
    /// ends without an outcome.
    in_flight: HashMap<tokio::task::Id, (i32, Vec<TopicPartition>)>,
    /// Each broker's fetch session while no fetch to it is in flight (the fetch holds it).
    sessions: HashMap<i32, BrokerSession>,
    /// Each partition's end (high watermark, or last stable offset) as last reported.
    ends: HashMap<TopicPartition, i64>,
    /// The replica each partition is read from when its leader named one (KIP-392
    /// `preferred_read_replica`), until the deadline (`metadata.max.age.ms` later, as the
    /// Java consumer) or an error from that replica sends it back to the leader.
    read_from: HashMap<TopicPartition, (i32, Instant)>,
    async_commits: Option<coordinator::Committer>,
    refresh_metadata: bool,
    last_auto_commit: Instant,
    last_metadata_check: Instant,
    closed: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("group_id", &self.config.group_id)
            .field("assignment", &self.assignment())
            .finish()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if let Some(d) = self.driver.take() {
            d.abort();
        }
        self.fetches.abort_all();
    }
}

impl Consumer {
    /// Connects to the cluster; nothing is consumed before `subscribe` or `assign`.
    pub async fn new(config: ConsumerConfig) -> Result<Consumer> {
        let client = Client::connect(config.client.clone()).await?;
        Ok(Consumer {
            client,
            config,
            group: None,
            driver: None,
            listener: None,
            positions: Positions::default(),
            buffered: Buffered::default(),
            fetches: JoinSet::new(),
            fetching: HashSet::new(),
            in_flight: HashMap::new(),
            sessions: HashMap::new(),
            ends: HashMap::new(),
            read_from: HashMap::new(),
            async_commits: None,
            refresh_metadata: false,
            last_auto_commit: Instant::now(),
            last_metadata_check: Instant::now(),
            closed: false,
        })
    }

    /// The client core underneath (metadata, connections).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Joins the group (`group.id`) subscribed to `topics`; `listener` is called from
    /// `poll` as partitions are revoked, assigned or lost.
    pub fn subscribe(&mut self, topics: &[&str], listener: Box<dyn RebalanceListener>) -> Result<()> {
        self.check_open()?;
        let group_id =
            self.config.group_id.clone().ok_or_else(|| Error::config("subscribe needs group.id"))?;
        if !self.positions.assigned().is_empty() && self.group.is_none() {
            return Err(Error::state("subscribe after assign: unassign first"));
        }
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        self.listener = Some(listener);
        if let Some(g) = &self.group {
            g.lock().subscribe(topics);
            g.wake.notify_one();
            return Ok(());
        }
        let mconfig = MembershipConfig {
            group_id: group_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.rebalance_timeout(),
            heartbeat_interval: self.config.heartbeat_interval,
            strategies: self.config.assignment_strategies.clone(),
            rack: self.config.client_rack.clone(),
            retry_backoff: self.config.client.retry_backoff,
            max_poll_interval: self.config.max_poll_interval,
        };
        let group = Arc::new(Group {
            membership: std::sync::Mutex::new(Membership::new(mconfig, topics)),
            wake: tokio::sync::Notify::new(),
            events: tokio::sync::Notify::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
        });
        let join_timeout =
            self.config.client.request_timeout.max(self.config.rebalance_timeout() + Duration::from_secs(5));
        self.driver = Some(tokio::spawn(coordinator::drive(
            self.client.clone(),
            group.clone(),
            group_id,
            join_timeout,
        )));
        self.group = Some(group);
        Ok(())
    }

    /// Consumes exactly `partitions`, outside any group membership (commits, if any, go
    /// to `group.id` with no generation). Replaces the previous manual assignment.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.check_open()?;
        if self.group.is_some() {
            return Err(Error::state("assign while subscribed"));
        }
        let keep: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        for tp in self.positions.assigned() {
            if !keep.contains(&tp) {
                self.positions.remove(&tp);
                self.buffered.drop_partition(&tp);
            }
        }
        for tp in partitions {
            self.positions.add(tp.clone());
        }
        Ok(())
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.positions.assigned().into_iter().collect()
    }

    /// The group generation and member id, for a transactional producer's
    /// `send_offsets_to_transaction` (KIP-447).
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        match &self.group {
            Some(g) => g.lock().group_metadata(),
            None => ConsumerGroupMetadata::new(self.config.group_id.clone().unwrap_or_default()),
        }
    }

    /// Records from the assigned partitions, at most `max.poll.records`, waiting up to
    /// `timeout` for some. Rebalance callbacks run here, before any record is returned.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.check_open()?;
        if self.group.is_none() && self.positions.assigned().is_empty() {
            return Err(Error::state("poll before subscribe or assign"));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        if let Some(g) = &self.group {
            g.lock().on_poll(Instant::now());
            g.wake.notify_one();
        }
        loop {
            self.check_metadata().await;
            self.run_callbacks().await?;
            self.maybe_auto_commit().await;
            self.check_fatal()?;
            match self.update_positions().await {
                Err(e) if e.is_retriable() => tracing::debug!(error = %e, "positions not known yet"),
                other => other?,
            }
            let records = self.buffered.drain(&mut self.positions, self.config.max_poll_records);
            self.send_fetches().await;
            if !records.is_empty() {
                return Ok(records);
            }
            let events = self.group.clone();
            tokio::select! {
                Some(done) = self.fetches.join_next_with_id(), if !self.fetches.is_empty() => {
                    match done {
                        Ok((id, outcome)) => {
                            self.in_flight.remove(&id);
                            self.on_fetch(outcome)?;
                        }
                        Err(e) => {
                            // The task panicked or was cancelled: its partitions and its
                            // broker are free again, without a session.
                            if let Some((_, asked)) = self.in_flight.remove(&e.id()) {
                                for tp in &asked {
                                    self.fetching.remove(tp);
                                }
                            }
                        }
                    }
                }
                _ = async { match &events { Some(g) => g.events.notified().await, None => std::future::pending().await } } => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
                // Nothing in flight: positions or metadata failed to resolve, or all is
                // paused; try again after the retry backoff.
                _ = tokio::time::sleep(self.config.client.retry_backoff), if self.fetches.is_empty() => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Vec::new());
            }
        }
    }

    /// Every `metadata.max.age.ms`, describes the subscribed topics again, so a leader
    /// sees partitions added or topics created and rebalances.
    async fn check_metadata(&mut self) {
        let Some(group) = self.group.clone() else { return };
        if self.last_metadata_check.elapsed() < self.config.client.metadata_max_age {
            return;
        }
        self.last_metadata_check = Instant::now();
        let topics = group.lock().topics().to_vec();
        match self.client.refresh_metadata(&topics).await {
            Ok(cluster) => {
                let counts = topics
                    .iter()
                    .filter_map(|t| {
                        cluster
                            .topic(t)
                            .filter(|i| i.error.is_none())
                            .map(|i| (t.clone(), i.partitions.len()))
                    })
                    .collect();
                group.lock().on_metadata(&counts);
                group.wake.notify_one();
            }
            Err(e) => tracing::debug!(error = %e, "metadata refresh failed"),
        }
    }

    fn check_fatal(&self) -> Result<()> {
        if let Some(g) = &self.group {
            if let Some(e) = g.lock().fatal() {
                return Err(e.clone());
            }
        }
        Ok(())
    }

    /// Runs queued rebalance callbacks and lets the membership go on.
    async fn run_callbacks(&mut self) -> Result<()> {
        let Some(group) = self.group.clone() else { return Ok(()) };
        let events = group.lock().take_events();
        if events.is_empty() {
            return Ok(());
        }
        let meta = group.lock().group_metadata();
        for event in events {
            self.run_callback(event, &meta).await;
        }
        group.lock().callbacks_done();
        group.wake.notify_one();
        Ok(())
    }

    async fn run_callback(&mut self, event: Event, meta: &ConsumerGroupMetadata) {
        let mut listener = self.listener.take();
        match event {
            Event::Revoked(partitions) => {
                let mut rebalance =
                    Rebalance { positions: self.positions.known(&partitions), ..Default::default() };
                if self.config.enable_auto_commit {
                    rebalance.commit_positions();
                }
                if let Some(l) = listener.as_mut() {
                    l.on_partitions_revoked(&mut rebalance, &partitions);
                }
                if let Some(offsets) = rebalance.commit.take() {
                    if let Err(e) = coordinator::commit(&self.client, meta, &offsets).await {
                        tracing::warn!(error = %e, "commit on revocation failed");
                    }
                }
                self.drop_partitions(&partitions);
            }
            Event::Lost(partitions) => {
                let mut rebalance =
                    Rebalance { positions: self.positions.known(&partitions), ..Default::default() };
                if let Some(l) = listener.as_mut() {
                    l.on_partitions_lost(&mut rebalance, &partitions);
                }
                self.drop_partitions(&partitions);
            }
            Event::Assigned(partitions) => {
                for tp in &partitions {
                    self.positions.add(tp.clone());
                }
                let mut rebalance = Rebalance::default();
                if let Some(l) = listener.as_mut() {
                    l.on_partitions_assigned(&mut rebalance, &partitions);
                }
                for (tp, offset) in rebalance.seeks {
                    self.positions.seek(&tp, offset);
                }
            }
        }
        self.listener = listener;
    }

    fn drop_partitions(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.positions.remove(tp);
            self.buffered.drop_partition(tp);
        }
    }

    async fn maybe_auto_commit(&mut self) {
        if !self.config.enable_auto_commit || self.config.group_id.is_none() {
            return;
        }
        if self.last_auto_commit.elapsed() < self.config.auto_commit_interval {
            return;
        }
        self.last_auto_commit = Instant::now();
        if let Err(e) = self.commit_sync(None).await {
            tracing::warn!(error = %e, "auto-commit failed");
        }
    }

    /// Sets the next offset `poll` returns for an assigned partition.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        if !self.positions.is_assigned(tp) {
            return Err(Error::state(format!("{tp} is not assigned")));
        }
        self.positions.seek(tp, offset);
        self.buffered.drop_partition(tp);
        Ok(())
    }

    /// Moves the partitions to their log start (all assigned ones if `partitions` is empty).
    pub fn seek_to_beginning(&mut self, partitions: &[TopicPartition]) {
        self.reset_to(partitions, OffsetReset::Earliest);
    }

    /// Moves the partitions to their log end (all assigned ones if `partitions` is empty).
    pub fn seek_to_end(&mut self, partitions: &[TopicPartition]) {
        self.reset_to(partitions, OffsetReset::Latest);
    }

    fn reset_to(&mut self, partitions: &[TopicPartition], reset: OffsetReset) {
        let all = if partitions.is_empty() { self.positions.assigned() } else { partitions.to_vec() };
        let all: Vec<TopicPartition> = all.into_iter().filter(|tp| self.positions.is_assigned(tp)).collect();
        for tp in &all {
            self.positions.request_reset(tp, reset);
            self.buffered.drop_partition(tp);
        }
    }

    /// Stops returning (and fetching) records of `partitions` until resumed.
    pub fn pause(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.positions.set_paused(tp, true);
        }
    }

    /// Undoes [`Consumer::pause`].
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.positions.set_paused(tp, false);
        }
    }

    /// The paused partitions.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.positions.paused()
    }

    /// The next offset of each assigned partition that has a position: exactly what a
    /// stream engine stores in its checkpoint.
    pub fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.positions.known(&self.positions.assigned())
    }

    /// Makes the next `poll` start exactly at `positions` (a checkpoint restored after a
    /// failure); buffered and in-flight data for those partitions is dropped. Partitions
    /// not assigned are an error.
    pub fn restore_positions(&mut self, positions: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        if let Some(tp) = positions.keys().find(|tp| !self.positions.is_assigned(tp)) {
            return Err(Error::state(format!("{tp} is not assigned")));
        }
        for (tp, offset) in positions {
            self.positions.seek(tp, *offset);
            self.buffered.drop_partition(tp);
        }
        Ok(())
    }

    /// Commits `offsets`, or the current positions of every assigned partition, and
    /// waits for the coordinator's answer.
    pub async fn commit_sync(
        &mut self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
    ) -> Result<()> {
        self.check_open()?;
        let offsets = offsets.unwrap_or_else(|| self.current_offsets());
        let meta = self.commit_metadata()?;
        coordinator::commit(&self.client, &meta, &offsets).await
    }

    /// Like [`Consumer::commit_sync`] without waiting: the commit runs in the
    /// background, after every earlier `commit_async` (so a later commit never lands
    /// before an earlier one); await the handle to learn how it went.
    pub fn commit_async(
        &mut self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
    ) -> Result<JoinHandle<Result<()>>> {
        self.check_open()?;
        let offsets = offsets.unwrap_or_else(|| self.current_offsets());
        let meta = self.commit_metadata()?;
        let client = self.client.clone();
        let committer = self.async_commits.get_or_insert_with(|| coordinator::Committer::start(client));
        Ok(committer.commit(meta, offsets))
    }

    fn current_offsets(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.positions.committable()
    }

    fn commit_metadata(&self) -> Result<ConsumerGroupMetadata> {
        if self.config.group_id.is_none() {
            return Err(Error::config("committing needs group.id"));
        }
        Ok(self.group_metadata())
    }

    /// The group's committed offsets of `partitions` (`None`: nothing committed).
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>> {
        let group_id =
            self.config.group_id.as_deref().ok_or_else(|| Error::config("committed needs group.id"))?;
        coordinator::committed(&self.client, group_id, partitions).await
    }

    /// Commits (with auto-commit), runs the revocation callback, leaves the group
    /// (dynamic members only) and closes the connections.
    pub async fn close(mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let result = self.unsubscribe().await;
        self.closed = true;
        self.client.close();
        result
    }

    /// Leaves the group (or drops the manual assignment): auto-commit commits, the
    /// revocation callback runs, a dynamic member sends LeaveGroup, and nothing is
    /// consumed until the next `subscribe` or `assign`.
    pub async fn unsubscribe(&mut self) -> Result<()> {
        self.check_open()?;
        if let Some(committer) = self.async_commits.take() {
            committer.finish(self.config.client.request_timeout).await;
        }
        let mut result = Ok(());
        if self.config.enable_auto_commit
            && self.config.group_id.is_some()
            && !self.positions.assigned().is_empty()
        {
            result = self.commit_sync(None).await;
        }
        if let Some(group) = self.group.clone() {
            let _ = self.run_callbacks().await;
            let leave = group.lock().leave();
            let events = group.lock().take_events();
            let meta = group.lock().group_metadata();
            for e in events {
                self.run_callback(e, &meta).await;
            }
            group.stopped.store(true, Ordering::Release);
            group.wake.notify_one();
            if let Some(d) = self.driver.take() {
                d.abort();
            }
            if let Some(request) = leave {
                let r = async {
                    let (_, conn) =
                        self.client.coordinator(crate::CoordinatorKind::Group, &meta.group_id).await?;
                    conn.call(strata_protocol::RequestBody::LeaveGroup(request)).await
                }
                .await;
                if let Err(e) = r {
                    tracing::debug!(error = %e, "LeaveGroup failed");
                }
            }
            self.group = None;
            self.listener = None;
        }
        for tp in self.positions.assigned() {
            self.positions.remove(&tp);
        }
        self.buffered = Buffered::default();
        self.fetches.abort_all();
        self.fetching.clear();
        self.in_flight.clear();
        self.sessions.clear();
        result
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}
