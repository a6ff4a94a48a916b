//! Every API the codec knows, one module per API holding its request and response.
//!
//! The declarations of Kafka's APIs follow the Kafka protocol specification field by
//! field; each module states the versions it can decode and its first flexible version.
//! `strata_raft` and `strata_metadata_fetch` are Strata's own APIs between its nodes
//! (keys from [`STRATA_KEYS_FROM`] on), never advertised to clients.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod allocate_producer_ids;
pub mod alter_configs;
pub mod alter_partition;
pub mod alter_partition_reassignments;
pub mod api_versions;
pub mod broker_heartbeat;
pub mod broker_registration;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod strata_metadata_fetch;
pub mod strata_raft;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod write_txn_markers;

/// The first API key of Strata's own APIs. Kafka's keys are below 100 and grow by a few
/// a year; everything from here on is Strata's, so the two can never collide.
pub const STRATA_KEYS_FROM: i16 = 1000;

crate::apis! {
    kafka {
        Produce = 0 => produce::{ProduceRequest, ProduceResponse},
        Fetch = 1 => fetch::{FetchRequest, FetchResponse},
        ListOffsets = 2 => list_offsets::{ListOffsetsRequest, ListOffsetsResponse},
        Metadata = 3 => metadata::{MetadataRequest, MetadataResponse},
        OffsetCommit = 8 => offset_commit::{OffsetCommitRequest, OffsetCommitResponse},
        OffsetFetch = 9 => offset_fetch::{OffsetFetchRequest, OffsetFetchResponse},
        FindCoordinator = 10 => find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse},
        JoinGroup = 11 => join_group::{JoinGroupRequest, JoinGroupResponse},
        Heartbeat = 12 => heartbeat::{HeartbeatRequest, HeartbeatResponse},
        LeaveGroup = 13 => leave_group::{LeaveGroupRequest, LeaveGroupResponse},
        SyncGroup = 14 => sync_group::{SyncGroupRequest, SyncGroupResponse},
        DescribeGroups = 15 => describe_groups::{DescribeGroupsRequest, DescribeGroupsResponse},
        ListGroups = 16 => list_groups::{ListGroupsRequest, ListGroupsResponse},
        SaslHandshake = 17 => sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse},
        ApiVersions = 18 => api_versions::{ApiVersionsRequest, ApiVersionsResponse},
        CreateTopics = 19 => create_topics::{CreateTopicsRequest, CreateTopicsResponse},
        DeleteTopics = 20 => delete_topics::{DeleteTopicsRequest, DeleteTopicsResponse},
        DeleteRecords = 21 => delete_records::{DeleteRecordsRequest, DeleteRecordsResponse},
        InitProducerId = 22 => init_producer_id::{InitProducerIdRequest, InitProducerIdResponse},
        OffsetForLeaderEpoch = 23 => offset_for_leader_epoch::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse},
        AddPartitionsToTxn = 24 => add_partitions_to_txn::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse},
        AddOffsetsToTxn = 25 => add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse},
        EndTxn = 26 => end_txn::{EndTxnRequest, EndTxnResponse},
        WriteTxnMarkers = 27 => write_txn_markers::{WriteTxnMarkersRequest, WriteTxnMarkersResponse},
        TxnOffsetCommit = 28 => txn_offset_commit::{TxnOffsetCommitRequest, TxnOffsetCommitResponse},
        DescribeConfigs = 32 => describe_configs::{DescribeConfigsRequest, DescribeConfigsResponse},
        AlterConfigs = 33 => alter_configs::{AlterConfigsRequest, AlterConfigsResponse},
        DescribeLogDirs = 35 => describe_log_dirs::{DescribeLogDirsRequest, DescribeLogDirsResponse},
        SaslAuthenticate = 36 => sasl_authenticate::{SaslAuthenticateRequest, SaslAuthenticateResponse},
        CreatePartitions = 37 => create_partitions::{CreatePartitionsRequest, CreatePartitionsResponse},
        DeleteGroups = 42 => delete_groups::{DeleteGroupsRequest, DeleteGroupsResponse},
        ElectLeaders = 43 => elect_leaders::{ElectLeadersRequest, ElectLeadersResponse},
        IncrementalAlterConfigs = 44 => incremental_alter_configs::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse},
        AlterPartitionReassignments = 45 => alter_partition_reassignments::{AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse},
        ListPartitionReassignments = 46 => list_partition_reassignments::{ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse},
        OffsetDelete = 47 => offset_delete::{OffsetDeleteRequest, OffsetDeleteResponse},
        DescribeQuorum = 55 => describe_quorum::{DescribeQuorumRequest, DescribeQuorumResponse},
        AlterPartition = 56 => alter_partition::{AlterPartitionRequest, AlterPartitionResponse},
        DescribeCluster = 60 => describe_cluster::{DescribeClusterRequest, DescribeClusterResponse},
        DescribeProducers = 61 => describe_producers::{DescribeProducersRequest, DescribeProducersResponse},
        BrokerRegistration = 62 => broker_registration::{BrokerRegistrationRequest, BrokerRegistrationResponse},
        BrokerHeartbeat = 63 => broker_heartbeat::{BrokerHeartbeatRequest, BrokerHeartbeatResponse},
        UnregisterBroker = 64 => unregister_broker::{UnregisterBrokerRequest, UnregisterBrokerResponse},
        DescribeTransactions = 65 => describe_transactions::{DescribeTransactionsRequest, DescribeTransactionsResponse},
        ListTransactions = 66 => list_transactions::{ListTransactionsRequest, ListTransactionsResponse},
        AllocateProducerIds = 67 => allocate_producer_ids::{AllocateProducerIdsRequest, AllocateProducerIdsResponse},
    }
    // Strata's own: never advertised to clients (see STRATA_KEYS_FROM).
    strata {
        StrataRaft = 1000 => strata_raft::{StrataRaftRequest, StrataRaftResponse},
        StrataMetadataFetch = 1001 => strata_metadata_fetch::{StrataMetadataFetchRequest, StrataMetadataFetchResponse},
    }
}
