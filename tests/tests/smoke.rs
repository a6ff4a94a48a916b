//! Smoke test of the real `strata` binary: it starts on a free port with a fresh data dir,
//! answers ApiVersions v0 (classic encoding) and v3 (flexible request header v2, response
//! header still v0 per KIP-511) with the same API list, answers an unknown ApiVersions version
//! with a v0-encoded UNSUPPORTED_VERSION (35) plus the list, and shuts down cleanly on SIGTERM.

use strata_tests::{ApiVersionsResponse, BrokerProcess, RawConn, API_VERSIONS};

/// UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;

#[test]
fn api_versions_v0_and_v3() -> anyhow::Result<()> {
    let mut broker = BrokerProcess::start(&[])?;
    let mut conn = RawConn::connect(broker.addr())?;

    let v0 = conn.api_versions(0)?;
    assert_eq!(v0.error_code, 0, "ApiVersions v0 error");
    let av = v0.find(API_VERSIONS).expect("ApiVersions (18) not advertised");
    assert!(av.min_version == 0 && av.max_version >= 3, "ApiVersions range {av:?}");
    for key in [0i16, 1, 2, 3, 19, 20] {
        assert!(v0.find(key).is_some(), "api key {key} not advertised: {v0:?}");
    }
    for r in &v0.api_keys {
        assert!(r.min_version <= r.max_version, "bad range {r:?}");
    }

    let v3 = conn.api_versions(3)?;
    assert_eq!(v3.error_code, 0, "ApiVersions v3 error");
    assert_eq!(v3.throttle_time_ms, Some(0));
    assert_eq!(v0.api_keys, v3.api_keys, "v0 and v3 advertise different lists");

    drop(conn);
    broker.stop()?;
    Ok(())
}

#[test]
fn api_versions_unknown_version_answers_v0_error() -> anyhow::Result<()> {
    let broker = BrokerProcess::start(&[])?;
    let mut conn = RawConn::connect(broker.addr())?;
    // Version 99 with a flexible (v2) header: the broker cannot know the layout, so it must
    // answer a v0 body with UNSUPPORTED_VERSION and its list, letting the client retry.
    let body = conn.request(API_VERSIONS, 99, true, &[0])?;
    let r = ApiVersionsResponse::decode(&body, 0)?;
    assert_eq!(r.error_code, UNSUPPORTED_VERSION);
    assert!(r.find(API_VERSIONS).is_some(), "api list missing: {r:?}");
    // The connection stays usable for a retry at a version both sides know.
    let again = conn.api_versions(3)?;
    assert_eq!(again.error_code, 0);
    Ok(())
}
