//! `mqd`: dump the MPI message queues of live processes or whole jobs.

use clap::{Args, Parser, Subcommand};
use mqd::demo::DemoJob;
use mqd::progress::ProgressLine;
use mqd::render::{dot, groups, json, text};
use mqd::{exit_code, verdict_exit_code};
use mqd_debugger::acquire::{self, Job, LaunchOptions};
use mqd_debugger::dump::{self, Failure, FailureKind, JobContext, ProcessRef};
use mqd_model::document::StatsDocument;
use mqd_model::{Acquisition, JobDump};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// Show who waits for whom in an MPI job: the communicators, pending sends,
/// posted receives and unexpected messages of each process, read through the
/// MPI library's message queue library (MPIR_dll_name), as TotalView and DDT do.
///
/// Exit codes: 0 no deadlock; 8 deadlock; 9 undetermined (a rank not dumped, a
/// wait not followed, or only pending operations that may be non-blocking);
/// 1 other failure; 2 bad usage; when nothing could be dumped: 3 no such process,
/// 4 not permitted (ptrace), 5 not an MPI process or no queues, 6 no debug
/// information, 7 message queue library missing or incompatible.
#[derive(Parser)]
#[command(name = "mqd", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Args, Clone)]
struct Output {
    /// Message queue library to use (ours, MPICH's libtvmpich.so, Open MPI's
    /// libompi_dbg_msgq.so). Default: the target's MPIR_dll_name, else the
    /// libmqd_mpich.so built with mqd.
    #[arg(long, value_name = "PATH")]
    dll: Option<PathBuf>,
    /// Print one JSON document (schema mqd/1) instead of text: the same as --format json.
    #[arg(long)]
    json: bool,
    /// What to print: text (rank sets that share a state, then the diagnosis), json
    /// (per-rank and aggregated views and the diagnosis), or dot (the wait-for graph
    /// for Graphviz).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// In text, list every rank rather than rank sets that share a state.
    #[arg(long)]
    per_rank: bool,
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

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Dot,
}

#[derive(Subcommand)]
enum Commands {
    /// Stop the processes of a job (in parallel), dump their queues, say who waits
    /// for whom, and let them go (they keep running). Same as `dump`.
    Attach {
        /// Process ids of MPI processes.
        #[arg(required = true, value_name = "PID")]
        pids: Vec<i32>,
        #[command(flatten)]
        output: Output,
    },
    /// Sample a job several times, letting it run between samples, and report only
    /// the waits that persist: a cycle that persists is a deadlock, one that
    /// dissolves is traffic.
    Watch {
        /// Number of samples.
        #[arg(long, default_value_t = 3)]
        samples: usize,
        /// Seconds between samples.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// The job's starter (mpiexec) instead of a list of pids.
        #[arg(long, value_name = "STARTER_PID", conflicts_with = "pids")]
        job: Option<i32>,
        /// Process ids of MPI processes.
        #[arg(value_name = "PID", required_unless_present = "job")]
        pids: Vec<i32>,
        #[command(flatten)]
        output: Output,
    },
    /// Attach to processes, dump their queues, detach (they keep running).
    Dump {
        /// Process ids of MPI processes.
        #[arg(required = true, value_name = "PID")]
        pids: Vec<i32>,
        #[command(flatten)]
        output: Output,
    },
    /// Dump every rank of a running job, found through its starter (mpiexec)'s
    /// MPIR process table.
    Job {
        /// Pid of the starter (mpiexec, or the fixture starter).
        #[arg(value_name = "STARTER_PID")]
        starter: i32,
        #[command(flatten)]
        output: Output,
    },
    /// Start a job under mqd (MPIR or MPI2DD), let it run, dump every rank.
    Launch {
        /// Seconds to let the job run before stopping it for the dump.
        #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
        delay: f64,
        /// Leave the job running after the dump (default: terminate it).
        #[arg(long)]
        keep: bool,
        #[command(flatten)]
        output: Output,
        /// The starter and its arguments, e.g. `-- mpiexec -n 4 ./ring`.
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Run the bundled 4-rank demo job (an MPI_Ssend ring that deadlocks), dump
    /// it and say why it hangs. Builds nothing: the demo job is inside mqd.
    Demo {
        #[command(flatten)]
        output: Output,
    },
    /// Dump the queues of a crashed (or gcore'd) job post mortem, from its ELF core
    /// files, one per rank: several cores of one job are dumped as one job.
    Core {
        /// Core files, from the kernel (ulimit -c) or gcore.
        #[arg(required = true, value_name = "CORE")]
        cores: Vec<PathBuf>,
        /// The program's executable, when the cores do not name their files (no
        /// NT_FILE note) or it moved since the crash.
        #[arg(long, value_name = "PATH")]
        exe: Option<PathBuf>,
        #[command(flatten)]
        output: Output,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("mqd: {}", f.message);
            ExitCode::from(exit_code(f.kind))
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
        } => watch(samples.max(1), interval, job, pids, &output),
        Commands::Dump { pids, output } | Commands::Attach { pids, output } => {
            let processes: Vec<ProcessRef> = pids.into_iter().map(ProcessRef::pid).collect();
            let job = dump_processes(&processes, &output, &JobContext::new(Acquisition::Attach))?;
            Ok(print(&job, &output))
        }
        Commands::Job { starter, output } => {
            let job = acquire::attach_job(starter)?;
            Ok(print(&dump_job(&job, &output)?, &output))
        }
        Commands::Launch {
            delay,
            keep,
            output,
            cmd,
        } => {
            let (program, args) = cmd.split_first().expect("clap requires a command");
            let mut command = Command::new(program);
            // The job's own output must not mix with a JSON document on stdout.
            command.args(args).stdout(Stdio::from(std::io::stderr()));
            launch_and_dump(command, delay, keep, &output)
        }
        Commands::Core { cores, exe, output } => {
            let opened = dump::open_cores(&cores, exe.as_deref());
            for target in opened.iter().flatten() {
                for problem in target.file_problems() {
                    eprintln!(
                        "mqd: warning: {}: {problem}",
                        target.process.path().display()
                    );
                }
            }
            let job = dump::dump_cores(
                opened,
                output.dll.as_deref(),
                &JobContext::new(Acquisition::Core),
            )?;
            Ok(print(&job, &output))
        }
        Commands::Demo { mut output } => {
            let demo = DemoJob::unpack().map_err(|e| {
                Failure::new(
                    FailureKind::Other,
                    format!("cannot unpack the demo job: {e}"),
                )
            })?;
            // The demo job names no library: it is shown with the one that goes with mqd.
            if output.dll.is_none() {
                output.dll = mqd_debugger::bundled_library();
            }
            let mut command = demo.command();
            command.stdout(Stdio::null()).stderr(Stdio::null());
            launch_and_dump(command, 1.0, false, &output)
        }
    }
}

