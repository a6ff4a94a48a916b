//! Encoding limits: values our types can hold but a version's wire format cannot.

use crate::messages::{decode_theirs, encode_ours};
use kafka_protocol::messages as k;
use strata_protocol::messages::describe_configs;
use strata_protocol::ApiKey;

/// A classic string has an int16 length. A longer value (a config holding a PEM
/// certificate chain, say) must not corrupt the frame: it is cut at a character
/// boundary to fit, and the rest of the message stays readable. Flexible versions
/// (uvarint lengths) carry it whole.
#[test]
fn strings_longer_than_an_int16_length_still_give_a_valid_frame() {
    let long: String = "é".repeat(20_000); // 40 000 bytes
    let response = describe_configs::DescribeConfigsResponse {
        results: vec![describe_configs::DescribeConfigsResult {
            resource_name: "t".into(),
            configs: vec![describe_configs::DescribeConfigsResourceResult {
                name: "ssl.truststore.certificates".into(),
                value: Some(long.clone()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        throttle_time_ms: 7,
    };
    for version in 0..=4 {
        let bytes = encode_ours(&response, ApiKey::DescribeConfigs.ctx(version));
        let theirs: k::DescribeConfigsResponse =
            decode_theirs(&bytes, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(theirs.throttle_time_ms, 7);
        let value = theirs.results[0].configs[0].value.clone().unwrap();
        if version >= 4 {
            assert_eq!(value.as_str(), long);
        } else {
            assert_eq!(value.len(), 32_766, "v{version}: cut at a char boundary");
            assert!(long.starts_with(value.as_str()));
        }
    }
}
