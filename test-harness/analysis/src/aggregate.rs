//! Rank sets: ranks whose queues look the same once every peer is written relative to
//! the rank are one [`Group`].
//!
//! A peer is written relative to the rank ("right neighbour" = local rank + 1 mod size,
//! "left neighbour", "itself", "the other rank" of a pair, "any source") or by its
//! COMM_WORLD rank. For each operation the relative or the absolute form is chosen,
//! whichever more ranks share ("every rank receives from rank 0" stays absolute).
//! Communicators are identified across ranks by name and size (their unique ids are
//! addresses in each process).

use mqd_model::aggregate::{CommForm, OpForm, QueueForm, RankForm};
use mqd_model::diagnosis::PeerName;
use mqd_model::{
    CommKey, Communicator, Group, JobDump, Operation, Queue, QueueKind, RankSet, Relation,
};
use mqd_scale::shared::world_of;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The two normal forms of an operation: relative (when a pattern fits) and absolute.
fn op_forms(comm: &Communicator, queue: QueueKind, op: &Operation) -> (OpForm, OpForm) {
    let unexpected = queue == QueueKind::UnexpectedMessages;
    let base = OpForm {
        peer: PeerName::AnySource,
        tag: (!op.tag_wild).then_some(op.desired_tag),
        count: if unexpected && op.desired_length == 0 {
            None
        } else {
            Some(op.desired_length)
        },
        // An unexpected message's status says eager or rendezvous: not the rank's state.
        status: (!unexpected).then(|| op.status.code()),
        collective: op.collective,
    };
    if op.desired_local_rank < 0 {
        return (base.clone(), base);
    }
    let global = if unexpected {
        op.desired_global_rank.max(op.actual_global_rank)
    } else {
        op.desired_global_rank
    };
    let absolute = OpForm {
        peer: match world_of(comm, op.desired_local_rank, global) {
            Some(w) => PeerName::World(w),
            None => PeerName::Local(op.desired_local_rank),
        },
        ..base.clone()
    };
    let relation = if op.remote_group {
        Relation::Absolute
    } else {
        Relation::of(comm.local_rank, op.desired_local_rank, comm.size)
    };
    let relative = match relation {
        Relation::Absolute => absolute.clone(),
        r => OpForm {
            peer: PeerName::Relative(r),
            ..base
        },
    };
    (relative, absolute)
}

/// Groups the ranks of `job` whose normalised states are equal, in order of their lowest
/// rank (processes of unknown rank last).
pub fn aggregate(job: &JobDump) -> Vec<Group> {
    // Pass 1: how many ranks share each form of each operation.
    type FormId = (CommKey, QueueKind, OpForm);
    let mut counts: HashMap<FormId, usize> = HashMap::new();
    for r in &job.ranks {
        let mut seen: HashSet<FormId> = HashSet::new();
        for c in r.communicators() {
            let key = CommKey::of(c);
            for q in QueueKind::ALL {
                for op in c.queue(q).ops() {
                    let (rel, abs) = op_forms(c, q, op);
                    seen.insert((key.clone(), q, rel));
                    seen.insert((key.clone(), q, abs));
                }
            }
        }
        for id in seen {
            *counts.entry(id).or_default() += 1;
        }
    }
    // Pass 2: each rank's state with the more widely shared form of each operation.
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<RankForm, usize> = HashMap::new();
    for r in &job.ranks {
        let form = match &r.outcome {
            Err(e) => RankForm::Failed(e.clone()),
            Ok(comms) => {
                let mut forms = Vec::new();
                for c in comms {
                    let key = CommKey::of(c);
                    let queues: [QueueForm; 3] = QueueKind::ALL.map(|q| match c.queue(q) {
                        Queue::NoInformation => QueueForm::NoInformation,
                        Queue::Error(e) => QueueForm::Error(e.text.clone()),
                        Queue::Operations(ops) => {
                            let mut shared: BTreeMap<OpForm, usize> = BTreeMap::new();
                            for op in ops {
                                let (rel, abs) = op_forms(c, q, op);
                                let n = |f: &OpForm| {
                                    counts
                                        .get(&(key.clone(), q, f.clone()))
                                        .copied()
                                        .unwrap_or(0)
                                };
                                let chosen = if n(&abs) > n(&rel) { abs } else { rel };
                                *shared.entry(chosen).or_default() += 1;
                            }
                            QueueForm::Ops(shared.into_iter().collect())
                        }
                    });
                    let empty = queues
                        .iter()
                        .all(|q| matches!(q, QueueForm::Ops(ops) if ops.is_empty()));
                    if !empty {
                        forms.push(CommForm { key, queues });
                    }
                }
                forms.sort();
                RankForm::Display(forms)
            }
        };
        let g = *index.entry(form.clone()).or_insert_with(|| {
            groups.push(Group {
                ranks: RankSet::new(),
                unranked: Vec::new(),
                form,
            });
            groups.len() - 1
        });
        match r.world_rank() {
            Some(rank) => {
                groups[g].ranks.insert(rank);
            }
            None => groups[g].unranked.push(r.pid),
        }
    }
    groups.sort_by(|a, b| {
        (a.ranks.is_empty(), a.ranks.first()).cmp(&(b.ranks.is_empty(), b.ranks.first()))
    });
    groups
}
