use super::*;
use proptest::prelude::*;
use strata_protocol::records::RecordBatch;

fn record(value: &[u8]) -> NewRecord {
    NewRecord::new(1_000, None, Some(Bytes::copy_from_slice(value)))
}

fn rules<'a>(
    now: Instant,
    leader: &'a dyn Fn(&str, i32) -> Option<i32>,
    room: &'a dyn Fn(i32) -> bool,
    allowed: &'a mut dyn FnMut(&Arc<str>, i32) -> bool,
) -> DrainRules<'a> {
    DrainRules {
        now,
        linger: Duration::from_millis(5),
        delivery_timeout: Duration::from_secs(120),
        flush_up_to: None,
        all_ready: true,
        max_request_size: 1 << 20,
        idempotent: true,
        leader,
        node_has_room: room,
        node_ready: &|_| true,
        partition_allowed: allowed,
    }
}

/// Drains everything, acknowledging each request at once; returns batches in drain order.
fn drain_all(acc: &mut Accumulator, now: Instant) -> Vec<ProducerBatch> {
    let leader = |_: &str, p: i32| Some(p % 2);
    let room = |_: i32| true;
    let mut allowed = |_: &Arc<str>, _: i32| true;
    let mut out = Vec::new();
    loop {
        let drained = acc.drain(&mut rules(now, &leader, &room, &mut allowed));
        if drained.requests.is_empty() {
            return out;
        }
        for (_, batches) in drained.requests {
            for b in batches {
                let q = acc.queue(&b.topic, b.partition).expect("queue");
                q.seq.in_flight -= 1;
                q.seq.acked(b.sequence, b.records);
                out.push(b);
            }
        }
    }
}

#[test]
fn unkeyed_records_stick_to_a_partition_until_its_batch_is_full() {
    let now = Instant::now();
    let mut acc = Accumulator::new(110, Compression::None, false);
    acc.set_meta("t", TopicMeta { partitions: 3, available: (0..3).collect() });
    let mut partitions = Vec::new();
    for _ in 0..8 {
        let a = acc
            .append("t", Target::Sticky, &record(&[7; 30]), 0, &|| now)
            .expect("append")
            .expect("metadata known");
        partitions.push(a.slot.partition());
    }
    // 51 bytes a record: two fit in 110, so the partition changes every second record.
    for pair in partitions.chunks(2) {
        assert_eq!(pair[0], pair[1], "{partitions:?}");
    }
    for w in partitions.windows(3).step_by(2) {
        assert_ne!(w[1], w[2], "{partitions:?}");
    }
}

