//! The library host: a child process that loads the MQD library and displays the
//! processes its front end names, asking the front end for every byte and type.

use super::displayed::{Displayed, counters_of};
use super::frames::{
    self, ANSWER, CALL, DISPLAY, DONE, FATAL, Fields, Frame, FrameError, Op, READY,
};
use crate::display::{blank_rank, display_into, display_process};
use crate::failure::{Failure, FailureKind};
use crate::library::MqsLibrary;
use crate::session::{Session, SessionOptions};
use mqd_target::{ByteOrder, DebugInfo, Memory, Target, TargetAbi, TargetError, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

/// Reads are served in blocks of this size and kept for the session (every process is
/// stopped for all of it): one round trip per block, not per field.
const BLOCK: u64 = 4096;

/// The pipes to the front end.
struct Channel {
    input: BufReader<File>,
    output: BufWriter<File>,
}

impl Channel {
    /// Asks the front end one question about target `target` and returns the answer's
    /// body; a front end that is gone ends the host (nothing is left to answer to).
    fn call(&mut self, target: u32, op: Op, build: impl FnOnce(Frame) -> Frame) -> Vec<u8> {
        let frame = build(Frame::new(CALL).u32(target).u8(op as u8));
        if frame.send(&mut self.output).is_err() {
            std::process::exit(0);
        }
        match frames::receive(&mut self.input) {
            Ok(Some((ANSWER, body))) => body,
            _ => std::process::exit(0),
        }
    }
}

/// A process of the front end, seen through the channel.
struct Proxy {
    id: u32,
    name: String,
    channel: Rc<RefCell<Channel>>,
    /// Block address -> its bytes, or `None` where the block is not all readable.
    blocks: RefCell<HashMap<u64, Option<Box<[u8]>>>>,
}

impl Proxy {
    fn ask(&self, op: Op, build: impl FnOnce(Frame) -> Frame) -> Vec<u8> {
        self.channel.borrow_mut().call(self.id, op, build)
    }

    fn opt_u64(&self, op: Op, build: impl FnOnce(Frame) -> Frame) -> Option<u64> {
        Fields::new(&self.ask(op, build)).opt_u64().ok().flatten()
    }

    /// One read of the front end: all of it, or why not.
    fn read_exact(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let body = self.ask(Op::Read, |f| f.u64(addr).u32(buf.len() as u32));
        let mut answer = Fields::new(&body);
        let failed = TargetError::Channel(frames::MALFORMED.into());
        match answer.u8().map_err(|_| failed.clone())? {
            0 => {
                let bytes = answer.bytes().map_err(|_| failed.clone())?;
                if bytes.len() != buf.len() {
                    return Err(failed);
                }
                buf.copy_from_slice(bytes);
                Ok(())
            }
            1 => Err(TargetError::Unmapped {
                addr,
                len: buf.len(),
            }),
            _ => Err(TargetError::Channel(
                answer.str().map_err(|_| failed.clone())?.to_owned(),
            )),
        }
    }

    /// The block at `at`, read once.
    fn block(&self, at: u64) -> Option<Box<[u8]>> {
        if let Some(cached) = self.blocks.borrow().get(&at) {
            return cached.clone();
        }
        let mut bytes = vec![0u8; BLOCK as usize].into_boxed_slice();
        let block = self.read_exact(at, &mut bytes).ok().map(|()| bytes);
        self.blocks.borrow_mut().insert(at, block.clone());
        block
    }
}

impl Memory for Proxy {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let end = addr.checked_add(buf.len() as u64);
        // Large reads, and reads at the top of the address space, go as they are.
        let Some(end) = end.filter(|_| buf.len() as u64 <= 4 * BLOCK) else {
            return self.read_exact(addr, buf);
        };
        let mut at = addr;
        while at < end {
            let start = at / BLOCK * BLOCK;
            let Some(block) = self.block(start) else {
                // A block partly mapped: the exact range may still be readable.
                return self.read_exact(addr, buf);
            };
            let from = (at - start) as usize;
            let n = ((end - at) as usize).min(BLOCK as usize - from);
            let to = (at - addr) as usize;
            buf[to..to + n].copy_from_slice(&block[from..from + n]);
            at += n as u64;
        }
        Ok(())
    }

    fn image_byte_order(&self) -> Option<ByteOrder> {
        match Fields::new(&self.ask(Op::ImageByteOrder, |f| f)).u8() {
            Ok(1) => Some(ByteOrder::Little),
            Ok(2) => Some(ByteOrder::Big),
            _ => None,
        }
    }
}

impl DebugInfo for Proxy {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        self.opt_u64(Op::Symbol, |f| f.str(name))
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        self.opt_u64(Op::Function, |f| f.str(name))
    }
    fn find_type(&self, name: &str) -> Option<TypeId> {
        self.opt_u64(Op::Type, |f| f.str(name))
            .map(|t| TypeId(t as usize))
    }
    fn type_size(&self, ty: TypeId) -> Option<u64> {
        self.opt_u64(Op::Size, |f| f.u64(ty.0 as u64))
    }
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        self.opt_u64(Op::Field, |f| f.u64(ty.0 as u64).str(field))
    }
    fn abi(&self) -> TargetAbi {
        let body = self.ask(Op::Abi, |f| f);
        let mut f = Fields::new(&body);
        let mut next = |fallback| f.u8().unwrap_or(fallback);
        TargetAbi {
            short: next(2),
            int: next(4),
            long: next(8),
            long_long: next(8),
            pointer: next(8),
        }
    }
    fn byte_order(&self) -> ByteOrder {
        match Fields::new(&self.ask(Op::ByteOrder, |f| f)).u8() {
            Ok(2) => ByteOrder::Big,
            _ => ByteOrder::Little,
        }
    }
}

