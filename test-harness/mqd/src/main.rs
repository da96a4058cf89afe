//! `mqd`: dump the MPI message queues of live processes or whole jobs.

use clap::{Args, CommandFactory, Parser, Subcommand};
use mqd::demo::DemoJob;
use mqd::interrupt;
use mqd::progress::ProgressLine;
use mqd::reach::Reach;
use mqd::render::{dot, groups, json, openmp, stacks, text, view};
use mqd::{exit_code, verdict_exit_code};
use mqd_job::acquire::{self, Job, LaunchOptions};
use mqd_job::dump::{self, JobContext, ProcessRef};
use mqd_job::stay::{CallWatch, RemoteCounters};
use mqd_library_host::failure::{Failure, FailureKind};
use mqd_library_host::isolation::Isolation;
use mqd_model::document::StatsDocument;
use mqd_model::{Acquisition, JobDump, RankSet};
use mqd_remote::HostCounters;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

mod by_classes;
mod watch;

use by_classes::{ClassReport, RANKS_ONE_BY_ONE, named_as_live};
use mqd::run::watchdog::{Dumper, Rendered, Watchdog, run_watched};

/// Why does my MPI job hang? Who waits for whom, proven deadlocks, and what could not be
/// seen.
///
/// mqd stops every rank for an instant, reads its message queues (pending sends, posted
/// receives, unexpected messages) through the MPI's message queue library, as TotalView
/// and DDT do, lets it go, and says who waits for whom: a proven deadlock, no deadlock,
/// or undetermined with the reasons.
///
/// Exit codes: 0 no deadlock; 8 deadlock; 9 undetermined (a rank not dumped, a wait
/// not followed, or a deadlock that only pending operations suggest); 1 other
/// failure; 2 bad usage; when nothing could be dumped: 3 no such process, 4 not
/// permitted (ptrace), 5 not an MPI process or no queues, 6 no debug information, 7
/// message queue library missing or incompatible; 128+N when signal N stopped mqd.
#[derive(Parser)]
#[command(name = "mqd", version)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
    /// Neither read nor write the cache of what the debug information answered
    /// ($MQD_CACHE_DIR, else $XDG_CACHE_HOME/mqd/types or ~/.cache/mqd/types), which
    /// lets the next mqd on the same libraries skip their DWARF.
    #[arg(long, global = true)]
    no_cache: bool,
}

#[derive(Args, Clone)]
struct Output {
    /// Where type answers are kept between runs: the default directory unless
    /// `--no-cache` (set by `main`, not an option of its own).
    #[arg(skip = mqd_debuginfo::memo::default_directory())]
    type_cache: Option<std::path::PathBuf>,
    /// Message queue library to use: a PATH (ours, MPICH's libtvmpich.so, Open MPI's
    /// libompi_dbg_msgq.so), or `job` for the one the job names (MPIR_dll_name).
    /// Default: for an MPICH job the libmqd_mpich.so that goes with mqd, for another MPI
    /// the library the job names.
    #[arg(long, value_name = "PATH|job", value_parser = dll_choice)]
    dll: Option<DllChoice>,
    /// Where the library runs: auto (a foreign library, such as MPICH's, in a process
    /// of its own, whose crash or hang costs only the rank it was reading; mqd's own in
    /// process), always, or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    isolate_library: IsolateLibrary,
    /// Print one JSON document (schema mqd/3) instead of text: the same as --format json.
    #[arg(long)]
    json: bool,
    /// What to print: text (rank sets that share a state, then the diagnosis), json
    /// (per-rank and aggregated views and the diagnosis), or dot (the wait-for graph
    /// for Graphviz; with --stacks, the merged stacks).
    #[arg(short = 'f', long, value_enum)]
    format: Option<Format>,
    /// Write the output to FILE instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// In text, list every rank rather than rank sets that share a state; on a job of
    /// more than 256 ranks, report every rank (by default such a job is reported by the
    /// classes of ranks in one state, schema mqd/3-classes).
    #[arg(long)]
    per_rank: bool,
    /// Report by the classes of ranks in one state (schema mqd/3-classes) whatever the
    /// number of ranks, as every command does past 256.
    #[arg(long, conflicts_with = "per_rank")]
    by_classes: bool,
    /// In text, list at most N operations per rank set (or rank), 20 unless given, and
    /// summarise the rest; 0 lists them all.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Show only these COMM_WORLD ranks (e.g. 0-3,7, or 1-61:4 for every fourth) in the
    /// queue listing; the diagnosis is still of the whole job.
    #[arg(long, value_name = "RANKS")]
    ranks: Option<RankSet>,
    /// Show only communicators of this name in the queue listing.
    #[arg(long, value_name = "NAME")]
    comm: Option<String>,
    /// Show only operations with this tag in the queue listing.
    #[arg(long, value_name = "TAG")]
    tag: Option<i64>,
    /// Stacks are unwound by default (every thread of every rank) and shown merged
    /// across ranks; with --format dot, --stacks draws them instead of the wait-for
    /// graph.
    #[arg(long, conflicts_with = "no_stacks")]
    stacks: bool,
    /// Do not unwind stacks: the queues only. Then the verdict is never "no deadlock"
    /// (any rank may be blocked in a call its queues do not show) nor "deadlock".
    #[arg(long)]
    no_stacks: bool,
    /// What one snapshot leaves possible is held: the ranks' calls are counted and what
    /// their processes do is measured for a window (--hold), and ranks that stayed in
    /// their calls doing nothing while waiting only for each other are proven
    /// deadlocked, ranks that moved dissolve their possible deadlock (docs/verdicts.md: "The
    /// hold"). This turns that off: one snapshot only.
    #[arg(long, alias = "no-confirm", conflicts_with = "no_stacks")]
    no_hold: bool,
    /// How long a hold watches the ranks, in seconds (default 2). Longer proves through
    /// slower progress; a rank that works (moves data, writes a file) is never proven.
    #[arg(long, value_name = "SECONDS", value_parser = hold_seconds, conflicts_with = "no_hold")]
    hold: Option<f64>,
    /// Show every thread in the stacks, not only each rank's main thread.
    #[arg(long, conflicts_with = "no_stacks")]
    all_threads: bool,
    /// Show at most N frames of each stack from the outermost (0: all).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        conflicts_with = "no_stacks"
    )]
    depth: usize,
    /// Also show the frames inside MPI below the call the program made.
    #[arg(long, conflicts_with = "no_stacks")]
    mpi_internals: bool,
    /// Show the native frames of Python ranks as they are: their interpreter's Python
    /// frames are not read nor merged in.
    #[arg(long, conflicts_with = "no_stacks")]
    native_only: bool,
    /// The OMPD library to read OpenMP runtimes with (default: the one each runtime
    /// names, found beside it). It runs isolated as --isolate-library says of foreign
    /// libraries.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["no_stacks", "no_openmp"])]
    ompd: Option<PathBuf>,
    /// Do not read OpenMP runtimes' thread states (their OMPD libraries are not loaded).
    #[arg(long, conflicts_with = "no_stacks")]
    no_openmp: bool,
    /// Also draw the wait-for graph into FILE as SVG (needs Graphviz's `dot`).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Also draw the wait-for graph into FILE as PNG (needs Graphviz's `dot`).
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    /// Diagnostics: print to stderr one JSON line with what the library asked of the
    /// debugger for each process (fetch_data calls and bytes, look-ups, allocations).
    #[arg(long, hide = true)]
    stats: bool,
}

