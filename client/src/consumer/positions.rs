//! Where each assigned partition is: its position (the next offset to return), the
//! leader epoch of the last record returned, a pending reset, paused or not; and the
//! fetched records waiting to be returned. Positions move only as records are handed
//! out, so what is committed or checkpointed is exactly what the application saw.

use super::config::OffsetReset;
use super::record::{ConsumerRecord, Decoded};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::types::{IsolationLevel, OffsetAndMetadata, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use strata_protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use strata_protocol::{ApiKey, RequestBody, ResponseBody};

#[derive(Debug, Default, Clone)]
struct PartitionState {
    position: Option<i64>,
    epoch: Option<i32>,
    reset: Option<OffsetReset>,
    paused: bool,
}

/// The assigned partitions' states.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    states: BTreeMap<TopicPartition, PartitionState>,
}

impl Positions {
    pub fn add(&mut self, tp: TopicPartition) {
        self.states.entry(tp).or_default();
    }
    pub fn remove(&mut self, tp: &TopicPartition) {
        self.states.remove(tp);
    }
    pub fn assigned(&self) -> Vec<TopicPartition> {
        self.states.keys().cloned().collect()
    }
    pub fn is_assigned(&self, tp: &TopicPartition) -> bool {
        self.states.contains_key(tp)
    }
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.states.get(tp).and_then(|s| s.position)
    }
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) {
        self.seek_with_epoch(tp, offset, None);
    }
    pub fn seek_with_epoch(&mut self, tp: &TopicPartition, offset: i64, epoch: Option<i32>) {
        if let Some(s) = self.states.get_mut(tp) {
            s.position = Some(offset);
            s.epoch = epoch;
            s.reset = None;
        }
    }
    pub fn request_reset(&mut self, tp: &TopicPartition, reset: OffsetReset) {
        if let Some(s) = self.states.get_mut(tp) {
            s.position = None;
            s.reset = Some(reset);
        }
    }
    pub fn set_paused(&mut self, tp: &TopicPartition, paused: bool) {
        if let Some(s) = self.states.get_mut(tp) {
            s.paused = paused;
        }
    }
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.states.iter().filter(|(_, s)| s.paused).map(|(tp, _)| tp.clone()).collect()
    }
    /// Partitions with neither a position nor a reset pending (`with_reset` false).
    pub fn without_position(&self, with_reset: bool) -> Vec<TopicPartition> {
        self.states
            .iter()
            .filter(|(_, s)| s.position.is_none() && (with_reset || s.reset.is_none()))
            .map(|(tp, _)| tp.clone())
            .collect()
    }
    pub fn resets(&self) -> Vec<(TopicPartition, OffsetReset)> {
        self.states
            .iter()
            .filter_map(|(tp, s)| s.reset.filter(|_| s.position.is_none()).map(|r| (tp.clone(), r)))
            .collect()
    }
    pub fn fetchable(&self) -> Vec<(TopicPartition, i64)> {
        self.states
            .iter()
            .filter(|(_, s)| !s.paused)
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), p)))
            .collect()
    }
    pub fn known(&self, partitions: &[TopicPartition]) -> BTreeMap<TopicPartition, i64> {
        partitions.iter().filter_map(|tp| self.position(tp).map(|p| (tp.clone(), p))).collect()
    }
    pub fn committable(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.states
            .iter()
            .filter_map(|(tp, s)| {
                s.position.map(|p| {
                    (
                        tp.clone(),
                        OffsetAndMetadata { offset: p, metadata: String::new(), leader_epoch: s.epoch },
                    )
                })
            })
            .collect()
    }
    fn advance(&mut self, tp: &TopicPartition, offset: i64, epoch: Option<i32>) {
        if let Some(s) = self.states.get_mut(tp) {
            s.position = Some(offset);
            if epoch.is_some() {
                s.epoch = epoch;
            }
        }
    }
}

#[derive(Debug)]
struct Completed {
    tp: TopicPartition,
    records: VecDeque<ConsumerRecord>,
    next_offset: i64,
    last_epoch: Option<i32>,
}

