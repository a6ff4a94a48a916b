//! The one flag parser of the `strata` binary. With no subcommand it is the broker's
//! command line, unchanged (`strata [server.properties] [--override k=v]...`, as
//! `kafka-server-start.sh`); `strata broker` is the same. Every client tool takes the
//! same [`ConnectionArgs`] (the bootstrap servers and `-X key=value` client settings);
//! the admin tools (`topic`, `group`, `cluster`) and `produce` add the output format of
//! [`ClientArgs`], and `consume` its own record [`RecordFormat`] under the same
//! `--format` flag.

use crate::format::RecordFormat;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Strata: a Kafka-compatible streaming broker, and tools to administer, produce to and consume from any Kafka cluster",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// A client tool; none runs the broker.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The broker's arguments when no subcommand is given.
    #[command(flatten)]
    pub broker: BrokerArgs,
}

/// The broker's arguments, shaped like `kafka-server-start.sh`.
#[derive(Args, Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerArgs {
    /// A server.properties file with Kafka's configuration keys.
    pub config: Option<PathBuf>,
    /// A configuration entry that overrides the file, as key=value; repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the broker (the same as giving no subcommand).
    Broker(BrokerArgs),
    /// Create, list, describe, grow and delete topics and alter their configs.
    Topic {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: TopicAction,
    },
    /// List, describe and delete consumer groups and reset their offsets.
    Group {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: GroupAction,
    },
    /// Move partitions between brokers and elect their leaders.
    #[command(after_help = "Examples:\n  \
        strata partition reassign orders:0=2,3 orders:1=3,1 --wait\n  \
        strata partition reassignments\n  \
        strata partition cancel-reassignment orders:0\n  \
        strata partition elect-leaders orders --election-type preferred")]
    Partition {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: PartitionAction,
    },
    /// Describe and change the configs of a topic, of one broker or of every broker's
    /// defaults, as `kafka-configs.sh` does.
    #[command(after_help = "Examples:\n  \
        strata config describe --topic orders\n  \
        strata config describe --broker 1 --all\n  \
        strata config alter --broker-defaults --set log.retention.ms=86400000\n  \
        strata config alter --broker 1 --delete follower.replication.throttled.rate")]
    Config {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Describe the cluster.
    Cluster {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Produce the lines of stdin to a topic, one record per line, and exit once every
    /// record is acknowledged (a summary goes to stderr).
    #[command(after_help = "Examples:\n  \
        printf 'alice:1\\nbob:2\\n' | strata produce orders --key-separator :\n  \
        strata produce orders --acks 1 --compression zstd -X linger.ms=50 < lines.txt\n  \
        strata produce orders --transactional-id loader-1 < batch.txt")]
    Produce {
        /// Connection and output (`-X` takes producer settings such as `linger.ms`).
        #[command(flatten)]
        client: ClientArgs,
        /// What to produce and how.
        #[command(flatten)]
        args: ProduceArgs,
    },
    /// Print the records of a topic to stdout, with or without a consumer group.
    #[command(after_help = "Examples:\n  \
        strata consume orders --group billing --from-beginning\n  \
        strata consume orders --offset beginning --exit-at-end --format json\n  \
        strata consume orders --partition 2 --offset -10 -n 5 --format '%p %o %k=%s\\n'\n  \
        strata consume orders --isolation-level read_committed -o beginning -e")]
    Consume {
        /// Connection (`-X` takes consumer settings such as `fetch.max.bytes`).
        #[command(flatten)]
        connection: ConnectionArgs,
        /// What to consume and how to print it.
        #[command(flatten)]
        args: ConsumeArgs,
    },
}

/// How every client tool reaches the cluster; `global` so the flags may come before or
/// after the action.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ConnectionArgs {
    /// Brokers to bootstrap from, host:port, comma-separated.
    #[arg(long, short = 'b', global = true, default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// A client setting by its Kafka key (`request.timeout.ms=5000`); repeatable.
    #[arg(short = 'X', global = true, value_name = "KEY=VALUE", value_parser = key_value)]
    pub settings: Vec<(String, String)>,
}

