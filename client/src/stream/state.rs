//! Keyed operator state: a map whose whole content goes into every checkpoint and comes
//! back on restore. Enough for counting, deduplicating and joining by key in a small
//! engine; the snapshot is a flat, length-checked encoding.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::collections::HashMap;
use std::hash::Hash;

use super::StreamError;

/// A value that keyed state can snapshot: written with its own length prefix where it
/// needs one, read back checking every length against the bytes present.
///
/// ```
/// use bytes::{Bytes, BytesMut};
/// use strata_client::stream::StateValue;
///
/// let mut out = BytesMut::new();
/// "word".to_string().write(&mut out);
/// 3u64.write(&mut out);
/// let mut input: Bytes = out.freeze();
/// assert_eq!(String::read(&mut input).unwrap(), "word");
/// assert_eq!(u64::read(&mut input).unwrap(), 3);
/// ```
pub trait StateValue: Sized {
    /// Appends the encoding of `self`.
    fn write(&self, out: &mut BytesMut);
    /// Reads one value, or fails on truncated or invalid bytes.
    fn read(input: &mut Bytes) -> Result<Self, StreamError>;
}

fn truncated() -> StreamError {
    StreamError::Corrupt("keyed state: truncated".into())
}

impl StateValue for u64 {
    fn write(&self, out: &mut BytesMut) {
        out.put_u64(*self);
    }
    fn read(input: &mut Bytes) -> Result<Self, StreamError> {
        if input.remaining() < 8 {
            return Err(truncated());
        }
        Ok(input.get_u64())
    }
}

impl StateValue for i64 {
    fn write(&self, out: &mut BytesMut) {
        out.put_i64(*self);
    }
    fn read(input: &mut Bytes) -> Result<Self, StreamError> {
        if input.remaining() < 8 {
            return Err(truncated());
        }
        Ok(input.get_i64())
    }
}

impl StateValue for Bytes {
    fn write(&self, out: &mut BytesMut) {
        out.put_u32(self.len() as u32);
        out.put_slice(self);
    }
    fn read(input: &mut Bytes) -> Result<Self, StreamError> {
        if input.remaining() < 4 {
            return Err(truncated());
        }
        let len = input.get_u32() as usize;
        if input.remaining() < len {
            return Err(truncated());
        }
        Ok(input.split_to(len))
    }
}

impl StateValue for String {
    fn write(&self, out: &mut BytesMut) {
        out.put_u32(self.len() as u32);
        out.put_slice(self.as_bytes());
    }
    fn read(input: &mut Bytes) -> Result<Self, StreamError> {
        let raw = Bytes::read(input)?;
        String::from_utf8(raw.to_vec()).map_err(|_| StreamError::Corrupt("keyed state: key not UTF-8".into()))
    }
}

/// A map from keys to values that snapshots whole.
///
/// ```
/// use strata_client::stream::KeyedState;
///
/// let mut counts: KeyedState<String, u64> = KeyedState::new();
/// *counts.entry("kafka".to_string()) += 1;
/// let restored = KeyedState::<String, u64>::restore(counts.snapshot()).unwrap();
/// assert_eq!(restored.get(&"kafka".to_string()), Some(&1));
/// ```
#[derive(Debug, Clone)]
pub struct KeyedState<K, V> {
    map: HashMap<K, V>,
}

impl<K: Eq + Hash, V: PartialEq> PartialEq for KeyedState<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl<K: Eq + Hash, V> Default for KeyedState<K, V> {
    fn default() -> Self {
        KeyedState { map: HashMap::new() }
    }
}

impl<K: StateValue + Eq + Hash, V: StateValue + Default> KeyedState<K, V> {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// The value of `key`, inserted as `V::default()` if absent.
    pub fn entry(&mut self, key: K) -> &mut V {
        self.map.entry(key).or_default()
    }

    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.map.insert(key, value)
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.map.remove(key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The whole map as bytes: a count, then key and value encodings.
    pub fn snapshot(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u64(self.map.len() as u64);
        for (k, v) in &self.map {
            k.write(&mut out);
            v.write(&mut out);
        }
        out.freeze()
    }

    /// The state a [`KeyedState::snapshot`] holds.
    pub fn restore(mut bytes: Bytes) -> Result<Self, StreamError> {
        let count = u64::read(&mut bytes)?;
        let mut map = HashMap::new();
        for _ in 0..count {
            let k = K::read(&mut bytes)?;
            let v = V::read(&mut bytes)?;
            map.insert(k, v);
        }
        if bytes.has_remaining() {
            return Err(StreamError::Corrupt("keyed state: trailing bytes".into()));
        }
        Ok(KeyedState { map })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_rejects_truncation() {
        let mut s: KeyedState<String, u64> = KeyedState::new();
        for (i, w) in ["a", "bb", "ccc", ""].iter().enumerate() {
            s.insert((*w).to_string(), i as u64 * 1000);
        }
        let bytes = s.snapshot();
        assert_eq!(KeyedState::<String, u64>::restore(bytes.clone()).unwrap(), s);
        for len in 0..bytes.len() {
            assert!(KeyedState::<String, u64>::restore(bytes.slice(..len)).is_err(), "{len}");
        }
        // A huge claimed count fails on the bytes, not by reserving memory for it.
        let mut lying = BytesMut::new();
        lying.put_u64(u64::MAX);
        assert!(KeyedState::<Bytes, i64>::restore(lying.freeze()).is_err());
    }
}
