//! How `mqd` reaches the ranks of a job on other hosts: one agent per host, started
//! through the job's own launcher, or ssh, or what the user names.

use clap::{Args, ValueEnum};
use mqd_library_host::failure::{Failure, FailureKind};
use mqd_library_host::helper::Helper;
use mqd_remote::{Launcher, RemoteOptions};
use std::path::PathBuf;

/// Command-line options for ranks on other hosts.
#[derive(Args, Clone, Debug)]
pub struct Reach {
    /// How to start an agent (`mqd agent`) on each other host of the job: auto (srun
    /// for a Slurm step, the job's own hydra mpiexec when it names its launcher, else
    /// ssh), ssh, mpiexec, srun.
    #[arg(long, value_enum, default_value_t = Via::Auto)]
    pub launcher: Via,
    /// The remote shell to start agents with, as hydra's -launcher-exec takes it (run
    /// as `CMD HOST COMMAND`), e.g. "ssh -p 2222" or "rsh".
    #[arg(long, value_name = "CMD", conflicts_with = "launcher")]
    pub rsh: Option<String>,
    /// The mqd to run on the other hosts (default: this one's path, as on a shared
    /// file system).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Most agents any one process starts and reads; past it, agents relay for the
    /// hosts after them.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub fanout: u32,
    /// Seconds the agents may take; a host whose agent has not finished by then is
    /// reported, not waited for.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = crate::starter::seconds)]
    pub agent_timeout: f64,
    /// Dump only this host's ranks; those of other hosts are reported, not dumped.
    #[arg(long)]
    pub local_only: bool,
}

/// `--launcher`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Via {
    /// The job's own launcher when it has one, else ssh.
    Auto,
    /// ssh (batch mode).
    Ssh,
    /// The hydra mpiexec that started the job.
    Mpiexec,
    /// Slurm's srun into the job's allocation.
    Srun,
}

impl Reach {
    /// This host only (the demo job, say).
    pub fn local() -> Reach {
        Reach {
            launcher: Via::Auto,
            rsh: None,
            agent: None,
            fanout: 32,
            agent_timeout: 60.0,
            local_only: true,
        }
    }

    /// How to reach the hosts of a job started by `starter` (its pid), or `None` with
    /// `--local-only`. `slurm_job` is the job id when it is known apart from the starter.
    pub fn options(
        &self,
        starter: Option<i32>,
        slurm_job: Option<&str>,
    ) -> Result<Option<RemoteOptions>, Failure> {
        if self.local_only {
            return Ok(None);
        }
        let launcher = match (&self.rsh, self.launcher) {
            (Some(rsh), _) => {
                let words: Vec<String> = rsh.split_whitespace().map(str::to_owned).collect();
                if words.is_empty() {
                    return Err(bad("--rsh names no command"));
                }
                Launcher::Rsh(words)
            }
            (None, Via::Ssh) => Launcher::ssh(),
            (None, via) => {
                // An srun that does not carry its job id in its environment (started
                // outside salloc) is found through the session that allocated the job.
                let job = slurm_job
                    .map(str::to_owned)
                    .or_else(|| starter.and_then(mqd_job::acquire::slurm::job_of_srun));
                let found = match (starter, job) {
                    (_, Some(job)) => Launcher::Srun {
                        srun: "srun".into(),
                        job,
                    },
                    (Some(pid), None) => of_process(pid),
                    (None, None) => Launcher::ssh(),
                };
                match (via, &found) {
                    (Via::Mpiexec, Launcher::Hydra { .. })
                    | (Via::Srun, Launcher::Srun { .. })
                    | (Via::Auto, _) => found,
                    (Via::Mpiexec, _) => {
                        return Err(bad(
                            "--launcher mpiexec: the job's starter is not a hydra mpiexec that names its launcher (-launcher/-bootstrap); use --rsh or --launcher ssh",
                        ));
                    }
                    _ => {
                        return Err(bad(
                            "--launcher srun: the job's starter is not srun with a SLURM_JOB_ID; use --slurm JOBID",
                        ));
                    }
                }
            }
        };
        let agent = match &self.agent {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(|e| {
                bad(&format!(
                    "cannot tell where this mqd is ({e}): pass --agent PATH"
                ))
            })?,
        };
        Ok(Some(RemoteOptions {
            launcher,
            // `mqd agent` (main.rs's `Commands::Agent`).
            agent: Helper::new(agent, &["agent"]),
            fanout: self.fanout as usize,
            timeout: self.agent_timeout,
        }))
    }
}

fn bad(message: &str) -> Failure {
    Failure::new(FailureKind::Other, message)
}

/// How the process `pid` (a job's starter) reaches its hosts.
fn of_process(pid: i32) -> Launcher {
    let read = |what: &str| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
    let words = |bytes: Vec<u8>| -> Vec<String> {
        bytes
            .split(|&b| b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    };
    let executable = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Launcher::of_starter(
        &executable,
        &words(read("cmdline")),
        &words(read("environ")),
    )
}