/// `--dll`: a library, or the one the job names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DllChoice {
    Path(PathBuf),
    Job,
}

/// `--hold`: a finite window of at least 0.1 s and at most an hour.
fn hold_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.1..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!(
            "--hold takes seconds from 0.1 to 3600 (a number such as 2 or 0.5), not {text:?}"
        )),
    }
}

fn dll_choice(text: &str) -> Result<DllChoice, String> {
    match text {
        "" => Err("--dll needs a path, or `job` for the library the job names".into()),
        "job" => Ok(DllChoice::Job),
        path => Ok(DllChoice::Path(PathBuf::from(path))),
    }
}

/// What `mqd generate` writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum Generated {
    Man,
    Bash,
    Zsh,
    Fish,
}

/// `mqd generate`: manual pages (`mqd.1`, `mqd-run.1`...) or a shell's completions.
fn generate(what: Generated, dir: &std::path::Path) -> Result<ExitCode, Failure> {
    let failed = |e: std::io::Error| {
        Failure::new(
            FailureKind::Other,
            format!("cannot write into {}: {e}", dir.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let mut command = Cli::command();
    let shell = match what {
        Generated::Man => {
            clap_mangen::generate_to(command, dir).map_err(failed)?;
            return Ok(ExitCode::SUCCESS);
        }
        Generated::Bash => clap_complete::Shell::Bash,
        Generated::Zsh => clap_complete::Shell::Zsh,
        Generated::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate_to(shell, &mut command, "mqd", dir).map_err(failed)?;
    Ok(ExitCode::SUCCESS)
}

/// `--isolate-library`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum IsolateLibrary {
    Auto,
    Always,
    Never,
}

impl Commands {
    /// The output options of a command that dumps.
    fn output_mut(&mut self) -> Option<&mut Output> {
        match self {
            Commands::Dump { output, .. }
            | Commands::Watch { output, .. }
            | Commands::Job { output, .. }
            | Commands::Launch { output, .. }
            | Commands::Run { output, .. }
            | Commands::Demo { output, .. }
            | Commands::Core { output, .. } => Some(output),
            Commands::LibraryHost { .. }
            | Commands::OmpdHost { .. }
            | Commands::Agent { .. }
            | Commands::Generate { .. } => None,
        }
    }
}

impl Output {
    /// `context` with the library isolated as asked, mqd itself as the library host,
    /// stacks unwound unless `--no-stacks`, and the library chosen as `--dll` says.
    fn isolating(&self, context: JobContext) -> JobContext {
        JobContext {
            isolation: match self.isolate_library {
                IsolateLibrary::Auto => Isolation::Auto,
                IsolateLibrary::Always => Isolation::Always,
                IsolateLibrary::Never => Isolation::Never,
            },
            library_host: library_host(),
            type_cache: self.type_cache.clone(),
            stacks: !self.no_stacks,
            python_frames: !self.native_only,
            job_library: self.dll == Some(DllChoice::Job),
            openmp: (!self.no_openmp).then(|| mqd_ompd_host::OmpdOptions {
                library: self.ompd.clone(),
                isolation: match self.isolate_library {
                    IsolateLibrary::Never => Isolation::Never,
                    _ => Isolation::Always,
                },
                helper: helper(&["ompd-host"]),
            }),
            ..context
        }
    }

    /// The library `--dll` names by its path.
    fn dll_path(&self) -> Option<&std::path::Path> {
        match &self.dll {
            Some(DllChoice::Path(p)) => Some(p),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Dot,
}

/// Process ids: positive.
fn pid(text: &str) -> Result<i32, String> {
    match text.parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("{text:?} is not a process id")),
    }
}

#[derive(Args, Clone)]
struct Pids {
    /// Process ids of MPI processes.
    #[arg(value_name = "PID", value_parser = pid)]
    pids: Vec<i32>,
    /// A process id (the same as a PID argument; repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID", value_parser = pid)]
    more: Vec<i32>,
}

impl Pids {
    fn all(&self) -> Vec<i32> {
        self.pids.iter().chain(&self.more).copied().collect()
    }
}

#[derive(Subcommand)]
enum Commands {
    /// Dump MPI processes by pid: who waits for whom, and where each rank is
    ///
    /// The processes are stopped (in parallel), their queues and stacks dumped, and
    /// they are let go exactly as they were.
    #[command(visible_alias = "attach")]
    Dump {
        #[command(flatten)]
        pids: Pids,
        #[command(flatten)]
        output: Output,
    },
    /// Sample a job several times and report what lasted
    ///
    /// The job runs between samples: what lasted, and
    /// the answer of `mqd job` held over the samples (ranks that stay in their calls
    /// doing nothing are proven, ranks that move dissolve). Ctrl-C stops sampling and
    /// reports the samples taken.
    Watch {
        /// Number of samples (1 to 10000).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        samples: u32,
        /// Seconds between samples.
        #[arg(long, default_value_t = 1.0, value_parser = mqd::starter::seconds)]
        interval: f64,
        /// The job's starter (mpiexec: its pid, or its program's name) instead of a
        /// list of pids.
        #[arg(long, value_name = "STARTER", value_parser = mqd::starter::starter)]
        job: Option<i32>,
        #[command(flatten)]
        pids: Pids,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        reach: Reach,
    },
    /// Dump every rank of a running job, on every host
    ///
    /// The ranks are found through the starter's (mpiexec's, srun's) MPIR process table (or, for a starter without one, its descendants' launcher
    /// environment). Ranks on other hosts are dumped there by agents (`mqd agent`)
    /// started through the job's own launcher (see --launcher).
    Job {
        /// The job's starter (mpiexec, srun): its pid, or its program's name when one
        /// process of this host runs it (`mqd job mpiexec`).
        #[arg(value_name = "STARTER", value_parser = mqd::starter::starter,
              required_unless_present_any = ["slurm", "simulate"],
              conflicts_with_all = ["slurm", "simulate"])]
        starter: Option<i32>,
        /// The job step of this Slurm job id (through its srun on this host).
        #[arg(long, value_name = "JOBID", conflicts_with = "simulate")]
        slurm: Option<String>,
        /// A simulated job instead, to measure mqd at scale: RANKS ranks on HOSTS hosts
        /// (sim0...) in STATES distinct states, each host an agent started as for a real
        /// job (--rsh, --fanout) that sends what a real one would; analysed by classes.
        /// It hangs in a collective three ranks are not in, or (`,ring`) in a ring of
        /// synchronous sends.
        #[arg(long, value_name = "RANKS,HOSTS,STATES[,ring]", value_parser = simulation)]
        simulate: Option<mqd_remote::simulate::Simulation>,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        reach: Reach,
    },
    /// Load an MQD library and display the processes mqd names on standard input,
    /// reading their memory through mqd (started by mqd: see --isolate-library).
    #[command(hide = true)]
    LibraryHost {
        /// The library.
        dll: PathBuf,
    },
    /// Load an OpenMP runtime's OMPD library and read the processes mqd names on
    /// standard input, through mqd (started by mqd: see --ompd).
    #[command(hide = true)]
    OmpdHost {
        /// The library.
        dll: PathBuf,
    },
    /// Dump this host's ranks for mqd on another host (started by mqd)
    ///
    /// It writes them compactly to standard output; started by mqd through the job's launcher,
    /// it reads its task on standard input. It lets every rank go before it writes a
    /// line about it, and exits on its own.
    Agent {
        /// Keep hardware breakpoint counters of blocked calls for a front end that
        /// watches this host (mqd run), until standard input ends.
        #[arg(long)]
        counters: bool,
    },
    /// Start a job under mqd, let it run, then dump it
    ///
    /// The job is started under MPIR or MPI2DD; after --delay every rank is dumped and
    /// the job ended (or, with --keep, let go on). Ctrl-C ends the job too.
    Launch {
        /// Seconds to let the job run before stopping it for the dump.
        #[arg(long, default_value_t = 1.0, value_name = "SECONDS", value_parser = mqd::starter::seconds)]
        delay: f64,
        /// Leave the job running after the dump (default: end it).
        #[arg(long)]
        keep: bool,
        /// Start the job without the hang recorder (default: libmqd_recorder.so is
        /// preloaded into its ranks, and their records give each blocked call's envelope).
        #[arg(long)]
        no_record: bool,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        reach: Reach,
        /// The starter and its arguments, e.g. `-- mpiexec -n 4 ./ring`.
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Run a job with mqd as its watchdog (CI pipelines, batch scripts)
    ///
    /// Its
    /// output passes through untouched and its own exit status is returned when it ends
    /// by itself. mqd samples it; when no rank has made progress for --hang-after (every
    /// rank inside the same MPI call, whose return address never ran, or idle outside
    /// MPI, and no message queue changed) or --timeout passes, it dumps the job once
    /// more, says who waits for whom (on stderr, and in --report DIR) and ends the job
    /// (or, with --keep, lets it go on). Exit codes when stopped: the verdict's (8
    /// deadlock, 9 undetermined), 124 for no deadlock (a timeout). Ctrl-C and SIGTERM
    /// end the job and mqd.
    Run {
        /// How long no rank may make progress before the job is declared hung
        /// (`90s`, `5m`, `1h`).
        #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = mqd::run::duration::parse)]
        hang_after: Duration,
        /// Stop the job after this long, whatever it is doing.
        #[arg(long, value_name = "DURATION", value_parser = mqd::run::duration::parse)]
        timeout: Option<Duration>,
        /// Time between samples (default: a tenth of --hang-after, from 1 s to 30 s).
        #[arg(long, value_name = "DURATION", value_parser = mqd::run::duration::parse)]
        interval: Option<Duration>,
        /// Leave a stopped job running after its report (default: end it).
        #[arg(long)]
        keep: bool,
        /// Start the job without the hang recorder (default: libmqd_recorder.so is
        /// preloaded into its ranks, and their records give each blocked call's envelope).
        #[arg(long)]
        no_record: bool,
        /// Write report.txt, report.json, stacks.txt, wait-for.svg (with Graphviz) and
        /// junit.xml into this directory.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        reach: Reach,
        /// The launcher and its arguments, e.g. `-- mpiexec -n 4 ./solver`.
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Write mqd's manual pages (mqd.1 and one per command) or its shell completions
    /// into a directory, from this command line's own definition: what
    /// `scripts/install` and the Debian package install.
    #[command(hide = true)]
    Generate {
        /// What: man, bash, zsh or fish.
        #[arg(value_enum)]
        what: Generated,
        /// The directory to write into (made if missing).
        dir: PathBuf,
    },
    /// Run the built-in 4-rank job that deadlocks, and diagnose it
    ///
    /// A ring of blocking MPI_Ssend on 4 ranks, dumped and explained. Needs nothing
    /// else: the job is inside mqd.
    Demo {
        #[command(flatten)]
        output: Output,
    },
    /// Diagnose a job post mortem, from its core files
    ///
    /// The queues and stacks of a crashed (or gcore'd) job, from its ELF core files,
    /// one per rank: several cores of one job are dumped as one job.
    Core {
        /// Core files, from the kernel (ulimit -c) or gcore.
        #[arg(required = true, value_name = "CORE")]
        cores: Vec<PathBuf>,
        /// The program's executable, when the cores do not name their files (no
        /// NT_FILE note) or it moved since the crash.
        #[arg(long, value_name = "PATH")]
        exe: Option<PathBuf>,
        /// The cores were taken while every process of the job was stopped at once (kill
        /// -STOP every rank, gcore each, kill -CONT): read them as one snapshot, which a
        /// deadlock (or "no deadlock") needs. Without it, cores of several processes are
        /// taken to show them at different moments.
        #[arg(long)]
        one_snapshot: bool,
        #[command(flatten)]
        output: Output,
    },
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if cli.no_cache
        && let Some(output) = cli.command.output_mut()
    {
        output.type_cache = None;
    }
    interrupt::install();
    match run(cli.command) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("mqd: {f}");
            ExitCode::from(exit_code(f.kind))
        }
    }
}

/// A usage error, as clap reports its own (exit code 2).
fn usage(message: &str) -> ! {
    Cli::command()
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}

impl Output {
    /// How long a hold watches the ranks.
    fn hold_window(&self) -> Duration {
        Duration::from_secs_f64(
            self.hold
                .unwrap_or(mqd_analysis::hold::HOLD_WINDOW_MS as f64 / 1000.0),
        )
    }

    /// Operations listed per rank set or queue before a summary (0: all).
    fn limit(&self) -> usize {
        self.limit.unwrap_or(20)
    }

    /// How much of the stacks to show.
    fn shown(&self) -> stacks::Shown {
        stacks::Shown {
            threads: if self.all_threads {
                stacks::Threads::All
            } else {
                stacks::Threads::Main
            },
            depth: self.depth,
            mpi_internals: self.mpi_internals,
        }
    }

    /// The format asked for; `--json` with another `--format` is a usage error.
    fn format(&self) -> Format {
        match (self.json, self.format) {
            (true, Some(f)) if f != Format::Json => {
                usage("--json asks for JSON, --format for something else: give one of them")
            }
            (true, _) => Format::Json,
            (false, f) => f.unwrap_or(Format::Text),
        }
    }
}

fn run(command: Commands) -> Result<ExitCode, Failure> {
    match command {
        Commands::Watch {
            samples,
            interval,
            job,
            pids,
            output,
            reach,
        } => {
            let pids = pids.all();
            match (job, pids.is_empty()) {
                (None, true) => {
                    usage("watch needs process ids or --job STARTER (a pid or a program name)")
                }
                (Some(_), false) => usage("watch takes process ids or --job, not both"),
                _ => {}
            }
            if output.format() == Format::Dot || output.svg.is_some() || output.png.is_some() {
                usage(
                    "watch does not draw graphs: use mqd dump or mqd job for --format dot, --svg, --png",
                );
            }
            if output.limit.is_some() {
                usage("watch lists no queues to limit: use --limit with mqd dump or mqd job");
            }
            if output.ranks.is_some() || output.comm.is_some() || output.tag.is_some() {
                usage(
                    "watch lists no queues to filter: use --ranks, --comm and --tag with mqd dump or mqd job",
                );
            }
            watch::watch(samples as usize, interval, job, pids, &output, &reach)
        }
        Commands::Dump { pids, output } => {
            output.format();
            let pids = pids.all();
            if pids.is_empty() {
                usage("dump needs process ids (PID... or -p PID)");
            }
            let processes: Vec<ProcessRef> = pids.iter().copied().map(ProcessRef::pid).collect();
            let started = std::time::Instant::now();
            let job = dump_processes(&processes, &output, &JobContext::new(Acquisition::Attach))?;
            if by_classes_of(processes.len(), &output) {
                let heading = |_| {
                    let n = processes.len();
                    format!("{n} processes, by classes (--per-rank for each rank).")
                };
                let about = serde_json::json!({ "pids": pids });
                if let Some(report) = ClassReport::of_ranks(&job, heading, about) {
                    if !report.to_hold(!output.no_hold && !output.no_stacks) {
                        return Ok(report.print(&output, started));
                    }
                    let (_, judged) = confirmed(job, &output, None, || {
                        dump_processes(&processes, &output, &JobContext::new(Acquisition::Attach))
                    });
                    let report = match judged {
                        Some(judged) => report.with_hold(judged),
                        None => report,
                    };
                    return Ok(report.print(&output, started));
                }
            }
            let (job, diagnosis) = confirmed(job, &output, None, || {
                dump_processes(&processes, &output, &JobContext::new(Acquisition::Attach))
            });
            Ok(print_diagnosed(&job, &output, diagnosis))
        }
        Commands::Job {
            simulate: Some(job),
            output,
            reach,
            ..
        } => simulated_job(&job, &output, &reach),
        Commands::Job {
            starter,
            slurm,
            output,
            reach,
            ..
        } => {
            output.format();
            let starter = match (starter, &slurm) {
                (Some(pid), _) => pid,
                (None, Some(id)) => mqd_job::acquire::slurm::srun_of_job(id)
                    .map_err(|e| Failure::new(FailureKind::NoProcess, e))?,
                (None, None) => usage("job needs a STARTER or --slurm JOBID"),
            };
            let job = acquire::attach_job(starter)?;
            let started = std::time::Instant::now();
            let first = match dump_for_report(&job, &output, &reach)? {
                Dumped::Classes(report) => return Ok(report.print(&output, started)),
                Dumped::ToHold(report, first) => {
                    let counters = host_counters(&job, &reach);
                    let (_, judged) = confirmed(first, &output, counters.as_ref(), || {
                        dump_job(&job, &output, &reach)
                    });
                    let report = match judged {
                        Some(judged) => report.with_hold(judged),
                        None => *report,
                    };
                    return Ok(report.print(&output, started));
                }
                Dumped::Ranks(first) => first,
            };
            let counters = host_counters(&job, &reach);
            let (dump, diagnosis) = confirmed(first, &output, counters.as_ref(), || {
                dump_job(&job, &output, &reach)
            });
            Ok(print_diagnosed(&dump, &output, diagnosis))
        }
        Commands::OmpdHost { dll } => match mqd_ompd_host::isolation::serve(&dll) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(why) => {
                eprintln!("mqd ompd-host: {why}");
                Ok(ExitCode::from(exit_code(FailureKind::Library)))
            }
        },
        Commands::LibraryHost { dll } => match mqd_library_host::isolation::serve(&dll) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(why) => {
                eprintln!("mqd library-host: {why}");
                Ok(ExitCode::from(exit_code(FailureKind::Library)))
            }
        },
        Commands::Agent { counters: true } => {
            match mqd_remote::serve_counters(std::io::stdin(), std::io::stdout().lock()) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(why) => {
                    eprintln!("mqd agent: {why}");
                    Ok(ExitCode::from(exit_code(FailureKind::Other)))
                }
            }
        }
        Commands::Agent { counters: false } => {
            let stop = || interrupt::requested().is_some();
            match mqd_remote::serve(
                std::io::stdin(),
                std::io::stdout().lock(),
                &stop,
                library_host(),
            ) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(why) => {
                    eprintln!("mqd agent: {why}");
                    Ok(ExitCode::from(exit_code(FailureKind::Other)))
                }
            }
        }
        Commands::Launch {
            delay,
            keep,
            no_record,
            output,
            reach,
            cmd,
        } => {
            output.format();
            let (cmd, env) = recorded(&cmd, no_record, "mqd launch");
            let (program, args) = cmd.split_first().expect("clap requires a command");
            let mut command = Command::new(program);
            command.envs(env);
            // The job's own output must not mix with a JSON document on stdout.
            command.args(args).stdout(Stdio::from(std::io::stderr()));
            launch_and_dump(command, delay, keep, &output, &reach)
        }
        Commands::Run {
            hang_after,
            timeout,
            interval,
            keep,
            no_record,
            report,
            output,
            reach,
            cmd,
        } => {
            output.format();
            let (spawn, env) = recorded(&cmd, no_record, "mqd run");
            let watch = Watchdog {
                spawn: Some(spawn),
                env,
                hang_after,
                timeout,
                interval: interval.unwrap_or_else(|| mqd::run::default_interval(hang_after)),
                keep,
                report,
            };
            run_watched(
                &cmd,
                &watch,
                &JobDumper {
                    output: &output,
                    reach: &reach,
                },
            )
        }
        Commands::Core {
            cores,
            exe,
            one_snapshot,
            output,
        } => {
            output.format();
            let opened = dump::open_cores(&cores, exe.as_deref(), output.type_cache.as_deref());
            for target in opened.iter().flatten() {
                for problem in target.file_problems() {
                    eprintln!(
                        "mqd: warning: {}: {problem}",
                        target.process.path().display()
                    );
                }
                for (start, end) in target.missing_ranges() {
                    eprintln!(
                        "mqd: warning: {}: the core file was cut short: {start:#x}-{end:#x} ({} bytes) is missing; what lies there cannot be read",
                        target.process.path().display(),
                        end - start
                    );
                }
            }
            let context = output.isolating(JobContext {
                cores_at_one_moment: one_snapshot,
                ..JobContext::new(Acquisition::Core)
            });
            let started = std::time::Instant::now();
            let job = dump::dump_cores(opened, output.dll_path(), &context)?;
            if by_classes_of(cores.len(), &output) {
                // The classes keep no signal: said of rank sets here.
                let (killed, killed_json) = mqd::render::classes::killed(&job);
                let mut job = job;
                named_as_live(&mut job);
                let heading = |_| {
                    let n = cores.len();
                    format!("{n} cores, by classes (--per-rank for each rank).\n{killed}")
                        .trim_end()
                        .to_owned()
                };
                let about = serde_json::json!({ "cores": cores.len(), "killed": killed_json });
                // Cores are one moment: no hold.
                return Ok(match ClassReport::of_ranks(&job, heading, about) {
                    Some(report) => report.print(&output, started),
                    None => print(&job, &output),
                });
            }
            Ok(print(&job, &output))
        }
        Commands::Generate { what, dir } => generate(what, &dir),
        Commands::Demo { mut output } => {
            output.format();
            let demo = DemoJob::unpack().map_err(|e| {
                Failure::new(
                    FailureKind::Other,
                    format!("cannot unpack the demo job: {e}"),
                )
            })?;
            // The demo job names no library: it is shown with the one that goes with mqd.
            if output.dll.is_none() {
                output.dll = mqd_library_host::library::bundled_library().map(DllChoice::Path);
            }
            let mut command = demo.command();
            command.stdout(Stdio::null()).stderr(Stdio::null());
            let reach = Reach::local();
            launch_and_dump(command, 1.0, false, &output, &reach)
        }
    }
}

