//! `strata [server.properties] [--override key=value]...` runs one broker until SIGTERM
//! or SIGINT, then shuts down cleanly (`strata broker ...` is the same).
//! `strata topic|group|partition|cluster|produce|consume ...` are client tools, in the spirit of
//! `kcat` and `rpk`, that work against any Kafka-compatible cluster (see [`args`]).

mod args;
mod cluster;
mod config;
mod consume;
mod format;
mod group;
mod output;
mod partition;
mod produce;
mod signals;
mod topic;

use args::{BrokerArgs, Cli, ClientArgs, Command, ConnectionArgs};
use clap::Parser;
use strata_broker::config::LogSettings;
use strata_broker::BrokerConfig;
use strata_client::{Client, ClientConfig};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => run_broker(cli.broker),
        Some(Command::Broker(args)) => run_broker(args),
        Some(Command::Topic { client, action }) => run_tool(&client, |c| topic::run(c, &client, action)),
        Some(Command::Group { client, action }) => run_tool(&client, |c| group::run(c, &client, action)),
        Some(Command::Partition { client, action }) => {
            run_tool(&client, |c| partition::run(c, &client, action))
        }
        Some(Command::Config { client, action }) => run_tool(&client, |c| config::run(c, &client, action)),
        Some(Command::Cluster { client, action }) => run_tool(&client, |c| cluster::run(c, &client, action)),
        Some(Command::Produce { client, args }) => {
            run_with(produce::config(&client, &args), |config| produce::run(config, &client, args))
        }
        Some(Command::Consume { connection, args }) => {
            run_with(consume::config(&connection, &args), |config| consume::run(config, args))
        }
    }
}

fn run_broker(args: BrokerArgs) -> anyhow::Result<()> {
    // Logging is set up from the raw settings first, so the configuration's own
    // warnings (unknown keys) are logged in the chosen format.
    let config = BrokerConfig::load_raw(args.config.as_deref(), &args.overrides)
        .and_then(|raw| Ok((LogSettings::from_raw(&raw)?, raw)))
        .and_then(|(log, raw)| {
            let filter = log.level.as_deref().unwrap_or("info,openraft=warn");
            init_logging(filter, log.json);
            BrokerConfig::from_map(raw)
        });
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let server = strata_broker::start(config).await?;
        wait_for_signal().await?;
        tracing::info!("shutting down");
        server.shutdown().await;
        tracing::info!("shut down cleanly");
        Ok(())
    })
}

/// Connects a client from the tool's flags and runs the tool; an error is printed and
/// exits with status 1 (a bad setting with 2, as a bad command line).
fn run_tool<F, Fut>(args: &ClientArgs, tool: F) -> anyhow::Result<()>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    // These tools print a table or a document at the end: a reader that went away
    // (`| head`) ends them quietly as it ends `ls`, not with a panic of `println!`.
    // (`consume`, which prints as it goes and commits when it stops, handles the
    // closed pipe itself.)
    // SAFETY: setting a signal's disposition to the default, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    run_with(client_config(&args.connection), |config| async move {
        let client = Client::connect(config).await?;
        let result = tool(client.clone()).await;
        client.close();
        result
    })
}

/// Runs a tool from its settings: bad settings are printed and exit with status 2 (as
/// a bad command line), a failure of the tool with status 1.
fn run_with<C, F, Fut>(config: Result<C, strata_client::Error>, tool: F) -> anyhow::Result<()>
where
    F: FnOnce(C) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    init_tracing("warn");
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    if let Err(e) = runtime.block_on(tool(config)) {
        eprintln!("strata: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}

fn client_config(args: &ConnectionArgs) -> Result<ClientConfig, strata_client::Error> {
    let mut config = ClientConfig::new(&args.bootstrap_server);
    config.client_id = "strata-cli".to_string();
    for (key, value) in &args.settings {
        if !config.set(key, value)? {
            return Err(strata_client::Error::config(format!("unknown client setting {key}")));
        }
    }
    Ok(config)
}

fn init_tracing(default_filter: &str) {
    init_logging(default_filter, false);
}

/// Logs to stderr: the level from `RUST_LOG`, else `default_filter`; with `json`, one
/// JSON object per line (`log.format=json`, for log shippers).
fn init_logging(default_filter: &str, json: bool) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().flatten_event(true).with_current_span(true).with_span_list(false).init();
        return;
    }
    builder
        // Colour codes only for a terminal: log files and pipes get plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
}

async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
