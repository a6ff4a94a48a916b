//! Recovery: torn writes, garbage tails, corrupt bytes, missing or broken indexes,
//! leftover files, and the LogManager's clean-shutdown marker.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use strata_storage::{Log, LogManager, CLEAN_SHUTDOWN_FILE};

const TOPIC: &str = "payments-eu-west";

fn part_dir(root: &Path) -> PathBuf {
    root.join(format!("{TOPIC}-0"))
}

fn seg_file(root: &Path, base: i64, suffix: &str) -> PathBuf {
    part_dir(root).join(format!("{base:020}.{suffix}"))
}

fn open(root: &Path, clean: bool) -> Log {
    Log::open(root, TOPIC, 0, small_config(), clean, 0).expect("open")
}

/// Appends `n` batches of 2 records; returns the byte size of the last segment and its base.
fn fill(log: &Log, n: usize) -> Vec<Rec> {
    for i in 0..n {
        log.append(batch(&format!("b{i}"), 2, i as i64), 0, 0).unwrap();
    }
    read_all(log)
}

fn active_base(log: &Log) -> i64 {
    *log.segment_base_offsets().last().unwrap()
}

#[test]
fn torn_write_is_truncated_and_appends_continue_densely() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 30);
    let base = active_base(&log);
    let path = seg_file(dir.path(), base, "log");
    drop(log); // no close: like a kill

    // Tear the last batch: keep all but 7 of its bytes, then append garbage.
    let len = std::fs::metadata(&path).unwrap().len();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 7).unwrap();
    drop(f);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[0xEE; 33]).unwrap();
    drop(f);

    let log = open(dir.path(), false);
    let after = read_all(&log);
    assert_eq!(after.len(), before.len() - 2, "exactly the torn batch is lost");
    assert_eq!(&after[..], &before[..after.len()]);
    assert_eq!(log.log_end_offset(), 58);
    let info = log.append(batch("next", 2, 99), 0, 0).unwrap();
    assert_eq!(info.first_offset, 58);
    let all = read_all(&log);
    assert_eq!(all.len(), 60);
    assert!(all.windows(2).all(|w| w[1].offset == w[0].offset + 1));
}

#[test]
fn garbage_after_whole_batches_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 5);
    let path = seg_file(dir.path(), active_base(&log), "log");
    let clean_len = std::fs::metadata(&path).unwrap().len();
    drop(log);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    // Looks like a batch header claiming a huge length: recovery must not allocate it.
    let mut fake = vec![0u8; 61];
    fake[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    fake[16] = 2;
    f.write_all(&fake).unwrap();
    drop(f);
    let log = open(dir.path(), false);
    assert_eq!(read_all(&log), before);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), clean_len);
}

#[test]
fn corrupt_byte_truncates_from_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    log.roll().unwrap();
    let _ = fill(&log, 6); // one segment, 6 batches of equal size
    let path = seg_file(dir.path(), active_base(&log), "log");
    let len = std::fs::metadata(&path).unwrap().len();
    drop(log);
    // Flip a byte inside the 4th batch's records.
    let batch_size = len / 6;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(3 * batch_size + 70) as usize] ^= 0x5A;
    std::fs::write(&path, bytes).unwrap();
    let log = open(dir.path(), false);
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(read_all(&log).len(), 6);
}

#[test]
fn clean_shutdown_skips_recovery_and_trims_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 50);
    let base = active_base(&log);
    log.close().unwrap();
    drop(log);
    let index_len = std::fs::metadata(seg_file(dir.path(), base, "index")).unwrap().len();
    let time_len = std::fs::metadata(seg_file(dir.path(), base, "timeindex")).unwrap().len();
    assert!(index_len < 4096 && index_len.is_multiple_of(8));
    assert!(time_len < 4096 && time_len.is_multiple_of(12));
    let log = open(dir.path(), true);
    assert_eq!(read_all(&log), before);
    // The reopened active segment is preallocated again.
    assert_eq!(std::fs::metadata(seg_file(dir.path(), base, "index")).unwrap().len(), 4096);
    log.append(batch("more", 1, 1), 0, 0).unwrap();
    assert_eq!(read_all(&log).len(), before.len() + 1);
}

