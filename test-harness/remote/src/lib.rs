//! # mqd-remote: jobs across hosts, one agent per host, started through what the site
//! already runs.
//!
//! A process table lists ranks on many hosts, and a pid means a process only on its own
//! host. The front end groups the table by host, dumps this host's ranks itself, and for
//! every other host starts `mqd agent` there through a [`Launcher`] (the job's own hydra
//! `mpiexec`, `ssh` or a remote shell the user names, Slurm's `srun --overlap`). An agent
//! attaches its host's ranks, dumps them, lets them go, and writes their compact model to
//! its standard output ([`wire`]); it analyses nothing. Past a fan-out, agents relay: the
//! front end starts at most `fanout` agents, each of which starts agents for a share of
//! the remaining hosts and forwards their streams in its own, so no process reads more
//! than `fanout` streams.
//!
//! The ranks of every host are one snapshot: each agent says when its ranks are stopped
//! and holds them until the front end, once every host (and its own) said so, closes the
//! agents' standard input; relays pass both on. A host that does not stop in time makes
//! the dump one of separate moments, which the verdict takes into account.
//!
//! `mqd run` and proof by persistence count blocked calls on other hosts through agents
//! that stay ([`HostCounters`]): a counter lives in the process that opened it.
//!
//! Every host is accounted for: a host whose agent cannot be started, refuses (another
//! version), dies, or does not finish in time has each of its ranks reported as not
//! dumped, with the reason.

mod agent;
mod children;
mod classes;
mod counters;
mod front;
mod launcher;
pub mod merge;
mod scale;
pub mod simulate;
mod task;
pub mod wire;

pub use agent::serve;
pub use classes::classes_of;
pub use counters::{HostCounters, serve_counters};
pub use front::{Across, HostsDump, RemoteOptions, dump_across_hosts, dump_across_hosts_kept};
pub use launcher::Launcher;
pub use scale::{OwnCost, simulate_job};
pub use task::{AgentOptions, HostTask, MQD_VERSION, RankTask, Task};
