//! How often a thread executes one instruction, counted by a hardware breakpoint the
//! kernel keeps as a perf event: the thread is neither stopped nor traced, no code is
//! written, and the counter goes away with its file (when mqd exits, however it exits).
//! Counting a call's return address tells whether a blocked call returned. Each counted
//! execution is a debug exception (about a microsecond); [`ExecutionCounter::first`]
//! counts only the first and then disarms itself, so a call returning a million times a
//! second costs one exception, not a million.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`).
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    bp_addr: u64,
    bp_len: u64,
}

const PERF_TYPE_BREAKPOINT: u32 = 5;
const HW_BREAKPOINT_X: u32 = 4;
/// `exclude_kernel` and `exclude_hv`: user space only, which an unprivileged user may
/// count in its own processes.
const USER_ONLY: u64 = (1 << 5) | (1 << 6);
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `disabled`: opened off, for `PERF_EVENT_IOC_REFRESH` to enable.
const DISABLED: u64 = 1;
/// `_IO('$', 2)`: enable the event for this many overflows, then disable it.
const PERF_EVENT_IOC_REFRESH: libc::c_ulong = 0x2402;

/// The executions of one address by one thread since the counter was opened.
#[derive(Debug)]
pub struct ExecutionCounter {
    fd: OwnedFd,
}

impl ExecutionCounter {
    /// Starts counting thread `tid`'s executions of the instruction at `address`.
    pub fn new(tid: i32, address: u64) -> io::Result<ExecutionCounter> {
        ExecutionCounter::open(tid, address, false)
    }

    /// Starts watching for thread `tid`'s first execution of the instruction at
    /// `address`: the count becomes 1 then, and the breakpoint disarms itself.
    pub fn first(tid: i32, address: u64) -> io::Result<ExecutionCounter> {
        let counter = ExecutionCounter::open(tid, address, true)?;
        // SAFETY: an ioctl on our own perf event descriptor with an integer argument.
        let rc = unsafe {
            libc::ioctl(
                counter.fd.as_raw_fd(),
                PERF_EVENT_IOC_REFRESH as _,
                1 as libc::c_int,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(counter)
    }

    fn open(tid: i32, address: u64, once: bool) -> io::Result<ExecutionCounter> {
        let attr = Attr {
            kind: PERF_TYPE_BREAKPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            // Once: every execution an overflow, the first one disabling the event.
            sample_period: u64::from(once),
            flags: USER_ONLY | if once { DISABLED } else { 0 },
            bp_type: HW_BREAKPOINT_X,
            bp_addr: address,
            bp_len: std::mem::size_of::<libc::c_long>() as u64,
            ..Attr::default()
        };
        // SAFETY: perf_event_open reads `size` bytes of a valid attr; returns an fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const Attr,
                tid,
                -1i32,
                -1i32,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor that nothing else owns.
        Ok(ExecutionCounter {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// The executions counted so far.
    pub fn count(&self) -> io::Result<u64> {
        let mut value = 0u64;
        // SAFETY: reads 8 bytes into a u64.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut value as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n != 8 {
            return Err(io::Error::last_os_error());
        }
        Ok(value)
    }
}