fn launch_and_dump(
    command: Command,
    delay: f64,
    keep: bool,
    output: &Output,
) -> Result<ExitCode, Failure> {
    let mut job = acquire::launch_with(command, &LaunchOptions::default())?;
    let outcome = (|| {
        acquire::release_ranks(&job)?;
        std::thread::sleep(Duration::from_secs_f64(delay.clamp(0.0, 3600.0)));
        dump_job(&job, output)
    })();
    if !keep && let Some(mut starter) = job.starter.take() {
        // The starter forwards SIGTERM to its ranks.
        let _ = Command::new("kill").arg(starter.id().to_string()).status();
        let _ = starter.wait();
    }
    Ok(print(&outcome?, output))
}

fn dump_job(job: &Job, output: &Output) -> Result<JobDump, Failure> {
    dump_processes(&dump::job_processes(job), output, &JobContext::of_job(job))
}

/// [`dump::dump_processes`]; with `--stats`, what each process cost, on stderr.
fn dump_processes(
    processes: &[ProcessRef],
    output: &Output,
    context: &JobContext,
) -> Result<JobDump, Failure> {
    let progress = ProgressLine::new(processes.len());
    if !output.stats {
        return dump::dump_processes(processes, output.dll.as_deref(), context, &progress);
    }
    let (job, costs) =
        dump::dump_processes_counted(processes, output.dll.as_deref(), context, &progress)?;
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
                    }
                })
                .collect(),
        },
    };
    match serde_json::to_string(&stats) {
        Ok(line) => eprintln!("{line}"),
        Err(e) => eprintln!("mqd: cannot write the statistics: {e}"),
    }
    Ok(job)
}

fn print(job: &JobDump, output: &Output) -> ExitCode {
    let diagnosis = mqd_analysis::diagnose(job);
    let format = if output.json {
        Format::Json
    } else {
        output.format
    };
    // Streamed through one buffer: a big job has millions of values.
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = match format {
        Format::Json => {
            let groups = mqd_analysis::aggregate(job);
            let doc = json::job_document(job, &groups, &diagnosis);
            serde_json::to_writer(&mut stdout, &doc)
                .map_err(std::io::Error::from)
                .and_then(|()| stdout.write_all(b"\n"))
        }
        Format::Dot => {
            stdout.write_all(dot::to_dot(job, &diagnosis, &dot::DotOptions::default()).as_bytes())
        }
        Format::Text => {
            let mut out = if output.per_rank || job.ranks.len() <= 1 {
                text::job_text(job)
            } else {
                groups::groups_text(&mqd_analysis::aggregate(job)) + "\n"
            };
            out.push_str(&text::diagnosis_text(job, &diagnosis));
            if !out.ends_with('\n') {
                out.push('\n');
            }
            stdout.write_all(out.as_bytes())
        }
    };
    if let Err(e) = written.and_then(|()| stdout.flush()) {
        eprintln!("mqd: cannot write the dump to standard output: {e}");
        return ExitCode::from(exit_code(FailureKind::Other));
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
    ExitCode::from(verdict_exit_code(diagnosis.verdict))
}

/// `mqd watch`: dump the job `samples` times, `interval` seconds apart (the job runs
/// in between: every dump detaches), and keep only what persists.
fn watch(
    samples: usize,
    interval: f64,
    job: Option<i32>,
    pids: Vec<i32>,
    output: &Output,
) -> Result<ExitCode, Failure> {
    let mut dumps = Vec::with_capacity(samples);
    for i in 0..samples {
        if i > 0 {
            std::thread::sleep(Duration::from_secs_f64(interval.clamp(0.0, 3600.0)));
        }
        let dump = match job {
            Some(starter) => dump_job(&acquire::attach_job(starter)?, output)?,
            None => {
                let processes: Vec<ProcessRef> =
                    pids.iter().copied().map(ProcessRef::pid).collect();
                dump_processes(&processes, output, &JobContext::new(Acquisition::Attach))?
            }
        };
        dumps.push(dump);
    }
    let persistence = mqd_analysis::persistent_dumps(&dumps);
    let mut stdout = std::io::stdout().lock();
    let written = if output.json || output.format == Format::Json {
        let doc = json::watch_document(&dumps, &persistence, interval);
        serde_json::to_writer(&mut stdout, &doc)
            .map_err(std::io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
    } else {
        write!(stdout, "{}", text::persistence_text(&dumps, &persistence))
    };
    if let Err(e) = written.and_then(|()| stdout.flush()) {
        eprintln!("mqd: cannot write to standard output: {e}");
        return Ok(ExitCode::from(exit_code(FailureKind::Other)));
    }
    Ok(ExitCode::SUCCESS)
}
