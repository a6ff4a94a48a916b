//! Log compaction (the cleaner): keyed updates shrink to the latest record per key with
//! offsets preserved and reads working across the holes; tombstones live until
//! `delete.retention.ms` after their first cleaning (a passed horizon brings the cleaner
//! back, also after a restart); the active segment, the high watermark and
//! `min.compaction.lag.ms` bound what is cleaned; the dirty ratio and its checkpoint
//! gate cleaning across restarts; compressed and idempotent batches;
//! `compact,delete` retention. Crashes and scale: `compaction_crash.rs`; transactions:
//! `compaction_txn.rs`.

mod compaction_support;

use std::collections::BTreeMap;

use compaction_support::*;
use strata_protocol::records::{Compression, RecordBatch, RecordBatches};
use strata_storage::{CleanOutcome, Cleaner, CleanerConfig, LogConfig};

#[test]
fn keyed_updates_and_tombstones_shrink_to_the_latest_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    churn(&log, &mut model, 200, 10, 100);
    log.roll().unwrap();
    let before_bytes = log.size_in_bytes();
    let before_segments = log.num_segments();
    assert!(before_segments > 5);

    let stats = cleaner().clean(&log, 100, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned, "{stats:?}");
    assert_eq!(stats.end_offset, log.log_end_offset());
    assert_eq!(read_all(&log), latest(&model, true), "latest per key, tombstones kept, offsets preserved");
    assert!(log.size_in_bytes() < before_bytes / 10, "{} -> {}", before_bytes, log.size_in_bytes());
    assert_eq!(log.log_end_offset(), 800);
    assert_eq!(log.log_start_offset(), 0);

    // Every offset in the log, hole or not, reads from the first batch at or after it; a
    // read may return only emptied batches, after which the reader goes on from their end.
    let kept = read_all(&log);
    for offset in 0..log.log_end_offset() {
        let mut from = offset;
        let got_first = loop {
            let read = log.read(from, 1 << 20, i64::MAX, true).unwrap();
            let batches: Vec<RecordBatch> =
                RecordBatches::new(read.records.read_bytes().unwrap()).map(|b| b.unwrap()).collect();
            assert!(batches.first().is_some_and(|b| b.last_offset() >= from), "read at {from}");
            if let Some(r) = records(&batches).into_iter().find(|r| r.0 >= offset) {
                break Some(r);
            }
            from = batches.last().unwrap().next_offset();
            if from >= log.log_end_offset() {
                break None;
            }
        };
        assert_eq!(got_first.as_ref(), kept.iter().find(|r| r.0 >= offset), "read at {offset}");
    }

    // Appends go on densely; the next cleaning merges the small cleaned segments into
    // one (groups are formed from the segments' sizes before cleaning, as in Kafka); a
    // restart keeps everything.
    assert_eq!(log.num_segments(), before_segments);
    put(&log, &mut model, &[("k1", Some("after"))], 200);
    assert_eq!(model.last().unwrap().0, 800);
    log.roll().unwrap();
    assert_eq!(cleaner().clean(&log, 200, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(log.num_segments(), 2, "one cleaned segment and the active one");
    log.close().unwrap();
    let log = open(dir.path(), compact_config(), true);
    assert_eq!(read_all(&log), latest(&model, true));
    assert!(files_with_suffix(&part_dir(dir.path()), ".cleaned").is_empty());
    assert!(files_with_suffix(&part_dir(dir.path()), ".swap").is_empty());
}

#[test]
fn tombstones_vanish_after_delete_retention() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    put(&log, &mut model, &[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))], 10);
    put(&log, &mut model, &[("a", None), ("b", Some("2"))], 10);
    log.roll().unwrap();
    let mut cleaner = cleaner();

    // First cleaning at t=5_000: the tombstone is kept, its batch stamped with the
    // horizon 5_000 + delete.retention.ms.
    assert_eq!(cleaner.clean(&log, 5_000, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
    let horizon_batch = all_batches(&log).into_iter().find(|b| b.has_delete_horizon()).expect("horizon set");
    assert_eq!(horizon_batch.base_timestamp(), 6_000);
    assert_eq!(records(&[horizon_batch])[0].1, "a", "the record timestamps survive the new base");

    // More writes make the log dirty again; before the horizon the tombstone stays.
    put(&log, &mut model, &[("c", Some("2"))], 20);
    log.roll().unwrap();
    assert_eq!(cleaner.clean(&log, 5_999, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert!(read_all(&log).iter().any(|r| r.1 == "a"));

    // At the horizon it goes, and nothing of key a is left.
    put(&log, &mut model, &[("d", Some("1"))], 30);
    log.roll().unwrap();
    let stats = cleaner.clean(&log, 6_000, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    assert_eq!(stats.tombstones_removed, 1);
    assert_eq!(read_all(&log), latest(&model, false));
    assert!(read_all(&log).iter().all(|r| r.1 != "a"));
}

#[test]
fn the_active_segment_and_the_high_watermark_bound_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    churn(&log, &mut model, 100, 5, 100);
    // Duplicates in the active segment stay untouched.
    put(&log, &mut model, &[("k0", Some("x")), ("k0", Some("y"))], 100);
    let active = *log.segment_base_offsets().last().unwrap();
    let active_path = part_dir(dir.path()).join(format!("{active:020}.log"));
    let active_bytes = std::fs::read(&active_path).unwrap();

    // A high watermark inside the second segment: only the first is cleanable.
    let second = log.segment_base_offsets()[1];
    let stats = cleaner().clean(&log, 100, second + 1).unwrap();
    assert_eq!(stats.info.unwrap().first_uncleanable_offset, second);
    assert_eq!(stats.end_offset, second);
    let after_first = read_all(&log);
    assert_eq!(
        after_first.iter().filter(|r| r.0 >= second).count(),
        model.iter().filter(|r| r.0 >= second).count()
    );

    let stats = cleaner().clean(&log, 100, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    assert_eq!(stats.end_offset, active, "cleaned up to the active segment");
    assert_eq!(std::fs::read(&active_path).unwrap(), active_bytes, "active segment untouched");
    assert_eq!(*log.segment_base_offsets().last().unwrap(), active);
    let mut expected = latest(&model.iter().filter(|r| r.0 < active).cloned().collect::<Vec<_>>(), true);
    expected.extend(model.iter().filter(|r| r.0 >= active).cloned());
    assert_eq!(read_all(&log), expected);
}

#[test]
fn min_compaction_lag_keeps_young_segments_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { min_compaction_lag_ms: 1_000, ..compact_config() };
    let log = open(dir.path(), config, true);
    let mut model = Vec::new();
    churn(&log, &mut model, 60, 5, 1_000); // old
    log.roll().unwrap();
    let young_start = log.log_end_offset();
    churn(&log, &mut model, 60, 5, 5_000); // young at now=5_500
    log.roll().unwrap();

    let mut cleaner = cleaner();
    let stats = cleaner.clean(&log, 5_500, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    assert_eq!(stats.end_offset, young_start, "stopped at the first young segment");
    let got = read_all(&log);
    let young: Vec<Rec> = model.iter().filter(|r| r.0 >= young_start).cloned().collect();
    assert_eq!(got.iter().filter(|r| r.0 >= young_start).cloned().collect::<Vec<_>>(), young);

    // Once old enough they are cleaned.
    assert_eq!(cleaner.clean(&log, 6_001, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
}

#[test]
fn max_compaction_lag_forces_cleaning_below_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        LogConfig { min_cleanable_dirty_ratio: 0.99, max_compaction_lag_ms: 10_000, ..compact_config() };
    let log = open(dir.path(), config, true);
    let mut model = Vec::new();
    churn(&log, &mut model, 60, 5, 1_000);
    log.roll().unwrap();
    let mut cleaner = cleaner();
    // Everything dirty (ratio 1 > 0.99): cleaned.
    assert_eq!(cleaner.clean(&log, 1_000, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    churn(&log, &mut model, 2, 5, 2_000);
    log.roll().unwrap();
    // Before the tombstones' delete horizon (1_000 + delete.retention.ms 1_000), which
    // would make it due as well.
    let stats = cleaner.clean(&log, 1_999, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::NotDue, "{stats:?}");
    let stats = cleaner.clean(&log, 12_001, i64::MAX).unwrap();
    assert_eq!(stats.info.unwrap().max_compaction_delay_ms, 1);
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
}

#[test]
fn the_dirty_ratio_gates_cleaning_and_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { min_cleanable_dirty_ratio: 0.5, ..compact_config() };
    let log = open(dir.path(), config.clone(), true);
    let mut model = Vec::new();
    // 500 distinct keys: cleaning keeps everything, so the clean part stays big.
    for i in 0..500 {
        let key = format!("key-{i}");
        put(&log, &mut model, &[(key.as_str(), Some("value-value-value"))], 100);
    }
    log.roll().unwrap();
    let mut cleaner = cleaner();
    let info = Cleaner::inspect(&log, 100, i64::MAX).unwrap();
    assert_eq!((info.first_dirty_offset, info.clean_bytes), (0, 0));
    assert!(info.should_clean && info.dirty_ratio == 1.0);
    assert_eq!(cleaner.clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    let info = Cleaner::inspect(&log, 100, i64::MAX).unwrap();
    assert_eq!((info.first_dirty_offset, info.dirty_bytes, info.should_clean), (500, 0, false));

    // A little more: below the ratio.
    for i in 0..50 {
        let key = format!("key-{i}");
        put(&log, &mut model, &[(key.as_str(), Some("new"))], 100);
    }
    log.roll().unwrap();
    let stats = cleaner.clean(&log, 100, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::NotDue);
    assert!(stats.info.unwrap().dirty_ratio < 0.5);

    // The checkpoint survives a restart (even an unclean one).
    drop(log);
    let log = open(dir.path(), config.clone(), false);
    let info = Cleaner::inspect(&log, 100, i64::MAX).unwrap();
    assert_eq!(info.first_dirty_offset, 500);
    assert!(!info.should_clean);

    // Enough new data crosses the ratio.
    for i in 0..900 {
        let key = format!("key-{}", i % 500);
        put(&log, &mut model, &[(key.as_str(), Some("newer"))], 100);
    }
    log.roll().unwrap();
    let stats = cleaner.clean(&log, 100, i64::MAX).unwrap();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned, "{stats:?}");
    assert_eq!(read_all(&log), latest(&model, true));
    assert_eq!(Cleaner::inspect(&log, 100, i64::MAX).unwrap().first_dirty_offset, log.log_end_offset());

    // A compact-only policy is required.
    let delete_only = LogConfig { cleanup_policy_compact: false, cleanup_policy_delete: true, ..config };
    log.update_config(delete_only).unwrap();
    assert_eq!(cleaner.clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::NotCompacted);
}

#[test]
fn compressed_batches_keep_their_codec() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    let codecs =
        [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd, Compression::None];
    for round in 0..40 {
        let codec = codecs[round % codecs.len()];
        let values: Vec<String> = (0..5).map(|j| format!("value-{round}-{j}")).collect();
        let recs: Vec<(&str, Option<&str>)> = vec![
            ("stable", Some(values[0].as_str())),
            (["x", "y", "z"][round % 3], Some(values[1].as_str())),
            (if round % 2 == 0 { "even" } else { "odd" }, Some(values[2].as_str())),
        ];
        let info = log.append(keyed(&recs, 100, codec), 0, 100).unwrap();
        for (i, (k, v)) in recs.iter().enumerate() {
            model.push((info.first_offset + i as i64, k.to_string(), v.map(str::to_string)));
        }
    }
    log.roll().unwrap();
    let codec_of: BTreeMap<i64, Compression> =
        all_batches(&log).iter().map(|b| (b.base_offset(), b.compression().unwrap())).collect();
    assert_eq!(cleaner().clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
    for batch in all_batches(&log) {
        if batch.records_count() > 0 {
            assert_eq!(batch.compression().unwrap(), codec_of[&batch.base_offset()], "codec kept");
        }
    }
}

#[test]
fn compact_delete_also_applies_retention_and_compact_alone_does_not() {
    for delete in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { cleanup_policy_delete: delete, retention_ms: 10_000, ..compact_config() };
        let log = open(dir.path(), config, true);
        let mut model = Vec::new();
        churn(&log, &mut model, 100, 300, 1_000);
        log.roll().unwrap();
        churn(&log, &mut model, 100, 300, 50_000);
        let segments = log.num_segments();
        let deleted = log.apply_retention(55_000).unwrap();
        assert_eq!(deleted > 0, delete, "retention with delete={delete}");
        assert_eq!(log.num_segments(), segments - deleted);
        assert_eq!(cleaner().clean(&log, 55_000, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
        let start = log.log_start_offset();
        let survivors: Vec<Rec> = model.iter().filter(|r| r.0 >= start).cloned().collect();
        let active = *log.segment_base_offsets().last().unwrap();
        let mut expected =
            latest(&survivors.iter().filter(|r| r.0 < active).cloned().collect::<Vec<_>>(), true);
        expected.extend(survivors.iter().filter(|r| r.0 >= active).cloned());
        assert_eq!(read_all(&log), expected);
    }
}

#[test]
fn a_partial_offset_map_makes_progress_over_several_cleanings() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    churn(&log, &mut model, 150, 120, 100);
    log.roll().unwrap();
    // Room for about 50 keys.
    let mut cleaner =
        Cleaner::new(CleanerConfig { dedupe_buffer_bytes: 24 * 56, ..CleanerConfig::default() }).unwrap();
    let mut rounds = 0;
    let mut last_end = 0;
    loop {
        let stats = cleaner.clean(&log, 100, i64::MAX).unwrap();
        if stats.outcome == CleanOutcome::NotDue {
            break;
        }
        assert_eq!(stats.outcome, CleanOutcome::Cleaned, "{stats:?}");
        assert!(stats.end_offset > last_end, "progress");
        assert!(stats.keys_mapped <= 50);
        last_end = stats.end_offset;
        rounds += 1;
        assert!(rounds < 100);
    }
    assert!(rounds > 3, "the map covered the log in several rounds ({rounds})");
    assert_eq!(read_all(&log), latest(&model, true));
}

#[test]
fn a_producers_last_batch_survives_as_an_empty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    for seq in 0..10 {
        let value = format!("p{seq}");
        let info = log.append(
            producer_batch(7, 0, seq * 2, &[("a", Some(&value)), ("b", Some(&value))], false),
            0,
            100,
        );
        let first = info.unwrap().first_offset;
        model.push((first, "a".to_string(), Some(value.clone())));
        model.push((first + 1, "b".to_string(), Some(value)));
    }
    let producer_last_offset = model.last().unwrap().0;
    // Plain writes supersede everything the producer wrote.
    churn(&log, &mut model, 20, 1, 100);
    put(&log, &mut model, &[("a", Some("z")), ("b", Some("z"))], 100);
    log.roll().unwrap();
    assert_eq!(cleaner().clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
    let batches = all_batches(&log);
    let producer_batches: Vec<&RecordBatch> = batches.iter().filter(|b| b.producer_id() == 7).collect();
    assert_eq!(producer_batches.len(), 1, "only the batch with the last sequence stays");
    let last = producer_batches[0];
    assert_eq!(
        (last.records_count(), last.last_offset(), last.last_sequence()),
        (0, producer_last_offset, 19)
    );

    // After a crash, producer state is rebuilt from the log: the sequence continues.
    drop(log);
    let log = open(dir.path(), compact_config(), false);
    let p = log.active_producers().into_iter().find(|p| p.producer_id == 7).expect("producer known");
    assert_eq!(p.last_sequence, 19);
    assert!(log.append(producer_batch(7, 0, 25, &[("c", Some("gap"))], false), 0, 100).is_err());
    assert!(log.append(producer_batch(7, 0, 20, &[("c", Some("next"))], false), 0, 100).is_ok());
}

#[test]
fn readers_of_replaced_segments_keep_reading_and_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(open(dir.path(), compact_config(), true));
    let mut model = Vec::new();
    churn(&log, &mut model, 100, 4, 100);
    log.roll().unwrap();
    let held = log.read(0, 1 << 20, i64::MAX, true).unwrap().records;
    let held_bytes = held.read_bytes().unwrap();

    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            let mut model = Vec::new();
            churn(&log, &mut model, 300, 4, 100);
            model
        })
    };
    let mut cleaner = cleaner();
    for _ in 0..5 {
        let outcome = cleaner.clean(&log, 100, i64::MAX).unwrap().outcome;
        assert!(matches!(outcome, CleanOutcome::Cleaned | CleanOutcome::NotDue), "{outcome:?}");
    }
    let written = writer.join().unwrap();
    model.extend(written);
    assert_eq!(held.read_bytes().unwrap(), held_bytes, "a replaced (unlinked) segment stays readable");
    log.roll().unwrap();
    assert_eq!(cleaner.clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    model.sort();
    assert_eq!(read_all(&log), latest(&model, true));
    assert_eq!(log.log_end_offset(), 1_600);
}

#[test]
fn a_pending_delete_horizon_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    put(&log, &mut model, &[("k", Some("v"))], 100);
    put(&log, &mut model, &[("k", None)], 100);
    churn(&log, &mut model, 10, 3, 100);
    log.roll().unwrap();
    // The first cleaning keeps the tombstone of "k" and stamps it with now + 1 s.
    let stats = cleaner().clean(&log, 100, i64::MAX).unwrap();
    assert_eq!(stats.pending_horizon_ms, Some(1_100));
    assert!(part_dir(dir.path()).join("cleaner-delete-horizon").exists());
    drop(log);

    for clean_shutdown in [true, false] {
        let log = open(dir.path(), compact_config(), clean_shutdown);
        let mut cleaner = cleaner();
        assert_eq!(cleaner.clean(&log, 1_099, i64::MAX).unwrap().outcome, CleanOutcome::NotDue);
        if clean_shutdown {
            continue;
        }
        // After the horizon, with nothing dirty, the restarted log is due again.
        let stats = cleaner.clean(&log, 1_100, i64::MAX).unwrap();
        assert_eq!(stats.outcome, CleanOutcome::Cleaned);
        assert!(stats.tombstones_removed > 0);
        assert_eq!(read_all(&log), latest(&model, false));
        assert_eq!(cleaner.clean(&log, 2_000, i64::MAX).unwrap().outcome, CleanOutcome::NotDue);
    }
}
