//! One module per subcommand.
mod export;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Export(a) => export::run(a),
    }
}
