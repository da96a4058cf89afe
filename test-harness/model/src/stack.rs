//! Where each thread of a process is: its stack, innermost frame first.

use serde::{Deserialize, Serialize};

/// One frame of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The instruction address (for a caller, its return address).
    pub address: u64,
    /// The function containing it, from the object's symbol tables (for an inlined
    /// frame, from its DWARF).
    pub function: Option<String>,
    /// The object (executable or shared library) it is in.
    pub object: Option<String>,
    /// The address's offset from the function's start.
    pub offset: u64,
    /// The source file, from the object's DWARF line table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The source line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A function inlined at this address into the frame that follows: no frame of its
    /// own on the stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
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
    /// The arguments of the MPI call it is in, where the debug information locates
    /// them in its frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallArguments>,
}

/// What an MPI call was given, read from its frame through DWARF location expressions;
/// `None` for what is not an argument of the call, or is optimized out there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallArguments {
    /// The function whose frame they were read from (`PMPI_Recv`, `internal_Recv`).
    pub function: String,
    /// The communicator handle (`MPI_Comm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<i64>,
    /// The communicator object's address in the process (MPICH's `MPIR_Comm`): what the
    /// message-queue library gives as the communicator's unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_address: Option<u64>,
    /// The communicator's context id: the same in every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<i64>,
    /// The source or destination, a rank of the communicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<i64>,
    /// The tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    /// The root of a rooted collective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<i64>,
    /// The requests of a wait call (`MPI_Wait`, the array of `MPI_Waitall`...): each
    /// handle's object address, `None` for a handle not followed (an indirect one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<Option<u64>>,
}

impl Frame {
    /// "file.c:88": the source file's name and line, when known.
    pub fn source(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}:{}", self.line?))
    }

    /// The function's name, else `object+0xoffset`, else the address.
    pub fn name(&self) -> String {
        match (&self.function, &self.object) {
            (Some(f), _) => f.clone(),
            (None, Some(o)) => format!("{}+{:#x}", o.rsplit('/').next().unwrap_or(o), self.offset),
            (None, None) => format!("{:#x}", self.address),
        }
    }
}

/// One frame of stacks merged across ranks (a prefix tree from the outermost frame).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackNode {
    /// The frame's name.
    pub frame: String,
    /// The ranks whose stacks pass through it.
    pub ranks: crate::RankSet,
    /// How many threads do.
    pub threads: usize,
    /// Why walks that ended here stopped, if they ended early.
    pub truncated: Option<String>,
    /// Its callees.
    pub children: Vec<StackNode>,
}

/// What kind of MPI call a thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallClass {
    /// A blocking receive or probe (`MPI_Recv`, `MPI_Probe`, `MPI_Mrecv`...).
    BlockingReceive,
    /// A blocking send (`MPI_Send`, `MPI_Ssend`, `MPI_Rsend`, `MPI_Bsend`).
    BlockingSend,
    /// `MPI_Sendrecv` and `MPI_Sendrecv_replace`.
    SendReceive,
    /// `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany`, `MPI_Waitsome`.
    Wait,
    /// The test family and other calls that return at once (`MPI_Test`, `MPI_Iprobe`,
    /// `MPI_Isend`...).
    NonBlocking,
    /// A blocking collective (`MPI_Barrier`, `MPI_Allreduce`...).
    Collective,
    /// One-sided synchronisation (`MPI_Win_fence`, `MPI_Win_wait`...).
    OneSided,
    /// `MPI_Init`, `MPI_Init_thread`.
    Init,
    /// `MPI_Finalize`.
    Finalize,
    /// Another MPI call.
    Other,
}

/// Where a thread is with respect to MPI: the outermost `MPI_`/`PMPI_` frame of its
/// stack, or the innermost frame of the program when it is not in MPI.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// In an MPI call.
    InMpi {
        /// Its name, without the profiling `P` (`MPI_Allreduce`).
        call: String,
        /// Its kind.
        class: CallClass,
    },
    /// Not in MPI: computing (or blocked elsewhere) in this function.
    Outside {
        /// The innermost frame's function, when named.
        function: Option<String>,
        /// Its source line, "file.c:88", when the DWARF says it.
        source: Option<String>,
    },
    /// Unknown: the walk ended early (a corrupt stack, code it could not unwind) before
    /// any MPI frame, so the thread may still be inside MPI.
    Unknown,
}