/// What the admin tools and `produce` take: the connection and the output format.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ClientArgs {
    /// Bootstrap servers and client settings.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Output: readable text, or JSON for scripts.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output format.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// `strata topic ...`.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum TopicAction {
    /// Create a topic.
    Create {
        /// Topic name.
        name: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(long, short = 'p')]
        partitions: Option<i32>,
        /// Replication factor (default: the broker's default.replication.factor).
        #[arg(long, short = 'r')]
        replication_factor: Option<i16>,
        /// A topic config, key=value; repeatable.
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
        /// Only check that the broker would create it.
        #[arg(long)]
        validate_only: bool,
    },
    /// List topics.
    List {
        /// Include internal topics (__consumer_offsets, ...).
        #[arg(long)]
        internal: bool,
    },
    /// Describe topics: partitions, leaders, replicas, ISR, and configs set on them.
    Describe {
        /// Topic names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete topics.
    Delete {
        /// Topic names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Grow a topic to a number of partitions.
    AddPartitions {
        /// Topic name.
        name: String,
        /// The partition count after the change.
        #[arg(long, short = 'p')]
        partitions: i32,
    },
    /// Change a topic's configs; keys not named keep their values.
    AlterConfig {
        /// Topic name.
        name: String,
        /// The changes.
        #[command(flatten)]
        changes: ConfigChanges,
    },
}

/// The changes of an incremental config alter, shared by `topic alter-config` and
/// `config alter`.
#[derive(Args, Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigChanges {
    /// Set key=value; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub set: Vec<(String, String)>,
    /// Remove a key (back to the default); repeatable.
    #[arg(long, value_name = "KEY")]
    pub delete: Vec<String>,
    /// Add a value to a list config, key=value; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub append: Vec<(String, String)>,
    /// Remove a value from a list config, key=value; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub subtract: Vec<(String, String)>,
}

/// `strata config ...`.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ConfigAction {
    /// Show the configs set on the entity (with `--all`, every config and where its
    /// value comes from).
    Describe {
        /// Whose configs.
        #[command(flatten)]
        entity: ConfigEntity,
        /// Every config, defaults included, with its source.
        #[arg(long)]
        all: bool,
    },
    /// Change the entity's configs; keys not named keep their values.
    Alter {
        /// Whose configs.
        #[command(flatten)]
        entity: ConfigEntity,
        /// The changes.
        #[command(flatten)]
        changes: ConfigChanges,
    },
}

/// Exactly one of a topic, a broker, or the default of every broker (Kafka's
/// `--entity-type topics|brokers`, `--entity-name`, `--entity-default`).
#[derive(Args, Debug, Clone, PartialEq, Eq, Default)]
#[group(required = true, multiple = false)]
pub struct ConfigEntity {
    /// A topic.
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// One broker, by node id.
    #[arg(long, value_name = "ID")]
    pub broker: Option<i32>,
    /// The cluster-wide default of every broker.
    #[arg(long)]
    pub broker_defaults: bool,
}

/// `strata group ...`.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum GroupAction {
    /// List groups.
    List,
    /// Describe a group: state, members and their assignments, committed offsets and lag.
    Describe {
        /// Group id.
        group: String,
    },
    /// Delete groups (they must have no members).
    Delete {
        /// Group ids.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Reset a group's committed offsets (the group must have no members). Prints the
    /// plan; only `--execute` commits it, as Kafka's tool.
    ResetOffsets {
        /// Group id.
        group: String,
        /// The topic whose partitions are reset; repeatable.
        #[arg(long = "topic", short = 't', required = true)]
        topics: Vec<String>,
        /// Where to.
        #[command(flatten)]
        target: ResetTarget,
        /// Commit the new offsets (without it: a dry run).
        #[arg(long)]
        execute: bool,
    },
}

/// Where `reset-offsets` moves a group: exactly one of the flags.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// To the log start offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// To the log end offset.
    #[arg(long)]
    pub to_latest: bool,
    /// To this offset (clamped to the partition's range, as Kafka's tool does).
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
}

/// `strata produce TOPIC`: the flags of kcat's producer mode and of
/// `kafka-console-producer.sh`, by Kafka's names.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ProduceArgs {
    /// The topic to produce to.
    pub topic: String,
    /// Split each line at the first SEP: the part before is the key, the rest the
    /// value (kcat's `-K`); a line without SEP has a null key.
    #[arg(long, short = 'K', value_name = "SEP", value_parser = non_empty)]
    pub key_separator: Option<String>,
    /// Acknowledgements to wait for (`acks`; default all).
    #[arg(long, value_parser = ["0", "1", "all", "-1"])]
    pub acks: Option<String>,
    /// Batch compression (`compression.type`; default none).
    #[arg(long, value_parser = ["none", "gzip", "snappy", "lz4", "zstd"])]
    pub compression: Option<String>,
    /// Send every record to this partition instead of partitioning by key.
    #[arg(long, short = 'p')]
    pub partition: Option<i32>,
    /// Produce all of stdin in one transaction with this `transactional.id`: committed
    /// at end of input, aborted if any record fails.
    #[arg(long, value_name = "ID", value_parser = non_empty)]
    pub transactional_id: Option<String>,
}

