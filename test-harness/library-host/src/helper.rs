//! How the running program starts one of its own helpers (a library host here, an agent
//! on another host): its executable and the arguments that select the helper. The
//! binary says both; the libraries never assume its command line.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::Command;

/// A helper command: `program ARGS...`, to which the caller appends its own arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Helper {
    /// The executable.
    pub program: PathBuf,
    /// The arguments that select the helper (a subcommand).
    pub args: Vec<String>,
}

impl Helper {
    /// `program` run with `args`.
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Helper {
        Helper {
            program: program.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// A command that runs it.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command
    }

    /// Its words: the program, then its arguments.
    pub fn words(&self) -> Vec<String> {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }
}
