//! The coordinators that keep their state in internal topics: the group coordinator
//! (`__consumer_offsets`, [`group`]) and the transaction coordinator
//! (`__transaction_state`, [`txn`]). Each is a pure state machine with a small adapter (a
//! [`runtime::Shard`]) run by the one coordinator [`runtime`], which writes through a
//! [`writer::PartitionWriter`]; [`leadership`] tells them which partitions this broker
//! leads, and [`internal_topics`] creates their topics on first use.

pub mod group;
pub mod internal_topics;
pub mod leadership;
pub mod runtime;
pub mod txn;
pub mod writer;

#[cfg(test)]
mod runtime_tests;
