//! # mqd-analysis: why a job hangs
//!
//! Pure functions from a [`JobDump`](mqd_model::JobDump) to structured conclusions: no
//! I/O, and no words meant for people (renderers word the
//! [`Subject`](mqd_model::Subject) of each finding).
//!
//! - **Diagnosis** ([`diagnose`]): the class analysis of `mqd-scale`, each rank a class
//!   of its own: the one analysis of every job, whatever its size.
//! - **Aggregation** ([`aggregate`]): ranks whose queues look the same once every peer is
//!   written relative to the rank are one [`Group`](mqd_model::Group).
//! - **Watch** ([`persistent`]): only the waits present in every sample count.
//! - **Hold** ([`hold`]): what a snapshot leaves possible, a window in which the ranks
//!   are watched proves (they stay in their calls and do nothing) or dissolves (they
//!   move).
#![deny(missing_docs)]

mod aggregate;
mod diagnose;
pub mod hold;
mod watch;

pub use aggregate::aggregate;
pub use diagnose::{Analysis, analyse, diagnose};
pub use mqd_graph::MAX_KNOT_EDGES;
pub use watch::{persistent, persistent_dumps};
