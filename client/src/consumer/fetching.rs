//! The consumer's fetch cycle, called from `poll`: positions for partitions without one
//! (committed offset or `auto.offset.reset`), one fetch per broker in flight (to the
//! leader, or to the preferred read replica a leader named, KIP-392), and each answer's
//! records, errors and leader hints applied to the positions.

use super::fetcher::{self, FetchLimits, FetchOutcome, PartitionResult};
use super::record::DecodeOptions;
use super::{coordinator, positions, Consumer, OffsetReset};
use crate::error::{Error, Result};
use crate::metadata::broker_address;
use crate::types::TopicPartition;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Instant;

impl Consumer {
    /// Positions for partitions that have none: the committed offset, else
    /// `auto.offset.reset`.
    pub(super) async fn update_positions(&mut self) -> Result<()> {
        let missing = self.positions.without_position(false);
        if !missing.is_empty() {
            let committed = match &self.config.group_id {
                Some(g) => coordinator::committed(&self.client, g, &missing).await?,
                None => BTreeMap::new(),
            };
            for tp in &missing {
                match committed.get(tp).cloned().flatten() {
                    Some(o) => self.positions.seek_with_epoch(tp, o.offset, o.leader_epoch),
                    None => self.positions.request_reset(tp, self.config.auto_offset_reset),
                }
            }
        }
        let resets = self.positions.resets();
        if !resets.is_empty() {
            let isolation = self.config.isolation_level;
            let offsets = positions::list_offsets(&self.client, &resets, isolation).await?;
            for (tp, offset) in offsets {
                self.positions.seek(&tp, offset);
            }
        }
        Ok(())
    }

    pub(super) async fn send_fetches(&mut self) {
        if self.refresh_metadata {
            let topics: BTreeSet<String> = self.positions.assigned().into_iter().map(|tp| tp.topic).collect();
            let topics: Vec<String> = topics.into_iter().collect();
            if let Err(e) = self.client.refresh_metadata(&topics).await {
                tracing::debug!(error = %e, "metadata refresh failed");
                return;
            }
            self.refresh_metadata = false;
        }
        let wanted: Vec<(TopicPartition, i64)> = self
            .positions
            .fetchable()
            .into_iter()
            .filter(|(tp, _)| !self.fetching.contains(tp) && !self.buffered.has(tp))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let mut cluster = self.client.cluster();
        if wanted.iter().any(|(tp, _)| cluster.partition(&tp.topic, tp.partition).is_none()) {
            let topics: BTreeSet<String> = wanted.iter().map(|(tp, _)| tp.topic.clone()).collect();
            match self.client.refresh_metadata(&topics.into_iter().collect::<Vec<_>>()).await {
                Ok(c) => cluster = c,
                Err(e) => {
                    tracing::debug!(error = %e, "metadata refresh failed");
                    return;
                }
            }
        }
        let limits = self.limits();
        let now = Instant::now();
        self.read_from.retain(|_, (_, until)| *until > now);
        let read_from = |tp: &TopicPartition| self.read_from.get(tp).map(|(node, _)| *node);
        let (by_broker, leaderless) = fetcher::plan(&cluster, &wanted, read_from);
        if !leaderless.is_empty() {
            self.refresh_metadata = true;
        }
        // One fetch per broker at a time, in its session (whose requests go in order);
        // the broker's other partitions wait for its answer.
        let busy: HashSet<i32> = self.in_flight.values().map(|(b, _)| *b).collect();
        let mut reading: HashSet<i32> = HashSet::new();
        for tp in self.buffered.pending(&self.positions) {
            if let Some(p) = cluster.partition(&tp.topic, tp.partition) {
                reading.insert(read_from(tp).unwrap_or(p.leader));
            }
        }
        for (broker, asked) in by_broker {
            if busy.contains(&broker) {
                continue;
            }
            // A fetch of only caught-up partitions parks on the broker for up to
            // fetch.max.wait.ms, and the broker's partitions whose buffered records are
            // being returned now would wait behind it once read: fetch them all together
            // then (a broker answers one connection's requests in order).
            let caught_up =
                asked.iter().all(|(tp, offset)| self.ends.get(tp).is_some_and(|end| offset >= end));
            if caught_up && reading.contains(&broker) {
                continue;
            }
            for (tp, _) in &asked {
                self.fetching.insert(tp.clone());
            }
            let partitions = asked.iter().map(|(tp, _)| tp.clone()).collect();
            let session = self.sessions.remove(&broker).unwrap_or_default();
            let fetch = fetcher::fetch(self.client.clone(), broker, asked, limits.clone(), session);
            let id = self.fetches.spawn(fetch).id();
            self.in_flight.insert(id, (broker, partitions));
        }
    }

