//! `totoc`: compiles Datadog's Toto forecasting model into static, verified ONNX / ONNX Runtime artifacts.
//!
//! `main` only parses flags and dispatches; each subcommand lives in `cmd/` and calls one library entry point.
mod cli;
mod cmd;
#[cfg(test)]
mod deploy_check;
mod kronos;
mod plot;
mod profile_lines;
mod progress;
mod registry;
mod serve;
mod speed_bound;
mod toto1;
mod toto2;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cmd::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
