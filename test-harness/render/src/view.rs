//! What the queue listing shows: `--ranks`, `--comm` and `--tag` narrow it; the
//! diagnosis is always of the whole job.

use mqd_model::{JobDump, Queue, RankSet};
use std::borrow::Cow;

/// The listing's filters; none set shows everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these COMM_WORLD ranks.
    pub ranks: Option<RankSet>,
    /// Only communicators of this name.
    pub comm: Option<String>,
    /// Only operations with this tag.
    pub tag: Option<i64>,
}

impl Filter {
    /// Whether it shows everything.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_none() && self.comm.is_none() && self.tag.is_none()
    }

    /// The job as the listing shows it: the job itself when nothing is filtered (a
    /// copy of a large job would double its memory).
    pub fn apply<'a>(&self, job: &'a JobDump) -> Cow<'a, JobDump> {
        if self.is_empty() {
            return Cow::Borrowed(job);
        }
        let mut shown = job.clone();
        if let Some(set) = &self.ranks {
            shown
                .ranks
                .retain(|r| r.world_rank().is_some_and(|w| set.contains(w)));
        }
        for rank in &mut shown.ranks {
            let Ok(comms) = &mut rank.outcome else {
                continue;
            };
            if let Some(name) = &self.comm {
                comms.retain(|c| &c.name == name);
            }
            if let Some(tag) = self.tag {
                for c in comms.iter_mut() {
                    for q in [
                        &mut c.pending_receives,
                        &mut c.unexpected_messages,
                        &mut c.pending_sends,
                    ] {
                        if let Queue::Operations(ops) = q {
                            ops.retain(|op| op.desired_tag == tag);
                        }
                    }
                }
            }
        }
        Cow::Owned(shown)
    }
}