    pub(super) fn limits(&self) -> FetchLimits {
        FetchLimits {
            max_wait_ms: self.config.fetch_max_wait.as_millis().min(i32::MAX as u128) as i32,
            min_bytes: self.config.fetch_min_bytes,
            max_bytes: self.config.fetch_max_bytes,
            partition_max_bytes: self.config.max_partition_fetch_bytes,
            isolation_level: self.config.isolation_level.as_i8(),
            rack: self.config.client_rack.clone().unwrap_or_default(),
        }
    }

    pub(super) fn on_fetch(&mut self, mut outcome: FetchOutcome) -> Result<()> {
        for (tp, _) in &outcome.asked {
            self.fetching.remove(tp);
        }
        self.sessions.insert(outcome.broker, std::mem::take(&mut outcome.session));
        if let Err(e) = &outcome.result {
            // A replica that cannot be reached sends its partitions back to the leader.
            for (tp, _) in &outcome.asked {
                self.stop_reading_from(tp, outcome.broker);
            }
            if fetcher::session_lost(e) {
                tracing::debug!(broker = outcome.broker, error = %e, "fetch session lost; opening another");
                return Ok(());
            }
            tracing::debug!(broker = outcome.broker, error = %e, "fetch failed");
            self.refresh_metadata = true;
            return Ok(());
        }
        let options = DecodeOptions {
            isolation: self.config.isolation_level,
            check_crcs: self.config.check_crcs,
            max_uncompressed_bytes: (self.config.fetch_max_bytes.max(1) as usize).saturating_mul(4),
        };
        let mut hints = Vec::new();
        for (tp, offset, result) in fetcher::results(&outcome, options) {
            // A seek, a reset or a revocation since the fetch was sent: drop the answer.
            if self.positions.position(&tp) != Some(offset) {
                continue;
            }
            if !matches!(result, PartitionResult::Records(..) | PartitionResult::ReadFrom(_))
                && self.stop_reading_from(&tp, outcome.broker)
            {
                // An error from a follower (behind, gone, no longer a replica): the
                // leader decides again, an out-of-range position included (Kafka's
                // consumer resets only what the leader finds out of range).
                continue;
            }
            match result {
                PartitionResult::Records(decoded, end) => {
                    self.ends.insert(tp.clone(), end);
                    self.buffered.push(tp, decoded);
                }
                PartitionResult::ReadFrom(node) => {
                    tracing::debug!(partition = %tp, node, "reading from the preferred read replica");
                    let until = Instant::now() + self.config.client.metadata_max_age;
                    self.read_from.insert(tp, (node, until));
                }
                PartitionResult::RefreshMetadata(Some(hint)) => hints.push(hint),
                PartitionResult::RefreshMetadata(None) => self.refresh_metadata = true,
                PartitionResult::OutOfRange => match self.config.auto_offset_reset {
                    OffsetReset::None => {
                        return Err(Error::state(format!(
                            "{tp}: offset {offset} is out of range and auto.offset.reset=none"
                        )))
                    }
                    reset => self.positions.request_reset(&tp, reset),
                },
                PartitionResult::Failed(e) => {
                    if e.code() == Some(strata_protocol::ErrorCode::CorruptMessage) {
                        return Err(e);
                    }
                    tracing::debug!(partition = %tp, error = %e, "partition fetch failed");
                }
            }
        }
        if !hints.is_empty() {
            // KIP-951: the next fetch goes to the leaders the answer named; a Metadata
            // round only if one of them does not apply (stale, or of unknown address).
            let endpoints: Vec<_> = outcome
                .result
                .as_ref()
                .map(|r| {
                    r.node_endpoints
                        .iter()
                        .map(|e| broker_address(e.node_id, &e.host, e.port, &e.rack))
                        .collect()
                })
                .unwrap_or_default();
            if self.client.update_leaders(&hints, &endpoints).len() < hints.len() {
                self.refresh_metadata = true;
            }
        }
        Ok(())
    }

    /// Sends `tp`'s reads back to its leader if they went to `broker` as the preferred
    /// read replica; whether they did.
    pub(super) fn stop_reading_from(&mut self, tp: &TopicPartition, broker: i32) -> bool {
        match self.read_from.get(tp) {
            Some((node, _)) if *node == broker => {
                tracing::debug!(partition = %tp, node, "back to the leader from the preferred read replica");
                self.read_from.remove(tp);
                true
            }
            _ => false,
        }
    }
}
