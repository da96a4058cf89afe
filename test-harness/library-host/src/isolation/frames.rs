//! The library host's stream: length-prefixed binary frames on a pipe each way.
//!
//! A frame is a little-endian `u32` length, then that many bytes: a tag byte and the
//! fields of the message, integers little-endian, strings and byte runs with a `u32`
//! length. Nothing here trusts the other side: a short or malformed frame is an error.

use std::io::{Read, Write};

/// Largest frame either side accepts: a read of 64 MiB is more than any library asks.
pub const MAX_FRAME: u32 = 64 << 20;

/// Host to front end: the library loaded and the host waits for work.
pub const READY: u8 = 1;
/// Host to front end: the library could not be loaded (a message follows).
pub const FATAL: u8 = 2;
/// Host to front end: a callback of the library, to be answered by [`ANSWER`].
pub const CALL: u8 = 3;
/// Host to front end: a process was displayed (JSON of its results follows).
pub const DONE: u8 = 4;
/// Front end to host: display one process.
pub const DISPLAY: u8 = 10;
/// Front end to host: the answer to the last [`CALL`].
pub const ANSWER: u8 = 11;

/// What a callback asks, by the number after [`CALL`] and the target's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// Memory: address and length.
    Read = 0,
    /// A variable's address by name.
    Symbol = 1,
    /// A function's address by name.
    Function = 2,
    /// A type by name.
    Type = 3,
    /// A type's size.
    Size = 4,
    /// A field's offset in a type.
    Field = 5,
    /// The sizes of C's types.
    Abi = 6,
    /// The process's byte order.
    ByteOrder = 7,
    /// The executable image's byte order.
    ImageByteOrder = 8,
}

impl Op {
    /// The op numbered `op`.
    pub fn from_u8(op: u8) -> Option<Op> {
        [
            Op::Read,
            Op::Symbol,
            Op::Function,
            Op::Type,
            Op::Size,
            Op::Field,
            Op::Abi,
            Op::ByteOrder,
            Op::ImageByteOrder,
        ]
        .into_iter()
        .find(|o| *o as u8 == op)
    }
}

/// A message being written.
#[derive(Default)]
pub struct Frame(Vec<u8>);

impl Frame {
    /// A frame of tag `tag`.
    pub fn new(tag: u8) -> Frame {
        Frame(vec![tag])
    }
    /// The next field of this kind.
    pub fn u8(mut self, v: u8) -> Frame {
        self.0.push(v);
        self
    }
    /// The next field of this kind.
    pub fn u32(mut self, v: u32) -> Frame {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// The next field of this kind.
    pub fn u64(mut self, v: u64) -> Frame {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// The next field of this kind.
    pub fn opt_u64(self, v: Option<u64>) -> Frame {
        match v {
            Some(v) => self.u8(1).u64(v),
            None => self.u8(0),
        }
    }
    /// The next field of this kind.
    pub fn bytes(mut self, v: &[u8]) -> Frame {
        self.0.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.0.extend_from_slice(v);
        self
    }
    /// The next field of this kind.
    pub fn str(self, v: &str) -> Frame {
        self.bytes(v.as_bytes())
    }
    /// Writes the frame and flushes.
    pub fn send(self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(&(self.0.len() as u32).to_le_bytes())?;
        out.write_all(&self.0)?;
        out.flush()
    }
}

/// A message being read: its fields in order; any shortfall is an error.
pub struct Fields<'a>(&'a [u8]);

/// A malformed frame.
pub const MALFORMED: &str = "a malformed message";

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// A field runs past the end of its frame, or a string is not UTF-8.
    Malformed,
    /// A frame's length is 0 or over [`MAX_FRAME`].
    Length(u32),
    /// The pipe failed, or ended inside a frame.
    Io(std::io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Malformed => f.write_str(MALFORMED),
            FrameError::Length(len) => write!(f, "a frame of {len} bytes"),
            FrameError::Io(e) => write!(f, "a frame cut short: {e}"),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrameError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl<'a> Fields<'a> {
    /// The fields of a frame's body.
    pub fn new(body: &'a [u8]) -> Fields<'a> {
        Fields(body)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.0.len() < n {
            return Err(FrameError::Malformed);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    /// The next field of this kind.
    pub fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }
    /// The next field of this kind.
    pub fn u32(&mut self) -> Result<u32, FrameError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// The next field of this kind.
    pub fn u64(&mut self) -> Result<u64, FrameError> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }
    /// The next field of this kind.
    pub fn opt_u64(&mut self) -> Result<Option<u64>, FrameError> {
        match self.u8()? {
            0 => Ok(None),
            _ => Ok(Some(self.u64()?)),
        }
    }
    /// The next field of this kind.
    pub fn bytes(&mut self) -> Result<&'a [u8], FrameError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// The next field of this kind.
    pub fn str(&mut self) -> Result<&'a str, FrameError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| FrameError::Malformed)
    }
}

/// Reads one frame from a child's output, waiting at most `silence` for it to begin:
/// `Err` says why not ("did not answer for 30.0 s (hung)", "ended", a malformed frame).
pub fn receive_within(
    from: &mut std::io::BufReader<std::process::ChildStdout>,
    silence: std::time::Duration,
) -> Result<(u8, Vec<u8>), String> {
    use std::os::fd::AsRawFd;
    if from.buffer().is_empty() {
        let mut poll = libc::pollfd {
            fd: from.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(silence.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let ready = loop {
            let n = unsafe { libc::poll(&mut poll, 1, ms) };
            if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break n;
            }
        };
        if ready == 0 {
            return Err(format!(
                "did not answer for {:.1} s (hung)",
                silence.as_secs_f64()
            ));
        }
    }
    match receive(from) {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Err("ended".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Reads one frame (tag and body); `Ok(None)` at a clean end of the stream.
pub fn receive(input: &mut impl Read) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let len = u32::from_le_bytes(len);
    if len == 0 || len > MAX_FRAME {
        return Err(FrameError::Length(len));
    }
    let mut body = vec![0u8; len as usize];
    input.read_exact(&mut body).map_err(FrameError::Io)?;
    let tag = body.remove(0);
    Ok(Some((tag, body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_short_ones_are_errors() {
        let mut out = Vec::new();
        Frame::new(CALL)
            .u32(7)
            .u8(Op::Field as u8)
            .u64(u64::MAX)
            .opt_u64(None)
            .opt_u64(Some(3))
            .str("tag")
            .send(&mut out)
            .unwrap();
        let (tag, body) = receive(&mut out.as_slice()).unwrap().unwrap();
        assert_eq!(tag, CALL);
        let mut f = Fields::new(&body);
        assert_eq!(f.u32().unwrap(), 7);
        assert_eq!(Op::from_u8(f.u8().unwrap()), Some(Op::Field));
        assert_eq!(f.u64().unwrap(), u64::MAX);
        assert_eq!(f.opt_u64().unwrap(), None);
        assert_eq!(f.opt_u64().unwrap(), Some(3));
        assert_eq!(f.str().unwrap(), "tag");
        assert!(f.u8().is_err());
        for cut in 1..out.len() {
            assert!(
                receive(&mut &out[..cut]).is_err() || cut < 4,
                "cut at {cut}"
            );
        }
        assert_eq!(receive(&mut &[][..]).unwrap(), None);
        let huge = (MAX_FRAME + 1).to_le_bytes();
        assert!(receive(&mut &huge[..]).is_err());
    }
}