/// Starts the job, lets it run `delay` seconds, dumps it and ends it (unless `keep`).
/// A stop request (Ctrl-C, SIGTERM) ends the job too, or with `keep` lets it go and
/// says where it is.
fn launch_and_dump(
    command: Command,
    delay: f64,
    keep: bool,
    output: &Output,
    reach: &Reach,
) -> Result<ExitCode, Failure> {
    let mut job = acquire::launch_with(command, &LaunchOptions::default())?;
    let started = std::time::Instant::now();
    let outcome = (|| {
        acquire::release_ranks(&job)?;
        if !interrupt::sleep(Duration::from_secs_f64(delay)) {
            return Ok(None);
        }
        dump_for_report(&job, output, reach).map(Some)
    })();
    if let Some(mut starter) = job.starter.take() {
        if keep {
            eprintln!("mqd: the job goes on: its starter is pid {}", starter.id());
        } else {
            // The starter forwards SIGTERM to its ranks.
            let _ = Command::new("kill").arg(starter.id().to_string()).status();
            let _ = starter.wait();
        }
    }
    if let Some(signal) = interrupt::requested() {
        let what = if keep { "left running" } else { "ended" };
        eprintln!("mqd: stopped by signal {signal}: the job it started is {what}");
        return Ok(ExitCode::from(interrupt::exit_code(signal)));
    }
    match outcome? {
        Some(Dumped::Ranks(dump)) => Ok(print(&dump, output)),
        // Launched jobs are reported from one snapshot.
        Some(Dumped::Classes(report) | Dumped::ToHold(report, _)) => {
            Ok(report.print(output, started))
        }
        None => Ok(ExitCode::from(exit_code(FailureKind::Other))),
    }
}

