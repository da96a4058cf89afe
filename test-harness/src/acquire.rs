//! Finding the processes of an MPI job, as TotalView does: MPIR and MPI2DD.
//!
//! A debugger debugs the job's *starter* (`mpiexec`) and learns the job from it
//! (`shared/spec/acquisition.md`):
//!
//! - [`launch`] starts the starter under ptrace, tells it a debugger is there
//!   (`MPIR_being_debugged = 1`, or `MPI2DD_FLAG_BEING_DEBUGGED`), plants a breakpoint at
//!   `MPIR_Breakpoint` (or `MPI2DD_breakpoint`) and lets it run. When the breakpoint is
//!   hit with the job spawned it reads the process table, and an abort string if the job
//!   aborts; then it removes the breakpoint and detaches, leaving the starter running.
//! - [`attach_job`] reads the process table of a starter that is already running.
//! - [`release_ranks`] lets ranks held in `MPI_Init` go (`MPIR_debug_gate = 1`).
//! - [`read_dll_name`] is the message-queue library a rank names (`MPIR_dll_name`).
//!
//! ```no_run
//! # use mqd_harness::acquire::{launch, release_ranks};
//! let job = launch(&["mpiexec".into(), "-n".into(), "4".into(), "./app".into()])?;
//! for rank in &job.ranks {
//!     println!("rank {} is pid {} on {}", rank.rank, rank.pid, rank.host);
//! }
//! release_ranks(&job)?;
//! # Ok::<(), mqd_harness::acquire::AcquireError>(())
//! ```
//!
//! Target structures are decoded from bytes with the target's byte order and pointer
//! size; `MPIR_PROCDESC` is laid out from the starter's DWARF (natural C layout when it
//! has none), `MPI2DD_INFO` and `MPI2DD_PROCDESC` are packed and fixed by the draft.

use crate::debuginfo::{AddressSpace, DebugInfoError};
use crate::live::{
    AttachError, LiveError, LiveProcess, LiveTarget, StopReason, read_c_string_with,
};
use crate::target::{ByteOrder, Target, TargetError};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Most ranks a process table may list before it is taken as garbage.
pub const MAX_RANKS: i64 = 1 << 22;
/// Longest host or executable name read from the target.
pub const MAX_NAME: usize = 4096;

const MPIR_DEBUG_SPAWNED: i64 = 1;
const MPIR_DEBUG_ABORTING: i64 = 2;

const MPI2DD_MAGIC: [u8; 5] = *b"MPI2\x7f";
const MPI2DD_DEBUG_START: u8 = 1;
const MPI2DD_DEBUG_SPAWN: u8 = 2;
const MPI2DD_DEBUG_ABORT: u8 = 8;
/// `debugger_flags` bits.
const MPI2DD_FLAG_GATE: u32 = 0x1;
const MPI2DD_FLAG_BEING_DEBUGGED: u32 = 0x2;

/// The acquisition interface a job was found through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interface {
    /// MPIR (`MPIR_proctable`, `MPIR_Breakpoint`): every MPI launcher.
    Mpir,
    /// The MPI2DD draft (`MPI2DD_info`, `MPI2DD_breakpoint`).
    Mpi2dd,
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Interface::Mpir => "MPIR",
            Interface::Mpi2dd => "MPI2DD",
        })
    }
}

/// One process of the job, from the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankInfo {
    /// Rank in `MPI_COMM_WORLD` (the table index for MPIR, explicit for MPI2DD).
    pub rank: i32,
    /// Where it runs.
    pub host: String,
    /// Its executable, as the starter names it.
    pub executable: String,
    /// Its process id on `host`.
    pub pid: i32,
}

/// A job found through its starter.
#[derive(Debug)]
pub struct Job {
    /// The starter's pid.
    pub starter_pid: i32,
    /// The processes, by rank.
    pub ranks: Vec<RankInfo>,
    /// The message-queue library the starter names (MPI2DD `dll_name_64`, or an
    /// `MPIR_dll_name` in the starter); ranks name theirs ([`read_dll_name`]).
    pub dll_name: Option<String>,
    /// The abort string, when the job aborted while watched.
    pub abort_message: Option<String>,
    /// How the job was found.
    pub via: Interface,
    /// The starter, when [`launch`] started it: wait for it or kill it.
    pub starter: Option<Child>,
}

