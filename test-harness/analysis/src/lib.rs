//! # mqd-analysis: why a job hangs
//!
//! Pure functions from a [`JobDump`](mqd_model::JobDump) to structured conclusions: no
//! I/O, and no words meant for people (renderers word the
//! [`Subject`](mqd_model::Subject) of each finding).
//!
//! - **Aggregation** ([`aggregate`]): ranks whose queues look the same once every peer is
//!   written relative to the rank are one [`Group`](mqd_model::Group).
//! - **Diagnosis** ([`diagnose`]): the queues become [`Wait`](mqd_model::Wait)s from one
//!   COMM_WORLD rank to others (a pending send and a message waiting unexpected at its
//!   destination make the sender wait for the receiver, an AND-edge; a posted receive with
//!   a specific source makes the receiver wait for it, AND; an `MPI_ANY_SOURCE` receive
//!   waits for any member of its communicator, OR-edges, or is unfollowable when the
//!   library reports no group). Deadlocks are the greatest set of blocked ranks each of
//!   which waits for something only deadlocked ranks could give; inside it the analysis
//!   reports one finding per strongly connected set (a simple cycle of AND-edges, or a
//!   knot of several cycles or of OR-edges) and the
//!   ranks blocked behind them. It also reports mismatches (a posted receive that would
//!   take a message waiting at its rank but for the tag, the source or the
//!   communicator), ranks waited for that have nothing pending or were not dumped, waits
//!   it cannot follow, messages in transit, and a summary when nothing is deadlocked.
//!   Every [`Finding`](mqd_model::Finding) carries the operations that prove it.
//! - **Watch** ([`persistent`]): only the waits present in every sample count.
//! - **Hold** ([`hold`]): what a snapshot leaves possible, a window in which the ranks
//!   are watched proves (they stay in their calls and do nothing) or dissolves (they
//!   move).
//!
//! - **Verdict**: the queues do not say whether a rank is blocked *in* a call
//!   (`MPI_Irecv` and `MPI_Recv` look the same), so a deadlock is *proven* only through
//!   waits something shows to block: a synchronous message waiting at its destination
//!   that its sender does not list, where the library lists only non-blocking sends
//!   (ch3, ch4), is a blocking `MPI_Ssend`. Deadlocks resting on other pending
//!   operations are *possible*. The verdict is "deadlock" when one is proven, "no
//!   deadlock" only when every rank of the job was dumped, every wait followed and not
//!   even a possible deadlock exists, else "undetermined" with its reasons
//!   ([`Doubt`](mqd_model::Doubt)s). The remote group of an intercommunicator is not in
//!   the model.
//!
//! The modules: `diagnose` runs `scan` (queues to waits), `plan` (the proof and the worst
//! reading, with `collectives` and `locations`), `deadlock` (with `cycles`), `mismatch`,
//! `attention`, `calls` and `verdict`, and merges findings with `atoms`; `aggregate` and
//! `watch` give the other entry points; `peers` resolves peers to COMM_WORLD ranks.
#![deny(missing_docs)]

mod aggregate;
mod attention;
mod call_mismatch;
mod calls;
mod collectives;
mod diagnose;
pub mod hold;
mod locations;
mod mismatch;
mod openmp;
mod plan;
mod scan;
#[cfg(test)]
mod test_jobs;
mod verdict;
mod watch;

pub use aggregate::aggregate;
pub use diagnose::{analysed, diagnose, per_rank};
pub use mqd_graph::MAX_KNOT_EDGES;
pub use watch::{persistent, persistent_dumps};
