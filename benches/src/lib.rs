//! Strata's benchmark harness.
//!
//! - `strata-perf` (the binary, built from [`run`]): a load generator for any
//!   Kafka-compatible broker, producing and consuming through `strata-client` (the
//!   default engine: [`client_produce`], [`client_consume`]) or through hand-written
//!   wire code on `strata-protocol` (`--engine wire`: [`produce`], [`consume`]), measuring throughput and latency from each record's scheduled send time
//!   (see [`schedule`]), plus a loopback bandwidth probe ([`loopback`]).
//! - Criterion micro-benchmarks in `benches/` (codec hot paths).
//! - `compare.sh` and `rdkafka-perf.sh`: whole-machine comparisons; see BENCHMARKS.md.

pub mod cli;
pub mod client_consume;
pub mod client_produce;
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
