//! Is this process the rank we were told it is? A pid names a process on one host only,
//! a process table may list a pid twice, and pids or cores given by hand may belong to
//! different jobs. Each check turns a process that is not what it claims into a rank
//! that was not dumped, with the reason, rather than a rank of the job.

use crate::process_ref::ProcessRef;
use mqd_model::RankDump;
use std::collections::HashMap;

/// This machine's host name, as `gethostname` gives it.
pub fn this_host() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// Whether a process table's host name is this machine: the same name, the same short
/// name (before the first dot) or a loopback name.
pub fn is_this_host(host: &str, this: Option<&str>) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    if matches!(host, "" | "localhost" | "127.0.0.1" | "::1") {
        return true;
    }
    this.is_some_and(|this| this.eq_ignore_ascii_case(host) || short(this) == short(host))
}

/// Why a process of the list is not attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason, for the user.
    pub why: String,
    /// The process is listed twice: the other entry stands for it.
    pub duplicate: bool,
}

/// Why a process of the list must not be attached: on another host (its pid means
/// another process here), or listed twice.
pub fn screen(processes: &[ProcessRef]) -> Vec<Option<Refusal>> {
    let this = this_host();
    let mut seen: HashMap<i32, usize> = HashMap::new();
    processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if let Some(host) = &p.host
                && !is_this_host(host, this.as_deref())
            {
                return Some(Refusal {
                    why: format!(
                        "on host {host}, not this one ({}): not dumped (its pid {} names another process here, if any); run mqd on {host}",
                        this.as_deref().unwrap_or("unknown"),
                        p.pid
                    ),
                    duplicate: false,
                });
            }
            if let Some(&first) = seen.get(&p.pid) {
                let what = match processes[first].rank {
                    Some(r) => format!("rank {r}"),
                    None => "an earlier argument".into(),
                };
                return Some(Refusal {
                    why: format!("pid {} is listed twice (also as {what}): dumped once", p.pid),
                    duplicate: true,
                });
            }
            seen.insert(p.pid, i);
            None
        })
        .collect()
}

/// The rank and job size a launcher gave a process in its environment (hydra's
/// `PMI_RANK`/`PMI_SIZE`, PMIx, Open MPI, MVAPICH, Slurm), for when no queues say it: an
/// MPI without debugger support.
pub fn rank_from_environment(pid: i32) -> Option<(i32, Option<u32>)> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    rank_from_variables(environ.split(|&b| b == 0))
}

/// Most environment variables read from a process's memory, and most bytes of each.
const MAX_VARIABLES: usize = 4096;
const MAX_VARIABLE_BYTES: usize = 4096;

/// The same from a process's memory (a core): the strings libc's `__environ` points to.
pub fn rank_from_memory(
    space: &mqd_debuginfo::AddressSpace,
    memory: &dyn mqd_target::Memory,
) -> Option<(i32, Option<u32>)> {
    let read_word = |addr: u64| -> Option<u64> {
        let mut b = [0u8; 8];
        memory.read_memory(addr, &mut b).ok()?;
        Some(u64::from_le_bytes(b))
    };
    let environ = space
        .find_symbol("__environ")
        .or_else(|| space.find_symbol("environ"))?;
    let array = read_word(environ)?;
    let mut variables = Vec::new();
    for i in 0..MAX_VARIABLES as u64 {
        let at = read_word(array.checked_add(i * 8)?)?;
        if at == 0 {
            break;
        }
        let mut buf = vec![0u8; MAX_VARIABLE_BYTES];
        let n = memory.read_partial(at, &mut buf).ok()?;
        buf.truncate(n);
        if let Some(end) = buf.iter().position(|&b| b == 0) {
            buf.truncate(end);
            variables.push(buf);
        }
    }
    rank_from_variables(variables.iter().map(Vec::as_slice))
}

