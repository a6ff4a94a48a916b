//! `partition.metadata`: the topic id a partition directory belongs to (KIP-516), in
//! Kafka's format (`version: 0`, then `topic_id: <base64>`).
//!
//! A directory is named by topic and partition only, so without it a broker that was
//! down while a topic was deleted and created again under the same name would take the
//! old topic's log for the new one's and serve (or replicate) records that were deleted.

use std::path::Path;
use strata_protocol::codec::Uuid;

use crate::checkpoint::write_file_unsynced;
use crate::error::Result;

/// File name inside a partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// The topic id the directory records: `None` without the file, `Some(Err)` when the
/// file is not in Kafka's form.
pub(crate) fn read(dir: &Path) -> Option<std::result::Result<Uuid, ()>> {
    let text = std::fs::read_to_string(dir.join(PARTITION_METADATA_FILE)).ok()?;
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("version", v)) => version = Some(v.to_string()),
            Some(("topic_id", v)) => topic_id = v.parse::<Uuid>().ok(),
            _ => {}
        }
    }
    Some(match (version.as_deref(), topic_id) {
        (Some("0"), Some(id)) => Ok(id),
        _ => Err(()),
    })
}

/// Records `topic_id` as the directory's topic. Not fsynced (as Kafka, which flushes
/// it later): a crash that loses it leaves a directory without the file, which the
/// next open takes as the topic's and writes again.
pub(crate) fn write(dir: &Path, topic_id: Uuid) -> Result<()> {
    write_file_unsynced(
        dir,
        PARTITION_METADATA_FILE,
        format!("version: 0\ntopic_id: {topic_id}\n").as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_in_kafkas_form() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read(dir.path()).is_none());
        let id = Uuid([0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff]);
        write(dir.path(), id).expect("write");
        let text = std::fs::read_to_string(dir.path().join(PARTITION_METADATA_FILE)).expect("read");
        assert_eq!(text, format!("version: 0\ntopic_id: {id}\n"));
        assert_eq!(read(dir.path()), Some(Ok(id)));
        // Kafka's own file for a known id reads the same.
        std::fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        )
        .expect("write");
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(read(dir.path()), Some(Ok(Uuid(one))));
        for bad in ["", "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n", "version: 0\ntopic_id: short\n"] {
            std::fs::write(dir.path().join(PARTITION_METADATA_FILE), bad).expect("write");
            assert_eq!(read(dir.path()), Some(Err(())), "{bad:?}");
        }
    }
}
