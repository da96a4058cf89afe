//! Runs a fuzz target in process: `mqd-fuzz TARGET [INPUT...]` replays inputs (files or
//! directories); `mqd-fuzz TARGET --seconds N [--seed S]` mutates the checked-in seeds for
//! N seconds. Exit status 1 with the failing input saved when an invariant breaks.

use mqd_fuzz::Target;
use mqd_fuzz::runner::{Budget, fuzz, read_dir_files, seeds};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mqd-fuzz dll|elf|core|tables|stack [--seconds N] [--seed S] [INPUT...]";
    let Some(target) = args.first().and_then(|n| Target::from_name(n)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let mut seconds = None;
    let mut random_seed = 1u64;
    let mut inputs = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        let mut number = |what: &str| -> u64 {
            rest.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("mqd-fuzz: {what} takes a number\n{usage}");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--seconds" => seconds = Some(number("--seconds")),
            "--seed" => random_seed = number("--seed"),
            path => {
                let path = std::path::Path::new(path);
                if path.is_dir() {
                    inputs.extend(read_dir_files(path));
                } else {
                    match std::fs::read(path) {
                        Ok(bytes) => inputs.push(bytes),
                        Err(e) => {
                            eprintln!("mqd-fuzz: {}: {e}", path.display());
                            std::process::exit(2);
                        }
                    }
                }
            }
        }
    }
    let replay = seconds.is_none();
    let pool = if replay { inputs } else { seeds(target) };
    let budget = Budget {
        executions: if replay { 0 } else { u64::MAX },
        time: Duration::from_secs(seconds.unwrap_or(0)),
        per_input: Duration::from_secs(10),
    };
    let report = fuzz(target, &pool, budget, random_seed);
    match report.failure {
        None => println!(
            "{}: {} executions, no failure",
            target.name(),
            report.executions
        ),
        Some(failure) => {
            let path = format!("mqd-fuzz-{}-failure", target.name());
            let _ = std::fs::write(&path, &failure.input);
            eprintln!(
                "{}: {} (after {} executions; input saved to {path})",
                target.name(),
                failure.message,
                report.executions
            );
            std::process::exit(1);
        }
    }
}
