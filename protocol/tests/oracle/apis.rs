//! The pairing of each of our APIs with kafka-protocol's types for it.
//!
//! The `match` is exhaustive over [`ApiKey`], so an API added to the codec does not
//! compile here until it has an oracle, or is listed as one of Strata's own APIs, which
//! kafka-protocol does not know (their tests are in `tests/private_apis.rs`).

use crate::fill::Fill;
use kafka_protocol::messages as k;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message};
use std::fmt::Debug;
use strata_protocol::codec::Wire;
use strata_protocol::messages as s;
use strata_protocol::ApiKey;

/// What the tests need of any kafka-protocol struct, nested ones included.
pub trait TheirStruct: Encodable + Decodable + Message + Default + PartialEq + Debug {}
impl<T> TheirStruct for T where T: Encodable + Decodable + Message + Default + PartialEq + Debug {}

/// What the tests need of a kafka-protocol request or response.
pub trait Theirs: TheirStruct + HeaderVersion + Fill + Clone {}
impl<T> Theirs for T where T: TheirStruct + HeaderVersion + Fill + Clone {}

/// What the tests need of one of our message types.
pub trait Ours: Wire + Default + PartialEq + Debug {}
impl<T> Ours for T where T: Wire + Default + PartialEq + Debug {}

/// A test run once per API with that API's four types.
pub trait Visitor {
    /// Called with kafka-protocol's request and response types and ours.
    fn visit<TReq: Theirs, TResp: Theirs, OReq: Ours, OResp: Ours>(&mut self, api: ApiKey);
}

/// A test run once per struct (nested ones included) with kafka-protocol's and ours.
pub trait StructVisitor {
    /// Called with the two types of the struct `name` of `api`.
    fn visit<T: TheirStruct, O: Ours>(&mut self, api: ApiKey, name: &str);
}

macro_rules! dispatch {
    (
        $api:expr, $v:expr;
        $($name:ident => $module:ident::{$req:ident, $resp:ident}),* $(,)?;
        strata: $($private:ident),* $(,)?
    ) => {
        match $api {
            $(ApiKey::$name => $v.visit::<
                k::$req, k::$resp, s::$module::$req, s::$module::$resp
            >($api),)*
            $(ApiKey::$private)|* => panic!("{:?} is Strata's own API: kafka-protocol has no oracle for it", $api),
        }
    };
}

/// Runs `v` for `api`, one of Kafka's APIs ([`ApiKey::KAFKA`]).
pub fn visit(api: ApiKey, v: &mut impl Visitor) {
    dispatch! { api, v;
        Produce => produce::{ProduceRequest, ProduceResponse},
        Fetch => fetch::{FetchRequest, FetchResponse},
        ListOffsets => list_offsets::{ListOffsetsRequest, ListOffsetsResponse},
        Metadata => metadata::{MetadataRequest, MetadataResponse},
        OffsetCommit => offset_commit::{OffsetCommitRequest, OffsetCommitResponse},
        OffsetFetch => offset_fetch::{OffsetFetchRequest, OffsetFetchResponse},
        FindCoordinator => find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse},
        JoinGroup => join_group::{JoinGroupRequest, JoinGroupResponse},
        Heartbeat => heartbeat::{HeartbeatRequest, HeartbeatResponse},
        LeaveGroup => leave_group::{LeaveGroupRequest, LeaveGroupResponse},
        SyncGroup => sync_group::{SyncGroupRequest, SyncGroupResponse},
        DescribeGroups => describe_groups::{DescribeGroupsRequest, DescribeGroupsResponse},
        ListGroups => list_groups::{ListGroupsRequest, ListGroupsResponse},
        SaslHandshake => sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse},
        ApiVersions => api_versions::{ApiVersionsRequest, ApiVersionsResponse},
        CreateTopics => create_topics::{CreateTopicsRequest, CreateTopicsResponse},
        DeleteTopics => delete_topics::{DeleteTopicsRequest, DeleteTopicsResponse},
        DeleteRecords => delete_records::{DeleteRecordsRequest, DeleteRecordsResponse},
        InitProducerId => init_producer_id::{InitProducerIdRequest, InitProducerIdResponse},
        OffsetForLeaderEpoch => offset_for_leader_epoch::{
            OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
        },
        AddPartitionsToTxn => add_partitions_to_txn::{
            AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
        },
        AddOffsetsToTxn => add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse},
        EndTxn => end_txn::{EndTxnRequest, EndTxnResponse},
        WriteTxnMarkers => write_txn_markers::{WriteTxnMarkersRequest, WriteTxnMarkersResponse},
        TxnOffsetCommit => txn_offset_commit::{TxnOffsetCommitRequest, TxnOffsetCommitResponse},
        DescribeConfigs => describe_configs::{DescribeConfigsRequest, DescribeConfigsResponse},
        AlterConfigs => alter_configs::{AlterConfigsRequest, AlterConfigsResponse},
        DescribeLogDirs => describe_log_dirs::{DescribeLogDirsRequest, DescribeLogDirsResponse},
        SaslAuthenticate => sasl_authenticate::{SaslAuthenticateRequest, SaslAuthenticateResponse},
        CreatePartitions => create_partitions::{CreatePartitionsRequest, CreatePartitionsResponse},
        DeleteGroups => delete_groups::{DeleteGroupsRequest, DeleteGroupsResponse},
        IncrementalAlterConfigs => incremental_alter_configs::{
            IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
        },
        OffsetDelete => offset_delete::{OffsetDeleteRequest, OffsetDeleteResponse},
        DescribeCluster => describe_cluster::{DescribeClusterRequest, DescribeClusterResponse},
        DescribeProducers => describe_producers::{
            DescribeProducersRequest, DescribeProducersResponse
        },
        DescribeTransactions => describe_transactions::{
            DescribeTransactionsRequest, DescribeTransactionsResponse
        },
        ListTransactions => list_transactions::{ListTransactionsRequest, ListTransactionsResponse},
        ElectLeaders => elect_leaders::{ElectLeadersRequest, ElectLeadersResponse},
        AlterPartitionReassignments => alter_partition_reassignments::{
            AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
        },
        ListPartitionReassignments => list_partition_reassignments::{
            ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
        },
        DescribeQuorum => describe_quorum::{DescribeQuorumRequest, DescribeQuorumResponse},
        AlterPartition => alter_partition::{AlterPartitionRequest, AlterPartitionResponse},
        BrokerRegistration => broker_registration::{
            BrokerRegistrationRequest, BrokerRegistrationResponse
        },
        BrokerHeartbeat => broker_heartbeat::{BrokerHeartbeatRequest, BrokerHeartbeatResponse},
        UnregisterBroker => unregister_broker::{UnregisterBrokerRequest, UnregisterBrokerResponse},
        AllocateProducerIds => allocate_producer_ids::{
            AllocateProducerIdsRequest, AllocateProducerIdsResponse
        };
        strata: StrataRaft, StrataMetadataFetch,
    }
}

/// The versions both codecs know for `T`, with our codec range for `api`.
pub fn common_versions<T: Message>(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let (lo, hi) = api.codec_versions();
    lo.max(T::VERSIONS.min)..=hi.min(T::VERSIONS.max)
}
