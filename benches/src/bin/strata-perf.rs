//! `strata-perf`: load generator for Kafka-compatible brokers. See `strata-perf --help`
//! and BENCHMARKS.md.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use strata_benches::cli::{Cli, Mode};
use strata_benches::{loopback, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata-perf: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Mode::Loopback(cmd) = &cli.mode {
        if let Some(mbps) = cmd.latency_at_mbps {
            let r = loopback::measure_floor(Duration::from_secs_f64(cmd.duration), mbps, cmd.message_size)?;
            if cmd.json {
                println!("{}", r.to_json());
            } else {
                println!(
                    "loopback latency floor at {mbps} MB/s in {} B messages: {}",
                    r.message_size,
                    r.latency.to_text()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        let result = loopback::measure(
            Duration::from_secs_f64(cmd.duration),
            cmd.connections.max(1),
            cmd.block_size.max(1),
        )?;
        if cmd.json {
            println!("{}", result.to_json());
        } else {
            println!(
                "loopback: {:.1} MB/s over {} connection(s) in {:.2} s",
                result.mb_per_sec(),
                result.connections,
                result.elapsed.as_secs_f64()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (outcome, json) = runtime.block_on(async move {
        match cli.mode {
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
            Mode::Loopback(_) => unreachable!("handled above"),
        }
    })?;
    // A closed stdout (`| head`) is not an error worth a panic.
    let mut stdout = std::io::stdout();
    if json {
        eprintln!("{}", outcome.text);
        let _ = writeln!(stdout, "{}", outcome.json);
    } else {
        let _ = writeln!(stdout, "{}", outcome.text);
    }
    Ok(if outcome.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