#[test]
fn unclean_shutdown_with_untrimmed_indexes_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 70);
    let segments = log.segment_base_offsets();
    drop(log);
    // Also claim a clean shutdown wrongly: untrimmed indexes must be caught by sanity checks.
    for clean in [true, false] {
        let log = open(dir.path(), clean);
        assert_eq!(read_all(&log), before);
        assert_eq!(log.segment_base_offsets(), segments);
        drop(log);
    }
}

#[test]
fn missing_or_corrupt_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 80);
    let max = log.max_timestamp().unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    log.close().unwrap();
    drop(log);
    // Middle segment: offset index deleted. First: time index deleted. Last: ragged index.
    std::fs::remove_file(seg_file(dir.path(), bases[1], "index")).unwrap();
    std::fs::remove_file(seg_file(dir.path(), bases[0], "timeindex")).unwrap();
    let mut f =
        OpenOptions::new().append(true).open(seg_file(dir.path(), *bases.last().unwrap(), "index")).unwrap();
    f.write_all(&[1, 2, 3]).unwrap();
    drop(f);
    // Second segment: index entries that point past the log.
    std::fs::write(seg_file(dir.path(), bases[2], "index"), [0u8, 0, 0, 1, 0x7f, 0, 0, 0]).unwrap();

    let log = open(dir.path(), true);
    assert_eq!(read_all(&log), before);
    assert_eq!(log.max_timestamp().unwrap(), max);
    for r in before.iter().step_by(7) {
        let read = log.read(r.offset, 1 << 20, i64::MAX, false).unwrap();
        assert!(records_of(&read).iter().any(|x| x == r));
        assert_eq!(log.offset_for_timestamp(r.timestamp).unwrap().map(|t| t.timestamp), Some(r.timestamp));
    }
    for base in &bases[..3] {
        assert!(seg_file(dir.path(), *base, "index").exists());
        assert!(seg_file(dir.path(), *base, "timeindex").exists());
        let len = std::fs::metadata(seg_file(dir.path(), *base, "index")).unwrap().len();
        assert!(len < 4096, "rebuilt index of an inactive segment is trimmed");
    }
    // A second restart finds the rebuilt indexes sane.
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(read_all(&log), before);
    assert_eq!(log.max_timestamp().unwrap(), max);
}

#[test]
fn leftover_files_are_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 3);
    log.close().unwrap();
    drop(log);
    let p = part_dir(dir.path());
    for name in [
        "00000000000000000000.log.deleted",
        "00000000000000000007.index.cleaned",
        "00000000000000000123.index",
        "log-start-offset-checkpoint.tmp",
        "leader-epoch-checkpoint.tmp",
    ] {
        std::fs::write(p.join(name), b"junk").unwrap();
    }
    let log = open(dir.path(), false);
    assert_eq!(read_all(&log), before);
    let mut names: Vec<String> =
        std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let snapshot = format!("{:020}.snapshot", log.log_end_offset());
    assert_eq!(
        names,
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            snapshot.as_str(),
            "leader-epoch-checkpoint",
        ],
        "the producer snapshot written at close stays"
    );
}

#[test]
fn interrupted_swap_is_completed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let _ = fill(&log, 60);
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    log.close().unwrap();
    drop(log);
    // Pretend a cleaner merged the first two segments into a swap file (here: the first
    // segment's data followed by the second's, i.e. a no-op "cleaning"), then crashed
    // after the originals were renamed away.
    let first = std::fs::read(seg_file(dir.path(), bases[0], "log")).unwrap();
    let second = std::fs::read(seg_file(dir.path(), bases[1], "log")).unwrap();
    let swap = part_dir(dir.path()).join(format!("{:020}.log.swap", bases[0]));
    std::fs::write(&swap, [first, second].concat()).unwrap();
    std::fs::remove_file(seg_file(dir.path(), bases[0], "log")).unwrap();

    let log = open(dir.path(), true);
    assert!(!swap.exists());
    assert_eq!(log.segment_base_offsets()[0], bases[0]);
    assert_eq!(log.segment_base_offsets()[1], bases[2], "segment covered by the swap is dropped");
    let all = read_all(&log);
    assert_eq!(all.len(), 120);
    assert!(all.windows(2).all(|w| w[1].offset == w[0].offset + 1));
}

