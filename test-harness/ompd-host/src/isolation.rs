//! An OMPD library in a process of its own (`mqd ompd-host DLL`), as foreign MQD
//! libraries run: the child loads the library and reads the processes the front end
//! names, asking it over a pipe for every byte and symbol. A library that crashes or
//! hangs costs the OpenMP view of one process, never mqd or the job: the front end
//! says how the child ended and starts another for the next process.
//!
//! The stream is the MQD library host's (length-prefixed frames): the child says
//! `READY` (or `FATAL`), is sent `INSPECT` with the process's threads, asks `CALL`s
//! (a read, or a symbol, for a thread or not), each answered by an `ANSWER`, and ends
//! the process with `DONE`.

use crate::abi::TypeSizes;
use crate::callbacks::{OsThread, Source};
use crate::inspect::{Inspection, inspect};
use crate::library::OmpdLibrary;
use mqd_library_host::helper::Helper;
use mqd_library_host::isolation::frames::{
    self, ANSWER, CALL, DONE, FATAL, Fields, Frame, MALFORMED, READY,
};
use mqd_library_host::isolation::{Running, end_child, silence};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Front end to child: read one process (JSON of a [`Request`] follows).
const INSPECT: u8 = 20;

/// What a child is asked, by the byte after [`CALL`].
const READ: u8 = 0;
const SYMBOL: u8 = 1;

/// Reads are served in blocks of this size, kept for the process.
const BLOCK: u64 = 4096;

/// One process to read.
#[derive(Serialize, Deserialize)]
struct Request {
    threads: Vec<OsThread>,
    /// char, short, int, long, long long, pointer.
    sizes: [u8; 6],
}

/// The front end of the children that host one OMPD library, one child per process.
pub struct OmpdHost {
    helper: Helper,
    dll: PathBuf,
    silence: Duration,
}

impl OmpdHost {
    /// Hosts of `dll`, started as `HELPER DLL`; the silence allowed is the MQD
    /// library host's.
    pub fn new(helper: &Helper, dll: &Path) -> OmpdHost {
        OmpdHost {
            helper: helper.clone(),
            dll: dll.to_owned(),
            silence: silence(),
        }
    }

    fn start(&self) -> Result<Running, String> {
        let mut running = Running::spawn(&self.helper, &self.dll, Stdio::null())?;
        match frames::receive_within(&mut running.from, self.silence) {
            Ok((READY, _)) => Ok(running),
            Ok((FATAL, body)) => {
                let why = Fields::new(&body).str().unwrap_or(MALFORMED).to_owned();
                let _ = running.child.wait();
                Err(why)
            }
            Ok((tag, _)) => Err(self.lose(running, &format!("said {tag} first"))),
            Err(why) => Err(self.lose(running, &why)),
        }
    }

    fn lose(&self, mut running: Running, why: &str) -> String {
        let how = end_child(&mut running.child, why);
        format!(
            "the OMPD library {} {how} while reading this process's OpenMP threads; the process was left as it was",
            self.dll.display()
        )
    }

    /// Reads `threads` of the process `source` serves, in a child.
    pub fn inspect(&self, source: &dyn Source, threads: &[OsThread]) -> Result<Inspection, String> {
        let mut running = self.start()?;
        let s = source.sizes();
        let request = Request {
            threads: threads.to_vec(),
            sizes: [s.char_, s.short, s.int, s.long, s.long_long, s.pointer],
        };
        let json = serde_json::to_string(&request).map_err(|e| e.to_string())?;
        if let Err(e) = Frame::new(INSPECT).str(&json).send(&mut running.to) {
            return Err(self.lose(running, &format!("cannot be written to: {e}")));
        }
        loop {
            match frames::receive_within(&mut running.from, self.silence) {
                Ok((CALL, body)) => {
                    let answer = answer(source, threads, &body);
                    if let Err(e) = answer.send(&mut running.to) {
                        return Err(self.lose(running, &format!("cannot be written to: {e}")));
                    }
                }
                Ok((DONE, body)) => {
                    let mut f = Fields::new(&body);
                    let result = match (f.u8(), f.str()) {
                        (Ok(0), Ok(json)) => serde_json::from_str::<Inspection>(json)
                            .map_err(|_| "a malformed answer".to_owned()),
                        (Ok(_), Ok(why)) => Err(why.to_owned()),
                        _ => Err(MALFORMED.to_owned()),
                    };
                    // A library may keep what it read of one process for the next (Intel's
                    // does): each process gets a child of its own.
                    running.finish();
                    return result;
                }
                Ok((tag, _)) => {
                    return Err(self.lose(running, &format!("sent message {tag} mid-read")));
                }
                Err(why) => return Err(self.lose(running, &why)),
            }
        }
    }
}

/// The front end's answer to one call of the child.
fn answer(source: &dyn Source, threads: &[OsThread], body: &[u8]) -> Frame {
    let reply = Frame::new(ANSWER);
    let mut f = Fields::new(body);
    match f.u8() {
        Ok(READ) => {
            let (Ok(addr), Ok(len)) = (f.u64(), f.u32()) else {
                return reply.u8(0);
            };
            if len > frames::MAX_FRAME / 2 {
                return reply.u8(0);
            }
            let mut buf = vec![0u8; len as usize];
            if source.read(addr, &mut buf) {
                reply.u8(1).bytes(&buf)
            } else {
                reply.u8(0)
            }
        }
        Ok(SYMBOL) => {
            let (Ok(name), Ok(thread)) = (f.str(), f.u32()) else {
                return reply.opt_u64(None);
            };
            let thread = (thread != u32::MAX)
                .then(|| threads.get(thread as usize))
                .flatten();
            reply.opt_u64(source.symbol(name, thread))
        }
        _ => reply.opt_u64(None),
    }
}

