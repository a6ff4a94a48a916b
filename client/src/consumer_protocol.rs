//! The consumer's embedded protocol: what a member puts in JoinGroup's protocol metadata
//! (its subscription) and what the leader hands out in SyncGroup (assignments), as
//! Kafka's `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment` (versions
//! 0-3; never flexible). Any consumer in the group (librdkafka, the Java client, ours)
//! reads what the others write.
//!
//! A newer version than this client knows is read as its highest known version: Kafka
//! only ever appends fields, so the prefix is still right (as the Java client does).

use bytes::Bytes;
use strata_protocol::codec::{Ctx, DecodeError, Reader, Wire, Writer};

/// The protocol type of consumer groups.
pub const PROTOCOL_TYPE: &str = "consumer";
/// Highest subscription / assignment version this client writes and reads.
pub const VERSION: i16 = 3;

strata_protocol::message! {
    /// Topic and partitions, an element of `owned_partitions` and `assigned_partitions`.
    pub struct TopicPartitions {
        topic: String [0..],
        partitions: Vec<i32> [0..],
    }
    /// A member's subscription.
    pub struct Subscription {
        topics: Vec<String> [0..],
        user_data: Option<Bytes> [0..],
        owned_partitions: Vec<TopicPartitions> [1..],
        generation_id: i32 [2..] = -1,
        rack_id: Option<String> [3..],
    }
    /// A member's assignment.
    pub struct Assignment {
        assigned_partitions: Vec<TopicPartitions> [0..],
        user_data: Option<Bytes> [0..],
    }
}

fn ctx(version: i16) -> Ctx {
    Ctx::new(version, i16::MAX)
}

fn encode<T: Wire>(value: &T, version: i16) -> Bytes {
    let mut w = Writer::new();
    w.i16(version);
    value.write(&mut w, ctx(version));
    w.into_memory_bytes()
}

fn decode<T: Wire>(bytes: &Bytes) -> Result<(i16, T), DecodeError> {
    let mut r = Reader::new(bytes.clone());
    let version = i16::read(&mut r, ctx(0))?;
    if version < 0 {
        return Err(DecodeError::InvalidLength {
            what: "consumer protocol version",
            length: version as i64,
            remaining: r.remaining(),
        });
    }
    let known = version.min(VERSION);
    Ok((version, T::read(&mut r, ctx(known))?))
}

impl Subscription {
    /// The JoinGroup protocol metadata for this subscription at `version`.
    pub fn encode(&self, version: i16) -> Bytes {
        encode(self, version)
    }

    /// Parses a member's protocol metadata; the version it was written at comes along.
    pub fn decode(bytes: &Bytes) -> Result<(i16, Subscription), DecodeError> {
        decode(bytes)
    }
}

impl Assignment {
    /// The SyncGroup assignment bytes at `version`.
    pub fn encode(&self, version: i16) -> Bytes {
        encode(self, version)
    }

    /// Parses assignment bytes (an empty buffer, as a coordinator sends a member with
    /// nothing assigned, is an empty assignment).
    pub fn decode(bytes: &Bytes) -> Result<(i16, Assignment), DecodeError> {
        if bytes.is_empty() {
            return Ok((0, Assignment::default()));
        }
        decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions { topic: topic.into(), partitions: partitions.to_vec() }
    }

    #[test]
    fn every_version_round_trips_the_fields_it_has() {
        let full = Subscription {
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"u")),
            owned_partitions: vec![tp("a", &[0, 2])],
            generation_id: 7,
            rack_id: Some("r1".into()),
        };
        let (v, back) = Subscription::decode(&full.encode(3)).expect("v3");
        assert_eq!((v, &back), (3, &full));
        let (_, v0) = Subscription::decode(&full.encode(0)).expect("v0");
        assert_eq!(v0.topics, full.topics);
        assert!(v0.owned_partitions.is_empty() && v0.generation_id == -1 && v0.rack_id.is_none());
        let a = Assignment { assigned_partitions: vec![tp("a", &[1])], user_data: None };
        assert_eq!(Assignment::decode(&a.encode(1)).expect("assignment").1, a);
        assert_eq!(Assignment::decode(&Bytes::new()).expect("empty").1, Assignment::default());
    }

    #[test]
    fn a_newer_version_is_read_as_the_newest_known_and_garbage_is_an_error() {
        let s = Subscription { topics: vec!["t".into()], ..Default::default() };
        let mut bytes = s.encode(3).to_vec();
        bytes[1] = 9; // version 9, with fields this client does not know after the v3 ones
        bytes.extend_from_slice(&[1, 2, 3]);
        let (v, back) = Subscription::decode(&Bytes::from(bytes)).expect("future version");
        assert_eq!((v, back.topics), (9, vec!["t".to_string()]));
        assert!(Subscription::decode(&Bytes::from_static(&[0xff, 0xff])).is_err());
        // Claims 2^31-1 topics with a few bytes present: refused without allocating.
        assert!(Subscription::decode(&Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1])).is_err());
    }
}
