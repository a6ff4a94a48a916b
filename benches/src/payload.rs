//! Record contents: values cut from a pool of text-like bytes (compressible about as
//! much as typical log lines, so codecs do real work), keys per the chosen
//! distribution, and the partition each record goes to.
//!
//! In end-to-end runs the first 8 bytes of each value carry the record's scheduled
//! send time (nanoseconds since the Unix epoch, big-endian) so the consumer can
//! measure end-to-end latency without a side channel.

use bytes::{BufMut, Bytes, BytesMut};

use crate::cli::KeyDistribution;

/// Size of the value pool; values are slices of it at varying offsets.
const POOL_BYTES: usize = 1 << 20;
/// Bytes of every key when keys are enabled.
pub const KEY_BYTES: usize = 8;
/// Bytes of the timestamp prefix in end-to-end values.
pub const STAMP_BYTES: usize = 8;

/// A small, fast, seedable generator (xorshift64*): the load generator's randomness
/// need not be strong, only cheap and reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Text-like bytes: words from a small vocabulary separated by spaces.
fn make_pool(rng: &mut Rng) -> Bytes {
    const WORDS: &[&str] = &[
        "stream",
        "broker",
        "offset",
        "partition",
        "leader",
        "segment",
        "index",
        "batch",
        "record",
        "consumer",
        "producer",
        "topic",
        "epoch",
        "fetch",
        "commit",
        "replica",
        "cluster",
        "node",
        "latency",
        "bytes",
        "GET",
        "POST",
        "/api/v1/orders",
        "200",
        "404",
        "user=",
        "id=",
        "ts=",
        "INFO",
        "WARN",
        "ERROR",
        "debug",
    ];
    let mut pool = BytesMut::with_capacity(POOL_BYTES + 64);
    while pool.len() < POOL_BYTES {
        let w = WORDS[rng.below(WORDS.len() as u64) as usize];
        pool.put_slice(w.as_bytes());
        if rng.below(4) == 0 {
            pool.put_slice(format!("{}", rng.below(100_000)).as_bytes());
        }
        pool.put_u8(b' ');
    }
    pool.truncate(POOL_BYTES);
    pool.freeze()
}

/// Makes keys and values for one producer.
#[derive(Debug, Clone)]
pub struct Payloads {
    pool: Bytes,
    record_size: usize,
    keys: KeyDistribution,
    next_key: u64,
    rng: Rng,
}

impl Payloads {
    /// Values of `record_size` bytes and keys per `keys`, seeded by `seed`.
    pub fn new(record_size: usize, keys: KeyDistribution, seed: u64) -> Payloads {
        let mut rng = Rng::new(seed);
        let pool = make_pool(&mut rng);
        Payloads { pool, record_size, keys, next_key: 0, rng }
    }

    /// The next key, if keys are enabled.
    pub fn key(&mut self) -> Option<u64> {
        match self.keys {
            KeyDistribution::None => None,
            KeyDistribution::Random => Some(self.rng.next_u64()),
            KeyDistribution::Sequential => {
                let k = self.next_key;
                self.next_key += 1;
                Some(k)
            }
        }
    }

    /// The pool values are cut from, for a caller that borrows them
    /// ([`Payloads::value_start`]).
    pub fn pool(&self) -> &Bytes {
        &self.pool
    }

    /// Where the next value starts in [`Payloads::pool`], if a value of `record_size`
    /// bytes fits in it: the same sequence of values as [`Payloads::value`] gives.
    pub fn value_start(&mut self) -> Option<usize> {
        let size = self.record_size;
        (size <= self.pool.len()).then(|| self.rng.below((self.pool.len() - size + 1) as u64) as usize)
    }

    /// A value of `record_size` bytes (zero-copy slice of the pool when it fits).
    pub fn value(&mut self) -> Bytes {
        let size = self.record_size;
        if let Some(start) = self.value_start() {
            self.pool.slice(start..start + size)
        } else {
            let mut v = BytesMut::with_capacity(size);
            while v.len() < size {
                let n = (size - v.len()).min(self.pool.len());
                v.put_slice(&self.pool[..n]);
            }
            v.freeze()
        }
    }

    /// A value whose first 8 bytes are `stamp_ns` (end-to-end runs; `record_size` >= 8).
    pub fn stamped_value(&mut self, stamp_ns: u64) -> Bytes {
        let mut v = BytesMut::with_capacity(self.record_size.max(STAMP_BYTES));
        self.put_stamped_value(stamp_ns, &mut v);
        v.freeze()
    }

    /// Appends to `out` what [`Payloads::stamped_value`] returns.
    pub fn put_stamped_value(&mut self, stamp_ns: u64, out: &mut impl BufMut) {
        let body = self.value();
        out.put_u64(stamp_ns);
        out.put_slice(&body[STAMP_BYTES.min(body.len())..]);
    }
}

/// The send timestamp carried by an end-to-end value, if it has one.
pub fn read_stamp(value: &[u8]) -> Option<u64> {
    value.get(..STAMP_BYTES).map(|b| u64::from_be_bytes(b.try_into().unwrap_or_default()))
}

/// Encodes a key as 8 big-endian bytes.
pub fn key_bytes(key: u64) -> Bytes {
    Bytes::copy_from_slice(&key.to_be_bytes())
}

/// The partition of a keyed record: a hash of the key modulo the partition count.
/// (Not Kafka's murmur2: only the spread matters here, not agreement with Java clients.)
pub fn partition_for_key(key: u64, partitions: usize) -> usize {
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((u128::from(h ^ (h >> 29)) * partitions as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_the_requested_size_and_compress() {
        let mut p = Payloads::new(1024, KeyDistribution::None, 7);
        let v = p.value();
        assert_eq!(v.len(), 1024);
        assert_ne!(v, p.value(), "values vary");
        assert_eq!(p.key(), None);
        let mut big = Payloads::new(3 << 20, KeyDistribution::None, 7);
        assert_eq!(big.value().len(), 3 << 20);
        // Text-like: zstd should shrink it noticeably but not to nothing.
        let batch: Vec<u8> = (0..16).flat_map(|_| p.value().to_vec()).collect();
        let z = strata_protocol::records::compress(
            strata_protocol::records::Compression::Zstd,
            &batch,
            Default::default(),
        )
        .unwrap();
        let ratio = batch.len() as f64 / z.len() as f64;
        assert!(ratio > 1.5 && ratio < 20.0, "compression ratio {ratio}");
    }

    #[test]
    fn keys_follow_the_distribution() {
        let mut seq = Payloads::new(16, KeyDistribution::Sequential, 1);
        assert_eq!((seq.key(), seq.key(), seq.key()), (Some(0), Some(1), Some(2)));
        let mut rnd = Payloads::new(16, KeyDistribution::Random, 1);
        assert_ne!(rnd.key(), rnd.key());
        assert_eq!(key_bytes(258).as_ref(), &[0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn stamps_round_trip() {
        let mut p = Payloads::new(100, KeyDistribution::None, 1);
        let v = p.stamped_value(0x0102_0304_0506_0708);
        assert_eq!(v.len(), 100);
        assert_eq!(read_stamp(&v), Some(0x0102_0304_0506_0708));
        assert_eq!(read_stamp(b"short"), None);
    }

    #[test]
    fn keys_spread_over_partitions() {
        let mut counts = [0u32; 8];
        for k in 0..8000u64 {
            counts[partition_for_key(k, 8)] += 1;
        }
        for c in counts {
            assert!((800..1200).contains(&c), "{counts:?}");
        }
        assert_eq!(partition_for_key(12345, 1), 0);
    }
}
