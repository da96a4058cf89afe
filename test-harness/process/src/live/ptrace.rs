//! Raw ptrace requests, `/proc` look-ups, and the causes of attach failures.

use super::errors::{AttachError, LiveError};
use super::options::PF_KTHREAD;
use std::ffi::c_void;
use std::io;

pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn clear_errno() {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = 0 };
}

/// One ptrace request with integer arguments.
pub(super) fn ptrace(
    request: libc::c_uint,
    tid: i32,
    addr: usize,
    data: usize,
) -> Result<libc::c_long, i32> {
    clear_errno();
    // SAFETY: the requests made with this helper take integers (or nothing) in addr/data.
    let r = unsafe { libc::ptrace(request as _, tid, addr as *mut c_void, data as *mut c_void) };
    if r == -1 {
        let e = errno();
        // PEEK requests return the word, which may be -1: errno tells.
        if e != 0 {
            return Err(e);
        }
    }
    Ok(r)
}

pub(super) fn is_stop_signal(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

pub(super) fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("was killed by signal {}", libc::WTERMSIG(status))
    } else {
        "has exited".to_string()
    }
}

/// `/proc/PID/stat` fields a debugger looks at before attaching.
pub(super) struct ProcStat {
    pub(super) state: char,
    pub(super) flags: u64,
}

pub(super) fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        flags: fields.get(6)?.parse().ok()?,
    })
}

pub(super) fn proc_status_field(pid: i32, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .map(|value| value.trim().to_string())
}

pub(super) fn thread_state(pid: i32, tid: i32) -> char {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
        .ok()
        .and_then(|text| {
            let rest = &text[text.rfind(')')? + 1..];
            rest.split_whitespace().next()?.chars().next()
        })
        .unwrap_or('?')
}

pub(super) fn list_threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // The main thread (its id the pid) first, then by id: where pids wrapped around
    // (pid_max 32768), a thread started later can have a smaller id than its process.
    tids.sort_unstable_by_key(|&tid| (tid != pid, tid));
    tids
}

/// Why the kernel refused to let us trace `pid`, and how to fix it.
pub(super) fn permission_hint(pid: i32) -> String {
    let scope: Option<u32> = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let owner: Option<u32> =
        proc_status_field(pid, "Uid").and_then(|uids| uids.split_whitespace().nth(1)?.parse().ok());
    if scope == Some(3) {
        return "kernel.yama.ptrace_scope is 3: ptrace is disabled until the next reboot".into();
    }
    if euid != 0 {
        if let Some(owner) = owner
            && owner != euid
        {
            return format!(
                "it belongs to uid {owner} and the debugger runs as uid {euid}: run as that user or as root"
            );
        }
        if let Some(scope @ (1 | 2)) = scope {
            return format!(
                "kernel.yama.ptrace_scope is {scope}: run as root, or `sudo sysctl kernel.yama.ptrace_scope=0`, or give the debugger CAP_SYS_PTRACE"
            );
        }
        return "run as root or as the process's owner (a setuid or non-dumpable process needs root)"
            .into();
    }
    "the debugger lacks CAP_SYS_PTRACE (in a container, run it with --cap-add=SYS_PTRACE) or a security module forbids tracing".into()
}

/// Turns a failed `PTRACE_SEIZE`/`PTRACE_ATTACH` into its cause.
pub(super) fn attach_error(pid: i32, tid: i32, errno: i32) -> AttachError {
    match errno {
        libc::ESRCH => {
            if proc_stat(tid).is_some() {
                AttachError::Exited { pid }
            } else {
                AttachError::NoSuchProcess { pid }
            }
        }
        libc::EPERM => {
            if let Some(tracer) = proc_status_field(tid, "TracerPid")
                .and_then(|t| t.parse::<i32>().ok())
                .filter(|&t| t != 0)
            {
                AttachError::AlreadyTraced { pid, tracer }
            } else if proc_stat(tid).is_none() {
                AttachError::Exited { pid }
            } else {
                AttachError::PermissionDenied {
                    pid,
                    hint: permission_hint(pid),
                }
            }
        }
        errno => AttachError::Os {
            pid,
            call: "ptrace(PTRACE_SEIZE)",
            errno,
        },
    }
}

/// Checks that can name the cause before any ptrace request is made.
pub(super) fn precheck(pid: i32) -> Result<(), AttachError> {
    if pid <= 0 {
        return Err(AttachError::NoSuchProcess { pid });
    }
    // SAFETY: getpid cannot fail.
    let own = unsafe { libc::getpid() };
    let stat = proc_stat(pid).ok_or(AttachError::NoSuchProcess { pid })?;
    if stat.flags & PF_KTHREAD != 0 {
        return Err(AttachError::KernelThread { pid });
    }
    let tgid: Option<i32> = proc_status_field(pid, "Tgid").and_then(|t| t.parse().ok());
    if pid == own || tgid == Some(own) {
        return Err(AttachError::OwnProcess { pid });
    }
    match stat.state {
        'Z' | 'X' | 'x' => return Err(AttachError::Exited { pid }),
        _ => {}
    }
    if let Some(tracer) = proc_status_field(pid, "TracerPid")
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|&t| t != 0)
    {
        return Err(AttachError::AlreadyTraced { pid, tracer });
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
pub(super) fn pc_of(regs: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Ok(regs.rip)
}
#[cfg(target_arch = "x86_64")]
pub(super) fn set_pc_of(regs: &mut libc::user_regs_struct, pc: u64) -> Result<(), LiveError> {
    regs.rip = pc;
    Ok(())
}
#[cfg(target_arch = "aarch64")]
pub(super) fn pc_of(regs: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Ok(regs.pc)
}
#[cfg(target_arch = "aarch64")]
pub(super) fn set_pc_of(regs: &mut libc::user_regs_struct, pc: u64) -> Result<(), LiveError> {
    regs.pc = pc;
    Ok(())
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn pc_of(_: &libc::user_regs_struct) -> Result<u64, LiveError> {
    Err(LiveError::Unsupported(
        "program counter on this architecture",
    ))
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn set_pc_of(_: &mut libc::user_regs_struct, _: u64) -> Result<(), LiveError> {
    Err(LiveError::Unsupported(
        "program counter on this architecture",
    ))
}
