//! Partition roles, the high watermark and parked fetches, without sockets.

use super::*;
use crate::metadata::{PartitionRecord, TopicId};
use bytes::Bytes;
use std::time::Duration;
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::ErrorCode;
use strata_storage::AppendOrigin;
use tokio::sync::Notify;

fn batch() -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    b.append(&NewRecord::new(1, None, Some(Bytes::from_static(b"v")))).expect("append");
    b.build().expect("build")
}

/// Whether `waker` holds a wakeup: the notified future completes on its first poll.
async fn woken(waker: &Notify) -> bool {
    tokio::time::timeout(Duration::ZERO, waker.notified()).await.is_ok()
}

fn record(index: i32, replicas: &[i32], isr: &[i32], leader: i32, leader_epoch: i32) -> PartitionRecord {
    PartitionRecord {
        topic_id: TopicId(Uuid([7; 16])),
        partition: index,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch,
        partition_epoch: leader_epoch,
        adding_replicas: vec![],
        removing_replicas: vec![],
    }
}

/// A replica manager for node 1 hosting `t-0` and `t-1`, led here with an ISR of one.
fn replicas(dir: &std::path::Path) -> ReplicaManager {
    let logs = LogManager::open(dir, LogConfig::default(), 0).expect("log manager");
    let replicas = ReplicaManager::new(logs, 1);
    for index in 0..2 {
        let p = replicas.ensure("t", index, Uuid([7; 16]), &LogConfig::default()).expect("partition");
        assert!(p.make_leader(&record(index, &[1], &[1], 1, 0), 0));
    }
    replicas
}

/// A replica manager for node 1 hosting `r-0` with no role yet (kept alive beside it).
fn hosted_r0(dir: &std::path::Path) -> (ReplicaManager, Arc<Partition>) {
    let logs = LogManager::open(dir, LogConfig::default(), 0).expect("log manager");
    let replicas = ReplicaManager::new(logs, 1);
    let p = replicas.ensure("r", 0, Uuid([7; 16]), &LogConfig::default()).expect("partition");
    (replicas, p)
}

#[tokio::test]
async fn an_append_wakes_only_the_fetches_parked_on_its_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let (p0, p1) = (replicas.get("t", 0).expect("p0"), replicas.get("t", 1).expect("p1"));
    let (on_p0, on_p1, on_both) = (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    p0.park(&on_p0, false);
    p1.park(&on_p1, false);
    p0.park(&on_both, false);
    p1.park(&on_both, false);
    p0.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert!(woken(&on_p0).await, "parked on the partition appended to");
    assert!(woken(&on_both).await, "parked on it among others");
    assert!(!woken(&on_p1).await, "parked elsewhere: not woken");
    // A wakeup is consumed: the next append needs a new registration.
    p0.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert!(!woken(&on_p0).await, "not parked any more");
    p1.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert!(woken(&on_p1).await);
}

#[tokio::test]
async fn fetches_long_polling_an_idle_partition_do_not_pile_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let p = replicas.get("t", 0).expect("p0");
    let live = Arc::new(Notify::new());
    p.park(&live, false);
    for _ in 0..10_000 {
        let short_lived = Arc::new(Notify::new());
        p.park(&short_lived, false);
        p.park(&short_lived, false);
    }
    assert!(p.parked_len() <= 2 * parked::PARKED_PRUNE_MIN, "{} entries kept", p.parked_len());
    p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert!(woken(&live).await, "a live fetch survives the pruning");
    assert_eq!(p.parked_len(), 0);
}

#[tokio::test]
async fn a_leader_alone_in_its_isr_commits_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let p = replicas.get("t", 0).expect("p0");
    let info = p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert_eq!(p.high_watermark(), info.last_offset + 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    assert_eq!(p.wait_for_high_watermark(info.last_offset, 0, deadline).await, Ok(()));
}

