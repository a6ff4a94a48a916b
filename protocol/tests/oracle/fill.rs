//! A seeded, version-aware random filler for kafka-protocol's message structs.
//!
//! Hand-writing a non-trivial value for 72 messages would test what the author thought
//! of; this fills every field the Kafka spec says exists at the version under test, and
//! leaves the others at their default (kafka-protocol refuses to encode a non-default
//! value in a version that lacks the field). Which fields exist when, and when they may be
//! null, comes from the generated `spec_*.rs` tables, taken from Kafka's JSON, never
//! from Strata's own declarations.

use bytes::Bytes;
use kafka_protocol::messages::{BrokerId, GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// The first seeds give "edge" values instead of random ones: every field set, every
/// integer 0 (then -1, MIN, MAX), every array one element long. A tagged field is
/// written only when it differs from its default, so a default that disagrees with
/// Kafka's shows up as soon as one side writes the tag and the other does not; edges
/// make sure the usual defaults (0, -1, MIN, MAX) are each tried.
pub const EDGE_SEEDS: u64 = 4;

/// A deterministic generator (splitmix64), so a failure names the seed that reproduces it.
#[derive(Debug, Clone)]
pub struct Gen {
    state: u64,
    /// Seeds below [`EDGE_SEEDS`]: which edge value to use everywhere.
    edge: Option<u64>,
    /// Adds unknown tagged fields to every struct of a flexible version. They come from a
    /// second stream so the rest of the value is the same with and without them.
    unknown_tags: Option<u64>,
}

impl Gen {
    /// A generator for `seed`; with `unknown_tags`, structs also carry tags Kafka has
    /// not defined (a newer client's), which a decoder must skip.
    pub fn new(seed: u64, unknown_tags: bool) -> Gen {
        Gen {
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d,
            edge: (seed < EDGE_SEEDS).then_some(seed),
            unknown_tags: unknown_tags.then_some(seed ^ 0xdead_beef),
        }
    }

    fn step(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        Gen::step(&mut self.state)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    /// True if this field should keep its default: one field in eight, never in edge
    /// mode. (Tagged fields at their default are omitted from the wire; test that too.)
    pub fn keep_default(&mut self) -> bool {
        self.edge.is_none() && self.one_in(8)
    }

    /// Unknown tagged fields for one struct (empty unless asked for).
    pub fn unknown_tagged_fields(&mut self) -> BTreeMap<i32, Bytes> {
        let mut out = BTreeMap::new();
        if let Some(state) = self.unknown_tags.as_mut() {
            let n = Gen::step(state) % 3;
            for i in 0..n {
                // Above every tag Kafka defines, so the order on the wire stays ascending.
                let tag = 100 + (i as i32) * 1000 + (Gen::step(state) % 500) as i32;
                let len = (Gen::step(state) % 6) as usize;
                out.insert(tag, Bytes::from(vec![0xab; len]));
            }
        }
        out
    }
}

/// Builds a random value legal at `version`. `nullable` says whether the spec allows
/// null for this field at this version; only `Option` looks at it.
pub trait Fill: Sized {
    /// A random value.
    fn fill(g: &mut Gen, version: i16, nullable: bool) -> Self;
}

macro_rules! fill_int {
    ($($t:ty),*) => {$(
        impl Fill for $t {
            fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
                // Edges and small values are where encodings differ; plain noise otherwise.
                match g.edge.unwrap_or_else(|| g.below(6)) {
                    0 => 0,
                    1 => -1,
                    2 => <$t>::MIN,
                    3 => <$t>::MAX,
                    4 => (g.below(200) as $t),
                    _ => g.next_u64() as $t,
                }
            }
        }
    )*};
}
fill_int!(i8, i16, i32, i64);

impl Fill for u16 {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        g.next_u64() as u16
    }
}

impl Fill for f64 {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        // Finite, so values compare equal after a round trip.
        (g.below(1 << 20) as f64) / 8.0 - 1000.0
    }
}

