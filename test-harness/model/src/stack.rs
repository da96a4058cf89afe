//! Where each thread of a process is: its stack, innermost frame first.

use serde::{Deserialize, Serialize};

/// One frame of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The instruction address (for a caller, its return address).
    pub address: u64,
    /// The function containing it, from the object's symbol tables.
    pub function: Option<String>,
    /// The object (executable or shared library) it is in.
    pub object: Option<String>,
    /// The address's offset from the function's start.
    pub offset: u64,
}

/// The stack of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStack {
    /// Its thread id.
    pub tid: i32,
    /// Its frames, innermost first.
    pub frames: Vec<Frame>,
    /// Why the walk ended before the stack's base, if it did (a corrupt stack, an
    /// address outside every object, the depth cap).
    pub truncated: Option<String>,
}

impl Frame {
    /// The function's name, else `object+0xoffset`, else the address.
    pub fn name(&self) -> String {
        match (&self.function, &self.object) {
            (Some(f), _) => f.clone(),
            (None, Some(o)) => format!("{}+{:#x}", o.rsplit('/').next().unwrap_or(o), self.offset),
            (None, None) => format!("{:#x}", self.address),
        }
    }
}