/// The counters of `job`'s other hosts, reached as its dumps reach them (none with
/// `--local-only`); nothing is started before a counter is asked for.
fn host_counters(job: &Job, reach: &Reach) -> Option<HostCounters> {
    let options = reach.options(Some(job.starter_pid), None).ok().flatten()?;
    Some(HostCounters::new(&options))
}

/// Whether `mqd job` (or `launch`) reports `job` by its classes ([`by_classes_of`]).
fn by_classes(job: &Job, output: &Output) -> bool {
    by_classes_of(dump::job_processes(job).len(), output)
}

/// Whether a report of `ranks` processes goes by classes: more than
/// [`RANKS_ONE_BY_ONE`], in text or JSON, unless asked for every rank.
fn by_classes_of(ranks: usize, output: &Output) -> bool {
    let filtered = output.ranks.is_some() || output.comm.is_some() || output.tag.is_some();
    let graph = output.svg.is_some() || output.png.is_some() || output.format() == Format::Dot;
    if output.by_classes && (filtered || graph) {
        usage("--by-classes lists classes: not with --ranks, --comm, --tag or a graph");
    }
    (ranks > RANKS_ONE_BY_ONE || output.by_classes) && !output.per_rank && !filtered && !graph
}

impl ClassReport {
    /// Prints the report (text or JSON); with `--stats`, what the front end cost since
    /// `started`, on stderr.
    fn print(&self, output: &Output, started: std::time::Instant) -> ExitCode {
        let mut out = match report_output(output) {
            Ok(out) => out,
            Err(code) => return code,
        };
        let code = ExitCode::from(verdict_exit_code(self.diagnosis.verdict));
        // The document streamed: a job split into classes of one is every rank's dump.
        let written = match output.format() {
            Format::Json => (self.json().write_to(&mut out)).and_then(|()| out.write_all(b"\n")),
            _ => out.write_all(self.text().as_bytes()),
        };
        if let Err(e) = written.and_then(|()| out.flush()) {
            return write_failed("dump", &e, code);
        }
        if output.stats {
            let cost = mqd_remote::OwnCost::now();
            eprintln!(
                "mqd: front end: wall {:.2} s, cpu {:.2} s, peak RSS {:.1} MB, {} classes",
                started.elapsed().as_secs_f64(),
                cost.cpu,
                cost.peak_mb,
                self.classes.classes.len()
            );
        }
        code
    }
}