impl Fill for bool {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        match g.edge {
            Some(e) => e % 2 == 1,
            None => g.one_in(2),
        }
    }
}

impl Fill for uuid::Uuid {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        match g.edge {
            Some(0) => return uuid::Uuid::nil(),
            Some(_) => return uuid::Uuid::max(),
            None => {
                if g.one_in(4) {
                    return uuid::Uuid::nil();
                }
            }
        }
        let hi = g.next_u64();
        let lo = g.next_u64();
        uuid::Uuid::from_u64_pair(hi, lo)
    }
}

impl Fill for StrBytes {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        // Multi-byte characters catch length-in-chars versus length-in-bytes mistakes.
        const PIECES: &[&str] = &["a", "topic", "-", "_", "0", "é", "日本", "🦀", "."];
        let n = if g.edge.is_some() { 0 } else { g.below(5) };
        let s: String = (0..n).map(|_| PIECES[g.below(PIECES.len() as u64) as usize]).collect();
        StrBytes::from_string(s)
    }
}

impl Fill for Bytes {
    fn fill(g: &mut Gen, _: i16, _: bool) -> Self {
        // Now and then larger than the writer's zero-copy threshold (1 KiB), so encoding
        // also goes through the chunked path.
        let len = if g.edge.is_some() {
            0
        } else if g.one_in(10) {
            1024 + g.below(600)
        } else {
            g.below(20)
        };
        let seed = g.next_u64() as u8;
        Bytes::from((0..len).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<u8>>())
    }
}

macro_rules! fill_newtype {
    ($($t:ident),*) => {$(
        impl Fill for $t {
            fn fill(g: &mut Gen, v: i16, n: bool) -> Self {
                $t(Fill::fill(g, v, n))
            }
        }
    )*};
}
fill_newtype!(BrokerId, GroupId, ProducerId, TopicName, TransactionalId);

impl<T: Fill> Fill for Option<T> {
    fn fill(g: &mut Gen, v: i16, nullable: bool) -> Self {
        // Edge seed 2 (MIN) is the "everything null" one.
        let null = match g.edge {
            Some(e) => e == 2,
            None => g.one_in(3),
        };
        if nullable && null {
            None
        } else {
            Some(T::fill(g, v, false))
        }
    }
}

impl<T: Fill> Fill for Vec<T> {
    fn fill(g: &mut Gen, v: i16, _: bool) -> Self {
        let n = if g.edge.is_some() { 1 } else { g.below(4) };
        (0..n).map(|_| T::fill(g, v, false)).collect()
    }
}

/// Implements [`Fill`] for one kafka-protocol struct from its spec table:
/// `field: lo..=hi [null nlo..=nhi];` per field, in wire order. `classic` marks
/// messages that are never flexible, which have no tag buffer.
#[macro_export]
macro_rules! fill {
    (classic $ty:ident $fields:tt) => {
        $crate::fill!(@impl $ty $fields (x, g) {});
    };
    ($ty:ident $fields:tt) => {
        // `x` and `g` are named here so the tag statement below can see them.
        $crate::fill!(@impl $ty $fields (x, g) {
            x.unknown_tagged_fields = g.unknown_tagged_fields();
        });
    };
    (@impl $ty:ident {
        $($field:ident : $lo:literal ..= $hi:literal $(null $nlo:literal ..= $nhi:literal)? ;)*
    } ($x:ident, $g:ident) { $($tags:tt)* }) => {
        impl $crate::fill::Fill for $ty {
            fn fill($g: &mut $crate::fill::Gen, version: i16, _: bool) -> Self {
                let mut $x = <$ty as ::std::default::Default>::default();
                $(
                    if ($lo..=$hi).contains(&version) && !$g.keep_default() {
                        let nullable = false $(|| ($nlo..=$nhi).contains(&version))?;
                        $x.$field = $crate::fill::Fill::fill($g, version, nullable);
                    }
                )*
                $($tags)*
                $x
            }
        }
    };
}
