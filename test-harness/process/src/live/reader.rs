//! Reading a live process's memory: `process_vm_readv`, `/proc/PID/mem` or
//! `PTRACE_PEEKDATA`, through a cache of 4 KiB blocks while the process is stopped.

use super::options::*;
use super::ptrace::errno;
use super::tracer::Worker;
use mqd_target::TargetError;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::fs::File;
use std::os::unix::fs::FileExt;
/// The reading side of a [`LiveProcess`]: runs on the caller's thread.
pub(super) struct Reader {
    pub(super) pid: i32,
    pub(super) method: Cell<ReadMethod>,
    pub(super) mem: RefCell<Option<File>>,
    /// Block address -> contents, or `None` for a block that could not be read.
    pub(super) cache: RefCell<HashMap<u64, Option<Box<[u8]>>>>,
    /// Whether the process is stopped (caching allowed).
    pub(super) stopped: Cell<bool>,
    pub(super) stats: Cell<ReadStats>,
}

/// Result of fetching a run of blocks: how many leading blocks were read, and why the
/// next one was not.
pub(super) struct Fetched {
    pub(super) blocks: usize,
    pub(super) failure: Option<FetchFailure>,
}

pub(super) enum FetchFailure {
    /// The first block not read is not mapped (or not readable).
    Unmapped,
    /// Something else went wrong.
    Error(TargetError),
}

impl Reader {
    pub(super) fn bump(&self, f: impl FnOnce(&mut ReadStats)) {
        let mut stats = self.stats.get();
        f(&mut stats);
        self.stats.set(stats);
    }

    pub(super) fn os_error(&self, what: &str, errno: i32) -> TargetError {
        if errno == libc::ESRCH {
            TargetError::Exited { pid: self.pid }
        } else {
            TargetError::Os {
                pid: self.pid,
                operation: what.to_owned(),
                errno,
            }
        }
    }

    /// Fetches `out.len() / BLOCK_SIZE` blocks starting at block address `start`.
    pub(super) fn fetch(&self, worker: &Worker, start: u64, out: &mut [u8]) -> Fetched {
        loop {
            let method = self.method.get();
            let result = match method {
                ReadMethod::ProcessVmReadv => self.fetch_vm(start, out),
                ReadMethod::ProcMem => self.fetch_mem(start, out),
                ReadMethod::Peek => self.fetch_peek(worker, start, out),
            };
            match result {
                Err(fallback) => self.method.set(fallback),
                Ok(fetched) => return fetched,
            }
        }
    }

    pub(super) fn fetch_vm(&self, start: u64, out: &mut [u8]) -> Result<Fetched, ReadMethod> {
        let total = out.len() / BLOCK_SIZE;
        let mut done = 0;
        while done < total {
            let count = (total - done).min(MAX_IOVECS);
            let local = libc::iovec {
                iov_base: out[done * BLOCK_SIZE..].as_mut_ptr() as *mut c_void,
                iov_len: count * BLOCK_SIZE,
            };
            // One remote iovec per block: a short read then names the first bad block.
            let remote: Vec<libc::iovec> = (0..count)
                .map(|i| libc::iovec {
                    iov_base: (start + ((done + i) * BLOCK_SIZE) as u64) as usize as *mut c_void,
                    iov_len: BLOCK_SIZE,
                })
                .collect();
            self.bump(|s| s.syscalls += 1);
            // SAFETY: the local iovec covers count blocks of `out`; the remote ones are only
            // addresses in the other process.
            let n = unsafe {
                libc::process_vm_readv(self.pid, &local, 1, remote.as_ptr(), count as _, 0)
            };
            if n < 0 {
                let e = errno();
                return match e {
                    libc::EFAULT | libc::EIO | libc::ENOMEM => Ok(Fetched {
                        blocks: done,
                        failure: Some(FetchFailure::Unmapped),
                    }),
                    libc::EPERM | libc::ENOSYS | libc::EACCES => Err(ReadMethod::ProcMem),
                    e => Ok(Fetched {
                        blocks: done,
                        failure: Some(FetchFailure::Error(self.os_error("process_vm_readv", e))),
                    }),
                };
            }
            let got = n as usize / BLOCK_SIZE;
            done += got;
            if got < count {
                return Ok(Fetched {
                    blocks: done,
                    failure: Some(FetchFailure::Unmapped),
                });
            }
        }
        Ok(Fetched {
            blocks: total,
            failure: None,
        })
    }

