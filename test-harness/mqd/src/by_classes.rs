//! Reports by classes: when a job, a set of processes or of cores is reported by the
//! classes of ranks in one state, and the report itself (with what a hold decided).

use mqd_job::acquire::Job;
use mqd_job::dump;
use mqd_model::JobDump;

/// Jobs of more ranks than this are reported by classes (unless `--per-rank`).
pub(super) const RANKS_ONE_BY_ONE: usize = 256;

/// A job's report by classes, ready to print.
pub(super) struct ClassReport {
    pub(super) classes: mqd_model::ClassJob,
    pub(super) diagnosis: mqd_scale::ClassDiagnosis,
    /// What a hold of the job's ranks showed, when one was made.
    pub(super) hold: Option<mqd_model::diagnosis::HoldReport>,
    pub(super) title: String,
    pub(super) about: serde_json::Value,
    /// Its classes not followed were split into their members ([`Self::split`]).
    split: bool,
}

impl ClassReport {
    /// The report of `kept` (`mqd job`'s or `launch`'s `job`) by classes ([`Self::of`]).
    pub(super) fn of_job(kept: &mqd_remote::Across, job: &Job) -> Option<ClassReport> {
        let hosts: std::collections::BTreeSet<Option<String>> = dump::job_processes(job)
            .into_iter()
            .map(|p| p.host)
            .collect();
        let heading = |size: u32| {
            format!(
                "Job of starter pid {}: {size} ranks on {} {}, by classes (--per-rank for each rank).",
                job.starter_pid,
                hosts.len(),
                if hosts.len() == 1 { "host" } else { "hosts" }
            )
        };
        let about = serde_json::json!({ "starter_pid": job.starter_pid });
        ClassReport::of(kept, heading, about)
    }

    /// The report of `kept` by classes; `heading` is the title's first line for the
    /// job's size, `about` the document's "job". Where a class is not followed the report
    /// waits for the job rank by rank ([`Self::unfollowed`], [`Self::split`]). `None`:
    /// the agents' classes could not be read; the job is to be reported rank by rank.
    pub(super) fn of(
        kept: &mqd_remote::Across,
        heading: impl Fn(u32) -> String,
        about: serde_json::Value,
    ) -> Option<ClassReport> {
        Some(Self::of_classes(kept.classes().ok()?, heading, about))
    }

    /// The report of `job`, dumped rank by rank, merged into classes as agents merge
    /// theirs ([`Self::of`], split where it must be).
    pub(super) fn of_ranks(
        job: &JobDump,
        heading: impl Fn(u32) -> String,
        about: serde_json::Value,
    ) -> Option<ClassReport> {
        let classes = mqd_remote::classes_of(job).ok()?;
        Some(Self::of_classes(classes, heading, about).split(job))
    }

    /// [`Self::of_ranks`] of `watch`'s and `run`'s samples, titled with the job's starter
    /// or its processes.
    pub(super) fn of_dump(job: &JobDump) -> Option<ClassReport> {
        let hosts: std::collections::BTreeSet<Option<&str>> =
            job.ranks.iter().map(|r| r.host.as_deref()).collect();
        let on = match hosts.len() {
            1 => String::new(),
            n => format!(" on {n} hosts"),
        };
        let (starter, processes) = (job.starter_pid, job.ranks.len());
        let heading = move |size: u32| match starter {
            Some(pid) => format!(
                "Job of starter pid {pid}: {size} ranks{on}, by classes (--per-rank for each rank)."
            ),
            None => format!("{processes} processes{on}, by classes (--per-rank for each rank)."),
        };
        let about = match starter {
            Some(pid) => serde_json::json!({ "starter_pid": pid }),
            None => {
                serde_json::json!({ "pids": job.ranks.iter().filter_map(|r| r.pid).collect::<Vec<_>>() })
            }
        };
        Self::of_ranks(job, heading, about)
    }

    /// The report of `classes`, titled by `heading` (of the job's size).
    pub(super) fn of_classes(
        classes: mqd_model::ClassJob,
        heading: impl Fn(u32) -> String,
        about: serde_json::Value,
    ) -> ClassReport {
        let diagnosis = mqd_scale::diagnose_classes(&classes);
        let mut title = heading(classes.size);
        if !classes.dll.version.is_empty() {
            title.push_str(&format!(
                "\nQueues read by {} ({}).",
                classes.dll.version, classes.dll.path
            ));
        }
        if let Some(abort) = &classes.abort_message {
            title.push_str(&format!("\nThe job is aborting (MPI_Abort): {abort}"));
        }
        ClassReport {
            about,
            hold: None,
            classes,
            diagnosis,
            title,
            split: false,
        }
    }

    /// Whether a class is not followed and the report waits for the job rank by rank
    /// ([`Self::split`]).
    pub(super) fn unfollowed(&self) -> bool {
        !self.split && !self.diagnosis.not_followed.is_empty()
    }

    /// The report with each class the analysis does not follow split into its members,
    /// each a class of its own (their dumps from `job`, the same snapshot rank by rank),
    /// and analysed again: what a rank by rank report concludes, in a report whose size
    /// grows with the classes and the ranks in states not followed, not with the job.
    pub(super) fn split(self, job: &JobDump) -> ClassReport {
        let dumps: std::collections::HashMap<i32, &mqd_model::RankDump> = (job.ranks.iter())
            .filter(|r| !r.duplicate)
            .map(|r| (r.rank, r))
            .collect();
        self.split_by(|rank| dumps.get(&rank).map(|&d| d.clone()))
    }

    /// [`Self::split`], the members' dumps moved out of `job` (no hold follows).
    pub(super) fn split_from(self, job: JobDump) -> ClassReport {
        let mut dumps: std::collections::HashMap<i32, mqd_model::RankDump> = (job.ranks)
            .into_iter()
            .filter(|r| !r.duplicate)
            .map(|r| (r.rank, r))
            .collect();
        self.split_by(|rank| dumps.remove(&rank))
    }

