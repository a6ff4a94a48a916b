//! `strata-perf`: load generator for Kafka-compatible brokers. See `strata-perf --help`
//! and BENCHMARKS.md.
//!
//! Exit status: 0 when every record succeeded, 1 when some failed or were not read
//! back, 2 when the run could not be carried out.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use strata_benches::cli::{Cli, LoopbackCmd, Mode};
use strata_benches::{loopback, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.mode {
        Mode::Loopback(cmd) => run_loopback(&cmd),
        broker_mode => run_against_broker(broker_mode),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata-perf: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Prints a line on stdout; a closed stdout (`| head`) is not worth a panic.
fn say(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn run_loopback(cmd: &LoopbackCmd) -> anyhow::Result<ExitCode> {
    let duration = Duration::from_secs_f64(cmd.duration);
    if let Some(mbps) = cmd.latency_at_mbps {
        let r = loopback::measure_floor(duration, mbps, cmd.message_size)?;
        if cmd.json {
            say(r.to_json());
        } else {
            say(format_args!(
                "loopback latency floor at {mbps} MB/s in {} B messages: {}",
                r.message_size,
                r.latency.to_text()
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let r = loopback::measure(duration, cmd.connections.max(1), cmd.block_size.max(1))?;
    if cmd.json {
        say(r.to_json());
    } else {
        say(format_args!(
            "loopback: {:.1} MB/s over {} connection(s) in {:.2} s",
            r.mb_per_sec(),
            r.connections,
            r.elapsed.as_secs_f64()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_against_broker(mode: Mode) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (outcome, json) = runtime.block_on(async move {
        match mode {
            Mode::Produce(cmd) => {
                let json = cmd.common.json;
                run::produce(cmd).await.map(|o| (o, json))
            }
            Mode::Consume(cmd) => {
                let json = cmd.common.json;
                run::consume(cmd).await.map(|o| (o, json))
            }
            Mode::EndToEnd(cmd) => {
                let json = cmd.common.json;
                run::end_to_end(cmd).await.map(|o| (o, json))
            }
            // main() sends loopback elsewhere; an error rather than a panic all the same.
            Mode::Loopback(_) => Err(anyhow::anyhow!("loopback does not talk to a broker")),
        }
    })?;
    if json {
        eprintln!("{}", outcome.text);
        say(&outcome.json);
    } else if !outcome.text.is_empty() {
        say(&outcome.text);
    }
    Ok(if outcome.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