/// Fetched records not yet returned, per partition, in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Buffered {
    completed: VecDeque<Completed>,
}

impl Buffered {
    pub fn push(&mut self, tp: TopicPartition, d: Decoded) {
        self.completed.push_back(Completed {
            tp,
            records: d.records.into(),
            next_offset: d.next_offset,
            last_epoch: d.last_epoch,
        });
    }
    pub fn has(&self, tp: &TopicPartition) -> bool {
        self.completed.iter().any(|c| &c.tp == tp)
    }

    /// The partitions with records still to return that `poll` will return (assigned and
    /// not paused).
    pub fn pending<'a>(&'a self, positions: &'a Positions) -> impl Iterator<Item = &'a TopicPartition> {
        let returned = |tp: &TopicPartition| positions.states.get(tp).is_some_and(|s| !s.paused);
        self.completed.iter().map(|c| &c.tp).filter(move |tp| returned(tp))
    }
    pub fn drop_partition(&mut self, tp: &TopicPartition) {
        self.completed.retain(|c| &c.tp != tp);
    }

    /// Up to `max` records of unpaused partitions, moving their positions past what is
    /// returned (and past control batches and gaps once a fetch is used up).
    pub fn drain(&mut self, positions: &mut Positions, max: usize) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.completed.len() && out.len() < max {
            let c = &mut self.completed[i];
            let Some(position) = positions.position(&c.tp) else {
                self.completed.remove(i);
                continue;
            };
            if positions.states.get(&c.tp).is_some_and(|s| s.paused) {
                i += 1;
                continue;
            }
            while out.len() < max {
                let Some(r) = c.records.pop_front() else { break };
                if r.offset < position {
                    continue;
                }
                positions.advance(&c.tp, r.offset + 1, r.leader_epoch);
                out.push(r);
            }
            if c.records.is_empty() {
                if positions.position(&c.tp).is_some_and(|p| p < c.next_offset) {
                    positions.advance(&c.tp, c.next_offset, c.last_epoch);
                }
                self.completed.remove(i);
            } else {
                i += 1;
            }
        }
        out
    }
}

