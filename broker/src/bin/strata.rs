//! `strata [server.properties] [--override key=value]...`: runs one broker until
//! SIGTERM or SIGINT, then shuts down cleanly.

use clap::Parser;
use std::path::PathBuf;
use strata_broker::BrokerConfig;

/// Command-line arguments, shaped like `kafka-server-start.sh`.
#[derive(Parser, Debug)]
#[command(name = "strata", version, about = "Strata: a Kafka-compatible streaming broker")]
struct Args {
    /// A server.properties file with Kafka's configuration keys.
    config: Option<PathBuf>,
    /// A configuration entry that overrides the file, as key=value; repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: log files and pipes get plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let args = Args::parse();
    let config = match BrokerConfig::load(args.config.as_deref(), &args.overrides) {
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
