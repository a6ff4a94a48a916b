//! Kafka wire protocol for Strata.
//!
//! Sans-io: this crate turns bytes into typed messages and back and knows nothing of
//! sockets, files or async runtimes, so it can be tested and fuzzed on its own. Every
//! decoder bounds its allocations by the bytes actually present.

pub mod records;
