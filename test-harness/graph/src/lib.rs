//! # mqd-graph: the wait-for graph of a job
//!
//! A rank waits for others through the waits of its threads: a [`Plan`] gives each rank
//! its alternatives (one per thread that could move it), each held by any one of its
//! waits. The deadlocked set is the greatest set of ranks each of whose alternatives is
//! held by a wait into the set; [`Classes`] computes it on classes of rules, rank sets
//! rotated and intersected, so that a ring of a million ranks is one class. Inside it,
//! [`Graph`] names the strongly connected sets (a simple cycle, or a knot) and the ranks
//! blocked behind them as findings, each with the waits and operations that make it,
//! and [`parts`] splits a deadlocked set of classes alike, by rank sets;
//! [`attention`] names the ranks waited for that show nothing and the peers nobody can
//! name; [`merge`] makes ranks' conclusions alike one finding.
#![deny(missing_docs)]

mod atoms;
mod attention;
mod classes;
mod cycles;
mod deadlock;
mod finalized;
pub mod parts;
mod plan;
mod rank_plans;
pub mod summary;

pub use atoms::{Atom, merge};
pub use attention::attention;
pub use classes::{ClassAlternative, ClassPlan, Classes, MAX_ROUNDS, Rule};
pub use cycles::{single_cycle, strongly_connected};
pub use deadlock::{Graph, MAX_KNOT_EDGES, Unknown, evidence_of, proven_and_possible};
pub use finalized::waits_on_finalized;
pub use plan::{Alternative, ByRank, Plan, RankPlan, graph};