/// The child's pipes to its front end.
struct Channel {
    input: BufReader<File>,
    output: BufWriter<File>,
}

impl Channel {
    /// One question; a front end that is gone ends the child.
    fn call(&mut self, build: impl FnOnce(Frame) -> Frame) -> Vec<u8> {
        if build(Frame::new(CALL)).send(&mut self.output).is_err() {
            std::process::exit(0);
        }
        match frames::receive(&mut self.input) {
            Ok(Some((ANSWER, body))) => body,
            _ => std::process::exit(0),
        }
    }
}

/// The process being read, seen through the channel.
struct Proxy<'a> {
    channel: RefCell<&'a mut Channel>,
    threads: Vec<OsThread>,
    sizes: TypeSizes,
    blocks: RefCell<HashMap<u64, Option<Vec<u8>>>>,
    symbols: RefCell<HashMap<(String, u32), Option<u64>>>,
}

impl Proxy<'_> {
    fn read_exact(&self, addr: u64, buf: &mut [u8]) -> bool {
        let body = self
            .channel
            .borrow_mut()
            .call(|f| f.u8(READ).u64(addr).u32(buf.len() as u32));
        let mut f = Fields::new(&body);
        match (f.u8(), f.bytes()) {
            (Ok(1), Ok(bytes)) if bytes.len() == buf.len() => {
                buf.copy_from_slice(bytes);
                true
            }
            _ => false,
        }
    }
}

impl Source for Proxy<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let start = addr / BLOCK * BLOCK;
        let fits = addr
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= start + BLOCK);
        if !fits {
            return self.read_exact(addr, buf);
        }
        let cached = self.blocks.borrow().get(&start).cloned();
        let block = match cached {
            Some(block) => block,
            None => {
                let mut bytes = vec![0u8; BLOCK as usize];
                let block = self.read_exact(start, &mut bytes).then_some(bytes);
                self.blocks.borrow_mut().insert(start, block.clone());
                block
            }
        };
        match block {
            Some(bytes) => {
                let from = (addr - start) as usize;
                buf.copy_from_slice(&bytes[from..from + buf.len()]);
                true
            }
            // A block partly mapped: the exact range may still be readable.
            None => self.read_exact(addr, buf),
        }
    }

    fn symbol(&self, name: &str, thread: Option<&OsThread>) -> Option<u64> {
        let index = thread
            .and_then(|t| self.threads.iter().position(|o| o == t))
            .map_or(u32::MAX, |i| i as u32);
        let key = (name.to_owned(), index);
        if let Some(&known) = self.symbols.borrow().get(&key) {
            return known;
        }
        let body = self
            .channel
            .borrow_mut()
            .call(|f| f.u8(SYMBOL).str(name).u32(index));
        let found = Fields::new(&body).opt_u64().ok().flatten();
        self.symbols.borrow_mut().insert(key, found);
        found
    }

    fn sizes(&self) -> TypeSizes {
        self.sizes
    }
}

/// The child: loads `dll` and reads the processes its front end names, on the pipes
/// of its standard input and output, until its input ends.
pub fn serve(dll: &Path) -> Result<(), String> {
    // SAFETY: descriptors 0 and 1 are this process's own, used by nothing else here.
    let (input, output) = unsafe { (File::from_raw_fd(0), File::from_raw_fd(1)) };
    let mut channel = Channel {
        input: BufReader::new(input),
        output: BufWriter::new(output),
    };
    let library = match OmpdLibrary::load(dll) {
        Ok(library) => library,
        Err(why) => {
            let _ = Frame::new(FATAL).str(&why).send(&mut channel.output);
            return Err(why);
        }
    };
    Frame::new(READY)
        .str(&library.version)
        .send(&mut channel.output)
        .map_err(|e| e.to_string())?;
    loop {
        let request = match frames::receive(&mut channel.input) {
            Ok(Some((INSPECT, body))) => Fields::new(&body)
                .str()
                .ok()
                .and_then(|json| serde_json::from_str::<Request>(json).ok()),
            Ok(None) => return Ok(()),
            Ok(Some((tag, _))) => return Err(format!("message {tag} out of turn")),
            Err(e) => return Err(e.to_string()),
        };
        let Some(request) = request else {
            return Err(MALFORMED.into());
        };
        let [char_, short, int, long, long_long, pointer] = request.sizes;
        let result = {
            let proxy = Proxy {
                channel: RefCell::new(&mut channel),
                threads: request.threads.clone(),
                sizes: TypeSizes {
                    char_,
                    short,
                    int,
                    long,
                    long_long,
                    pointer,
                },
                blocks: RefCell::new(HashMap::new()),
                symbols: RefCell::new(HashMap::new()),
            };
            inspect(&library, &proxy, &request.threads)
        };
        let done = match result.and_then(|i| serde_json::to_string(&i).map_err(|e| e.to_string())) {
            Ok(json) => Frame::new(DONE).u8(0).str(&json),
            Err(why) => Frame::new(DONE).u8(1).str(&why),
        };
        done.send(&mut channel.output).map_err(|e| e.to_string())?;
    }
}
