//! The cleaner's key -> latest offset map (Kafka's `SkimpyOffsetMap`): a fixed-size
//! open-addressing table of key hashes, sized once from `dedupe_buffer_bytes`.
//!
//! Keys are not stored, only a 96-bit keyed hash of them (two SipHash-1-3 instances with
//! random keys drawn per cleaner). A collision would make the cleaner drop a record whose
//! key merely shares a hash with a later record's key, so the hash must be strong: with
//! 96 bits the chance of any collision among 10 million keys is about 1e-15, and because
//! the hash keys are secret and random, producers cannot craft colliding keys (which they
//! could against an unkeyed hash such as Kafka's MD5).
//!
//! Clearing between cleanings is O(1): each slot carries the generation that wrote it
//! and only slots of the current generation are occupied.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// One slot, 24 bytes: `[hash_lo, hash_hi << 32 | generation, offset]`. A plain array so
/// that `vec![[0; 3]; n]` gets zeroed pages from the allocator, committed by the OS only
/// when first written (a big, mostly idle map costs no memory up front).
type Slot = [u64; 3];

/// Bytes one entry of the map costs.
pub(crate) const BYTES_PER_ENTRY: usize = std::mem::size_of::<Slot>();

fn slot_generation(slot: &Slot) -> u32 {
    slot[1] as u32
}

fn slot_matches(slot: &Slot, hash: KeyHash) -> bool {
    slot[0] == hash.lo && (slot[1] >> 32) as u32 == hash.hi
}

/// A key's hash as the map stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyHash {
    lo: u64,
    hi: u32,
}

/// Key hash -> largest offset seen for that key, plus the largest offset mapped.
#[derive(Debug)]
pub(crate) struct OffsetMap {
    slots: Vec<Slot>,
    generation: u32,
    entries: usize,
    /// Entries beyond which `put` refuses new keys (slots x load factor).
    max_entries: usize,
    hasher_lo: RandomState,
    hasher_hi: RandomState,
    latest_offset: i64,
}

impl OffsetMap {
    /// A map using about `bytes` of memory, accepting new keys until it is `load_factor`
    /// full. Memory is committed lazily by the OS as slots are first written.
    pub(crate) fn new(bytes: usize, load_factor: f64) -> Self {
        let slots = (bytes / BYTES_PER_ENTRY).max(2);
        let max_entries = ((slots as f64 * load_factor) as usize).clamp(1, slots - 1);
        OffsetMap {
            slots: vec![[0; 3]; slots],
            generation: 1,
            entries: 0,
            max_entries,
            hasher_lo: RandomState::new(),
            hasher_hi: RandomState::new(),
            latest_offset: -1,
        }
    }

    /// Forgets every entry.
    pub(crate) fn clear(&mut self) {
        self.entries = 0;
        self.latest_offset = -1;
        if self.generation == u32::MAX {
            self.slots.fill([0; 3]);
            self.generation = 1;
        } else {
            self.generation += 1;
        }
    }

    /// Hashes a record key.
    pub(crate) fn hash(&self, key: &[u8]) -> KeyHash {
        KeyHash { lo: self.hasher_lo.hash_one(key), hi: self.hasher_hi.hash_one(key) as u32 }
    }

    fn start_slot(&self, hash: KeyHash) -> usize {
        // Multiply-shift maps the hash onto the table without a division.
        ((u128::from(hash.lo) * self.slots.len() as u128) >> 64) as usize
    }

    /// Index of the slot holding `hash`, or of the empty slot where it would go.
    fn find(&self, hash: KeyHash) -> usize {
        let len = self.slots.len();
        let mut i = self.start_slot(hash);
        loop {
            let slot = &self.slots[i];
            if slot_generation(slot) != self.generation || slot_matches(slot, hash) {
                return i;
            }
            i += 1;
            if i == len {
                i = 0;
            }
        }
    }

    /// Records `offset` as the latest for the key (offsets only grow within a cleaning).
    /// Returns false, changing nothing, when the key is new and the map is at capacity.
    pub(crate) fn put(&mut self, hash: KeyHash, offset: i64) -> bool {
        // Termination of `find`: at least one slot is always empty (max_entries < slots).
        let i = self.find(hash);
        let generation = self.generation;
        let slot = &mut self.slots[i];
        if slot_generation(slot) != generation {
            if self.entries >= self.max_entries {
                return false;
            }
            *slot = [hash.lo, u64::from(hash.hi) << 32 | u64::from(generation), offset as u64];
            self.entries += 1;
        } else {
            slot[2] = (slot[2] as i64).max(offset) as u64;
        }
        true
    }

    /// The latest offset recorded for the key.
    pub(crate) fn get(&self, hash: KeyHash) -> Option<i64> {
        let slot = &self.slots[self.find(hash)];
        (slot_generation(slot) == self.generation).then_some(slot[2] as i64)
    }

    /// Distinct keys held.
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    /// How many distinct keys fit before `put` refuses new ones.
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Fraction of the usable capacity in use.
    pub(crate) fn utilization(&self) -> f64 {
        self.entries as f64 / self.max_entries as f64
    }

    /// Raises the largest offset the map covers (every offset up to it was scanned).
    pub(crate) fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// Largest offset covered by the map; records after it are not judged by it.
    pub(crate) fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_overwrite_clear_and_capacity() {
        let mut map = OffsetMap::new(BYTES_PER_ENTRY * 10, 0.5);
        assert_eq!(map.max_entries(), 5);
        let keys: Vec<KeyHash> = (0..6).map(|i| map.hash(format!("key-{i}").as_bytes())).collect();
        for (i, k) in keys.iter().take(5).enumerate() {
            assert!(map.put(*k, i as i64));
        }
        assert!(!map.put(keys[5], 99), "full for new keys");
        assert!(map.put(keys[0], 50), "existing keys still update");
        assert_eq!(map.get(keys[0]), Some(50));
        assert!(map.put(keys[0], 7), "an older offset never lowers the entry");
        assert_eq!(map.get(keys[0]), Some(50));
        assert_eq!(map.get(keys[3]), Some(3));
        assert_eq!(map.get(keys[5]), None);
        map.update_latest_offset(50);
        map.clear();
        assert_eq!(map.len(), 0);
        assert_eq!(map.latest_offset(), -1);
        assert_eq!(map.get(keys[0]), None);
        assert!(map.put(keys[5], 1));
        assert_eq!(map.get(keys[5]), Some(1));
    }

    #[test]
    fn generation_wrap_resets_slots() {
        let mut map = OffsetMap::new(BYTES_PER_ENTRY * 4, 0.75);
        let k = map.hash(b"k");
        map.generation = u32::MAX - 1;
        map.put(k, 1);
        map.clear();
        map.put(k, 2);
        map.clear(); // wraps: every slot reset
        assert_eq!(map.generation, 1);
        assert_eq!(map.get(k), None);
    }

    #[test]
    fn many_keys_round_trip() {
        let mut map = OffsetMap::new(BYTES_PER_ENTRY * 20_000, 0.9);
        for i in 0..18_000i64 {
            let k = map.hash(&i.to_be_bytes());
            assert!(map.put(k, i));
        }
        for i in 0..18_000i64 {
            assert_eq!(map.get(map.hash(&i.to_be_bytes())), Some(i));
        }
        assert_eq!(map.get(map.hash(b"absent")), None);
    }
}
