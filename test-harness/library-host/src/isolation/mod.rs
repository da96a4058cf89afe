//! A foreign MQD library in a process of its own, so that its crash costs one rank.
//!
//! MPICH's `libtvmpich.so` dereferences NULL when a communicator was freed between two
//! displays of a session, and a library read from any MPI may have worse bugs. Loaded
//! into mqd, its crash would end mqd with every other rank undumped. So mqd runs such a
//! library in a *library host*: a child process (`mqd library-host DLL`) that loads it
//! and displays the processes mqd names, asking mqd over a pipe for every byte, symbol
//! and type (reads in 4 KiB blocks, kept for the session). mqd stays the tracer of every
//! process: when the host dies (a signal) or stops answering (a hang), mqd reports the
//! rank it was displaying, starts a new host for the next ranks, and detaches every
//! process as always. mqd's own library, which is fuzzed and never crashes on any
//! memory, runs in process unless asked otherwise.

mod child;
mod displayed;
pub mod frames;

pub use child::{ServeError, serve};

use crate::callbacks::Counters;
use crate::failure::{Failure, FailureKind};
use crate::helper::Helper;
use displayed::{Displayed, counters_from};
use frames::{ANSWER, CALL, DISPLAY, DONE, FATAL, Fields, Frame, Op, READY};
use mqd_model::RankDump;
use mqd_target::{ByteOrder, Target};
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::Duration;

/// Whether a library runs in a host process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Foreign libraries in a host, mqd's own in process.
    #[default]
    Auto,
    /// Every library in a host.
    Always,
    /// Every library in process.
    Never,
}

impl Isolation {
    /// Whether `version` (the library's `mqs_version_string`) goes to a host.
    pub fn isolates(self, version: &str) -> bool {
        match self {
            Isolation::Always => true,
            Isolation::Never => false,
            Isolation::Auto => !version.starts_with(OWN_VERSION_PREFIX),
        }
    }
}

/// How mqd's own library names itself.
const OWN_VERSION_PREFIX: &str = "mqd message queue support";

/// How long a host may be silent (neither asking nor answering) before it is taken for
/// hung: a display asks for memory all along, so this is no limit on large queues.
pub const SILENCE: Duration = Duration::from_secs(30);

/// A running host: the child and the pipes to it.
pub struct Running {
    /// The child.
    pub child: Child,
    /// Its standard input.
    pub to: BufWriter<ChildStdin>,
    /// Its standard output.
    pub from: BufReader<ChildStdout>,
}

