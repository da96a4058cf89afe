//! # mqd-model: the data of an MPI job dump and of its diagnosis
//!
//! The one definition every other part of `mqd` shares:
//!
//! - [`calls`]: what each MPI call waits for, for every procedure of the standard;
//! - [`dump`]: a job's message queues as the MQD library reported them ([`JobDump`],
//!   rank by rank: communicators, their groups, posted receives, unexpected messages and
//!   pending sends);
//! - [`diagnosis`]: who waits for whom and why the job does not move ([`Diagnosis`],
//!   [`Finding`]), as structured facts with references to the operations that prove them;
//! - [`hold`]: what holding a job through a window showed, the raw measurements;
//! - [`stack`]: where each thread of a process is ([`ThreadStack`]), and stacks merged
//!   across ranks ([`StackNode`]);
//! - [`aggregate`]: ranks in the same state ([`Group`]);
//! - [`document`]: the JSON documents `mqd` prints (schema [`SCHEMA`]), which carry the
//!   renderer's words beside the facts;
//! - [`comm_group`]: a communicator's group, a progression or a shared table
//!   ([`CommGroup`]);
//! - [`rank_set`]: sets of COMM_WORLD ranks ([`RankSet`]), printed as `0-5,7`.
//!
//! Inside the crate, items are named by the module that defines them; the re-exports
//! below are for other crates.
//!
//! Every type serialises with serde; the model has no other dependency, does no I/O and
//! words nothing.
#![deny(missing_docs)]

pub mod aggregate;
pub mod call_comms;
pub mod calls;
pub mod classes;
pub mod comm_group;
pub mod diagnosis;
pub mod document;
pub mod dump;
pub mod hold;
pub mod openmp;
pub mod peers;
pub mod places;
pub mod rank_set;
pub mod regions;
pub mod stack;
pub mod traffic;

pub use aggregate::Group;
pub use calls::CallClass;
pub use classes::{ClassJob, ClassPeer, FailedRanks, RankClass, UnrankedProcess};
pub use comm_group::CommGroup;
pub use diagnosis::{
    Certainty, CommKey, Diagnosis, Doubt, Evidence, Finding, FindingKind, HoldReport, OpRef, Peer,
    Persistence, Relation, Subject, Verdict, Wait, WaitKind, WaitTarget,
};
pub use dump::{
    Acquisition, Communicator, ContextIds, GroupTable, JobDump, LibraryInfo, MpiPhase, MpiState,
    MqsError, Operation, OperationStatus, Queue, QueueKind, RankDump, SCHEMA, SenderState,
    Snapshot, ThreadLevel,
};
pub use openmp::{OpenMpRegion, OpenMpTask, OpenMpThread};
pub use rank_set::RankSet;
pub use stack::{CallArguments, Frame, Language, Location, StackNode, ThreadStack};
pub use traffic::{CommCount, PostedReceive, Traffic, TrafficCount};
