//! The controller side of the KRaft-style cluster: the metadata quorum that replicates
//! the metadata log among the voters of `controller.quorum.voters`.

pub mod raft;