    pub(super) fn fetch_mem(&self, start: u64, out: &mut [u8]) -> Result<Fetched, ReadMethod> {
        if self.mem.borrow().is_none() {
            match File::open(format!("/proc/{}/mem", self.pid)) {
                Ok(file) => *self.mem.borrow_mut() = Some(file),
                Err(_) => return Err(ReadMethod::Peek),
            }
        }
        let mem = self.mem.borrow();
        let file = mem.as_ref().expect("opened above");
        let mut done = 0usize;
        while done < out.len() {
            let at = start + done as u64;
            if at > i64::MAX as u64 {
                break;
            }
            self.bump(|s| s.syscalls += 1);
            match file.read_at(&mut out[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => match e.raw_os_error().unwrap_or(0) {
                    libc::EIO | libc::EFAULT => break,
                    libc::EPERM | libc::EACCES if done == 0 => return Err(ReadMethod::Peek),
                    errno => {
                        return Ok(Fetched {
                            blocks: done / BLOCK_SIZE,
                            failure: Some(FetchFailure::Error(self.os_error("read", errno))),
                        });
                    }
                },
            }
        }
        let blocks = done / BLOCK_SIZE;
        Ok(Fetched {
            blocks,
            failure: (blocks * BLOCK_SIZE < out.len()).then_some(FetchFailure::Unmapped),
        })
    }

    pub(super) fn fetch_peek(
        &self,
        worker: &Worker,
        start: u64,
        out: &mut [u8],
    ) -> Result<Fetched, ReadMethod> {
        let len = out.len();
        let result = worker.call(move |tracer| {
            let mut buf = vec![0u8; len];
            let (n, err, calls) = tracer.peek(start, &mut buf);
            (buf, n, err, calls)
        });
        let (buf, n, err, calls) = match result {
            Ok(r) => r,
            Err(e) => {
                return Ok(Fetched {
                    blocks: 0,
                    failure: Some(FetchFailure::Error(TargetError::Channel(e.to_string()))),
                });
            }
        };
        self.bump(|s| s.syscalls += calls);
        out[..n].copy_from_slice(&buf[..n]);
        let blocks = n / BLOCK_SIZE;
        let failure = match err {
            None => None,
            Some(libc::EIO | libc::EFAULT) => Some(FetchFailure::Unmapped),
            Some(e) => Some(FetchFailure::Error(self.os_error("PTRACE_PEEKDATA", e))),
        };
        Ok(Fetched { blocks, failure })
    }

    /// Reads from `addr` into `buf`; with `all`, fails unless every byte is readable,
    /// otherwise returns how many leading bytes were.
    pub(super) fn read(
        &self,
        worker: &Worker,
        addr: u64,
        buf: &mut [u8],
        all: bool,
    ) -> Result<usize, TargetError> {
        let len = buf.len();
        self.bump(|s| {
            s.requests += 1;
            s.bytes_requested += len as u64;
        });
        if len == 0 {
            return Ok(0);
        }
        let unmapped = TargetError::Unmapped { addr, len };
        let Some(end) = addr.checked_add(len as u64) else {
            return Err(unmapped);
        };
        let first = addr & !(BLOCK_SIZE as u64 - 1);
        let last = (end - 1) & !(BLOCK_SIZE as u64 - 1);
        if !self.stopped.get() {
            // A running process: no cache, the bytes are stale as soon as they are read.
            return self.read_uncached(worker, addr, buf, all, first, last);
        }
        let mut cache = self.cache.borrow_mut();
        let mut missing = false;
        let mut block = first;
        loop {
            match cache.get(&block) {
                None => missing = true,
                Some(None) => break,
                Some(Some(_)) => {}
            }
            if block == last {
                break;
            }
            block += BLOCK_SIZE as u64;
        }
        if !missing {
            self.bump(|s| s.cache_hits += 1);
        }
        // Fetch the missing blocks in runs, stopping at the first unreadable one.
        let mut copied = 0usize;
        let mut block = first;
        loop {
            if !cache.contains_key(&block) {
                let mut run = 1usize;
                while block + (run * BLOCK_SIZE) as u64 <= last
                    && !cache.contains_key(&(block + (run * BLOCK_SIZE) as u64))
                {
                    run += 1;
                }
                if cache.len() + run > MAX_CACHED_BLOCKS {
                    cache.clear();
                }
                let mut data = vec![0u8; run * BLOCK_SIZE];
                let fetched = self.fetch(worker, block, &mut data);
                self.bump(|s| s.blocks_fetched += fetched.blocks as u64);
                for (i, chunk) in data
                    .chunks_exact(BLOCK_SIZE)
                    .take(fetched.blocks)
                    .enumerate()
                {
                    cache.insert(block + (i * BLOCK_SIZE) as u64, Some(chunk.into()));
                }
                match fetched.failure {
                    None => {}
                    Some(FetchFailure::Unmapped) => {
                        cache.insert(block + (fetched.blocks * BLOCK_SIZE) as u64, None);
                    }
                    Some(FetchFailure::Error(e)) => return Err(e),
                }
            }
            match cache.get(&block) {
                Some(Some(data)) => {
                    let from = addr.max(block);
                    let to = end.min(block + BLOCK_SIZE as u64);
                    let n = (to - from) as usize;
                    let offset = (from - block) as usize;
                    buf[copied..copied + n].copy_from_slice(&data[offset..offset + n]);
                    copied += n;
                }
                _ => {
                    return if all { Err(unmapped) } else { Ok(copied) };
                }
            }
            if block == last {
                return Ok(copied);
            }
            block += BLOCK_SIZE as u64;
        }
    }

    pub(super) fn read_uncached(
        &self,
        worker: &Worker,
        addr: u64,
        buf: &mut [u8],
        all: bool,
        first: u64,
        last: u64,
    ) -> Result<usize, TargetError> {
        let blocks = ((last - first) as usize) / BLOCK_SIZE + 1;
        let mut data = vec![0u8; blocks * BLOCK_SIZE];
        let fetched = self.fetch(worker, first, &mut data);
        self.bump(|s| s.blocks_fetched += fetched.blocks as u64);
        if let Some(FetchFailure::Error(e)) = fetched.failure {
            return Err(e);
        }
        let offset = (addr - first) as usize;
        let readable = (fetched.blocks * BLOCK_SIZE)
            .saturating_sub(offset)
            .min(buf.len());
        if readable < buf.len() && all {
            return Err(TargetError::Unmapped {
                addr,
                len: buf.len(),
            });
        }
        buf[..readable].copy_from_slice(&data[offset..offset + readable]);
        Ok(readable)
    }

    pub(super) fn invalidate(&self, addr: u64, len: usize) {
        let mut cache = self.cache.borrow_mut();
        let end = addr.saturating_add(len as u64);
        let mut block = addr & !(BLOCK_SIZE as u64 - 1);
        while block < end {
            cache.remove(&block);
            block += BLOCK_SIZE as u64;
        }
    }
}
