//! How a command is run on another host: through the job's own launcher, never a network
//! of mqd's own.

use mqd_library_host::helper::Helper;
use serde::{Deserialize, Serialize};
use std::process::Command;

/// A way to run `mqd agent` on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    /// A remote shell: `CMD... HOST 'MQD agent'` (`ssh`, or what `--rsh` names, as
    /// hydra's `-launcher-exec` and padb take it). The remote command is one shell word
    /// list, as ssh passes it to the remote shell.
    Rsh(Vec<String>),
    /// The job's hydra `mpiexec` with the options that reach its hosts (`-launcher`,
    /// `-launcher-exec`, ...): `MPIEXEC OPTIONS -hosts HOST -n 1 MQD agent`.
    Hydra {
        /// The `mpiexec` that started the job.
        mpiexec: String,
        /// Its options naming how it reaches hosts.
        options: Vec<String>,
    },
    /// Slurm: `srun --overlap --jobid JOB -N1 -n1 -w HOST MQD agent`.
    Srun {
        /// The `srun` to run.
        srun: String,
        /// The job id.
        job: String,
    },
}

impl Launcher {
    /// ssh, never asking for a password (an agent has no terminal).
    pub fn ssh() -> Launcher {
        Launcher::Rsh(vec![
            "ssh".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "ConnectTimeout=10".into(),
        ])
    }

    /// The command that runs the `agent` helper on `host`.
    pub fn command(&self, host: &str, agent: &Helper) -> Command {
        let helper = agent.words();
        match self {
            Launcher::Rsh(words) => {
                let mut command = Command::new(&words[0]);
                command.args(&words[1..]).arg(host).arg(
                    helper
                        .iter()
                        .map(|w| shell_quote(w))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                command
            }
            Launcher::Hydra { mpiexec, options } => {
                let mut command = Command::new(mpiexec);
                command
                    .args(options)
                    .args(["-hosts", host, "-n", "1"])
                    .args(&helper);
                command
            }
            Launcher::Srun { srun, job } => {
                let mut command = Command::new(srun);
                command
                    .args(["--overlap", "--jobid", job, "-N1", "-n1", "-w", host])
                    .args(["--quiet", "--kill-on-bad-exit=1"])
                    .args(&helper);
                command
            }
        }
    }

    /// What it is, for messages: "ssh", "mpiexec", "srun".
    pub fn name(&self) -> String {
        let program = match self {
            Launcher::Rsh(words) => &words[0],
            Launcher::Hydra { mpiexec, .. } => mpiexec,
            Launcher::Srun { srun, .. } => srun,
        };
        program.rsplit('/').next().unwrap_or(program).to_owned()
    }

    /// How the job's starter reaches its hosts, from its command line and executable:
    /// srun is Slurm (its job id from its environment), a hydra `mpiexec` brings its own
    /// launcher options; anything else is reached by ssh.
    pub fn of_starter(executable: &str, argv: &[String], environ: &[String]) -> Launcher {
        let name = executable.rsplit('/').next().unwrap_or(executable);
        let argv0 = argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .unwrap_or("");
        if name == "srun" || argv0 == "srun" {
            let job = environ
                .iter()
                .find_map(|v| v.strip_prefix("SLURM_JOB_ID="))
                .or_else(|| environ.iter().find_map(|v| v.strip_prefix("SLURM_JOBID=")));
            if let Some(job) = job {
                return Launcher::Srun {
                    srun: executable.to_owned(),
                    job: job.to_owned(),
                };
            }
        }
        if name.starts_with("mpiexec") || name == "mpirun" || name.contains("hydra") {
            let mut options = Vec::new();
            let mut args = argv.iter().skip(1);
            while let Some(arg) = args.next() {
                let flag = arg.trim_start_matches('-');
                if HYDRA_REACH.contains(&flag)
                    && arg.starts_with('-')
                    && let Some(value) = args.next()
                {
                    options.push(arg.clone());
                    options.push(value.clone());
                } else if arg.starts_with('-')
                    && let Some((key, _)) = flag.split_once('=')
                    && HYDRA_REACH.contains(&key)
                {
                    options.push(arg.clone());
                }
            }
            // Only a starter that says how it reaches hosts is asked to: a plain mpiexec
            // may be another MPI's, with other options.
            if !options.is_empty() {
                return Launcher::Hydra {
                    mpiexec: executable.to_owned(),
                    options,
                };
            }
        }
        Launcher::ssh()
    }
}

/// Hydra options that say how it reaches hosts (each takes a value).
const HYDRA_REACH: [&str; 4] = ["launcher", "launcher-exec", "bootstrap", "bootstrap-exec"];

/// One word for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_starter_says_how_it_reaches_hosts() {
        let hydra = Launcher::of_starter(
            "/opt/mpich/bin/mpiexec.hydra",
            &strings(&[
                "mpiexec",
                "-launcher",
                "ssh",
                "-launcher-exec=/t/ssh",
                "-hosts",
                "h1,h2",
                "-n",
                "4",
                "./ring",
            ]),
            &[],
        );
        assert_eq!(
            hydra,
            Launcher::Hydra {
                mpiexec: "/opt/mpich/bin/mpiexec.hydra".into(),
                options: strings(&["-launcher", "ssh", "-launcher-exec=/t/ssh"]),
            }
        );
        let srun = Launcher::of_starter(
            "/usr/bin/srun",
            &strings(&["srun", "-n", "4", "./ring"]),
            &strings(&["HOME=/root", "SLURM_JOB_ID=17"]),
        );
        assert_eq!(
            srun,
            Launcher::Srun {
                srun: "/usr/bin/srun".into(),
                job: "17".into()
            }
        );
        let plain =
            Launcher::of_starter("/usr/bin/mpiexec", &strings(&["mpiexec", "-n", "2"]), &[]);
        assert_eq!(plain, Launcher::ssh());
    }

    #[test]
    fn the_remote_command_is_quoted_for_the_remote_shell() {
        let command = Launcher::Rsh(strings(&["rsh", "-x"]))
            .command("n1", &Helper::new("/o p/mqd", &["agent"]));
        let args: Vec<_> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["-x", "n1", "'/o p/mqd' agent"]);
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