/// The earliest or latest offset of each partition (ListOffsets to its leader).
pub(crate) async fn list_offsets(
    client: &Client,
    partitions: &[(TopicPartition, OffsetReset)],
    isolation: IsolationLevel,
) -> Result<Vec<(TopicPartition, i64)>> {
    let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64)>> = BTreeMap::new();
    for (tp, reset) in partitions {
        let timestamp = match reset {
            OffsetReset::Earliest => -2,
            OffsetReset::Latest => -1,
            OffsetReset::None => {
                return Err(Error::state(format!("{tp} has no committed offset and auto.offset.reset=none")))
            }
        };
        let (leader, _) = client.leader(&tp.topic, tp.partition).await?;
        by_leader.entry(leader).or_default().push((tp.clone(), timestamp));
    }
    let mut out = Vec::new();
    for (leader, asked) in by_leader {
        let conn = client.broker(leader).await?;
        let version = conn.version(ApiKey::ListOffsets)?.max(1);
        let cluster = client.cluster();
        let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for (tp, timestamp) in &asked {
            topics.entry(tp.topic.as_str()).or_default().push(ListOffsetsPartition {
                partition_index: tp.partition,
                current_leader_epoch: cluster
                    .partition(&tp.topic, tp.partition)
                    .map(|p| p.leader_epoch)
                    .unwrap_or(-1),
                timestamp: *timestamp,
                max_num_offsets: 1,
            });
        }
        let request = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: isolation.as_i8(),
            topics: topics
                .into_iter()
                .map(|(name, partitions)| ListOffsetsTopic { name: name.to_string(), partitions })
                .collect(),
            timeout_ms: client.config().request_timeout.as_millis().min(i32::MAX as u128) as i32,
        };
        let r = match conn.call_at(version, RequestBody::ListOffsets(request)).await {
            Ok(r) => r.body,
            Err(e) => {
                if e.refreshes_metadata() {
                    let _ = client.refresh_metadata(&[]).await;
                }
                return Err(e);
            }
        };
        let ResponseBody::ListOffsets(r) = r else {
            return Err(Error::protocol(conn.addr(), "ListOffsets answered with another API"));
        };
        for t in &r.topics {
            for p in &t.partitions {
                if let Some(e) = Error::from_code(p.error_code, None) {
                    if e.refreshes_metadata() {
                        let _ = client.refresh_metadata(std::slice::from_ref(&t.name)).await;
                    }
                    return Err(e);
                }
                out.push((TopicPartition::new(t.name.as_str(), p.partition_index), p.offset));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(p: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: Arc::from("t"),
            partition: p,
            offset,
            timestamp: 0,
            timestamp_type: Default::default(),
            key: None,
            value: None,
            headers: Vec::new(),
            leader_epoch: Some(3),
        }
    }

    fn decoded(p: i32, offsets: &[i64], next_offset: i64) -> Decoded {
        Decoded { records: offsets.iter().map(|o| record(p, *o)).collect(), next_offset, last_epoch: Some(4) }
    }

    #[test]
    fn positions_move_as_records_are_handed_out_and_past_gaps_once_a_fetch_is_used_up() {
        let (t0, t1) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let mut positions = Positions::default();
        positions.add(t0.clone());
        positions.add(t1.clone());
        positions.seek(&t0, 0);
        positions.seek(&t1, 10);
        let mut buffered = Buffered::default();
        // Offsets 0, 1, 5 then a control batch / compacted gap up to 9.
        buffered.push(t0.clone(), decoded(0, &[0, 1, 5], 9));
        buffered.push(t1.clone(), decoded(1, &[10, 11], 12));
        let first = buffered.drain(&mut positions, 2);
        assert_eq!(first.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1], "max.poll.records");
        assert_eq!(positions.position(&t0), Some(2), "just past what was returned");
        let second = buffered.drain(&mut positions, 10);
        assert_eq!(
            second.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>(),
            vec![(0, 5), (1, 10), (1, 11)]
        );
        assert_eq!(positions.position(&t0), Some(9), "past the gap and the control batch");
        assert_eq!(positions.committable()[&t0].leader_epoch, Some(4));
        assert_eq!(positions.position(&t1), Some(12));
        assert!(!buffered.has(&t0) && !buffered.has(&t1));
    }

    #[test]
    fn paused_and_reset_partitions_keep_or_drop_their_buffered_records() {
        let (t0, t1) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let mut positions = Positions::default();
        positions.add(t0.clone());
        positions.add(t1.clone());
        positions.seek(&t0, 0);
        positions.seek(&t1, 0);
        let mut buffered = Buffered::default();
        buffered.push(t0.clone(), decoded(0, &[0], 1));
        buffered.push(t1.clone(), decoded(1, &[0], 1));
        positions.set_paused(&t0, true);
        assert_eq!(
            buffered.pending(&positions).collect::<Vec<_>>(),
            vec![&t1],
            "a paused one is not pending"
        );
        let out = buffered.drain(&mut positions, 10);
        assert_eq!(out.iter().map(|r| r.partition).collect::<Vec<_>>(), vec![1], "paused: kept back");
        assert!(buffered.has(&t0));
        assert_eq!(positions.fetchable(), vec![(t1.clone(), 1)], "paused partitions are not fetched");
        positions.set_paused(&t0, false);
        positions.request_reset(&t0, OffsetReset::Earliest);
        assert_eq!(positions.resets(), vec![(t0.clone(), OffsetReset::Earliest)]);
        assert!(buffered.drain(&mut positions, 10).is_empty(), "no position: its records are dropped");
        assert!(!buffered.has(&t0));
        assert_eq!(positions.without_position(true), vec![t0.clone()]);
        assert!(positions.without_position(false).is_empty(), "a reset is pending, not a lookup");
        buffered.push(t1.clone(), decoded(1, &[1], 2));
        positions.remove(&t1);
        assert_eq!(buffered.pending(&positions).count(), 0, "an unassigned one is not pending");
    }
}
