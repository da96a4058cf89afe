//! Layout discovery: which MPICH data structures an image holds, and where every
//! field sits, learnt only from the debugger's symbols and type information.
//!
//! Offsets are cached per image (they are the same in every process running it);
//! scalar widths that depend on the target ABI (`int`, pointers) are resolved per
//! process from `mqs_get_type_sizes`.

mod discover;
mod message;
mod query;
mod types;

pub(crate) use discover::discover;
pub(crate) use message::{MessageWriter, describe_layout, describe_missing};
pub(crate) use query::ImageQuery;
pub(crate) use types::*;
