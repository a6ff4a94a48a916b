//! Producer id allocation for InitProducerId.
//!
//! Ids are handed out from blocks, as Kafka's controller does: before any id of a block
//! is used, the end of the block is persisted, so after a crash allocation resumes past
//! every id that may have been handed out and no id is ever reused.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

const BLOCK_SIZE: i64 = 1000;

/// Allocates unique producer ids, durable across restarts.
#[derive(Debug)]
pub struct ProducerIdManager {
    path: PathBuf,
    state: Mutex<Block>,
}

#[derive(Debug)]
struct Block {
    next: i64,
    end: i64,
}

impl ProducerIdManager {
    /// Opens the allocator state under `data_dir`.
    pub fn open(data_dir: &Path) -> std::io::Result<ProducerIdManager> {
        let path = data_dir.join(".strata-producer-ids");
        let start = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("corrupt {}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let manager = ProducerIdManager { path, state: Mutex::new(Block { next: start, end: start }) };
        Ok(manager)
    }

    /// A producer id never handed out before.
    pub fn next_id(&self) -> std::io::Result<i64> {
        let mut block = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if block.next >= block.end {
            let end = block.next + BLOCK_SIZE;
            persist(&self.path, end)?;
            block.end = end;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

fn persist(path: &Path, end: i64) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{end}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let m = ProducerIdManager::open(dir.path()).unwrap();
        let a: Vec<i64> = (0..5).map(|_| m.next_id().unwrap()).collect();
        assert_eq!(a, vec![0, 1, 2, 3, 4]);
        drop(m);
        let m = ProducerIdManager::open(dir.path()).unwrap();
        let b = m.next_id().unwrap();
        assert!(b > 4, "reused id {b}");
    }
}
