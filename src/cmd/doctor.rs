//! `totoc doctor`: what this machine can run (see `engines::doctor`).
use std::process::ExitCode;

use engines::doctor;

use crate::cli::DoctorArgs;

pub fn run(a: DoctorArgs) -> anyhow::Result<ExitCode> {
    let report = doctor::examine(a.ort.ort_lib.as_deref());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    // The report is the answer whatever it finds; only a missing ONNX Runtime makes nothing work.
    Ok(if report.facts.ort.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