/// `strata consume TOPIC`: the flags of `kafka-console-consumer.sh` and kcat's
/// consumer mode, by their names.
#[derive(Args, Debug, Clone)]
pub struct ConsumeArgs {
    /// The topic to consume.
    pub topic: String,
    /// Consume as a member of this group, committing offsets as it goes; without it
    /// every partition is assigned to this consumer alone and nothing is committed.
    #[arg(long, short = 'g', value_parser = non_empty)]
    pub group: Option<String>,
    /// Start at the log start: `auto.offset.reset=earliest` for a group (used where it
    /// has no committed offset), offset `beginning` without one.
    #[arg(long, conflicts_with = "offset")]
    pub from_beginning: bool,
    /// Where every partition starts, without a group: `beginning`, `end` (the
    /// default), an offset, or `-N` for N records before the end (as kcat).
    #[arg(long, short = 'o', allow_hyphen_values = true, value_parser = start_offset, conflicts_with = "group")]
    pub offset: Option<StartOffset>,
    /// Consume only this partition (without a group).
    #[arg(long, short = 'p', conflicts_with = "group")]
    pub partition: Option<i32>,
    /// `read_committed` skips aborted transactions and stops at the last stable offset.
    #[arg(long, value_parser = ["read_uncommitted", "read_committed"])]
    pub isolation_level: Option<String>,
    /// Exit after printing COUNT records.
    #[arg(short = 'n', long = "max-messages", value_name = "COUNT")]
    pub count: Option<u64>,
    /// Exit once every assigned partition reached the end it had when the tool started
    /// (as kcat's `-e`).
    #[arg(long, short = 'e')]
    pub exit_at_end: bool,
    /// `text` (each value on its own line), `json` (one object per record and line; key,
    /// value and header values as strings, bytes that are not UTF-8 replaced by U+FFFD), or
    /// a template as kcat's `-f`: %t topic, %p partition, %o offset, %k key, %s value,
    /// %K / %S key / value length (-1 if null), %T timestamp (ms), %h headers (k=v,...),
    /// %% a percent sign; \n \t \r \\ escapes.
    #[arg(long, short = 'f', default_value = "text", value_parser = RecordFormat::parse)]
    pub format: RecordFormat,
}

/// Where a consumer without a group starts in each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOffset {
    /// The log start offset.
    Beginning,
    /// The log end offset: only records produced from now on.
    End,
    /// This offset (out of range: where `auto.offset.reset` says).
    At(i64),
    /// This many records before the end (kcat's `-o -N`), at most back to the start.
    BeforeEnd(i64),
}

/// Parses `beginning`, `end`, `N` or `-N`.
fn start_offset(s: &str) -> Result<StartOffset, String> {
    match s {
        "beginning" | "earliest" => Ok(StartOffset::Beginning),
        "end" | "latest" => Ok(StartOffset::End),
        _ => match s.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(StartOffset::At(n)),
            Ok(n) => Ok(StartOffset::BeforeEnd(n.checked_neg().unwrap_or(i64::MAX))),
            Err(_) => Err(format!("expected beginning, end, an offset or -N, got {s:?}")),
        },
    }
}

/// Refuses an empty string where one would mean nothing.
fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("must not be empty".to_string())
    } else {
        Ok(s.to_string())
    }
}

