//! Per-rank conclusions, merged with those of other ranks that follow the same pattern
//! into one [`Finding`] ("ranks 0-62 each wait for ...").

use mqd_model::diagnosis::{MismatchMessage, MismatchReceive, PeerName, Subject};
use mqd_model::{Certainty, Evidence, Finding, FindingKind, RankSet};
use std::collections::{HashMap, HashSet};

/// One rank's conclusion.
pub struct Atom {
    /// What it is about.
    pub kind: FindingKind,
    /// Its COMM_WORLD ranks: one rank, the members of a class (each alike), or none
    /// (a process of unknown rank).
    pub ranks: RankSet,
    /// Its facts.
    pub subject: Subject,
    /// The operations that show it.
    pub evidence: Vec<Evidence>,
    /// The waits it rests on, from rank to rank.
    pub edges: Vec<(i32, i32)>,
}

impl Atom {
    /// A conclusion of `rank` (-1: of unknown rank) without edges.
    pub fn new(kind: FindingKind, rank: i32, subject: Subject, evidence: Vec<Evidence>) -> Atom {
        Atom::of_ranks(kind, RankSet::from_i32s([rank]), subject, evidence)
    }

    /// A conclusion of each of `ranks` without edges: `subject` and `evidence` are its
    /// first member's.
    pub fn of_ranks(
        kind: FindingKind,
        ranks: RankSet,
        subject: Subject,
        evidence: Vec<Evidence>,
    ) -> Atom {
        Atom {
            kind,
            ranks,
            subject,
            evidence,
            edges: Vec::new(),
        }
    }
}

/// What atoms of several ranks must share to be one finding: the subject without the
/// facts that belong to one rank only.
fn pattern(subject: &Subject) -> Subject {
    match subject.clone() {
        Subject::DumpFailed { error, .. } => Subject::DumpFailed { pid: None, error },
        Subject::NoWorldRank { .. } => Subject::NoWorldRank { pid: None },
        Subject::Delivered { comm, .. } => Subject::Delivered {
            from: None,
            to: 0,
            comm,
            tag: 0,
        },
        Subject::UnknownSender { comm, .. } => Subject::UnknownSender {
            sender_local: 0,
            comm,
        },
        Subject::Mismatch { receive, message } => Subject::Mismatch {
            receive: MismatchReceive {
                source: PeerName::AnySource,
                ..receive
            },
            message: MismatchMessage {
                sender: PeerName::AnySource,
                dest: None,
                sender_rank: None,
                ..message
            },
        },
        Subject::UndumpedTarget { waiters, error } => Subject::UndumpedTarget {
            waiters,
            error: error.map(|_| String::new()),
        },
        Subject::UnfollowableRank { wait, .. } => Subject::UnfollowableRank { local: 0, wait },
        Subject::BehindDeadlock { weak_only, .. } => Subject::BehindDeadlock {
            targets: RankSet::new(),
            weak_only,
        },
        other => other,
    }
}

/// Merges atoms of the same kind and pattern, in order of their first appearance; each
/// finding keeps the subject of its first atom.
pub fn merge(atoms: Vec<Atom>) -> Vec<Finding> {
    let mut order: Vec<(FindingKind, Subject)> = Vec::new();
    let mut groups: HashMap<(FindingKind, Subject), Vec<Atom>> = HashMap::new();
    for a in atoms {
        let key = (a.kind, pattern(&a.subject));
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(a);
    }
    let mut out = Vec::new();
    for key in order {
        let kind = key.0;
        let atoms = groups.remove(&key).unwrap_or_default();
        let mut ranks = RankSet::new();
        atoms.iter().for_each(|a| ranks.union_with(&a.ranks));
        let mut evidence = Vec::new();
        let mut seen: HashSet<&Evidence> = HashSet::new();
        let mut edges = Vec::new();
        for a in &atoms {
            for e in &a.evidence {
                if seen.insert(e) {
                    evidence.push(e.clone());
                }
            }
            edges.extend(a.edges.iter().copied());
        }
        edges.sort_unstable();
        edges.dedup();
        let Some(first) = atoms.first() else { continue };
        // Several processes failing alike: the reason, without the first one's pid.
        let subject = match &first.subject {
            Subject::DumpFailed { .. } if atoms.len() > 1 => key.1.clone(),
            one => one.clone(),
        };
        out.push(Finding {
            certainty: Certainty::Definite,
            kind,
            ranks,
            subject,
            communicators: Vec::new(),
            evidence,
            cycle: None,
            edges,
        });
    }
    out
}