/// Why a job could not be acquired. Each variant displays as a one-line cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireError {
    /// Attaching to a process failed.
    Attach(AttachError),
    /// Controlling a process failed.
    Live(LiveError),
    /// The objects of a process could not be read.
    DebugInfo {
        /// The process.
        pid: i32,
        /// Why.
        error: DebugInfoError,
    },
    /// Nothing to launch.
    EmptyCommand,
    /// The process has neither MPIR nor MPI2DD symbols.
    NotMpi {
        /// The process.
        pid: i32,
        /// Its executable.
        executable: String,
    },
    /// An acquisition structure makes no sense (bad magic, size out of range, ...).
    BadData {
        /// The process.
        pid: i32,
        /// What is wrong.
        what: String,
    },
    /// Target memory could not be read or written.
    Memory {
        /// The process.
        pid: i32,
        /// What was being read.
        what: String,
        /// The error.
        error: TargetError,
    },
    /// The starter exited before the job was spawned.
    Exited {
        /// The starter.
        pid: i32,
        /// How it ended.
        how: String,
    },
    /// The job did not spawn in time.
    Timeout {
        /// The starter.
        pid: i32,
        /// How long was waited.
        waited: Duration,
    },
    /// A running starter has not spawned its job yet (empty process table).
    NotSpawned {
        /// The starter.
        pid: i32,
    },
    /// A rank could not be released.
    Release {
        /// The rank.
        rank: i32,
        /// Its pid.
        pid: i32,
        /// Why.
        cause: String,
    },
    /// Breakpoints are not implemented for this architecture.
    Unsupported(&'static str),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Attach(e) => write!(f, "{e}"),
            AcquireError::Live(e) => write!(f, "{e}"),
            AcquireError::DebugInfo { pid, error } => {
                write!(f, "cannot read the symbols of pid {pid}: {error}")
            }
            AcquireError::EmptyCommand => write!(f, "no command to launch"),
            AcquireError::NotMpi { pid, executable } => write!(
                f,
                "pid {pid} ({executable}) is not an MPI starter: it has neither MPIR_Breakpoint/MPIR_proctable nor MPI2DD_info"
            ),
            AcquireError::BadData { pid, what } => write!(f, "pid {pid}: {what}"),
            AcquireError::Memory { pid, what, error } => {
                write!(f, "pid {pid}: cannot access {what}: {error}")
            }
            AcquireError::Exited { pid, how } => {
                write!(f, "the starter (pid {pid}) {how} before spawning the job")
            }
            AcquireError::Timeout { pid, waited } => write!(
                f,
                "the starter (pid {pid}) did not spawn the job within {:.1}s",
                waited.as_secs_f64()
            ),
            AcquireError::NotSpawned { pid } => write!(
                f,
                "pid {pid} has not spawned its job yet (its process table is empty)"
            ),
            AcquireError::Release { rank, pid, cause } => {
                write!(f, "cannot release rank {rank} (pid {pid}): {cause}")
            }
            AcquireError::Unsupported(what) => write!(f, "not supported: {what}"),
        }
    }
}

impl std::error::Error for AcquireError {}

impl From<AttachError> for AcquireError {
    fn from(e: AttachError) -> Self {
        AcquireError::Attach(e)
    }
}

impl From<LiveError> for AcquireError {
    fn from(e: LiveError) -> Self {
        AcquireError::Live(e)
    }
}

/// Options of [`launch_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Longest wait from the start until the job is spawned.
    pub timeout: Duration,
    /// After the job is spawned, how long to keep watching the starter for an abort
    /// (MPIR state 2, MPI2DD `ABORT`) before detaching. Zero detaches at once.
    pub abort_grace: Duration,
    /// Use this interface even if the starter has both.
    pub interface: Option<Interface>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            timeout: Duration::from_secs(30),
            abort_grace: Duration::from_millis(300),
            interface: None,
        }
    }
}

/// The breakpoint instruction, and how far past it the trap leaves the program counter.
#[cfg(target_arch = "x86_64")]
fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Ok((&[0xcc], 1)) // int3
}
#[cfg(target_arch = "aarch64")]
fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Ok((&[0x00, 0x00, 0x20, 0xd4], 0)) // brk #0
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Err(AcquireError::Unsupported(
        "breakpoints on this architecture (x86_64 and aarch64 only)",
    ))
}

/// Scalars and strings of a target, in its byte order and sizes.
struct Mem<'a> {
    target: &'a dyn Target,
    pid: i32,
    order: ByteOrder,
    pointer: usize,
    int: usize,
}