#[tokio::test]
async fn the_high_watermark_waits_for_followers_and_a_follower_fetch_moves_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_replicas, p) = hosted_r0(dir.path());
    assert!(p.make_leader(&record(0, &[1, 2], &[1, 2], 1, 3), 0));
    let info = p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert_eq!(p.high_watermark(), 0, "follower 2 has not fetched");
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            p.wait_for_high_watermark(info.last_offset, 3, deadline).await
        })
    };
    let leo = p.log.log_end_offset();
    let proposal = p.on_follower_fetch(2, leo, 0, 9, leo, 10, |_, _| true);
    assert!(proposal.is_none(), "2 is already in the ISR");
    assert_eq!(p.high_watermark(), leo);
    assert_eq!(waiter.await.expect("join"), Ok(()));
}

#[tokio::test]
async fn losing_leadership_fails_waiting_produces_and_refuses_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_replicas, p) = hosted_r0(dir.path());
    p.make_leader(&record(0, &[1, 2], &[1, 2], 1, 3), 0);
    let info = p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            p.wait_for_high_watermark(info.last_offset, 3, deadline).await
        })
    };
    tokio::task::yield_now().await;
    assert!(p.make_follower(&record(0, &[1, 2], &[2], 2, 4)));
    assert_eq!(waiter.await.expect("join"), Err(WaitError::NotLeader));
    assert!(matches!(p.append_as_leader(batch(), AppendOrigin::Client, 0), Err(AppendError::NotLeader)));
    // A follower takes the leader's high watermark, bounded by its own log end.
    p.update_follower_high_watermark(100);
    assert_eq!(p.high_watermark(), p.log.log_end_offset());
}

#[tokio::test]
async fn an_isr_shrink_is_proposed_and_committed_then_the_high_watermark_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_replicas, p) = hosted_r0(dir.path());
    p.make_leader(&record(0, &[1, 2], &[1, 2], 1, 3), 0);
    p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    assert!(p.maybe_shrink_isr(10, 30_000).is_none());
    let proposal = p.maybe_shrink_isr(40_000, 30_000).expect("shrink");
    assert_eq!(proposal.new_isr, vec![(1, -1)]);
    assert_eq!(p.high_watermark(), 0, "the removal is not committed yet");
    assert!(p.maybe_shrink_isr(50_000, 30_000).is_none(), "one change in flight at a time");
    p.isr_change_answered(3, Some((vec![1], 4)));
    assert_eq!(p.isr_size(), 1);
    assert_eq!(p.high_watermark(), p.log.log_end_offset());
}

#[tokio::test]
async fn a_replica_added_by_a_reassignment_is_followed_and_joins_the_isr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_replicas, p) = hosted_r0(dir.path());
    p.make_leader(&record(0, &[1, 2], &[1, 2], 1, 3), 0);
    p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    let leo = p.log.log_end_offset();
    assert!(p.on_follower_fetch(2, leo, 0, 9, leo, 10, |_, _| true).is_none());
    assert!(p.on_follower_fetch(3, leo, 0, 9, leo, 10, |_, _| true).is_none(), "3 is no replica yet");
    // The move to [1, 3] starts: same leadership, 3 added, 2 leaving.
    let moving = PartitionRecord {
        replicas: vec![1, 3, 2],
        adding_replicas: vec![3],
        removing_replicas: vec![2],
        partition_epoch: 4,
        ..record(0, &[1, 2], &[1, 2], 1, 3)
    };
    assert!(!p.make_leader(&moving, 20), "no new leadership");
    let proposal = p.on_follower_fetch(3, leo, 0, 9, leo, 30, |_, _| true).expect("3 may join");
    assert_eq!(proposal.new_isr, vec![(1, -1), (2, 9), (3, 9)]);
    // The controller answers with the completed move; the image brings its replicas after.
    p.isr_change_answered(3, Some((vec![1, 3], 5)));
    let done = PartitionRecord { partition_epoch: 5, ..record(0, &[1, 3], &[1, 3], 1, 3) };
    assert!(!p.make_leader(&done, 40));
    assert!(p.on_follower_fetch(2, leo, 0, 9, leo, 50, |_, _| true).is_none());
    assert_eq!(p.isr_size(), 2);
    assert!(p.maybe_shrink_isr(10_000_000, 30_000).is_some(), "3 is tracked: it can fall behind");
}

