//! Bounds on what the callbacks serve a library.

/// Largest single `mqs_malloc_fp` request served; bigger ones return NULL so a library
/// that sizes a buffer from corrupt target memory cannot exhaust the harness.
pub const MAX_ALLOCATION: usize = 1 << 30;
/// Alignment of every block `mqs_malloc_fp` returns (what C's `malloc` guarantees on LP64).
pub const MALLOC_ALIGN: usize = 16;
/// `dprints` lines kept per session; later ones are only counted.
pub const MAX_DPRINTS_LINES: usize = 100_000;
