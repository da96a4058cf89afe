//! Shared by the tests of `mqd`: jobs of synthetic MPICH processes displayed through the
//! real library, the diagnosis as a user reads it (findings with their words), DOT
//! parsing, and scratch files.
#![allow(dead_code)]

pub mod rendered;

pub use rendered::*;

use mqd_model::{Acquisition, FindingKind, JobDump, LibraryInfo, RankDump};
use mqd_synthetic::expect;
use mqd_synthetic::{
    Arch, CommSpec, Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec, SyntheticTarget,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

// ------------------------------------------------------------------ synthetic jobs

/// Context id of the "ring" duplicate of COMM_WORLD.
pub const RING: i32 = 48;

/// A process of an `n`-rank job at world rank `r`: COMM_SELF and COMM_WORLD, no queues.
pub fn base(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = ProcessSpec::new(layout, Arch::LP64_LE);
    spec.sequence_number = 2;
    spec.comms = vec![CommSpec::self_comm(r), CommSpec::world(n, r)];
    spec
}

/// [`base`] plus the "ring" duplicate of COMM_WORLD.
pub fn with_ring(layout: Layout, n: i32, r: i32) -> ProcessSpec {
    let mut spec = base(layout, n, r);
    spec.sequence_number = 3;
    spec.comms
        .insert(0, CommSpec::intra(2, "ring", RING, r, (0..n).collect()));
    spec
}

/// Displays every process through the library, as a job (rank i = `specs[i]`).
pub fn job(specs: &[ProcessSpec]) -> JobDump {
    let mut dbg = expect::debugger();
    let ranks = specs
        .iter()
        .enumerate()
        .map(|(r, spec)| {
            let p = dbg
                .add_process(Box::new(SyntheticTarget::build(spec)), r as i32)
                .unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let display = dbg.display(p).unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let message = dbg.process_message(p).map(str::to_owned);
            RankDump {
                rank: r as i32,
                pid: Some(1000 + r as i32),
                host: Some("synthetic".into()),
                executable: None,
                lists_blocking_sends: mqd_debugger::dump::lists_blocking_sends(message.as_deref()),
                signal: None,
                duplicate: false,
                threads: Vec::new(),
                message,
                outcome: Ok(display.communicators),
            }
        })
        .collect();
    let lib = expect::library();
    JobDump {
        dll: LibraryInfo {
            path: lib.path().display().to_string(),
            version: lib.version_string().to_owned(),
            note: None,
        },
        acquired_by: Acquisition::Attach,
        starter_pid: None,
        abort_message: None,
        job_size: None,
        ranks,
    }
}

/// An `n`-rank ring blocked in `MPI_Ssend` to the right neighbour on "ring", tag 5: each
/// send pending (listed when `listed`), each message waiting unexpected at the destination
/// (eager when `listed`, a rendezvous announcement otherwise: what ch3 shows of a blocking
/// MPI_Ssend, which it does not list).
pub fn ssend_ring(layout: Layout, n: i32, listed: bool) -> JobDump {
    let specs: Vec<ProcessSpec> = (0..n)
        .map(|r| {
            let (left, right) = ((r + n - 1) % n, (r + 1) % n);
            let mut spec = with_ring(layout, n, r);
            if listed {
                spec.sends = vec![RequestSpec::send(RING, right, 5, 0x7000_0000, 1000)];
                spec.unexpected = vec![
                    RequestSpec::unexpected(RING, left, 5, 0)
                        .completed(left, 5)
                        .synchronous(),
                ];
            } else {
                spec.unexpected = vec![RequestSpec::unexpected(RING, left, 5, 0).synchronous()];
            }
            spec
        })
        .collect();
    job(&specs)
}

/// Rank 0 waits for anyone (tag 1); ranks 1 and 2 wait for rank 0 (tag 2).
pub fn knot_job() -> JobDump {
    let specs: Vec<ProcessSpec> = (0..3)
        .map(|r| {
            let mut spec = base(Layout::Debugq5, 3, r);
            spec.posted = vec![if r == 0 {
                RequestSpec::recv(0, MPI_ANY_SOURCE, 1, 0x7000_0000, 1)
            } else {
                RequestSpec::recv(0, 0, 2, 0x7000_0000, 1)
            }];
            spec
        })
        .collect();
    job(&specs)
}

pub fn kinds(d: &Rendered) -> Vec<FindingKind> {
    d.findings.iter().map(|f| f.kind).collect()
}

pub fn json_kinds(d: &Rendered) -> Vec<String> {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

pub fn only(d: &Rendered, kind: FindingKind) -> &Seen {
    let found: Vec<_> = d.of_kind(kind).collect();
    assert_eq!(found.len(), 1, "one {kind:?} in\n{}", d.to_text());
    found[0]
}

/// The JSON finding of `kind` (the first).
pub fn json_finding(d: &Rendered, kind: &str) -> Value {
    d.to_json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:#}", d.to_json()))
        .clone()
}

// ------------------------------------------------------------------ pictures

/// A DOT document in the one-statement-per-line form `to_dot` writes.
#[derive(Debug, Default)]
pub struct Dot {
    pub nodes: BTreeMap<String, String>,
    pub edges: Vec<(String, String, String)>,
}

pub fn parse_dot(text: &str) -> Dot {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("digraph mqd {"), "{text}");
    assert_eq!(text.lines().last(), Some("}"), "{text}");
    assert_eq!(text.matches('{').count(), text.matches('}').count());
    let mut dot = Dot::default();
    for line in lines {
        let line = line.trim();
        if line == "}" || line.is_empty() {
            continue;
        }
        assert!(line.ends_with("];"), "statement: {line}");
        let (head, attrs) = line.split_once(" [").expect("attributes");
        // Quotes balance (escaped quotes do not count).
        assert_eq!(
            attrs.replace("\\\"", "").matches('"').count() % 2,
            0,
            "{line}"
        );
        match head.split_once(" -> ") {
            Some((a, b)) => dot.edges.push((a.into(), b.into(), attrs.into())),
            None if ["graph", "node", "edge"].contains(&head) => {}
            None => {
                assert!(
                    head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "node id {head}"
                );
                assert!(
                    dot.nodes.insert(head.into(), attrs.into()).is_none(),
                    "{head} twice"
                );
            }
        }
    }
    for (a, b, _) in &dot.edges {
        assert!(
            dot.nodes.contains_key(a) && dot.nodes.contains_key(b),
            "{a} -> {b} undeclared:\n{text}"
        );
    }
    dot
}

/// A scratch directory of one test, under the target directory (never `/tmp` itself),
/// removed with everything in it when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh directory named after the test.
    pub fn new(test: &str) -> Scratch {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mqd-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// A file in it.
    pub fn file(&self, name: &str) -> PathBuf {
        assert!(
            !name.is_empty() && !name.contains('/'),
            "a file name: {name:?}"
        );
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