#[test]
fn a_requests_leader_epoch_is_checked_against_the_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let p = replicas.get("t", 0).expect("p0");
    assert!(p.make_leader(&record(0, &[1], &[1], 1, 4), 0));
    assert_eq!(p.check_leader_epoch(-1), Ok(4), "not sent: accepted");
    assert_eq!(p.check_leader_epoch(4), Ok(4));
    assert_eq!(p.check_leader_epoch(5), Err(ErrorCode::UnknownLeaderEpoch), "the client saw newer metadata");
    assert_eq!(p.check_leader_epoch(3), Err(ErrorCode::FencedLeaderEpoch), "the client is behind");
}

#[tokio::test]
async fn delete_records_waits_for_the_log_start_offset_of_every_live_follower() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogManager::open(dir.path(), LogConfig::default(), 0).expect("log manager");
    let replicas = ReplicaManager::new(logs, 1);
    let p = replicas.ensure("d", 0, Uuid([7; 16]), &LogConfig::default()).expect("partition");
    assert!(p.make_leader(&record(0, &[1, 2, 3], &[1, 2, 3], 1, 4), 0));
    for _ in 0..5 {
        p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    }
    let leo = p.log.log_end_offset();
    for follower in [2, 3] {
        p.on_follower_fetch(follower, leo, 0, 9, leo, 10, |_, _| true);
    }
    assert_eq!(p.high_watermark(), leo);
    replicas.delete_records(&p, 3).expect("delete");
    let everyone = |_: i32| true;
    assert_eq!(p.low_watermark(everyone), Some(0), "the followers still start at 0");

    // Nothing moves: the wait ends at its deadline with the low watermark of then.
    let soon = tokio::time::Instant::now() + Duration::from_millis(50);
    assert_eq!(p.wait_for_low_watermark(3, 4, soon, everyone).await, Err((WaitError::Timeout, 0)));

    // Each follower reports its new log start offset in a fetch; the wait ends with the last.
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            p.wait_for_low_watermark(3, 4, deadline, |_| true).await
        })
    };
    p.on_follower_fetch(2, leo, 3, 9, leo, 20, |_, _| true);
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "follower 3 has not moved yet");
    p.on_follower_fetch(3, leo, 3, 9, leo, 30, |_, _| true);
    assert_eq!(waiter.await.expect("join"), Ok(3));

    // A follower on a broker that is not alive does not hold the answer back.
    replicas.delete_records(&p, 4).expect("delete");
    p.on_follower_fetch(2, leo, 4, 9, leo, 40, |_, _| true);
    let soon = tokio::time::Instant::now() + Duration::from_millis(50);
    assert_eq!(p.wait_for_low_watermark(4, 4, soon, |node| node != 3).await, Ok(4));
    // And a leadership that moved fails the wait.
    assert_eq!(p.wait_for_low_watermark(4, 5, soon, everyone).await, Err((WaitError::NotLeader, -1)));
}

