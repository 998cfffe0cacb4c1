//! One module per subcommand.
mod bench;
mod build_engine;
mod doctor;
mod export;
mod forecast;
mod verify;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Export(a) => export::run(a),
        Command::BuildEngine(a) => build_engine::run(a),
        Command::Forecast(a) => forecast::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Doctor(a) => doctor::run(a),
    }
}
