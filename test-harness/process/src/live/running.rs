//! Reading a process that keeps running: `process_vm_readv` without ptrace, no stop and
//! no cache. Only for values that say themselves whether they were read whole (the hang
//! recorder's sequence-counted slots): anything else may be read torn.

use mqd_target::{Memory, TargetError};
use std::ffi::c_void;

/// The memory of the running process `pid`, read as it changes.
#[derive(Debug, Clone, Copy)]
pub struct RunningMemory {
    pid: i32,
}

impl RunningMemory {
    /// The memory of `pid`, which is neither attached nor stopped (reading needs the
    /// rights ptrace would: the same user, or `CAP_SYS_PTRACE`).
    pub fn of(pid: i32) -> RunningMemory {
        RunningMemory { pid }
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Memory for RunningMemory {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast::<c_void>(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one local iovec over `buf`, which lives through the call; the remote
        // one is only read by the kernel, in the other process.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(match errno {
                libc::ESRCH => TargetError::Exited { pid: self.pid },
                libc::EFAULT => TargetError::Unmapped {
                    addr,
                    len: buf.len(),
                },
                _ => TargetError::Os {
                    pid: self.pid,
                    operation: "process_vm_readv".into(),
                    errno,
                },
            });
        }
        if n as usize != buf.len() {
            // Partly mapped: all or nothing, as the trait asks.
            return Err(TargetError::Unmapped {
                addr,
                len: buf.len(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_while_it_runs_and_refuses_what_is_not_mapped() {
        let value: [u8; 8] = *b"running!";
        let memory = RunningMemory::of(std::process::id() as i32);
        let mut buf = [0u8; 8];
        memory.read_memory(value.as_ptr() as u64, &mut buf).unwrap();
        assert_eq!(&buf, b"running!");
        assert!(matches!(
            memory.read_memory(8, &mut buf),
            Err(TargetError::Unmapped { addr: 8, len: 8 })
        ));
    }

    #[test]
    fn a_process_gone_is_said_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let mut buf = [0u8; 8];
        assert!(matches!(
            RunningMemory::of(pid).read_memory(0x1000, &mut buf),
            Err(TargetError::Exited { .. })
        ));
    }
}