#[test]
fn a_log_left_by_an_earlier_topic_of_the_same_name_is_not_taken_for_the_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old_id, new_id) = (Uuid([1; 16]), Uuid([2; 16]));
    {
        let logs = LogManager::open(dir.path(), LogConfig::default(), 0).expect("log manager");
        let replicas = ReplicaManager::new(logs, 1);
        let p = replicas.ensure("t", 0, old_id, &LogConfig::default()).expect("partition");
        assert!(p.make_leader(&record(0, &[1], &[1], 1, 0), 0));
        for _ in 0..3 {
            p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
        }
        assert_eq!(p.log.log_end_offset(), 3);
        replicas.close().expect("close");
    }
    let text = std::fs::read_to_string(dir.path().join("t-0").join(strata_storage::PARTITION_METADATA_FILE))
        .expect("partition.metadata");
    assert_eq!(text, format!("version: 0\ntopic_id: {old_id}\n"));

    // Reopened under the same id: the records are the topic's own.
    {
        let logs = LogManager::open(dir.path(), LogConfig::default(), 0).expect("log manager");
        let replicas = ReplicaManager::new(logs, 1);
        let p = replicas.ensure("t", 0, old_id, &LogConfig::default()).expect("partition");
        assert_eq!(p.log.log_end_offset(), 3);
        replicas.close().expect("close");
    }
    // Under another id (the topic was deleted and made again meanwhile): a fresh log.
    let logs = LogManager::open(dir.path(), LogConfig::default(), 0).expect("log manager");
    let replicas = ReplicaManager::new(logs, 1);
    let p = replicas.ensure("t", 0, new_id, &LogConfig::default()).expect("partition");
    assert_eq!((p.log.log_start_offset(), p.log.log_end_offset(), p.high_watermark()), (0, 0, 0));
    let text = std::fs::read_to_string(dir.path().join("t-0").join(strata_storage::PARTITION_METADATA_FILE))
        .expect("partition.metadata");
    assert_eq!(text, format!("version: 0\ntopic_id: {new_id}\n"));
}

#[test]
fn only_isr_followers_holding_the_offset_are_offered_to_consumers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_replicas, p) = hosted_r0(dir.path());
    assert!(p.make_leader(&record(0, &[1, 2, 3, 4], &[1, 2, 3], 1, 3), 0));
    for _ in 0..3 {
        p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    }
    assert!(p.read_replica_candidates(0).is_empty(), "no follower fetched yet");
    p.on_follower_fetch(2, 3, 0, 9, 3, 10, |_, _| false);
    p.on_follower_fetch(3, 1, 1, 9, 3, 12, |_, _| false);
    p.on_follower_fetch(4, 3, 0, 9, 3, 14, |_, _| false);
    let ids = |offset| p.read_replica_candidates(offset).iter().map(|c| c.0).collect::<Vec<_>>();
    assert_eq!(ids(1), vec![2, 3], "4 is out of the ISR");
    assert_eq!(ids(0), vec![2], "3 starts after offset 0");
    assert_eq!(ids(2), vec![2], "3 does not hold offset 2 yet");
    assert_eq!(p.read_replica_candidates(3)[0], (2, 3, 10), "log end and last caught up");
    assert!(p.make_follower(&record(0, &[1, 2, 3, 4], &[2, 3], 2, 4)));
    assert!(p.read_replica_candidates(1).is_empty(), "a follower offers nothing");
}

/// A read_committed fetch reads the last stable offset once and collects the aborted
/// transactions below it: the data must stop at that same bound even when the partition's
/// offsets moved on meanwhile (a transaction aborted in between would otherwise reach the
/// consumer without its entry in the aborted list, as in the harsh workload's seed 7).
#[test]
fn a_fetch_reads_no_further_than_the_bound_it_was_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let p = replicas.get("t", 0).expect("p0");
    for _ in 0..3 {
        p.append_as_leader(batch(), AppendOrigin::Client, 0).expect("append");
    }
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (3, 3));
    let batches = |set: &strata_protocol::records::RecordSet| {
        strata_protocol::records::RecordBatches::new(set.load().expect("load"))
            .map(|b| b.expect("batch").base_offset())
            .collect::<Vec<_>>()
    };
    let bound = ReadUpper::LastStable.bound(3, 1);
    assert_eq!(batches(&p.read_for_fetch(0, 1 << 20, true, bound).expect("read")), vec![0]);
    assert_eq!(batches(&p.read_for_fetch(0, 1 << 20, true, 3).expect("read")), vec![0, 1, 2]);
    // At the bound: nothing, without reading.
    assert!(p.read_for_fetch(1, 1 << 20, true, bound).expect("read").is_empty());
    assert_eq!(ReadUpper::LogEnd.bound(3, 1), i64::MAX);
    assert_eq!(ReadUpper::HighWatermark.bound(3, 1), 3);
}
