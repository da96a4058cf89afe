//! What the hang recorder's counts prove of a blocked call from one snapshot of the job,
//! by arithmetic on the counts of ranks stopped at one moment rather than by watching:
//!
//! - [`quiet`]: a receive whose source sent nothing still on its way to it;
//! - [`behind`]: a collective's members that have not entered it, which the collective
//!   cannot complete without;
//! - [`unmatched`]: a synchronous send no receive of its destination can take;
//! - [`pairing`]: the members of both groups an `MPI_Intercomm_create` waits for.
//!
//! Each answer is a set of ranks the call waits for *for certain*; what is not proven
//! is left out, never guessed.
#![deny(missing_docs)]

pub mod behind;
pub mod pairing;
pub mod quiet;
pub mod unmatched;