impl Running {
    /// Starts `HELPER DLL` with pipes on its standard input and output, its standard
    /// error `stderr`.
    pub fn spawn(helper: &Helper, dll: &Path, stderr: Stdio) -> Result<Running, String> {
        let mut child = helper
            .command()
            .arg(dll)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", helper.program.display()))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("no pipes to the library host".into());
        };
        Ok(Running {
            child,
            to: BufWriter::new(to),
            from: BufReader::new(from),
        })
    }

    /// Ends a host that did its work: closing its input ends it; one that has not
    /// ended within 5 s is killed.
    pub fn finish(self) {
        let Running { mut child, to, .. } = self;
        drop(to);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while matches!(child.try_wait(), Ok(None)) {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The front end's side: the processes the hosts display, served to them, and the host
/// of the moment (a new one after a crash).
pub struct LibraryHost {
    helper: Helper,
    dll: PathBuf,
    silence: Duration,
    /// Every process given so far, by its number: kept (and so attached) until the end,
    /// since the library may come back to any of them.
    targets: Vec<Box<dyn Target>>,
    running: Option<Running>,
    /// Hosts that died or hung, for the record.
    pub lost_hosts: usize,
}

impl LibraryHost {
    /// Hosts of `dll`, started as `HELPER DLL` (`mqd library-host DLL`). The silence
    /// allowed is [`SILENCE`], or `$MQD_LIBRARY_SILENCE` seconds.
    pub fn new(helper: &Helper, dll: &Path) -> LibraryHost {
        LibraryHost {
            helper: helper.clone(),
            dll: dll.to_owned(),
            silence: silence(),
            targets: Vec::new(),
            running: None,
            lost_hosts: 0,
        }
    }

    fn start(&self) -> Result<Running, String> {
        let mut running = Running::spawn(&self.helper, &self.dll, Stdio::inherit())?;
        match self.next(&mut running) {
            Ok((READY, _)) => Ok(running),
            Ok((FATAL, body)) => {
                let why = Fields::new(&body)
                    .str()
                    .unwrap_or(frames::MALFORMED)
                    .to_owned();
                let _ = running.child.wait();
                Err(why)
            }
            Ok((tag, _)) => Err(self.lose(running, &format!("said {tag} first"))),
            Err(why) => Err(self.lose(running, &why)),
        }
    }

    /// The host's next frame, within the silence allowed.
    fn next(&self, running: &mut Running) -> Result<(u8, Vec<u8>), String> {
        frames::receive_within(&mut running.from, self.silence)
    }

    /// Ends a host that failed and says how it ended.
    fn lose(&self, mut running: Running, why: &str) -> String {
        let how = end_child(&mut running.child, why);
        format!("the MQD library {} {how}", self.dll.display())
    }

    /// Displays `target` in a host: `dump` gets its message and queues (or why not), as
    /// `display_into` in process gives them, and the counters of the display. A host
    /// that dies or hangs costs this process only: it is reported, and the next
    /// process gets a new host.
    ///
    /// Processes are numbered from 0 in the order they are given, for [`redisplay`].
    ///
    /// [`redisplay`]: LibraryHost::redisplay
    pub fn display(
        &mut self,
        target: Box<dyn Target>,
        debug_info: bool,
        hint: &str,
        rank: Option<i32>,
        dump: &mut RankDump,
    ) -> (Result<(), Failure>, Option<Counters>) {
        let id = self.targets.len();
        self.targets.push(target);
        self.show(id, false, debug_info, hint, rank, dump)
    }

    /// Displays process `id` again, stopped again as `target`, in the same session of
    /// the library (which keeps what it knew of the process, as a debugger's does from
    /// one stop to the next); a host started since knows nothing of it.
    pub fn redisplay(
        &mut self,
        id: usize,
        target: Box<dyn Target>,
        dump: &mut RankDump,
    ) -> (Result<(), Failure>, Option<Counters>) {
        if id >= self.targets.len() {
            return self.failed(dump, format!("no process {id} was displayed"));
        }
        self.targets[id] = target;
        self.show(id, true, true, "", None, dump)
    }

    fn show(
        &mut self,
        id: usize,
        again: bool,
        debug_info: bool,
        hint: &str,
        rank: Option<i32>,
        dump: &mut RankDump,
    ) -> (Result<(), Failure>, Option<Counters>) {
        let name = self.targets[id].name();
        let id = id as u32;
        let mut running = match self.running.take() {
            Some(r) => r,
            None => match self.start() {
                Ok(r) => r,
                Err(why) => return self.failed(dump, why),
            },
        };
        let request = Frame::new(DISPLAY)
            .u32(id)
            .u8(u8::from(again))
            .u32(rank.unwrap_or(-1) as u32)
            .u8(u8::from(debug_info))
            .str(&name)
            .str(hint)
            .send(&mut running.to);
        if let Err(e) = request {
            let why = self.lose(running, &format!("cannot be written to: {e}"));
            return self.failed(dump, why);
        }
        loop {
            match self.next(&mut running) {
                Ok((CALL, body)) => {
                    let answer = self.answer(&body);
                    if let Err(e) = answer.send(&mut running.to) {
                        let why = self.lose(running, &format!("cannot be written to: {e}"));
                        return self.failed(dump, why);
                    }
                }
                Ok((DONE, body)) => {
                    let displayed = Fields::new(&body)
                        .str()
                        .ok()
                        .and_then(|json| serde_json::from_str::<Displayed>(json).ok());
                    let Some(displayed) = displayed else {
                        let why = self.lose(running, "sent a malformed display");
                        return self.failed(dump, why);
                    };
                    self.running = Some(running);
                    dump.rank = displayed.dump.rank;
                    dump.message = displayed.dump.message;
                    dump.lists_blocking_sends = displayed.dump.lists_blocking_sends;
                    dump.outcome = displayed.dump.outcome;
                    let failure = displayed.failure;
                    let counters = counters_from(displayed.counters);
                    return (failure.map_or(Ok(()), Err), Some(counters));
                }
                Ok((tag, _)) => {
                    let why = self.lose(running, &format!("sent message {tag} mid-display"));
                    return self.failed(dump, why);
                }
                Err(e) => {
                    let why = self.lose(running, &e);
                    return self.failed(dump, why);
                }
            }
        }
    }

    fn failed(
        &mut self,
        dump: &mut RankDump,
        why: String,
    ) -> (Result<(), Failure>, Option<Counters>) {
        self.lost_hosts += 1;
        let message = format!(
            "{why} while reading this process's queues; the process was left as it was, and the other processes are read by a new instance of the library"
        );
        dump.outcome = Err(message.clone());
        (Err(Failure::new(FailureKind::Library, message)), None)
    }

    /// The answer to one callback of a host.
    fn answer(&self, body: &[u8]) -> Frame {
        let reply = Frame::new(ANSWER);
        let mut f = Fields::new(body);
        let (Ok(id), Ok(op)) = (f.u32(), f.u8()) else {
            return reply;
        };
        let (Some(target), Some(op)) = (self.targets.get(id as usize), Op::from_u8(op)) else {
            return reply;
        };
        let order = |o: ByteOrder| match o {
            ByteOrder::Little => 1,
            ByteOrder::Big => 2,
        };
        match op {
            Op::Read => {
                let (Ok(addr), Ok(len)) = (f.u64(), f.u32()) else {
                    return reply.u8(2).str(frames::MALFORMED);
                };
                if len > frames::MAX_FRAME / 2 {
                    return reply.u8(2).str("a read too large");
                }
                let mut buf = vec![0u8; len as usize];
                match target.read_memory(addr, &mut buf) {
                    Ok(()) => reply.u8(0).bytes(&buf),
                    Err(mqd_target::TargetError::Unmapped { .. }) => reply.u8(1),
                    Err(e) => reply.u8(2).str(&e.to_string()),
                }
            }
            Op::Symbol => reply.opt_u64(f.str().ok().and_then(|n| target.find_symbol(n))),
            Op::Function => reply.opt_u64(f.str().ok().and_then(|n| target.find_function(n))),
            Op::Type => reply.opt_u64(
                f.str()
                    .ok()
                    .and_then(|n| target.find_type(n))
                    .map(|t| t.0 as u64),
            ),
            Op::Size => reply.opt_u64(
                f.u64()
                    .ok()
                    .and_then(|t| target.type_size(mqd_target::TypeId(t as usize))),
            ),
            Op::Field => {
                let ty = f.u64().ok();
                let field = f.str().ok();
                reply.opt_u64(ty.zip(field).and_then(|(t, name)| {
                    target.field_offset(mqd_target::TypeId(t as usize), name)
                }))
            }
            Op::Abi => {
                let abi = target.abi();
                reply
                    .u8(abi.short)
                    .u8(abi.int)
                    .u8(abi.long)
                    .u8(abi.long_long)
                    .u8(abi.pointer)
            }
            Op::ByteOrder => reply.u8(order(target.byte_order())),
            Op::ImageByteOrder => reply.u8(target.image_byte_order().map_or(0, order)),
        }
    }
}

impl Drop for LibraryHost {
    fn drop(&mut self) {
        // Closing its input ends the host; then the processes may go (dropped after).
        if let Some(running) = self.running.take() {
            running.finish();
        }
    }
}

/// The silence allowed a host: [`SILENCE`], or `$MQD_LIBRARY_SILENCE` seconds.
pub fn silence() -> Duration {
    std::env::var("MQD_LIBRARY_SILENCE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e6)
        .map_or(SILENCE, Duration::from_secs_f64)
}

/// Ends a host child that failed (`why`: "ended" when its output ended) and says how
/// it ended: "crashed (SIGSEGV)", "exited with status 3", or `why`.
pub fn end_child(child: &mut Child, why: &str) -> String {
    let _ = child.kill();
    let status = child.wait();
    use std::os::unix::process::ExitStatusExt;
    match status.as_ref().ok().and_then(|s| s.signal()) {
        Some(signal) if why == "ended" => format!("crashed ({})", signal_name(signal)),
        _ if why == "ended" => match status.ok().and_then(|s| s.code()) {
            Some(code) => format!("exited with status {code}"),
            None => "ended".into(),
        },
        _ => why.to_owned(),
    }
}

/// A signal's name ("SIGSEGV").
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.into()
}
