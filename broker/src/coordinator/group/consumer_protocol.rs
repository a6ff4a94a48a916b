//! Just enough of the consumer embedded protocol (`ConsumerProtocolSubscription`) to know
//! which topics a `consumer` group is subscribed to: OffsetDelete must refuse to delete
//! offsets of a subscribed topic (GROUP_SUBSCRIBED_TO_TOPIC), and offset expiry keeps
//! them.
//!
//! Like Kafka, only the version-0 prefix is parsed (int16 version, then the topic array),
//! which every later version starts with, so future subscription versions keep working.

use bytes::{Buf, Bytes};
use std::collections::BTreeSet;
use strata_protocol::codec::{Ctx, Reader, Wire};

/// The protocol type of groups formed by Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics of a consumer subscription, or `None` if the bytes are not a subscription
/// (a negative version, a truncated or oversized topic array, invalid UTF-8).
pub fn subscribed_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.len() < 2 {
        return None;
    }
    if buf.get_i16() < 0 {
        return None;
    }
    let mut r = Reader::new(buf);
    // Version 0 of the subscription is not flexible: int32 count, int16-length strings.
    Vec::<String>::read(&mut r, Ctx::new(0, i16::MAX)).ok()
}

/// The union of the topics of all `subscriptions`, or `None` if any of them does not
/// parse (then the coordinator does not know the group's subscription, as in Kafka).
pub fn union_of_topics<'a>(subscriptions: impl IntoIterator<Item = &'a Bytes>) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for metadata in subscriptions {
        all.extend(subscribed_topics(metadata)?);
    }
    Some(all)
}

/// Encodes a version-0 subscription (topics, no user data), for tests.
#[cfg(test)]
pub fn encode_subscription(topics: &[&str]) -> Bytes {
    use strata_protocol::codec::Writer;
    let mut w = Writer::new();
    w.i16(0);
    let topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
    topics.write(&mut w, Ctx::new(0, i16::MAX));
    w.i32(-1); // null user data
    w.into_memory_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_topics_of_any_version() {
        let sub = encode_subscription(&["a", "b"]);
        assert_eq!(subscribed_topics(&sub), Some(vec!["a".into(), "b".into()]));
        // A later version: same prefix, more fields after it.
        let mut v3 = sub.to_vec();
        v3[1] = 3;
        v3.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(subscribed_topics(&Bytes::from(v3)), Some(vec!["a".into(), "b".into()]));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(subscribed_topics(&Bytes::new()), None);
        assert_eq!(subscribed_topics(&Bytes::from_static(&[0xff, 0xff])), None);
        // Claims 2^31-1 topics with 4 bytes left.
        let huge = Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1, b'a', 0]);
        assert_eq!(subscribed_topics(&huge), None);
        let a = encode_subscription(&["a"]);
        assert_eq!(union_of_topics([&a, &Bytes::new()]), None);
        assert_eq!(
            union_of_topics([&a, &encode_subscription(&["b", "a"])]),
            Some(["a".to_string(), "b".to_string()].into())
        );
    }
}
