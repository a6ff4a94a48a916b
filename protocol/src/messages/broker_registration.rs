//! BrokerRegistration (API key 62): a broker announces itself to the controller quorum
//! when it starts (KIP-631) with its listeners, supported feature versions and log
//! directories, and gets the broker epoch that fences its older incarnations.

use crate::codec::Uuid;

/// API key of BrokerRegistration.
pub const API_KEY: i16 = 62;
/// Lowest and highest version the codec can decode.
pub const VERSIONS: (i16, i16) = (0, 4);
/// First version with the flexible encoding.
pub const FLEXIBLE_FROM: i16 = 0;

crate::message! {
    /// An element of `BrokerRegistrationRequest.listeners`: an endpoint clients and
    /// other brokers reach this broker on.
    pub struct Listener {
        name: String [0..],
        host: String [0..],
        port: u16 [0..],
        security_protocol: i16 [0..],
    }
    /// An element of `BrokerRegistrationRequest.features`: a feature version range this
    /// broker supports. From v4 a minimum of 0 is sent too (KAFKA-17011); older versions
    /// leave such features out.
    pub struct Feature {
        name: String [0..],
        min_supported_version: i16 [0..],
        max_supported_version: i16 [0..],
    }
    /// BrokerRegistrationRequest, versions 0-4.
    pub struct BrokerRegistrationRequest {
        broker_id: i32 [0..],
        cluster_id: String [0..],
        /// New at every process start: tells a restart from a duplicate registration.
        incarnation_id: Uuid [0..],
        listeners: Vec<Listener> [0..],
        features: Vec<Feature> [0..],
        rack: Option<String> [0..] = Some(String::new()),
        /// Added in v1 for ZooKeeper migration; Strata has no ZooKeeper mode.
        is_migrating_zk_broker: bool [1..],
        /// The ids of the broker's log directories; added in v2 (KIP-858).
        log_dirs: Vec<Uuid> [2..],
        /// The epoch of the broker's previous clean shutdown, or -1; added in v3
        /// (KIP-966).
        previous_broker_epoch: i64 [3..] = -1,
    }
    /// BrokerRegistrationResponse, versions 0-4.
    pub struct BrokerRegistrationResponse {
        throttle_time_ms: i32 [0..],
        error_code: i16 [0..],
        /// The broker's epoch, to send in its heartbeats and AlterPartition requests.
        broker_epoch: i64 [0..] = -1,
    }
}
