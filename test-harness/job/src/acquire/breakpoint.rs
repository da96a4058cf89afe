//! Stopping a starter at its breakpoint function, and telling it a debugger is there.

use super::error::AcquireError;
use super::job::Interface;
use super::tables::*;
use mqd_debuginfo::AddressSpace;
use mqd_process::live::{LiveError, LiveProcess, LiveTarget, StopReason};
use mqd_target::DebugInfo;
use std::time::Instant;

/// The breakpoint instruction, and how far past it the trap leaves the program counter.
#[cfg(target_arch = "x86_64")]
pub(super) fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Ok((&[0xcc], 1)) // int3
}
#[cfg(target_arch = "aarch64")]
pub(super) fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Ok((&[0x00, 0x00, 0x20, 0xd4], 0)) // brk #0
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn breakpoint_instruction() -> Result<(&'static [u8], u64), AcquireError> {
    Err(AcquireError::Unsupported(
        "breakpoints on this architecture (x86_64 and aarch64 only)",
    ))
}

pub(super) fn load_space(pid: i32) -> Result<AddressSpace, AcquireError> {
    AddressSpace::from_pid(pid).map_err(|error| AcquireError::DebugInfo { pid, error })
}

pub(super) fn executable_of(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A planted breakpoint.
pub(super) struct Breakpoint {
    pub(super) addr: u64,
    pub(super) saved: Vec<u8>,
    pub(super) pc_adjust: u64,
}

impl Breakpoint {
    pub(super) fn insert(process: &LiveProcess, addr: u64) -> Result<Breakpoint, AcquireError> {
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

    pub(super) fn plant(&self, process: &LiveProcess) -> Result<(), AcquireError> {
        let (instruction, _) = breakpoint_instruction()?;
        process
            .write(self.addr, instruction)
            .map_err(|error| AcquireError::Memory {
                pid: process.pid(),
                what: format!("the breakpoint at {:#x}", self.addr),
                error,
            })
    }

    pub(super) fn remove(&self, process: &LiveProcess) -> Result<(), AcquireError> {
        process
            .write(self.addr, &self.saved)
            .map_err(|error| AcquireError::Memory {
                pid: process.pid(),
                what: format!("the breakpoint at {:#x}", self.addr),
                error,
            })
    }

    /// Executes the instruction under the breakpoint (the thread's PC is at it).
    pub(super) fn step_over(
        &self,
        process: &mut LiveProcess,
        tid: i32,
    ) -> Result<(), AcquireError> {
        self.remove(process)?;
        process.step(tid)?;
        self.plant(process)
    }
}

/// Where [`continue_to`] stopped.
pub(super) enum Hit {
    /// The breakpoint, by this thread (its PC is back at the breakpoint address).
    Breakpoint(i32),
    /// The process executed a new program: its breakpoints are gone.
    Exec,
    /// The deadline passed; the process is running.
    TimedOut,
}

/// Lets the process run until it hits `bp`, passing every other signal on.
pub(super) fn continue_to(
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
pub(super) fn announce(target: &LiveTarget, pid: i32, via: Interface) -> Result<(), AcquireError> {
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
        // No table, no flag to set.
        Interface::Environment => {}
    }
    Ok(())
}

pub(super) fn set_mpi2dd_flags(
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