/// [`dump_job`], the agents' ranks kept as the classes they merged them into.
fn dump_job_kept(job: &Job, output: &Output, reach: &Reach) -> Result<mqd_remote::Across, Failure> {
    let Some(remote) = reach.options(Some(job.starter_pid), None)? else {
        return dump_job(job, output, reach).map(mqd_remote::Across::Here);
    };
    let processes = dump::job_processes(job);
    let progress = ProgressLine::new(processes.len());
    let context = output.isolating(JobContext::of_job(job));
    let stop = || interrupt::requested().is_some();
    mqd_remote::dump_across_hosts_kept(
        &processes,
        output.dll_path(),
        &context,
        &progress,
        &remote,
        &stop,
    )
}

/// A job dumped for `mqd job` or `mqd launch`: by classes where [`by_classes`] says so
/// and the class analysis follows every class, else rank by rank.
enum Dumped {
    Classes(Box<ClassReport>),
    /// By classes, with what a hold of its ranks (rebuilt from the classes' stream, one
    /// dump per rank) may decide.
    ToHold(Box<ClassReport>, JobDump),
    Ranks(JobDump),
}

fn dump_for_report(job: &Job, output: &Output, reach: &Reach) -> Result<Dumped, Failure> {
    if !by_classes(job, output) {
        return dump_job(job, output, reach).map(Dumped::Ranks);
    }
    let kept = dump_job_kept(job, output, reach)?;
    let Some(report) = ClassReport::of_job(&kept, job) else {
        return kept.into_ranks().map(Dumped::Ranks);
    };
    let holding = !output.no_hold && !output.no_stacks;
    if !report.unfollowed() && !report.to_hold(holding) {
        return Ok(Dumped::Classes(Box::new(report)));
    }
    // Rebuilt rank by rank from the same stream, for the hold or the classes not followed
    // (their dumps moved where no hold may follow).
    let first = kept.into_ranks()?;
    if !holding {
        return Ok(Dumped::Classes(Box::new(report.split_from(first))));
    }
    let report = report.split(&first);
    Ok(match report.to_hold(holding) {
        true => Dumped::ToHold(Box::new(report), first),
        false => Dumped::Classes(Box::new(report)),
    })
}

