//! `libmqd_recorder.so`: every C binding of the MPI standard wrapped (the profiling
//! interface, `LD_PRELOAD`ed), each thread's call in progress kept in a region of the
//! rank's own memory that `mqd` finds by symbol and reads, live or from a core.
//!
//! A wrapper records and calls the next definition of its binding (another tool preloaded
//! after this one, else the MPI's), passing on the very words it was called with: a
//! handle is an `int` in the MPICH family and a pointer in Open MPI, and both travel in
//! 64-bit registers and stack slots, so one wrapper serves both ABIs. It never changes
//! what the call does or returns. Nothing here allocates, locks or writes to a file.

mod comms;
mod next;
mod record;
mod region;
mod traffic;

/// A machine word: how every argument of an MPI C binding travels on x86-64 and AArch64.
pub type Word = usize;

/// A wrapped C binding.
pub struct Binding {
    /// Its name.
    pub name: &'static std::ffi::CStr,
    /// The large-count (`_c`) form.
    pub large: bool,
    /// Collective over its communicator (counted there).
    pub collective: bool,
    /// What it does to the message accounting.
    pub traffic: Traffic,
    /// It returns a new request (the request table forgets what its handle was).
    pub makes_request: bool,
    /// The first parameter of each role of [`ROLES`] (255: none; roles as `build.rs`
    /// reads them from the standard's list), found there rather than on every call.
    pub at: [u8; ROLES.len()],
    /// The second rank and tag parameters (255: none).
    pub second: [u8; 2],
}

/// The roles whose parameters [`Binding::at`] finds (see `build.rs`).
pub const ROLES: &str = "crtndCFQLAqsSfiIoMmwWXa";

/// Where `role` is in [`ROLES`]; a role not there fails the build.
const fn role_index(role: u8) -> usize {
    let roles = ROLES.as_bytes();
    let mut k = 0;
    while roles[k] != role {
        k += 1;
    }
    k
}

impl Binding {
    /// The first parameter of role `R`: one load, the role's index found at compile time
    /// (wrappers run on every MPI call).
    #[inline]
    pub fn at<const R: u8>(&self) -> Option<usize> {
        let i = self.at[const { role_index(R) }];
        (i != u8::MAX).then_some(usize::from(i))
    }

    /// The second parameter of role `r` (`b'r'`) or `t` (`b't'`).
    #[inline]
    pub fn second(&self, role: u8) -> Option<usize> {
        let i = self.second[usize::from(role == b't')];
        (i != u8::MAX).then_some(usize::from(i))
    }
}

/// What a binding does to the message accounting and the request table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Nothing.
    None,
    /// Sends one message on entry (`MPI_Send`, `MPI_Isend`, ...).
    Send,
    /// Receives one message, counted when it returns (`MPI_Recv`).
    Receive,
    /// Both (`MPI_Sendrecv`).
    SendReceive,
    /// Makes a receive request (`MPI_Irecv`).
    Irecv,
    /// Sends one message and makes a receive request (`MPI_Isendrecv`).
    Isendrecv,
    /// Makes a persistent send request (`MPI_Send_init`).
    SendInit,
    /// Makes a persistent receive request (`MPI_Recv_init`).
    ReceiveInit,
    /// Makes a request whose messages are not counted (`MPI_Psend_init`).
    Untracked,
    /// Starts persistent requests (`MPI_Start`, `MPI_Startall`).
    Start,
    /// Completes one request (`MPI_Wait`).
    Wait,
    /// May complete one request (`MPI_Test`).
    Test,
    /// Completes them all (`MPI_Waitall`).
    Waitall,
    /// May complete them all (`MPI_Testall`).
    Testall,
    /// Completes one of them (`MPI_Waitany`).
    Waitany,
    /// May complete one of them (`MPI_Testany`).
    Testany,
    /// Completes some of them (`MPI_Waitsome`).
    Waitsome,
    /// May complete some of them (`MPI_Testsome`).
    Testsome,
    /// Matches a message (`MPI_Mprobe`, `MPI_Improbe`).
    Probe,
    /// Receives a matched message (`MPI_Mrecv`, `MPI_Imrecv`).
    Mrecv,
    /// Cancels a request.
    Cancel,
    /// Frees a request.
    Free,
}

impl Traffic {
    /// One of the `MPI_Wait` and `MPI_Test` families.
    pub fn completes(self) -> bool {
        matches!(
            self,
            Traffic::Wait
                | Traffic::Test
                | Traffic::Waitall
                | Traffic::Testall
                | Traffic::Waitany
                | Traffic::Testany
                | Traffic::Waitsome
                | Traffic::Testsome
        )
    }
}

/// Room for one `MPI_Status` of any MPI (MPICH's 20 bytes, Open MPI's 24, the standard
/// ABI's 32).
#[derive(Default)]
#[repr(C, align(8))]
pub struct Status(pub [u64; 4]);

include!(concat!(env!("OUT_DIR"), "/wrappers.rs"));
