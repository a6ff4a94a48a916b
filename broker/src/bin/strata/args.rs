//! The one flag parser of the `strata` binary. With no subcommand it is the broker's
//! command line, unchanged (`strata [server.properties] [--override k=v]...`, as
//! `kafka-server-start.sh`); `strata broker` is the same. The client tools (`topic`,
//! `group`, `cluster`) share [`ClientArgs`]: the bootstrap servers, `-X key=value`
//! client settings and the output format. Producer and consumer tools slot in as further
//! [`Command`] variants flattening the same [`ClientArgs`].

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Strata: a Kafka-compatible streaming broker, and tools to administer any Kafka cluster",
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
    /// Describe the cluster.
    Cluster {
        /// Connection and output.
        #[command(flatten)]
        client: ClientArgs,
        /// What to do.
        #[command(subcommand)]
        action: ClusterAction,
    },
}

/// What every client tool takes; `global` so it may come before or after the action.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ClientArgs {
    /// Brokers to bootstrap from, host:port, comma-separated.
    #[arg(long, short = 'b', global = true, default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// A client setting by its Kafka key (`request.timeout.ms=5000`); repeatable.
    #[arg(short = 'X', global = true, value_name = "KEY=VALUE", value_parser = key_value)]
    pub settings: Vec<(String, String)>,
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
        /// Set key=value; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        set: Vec<(String, String)>,
        /// Remove a key (back to the default); repeatable.
        #[arg(long, value_name = "KEY")]
        delete: Vec<String>,
        /// Add a value to a list config, key=value; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        append: Vec<(String, String)>,
        /// Remove a value from a list config, key=value; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        subtract: Vec<(String, String)>,
    },
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
        assert_eq!(client.bootstrap_server, "h:1");
        assert_eq!(client.settings, vec![("client.id".to_string(), "me".to_string())]);
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
        assert_eq!((client.format, client.bootstrap_server.as_str()), (Format::Json, "h:2"));
        let cli = parse(&["group", "list"]);
        let Some(Command::Group { client, .. }) = cli.command else { panic!("group") };
        assert_eq!((client.format, client.bootstrap_server.as_str()), (Format::Text, "127.0.0.1:9092"));
    }

    #[test]
    fn alter_config_and_reset_offsets_take_their_flags() {
        let cli = parse(&["topic", "alter-config", "t", "--set", "a=b=c", "--delete", "x", "--set", "y=1"]);
        let Some(Command::Topic { action: TopicAction::AlterConfig { set, delete, .. }, .. }) = cli.command
        else {
            panic!("alter-config")
        };
        assert_eq!(set, vec![("a".to_string(), "b=c".to_string()), ("y".to_string(), "1".to_string())]);
        assert_eq!(delete, vec!["x"]);
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
    }
}