impl<'a> Mem<'a> {
    fn new(target: &'a dyn Target, pid: i32) -> Mem<'a> {
        let sizes = target.type_sizes();
        Mem {
            target,
            pid,
            order: target.byte_order(),
            pointer: usize::try_from(sizes.pointer_size)
                .ok()
                .filter(|&s| s == 4 || s == 8)
                .unwrap_or(8),
            int: usize::try_from(sizes.int_size)
                .ok()
                .filter(|&s| matches!(s, 2 | 4 | 8))
                .unwrap_or(4),
        }
    }

    fn memory_error(&self, what: &str, error: TargetError) -> AcquireError {
        AcquireError::Memory {
            pid: self.pid,
            what: what.to_string(),
            error,
        }
    }

    fn bytes(&self, addr: u64, len: usize, what: &str) -> Result<Vec<u8>, AcquireError> {
        let mut buf = vec![0u8; len];
        self.target
            .read_memory(addr, &mut buf)
            .map_err(|e| self.memory_error(what, e))?;
        Ok(buf)
    }

    fn decode(&self, bytes: &[u8]) -> u64 {
        let mut value = 0u64;
        match self.order {
            ByteOrder::Little => {
                for &b in bytes.iter().rev() {
                    value = value << 8 | u64::from(b);
                }
            }
            ByteOrder::Big => {
                for &b in bytes {
                    value = value << 8 | u64::from(b);
                }
            }
        }
        value
    }

    fn encode(&self, value: u64, size: usize) -> Vec<u8> {
        let le = value.to_le_bytes();
        let mut bytes = le[..size].to_vec();
        if self.order == ByteOrder::Big {
            bytes.reverse();
        }
        bytes
    }

    /// Sign-extends a `size`-byte value.
    fn signed(value: u64, size: usize) -> i64 {
        let shift = 64 - 8 * size as u32;
        ((value << shift) as i64) >> shift
    }

    fn pointer_at(&self, bytes: &[u8], offset: usize) -> Option<u64> {
        Some(self.decode(bytes.get(offset..offset.checked_add(self.pointer)?)?))
    }

    fn int_at(&self, bytes: &[u8], offset: usize, size: usize) -> Option<i64> {
        Some(Self::signed(
            self.decode(bytes.get(offset..offset.checked_add(size)?)?),
            size,
        ))
    }

    fn read_int(&self, addr: u64, what: &str) -> Result<i64, AcquireError> {
        let bytes = self.bytes(addr, self.int, what)?;
        Ok(Self::signed(self.decode(&bytes), self.int))
    }

    fn read_pointer(&self, addr: u64, what: &str) -> Result<u64, AcquireError> {
        let bytes = self.bytes(addr, self.pointer, what)?;
        Ok(self.decode(&bytes))
    }

    /// A NUL-terminated string, at most [`MAX_NAME`] bytes; a null pointer is "".
    fn string(&self, addr: u64, what: &str) -> Result<String, AcquireError> {
        if addr == 0 {
            return Ok(String::new());
        }
        let bytes = read_c_string_with(addr, MAX_NAME, |at, buf| {
            // Reads are all or nothing: near the end of readable memory, go byte by byte.
            match self.target.read_memory(at, buf) {
                Ok(()) => Ok(buf.len()),
                Err(TargetError::Unmapped { .. }) => {
                    let mut n = 0;
                    while n < buf.len()
                        && self
                            .target
                            .read_memory(at + n as u64, &mut buf[n..n + 1])
                            .is_ok()
                    {
                        if buf[n] == 0 {
                            return Ok(n + 1);
                        }
                        n += 1;
                    }
                    Ok(n)
                }
                Err(e) => Err(e),
            }
        })
        .map_err(|e| self.memory_error(what, e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// `MPIR_PROCDESC` as laid out in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcdescLayout {
    host_name: usize,
    executable_name: usize,
    pid: usize,
    size: usize,
}

fn procdesc_layout(target: &dyn Target, mem: &Mem) -> ProcdescLayout {
    let p = mem.pointer;
    let int = mem.int;
    let natural = ProcdescLayout {
        host_name: 0,
        executable_name: p,
        pid: 2 * p,
        size: (2 * p + int).next_multiple_of(p.max(int)),
    };
    let from_dwarf = || {
        let ty = target.find_type("MPIR_PROCDESC")?;
        let layout = ProcdescLayout {
            host_name: usize::try_from(target.field_offset(ty, "host_name")?).ok()?,
            executable_name: usize::try_from(target.field_offset(ty, "executable_name")?).ok()?,
            pid: usize::try_from(target.field_offset(ty, "pid")?).ok()?,
            size: usize::try_from(target.type_size(ty)?).ok()?,
        };
        let fits = layout.host_name + p <= layout.size
            && layout.executable_name + p <= layout.size
            && layout.pid + int <= layout.size;
        fits.then_some(layout)
    };
    from_dwarf().unwrap_or(natural)
}

/// What the starter says about the job at one moment.
#[derive(Debug, Default)]
struct Published {
    spawned: bool,
    ranks: Vec<RankInfo>,
    dll_name: Option<String>,
    abort_message: Option<String>,
}

fn read_mpir(target: &dyn Target, pid: i32) -> Result<Published, AcquireError> {
    let mem = Mem::new(target, pid);
    let mut published = Published::default();
    let state = match target.find_symbol("MPIR_debug_state") {
        Some(addr) => mem.read_int(addr, "MPIR_debug_state")?,
        None => MPIR_DEBUG_SPAWNED,
    };
    let table = target.find_symbol("MPIR_proctable");
    let size = target.find_symbol("MPIR_proctable_size");
    if let (Some(table), Some(size)) = (table, size) {
        let table = mem.read_pointer(table, "MPIR_proctable")?;
        let size = mem.read_int(size, "MPIR_proctable_size")?;
        if !(0..=MAX_RANKS).contains(&size) {
            return Err(AcquireError::BadData {
                pid,
                what: format!("MPIR_proctable_size is {size}"),
            });
        }
        if size > 0 {
            if table == 0 {
                return Err(AcquireError::BadData {
                    pid,
                    what: format!("MPIR_proctable_size is {size} but MPIR_proctable is NULL"),
                });
            }
            let layout = procdesc_layout(target, &mem);
            let bytes = mem.bytes(table, size as usize * layout.size, "MPIR_proctable")?;
            for (rank, entry) in bytes.chunks_exact(layout.size).enumerate() {
                let bad = || AcquireError::BadData {
                    pid,
                    what: format!("MPIR_proctable[{rank}] is malformed"),
                };
                let host = mem.pointer_at(entry, layout.host_name).ok_or_else(bad)?;
                let exe = mem
                    .pointer_at(entry, layout.executable_name)
                    .ok_or_else(bad)?;
                let rank_pid = mem.int_at(entry, layout.pid, mem.int).ok_or_else(bad)?;
                published.ranks.push(RankInfo {
                    rank: rank as i32,
                    host: mem.string(host, &format!("MPIR_proctable[{rank}].host_name"))?,
                    executable: mem
                        .string(exe, &format!("MPIR_proctable[{rank}].executable_name"))?,
                    pid: rank_pid as i32,
                });
            }
            published.spawned = state == MPIR_DEBUG_SPAWNED || state == MPIR_DEBUG_ABORTING;
        }
    }
    if state == MPIR_DEBUG_ABORTING {
        let text = match target.find_symbol("MPIR_debug_abort_string") {
            Some(addr) => {
                let pointer = mem.read_pointer(addr, "MPIR_debug_abort_string")?;
                mem.string(pointer, "the abort string")?
            }
            None => String::new(),
        };
        published.abort_message = Some(text);
    }
    if let Some(addr) = target.find_symbol("MPIR_dll_name") {
        let name = mem.string(addr, "MPIR_dll_name")?;
        published.dll_name = (!name.is_empty()).then_some(name);
    }
    Ok(published)
}

/// `struct MPI2DD_INFO` (packed): offsets of the fields after the fixed 16-byte head.
struct Mpi2ddInfo {
    debug_state: u8,
    dll_name_64: u64,
    abort_string: u64,
    proctable: u64,
    proctable_size: i64,
}

const MPI2DD_DEBUGGER_FLAGS: u64 = 8;

fn read_mpi2dd_info(target: &dyn Target, pid: i32, addr: u64) -> Result<Mpi2ddInfo, AcquireError> {
    let mem = Mem::new(target, pid);
    let a = mem.pointer;
    // magic[5] version variant debug_state debugger_flags mpi_flags, 8 addresses,
    // 4 int32, padding[8].
    let size = 16 + 8 * a + 16 + 32;
    let bytes = mem.bytes(addr, size, "MPI2DD_info")?;
    if bytes[..5] != MPI2DD_MAGIC {
        return Err(AcquireError::BadData {
            pid,
            what: format!("MPI2DD_info has a bad magic {:02x?}", &bytes[..5]),
        });
    }
    if bytes[5] != 1 || bytes[6] != 1 {
        return Err(AcquireError::BadData {
            pid,
            what: format!(
                "MPI2DD_info version {} variant {} (only 1/1 is known)",
                bytes[5], bytes[6]
            ),
        });
    }
    let address = |i: usize| mem.pointer_at(&bytes, 16 + i * a).unwrap_or(0);
    Ok(Mpi2ddInfo {
        debug_state: bytes[7],
        dll_name_64: address(1),
        abort_string: address(4),
        proctable: address(5),
        proctable_size: mem.int_at(&bytes, 16 + 8 * a, 4).unwrap_or(0),
    })
}

fn read_mpi2dd(target: &dyn Target, pid: i32, addr: u64) -> Result<Published, AcquireError> {
    let mem = Mem::new(target, pid);
    let info = read_mpi2dd_info(target, pid, addr)?;
    let mut published = Published::default();
    let size = info.proctable_size;
    if !(0..=MAX_RANKS).contains(&size) {
        return Err(AcquireError::BadData {
            pid,
            what: format!("MPI2DD_info.proctable_size is {size}"),
        });
    }
    if size > 0 {
        if info.proctable == 0 {
            return Err(AcquireError::BadData {
                pid,
                what: format!("MPI2DD_info.proctable_size is {size} but proctable is NULL"),
            });
        }
        // host_name, executable_name, spawn_desc, comm_world_id, pid, rank (packed).
        let a = mem.pointer;
        let entry_size = 4 * a + 8;
        let bytes = mem.bytes(
            info.proctable,
            size as usize * entry_size,
            "the MPI2DD proctable",
        )?;
        for (i, entry) in bytes.chunks_exact(entry_size).enumerate() {
            let host = mem.pointer_at(entry, 0).unwrap_or(0);
            let exe = mem.pointer_at(entry, a).unwrap_or(0);
            published.ranks.push(RankInfo {
                rank: mem.int_at(entry, 4 * a + 4, 4).unwrap_or(-1) as i32,
                host: mem.string(host, &format!("proctable[{i}].host_name"))?,
                executable: mem.string(exe, &format!("proctable[{i}].executable_name"))?,
                pid: mem.int_at(entry, 4 * a, 4).unwrap_or(-1) as i32,
            });
        }
        published.ranks.sort_by_key(|r| r.rank);
        published.spawned = matches!(
            info.debug_state,
            MPI2DD_DEBUG_START | MPI2DD_DEBUG_SPAWN | MPI2DD_DEBUG_ABORT
        );
    }
    if info.debug_state == MPI2DD_DEBUG_ABORT {
        published.abort_message = Some(mem.string(info.abort_string, "abort_string")?);
    }
    if info.dll_name_64 != 0 {
        let name = mem.string(info.dll_name_64, "dll_name_64")?;
        published.dll_name = (!name.is_empty()).then_some(name);
    }
    Ok(published)
}

fn read_published(
    target: &dyn Target,
    pid: i32,
    via: Interface,
) -> Result<Published, AcquireError> {
    match via {
        Interface::Mpir => read_mpir(target, pid),
        Interface::Mpi2dd => {
            let addr = target
                .find_symbol("MPI2DD_info")
                .ok_or(AcquireError::BadData {
                    pid,
                    what: "MPI2DD_info vanished".into(),
                })?;
            read_mpi2dd(target, pid, addr)
        }
    }
}

/// The interface a starter offers and its breakpoint function.
fn detect(target: &dyn Target, prefer: Option<Interface>) -> Option<(Interface, u64)> {
    let mpi2dd = target
        .find_symbol("MPI2DD_info")
        .and(target.find_function("MPI2DD_breakpoint"))
        .map(|bp| (Interface::Mpi2dd, bp));
    let mpir = target
        .find_symbol("MPIR_debug_state")
        .and(target.find_function("MPIR_Breakpoint"))
        .map(|bp| (Interface::Mpir, bp));
    match prefer {
        Some(Interface::Mpir) => mpir,
        Some(Interface::Mpi2dd) => mpi2dd,
        None => mpi2dd.or(mpir),
    }
}

fn load_space(pid: i32) -> Result<AddressSpace, AcquireError> {
    AddressSpace::from_pid(pid).map_err(|error| AcquireError::DebugInfo { pid, error })
}

fn executable_of(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A planted breakpoint.
struct Breakpoint {
    addr: u64,
    saved: Vec<u8>,
    pc_adjust: u64,
}

impl Breakpoint {
    fn insert(process: &LiveProcess, addr: u64) -> Result<Breakpoint, AcquireError> {
        let (instruction, pc_adjust) = breakpoint_instruction()?;
        let memory = |error| AcquireError::Memory {
            pid: process.pid(),
            what: format!("the breakpoint at {addr:#x}"),
            error,
        };
        let mut saved = vec![0u8; instruction.len()];
        process.read(addr, &mut saved).map_err(memory)?;
        process.write(addr, instruction).map_err(memory)?;
        Ok(Breakpoint {
            addr,
            saved,
            pc_adjust,
        })
    }

    fn plant(&self, process: &LiveProcess) -> Result<(), AcquireError> {
        let (instruction, _) = breakpoint_instruction()?;
        process
            .write(self.addr, instruction)
            .map_err(|error| AcquireError::Memory {
                pid: process.pid(),
                what: format!("the breakpoint at {:#x}", self.addr),
                error,
            })
    }

    fn remove(&self, process: &LiveProcess) -> Result<(), AcquireError> {
        process
            .write(self.addr, &self.saved)
            .map_err(|error| AcquireError::Memory {
                pid: process.pid(),
                what: format!("the breakpoint at {:#x}", self.addr),
                error,
            })
    }

    /// Executes the instruction under the breakpoint (the thread's PC is at it).
    fn step_over(&self, process: &mut LiveProcess, tid: i32) -> Result<(), AcquireError> {
        self.remove(process)?;
        process.step(tid)?;
        self.plant(process)
    }
}

/// Where [`continue_to`] stopped.
enum Hit {
    /// The breakpoint, by this thread (its PC is back at the breakpoint address).
    Breakpoint(i32),
    /// The process executed a new program: its breakpoints are gone.
    Exec,
    /// The deadline passed; the process is running.
    TimedOut,
}

/// Lets the process run until it hits `bp`, passing every other signal on.
fn continue_to(
    process: &mut LiveProcess,
    bp: &Breakpoint,
    deadline: Instant,
) -> Result<Hit, AcquireError> {
    let pid = process.pid();
    loop {
        process.resume()?;
        let left = deadline.saturating_duration_since(Instant::now());
        let event = match process.wait_stop(left) {
            Ok(event) => event,
            Err(LiveError::Timeout { .. }) => return Ok(Hit::TimedOut),
            Err(e) => return Err(e.into()),
        };
        match event.reason {
            StopReason::Exited(code) => {
                return Err(AcquireError::Exited {
                    pid,
                    how: format!("exited with status {code}"),
                });
            }
            StopReason::Killed(sig) => {
                return Err(AcquireError::Exited {
                    pid,
                    how: format!("was killed by signal {sig}"),
                });
            }
            StopReason::Event(libc::PTRACE_EVENT_EXEC) => return Ok(Hit::Exec),
            StopReason::Signal(libc::SIGTRAP)
                if process.pc(event.tid)? == bp.addr.wrapping_add(bp.pc_adjust) =>
            {
                process.discard_signal(event.tid)?;
                process.set_pc(event.tid, bp.addr)?;
                return Ok(Hit::Breakpoint(event.tid));
            }
            // Anything else is the program's business: resume passes signals on.
            _ => {}
        }
    }
}

/// Tells the starter a debugger is there.
fn announce(target: &LiveTarget, pid: i32, via: Interface) -> Result<(), AcquireError> {
    let mem = Mem::new(target, pid);
    let write = |addr: u64, bytes: &[u8], what: &str| {
        target
            .process
            .write(addr, bytes)
            .map_err(|e| mem.memory_error(what, e))
    };
    match via {
        Interface::Mpir => {
            if let Some(addr) = target.find_symbol("MPIR_being_debugged") {
                write(addr, &mem.encode(1, mem.int), "MPIR_being_debugged")?;
            }
        }
        Interface::Mpi2dd => {
            let info = target.find_symbol("MPI2DD_info").unwrap_or(0);
            read_mpi2dd_info(target, pid, info)?;
            set_mpi2dd_flags(target, pid, info, MPI2DD_FLAG_BEING_DEBUGGED)?;
        }
    }
    Ok(())
}

fn set_mpi2dd_flags(
    target: &LiveTarget,
    pid: i32,
    info: u64,
    flags: u32,
) -> Result<(), AcquireError> {
    let mem = Mem::new(target, pid);
    let at = info + MPI2DD_DEBUGGER_FLAGS;
    let old = mem.decode(&mem.bytes(at, 4, "MPI2DD_info.debugger_flags")?) as u32;
    target
        .process
        .write(at, &mem.encode(u64::from(old | flags), 4))
        .map_err(|e| mem.memory_error("MPI2DD_info.debugger_flags", e))
}

/// Starts `cmd` (program and arguments) under the debugger and acquires its job (see
/// [`launch_with`]).
pub fn launch(cmd: &[OsString]) -> Result<Job, AcquireError> {
    let (program, args) = cmd.split_first().ok_or(AcquireError::EmptyCommand)?;
    let mut command = Command::new(program);
    command.args(args);
    launch_with(command, &LaunchOptions::default())
}

/// Starts a starter under the debugger, waits at its breakpoint until the job is spawned,
/// reads the process table and detaches, leaving the starter running (returned in
/// [`Job::starter`]). The ranks are not touched: if the starter holds them for the
/// debugger, [`release_ranks`] lets them go.
///
/// Only the starter's main thread is traced, and children it forks are not: a child that
/// runs `MPIR_Breakpoint` before it `exec`s would die of the breakpoint. If the starter
/// fails to spawn the job, it is killed.
pub fn launch_with(command: Command, options: &LaunchOptions) -> Result<Job, AcquireError> {
    breakpoint_instruction()?;
    let (process, mut child) = LiveProcess::spawn(command, options.timeout)?;
    match acquire_launched(process, options) {
        Ok(mut job) => {
            job.starter = Some(child);
            Ok(job)
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

fn acquire_launched(
    mut process: LiveProcess,
    options: &LaunchOptions,
) -> Result<Job, AcquireError> {
    let pid = process.pid();
    let started = Instant::now();
    let deadline = started + options.timeout;
    let mut ran_to_main = false;
    'image: loop {
        let target = LiveTarget::new(process, load_space(pid)?, None);
        let Some((via, bp_addr)) = detect(&target, options.interface) else {
            // The symbols may be in a library the dynamic linker has not loaded yet.
            let main = target.find_function("main");
            let (stopped, _) = target.into_parts();
            process = stopped;
            if let Some(main) = main.filter(|_| !ran_to_main) {
                ran_to_main = true;
                let bp = Breakpoint::insert(&process, main)?;
                match continue_to(&mut process, &bp, deadline)? {
                    Hit::Breakpoint(_) => bp.remove(&process)?,
                    Hit::Exec => {}
                    Hit::TimedOut => {
                        return Err(AcquireError::Timeout {
                            pid,
                            waited: options.timeout,
                        });
                    }
                }
                continue 'image;
            }
            return Err(AcquireError::NotMpi {
                pid,
                executable: executable_of(pid),
            });
        };
        let mut target = target;
        announce(&target, pid, via)?;
        let bp = Breakpoint::insert(&target.process, bp_addr)?;
        let mut job: Option<Published> = None;
        let mut watch_until = deadline;
        loop {
            let hit = continue_to(&mut target.process, &bp, watch_until);
            let tid = match hit {
                Ok(Hit::Breakpoint(tid)) => tid,
                Ok(Hit::Exec) => {
                    if let Some(published) = job {
                        // A new program: the breakpoint went with the old one.
                        return finish(target, None, published, via);
                    }
                    process = target.into_parts().0;
                    continue 'image;
                }
                Ok(Hit::TimedOut) => {
                    if let Some(published) = job {
                        target.process.interrupt()?;
                        return finish(target, Some(&bp), published, via);
                    }
                    return Err(AcquireError::Timeout {
                        pid,
                        waited: options.timeout,
                    });
                }
                Err(AcquireError::Exited { .. }) if job.is_some() => {
                    let published = job.take().expect("checked");
                    return finish(target, None, published, via);
                }
                Err(e) => return Err(e),
            };
            let now = read_published(&target, pid, via)?;
            match job.as_mut() {
                None if now.spawned || now.abort_message.is_some() => {
                    let done = now.abort_message.is_some() || options.abort_grace.is_zero();
                    job = Some(now);
                    if done {
                        return finish(target, Some(&bp), job.take().expect("set"), via);
                    }
                    watch_until = Instant::now() + options.abort_grace;
                }
                Some(published) if now.abort_message.is_some() => {
                    published.abort_message = now.abort_message;
                    if published.ranks.is_empty() {
                        published.ranks = now.ranks;
                    }
                    let published = job.take().expect("set");
                    return finish(target, Some(&bp), published, via);
                }
                _ => {}
            }
            bp.step_over(&mut target.process, tid)?;
        }
    }
}

/// Removes the breakpoint (when the image still has it) and detaches.
fn finish(
    target: LiveTarget,
    bp: Option<&Breakpoint>,
    published: Published,
    via: Interface,
) -> Result<Job, AcquireError> {
    let pid = target.process.pid();
    if let Some(bp) = bp {
        // The PC of a thread stopped at the breakpoint was rewound to it: with the
        // original instruction back, it simply runs on.
        bp.remove(&target.process)?;
    }
    match target.detach() {
        Ok(()) | Err(LiveError::Exited { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Job {
        starter_pid: pid,
        ranks: published.ranks,
        dll_name: published.dll_name,
        abort_message: published.abort_message,
        via,
        starter: None,
    })
}

/// Attaches to a running starter, reads its process table (and abort string, if it
/// aborted) and detaches.
pub fn attach_job(starter_pid: i32) -> Result<Job, AcquireError> {
    let process = LiveProcess::attach(starter_pid)?;
    let space = load_space(process.pid())?;
    let target = LiveTarget::new(process, space, None);
    let pid = target.process.pid();
    let via = if target.find_symbol("MPI2DD_info").is_some() {
        Interface::Mpi2dd
    } else if target.find_symbol("MPIR_proctable").is_some() {
        Interface::Mpir
    } else {
        return Err(AcquireError::NotMpi {
            pid,
            executable: executable_of(pid),
        });
    };
    let published = read_published(&target, pid, via)?;
    target.detach()?;
    if published.ranks.is_empty() && published.abort_message.is_none() {
        return Err(AcquireError::NotSpawned { pid });
    }
    Ok(Job {
        starter_pid: pid,
        ranks: published.ranks,
        dll_name: published.dll_name,
        abort_message: published.abort_message,
        via,
        starter: None,
    })
}

/// Lets the ranks of a job held for the debugger go: for each, waits until it runs its
/// own executable (a freshly forked rank may not have `exec`ed yet), attaches, writes
/// `MPIR_debug_gate = 1` (and sets `MPI2DD_FLAG_GATE` where it has `MPI2DD_info`) when
/// it has them, and detaches. Every rank is tried; the first failure is returned.
pub fn release_ranks(job: &Job) -> Result<(), AcquireError> {
    release_ranks_within(job, Duration::from_secs(10))
}

/// [`release_ranks`] waiting at most `timeout` for each rank to `exec`.
pub fn release_ranks_within(job: &Job, timeout: Duration) -> Result<(), AcquireError> {
    let mut first_error = None;
    for rank in &job.ranks {
        if let Err(e) = release_rank(rank, timeout)
            && first_error.is_none()
        {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

fn release_rank(rank: &RankInfo, timeout: Duration) -> Result<(), AcquireError> {
    let error = |cause: String| AcquireError::Release {
        rank: rank.rank,
        pid: rank.pid,
        cause,
    };
    let expected = Path::new(&rank.executable);
    if expected.is_absolute() && expected.exists() {
        let expected = canonical(expected);
        let deadline = Instant::now() + timeout;
        loop {
            match std::fs::read_link(format!("/proc/{}/exe", rank.pid)) {
                Ok(exe) if canonical(&exe) == expected => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(error("it has exited".into()));
                }
                // Not readable (permissions): attach will tell.
                Err(_) => break,
            }
            if Instant::now() >= deadline {
                return Err(error(format!(
                    "it did not start {} within {:.1}s",
                    rank.executable,
                    timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let process = LiveProcess::attach(rank.pid).map_err(|e| error(e.to_string()))?;
    let space = AddressSpace::from_pid(rank.pid).map_err(|e| error(e.to_string()))?;
    let target = LiveTarget::new(process, space, Some(rank.rank));
    let mem = Mem::new(&target, rank.pid);
    if let Some(gate) = target.find_symbol("MPIR_debug_gate") {
        target
            .process
            .write(gate, &mem.encode(1, mem.int))
            .map_err(|e| error(format!("cannot write MPIR_debug_gate: {e}")))?;
    }
    if let Some(info) = target.find_symbol("MPI2DD_info")
        && read_mpi2dd_info(&target, rank.pid, info).is_ok()
    {
        set_mpi2dd_flags(&target, rank.pid, info, MPI2DD_FLAG_GATE)
            .map_err(|e| error(e.to_string()))?;
    }
    target.detach().map_err(|e| error(e.to_string()))
}

/// The message-queue library a process names: its `MPIR_dll_name` (a `char[]`), else the
/// `dll_name_64` of its `MPI2DD_info`; `None` when it names none.
pub fn read_dll_name(target: &dyn Target) -> Option<String> {
    let mem = Mem::new(target, 0);
    if let Some(addr) = target.find_symbol("MPIR_dll_name")
        && let Ok(name) = mem.string(addr, "MPIR_dll_name")
        && !name.is_empty()
    {
        return Some(name);
    }
    let info = target.find_symbol("MPI2DD_info")?;
    let info = read_mpi2dd_info(target, 0, info).ok()?;
    let name = mem.string(info.dll_name_64, "dll_name_64").ok()?;
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_mpich::abi::mqs_target_type_sizes;
    use std::collections::HashMap;

    /// A target made of a few byte ranges and symbols (layouts computed here, by hand).
    struct Image {
        order: ByteOrder,
        pointer: usize,
        memory: Vec<(u64, Vec<u8>)>,
        symbols: HashMap<&'static str, u64>,
    }

    impl Target for Image {
        fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            for (start, bytes) in &self.memory {
                if addr >= *start && addr + buf.len() as u64 <= start + bytes.len() as u64 {
                    let at = (addr - start) as usize;
                    buf.copy_from_slice(&bytes[at..at + buf.len()]);
                    return Ok(());
                }
            }
            Err(TargetError::Unmapped {
                addr,
                len: buf.len(),
            })
        }
        fn find_symbol(&self, name: &str) -> Option<u64> {
            self.symbols.get(name).copied()
        }
        fn find_function(&self, name: &str) -> Option<u64> {
            self.symbols.get(name).copied()
        }
        fn find_type(&self, _: &str) -> Option<crate::target::TypeId> {
            None
        }
        fn type_size(&self, _: crate::target::TypeId) -> Option<u64> {
            None
        }
        fn field_offset(&self, _: crate::target::TypeId, _: &str) -> Option<u64> {
            None
        }
        fn type_sizes(&self) -> mqs_target_type_sizes {
            mqs_target_type_sizes {
                short_size: 2,
                int_size: 4,
                long_size: self.pointer as i32,
                long_long_size: 8,
                pointer_size: self.pointer as i32,
            }
        }
        fn byte_order(&self) -> ByteOrder {
            self.order
        }
        fn name(&self) -> String {
            "image".into()
        }
    }

    fn put(order: ByteOrder, out: &mut Vec<u8>, value: u64, size: usize) {
        let le = value.to_le_bytes();
        let mut bytes = le[..size].to_vec();
        if order == ByteOrder::Big {
            bytes.reverse();
        }
        out.extend_from_slice(&bytes);
    }

    fn strings(base: u64, items: &[&str]) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = Vec::new();
        let mut addrs = Vec::new();
        for s in items {
            addrs.push(base + bytes.len() as u64);
            bytes.extend_from_slice(s.as_bytes());
            bytes.push(0);
        }
        (bytes, addrs)
    }

    /// An MPIR starter image with natural `MPIR_PROCDESC` layout and no DWARF.
    fn mpir_image(order: ByteOrder, pointer: usize, state: u64) -> Image {
        let (text, s) = strings(
            0x9000,
            &["node0", "/bin/a", "node1", "/bin/b", "boom", "/x.so"],
        );
        let stride = (2 * pointer + 4).next_multiple_of(pointer);
        let mut table = Vec::new();
        for (host, exe, pid) in [(s[0], s[1], 100u64), (s[2], s[3], 101)] {
            put(order, &mut table, host, pointer);
            put(order, &mut table, exe, pointer);
            put(order, &mut table, pid, 4);
            table.resize(table.len().next_multiple_of(stride), 0xee);
        }
        let mut globals = Vec::new();
        put(order, &mut globals, 0x8000, pointer); // MPIR_proctable @0x7000
        put(order, &mut globals, 2, 4); // MPIR_proctable_size @0x7000+p
        put(order, &mut globals, state, 4); // MPIR_debug_state
        put(order, &mut globals, s[4], pointer); // MPIR_debug_abort_string
        let p = pointer as u64;
        Image {
            order,
            pointer,
            memory: vec![(0x7000, globals), (0x8000, table), (0x9000, text)],
            symbols: HashMap::from([
                ("MPIR_proctable", 0x7000),
                ("MPIR_proctable_size", 0x7000 + p),
                ("MPIR_debug_state", 0x7000 + p + 4),
                ("MPIR_debug_abort_string", 0x7000 + p + 8),
                ("MPIR_dll_name", s[5]),
            ]),
        }
    }

    #[test]
    fn mpir_tables_in_every_byte_order_and_width() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for pointer in [4, 8] {
                let image = mpir_image(order, pointer, 1);
                let published = read_mpir(&image, 1).unwrap();
                assert!(published.spawned);
                assert_eq!(
                    published.ranks,
                    vec![
                        RankInfo {
                            rank: 0,
                            host: "node0".into(),
                            executable: "/bin/a".into(),
                            pid: 100
                        },
                        RankInfo {
                            rank: 1,
                            host: "node1".into(),
                            executable: "/bin/b".into(),
                            pid: 101
                        },
                    ],
                    "{order:?} {pointer}"
                );
                assert_eq!(published.abort_message, None);
                assert_eq!(published.dll_name.as_deref(), Some("/x.so"));
                assert_eq!(read_dll_name(&image).as_deref(), Some("/x.so"));
                let aborting = read_mpir(&mpir_image(order, pointer, 2), 1).unwrap();
                assert_eq!(aborting.abort_message.as_deref(), Some("boom"));
            }
        }
    }

    #[test]
    fn mpir_garbage_is_reported() {
        let mut image = mpir_image(ByteOrder::Little, 8, 1);
        // proctable_size = -1
        image.memory[0].1[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(matches!(
            read_mpir(&image, 1),
            Err(AcquireError::BadData { .. })
        ));
        let mut image = mpir_image(ByteOrder::Little, 8, 1);
        image.memory[0].1[..8].copy_from_slice(&0x5000u64.to_le_bytes());
        assert!(matches!(
            read_mpir(&image, 1),
            Err(AcquireError::Memory { .. })
        ));
    }

    fn mpi2dd_image(order: ByteOrder, pointer: usize, magic: [u8; 5], state: u8) -> Image {
        let (text, s) = strings(0x9000, &["h", "/r", "/dll64.so", "aborted!", "world"]);
        let mut info = Vec::new();
        info.extend_from_slice(&magic);
        info.extend_from_slice(&[1, 1, state]);
        put(order, &mut info, 0, 4); // debugger_flags
        put(order, &mut info, 0x6, 4); // mpi_flags
        for addr in [0, s[2], 0, 0, s[3], 0x8000, 0, 0] {
            put(order, &mut info, addr, pointer);
        }
        for v in [2u64, 0, 0, 0] {
            put(order, &mut info, v, 4);
        }
        info.extend_from_slice(&[0; 32]);
        let mut table = Vec::new();
        // Listed out of rank order: rank 1 first.
        for (pid, rank) in [(201u64, 1u64), (200, 0)] {
            for addr in [s[0], s[1], 0, s[4]] {
                put(order, &mut table, addr, pointer);
            }
            put(order, &mut table, pid, 4);
            put(order, &mut table, rank, 4);
        }
        Image {
            order,
            pointer,
            memory: vec![(0x7000, info), (0x8000, table), (0x9000, text)],
            symbols: HashMap::from([("MPI2DD_info", 0x7000)]),
        }
    }

    #[test]
    fn mpi2dd_info_in_every_byte_order_and_width() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for pointer in [4, 8] {
                let image = mpi2dd_image(order, pointer, MPI2DD_MAGIC, MPI2DD_DEBUG_START);
                let published = read_mpi2dd(&image, 1, 0x7000).unwrap();
                assert!(published.spawned);
                let ranks: Vec<(i32, i32)> =
                    published.ranks.iter().map(|r| (r.rank, r.pid)).collect();
                assert_eq!(ranks, vec![(0, 200), (1, 201)], "{order:?} {pointer}");
                assert_eq!(published.ranks[0].executable, "/r");
                assert_eq!(published.dll_name.as_deref(), Some("/dll64.so"));
                assert_eq!(published.abort_message, None);
                assert_eq!(read_dll_name(&image).as_deref(), Some("/dll64.so"));
                let aborted = mpi2dd_image(order, pointer, MPI2DD_MAGIC, MPI2DD_DEBUG_ABORT);
                assert_eq!(
                    read_mpi2dd(&aborted, 1, 0x7000)
                        .unwrap()
                        .abort_message
                        .as_deref(),
                    Some("aborted!")
                );
            }
        }
        let bad = mpi2dd_image(ByteOrder::Little, 8, *b"MPI1\x7f", 1);
        assert!(matches!(
            read_mpi2dd(&bad, 1, 0x7000),
            Err(AcquireError::BadData { .. })
        ));
        assert_eq!(read_dll_name(&bad), None);
    }

    #[test]
    fn procdesc_layout_falls_back_to_natural_c() {
        let image = mpir_image(ByteOrder::Little, 4, 1);
        let mem = Mem::new(&image, 1);
        assert_eq!(
            procdesc_layout(&image, &mem),
            ProcdescLayout {
                host_name: 0,
                executable_name: 4,
                pid: 8,
                size: 12
            }
        );
        let image = mpir_image(ByteOrder::Little, 8, 1);
        let mem = Mem::new(&image, 1);
        assert_eq!(procdesc_layout(&image, &mem).size, 24);
    }
}
