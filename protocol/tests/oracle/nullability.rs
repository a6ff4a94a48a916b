//! Fields Kafka lets be null only from some version on: before that version we write
//! `None` as empty, because Kafka's clients reject a null there (the Java client throws
//! "non-nullable field ... was serialized as null"). kafka-protocol must read our bytes
//! as empty before the version and as null from it; and, like Kafka, we refuse a null
//! that arrives where the version does not allow it.

use crate::messages::{decode_ours, decode_theirs, encode_ours, encode_theirs};
use kafka_protocol::messages as k;
use kafka_protocol::protocol::StrBytes;
use strata_protocol::messages::{delete_topics, join_group, metadata};
use strata_protocol::ApiKey;

#[test]
fn join_group_protocol_name_is_null_only_from_v7() {
    let ours = join_group::JoinGroupResponse { protocol_name: None, ..Default::default() };
    for version in 0..=9 {
        let bytes = encode_ours(&ours, ApiKey::JoinGroup.ctx(version));
        let theirs: k::JoinGroupResponse = decode_theirs(&bytes, version).unwrap();
        let expected = (version < 7).then(|| StrBytes::from_static_str(""));
        assert_eq!(theirs.protocol_name, expected, "v{version}");
    }
}

#[test]
fn metadata_topics_and_names_are_null_only_where_kafka_allows() {
    // Request: a null topic list ("all topics") exists from v1; v0 says it with [].
    let ours = metadata::MetadataRequest { topics: None, ..Default::default() };
    for version in 0..=12 {
        let bytes = encode_ours(&ours, ApiKey::Metadata.ctx(version));
        let theirs: k::MetadataRequest = decode_theirs(&bytes, version).unwrap();
        assert_eq!(theirs.topics, (version < 1).then(Vec::new), "v{version}");
    }
    // Response: a topic known only by id has a null name from v12.
    let ours = metadata::MetadataResponse {
        topics: vec![metadata::MetadataResponseTopic { name: None, ..Default::default() }],
        ..Default::default()
    };
    for version in 0..=12 {
        let bytes = encode_ours(&ours, ApiKey::Metadata.ctx(version));
        let theirs: k::MetadataResponse = decode_theirs(&bytes, version).unwrap();
        let expected = (version < 12).then(|| k::TopicName(StrBytes::from_static_str("")));
        assert_eq!(theirs.topics[0].name, expected, "v{version}");
    }
}

#[test]
fn delete_topics_result_name_is_null_only_from_v6() {
    let ours = delete_topics::DeleteTopicsResponse {
        responses: vec![delete_topics::DeletableTopicResult { name: None, ..Default::default() }],
        ..Default::default()
    };
    for version in 0..=6 {
        let bytes = encode_ours(&ours, ApiKey::DeleteTopics.ctx(version));
        let theirs: k::DeleteTopicsResponse = decode_theirs(&bytes, version).unwrap();
        let expected = (version < 6).then(|| k::TopicName(StrBytes::from_static_str("")));
        assert_eq!(theirs.responses[0].name, expected, "v{version}");
    }
}

#[test]
fn a_null_where_the_version_forbids_it_is_refused() {
    // kafka-protocol writes what it is given; Kafka's own decoder would throw.
    let theirs = k::MetadataRequest::default().with_topics(None);
    let bytes = encode_theirs(&theirs, 0).unwrap();
    let r = decode_ours::<metadata::MetadataRequest>(&bytes, ApiKey::Metadata.ctx(0));
    assert!(r.unwrap_err().contains("not nullable"));
    let bytes = encode_theirs(&theirs, 1).unwrap();
    let ours: metadata::MetadataRequest = decode_ours(&bytes, ApiKey::Metadata.ctx(1)).unwrap();
    assert_eq!(ours.topics, None);

    let theirs = k::JoinGroupResponse::default().with_protocol_name(None);
    let bytes = encode_theirs(&theirs, 6).unwrap();
    assert!(decode_ours::<join_group::JoinGroupResponse>(&bytes, ApiKey::JoinGroup.ctx(6)).is_err());
    let bytes = encode_theirs(&theirs, 7).unwrap();
    assert!(decode_ours::<join_group::JoinGroupResponse>(&bytes, ApiKey::JoinGroup.ctx(7)).is_ok());
}