/// `strata partition ...`: what `kafka-reassign-partitions.sh` and
/// `kafka-leader-election.sh` do, by partition names on the command line rather than a
/// JSON file.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum PartitionAction {
    /// Start moving partitions to new replicas (AlterPartitionReassignments); a move
    /// finishes on its own once the new replicas are in sync.
    Reassign {
        /// TOPIC:PARTITION=BROKER,BROKER,...: the target replicas, the preferred leader
        /// first; repeatable.
        #[arg(required = true, value_name = "TOPIC:PARTITION=REPLICAS", value_parser = partition_move)]
        moves: Vec<PartitionMove>,
        /// Wait until every move has finished.
        #[arg(long)]
        wait: bool,
        /// How long `--wait` waits, in ms.
        #[arg(long, default_value_t = 300_000, value_name = "MS", requires = "wait")]
        wait_timeout_ms: u64,
        /// Throttle the moves to this many bytes per second per broker, as
        /// `kafka-reassign-partitions.sh --throttle` (the topics' throttled replica lists
        /// and the brokers' replication rates), removed once the moves finished; needs
        /// `--wait`.
        #[arg(long, value_name = "BYTES_PER_SEC", requires = "wait")]
        throttle: Option<u64>,
    },
    /// List the moves in progress (ListPartitionReassignments): of these topics, or of all.
    Reassignments {
        /// Topic names (none: every topic).
        topics: Vec<String>,
    },
    /// Cancel moves in progress: each partition goes back to the replicas it had.
    CancelReassignment {
        /// TOPIC:PARTITION; repeatable.
        #[arg(required = true, value_name = "TOPIC:PARTITION", value_parser = topic_partition)]
        partitions: Vec<(String, i32)>,
    },
    /// Elect leaders (ElectLeaders): the preferred replica where it is in sync, or with
    /// `--election-type unclean` any live replica of a partition with none in sync.
    ElectLeaders {
        /// TOPIC (every partition of it) or TOPIC:PARTITION; none: every partition.
        #[arg(value_name = "TOPIC[:PARTITION]")]
        partitions: Vec<String>,
        /// Which replica may be chosen.
        #[arg(long, value_enum, default_value_t = Election::Preferred)]
        election_type: Election,
    },
}

/// One partition's target replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMove {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Target replicas, the preferred leader first.
    pub replicas: Vec<i32>,
}

/// `--election-type`, by the names of Kafka's tool.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// The first replica of the assignment, if it is in sync.
    Preferred,
    /// Any live replica when none is in sync (may lose records).
    Unclean,
}

/// Parses `TOPIC:PARTITION` (the topic may hold `:` only before the last one).
fn topic_partition(s: &str) -> Result<(String, i32), String> {
    let bad = || format!("expected TOPIC:PARTITION, got {s:?}");
    let (topic, partition) = s.rsplit_once(':').ok_or_else(bad)?;
    let partition = partition.parse::<i32>().ok().filter(|p| *p >= 0).ok_or_else(bad)?;
    if topic.is_empty() {
        return Err(bad());
    }
    Ok((topic.to_string(), partition))
}

/// Parses `TOPIC:PARTITION=1,2,3`.
fn partition_move(s: &str) -> Result<PartitionMove, String> {
    let (tp, replicas) =
        s.rsplit_once('=').ok_or_else(|| format!("expected TOPIC:PARTITION=BROKER,..., got {s:?}"))?;
    let (topic, partition) = topic_partition(tp)?;
    let replicas = replicas
        .split(',')
        .map(|id| id.trim().parse::<i32>().map_err(|_| format!("{s:?}: {id:?} is not a broker id")))
        .collect::<Result<Vec<i32>, String>>()?;
    Ok(PartitionMove { topic, partition, replicas })
}

/// `strata cluster ...`.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ClusterAction {
    /// Cluster id, controller and brokers.
    Info,
}