/// Dumps every rank of `job`: this host's here, the others' through agents.
fn dump_job(job: &Job, output: &Output, reach: &Reach) -> Result<JobDump, Failure> {
    let remote = reach.options(Some(job.starter_pid), None)?;
    dump_processes_on(
        &dump::job_processes(job),
        output,
        &JobContext::of_job(job),
        remote.as_ref(),
    )
}

/// [`dump::dump_processes`]; with `--stats`, what each process cost, on stderr.
fn dump_processes(
    processes: &[ProcessRef],
    output: &Output,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    dump_processes_on(processes, output, context, None)
}

/// [`dump_processes`], ranks on other hosts through agents when `remote` says how
/// (`--stats` counts a job's processes where all are on this host; its agents' ranks
/// are not counted).
fn dump_processes_on(
    processes: &[ProcessRef],
    output: &Output,
    context: &JobContext,
    remote: Option<&mqd_remote::RemoteOptions>,
) -> Result<JobDump, Failure> {
    let progress = ProgressLine::new(processes.len());
    let context = &output.isolating(context.clone());
    let this = mqd_job::identity::this_host();
    let elsewhere = processes.iter().any(|p| {
        p.host
            .as_deref()
            .is_some_and(|h| !mqd_job::identity::is_this_host(h, this.as_deref()))
    });
    if output.stats && remote.is_some() && elsewhere {
        eprintln!("mqd: --stats: ranks on other hosts are dumped by their agents, not counted");
    }
    if !output.stats || (remote.is_some() && elsewhere) {
        let stop = || interrupt::requested().is_some();
        return match remote {
            Some(remote) => mqd_remote::dump_across_hosts(
                processes,
                output.dll_path(),
                context,
                &progress,
                remote,
                &stop,
            ),
            None => dump::dump_processes(processes, output.dll_path(), context, &progress),
        };
    }
    let (job, costs) =
        dump::dump_processes_counted(processes, output.dll_path(), context, &progress)?;
    let stats = StatsDocument {
        mqd_stats: mqd_model::document::Stats {
            dll: job.dll.path.clone(),
            processes: costs
                .iter()
                .map(|c| {
                    let n = &c.counters;
                    mqd_model::document::ProcessStats {
                        rank: c.rank,
                        pid: c.pid,
                        fetches: n.fetches,
                        fetch_bytes: n.fetch_bytes,
                        failed_fetches: n.failed_fetches,
                        largest_fetch: n.largest_fetch,
                        find_symbol_calls: n.find_symbol_calls,
                        find_type_calls: n.find_type_calls,
                        field_offset_calls: n.field_offset_calls,
                        mallocs: n.mallocs,
                        frees: n.frees,
                        openmp: c.openmp.map(|o| mqd_model::document::OpenMpStats {
                            reads: o.reads,
                            bytes: o.bytes,
                            symbols: o.symbols,
                            microseconds: o.microseconds,
                        }),
                    }
                })
                .collect(),
            indexed_debug_files: mqd_debuginfo::indexed_files()
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        },
    };
    match serde_json::to_string(&stats) {
        Ok(line) => eprintln!("{line}"),
        Err(e) => eprintln!("mqd: cannot write the statistics: {e}"),
    }
    Ok(job)
}