#[test]
fn corrupt_middle_segment_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let before = fill(&log, 60);
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    drop(log);
    // Destroy the middle segment's index so it is recovered, and corrupt its last batch.
    let mid = bases[1];
    std::fs::remove_file(seg_file(dir.path(), mid, "index")).unwrap();
    let path = seg_file(dir.path(), mid, "log");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0xFF;
    std::fs::write(&path, bytes).unwrap();
    let log = open(dir.path(), true);
    assert_eq!(log.segment_base_offsets(), &bases[..2]);
    let after = read_all(&log);
    assert_eq!(&after[..], &before[..after.len()]);
    assert!(after.len() < before.len());
    let info = log.append(batch("x", 1, 1), 0, 0).unwrap();
    assert_eq!(info.first_offset, after.len() as i64);
}

#[test]
fn empty_and_garbage_only_segments_recover() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    drop(log);
    std::fs::write(seg_file(dir.path(), 0, "log"), vec![0xAB; 500]).unwrap();
    let log = open(dir.path(), false);
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
    log.append(batch("x", 2, 1), 0, 0).unwrap();
    assert_eq!(read_all(&log).len(), 2);
}

#[test]
fn log_manager_discovers_logs_and_tracks_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let manager = LogManager::open(root, small_config(), 0).unwrap();
    assert!(!manager.had_clean_shutdown());
    let a = manager.get_or_create("my-topic.v2", 0, small_config(), 0).unwrap();
    let b = manager.get_or_create("my-topic.v2", 11, small_config(), 0).unwrap();
    let c = manager.get_or_create("other", 2, small_config(), 0).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &manager.get_or_create("my-topic.v2", 0, small_config(), 0).unwrap()));
    a.append(batch("a", 3, 1), 0, 0).unwrap();
    b.append(batch("b", 1, 1), 0, 0).unwrap();
    c.append(batch("c", 2, 1), 0, 0).unwrap();
    assert_eq!(manager.all().len(), 3);
    assert!(manager.remove("other", 2).unwrap());
    assert!(!manager.remove("other", 2).unwrap());
    assert!(!root.join("other-2").exists());
    assert!(matches!(c.append(batch("c", 1, 1), 0, 0), Err(strata_storage::StorageError::LogClosed { .. })));
    manager.close_all().unwrap();
    assert!(root.join(CLEAN_SHUTDOWN_FILE).exists());
    drop((a, b, c, manager));

    std::fs::create_dir(root.join("not a partition")).unwrap();
    std::fs::create_dir(root.join("gone-1.123-delete")).unwrap();
    let manager = LogManager::open(root, small_config(), 0).unwrap();
    assert!(manager.had_clean_shutdown());
    assert!(!root.join(CLEAN_SHUTDOWN_FILE).exists(), "marker removed at start");
    assert!(!root.join("gone-1.123-delete").exists());
    assert_eq!(manager.all().len(), 2);
    let a = manager.get("my-topic.v2", 0).unwrap();
    assert_eq!(read_all(&a).len(), 3);
    assert_eq!(manager.get("my-topic.v2", 11).unwrap().log_end_offset(), 1);
    assert!(manager.get("other", 2).is_none());
    drop(manager);
    // No close_all: next open recovers.
    let manager = LogManager::open(root, small_config(), 0).unwrap();
    assert!(!manager.had_clean_shutdown());
    assert_eq!(read_all(&manager.get("my-topic.v2", 0).unwrap())[2].value, Bytes::from("a-2"));
}

/// Descriptors this process holds on files under `dir`.
fn open_descriptors_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
fn a_log_holds_one_descriptor_per_segment_before_and_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let log = open(&root, true);
    fill(&log, 100);
    let segments = log.segment_base_offsets().len();
    assert!(segments >= 5, "small_config rolls segments: {segments}");
    assert_eq!(open_descriptors_under(&root), segments, "the log files only; indexes are mapped");
    log.close().unwrap();
    drop(log);
    assert_eq!(open_descriptors_under(&root), 0);
    let log = open(&root, true);
    assert_eq!(open_descriptors_under(&root), segments);
    assert_eq!(read_all(&log).len(), 200, "every record readable through the mapped indexes");
}
