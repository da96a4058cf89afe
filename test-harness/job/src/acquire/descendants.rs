//! A job whose starter has no MPIR table (a distribution's stripped `mpiexec`): its ranks
//! are the starter's descendants on this host that carry a launcher rank in their
//! environment (`PMI_RANK`...). Ranks on other hosts are not found; the launcher's
//! `PMI_SIZE` says how many there should be, so that they are reported missing.

use super::job::{Interface, Job, RankInfo};
use std::collections::{BTreeMap, HashMap};

/// Most processes of this host looked at.
const MAX_PROCESSES: usize = 1 << 20;

/// The processes of this host by parent.
fn children() -> HashMap<i32, Vec<i32>> {
    let mut by_parent: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return by_parent;
    };
    for entry in entries.flatten().take(MAX_PROCESSES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
        else {
            continue;
        };
        by_parent.entry(ppid).or_default().push(pid);
    }
    by_parent
}

/// The job of `starter` from its descendants' environments, if any has a rank.
pub(super) fn job_of(starter: i32) -> Option<Job> {
    let tree = children();
    let host = crate::identity::this_host().unwrap_or_else(|| "localhost".into());
    let mut ranks: BTreeMap<i32, RankInfo> = BTreeMap::new();
    let mut size = None;
    // Breadth first: a rank's own children inherit its environment and come later.
    let mut queue = std::collections::VecDeque::from([starter]);
    let mut seen = 0usize;
    while let Some(pid) = queue.pop_front() {
        seen += 1;
        if seen > MAX_PROCESSES {
            break;
        }
        for &child in tree.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            match crate::identity::rank_from_environment(child) {
                Some((rank, job_size)) if !ranks.contains_key(&rank) => {
                    size = size.or(job_size);
                    let executable = std::fs::read_link(format!("/proc/{child}/exe"))
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    ranks.insert(
                        rank,
                        RankInfo {
                            rank,
                            host: host.clone(),
                            executable,
                            pid: child,
                        },
                    );
                }
                // A rank's child (its helper, a fork) is not another rank.
                Some(_) => {}
                None => queue.push_back(child),
            }
        }
    }
    if ranks.is_empty() {
        return None;
    }
    Some(Job {
        starter_pid: starter,
        ranks: ranks.into_values().collect(),
        dll_name: None,
        abort_message: None,
        via: Interface::Environment,
        starter: None,
        size,
    })
}