/// Where the output goes: standard output, or `--output FILE`.
fn destination(output: &Output) -> Result<Box<dyn Write>, Failure> {
    Ok(match &output.output {
        Some(path) => Box::new(std::fs::File::create(path).map_err(|e| {
            Failure::new(
                FailureKind::Other,
                format!("cannot write {}: {e}", path.display()),
            )
        })?),
        None => Box::new(std::io::stdout().lock()),
    })
}

/// Where a report goes, through one buffer. `Err` with the exit code where mqd was
/// stopped during the dump (it finished, every process let go as it was: said, rather
/// than half an answer printed) or the destination cannot be opened.
fn report_output(output: &Output) -> Result<std::io::BufWriter<Box<dyn Write>>, ExitCode> {
    if let Some(signal) = interrupt::requested() {
        eprintln!("mqd: stopped by signal {signal}: every process was let go as it was");
        return Err(ExitCode::from(interrupt::exit_code(signal)));
    }
    match destination(output) {
        Ok(out) => Ok(std::io::BufWriter::with_capacity(1 << 16, out)),
        Err(f) => {
            eprintln!("mqd: {f}");
            Err(ExitCode::from(exit_code(f.kind)))
        }
    }
}

/// A failed write: quiet for a reader that went away (`mqd ... | head`), else said.
fn write_failed(what: &str, e: &std::io::Error, code: ExitCode) -> ExitCode {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return code;
    }
    eprintln!("mqd: cannot write the {what}: {e}");
    ExitCode::from(exit_code(FailureKind::Other))
}

/// The dump `first` and its diagnosis; where one snapshot leaves ranks that a hold
/// could prove deadlocked or show moving, their calls are counted and their processes
/// measured through a window, a second snapshot (by `again`) ends it, and the hold is
/// judged (docs/verdicts.md: "The hold"). Ctrl-C or a failed snapshot ends it: the first dump
/// alone is judged.
fn confirmed(
    first: JobDump,
    output: &Output,
    remote: Option<&HostCounters>,
    again: impl Fn() -> Result<JobDump, Failure>,
) -> (JobDump, Option<mqd_model::Diagnosis>) {
    if output.no_hold || output.no_stacks {
        return (first, None);
    }
    let analysis = mqd_analysis::analyse(&first);
    let ranks = mqd_analysis::hold::candidates(&analysis);
    if ranks.is_empty() {
        return (first, Some(analysis.diagnosis));
    }
    let remote = remote.map(|r| r as &dyn RemoteCounters);
    let watch = CallWatch::arm_across(&first, &ranks, remote);
    if watch.is_empty() {
        // Nothing could be counted: no window, and the hold says why.
        let hold = watch.hold(watch.measure(), Duration::ZERO);
        let judged = mqd_analysis::hold::judge(&first, &first, analysis, &hold);
        return (first, Some(judged));
    }
    let held = watch.measure_through(
        output.hold_window(),
        mqd_analysis::hold::HOLD_STRETCH,
        interrupt::sleep,
    );
    let Some((measures, window)) = held else {
        return (first, Some(analysis.diagnosis));
    };
    let Ok(last) = again() else {
        return (first, Some(analysis.diagnosis));
    };
    let hold = watch.hold(measures, window);
    let judged = mqd_analysis::hold::judge(&first, &last, analysis, &hold);
    (first, Some(judged))
}

fn print(job: &JobDump, output: &Output) -> ExitCode {
    print_diagnosed(job, output, None)
}

/// [`print`] with the diagnosis already made (of several samples).
fn simulation(text: &str) -> Result<mqd_remote::simulate::Simulation, String> {
    mqd_remote::simulate::Simulation::parse(text)
}

/// `mqd job --simulate`: the simulated job through its agents, analysed by classes.
fn simulated_job(
    job: &mqd_remote::simulate::Simulation,
    output: &Output,
    reach: &Reach,
) -> Result<ExitCode, Failure> {
    let remote = reach.options(None, None)?.ok_or_else(|| {
        Failure::new(
            FailureKind::Other,
            "--simulate runs agents: it cannot be --local-only",
        )
    })?;
    let start = std::time::Instant::now();
    let classes = mqd_remote::simulate_job(job, &remote, &|| interrupt::requested().is_some());
    let title = format!(
        "Simulated job: {} ranks on {} hosts in {} states.",
        job.ranks, job.hosts, job.states
    );
    let about = serde_json::to_value(job).unwrap_or_default();
    let report = ClassReport::of_classes(classes, |_| title.clone(), about);
    Ok(report.print(output, start))
}

fn print_diagnosed(
    job: &JobDump,
    output: &Output,
    diagnosis: Option<mqd_model::Diagnosis>,
) -> ExitCode {
    // Streamed through one buffer: a big job has millions of values.
    let mut out = match report_output(output) {
        Ok(out) => out,
        Err(code) => return code,
    };
    let diagnosis = diagnosis.unwrap_or_else(|| mqd_analysis::diagnose(job));
    let code = ExitCode::from(verdict_exit_code(diagnosis.verdict));
    let written = match output.format() {
        Format::Json => {
            write_json_report(job, output, &diagnosis, &mut out).and_then(|()| out.write_all(b"\n"))
        }
        // With --stacks, the stacks merged across ranks; else the wait-for graph.
        Format::Dot => match stacks::merged(job, output.shown()).filter(|_| output.stacks) {
            Some(roots) => out.write_all(stacks::stacks_dot(&roots).as_bytes()),
            None => {
                out.write_all(dot::to_dot(job, &diagnosis, &dot::DotOptions::default()).as_bytes())
            }
        },
        Format::Text => out.write_all(text_report(job, output, &diagnosis).as_bytes()),
    };
    if let Err(e) = written.and_then(|()| out.flush()) {
        return write_failed("dump", &e, code);
    }
    for (path, format) in [(&output.svg, "svg"), (&output.png, "png")] {
        if let Some(path) = path {
            let text = dot::to_dot(job, &diagnosis, &dot::DotOptions::default());
            if let Err(e) = dot::render(&text, format, path) {
                eprintln!("mqd: {e}");
                return ExitCode::from(exit_code(FailureKind::Other));
            }
        }
    }
    code
}