impl CallClass {
    /// The class of an MPI function name (`MPI_X` or `PMPI_X`).
    pub fn of(call: &str) -> CallClass {
        let name = call.strip_prefix('P').unwrap_or(call);
        let rest = name
            .strip_prefix("MPI_")
            .unwrap_or(name)
            .to_ascii_lowercase();
        match rest.as_str() {
            "recv" | "probe" | "mprobe" | "mrecv" => CallClass::BlockingReceive,
            "send" | "ssend" | "rsend" | "bsend" => CallClass::BlockingSend,
            "sendrecv" | "sendrecv_replace" => CallClass::SendReceive,
            "wait" | "waitall" | "waitany" | "waitsome" => CallClass::Wait,
            "barrier"
            | "bcast"
            | "reduce"
            | "allreduce"
            | "gather"
            | "gatherv"
            | "scatter"
            | "scatterv"
            | "allgather"
            | "allgatherv"
            | "alltoall"
            | "alltoallv"
            | "alltoallw"
            | "reduce_scatter"
            | "reduce_scatter_block"
            | "scan"
            | "exscan" => CallClass::Collective,
            "win_fence" | "win_wait" | "win_complete" | "win_lock" | "win_lock_all"
            | "win_unlock" | "win_unlock_all" | "win_flush" | "win_flush_all" => {
                CallClass::OneSided
            }
            "init" | "init_thread" => CallClass::Init,
            "finalize" => CallClass::Finalize,
            r if r.starts_with('i') || r.starts_with("test") => CallClass::NonBlocking,
            _ => CallClass::Other,
        }
    }

    /// Whether a thread in such a call cannot return until something else happens.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            CallClass::BlockingReceive
                | CallClass::BlockingSend
                | CallClass::SendReceive
                | CallClass::Wait
                | CallClass::Collective
                | CallClass::OneSided
                | CallClass::Finalize
        )
    }
}

/// Whether an object's path is the program's: the same path, or the same file name when
/// the program is named as launched (`./solver`, relative to a directory unknown here).
fn same_file(object: Option<&str>, program: Option<&str>) -> bool {
    match (object, program) {
        (Some(o), Some(p)) if o == p => true,
        (Some(o), Some(p)) if !p.starts_with('/') => {
            let name = |s: &str| s.rsplit('/').next().map(str::to_owned);
            name(o) == name(p)
        }
        _ => false,
    }
}

impl ThreadStack {
    /// Where the thread is with respect to MPI; outside it, the innermost frame of
    /// `program` (the rank's executable) names where it computes.
    pub fn location_in(&self, program: Option<&str>) -> Location {
        match self.location() {
            Location::Outside { function, source } => {
                match self
                    .frames
                    .iter()
                    .find(|f| f.function.is_some() && same_file(f.object.as_deref(), program))
                {
                    Some(f) => Location::Outside {
                        function: f.function.clone(),
                        source: f.source(),
                    },
                    None => Location::Outside { function, source },
                }
            }
            inside => inside,
        }
    }

    /// Where the thread is with respect to MPI.
    pub fn location(&self) -> Location {
        let is_mpi = |f: &Frame| {
            f.function
                .as_deref()
                .is_some_and(|n| n.starts_with("MPI_") || n.starts_with("PMPI_"))
        };
        // Outermost first: the entry point the program called.
        match self.frames.iter().rev().find(|f| is_mpi(f)) {
            Some(f) => {
                let name = f.function.as_deref().unwrap_or_default();
                let call = name.strip_prefix('P').unwrap_or(name).to_owned();
                Location::InMpi {
                    class: CallClass::of(&call),
                    call,
                }
            }
            None if self.truncated.is_some() || self.frames.is_empty() => Location::Unknown,
            None => Location::Outside {
                function: self.frames.first().and_then(|f| f.function.clone()),
                source: self.frames.first().and_then(Frame::source),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(names: &[&str]) -> ThreadStack {
        ThreadStack {
            tid: 1,
            frames: names
                .iter()
                .map(|n| Frame {
                    function: Some((*n).to_owned()),
                    ..Frame::default()
                })
                .collect(),
            truncated: None,
            call: None,
        }
    }

    #[test]
    fn the_outermost_mpi_frame_is_the_call() {
        let s = stack(&[
            "poll",
            "MPIDI_progress",
            "MPIR_Wait",
            "PMPI_Recv",
            "main",
            "_start",
        ]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Recv".into(),
                class: CallClass::BlockingReceive
            }
        );
        let s = stack(&["MPI_Test", "MPI_Allreduce", "main"]);
        assert_eq!(
            s.location(),
            Location::InMpi {
                call: "MPI_Allreduce".into(),
                class: CallClass::Collective
            }
        );
        assert_eq!(
            stack(&["solve", "main"]).location(),
            Location::Outside {
                function: Some("solve".into()),
                source: None,
            }
        );
        // A walk that stopped early, with no MPI frame yet, may still be in MPI.
        let cut = ThreadStack {
            truncated: Some("return address 0x10 is in no mapped object".into()),
            ..stack(&["solve"])
        };
        assert_eq!(cut.location(), Location::Unknown);
        assert_eq!(CallClass::of("MPI_Irecv"), CallClass::NonBlocking);
        assert_eq!(CallClass::of("MPI_Testall"), CallClass::NonBlocking);
        assert!(CallClass::of("MPI_Waitall").blocks());
        assert!(!CallClass::of("MPI_Comm_rank").blocks());
    }
}