impl Target for Proxy {
    fn name(&self) -> String {
        self.name.clone()
    }
}

/// Why a library host stopped serving before its front end closed the pipe.
#[derive(Debug)]
pub enum ServeError {
    /// The pipes to the front end could not be kept.
    Pipes(std::io::Error),
    /// The library could not be loaded.
    Load {
        /// The library.
        dll: std::path::PathBuf,
        /// Why.
        error: crate::library::LoadError,
    },
    /// The front end sent what this host does not understand.
    Protocol(String),
    /// The pipe to the front end failed, or carried a malformed frame.
    Wire(FrameError),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Pipes(e) => write!(f, "cannot keep the pipes: {e}"),
            ServeError::Load { dll, error } => write!(f, "cannot load {}: {error}", dll.display()),
            ServeError::Protocol(what) => f.write_str(what),
            ServeError::Wire(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Pipes(e) => Some(e),
            ServeError::Load { error, .. } => Some(error),
            ServeError::Wire(e) => Some(e),
            ServeError::Protocol(_) => None,
        }
    }
}

impl From<FrameError> for ServeError {
    fn from(e: FrameError) -> ServeError {
        ServeError::Wire(e)
    }
}

/// Runs the library host of `mqd library-host DLL`: the protocol on what were standard
/// input and output, which the library cannot reach (a foreign library may print); ends
/// when the front end closes its pipe, or with it.
pub fn serve(dll: &Path) -> Result<(), ServeError> {
    // SAFETY: plain system calls on this process's own descriptors and signals.
    let (input, output) = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // Ctrl-C is the front end's to handle: it lets every process go first.
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        let input = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3);
        let output = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if input < 0 || output < 0 {
            return Err(ServeError::Pipes(std::io::Error::last_os_error()));
        }
        // The library's own printing (Open MPI's prints warnings with printf) is no
        // output of mqd's: its words reach the front end through dprints and the frames.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            libc::close(null);
        }
        (File::from_raw_fd(input), File::from_raw_fd(output))
    };
    let channel = Rc::new(RefCell::new(Channel {
        input: BufReader::new(input),
        output: BufWriter::new(output),
    }));
    let lib = match MqsLibrary::load(dll) {
        Ok(lib) => Arc::new(lib),
        Err(error) => {
            let error = ServeError::Load {
                dll: dll.to_owned(),
                error,
            };
            let _ = Frame::new(FATAL)
                .str(&error.to_string())
                .send(&mut channel.borrow_mut().output);
            return Err(error);
        }
    };
    Frame::new(READY)
        .send(&mut channel.borrow_mut().output)
        .map_err(|e| ServeError::Wire(FrameError::Io(e)))?;
    let mut debugger = Session::new(lib, SessionOptions::default());
    // The front end's number of a process -> the session's.
    let mut sessions = HashMap::new();
    loop {
        let frame = frames::receive(&mut channel.borrow_mut().input)?;
        let Some((tag, body)) = frame else { break };
        if tag != DISPLAY {
            return Err(ServeError::Protocol(format!("unexpected message {tag}")));
        }
        let mut f = Fields::new(&body);
        let id = f.u32()?;
        let again = f.u8()? != 0;
        let rank = f.u32()? as i32;
        let debug_info = f.u8()? != 0;
        let name = f.str()?.to_owned();
        let hint = f.str()?.to_owned();
        let proxy = Proxy {
            id,
            name,
            channel: channel.clone(),
            blocks: RefCell::new(HashMap::new()),
        };
        debugger.reset_counters();
        let mut dump = blank_rank(rank, None, None);
        let rank = (rank >= 0).then_some(rank);
        let outcome = match (again, sessions.get(&id)) {
            // The process stopped again: the library keeps what it knew of it.
            (true, Some(&p)) => debugger
                .replace_target(p, Box::new(proxy))
                .map(|()| display_process(&mut debugger, p, &mut dump))
                .map_err(|e| Failure::new(FailureKind::Library, e.text)),
            (true, None) => Err(Failure::new(
                FailureKind::Library,
                "not displayed before by this library host",
            )),
            (false, _) => {
                let before = debugger.processes().len();
                let outcome = display_into(
                    &mut debugger,
                    Box::new(proxy),
                    debug_info,
                    &hint,
                    rank,
                    &mut dump,
                );
                if debugger.processes().len() > before
                    && let Some(&p) = debugger.processes().last()
                {
                    sessions.insert(id, p);
                }
                outcome
            }
        };
        if let Err(f) = &outcome {
            dump.outcome = Err(f.cause.clone());
        }
        let displayed = Displayed {
            dump,
            failure: outcome.err(),
            counters: counters_of(&debugger.counters()),
        };
        let json = serde_json::to_string(&displayed)
            .map_err(|e| ServeError::Protocol(format!("cannot encode the display: {e}")))?;
        Frame::new(DONE)
            .str(&json)
            .send(&mut channel.borrow_mut().output)
            .map_err(|e| ServeError::Wire(FrameError::Io(e)))?;
    }
    drop(debugger);
    Ok(())
}
