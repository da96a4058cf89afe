//! # mqd-mpi-abi: MPI libraries without debug information, as data
//!
//! - [`tables`]: what the handles and special values a program passes to MPI mean in
//!   each ABI (MPICH's, Open MPI's, the MPI 5 standard's);
//! - [`comm_objects`]: a program's own communicator named by its members, from the
//!   library's object read at offsets that are facts of its version.
#![deny(missing_docs)]

pub mod comm_objects;
pub mod tables;
