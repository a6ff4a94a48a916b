//! Complete checkpoints on disk. A checkpoint is written only once every task has
//! acknowledged it, and atomically: to a temporary file, fsynced, renamed to its final
//! name, and the directory fsynced, so after a crash the directory holds whole
//! checkpoints only. The latest one that decodes (checksummed) is where a restarted job
//! resumes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::StreamError;

/// Number of a checkpoint; the first is 1 and each next one is one more.
pub type CheckpointId = u64;

const MAGIC: &[u8; 4] = b"STCK";
const FORMAT_VERSION: u8 = 1;
const PREFIX: &str = "checkpoint-";
/// Complete checkpoints kept besides the latest (an older one is a fallback should the
/// latest be unreadable).
const KEEP: usize = 2;

/// A complete checkpoint: its id and every task's snapshot, by task name.
///
/// ```
/// use strata_client::stream::Checkpoint;
///
/// let mut c = Checkpoint::new(3);
/// c.states.insert("sink".into(), bytes::Bytes::from_static(b"prepared"));
/// let decoded = Checkpoint::decode(c.encode()).unwrap();
/// assert_eq!(decoded, c);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// The checkpoint's number.
    pub id: CheckpointId,
    /// Snapshot of each task (`source-0`, `operator`, `sink`, ...).
    pub states: BTreeMap<String, Bytes>,
}

impl Checkpoint {
    /// An empty checkpoint `id`.
    pub fn new(id: CheckpointId) -> Checkpoint {
        Checkpoint { id, states: BTreeMap::new() }
    }

    /// The file format: magic, version, id, task count, then (name, state) pairs with
    /// u16 / u32 lengths, and a CRC-32C of everything before it.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_slice(MAGIC);
        b.put_u8(FORMAT_VERSION);
        b.put_u64(self.id);
        b.put_u32(self.states.len() as u32);
        for (name, state) in &self.states {
            b.put_u16(name.len() as u16);
            b.put_slice(name.as_bytes());
            b.put_u32(state.len() as u32);
            b.put_slice(state);
        }
        let crc = crc32c::crc32c(&b);
        b.put_u32(crc);
        b.freeze()
    }

    /// Decodes [`Checkpoint::encode`]'s bytes; every length is checked against the bytes
    /// present, so a torn or foreign file is an error, never a panic.
    pub fn decode(bytes: Bytes) -> Result<Checkpoint, StreamError> {
        let corrupt = |what: &str| StreamError::Corrupt(format!("checkpoint: {what}").into());
        if bytes.len() < MAGIC.len() + 1 + 8 + 4 + 4 {
            return Err(corrupt("too short"));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
            return Err(corrupt("checksum mismatch"));
        }
        let mut r = bytes.slice(..bytes.len() - 4);
        if &r[..4] != MAGIC {
            return Err(corrupt("not a checkpoint file"));
        }
        r.advance(4);
        if r.get_u8() != FORMAT_VERSION {
            return Err(corrupt("unknown format version"));
        }
        let id = r.get_u64();
        let count = r.get_u32();
        let mut states = BTreeMap::new();
        for _ in 0..count {
            if r.remaining() < 2 {
                return Err(corrupt("truncated name"));
            }
            let len = usize::from(r.get_u16());
            if r.remaining() < len + 4 {
                return Err(corrupt("truncated name"));
            }
            let name = String::from_utf8(r.split_to(len).to_vec()).map_err(|_| corrupt("name not UTF-8"))?;
            let len = r.get_u32() as usize;
            if r.remaining() < len {
                return Err(corrupt("truncated state"));
            }
            states.insert(name, r.split_to(len));
        }
        if r.has_remaining() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Checkpoint { id, states })
    }
}

