//! What an agent is asked to do: the hosts and ranks it reports, and how it dumps.

use super::launcher::Launcher;
use mqd_library_host::helper::Helper;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The version both ends must have.
pub const MQD_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What an agent is asked to do, given on its standard input as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    /// [`wire::PROTOCOL`](super::wire::PROTOCOL) of the front end.
    pub protocol: u32,
    /// [`MQD_VERSION`] of the front end.
    pub mqd: String,
    /// The hosts to report: the agent's own first, then those it relays for.
    pub hosts: Vec<HostTask>,
    /// How to dump.
    pub options: AgentOptions,
    /// How to reach the hosts it relays for.
    pub launcher: Launcher,
}

/// One host's ranks, from the process table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTask {
    /// Its name in the table.
    pub name: String,
    /// Its ranks.
    pub ranks: Vec<RankTask>,
    /// A host that stands for ranks of a simulated job (no process is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<SimulatedHost>,
}

/// One rank of a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankTask {
    /// COMM_WORLD rank.
    pub rank: i32,
    /// Its pid on its host.
    pub pid: i32,
    /// Its executable, as the table names it.
    pub executable: Option<String>,
}

/// How every agent dumps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentOptions {
    /// Also unwind every thread's stack.
    pub stacks: bool,
    /// Merge Python frames into the stacks of Python ranks.
    #[serde(default = "yes")]
    pub python_frames: bool,
    /// The MQD library to use (`--dll`), a path on the agents' hosts.
    pub dll: Option<PathBuf>,
    /// The library the job names (MPI2DD `dll_name_64`).
    pub dll_name: Option<String>,
    /// The job's size.
    pub job_size: Option<u32>,
    /// Seconds an agent (with everything it relays) may take.
    pub timeout: f64,
    /// Most agents one process starts and reads.
    pub fanout: usize,
    /// The `mqd` to run on the hosts.
    pub agent: Helper,
    /// Neither read nor write the agents' caches of type answers (`--no-cache`).
    #[serde(default)]
    pub no_cache: bool,
    /// Read with the library the job names even for MPICH (`--dll job`).
    #[serde(default)]
    pub job_library: bool,
    /// Read OpenMP runtimes with their OMPD libraries (`false`: `--no-openmp`), this
    /// one (`--ompd PATH`) where given.
    #[serde(default = "yes")]
    pub openmp: bool,
    /// The OMPD library to use (`--ompd`), a path on the agents' hosts.
    #[serde(default)]
    pub ompd: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

/// A synthetic job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Simulation {
    /// Its ranks.
    pub ranks: u32,
    /// The hosts they are spread over.
    pub hosts: u32,
    /// Its distinct states.
    pub states: u32,
    /// What it hangs in.
    #[serde(default)]
    pub hang: Hang,
}

/// What a [`Simulation`] hangs in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hang {
    /// A collective on `MPI_COMM_WORLD` that three ranks, blocked in receives, are not
    /// in: possibly deadlocked.
    #[default]
    Collective,
    /// A ring of synchronous sends, each rank's to its right neighbour, whose messages
    /// wait unexpected at their destinations: a proven deadlock.
    Ring,
}

/// One simulated host: a share of a [`Simulation`]'s ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulatedHost {
    /// The job.
    pub job: Simulation,
    /// Its first rank.
    pub first: u32,
    /// How many ranks it has.
    pub count: u32,
}
