//! Strata's benchmark harness.
//!
//! - `strata-perf` (the binary, built from [`run`]): a load generator that speaks the
//!   Kafka wire protocol through `strata-protocol` against any Kafka-compatible
//!   broker, measuring throughput and latency from each record's scheduled send time
//!   (see [`schedule`]), plus a loopback bandwidth probe ([`loopback`]).
//! - Criterion micro-benchmarks in `benches/` (codec hot paths).
//! - `compare.sh` and `rdkafka-perf.sh`: whole-machine comparisons; see BENCHMARKS.md.

pub mod cli;
pub mod cluster;
pub mod consume;
pub mod json;
pub mod loopback;
pub mod payload;
pub mod produce;
pub mod run;
pub mod schedule;
pub mod stats;
pub mod txn;
pub mod wire;