    /// [`Self::split`], each member's dump by `dump_of` its rank.
    fn split_by(
        mut self,
        mut dump_of: impl FnMut(i32) -> Option<mqd_model::RankDump>,
    ) -> ClassReport {
        if !self.unfollowed() {
            return self;
        }
        let not_followed = std::mem::take(&mut self.diagnosis.not_followed);
        let mut classes = Vec::new();
        for c in std::mem::take(&mut self.classes.classes) {
            let unfollowed = not_followed
                .iter()
                .any(|(ranks, _)| ranks.intersects(&c.ranks));
            if !unfollowed || c.ranks.len() == 1 {
                classes.push(c);
                continue;
            }
            // Every member rebuilt, or the class kept whole (still not followed).
            let members: Option<Vec<mqd_model::RankClass>> = (c.ranks.iter())
                .map(|r| {
                    let first = dump_of(i32::try_from(r).ok()?)?;
                    let ranks = mqd_model::RankSet::single(r);
                    Some(mqd_model::RankClass {
                        ranks,
                        first,
                        last: None,
                    })
                })
                .collect();
            match members {
                Some(members) => classes.extend(members),
                None => classes.push(c),
            }
        }
        classes.sort_by_key(|c| c.ranks.first());
        self.classes.classes = classes;
        self.diagnosis = mqd_scale::diagnose_classes(&self.classes);
        self.split = true;
        self
    }

    /// The report with the diagnosis `judged` of the same snapshot rank by rank: what
    /// its hold decided ([`Self::with_hold`]), where one was made.
    pub(super) fn judged_by(self, judged: mqd_model::Diagnosis) -> ClassReport {
        match judged.hold {
            Some(_) => self.with_hold(judged),
            None => self,
        }
    }

    /// The report in words.
    pub(super) fn text(&self) -> String {
        mqd::render::classes::class_text(&self.classes, &self.diagnosis, &self.title)
    }

    /// The report as a JSON document, with what a hold showed.
    pub(super) fn json(&self) -> mqd::render::classes::ClassDocument<'_> {
        let (c, d) = (&self.classes, &self.diagnosis);
        let mut doc = mqd::render::classes::class_json(c, d, self.about.clone());
        if let Some(hold) = &self.hold {
            doc.head["diagnosis"]["hold"] = serde_json::to_value(hold).unwrap_or_default();
        }
        doc
    }

    /// Whether a hold of its ranks may decide what the classes leave open.
    pub(super) fn to_hold(&self, holding: bool) -> bool {
        holding && self.diagnosis.verdict == mqd_model::diagnosis::Verdict::Undetermined
    }

    /// The report with what a hold of the job's ranks proved or dissolved (`judged`, the
    /// diagnosis of the snapshot the classes were read from, judged by the hold): its
    /// verdict, sets, doubts and the hold's own findings; the classes' parts and waits
    /// kept where they are still possible, proven where the hold proved them.
    pub(super) fn with_hold(mut self, judged: mqd_model::Diagnosis) -> ClassReport {
        use mqd_model::{Certainty, FindingKind};
        let d = &mut self.diagnosis;
        for part in d.deadlocks.iter_mut().flatten() {
            part.ranks = part.ranks.intersection(&judged.possibly_deadlocked);
            if !part.ranks.is_empty() && part.ranks.is_subset(&judged.deadlocked) {
                part.certainty = Certainty::Definite;
            }
        }
        if let Some(parts) = &mut d.deadlocks {
            parts.retain(|p| !p.ranks.is_empty());
        }
        for held in &mut d.held {
            held.ranks = held.ranks.intersection(&judged.possibly_deadlocked);
        }
        d.held.retain(|h| !h.ranks.is_empty());
        let singles = (self.classes.classes.iter()).all(|c| c.last.is_none() && c.ranks.len() == 1);
        if singles {
            // Every rank a class of its own: the findings are the hold's own.
            d.findings = judged.findings;
        } else {
            for f in d.findings.iter_mut().filter(|f| f.kind.is_deadlock_part()) {
                if f.ranks.is_subset(&judged.deadlocked) {
                    f.certainty = Certainty::Definite;
                }
            }
            d.findings.retain(|f| {
                !f.kind.is_deadlock_part() || f.ranks.is_subset(&judged.possibly_deadlocked)
            });
            let by_hold = |f: &mqd_model::Finding| {
                matches!(f.kind, FindingKind::DeadlockClosed | FindingKind::Dissolved)
            };
            d.findings
                .extend(judged.findings.into_iter().filter(by_hold));
        }
        d.verdict = judged.verdict;
        d.deadlocked = judged.deadlocked;
        d.possibly_deadlocked = judged.possibly_deadlocked;
        d.doubts = judged.doubts;
        self.hold = judged.hold;
        self
    }
}

/// Each rank's library message as of a live process: one read from a core names that core
/// ("core PATH (pid P, EXE)"), a path that differs rank by rank and would keep ranks
/// alike apart in classes; "pid P (EXE)" as live (`--per-rank` keeps each core's name).
pub(super) fn named_as_live(job: &mut JobDump) {
    for r in &mut job.ranks {
        let (Some(pid), Some(exe), Some(message)) = (r.pid, &r.executable, &mut r.message) else {
            continue;
        };
        let tail = format!(" (pid {pid}, {exe})");
        let Some(end) = message.find(&tail) else {
            continue;
        };
        let Some(start) = message[..end].rfind("core ") else {
            continue;
        };
        message.replace_range(start..end + tail.len(), &format!("pid {pid} ({exe})"));
    }
}
