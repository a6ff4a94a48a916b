//! Compaction under faults and at scale: a crash at every step of the segment swap
//! leaves a correct log, a million updates of a few keys stay small, and a garbage
//! cleaner checkpoint means a full cleaning.

mod compaction_support;

use std::path::Path;

use bytes::Bytes;
use compaction_support::*;
use strata_protocol::records::{Compression, NewRecord, RecordBatchBuilder};
use strata_storage::{CleanOutcome, Cleaner, LogConfig};

/// Copies every file of `from` into `to` (created).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_crash_at_any_step_of_the_swap_leaves_a_correct_log() {
    // The original log: several segments, written and left without a clean shutdown.
    let original = tempfile::tempdir().unwrap();
    let config = compact_config();
    let log = open(original.path(), config.clone(), true);
    let mut model = Vec::new();
    churn(&log, &mut model, 120, 6, 100);
    log.roll().unwrap();
    put(&log, &mut model, &[("tail", Some("t"))], 100);
    let old_bases = log.segment_base_offsets();
    let uncleaned = read_all(&log);
    log.flush().unwrap();
    drop(log);

    // What a finished cleaning produces: one group swapped in (reopened with segments big
    // enough for all of them).
    let config = LogConfig { segment_bytes: 1 << 20, ..config };
    let done = tempfile::tempdir().unwrap();
    copy_dir(&part_dir(original.path()), &part_dir(done.path()));
    let log = open(done.path(), config.clone(), false);
    assert_eq!(cleaner().clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    let cleaned = read_all(&log);
    let new_bases = log.segment_base_offsets();
    assert_eq!(new_bases.len(), 2, "one cleaned segment plus the active one: {new_bases:?}");
    drop(log);
    let replaced: Vec<i64> = old_bases[..old_bases.len() - 1].to_vec();
    let cleaned_file =
        |kind: &str| std::fs::read(part_dir(done.path()).join(format!("{:020}.{kind}", 0))).unwrap();

    /// Which of the swap's files exist under which suffix.
    struct State {
        name: &'static str,
        /// Suffix of the cleaned log file and of its index files ("" = final name).
        log_suffix: &'static str,
        index_suffix: &'static str,
        /// How many of the replaced segments were already renamed to `.deleted`.
        deleted: usize,
        /// Cut the cleaned log file short (a crash while writing it).
        torn: bool,
        expect_cleaned: bool,
    }
    let all = replaced.len();
    let states = [
        State {
            name: "writing .cleaned",
            log_suffix: ".cleaned",
            index_suffix: ".cleaned",
            deleted: 0,
            torn: true,
            expect_cleaned: false,
        },
        State {
            name: "written .cleaned",
            log_suffix: ".cleaned",
            index_suffix: ".cleaned",
            deleted: 0,
            torn: false,
            expect_cleaned: false,
        },
        State {
            name: "indexes renamed .swap",
            log_suffix: ".cleaned",
            index_suffix: ".swap",
            deleted: 0,
            torn: false,
            expect_cleaned: false,
        },
        State {
            name: "all renamed .swap",
            log_suffix: ".swap",
            index_suffix: ".swap",
            deleted: 0,
            torn: false,
            expect_cleaned: true,
        },
        State {
            name: "some old .deleted",
            log_suffix: ".swap",
            index_suffix: ".swap",
            deleted: 2,
            torn: false,
            expect_cleaned: true,
        },
        State {
            name: "all old .deleted",
            log_suffix: ".swap",
            index_suffix: ".swap",
            deleted: all,
            torn: false,
            expect_cleaned: true,
        },
        State {
            name: "indexes final",
            log_suffix: ".swap",
            index_suffix: "",
            deleted: all,
            torn: false,
            expect_cleaned: true,
        },
        State {
            name: "done, .deleted left",
            log_suffix: "",
            index_suffix: "",
            deleted: all,
            torn: false,
            expect_cleaned: true,
        },
    ];
    for state in states {
        let root = tempfile::tempdir().unwrap();
        let dir = part_dir(root.path());
        copy_dir(&part_dir(original.path()), &dir);
        for base in replaced.iter().take(state.deleted) {
            for kind in ["log", "index", "timeindex", "txnindex"] {
                let path = dir.join(format!("{base:020}.{kind}"));
                if path.exists() {
                    std::fs::rename(&path, dir.join(format!("{base:020}.{kind}.deleted"))).unwrap();
                }
            }
        }
        let mut log_bytes = cleaned_file("log");
        if state.torn {
            log_bytes.truncate(log_bytes.len() / 2);
        }
        std::fs::write(dir.join(format!("{:020}.log{}", 0, state.log_suffix)), log_bytes).unwrap();
        for kind in ["index", "timeindex"] {
            std::fs::write(dir.join(format!("{:020}.{kind}{}", 0, state.index_suffix)), cleaned_file(kind))
                .unwrap();
        }

        let log = open(root.path(), config.clone(), false);
        let expected = if state.expect_cleaned { &cleaned } else { &uncleaned };
        assert_eq!(&read_all(&log), expected, "state {}", state.name);
        let expected_bases = if state.expect_cleaned { &new_bases } else { &old_bases };
        assert_eq!(&log.segment_base_offsets(), expected_bases, "state {}", state.name);
        for suffix in [".cleaned", ".swap", ".deleted"] {
            assert!(files_with_suffix(&dir, suffix).is_empty(), "state {}: {suffix} left", state.name);
        }
        // The log works on: appends, and a cleaning to the same result.
        let info = log.append(keyed(&[("after", Some("crash"))], 100, Compression::None), 0, 100).unwrap();
        assert_eq!(info.first_offset, model.len() as i64, "state {}", state.name);
        log.roll().unwrap();
        cleaner().clean(&log, 100, i64::MAX).unwrap();
        let mut all_model = model.clone();
        all_model.push((info.first_offset, "after".into(), Some("crash".into())));
        assert_eq!(read_all(&log), latest(&all_model, true), "state {}", state.name);
    }
}