/// `mqd job`'s machinery for `mqd run`.
struct JobDumper<'a> {
    output: &'a Output,
    reach: &'a Reach,
}

impl Dumper for JobDumper<'_> {
    fn dump(&self, job: &Job) -> Result<JobDump, Failure> {
        dump_job(job, self.output, self.reach)
    }

    fn counters(&self, job: &Job) -> Option<HostCounters> {
        host_counters(job, self.reach)
    }

    fn confirmed(
        &self,
        first: JobDump,
        job: &Job,
        remote: Option<&HostCounters>,
    ) -> (JobDump, Option<mqd_model::Diagnosis>) {
        confirmed(first, self.output, remote, || {
            dump_job(job, self.output, self.reach)
        })
    }

    fn report(&self, dump: &JobDump, diagnosis: &mqd_model::Diagnosis) -> Rendered {
        let stacks = stacks::stacks_text(dump, self.output.shown());
        let by_classes = by_classes_of(dump.ranks.len(), self.output)
            .then(|| ClassReport::of_dump(dump))
            .flatten();
        match by_classes {
            Some(report) => {
                let report = report.judged_by(diagnosis.clone());
                Rendered {
                    text: report.text(),
                    json: Some(report.json().to_json_string()),
                    stacks,
                    dot: None,
                }
            }
            None => Rendered {
                text: text_report(dump, self.output, diagnosis),
                json: json_report(dump, self.output, diagnosis).ok(),
                stacks,
                dot: Some(dot::to_dot(dump, diagnosis, &dot::DotOptions::default())),
            },
        }
    }
}

fn filter_of(output: &Output) -> view::Filter {
    view::Filter {
        ranks: output.ranks.clone(),
        comm: output.comm.clone(),
        tag: output.tag,
    }
}

/// The JSON document of a dump and its diagnosis.
fn json_report(
    job: &JobDump,
    output: &Output,
    diagnosis: &mqd_model::Diagnosis,
) -> std::io::Result<String> {
    let mut text = Vec::new();
    write_json_report(job, output, diagnosis, &mut text)?;
    String::from_utf8(text).map_err(std::io::Error::other)
}

/// The JSON document, streamed to `out`: a job of many ranks is never one string.
fn write_json_report(
    job: &JobDump,
    output: &Output,
    diagnosis: &mqd_model::Diagnosis,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let shown = filter_of(output).apply(job);
    let groups = mqd_analysis::aggregate(&shown);
    let mut doc = json::job_document(job, &groups, diagnosis);
    doc.stacks = stacks::merged(job, output.shown());
    serde_json::to_writer(out, &doc).map_err(std::io::Error::from)
}

/// The text report of a dump and its diagnosis.
fn text_report(job: &JobDump, output: &Output, diagnosis: &mqd_model::Diagnosis) -> String {
    let filter = filter_of(output);
    let shown = filter.apply(job);
    let mut text = text::header_text(job);
    if output.per_rank || job.ranks.len() <= 1 {
        text.push_str(&text::job_text(&shown, output.limit()));
    } else {
        text.push_str(&groups::groups_text(
            &mqd_analysis::aggregate(&shown),
            output.limit(),
        ));
        text.push('\n');
    }
    if let Some(tree) = stacks::stacks_text(job, output.shown()) {
        text.push_str(&tree);
        text.push('\n');
    }
    if let Some(openmp) = openmp::openmp_text(job) {
        text.push_str(&openmp);
        text.push('\n');
    }
    if let Some(calls) = stacks::python_calls_text(job, output.shown()) {
        text.push_str(&calls);
        text.push('\n');
    }
    if let Some(unknown) = stacks::unknown_arguments_text(job, output.shown()) {
        text.push_str(&unknown);
        text.push('\n');
    }
    if !filter.is_empty() {
        text.push_str(
            "(the listing above is filtered; the diagnosis below is of the whole job)\n\n",
        );
    }
    text.push_str(&text::diagnosis_text(job, diagnosis));
    text
}

/// `mqd watch`: dump the job `samples` times, `interval` seconds apart (the job runs
/// in between: every dump detaches), and keep what persists. Its answer is `mqd job`'s
/// rule over a longer window: the ranks a sample leaves undecided are held from that
/// sample on, and held again from a later one when they move; the latest such sample is
/// judged with its hold (a hold of the usual window follows a last sample that began
/// one). A stop request ends the sampling and reports the samples taken.
/// `cmd` with the hang recorder in its ranks' environment unless `no_record`: the
/// command, and variables for the launcher's own environment where that is the way.
fn recorded(
    cmd: &[std::ffi::OsString],
    no_record: bool,
    who: &str,
) -> (
    Vec<std::ffi::OsString>,
    Vec<(&'static str, std::ffi::OsString)>,
) {
    use mqd::recording;
    if no_record {
        return (cmd.to_vec(), Vec::new());
    }
    let Some(library) = recording::library() else {
        eprintln!(
            "{who}: the hang recorder ({}) is not beside mqd: the job runs without records (set MQD_RECORDER to its path, or --no-record)",
            recording::LIBRARY
        );
        return (cmd.to_vec(), Vec::new());
    };
    let launcher = cmd
        .first()
        .map_or(recording::Launcher::Other, |p| recording::launcher_of(p));
    // A recorder that exports a procedure the MPI lacks answers the program's probes for
    // it wrongly: without a fitted copy, no recorder.
    let (library, mpi) = match recording::for_job(cmd, launcher, &library) {
        Ok(found) => found,
        Err(why) => {
            eprintln!("{who}: the job runs without the hang recorder: {why}");
            return (cmd.to_vec(), Vec::new());
        }
    };
    let existing = std::env::var_os("LD_PRELOAD");
    let variables = recording::variables(&library, &mpi, existing.as_deref());
    let r = recording::with_recorder(cmd, launcher, variables);
    (r.cmd, r.env)
}

/// This program as the host of an isolated library: `mqd library-host DLL`
/// (`Commands::LibraryHost`).
fn library_host() -> Option<mqd_library_host::helper::Helper> {
    helper(&["library-host"])
}

/// This program run with `args` (a hidden subcommand).
fn helper(args: &[&str]) -> Option<mqd_library_host::helper::Helper> {
    let exe = std::env::current_exe().ok()?;
    Some(mqd_library_host::helper::Helper::new(exe, args))
}