/// Parses `key=value` (the value may itself hold `=`).
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        let mut argv = vec!["strata"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn broker(args: &[&str]) -> BrokerArgs {
        let cli = parse(args);
        assert!(cli.command.is_none(), "{args:?} runs the broker");
        cli.broker
    }

    #[test]
    fn the_broker_command_lines_keep_working() {
        assert_eq!(broker(&[]), BrokerArgs::default());
        assert_eq!(broker(&["some.properties"]).config, Some(PathBuf::from("some.properties")));
        let o = broker(&["--override", "node.id=3"]);
        assert_eq!((o.config, o.overrides), (None, vec!["node.id=3".to_string()]));
        let both = broker(&["config/server.properties", "--override", "a=1", "--override", "b=2"]);
        assert_eq!(both.config, Some(PathBuf::from("config/server.properties")));
        assert_eq!(both.overrides, vec!["a=1", "b=2"]);
        let alias = parse(&["broker", "x.properties", "--override", "a=1"]);
        let Some(Command::Broker(args)) = alias.command else { panic!("broker alias") };
        assert_eq!(
            (args.config, args.overrides),
            (Some(PathBuf::from("x.properties")), vec!["a=1".to_string()])
        );
    }

    #[test]
    fn partition_moves_and_names_parse() {
        let cli = parse(&["partition", "reassign", "a:b:0=2,3", "t:1=1", "--wait"]);
        let Some(Command::Partition { action, .. }) = cli.command else { panic!("partition") };
        let PartitionAction::Reassign { moves, wait, wait_timeout_ms, throttle } = action else {
            panic!("reassign")
        };
        assert!(wait);
        assert_eq!(throttle, None);
        assert_eq!(wait_timeout_ms, 300_000);
        assert_eq!(
            moves,
            vec![
                PartitionMove { topic: "a:b".into(), partition: 0, replicas: vec![2, 3] },
                PartitionMove { topic: "t".into(), partition: 1, replicas: vec![1] },
            ]
        );
        for bad in [
            &["partition", "reassign", "t=1"][..],
            &["partition", "reassign", "t:0=x"],
            &["partition", "reassign", "t:-1=1"],
            &["partition", "cancel-reassignment", ":0"],
            &["partition", "cancel-reassignment"],
            &["partition", "reassign", "t:0=1", "--wait-timeout-ms", "5"],
            &["partition", "reassign", "t:0=1", "--throttle", "5"],
        ] {
            let mut argv = vec!["strata"];
            argv.extend_from_slice(bad);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?} is refused");
        }
        let cli = parse(&["partition", "elect-leaders", "t", "u:2", "--election-type", "unclean"]);
        let Some(Command::Partition { action, .. }) = cli.command else { panic!("partition") };
        assert_eq!(
            action,
            PartitionAction::ElectLeaders {
                partitions: vec!["t".into(), "u:2".into()],
                election_type: Election::Unclean
            }
        );
    }

    #[test]
    fn client_flags_go_before_or_after_the_action() {
        let cli = parse(&[
            "topic",
            "-b",
            "h:1",
            "create",
            "t",
            "-p",
            "3",
            "--config",
            "retention.ms=10",
            "-X",
            "client.id=me",
        ]);
        let Some(Command::Topic { client, action }) = cli.command else { panic!("topic") };
        assert_eq!(client.connection.bootstrap_server, "h:1");
        assert_eq!(client.connection.settings, vec![("client.id".to_string(), "me".to_string())]);
        assert_eq!(
            action,
            TopicAction::Create {
                name: "t".into(),
                partitions: Some(3),
                replication_factor: None,
                configs: vec![("retention.ms".into(), "10".into())],
                validate_only: false,
            }
        );
        let cli = parse(&["cluster", "info", "--format", "json", "--bootstrap-server", "h:2"]);
        let Some(Command::Cluster { client, .. }) = cli.command else { panic!("cluster") };
        assert_eq!((client.format, client.connection.bootstrap_server.as_str()), (Format::Json, "h:2"));
        let cli = parse(&["group", "list"]);
        let Some(Command::Group { client, .. }) = cli.command else { panic!("group") };
        assert_eq!(
            (client.format, client.connection.bootstrap_server.as_str()),
            (Format::Text, "127.0.0.1:9092")
        );
    }

    #[test]
    fn alter_config_and_reset_offsets_take_their_flags() {
        let cli = parse(&["topic", "alter-config", "t", "--set", "a=b=c", "--delete", "x", "--set", "y=1"]);
        let Some(Command::Topic { action: TopicAction::AlterConfig { changes, .. }, .. }) = cli.command
        else {
            panic!("alter-config")
        };
        assert_eq!(
            changes.set,
            vec![("a".to_string(), "b=c".to_string()), ("y".to_string(), "1".to_string())]
        );
        assert_eq!(changes.delete, vec!["x"]);
        let cli = parse(&["group", "reset-offsets", "g", "--topic", "t", "--to-offset", "5", "--execute"]);
        let Some(Command::Group {
            action: GroupAction::ResetOffsets { target, execute, topics, .. }, ..
        }) = cli.command
        else {
            panic!("reset-offsets")
        };
        assert_eq!((target.to_offset, execute, topics), (Some(5), true, vec!["t".to_string()]));
    }

    #[test]
    fn config_names_exactly_one_entity() {
        let cli = parse(&["config", "alter", "--broker", "2", "--set", "a=1", "--delete", "b"]);
        let Some(Command::Config { action: ConfigAction::Alter { entity, changes }, .. }) = cli.command
        else {
            panic!("config alter")
        };
        assert_eq!(entity, ConfigEntity { broker: Some(2), ..ConfigEntity::default() });
        assert_eq!((changes.set.len(), changes.delete.len()), (1, 1));
        let cli = parse(&["config", "describe", "--broker-defaults", "--all"]);
        let Some(Command::Config { action: ConfigAction::Describe { entity, all }, .. }) = cli.command else {
            panic!("config describe")
        };
        assert!(entity.broker_defaults && all);
        for bad in [
            &["config", "describe"][..],
            &["config", "describe", "--topic", "t", "--broker", "1"],
            &["config", "alter", "--broker-defaults", "--topic", "t", "--set", "a=1"],
            &["config", "describe", "--broker", "x"],
        ] {
            let mut argv = vec!["strata"];
            argv.extend_from_slice(bad);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn produce_takes_kcat_and_kafka_flags() {
        let cli = parse(&[
            "produce",
            "t",
            "-K",
            ":",
            "--acks",
            "1",
            "--compression",
            "zstd",
            "-p",
            "2",
            "-X",
            "linger.ms=0",
        ]);
        let Some(Command::Produce { client, args }) = cli.command else { panic!("produce") };
        assert_eq!(client.connection.settings, vec![("linger.ms".to_string(), "0".to_string())]);
        assert_eq!(
            args,
            ProduceArgs {
                topic: "t".into(),
                key_separator: Some(":".into()),
                acks: Some("1".into()),
                compression: Some("zstd".into()),
                partition: Some(2),
                transactional_id: None,
            }
        );
        let cli = parse(&["produce", "t", "--transactional-id", "tx", "--key-separator", "::"]);
        let Some(Command::Produce { args, .. }) = cli.command else { panic!("produce") };
        assert_eq!((args.transactional_id.as_deref(), args.acks), (Some("tx"), None));
    }

    #[test]
    fn consume_takes_offsets_counts_and_formats() {
        let consume = |argv: &[&str]| {
            let Some(Command::Consume { connection, args }) = parse(argv).command else { panic!("consume") };
            (connection, args)
        };
        let (connection, args) = consume(&["consume", "t", "-b", "h:1"]);
        assert_eq!(connection.bootstrap_server, "h:1");
        assert_eq!((args.group, args.offset, args.count, args.exit_at_end), (None, None, None, false));
        assert_eq!(args.format, RecordFormat::parse("%s\\n").unwrap());
        let (_, args) = consume(&["consume", "t", "--offset", "-5", "-n", "3", "-e", "--format", "json"]);
        assert_eq!(
            (args.offset, args.count, args.exit_at_end),
            (Some(StartOffset::BeforeEnd(5)), Some(3), true)
        );
        assert_eq!(args.format, RecordFormat::Json);
        for (given, expected) in
            [("beginning", StartOffset::Beginning), ("end", StartOffset::End), ("17", StartOffset::At(17))]
        {
            assert_eq!(consume(&["consume", "t", "-o", given, "-p", "1"]).1.offset, Some(expected));
        }
        let (_, args) = consume(&[
            "consume",
            "t",
            "--group",
            "g",
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "-f",
            "%k=%s\\n",
        ]);
        assert_eq!(args.group.as_deref(), Some("g"));
        assert!(args.from_beginning);
        assert_eq!(args.isolation_level.as_deref(), Some("read_committed"));
        assert!(matches!(args.format, RecordFormat::Template(_)));
    }

    #[test]
    fn bad_command_lines_are_refused() {
        let refused = |args: &[&str]| {
            let mut argv = vec!["strata"];
            argv.extend_from_slice(args);
            assert!(Cli::try_parse_from(argv).is_err(), "{args:?} should be refused");
        };
        refused(&["group", "reset-offsets", "g", "--topic", "t"]);
        refused(&["group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"]);
        refused(&["topic", "create", "t", "--config", "novalue"]);
        refused(&["topic", "create", "t", "-X", "=v"]);
        refused(&["topic", "describe"]);
        refused(&["some.properties", "topic"]);
        refused(&["produce"]);
        refused(&["produce", "t", "--acks", "2"]);
        refused(&["produce", "t", "--compression", "brotli"]);
        refused(&["produce", "t", "-K", ""]);
        refused(&["consume", "t", "--group", "g", "--offset", "5"]);
        refused(&["consume", "t", "--group", "g", "--partition", "0"]);
        refused(&["consume", "t", "--from-beginning", "--offset", "end"]);
        refused(&["consume", "t", "--offset", "soon"]);
        refused(&["consume", "t", "--isolation-level", "committed"]);
        refused(&["consume", "t", "--format", "%x"]);
        refused(&["consume", "t", "-n", "many"]);
    }
}
