//! One module per subcommand.
pub(crate) mod backtest;
mod bench;
pub(crate) mod bench_body;
mod bench_cost;
mod bench_serve;
pub(crate) mod bench_support;
mod build_engine;
mod bundle;
mod doctor;
mod export;
mod forecast;
mod plot;
mod serve;
mod verify;

use std::process::ExitCode;

use crate::cli::{BenchCommand, Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Export(a) => export::run(a),
        Command::BuildEngine(a) => build_engine::run(a),
        Command::Forecast(a) => forecast::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Plot(a) => plot::run(a),
        Command::Bench(a) => match a.command {
            Some(BenchCommand::Serve(s)) => bench_serve::run(s),
            Some(BenchCommand::Cost(c)) => bench_cost::run(c),
            None => bench::run(a),
        },
        Command::Serve(a) => serve::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Bundle(a) => bundle::run(a),
        Command::Backtest(a) => backtest::run(a),
    }
}