/// The directory of complete checkpoints.
///
/// ```
/// use strata_client::stream::{Checkpoint, CheckpointStore};
///
/// let dir = std::env::temp_dir().join(format!("strata-doc-{}", std::process::id()));
/// let store = CheckpointStore::open(&dir).unwrap();
/// store.write(&Checkpoint::new(1)).unwrap();
/// store.write(&Checkpoint::new(2)).unwrap();
/// assert_eq!(store.latest().unwrap().map(|c| c.id), Some(2));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    /// Opens (creating it if needed) the checkpoint directory and removes temporary
    /// files a crash left behind.
    pub fn open(dir: impl AsRef<Path>) -> Result<CheckpointStore, StreamError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| StreamError::io(&dir, e))?;
        let store = CheckpointStore { dir };
        for entry in fs::read_dir(&store.dir).map_err(|e| StreamError::io(&store.dir, e))? {
            let path = entry.map_err(|e| StreamError::io(&store.dir, e))?.path();
            if path.extension().is_some_and(|x| x == "tmp") {
                fs::remove_file(&path).map_err(|e| StreamError::io(&path, e))?;
            }
        }
        Ok(store)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, id: CheckpointId) -> PathBuf {
        self.dir.join(format!("{PREFIX}{id:020}"))
    }

    /// Ids of the checkpoint files present, ascending.
    fn ids(&self) -> Result<Vec<CheckpointId>, StreamError> {
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|e| StreamError::io(&self.dir, e))? {
            let entry = entry.map_err(|e| StreamError::io(&self.dir, e))?;
            let name = entry.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)).and_then(|n| n.parse().ok())
            {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The latest complete checkpoint, or None for a fresh job. A file that does not
    /// decode is skipped (with a warning) for the one before it.
    pub fn latest(&self) -> Result<Option<Checkpoint>, StreamError> {
        for id in self.ids()?.into_iter().rev() {
            let path = self.path_of(id);
            let bytes = fs::read(&path).map_err(|e| StreamError::io(&path, e))?;
            match Checkpoint::decode(Bytes::from(bytes)) {
                Ok(c) if c.id == id => return Ok(Some(c)),
                Ok(c) => {
                    tracing::warn!(path = %path.display(), id = c.id, "checkpoint file names another id; skipped")
                }
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "unreadable checkpoint skipped"),
            }
        }
        Ok(None)
    }

    /// Writes `checkpoint` as the latest complete one (write, fsync, rename, fsync the
    /// directory), then removes all but the last few older ones. Ids must increase.
    pub fn write(&self, checkpoint: &Checkpoint) -> Result<(), StreamError> {
        let path = self.path_of(checkpoint.id);
        let tmp = path.with_extension("tmp");
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |e| StreamError::io(&p, e)
        };
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&checkpoint.encode()).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(io(&path))?;
        fs::File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io(&self.dir))?;
        let ids = self.ids()?;
        let older: Vec<_> = ids.iter().copied().filter(|&id| id < checkpoint.id).collect();
        for id in older.iter().take(older.len().saturating_sub(KEEP)) {
            let p = self.path_of(*id);
            fs::remove_file(&p).map_err(io(&p))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-ckpt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn checkpoints_round_trip_and_the_latest_wins() {
        let dir = temp_dir("latest");
        let store = CheckpointStore::open(&dir).unwrap();
        assert_eq!(store.latest().unwrap(), None);
        for id in 1..=5 {
            let mut c = Checkpoint::new(id);
            c.states.insert("source-0".into(), Bytes::from(format!("offsets {id}")));
            c.states.insert("sink".into(), Bytes::new());
            store.write(&c).unwrap();
            assert_eq!(store.latest().unwrap(), Some(c));
        }
        // Older ones are pruned down to the latest and two before it.
        assert_eq!(store.ids().unwrap(), vec![3, 4, 5]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_or_corrupt_latest_file_falls_back_to_the_one_before() {
        let dir = temp_dir("torn");
        let store = CheckpointStore::open(&dir).unwrap();
        store.write(&Checkpoint::new(1)).unwrap();
        let mut c = Checkpoint::new(2);
        c.states.insert("operator".into(), Bytes::from_static(b"state"));
        let bytes = c.encode();
        // A crash mid-write leaves a temporary file: ignored and removed on open.
        fs::write(dir.join(format!("{PREFIX}{:020}.tmp", 2)), &bytes[..bytes.len() / 2]).unwrap();
        // A damaged final file (a disk error) is skipped.
        let mut damaged = bytes.to_vec();
        damaged[10] ^= 0xff;
        fs::write(store.path_of(2), &damaged).unwrap();
        let store = CheckpointStore::open(&dir).unwrap();
        assert_eq!(store.latest().unwrap().map(|c| c.id), Some(1));
        assert!(!dir.join(format!("{PREFIX}{:020}.tmp", 2)).exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn decoding_checks_every_length() {
        let mut c = Checkpoint::new(9);
        c.states.insert("a".into(), Bytes::from_static(b"xyz"));
        let bytes = c.encode();
        for len in 0..bytes.len() {
            assert!(Checkpoint::decode(bytes.slice(..len)).is_err(), "prefix of {len} bytes decoded");
        }
        // A valid checksum over lying lengths is still refused.
        let mut b = bytes[..bytes.len() - 4].to_vec();
        let n = b.len();
        b[n - 4 - 3..n - 3].copy_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        assert!(Checkpoint::decode(Bytes::from(b)).is_err());
    }
}
