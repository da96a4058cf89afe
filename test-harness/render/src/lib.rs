//! Everything `mqd` prints: the model and the analysis in words.
//!
//! - [`phrases`]: rank sets, communicators, tags, waits and cycle paths in short phrases;
//! - [`words`]: findings and their evidence in sentences;
//! - [`groups`]: rank sets that share a state;
//! - [`text`]: the text views;
//! - [`stacks`]: stacks merged across ranks;
//! - [`json`]: the JSON documents of schema `mqd/3`;
//! - [`hold`]: what a hold proved, dissolved, or could not;
//! - [`verdict`]: deadlocks, proven or possible, and the verdict;
//! - [`view`]: the listing's filters (`--ranks`, `--comm`, `--tag`);
//! - [`dot`]: the wait-for graph for Graphviz;
//! - [`calls`]: the mismatches blocked calls show;
//! - [`classes`]: a job of classes (analysed at scale) and its diagnosis;
//! - [`class_watch`]: what persisted across a watch's samples, by rank sets.
#![deny(missing_docs)]

pub mod calls;
pub mod class_watch;
pub mod classes;
pub mod dot;
pub mod groups;
pub mod hold;
pub mod json;
pub mod openmp;
pub mod phrases;
pub mod stacks;
pub mod text;
pub mod verdict;
pub mod view;
pub mod words;
