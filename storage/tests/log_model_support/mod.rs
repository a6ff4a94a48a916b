//! The in-memory model `log_model.rs` checks a log against: its batches, offsets,
//! producers and transactions, leader epochs and high watermark, each derived or
//! maintained by the simplest rule that states the expected behaviour.
#![allow(dead_code)]

use bytes::Bytes;

use crate::common::Rec;

/// Producer fields of a batch the model knows to carry them.
#[derive(Debug, Clone)]
pub struct ProducerMeta {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_seq: i32,
    pub transactional: bool,
    /// `Some(commit)` for a marker.
    pub marker: Option<bool>,
    /// The request as sent, for retries.
    pub bytes: Bytes,
}

#[derive(Debug, Clone)]
pub struct ModelBatch {
    pub base: i64,
    /// The leader epoch the batch was written in.
    pub epoch: i32,
    pub size: usize,
    pub records: Vec<(i64, Bytes)>,
    pub producer: Option<ProducerMeta>,
}

/// What the log should know about a producer, derived from its batches in the model.
#[derive(Debug, Clone, Default)]
pub struct ProducerView {
    pub epoch: i16,
    pub last_seq: i32,
    /// Base offset of its last data batch.
    pub last_data_base: i64,
    /// Indexes (into `Model::batches`) of its last 5 data batches of the current epoch.
    pub window: Vec<usize>,
    pub open_txn: Option<i64>,
}

/// A transaction of the model: producer, first offset, marker offset and outcome.
#[derive(Debug, Clone, Copy)]
pub struct ModelTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// `None` while open; else (marker offset, aborted).
    pub end: Option<(i64, bool)>,
}

/// Producer ids 1 and 2 are idempotent, 3 and 4 transactional.
pub const PRODUCERS: [i64; 4] = [1, 2, 3, 4];

pub fn is_transactional(producer_id: i64) -> bool {
    producer_id >= 3
}

impl ModelBatch {
    pub fn last(&self) -> i64 {
        self.base + self.records.len() as i64 - 1
    }
}

/// The model: every batch still in the log (including ones below the log start offset
/// that live in a segment not yet deleted), the two offsets, the leader epoch entries
/// and the high watermark the log was told of.
#[derive(Debug, Default)]
pub struct Model {
    pub batches: Vec<ModelBatch>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// (epoch, start offset), kept by Kafka's rules as the operations happen.
    pub epochs: Vec<(i32, i64)>,
    pub high_watermark: i64,
}

impl Model {
    pub fn visible(&self) -> Vec<Rec> {
        self.batches
            .iter()
            .flat_map(|b| {
                b.records.iter().enumerate().map(|(i, (ts, v))| Rec {
                    offset: b.base + i as i64,
                    timestamp: *ts,
                    value: v.clone(),
                })
            })
            .filter(|r| r.offset >= self.log_start_offset)
            .collect()
    }

    pub fn containing(&self, offset: i64) -> Option<usize> {
        self.batches.iter().position(|b| b.base <= offset && offset <= b.last())
    }

    pub fn restart_empty_at(&mut self, offset: i64) {
        self.batches.clear();
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.epochs.clear();
        self.high_watermark = offset;
    }

    /// A batch (or a new leader) starts `epoch` at `start` if the epoch is new, after
    /// the entries at or after `start`.
    pub fn assign_epoch(&mut self, epoch: i32, start: i64) {
        if self.epochs.last().is_some_and(|&(latest, _)| latest >= epoch) {
            return;
        }
        while self.epochs.last().is_some_and(|&(_, s)| s >= start) {
            self.epochs.pop();
        }
        self.epochs.push((epoch, start));
    }

    /// The log was truncated (or recovered) to its log end: later epochs go, and the
    /// high watermark comes down to it.
    pub fn epochs_and_hw_to_log_end(&mut self) {
        let end = self.log_end_offset;
        self.epochs.retain(|&(_, s)| s < end);
        self.high_watermark = self.high_watermark.min(end);
    }

    /// The log start moved up: the epoch covering it starts there, the high watermark is
    /// at least there.
    pub fn epochs_and_hw_to_log_start(&mut self) {
        let start = self.log_start_offset;
        let covered = self.epochs.iter().take_while(|&&(_, s)| s <= start).count();
        if covered > 0 {
            let epoch = self.epochs[covered - 1].0;
            self.epochs.splice(..covered, [(epoch, start)]);
        }
        self.high_watermark = self.high_watermark.max(start);
    }

    /// OffsetForLeaderEpoch as Kafka answers it from `epochs`.
    pub fn end_offset_for(&self, requested: i32) -> Option<(i32, i64)> {
        let &(latest, _) = self.epochs.last()?;
        if requested == -1 {
            None
        } else if requested == latest {
            Some((latest, self.log_end_offset))
        } else {
            let &(_, end) = self.epochs.iter().find(|(e, _)| *e > requested)?;
            let floor = self.epochs.iter().rev().find(|(e, _)| *e <= requested);
            Some((floor.map_or(requested, |f| f.0), end))
        }
    }

    /// First offsets of the unstable transactions: open ones, and completed ones whose
    /// markers the high watermark has not passed.
    pub fn unstable_firsts(&self) -> Vec<i64> {
        let hw = self.high_watermark;
        self.transactions()
            .iter()
            .filter(|t| t.end.is_none_or(|(marker, _)| marker >= hw))
            .map(|t| t.first_offset)
            .collect()
    }

    pub fn producer_view(&self, producer_id: i64) -> Option<ProducerView> {
        let mut view: Option<ProducerView> = None;
        for (i, b) in self.batches.iter().enumerate() {
            let Some(p) = b.producer.as_ref().filter(|p| p.producer_id == producer_id) else { continue };
            let v = view.get_or_insert_with(|| ProducerView {
                epoch: p.epoch,
                last_seq: -1,
                ..Default::default()
            });
            if p.marker.is_some() {
                v.open_txn = None;
                continue;
            }
            if v.epoch != p.epoch {
                v.window.clear();
                v.epoch = p.epoch;
            }
            v.window.push(i);
            if v.window.len() > 5 {
                v.window.remove(0);
            }
            v.last_seq = p.last_seq;
            v.last_data_base = b.base;
            if p.transactional && v.open_txn.is_none() {
                v.open_txn = Some(b.base);
            }
        }
        view
    }

    pub fn transactions(&self) -> Vec<ModelTxn> {
        let mut open: std::collections::HashMap<i64, i64> = Default::default();
        let mut txns = Vec::new();
        for b in &self.batches {
            let Some(p) = &b.producer else { continue };
            match p.marker {
                Some(commit) => {
                    if let Some(first_offset) = open.remove(&p.producer_id) {
                        txns.push(ModelTxn {
                            producer_id: p.producer_id,
                            first_offset,
                            end: Some((b.base, !commit)),
                        });
                    }
                }
                None if p.transactional => {
                    open.entry(p.producer_id).or_insert(b.base);
                }
                None => {}
            }
        }
        txns.extend(open.into_iter().map(|(producer_id, first_offset)| ModelTxn {
            producer_id,
            first_offset,
            end: None,
        }));
        txns
    }
}
