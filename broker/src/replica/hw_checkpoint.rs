//! `replication-offset-checkpoint`: the high watermark of every hosted partition, in
//! Kafka's checkpoint format (a version line `0`, a count, then `topic partition offset`
//! lines), written every `replica.high.watermark.checkpoint.interval.ms` and at clean
//! shutdown. A restarted broker starts each partition's high watermark there, so a
//! follower does not expose less than it had, and transactions decided below it stay
//! decided.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// File name in the log dir.
pub const FILE: &str = "replication-offset-checkpoint";

/// Reads the checkpoint; a missing or malformed file gives nothing (every high
/// watermark then starts at the log start and catches up from the leader).
pub fn read(dir: &Path) -> HashMap<(String, i32), i64> {
    let path = dir.join(FILE);
    let Ok(text) = std::fs::read_to_string(&path) else { return HashMap::new() };
    match parse(&text) {
        Some(map) => map,
        None => {
            tracing::warn!(path = %path.display(), "malformed high watermark checkpoint ignored");
            HashMap::new()
        }
    }
}

fn parse(text: &str) -> Option<HashMap<(String, i32), i64>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut out = HashMap::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let topic = parts.next()?.to_string();
        let partition: i32 = parts.next()?.parse().ok()?;
        let offset: i64 = parts.next()?.parse().ok()?;
        out.insert((topic, partition), offset);
    }
    Some(out)
}

/// Durably replaces the checkpoint (temp file, fsync, rename).
pub fn write(dir: &Path, entries: &[(String, i32, i64)]) -> std::io::Result<()> {
    let mut text = format!("0\n{}\n", entries.len());
    for (topic, partition, offset) in entries {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_kafkas_format() {
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), &[("t".into(), 0, 42), ("a.b-c".into(), 3, 7)]).expect("write");
        let text = std::fs::read_to_string(dir.path().join(FILE)).expect("read");
        assert_eq!(text, "0\n2\nt 0 42\na.b-c 3 7\n");
        let map = read(dir.path());
        assert_eq!(map.get(&("a.b-c".to_string(), 3)), Some(&7));
        std::fs::write(dir.path().join(FILE), "0\n5\nt 0 1\n").expect("torn");
        assert!(read(dir.path()).is_empty(), "a torn file is ignored");
    }
}