#[test]
fn a_lingering_batch_waits_and_a_retry_waits_for_its_partition() {
    let now = Instant::now();
    let mut acc = Accumulator::new(16384, Compression::None, false);
    acc.set_meta("t", TopicMeta { partitions: 1, available: (0..1).collect() });
    acc.append("t", Target::Partition(0), &record(b"a"), 0, &|| now)
        .expect("append")
        .expect("metadata known");
    let leader = |_: &str, _: i32| Some(0);
    let room = |_: i32| true;
    let mut allowed = |_: &Arc<str>, _: i32| true;
    let mut r = rules(now, &leader, &room, &mut allowed);
    r.all_ready = false;
    let d = acc.drain(&mut r);
    assert!(d.requests.is_empty());
    assert_eq!(d.next_ready, Some(now + Duration::from_millis(5)));
    r.now = now + Duration::from_millis(5);
    let mut d = acc.drain(&mut r);
    let mut batch = d.requests.pop().expect("request").1.pop().expect("batch");
    assert_eq!(batch.sequence, 0);
    // A newer batch goes out while the first is in flight (pipelining)...
    acc.append("t", Target::Partition(0), &record(b"b"), 0, &|| now)
        .expect("append")
        .expect("metadata known");
    r.all_ready = true;
    let second = acc.drain(&mut r).requests.pop().expect("request").1.pop().expect("batch");
    assert_eq!(second.sequence, 1);
    // ...but when both fail, the first goes again alone, then the second.
    batch.attempts = 1;
    acc.reenqueue(second);
    acc.reenqueue(batch);
    assert!(acc.drain(&mut r).requests.is_empty(), "two still in flight");
    acc.queue("t", 0).expect("q").seq.in_flight = 0;
    let again = acc.drain(&mut r).requests.pop().expect("request").1;
    assert_eq!(again.iter().map(|b| b.sequence).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn a_sealed_batch_is_restamped_after_an_epoch_bump() {
    let now = Instant::now();
    let mut acc = Accumulator::new(16384, Compression::Lz4, false);
    acc.set_meta("t", TopicMeta { partitions: 1, available: (0..1).collect() });
    acc.append("t", Target::Partition(0), &record(b"hello"), 0, &|| now)
        .expect("append")
        .expect("metadata known");
    let mut batches = drain_all(&mut acc, now);
    let b = &mut batches[0];
    let first = b.seal(ProducerIdAndEpoch { id: 7, epoch: 0 }).expect("seal");
    let parsed = RecordBatch::parse(&first).expect("batch");
    assert_eq!((parsed.producer_id(), parsed.producer_epoch(), parsed.base_sequence()), (7, 0, 0));
    b.sequence = 5;
    let again = b.seal(ProducerIdAndEpoch { id: 7, epoch: 1 }).expect("seal");
    let parsed = RecordBatch::parse(&again).expect("batch");
    assert_eq!((parsed.producer_epoch(), parsed.base_sequence()), (1, 5));
    parsed.validate_crc().expect("crc");
    let records = parsed.records(1 << 20).expect("records").collect_all().expect("decode");
    assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
}

proptest! {
    #[test]
    fn each_record_is_in_exactly_one_batch_in_order_within_batch_size(
        sends in proptest::collection::vec((0i32..4, 0usize..300), 1..200),
        batch_size in 64usize..2048,
    ) {
        let now = Instant::now();
        let mut acc = Accumulator::new(batch_size, Compression::None, false);
        acc.set_meta("t", TopicMeta { partitions: 4, available: (0..4).collect() });
        for (i, (p, len)) in sends.iter().enumerate() {
            let mut value = (i as u32).to_be_bytes().to_vec();
            value.resize(4 + len, 0);
            acc.append("t", Target::Partition(*p), &record(&value), 0, &|| now).expect("append").expect("metadata known");
        }
        let mut batches = drain_all(&mut acc, now);
        let mut seen: Vec<Vec<u32>> = vec![Vec::new(); 4];
        let mut next_seq = [0i32; 4];
        for b in &mut batches {
            prop_assert!(b.records == 1 || b.size <= batch_size, "batch of {} bytes", b.size);
            prop_assert_eq!(b.sequence, next_seq[b.partition as usize]);
            next_seq[b.partition as usize] += b.records;
            let bytes = b.seal(ProducerIdAndEpoch { id: 1, epoch: 0 }).expect("seal");
            let parsed = RecordBatch::parse(&bytes).expect("parse");
            for r in parsed.records(1 << 24).expect("records").collect_all().expect("decode") {
                let v = r.value.expect("value");
                seen[b.partition as usize].push(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
            }
        }
        for (p, got) in seen.iter().enumerate() {
            let want: Vec<u32> = sends.iter().enumerate()
                .filter(|(_, (q, _))| *q == p as i32).map(|(i, _)| i as u32).collect();
            prop_assert_eq!(got, &want);
        }
        prop_assert!(acc.take_unsent().is_empty());
    }
}

/// How the simulated broker and network treat the request at the front.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Written and answered.
    Answered,
    /// Written, but the connection drops before the answer: it and every request after
    /// it on the connection fail (some of those written too, up to `written_after`).
    AnswerLost { written_after: usize },
    /// Refused (NOT_LEADER_OR_FOLLOWER) without writing.
    Refused,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        6 => Just(Fate::Answered),
        1 => (0usize..5).prop_map(|written_after| Fate::AnswerLost { written_after }),
        1 => Just(Fate::Refused),
    ]
}

/// The broker's side of idempotence: the next sequence per partition; a batch at it is
/// appended, one below is a duplicate, one above is out of order.
fn broker_append(log: &mut [Vec<u32>], next: &mut [i32], b: &mut ProducerBatch) -> ErrorCode {
    let p = b.partition as usize;
    if b.sequence < next[p] {
        return ErrorCode::DuplicateSequenceNumber;
    }
    if b.sequence > next[p] {
        return ErrorCode::OutOfOrderSequenceNumber;
    }
    let bytes = b.seal(ProducerIdAndEpoch { id: 1, epoch: 0 }).expect("seal");
    let parsed = RecordBatch::parse(&bytes).expect("parse");
    for r in parsed.records(1 << 20).expect("records").collect_all().expect("decode") {
        let v = r.value.expect("value");
        log[p].push(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
    }
    next[p] += b.records;
    ErrorCode::None
}

use super::super::idempotence::{judge, Mode, Verdict};
use strata_protocol::ErrorCode;

proptest! {
    /// With up to 5 requests in flight, answers lost after writes and refusals, every
    /// record ends up written exactly once and in send order per partition.
    #[test]
    fn retries_never_reorder_or_duplicate(
        records in 1usize..300,
        fates in proptest::collection::vec(fate(), 1..400),
    ) {
        let now = Instant::now();
        let mode = Mode { idempotent: true, transactional: false };
        let mut acc = Accumulator::new(60, Compression::None, false);
        acc.set_meta("t", TopicMeta { partitions: 2, available: (0..2).collect() });
        for i in 0..records {
            let p = (i % 2) as i32;
            let target = Target::Partition(p);
            acc.append("t", target, &record(&(i as u32).to_be_bytes()), 0, &|| now).expect("append").expect("metadata known");
        }
        let mut log = vec![Vec::new(), Vec::new()];
        let mut next = [0i32; 2];
        let mut in_flight: VecDeque<Vec<ProducerBatch>> = VecDeque::new();
        let mut fates = fates.into_iter().chain(std::iter::repeat(Fate::Answered));
        let mut acked = 0usize;
        let mut steps = 0;
        while acked < records {
            steps += 1;
            prop_assert!(steps < 100_000, "no progress");
            let room = in_flight.len() < 5;
            let leader = |_: &str, _: i32| Some(0);
            let has_room = move |_: i32| room;
            let mut allowed = |_: &Arc<str>, _: i32| true;
            let mut drained = acc.drain(&mut rules(now, &leader, &has_room, &mut allowed));
            if let Some((_, batches)) = drained.requests.pop() {
                in_flight.push_back(batches);
                continue;
            }
            let front = in_flight.pop_front().expect("something in flight");
            // Requests are judged in order; a lost answer fails the ones behind it too.
            let mut answered: Vec<(Vec<ProducerBatch>, Option<Vec<ErrorCode>>)> = Vec::new();
            match fates.next().expect("endless") {
                Fate::Answered => {
                    let mut front = front;
                    let codes: Vec<ErrorCode> =
                        front.iter_mut().map(|b| broker_append(&mut log, &mut next, b)).collect();
                    for (b, code) in front.iter().zip(&codes) {
                        // A batch sent again goes alone, after everything before it.
                        prop_assert!(
                            b.attempts == 0 || *code != ErrorCode::OutOfOrderSequenceNumber,
                            "retry of {:?} out of order", b
                        );
                    }
                    answered.push((front, Some(codes)));
                }
                Fate::Refused => {
                    let codes = vec![ErrorCode::NotLeaderOrFollower; front.len()];
                    answered.push((front, Some(codes)));
                }
                Fate::AnswerLost { written_after } => {
                    let mut all = vec![front];
                    all.extend(in_flight.drain(..));
                    for (i, request) in all.iter_mut().enumerate() {
                        if i <= written_after {
                            for b in request.iter_mut() {
                                broker_append(&mut log, &mut next, b);
                            }
                        }
                    }
                    answered.extend(all.into_iter().map(|r| (r, None)));
                }
            }
            for (batches, codes) in answered {
                for (i, mut b) in batches.into_iter().enumerate() {
                    let q = acc.queue(&b.topic, b.partition).expect("queue");
                    q.seq.in_flight -= 1;
                    let verdict = match &codes {
                        Some(codes) => judge(codes[i], b.sequence, &q.seq, mode),
                        None => Verdict::Retry,
                    };
                    match verdict {
                        Verdict::Success => {
                            q.seq.acked(b.sequence, b.records);
                            acked += b.records as usize;
                        }
                        Verdict::Retry => {
                            b.attempts += 1;
                            acc.reenqueue(b);
                        }
                        v => prop_assert!(false, "unexpected verdict {:?}", v),
                    }
                }
            }
        }
        for (p, got) in log.iter().enumerate() {
            let want: Vec<u32> = (0..records as u32).filter(|i| (*i % 2) as usize == p).collect();
            prop_assert_eq!(got, &want, "partition {}", p);
        }
    }
}

#[test]
fn an_unknown_topic_asks_for_metadata_and_a_missing_partition_is_refused() {
    let now = Instant::now();
    let mut acc = Accumulator::new(1000, Compression::None, false);
    assert!(acc.append("t", Target::Sticky, &record(b"a"), 0, &|| now).expect("no error").is_none());
    acc.set_meta("t", TopicMeta { partitions: 2, available: vec![1] });
    let e = acc.append("t", Target::Partition(2), &record(b"a"), 0, &|| now).unwrap_err();
    assert_eq!(e.code(), Some(strata_protocol::ErrorCode::UnknownTopicOrPartition));
    let a = acc.append("t", Target::Sticky, &record(b"a"), 0, &|| now).expect("ok").expect("known");
    assert_eq!((a.slot.partition(), a.opened), (1, Some(1)), "the only partition with a leader");
    let a = acc.append("t", Target::Key(7), &record(b"a"), 0, &|| now).expect("ok").expect("known");
    assert_eq!(a.slot.partition(), 1, "7 % 2");
}

#[test]
fn a_finished_batch_buffer_is_built_in_again_once_nothing_else_holds_it() {
    let now = Instant::now();
    let mut acc = Accumulator::new(4096, Compression::None, false);
    acc.set_meta("t", TopicMeta { partitions: 1, available: vec![0] });
    let mut sealed = Vec::new();
    for round in 0..3 {
        acc.append("t", Target::Partition(0), &record(&[round; 100]), 0, &|| now).expect("append");
        let mut batch = drain_all(&mut acc, now).pop().expect("a batch");
        let bytes = batch.seal(ProducerIdAndEpoch::NONE).expect("seal");
        let parsed = RecordBatch::parse(&bytes).expect("a valid batch");
        parsed.validate_crc().expect("crc");
        assert_eq!(parsed.records_count(), 1, "round {round}");
        sealed.push((bytes, batch));
    }
    let (held, first) = sealed.remove(0);
    acc.recycle(first.into_sealed().expect("sealed"));
    assert!(acc.spare.is_empty(), "a request still holds the first batch's bytes");
    drop(held);
    for (bytes, batch) in sealed {
        drop(bytes);
        acc.recycle(batch.into_sealed().expect("sealed"));
    }
    assert_eq!(acc.spare.len(), 2);
    let reused = acc.spare.last().map(|b| b.as_ptr()).expect("spare");
    acc.append("t", Target::Partition(0), &record(b"new"), 0, &|| now).expect("append");
    assert_eq!(acc.spare.len(), 1, "the new batch took a spare buffer");
    let mut batch = drain_all(&mut acc, now).pop().expect("a batch");
    let bytes = batch.seal(ProducerIdAndEpoch::NONE).expect("seal");
    assert_eq!(bytes.as_ptr(), reused, "built in the recycled buffer");
    let parsed = RecordBatch::parse(&bytes).expect("a valid batch, header rewritten");
    parsed.validate_crc().expect("crc");
    let records = parsed.records(1 << 20).expect("records").collect_all().expect("decode");
    let values: Vec<_> = records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(values, vec![Some(Bytes::from_static(b"new"))], "nothing of the old batch remains");
}

#[test]
fn spare_buffers_are_bounded() {
    let mut acc = Accumulator::new(1 << 20, Compression::None, false);
    for _ in 0..10 {
        let mut v = Vec::with_capacity(1 << 20);
        v.extend_from_slice(&[1; 100]);
        acc.recycle(Bytes::from(v));
    }
    assert_eq!(acc.spare.len(), SPARE_BYTES >> 20);
    acc.recycle(Bytes::from(vec![0u8; 10]));
    assert_eq!(acc.spare.len(), SPARE_BYTES >> 20, "a small buffer is not kept");
}