/// The rank and size in `NAME=VALUE` variables.
fn rank_from_variables<'a>(
    variables: impl Iterator<Item = &'a [u8]>,
) -> Option<(i32, Option<u32>)> {
    let vars: HashMap<&[u8], &[u8]> = variables
        .filter_map(|kv| {
            let eq = kv.iter().position(|&b| b == b'=')?;
            Some((&kv[..eq], &kv[eq + 1..]))
        })
        .collect();
    let number = |name: &str| -> Option<i64> {
        std::str::from_utf8(vars.get(name.as_bytes())?)
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    for (rank, size) in [
        ("PMI_RANK", "PMI_SIZE"),
        ("PMIX_RANK", "PMIX_SIZE"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
    ] {
        if let Some(r) = number(rank)
            .and_then(|r| i32::try_from(r).ok())
            .filter(|&r| r >= 0)
        {
            let size = number(size).and_then(|s| u32::try_from(s).ok());
            return Some((r, size));
        }
    }
    None
}

/// The COMM_WORLD rank and size a dumped process reports.
fn world_of(dump: &RankDump) -> Option<(i64, i64)> {
    dump.communicators()
        .iter()
        .find(|c| c.name == "MPI_COMM_WORLD")
        .map(|c| (c.local_rank, c.size))
}

/// Marks as not dumped the processes that are not the rank they are listed as: a
/// COMM_WORLD rank or size other than the process table's, a rank another process
/// already is (the same process twice, or processes of two jobs), or a COMM_WORLD size
/// other than most processes'. Such a process keeps its pid and loses its rank (-1).
pub fn check_ranks(ranks: &mut [RankDump], job_size: Option<u32>) {
    // The size most processes report stands for the job when no table gives one.
    let mut sizes: HashMap<i64, usize> = HashMap::new();
    for d in ranks.iter() {
        if let Some((_, size)) = world_of(d) {
            *sizes.entry(size).or_default() += 1;
        }
    }
    let majority = sizes
        .iter()
        .max_by_key(|&(size, n)| (*n, -*size))
        .map(|(&size, _)| size);
    let expected = job_size.map(i64::from).or(majority);
    let mut owner: HashMap<i32, Option<i32>> = HashMap::new();
    for d in ranks.iter_mut() {
        let Some((world_rank, size)) = world_of(d) else {
            continue;
        };
        let pid = d.pid.map_or("?".into(), |p| p.to_string());
        let problem = if d.rank >= 0 && i64::from(d.rank) != world_rank {
            Some(format!(
                "pid {pid} is COMM_WORLD rank {world_rank} of {size}, not rank {} as the process table says: not this job's process (a reused pid?)",
                d.rank
            ))
        } else if let Some(n) = expected.filter(|&n| n != size) {
            let of = if job_size.is_some() {
                "the process table's"
            } else {
                "the other processes'"
            };
            Some(format!(
                "pid {pid} is rank {world_rank} of a job of {size} ranks, not of {n} ({of}): another job's process"
            ))
        } else if let Some(&other) = owner.get(&(world_rank as i32)) {
            // The same pid: one process given twice (a core file twice, say).
            d.duplicate = other == d.pid;
            let other = other.map_or("?".into(), |p| p.to_string());
            Some(if d.duplicate {
                format!("pid {pid}, COMM_WORLD rank {world_rank}, is given twice: dumped once")
            } else {
                format!(
                    "pid {pid} is COMM_WORLD rank {world_rank}, as is pid {other}: processes of two jobs?"
                )
            })
        } else {
            None
        };
        match problem {
            Some(p) => {
                d.rank = -1;
                d.outcome = Err(p);
            }
            None => {
                d.rank = world_rank as i32;
                owner.insert(world_rank as i32, d.pid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqd_model::{Communicator, Queue};

    fn rank(listed: i32, pid: i32, world: (i64, i64)) -> RankDump {
        RankDump {
            mpi: mqd_model::MpiState::default(),
            rank: listed,
            pid: Some(pid),
            host: None,
            executable: None,
            message: None,
            lists_blocking_sends: None,
            signal: None,
            duplicate: false,
            threads: Vec::new(),
            outcome: Ok(vec![Communicator {
                context: None,
                unique_id: 1,
                name: "MPI_COMM_WORLD".into(),
                size: world.1,
                local_rank: world.0,
                group: None,
                group_error: None,
                pending_receives: Queue::Operations(Vec::new()),
                unexpected_messages: Queue::Operations(Vec::new()),
                pending_sends: Queue::Operations(Vec::new()),
            }]),
            notes: Vec::new(),
            traffic: None,
        }
    }

    #[test]
    fn host_names() {
        assert!(is_this_host("node1", Some("node1")));
        assert!(is_this_host("node1.cluster", Some("node1")));
        assert!(is_this_host("NODE1", Some("node1.cluster")));
        assert!(is_this_host("localhost", Some("node1")));
        assert!(!is_this_host("node99", Some("node1")));
        assert!(!is_this_host("node99", None));
    }

    #[test]
    fn remote_and_repeated_processes_are_not_attached() {
        let this = this_host().expect("a host name");
        let p = |pid, rank, host: &str| ProcessRef {
            rank: Some(rank),
            pid,
            host: Some(host.into()),
            executable: None,
        };
        let why = screen(&[p(10, 0, &this), p(11, 1, "node99"), p(10, 2, &this)]);
        assert_eq!(why[0], None);
        let remote = why[1].as_ref().unwrap();
        assert!(remote.why.starts_with("on host node99, not this one") && !remote.duplicate);
        let twice = why[2].as_ref().unwrap();
        assert!(twice.why.contains("listed twice (also as rank 0)") && twice.duplicate);
    }

    #[test]
    fn processes_that_are_not_their_listed_rank_lose_it() {
        // A reused pid: the table says rank 1 of 2, the process is rank 0 of 4.
        let mut ranks = vec![rank(0, 10, (0, 2)), rank(1, 11, (0, 4))];
        check_ranks(&mut ranks, Some(2));
        assert_eq!(ranks[0].rank, 0);
        assert_eq!(ranks[1].rank, -1);
        assert!(
            ranks[1]
                .outcome
                .as_ref()
                .unwrap_err()
                .contains("not rank 1")
        );
        // Processes of two jobs given by pid: the odd size out, then a repeated rank.
        let mut ranks = vec![
            rank(-1, 1, (0, 2)),
            rank(-1, 2, (1, 2)),
            rank(-1, 3, (1, 3)),
            rank(-1, 4, (1, 2)),
        ];
        check_ranks(&mut ranks, None);
        let got: Vec<i32> = ranks.iter().map(|r| r.rank).collect();
        assert_eq!(got, [0, 1, -1, -1]);
        assert!(
            ranks[2]
                .outcome
                .as_ref()
                .unwrap_err()
                .contains("a job of 3 ranks, not of 2")
        );
        assert!(
            ranks[3]
                .outcome
                .as_ref()
                .unwrap_err()
                .contains("as is pid 2")
        );
        assert!(!ranks[3].duplicate);
        // One process given twice (a core file twice).
        let mut ranks = vec![rank(-1, 7, (0, 1)), rank(-1, 7, (0, 1))];
        check_ranks(&mut ranks, None);
        assert_eq!((ranks[0].rank, ranks[0].duplicate), (0, false));
        assert!(ranks[1].duplicate, "{:?}", ranks[1].outcome);
    }
}