#[test]
fn a_million_updates_of_a_few_keys_stay_small() {
    // 1M records take about 30 s in a debug build on two cores (append validation and two
    // record decodings each); 200k exercise the same paths. Release builds run the million.
    let total: usize = if cfg!(debug_assertions) { 200_000 } else { 1_000_000 };
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 4096,
        segment_index_bytes: 1 << 20,
        min_cleanable_dirty_ratio: 0.5,
        ..compact_config()
    };
    let log = open(dir.path(), config, true);
    let mut cleaner = cleaner();
    let keys = 8;
    let mut last_value = vec![0usize; keys];
    let mut n = 0;
    let mut cleanings = 0;
    while n < total {
        let mut b = RecordBatchBuilder::new(0);
        for _ in 0..1000 {
            let key = n % keys;
            b.append(&NewRecord::new(
                100,
                Some(Bytes::from(format!("key-{key}"))),
                Some(Bytes::from(n.to_string())),
            ))
            .unwrap();
            last_value[key] = n;
            n += 1;
        }
        log.append(b.build().unwrap(), 0, 100).unwrap();
        if n % 50_000 == 0 {
            let stats = cleaner.clean(&log, 100, i64::MAX).unwrap();
            if stats.outcome == CleanOutcome::Cleaned {
                cleanings += 1;
            }
        }
    }
    log.roll().unwrap();
    cleaner.clean(&log, 100, i64::MAX).unwrap();
    assert!(cleanings >= 2);
    assert_eq!(log.log_end_offset(), total as i64);
    let got = read_all(&log);
    let mut expected: Vec<Rec> = (0..keys)
        .map(|k| (last_value[k] as i64, format!("key-{k}"), Some(last_value[k].to_string())))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
    assert!(log.size_in_bytes() < 64 * 1024, "log stays small: {} bytes", log.size_in_bytes());
    assert!(log.num_segments() < 40, "{} segments", log.num_segments());
}

#[test]
fn garbage_in_a_cleaned_checkpoint_means_a_full_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(), true);
    let mut model = Vec::new();
    churn(&log, &mut model, 50, 3, 100);
    log.roll().unwrap();
    log.close().unwrap();
    std::fs::write(part_dir(dir.path()).join("cleaner-offset-checkpoint"), "0\nnot-a-number\n").unwrap();
    let log = open(dir.path(), compact_config(), true);
    assert_eq!(Cleaner::inspect(&log, 100, i64::MAX).unwrap().first_dirty_offset, 0);
    assert_eq!(cleaner().clean(&log, 100, i64::MAX).unwrap().outcome, CleanOutcome::Cleaned);
    assert_eq!(read_all(&log), latest(&model, true));
}
