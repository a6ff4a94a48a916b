//! The cluster part of the configuration, with Kafka's KRaft keys: which roles this node
//! plays (`process.roles`), the controller quorum (`controller.quorum.voters`,
//! `controller.listener.names`), the inter-broker listener, and the replication and
//! controller tunables with Kafka's defaults.
//!
//! With neither `process.roles` nor `controller.quorum.voters` set, the node is a
//! single-node cluster: a quorum of one (itself) that needs no controller listener, so
//! `strata` with no configuration keeps working exactly as a single broker does.

use super::{ConfigError, Listener, Parser};

/// One voter of the controller quorum (`id@host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    /// The voter's `node.id`.
    pub id: i32,
    /// Host of its controller listener.
    pub host: String,
    /// Port of its controller listener.
    pub port: u16,
}

/// The cluster settings of this node.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `process.roles` contains `broker`.
    pub broker: bool,
    /// `process.roles` contains `controller`.
    pub controller: bool,
    /// `controller.quorum.voters`; for a single-node cluster, this node alone.
    pub voters: Vec<Voter>,
    /// No quorum was configured: this node is the whole cluster and its quorum of one
    /// never talks to anyone.
    pub single_node: bool,
    /// `controller.listener.names`.
    pub controller_listener_names: Vec<String>,
    /// `inter.broker.listener.name`: the listener followers fetch from and coordinators
    /// send markers to; defaults to the first broker listener.
    pub inter_broker_listener_name: String,
    /// `broker.heartbeat.interval.ms` (2000).
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms` (9000): a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `controller.quorum.election.timeout.ms` (1000).
    pub quorum_election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms` (2000): Raft heartbeats go out at a third
    /// of it.
    pub quorum_fetch_timeout_ms: u64,
    /// `controller.quorum.request.timeout.ms` (2000).
    pub quorum_request_timeout_ms: u64,
    /// Metadata log entries between snapshots:
    /// `metadata.log.max.record.bytes.between.snapshots` (20 MiB) counted as 1 KiB per
    /// entry (Raft entries are counted, not their bytes).
    pub metadata_snapshot_entries: u64,
    /// `replica.lag.time.max.ms` (30000).
    pub replica_lag_time_max_ms: i64,
    /// `replica.fetch.max.bytes` (1 MiB), per partition.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes` (10 MiB).
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms` (500).
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes` (1).
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms` (1000).
    pub replica_fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms` (30000).
    pub replica_socket_timeout_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms` (5000).
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    /// `request.timeout.ms` of broker-to-broker requests (30000).
    pub inter_broker_request_timeout_ms: u64,
    /// `unclean.leader.election.enable` (false), the broker default of the topic key.
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable` (true).
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds` (300).
    pub leader_imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage` (10).
    pub leader_imbalance_per_broker_percentage: u32,
    /// `controlled.shutdown.enable` (true).
    pub controlled_shutdown_enable: bool,
    /// `offsets.topic.replication.factor` (3; 1 on a single-node cluster).
    pub offsets_topic_replication_factor: i16,
    /// `transaction.state.log.replication.factor` (3; 1 on a single-node cluster).
    pub transaction_state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr` (2; 1 on a single-node cluster).
    pub transaction_state_log_min_isr: i32,
    /// `replica.selector.class` (unset: the leader): which replica a consumer with a
    /// `client.rack` is told to read from (KIP-392).
    pub replica_selector: crate::replication::read_replica::ReplicaSelector,
    /// `metadata.log.dir`: where the controller keeps its Raft log and snapshots
    /// (defaults to the first `log.dirs`).
    pub metadata_log_dir: Option<std::path::PathBuf>,
}

impl ClusterConfig {
    /// Reads the cluster keys; `listeners` and `node_id` are already parsed.
    /// Reads the cluster keys. One line per key in one literal, so the function is long
    /// but flat; the roles, voters and listeners are checked first ([`Topology::parse`]).
    pub(super) fn parse(
        p: &mut Parser<'_>,
        node_id: i32,
        listeners: &[Listener],
    ) -> Result<ClusterConfig, ConfigError> {
        let Topology {
            broker,
            controller,
            single_node,
            voters,
            controller_listener_names,
            inter_broker_listener_name,
        } = Topology::parse(p, node_id, listeners)?;
        let (rf_default, min_isr_default) = if single_node { (1, 1) } else { (3, 2) };
        let max_i16 = i64::from(i16::MAX);
        Ok(ClusterConfig {
            broker,
            controller,
            voters,
            single_node,
            controller_listener_names,
            inter_broker_listener_name,
            broker_heartbeat_interval_ms: p.int_in("broker.heartbeat.interval.ms", 2000, 1, i64::MAX)? as u64,
            broker_session_timeout_ms: p.int_in("broker.session.timeout.ms", 9000, 1, i64::MAX)? as u64,
            quorum_election_timeout_ms: p.int_in(
                "controller.quorum.election.timeout.ms",
                1000,
                10,
                i64::MAX,
            )? as u64,
            quorum_fetch_timeout_ms: p.int_in("controller.quorum.fetch.timeout.ms", 2000, 10, i64::MAX)?
                as u64,
            quorum_request_timeout_ms: p.int_in("controller.quorum.request.timeout.ms", 2000, 10, i64::MAX)?
                as u64,
            metadata_snapshot_entries: (p.int_in(
                "metadata.log.max.record.bytes.between.snapshots",
                20 * 1024 * 1024,
                1,
                i64::MAX,
            )? as u64
                / 1024)
                .max(10),
            replica_lag_time_max_ms: p.int_in("replica.lag.time.max.ms", 30_000, 1, i64::MAX)?,
            replica_fetch_max_bytes: p.int_in("replica.fetch.max.bytes", 1_048_576, 1, i64::from(i32::MAX))?
                as i32,
            replica_fetch_response_max_bytes: p.int_in(
                "replica.fetch.response.max.bytes",
                10_485_760,
                1,
                i64::from(i32::MAX),
            )? as i32,
            replica_fetch_wait_max_ms: p.int_in("replica.fetch.wait.max.ms", 500, 0, i64::from(i32::MAX))?
                as i32,
            replica_fetch_min_bytes: p.int_in("replica.fetch.min.bytes", 1, 1, i64::from(i32::MAX))? as i32,
            replica_fetch_backoff_ms: p.int_in("replica.fetch.backoff.ms", 1000, 0, i64::MAX)? as u64,
            replica_socket_timeout_ms: p.int_in("replica.socket.timeout.ms", 30_000, 1, i64::MAX)? as u64,
            replica_high_watermark_checkpoint_interval_ms: p.int_in(
                "replica.high.watermark.checkpoint.interval.ms",
                5000,
                1,
                i64::MAX,
            )? as u64,
            inter_broker_request_timeout_ms: p.int_in("request.timeout.ms", 30_000, 1, i64::MAX)? as u64,
            unclean_leader_election_enable: p.bool("unclean.leader.election.enable", false)?,
            auto_leader_rebalance_enable: p.bool("auto.leader.rebalance.enable", true)?,
            leader_imbalance_check_interval_ms: p.int_in(
                "leader.imbalance.check.interval.seconds",
                300,
                1,
                i64::MAX,
            )? as u64
                * 1000,
            leader_imbalance_per_broker_percentage: p.int_in(
                "leader.imbalance.per.broker.percentage",
                10,
                0,
                100,
            )? as u32,
            controlled_shutdown_enable: p.bool("controlled.shutdown.enable", true)?,
            offsets_topic_replication_factor: p.int_in(
                "offsets.topic.replication.factor",
                rf_default,
                1,
                max_i16,
            )? as i16,
            transaction_state_log_replication_factor: p.int_in(
                "transaction.state.log.replication.factor",
                rf_default,
                1,
                max_i16,
            )? as i16,
            transaction_state_log_min_isr: p.int_in(
                "transaction.state.log.min.isr",
                min_isr_default,
                1,
                max_i16,
            )? as i32,
            replica_selector: crate::replication::read_replica::ReplicaSelector::parse(
                p.opt_string("replica.selector.class").as_deref(),
            )?,
            metadata_log_dir: p.opt_string("metadata.log.dir").map(std::path::PathBuf::from),
        })
    }

    /// True if `listener` is a controller listener.
    pub fn is_controller_listener(&self, listener: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == listener)
    }

    /// The voter with `id`.
    pub fn voter(&self, id: i32) -> Option<&Voter> {
        self.voters.iter().find(|v| v.id == id)
    }
}

/// Who this node is in the cluster, from `process.roles`, `controller.quorum.voters` and the
/// listeners, checked against each other.
struct Topology {
    broker: bool,
    controller: bool,
    single_node: bool,
    voters: Vec<Voter>,
    controller_listener_names: Vec<String>,
    inter_broker_listener_name: String,
}

impl Topology {
    fn parse(p: &mut Parser<'_>, node_id: i32, listeners: &[Listener]) -> Result<Topology, ConfigError> {
        let roles = p.opt_string("process.roles");
        let voters_text = p.opt_string("controller.quorum.voters");
        let single_node = roles.is_none() && voters_text.is_none();
        let (broker, controller) = match &roles {
            None => (true, true),
            Some(text) => {
                let mut broker = false;
                let mut controller = false;
                for role in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    match role {
                        "broker" => broker = true,
                        "controller" => controller = true,
                        _ => return Err(p.invalid("process.roles", "roles are broker and/or controller")),
                    }
                }
                if !broker && !controller {
                    return Err(p.invalid("process.roles", "at least one of broker, controller is required"));
                }
                (broker, controller)
            }
        };
        let controller_listener_names: Vec<String> = p
            .opt_string("controller.listener.names")
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let voters = match &voters_text {
            None if single_node => vec![Voter { id: node_id, host: String::new(), port: 0 }],
            None => return Err(p.invalid("controller.quorum.voters", "required when process.roles is set")),
            Some(text) => parse_voters(p, text)?,
        };
        if controller && !single_node && !voters.iter().any(|v| v.id == node_id) {
            return Err(p.invalid(
                "controller.quorum.voters",
                &format!("process.roles includes controller but node.id {node_id} is not a voter"),
            ));
        }
        if !single_node {
            if controller_listener_names.is_empty() {
                return Err(p.invalid("controller.listener.names", "required when process.roles is set"));
            }
            if controller && !listeners.iter().any(|l| controller_listener_names.contains(&l.name)) {
                return Err(p.invalid(
                    "listeners",
                    "a controller needs a listener named in controller.listener.names (e.g. CONTROLLER://host:port)",
                ));
            }
        }
        let broker_listeners: Vec<&Listener> =
            listeners.iter().filter(|l| !controller_listener_names.contains(&l.name)).collect();
        if broker && broker_listeners.is_empty() {
            return Err(p.invalid(
                "listeners",
                "a broker needs at least one listener that is not a controller listener",
            ));
        }
        let inter_broker_listener_name = match p.opt_string("inter.broker.listener.name") {
            Some(name) => {
                if broker && !broker_listeners.iter().any(|l| l.name == name) {
                    return Err(
                        p.invalid("inter.broker.listener.name", "must name one of the broker listeners")
                    );
                }
                name
            }
            None => broker_listeners.first().map(|l| l.name.clone()).unwrap_or_else(|| "PLAINTEXT".into()),
        };
        Ok(Topology {
            broker,
            controller,
            single_node,
            voters,
            controller_listener_names,
            inter_broker_listener_name,
        })
    }
}

fn parse_voters(p: &Parser<'_>, text: &str) -> Result<Vec<Voter>, ConfigError> {
    let mut voters = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || p.invalid("controller.quorum.voters", "expected id@host:port,...");
        let (id, addr) = item.split_once('@').ok_or_else(bad)?;
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let id: i32 = id.trim().parse().map_err(|_| bad())?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if id < 0 || voters.iter().any(|v: &Voter| v.id == id) {
            return Err(p.invalid("controller.quorum.voters", "voter ids must be distinct and not negative"));
        }
        voters.push(Voter { id, host: host.trim_start_matches('[').trim_end_matches(']').to_string(), port });
    }
    if voters.is_empty() {
        return Err(p.invalid("controller.quorum.voters", "at least one voter is required"));
    }
    Ok(voters)
}
