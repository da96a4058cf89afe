//! What a process does while its threads stay in their MPI calls, read from `/proc`
//! without stopping it:
//! - the memory it touches: the accessed bits of its pages are cleared when the watch
//!   starts (`/proc/PID/clear_refs`, "1"; the kernel uses those bits only to age pages,
//!   so clearing them changes no behaviour), and `Referenced` of
//!   `/proc/PID/smaps_rollup` is what the CPU touched since. A copy by the kernel into
//!   the process (a socket's data, `process_vm_readv`) sets them too;
//! - the bytes it moves through the kernel (`rchar` and `wchar` of `/proc/PID/io`);
//! - a thread in a system call on a file, or in uninterruptible sleep, when the watch
//!   ends (`/proc/PID/task/TID/syscall` and `stat`, the call's descriptor named through
//!   `/proc/PID/fd`);
//! - each thread's CPU time, and the time it was ready to run but waited for a CPU
//!   (`/proc/PID/task/TID/schedstat`): a rank starved by an overloaded host could not
//!   return whatever it was waiting for;
//! - the time its cgroup's CPU quota throttled it (`cpu.stat` of its cgroup and those
//!   above it, v1's `cpu` controller or v2);
//! - the host's RDMA ports (`/sys/class/infiniband/*/ports/*/counters`): a NIC writes
//!   memory without touching page tables, so a transfer over RDMA shows only there.

use mqd_model::hold::{Activity, FileIo, Starved};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// A process's readings when a watch began.
#[derive(Debug, Clone)]
pub struct Baseline {
    pid: i32,
    /// The accessed bits were cleared.
    cleared: bool,
    io: Option<u64>,
    cpu: BTreeMap<i32, u64>,
    rdma: Option<u64>,
    sched: BTreeMap<i32, Sched>,
    /// Each cgroup's throttled time (ns) over the process, its own first.
    throttled: Vec<(std::path::PathBuf, u64)>,
    began: Instant,
}

/// A thread's scheduler times, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sched {
    ran: u64,
    waited: u64,
    /// Turns on a CPU.
    slices: u64,
    /// Running or ready to run when read (state R).
    runnable: bool,
}

impl Baseline {
    /// Starts watching process `pid`: clears its pages' accessed bits and reads its
    /// counters.
    pub fn start(pid: i32) -> Baseline {
        Baseline::start_under(pid, Path::new("/"))
    }

    /// [`Baseline::start`] with `/proc` and `/sys` under `root` (tests give a tree of
    /// their own).
    pub fn start_under(pid: i32, root: &Path) -> Baseline {
        let cleared = std::fs::write(root.join(format!("proc/{pid}/clear_refs")), "1").is_ok();
        Baseline {
            pid,
            cleared,
            io: io_bytes(root, pid),
            cpu: threads_cpu_ticks(root, pid),
            rdma: rdma_bytes(root),
            sched: threads_sched(root, pid),
            throttled: throttled_ns(root, pid),
            began: Instant::now(),
        }
    }

    /// What the process did since the watch began.
    pub fn read(&self) -> Activity {
        self.read_under(Path::new("/"))
    }

    /// [`Baseline::read`] under `root`.
    pub fn read_under(&self, root: &Path) -> Activity {
        let pid = self.pid;
        let touched_kb = self.cleared.then(|| referenced_kb(root, pid)).flatten();
        let io = io_bytes(root, pid);
        let cpu = threads_cpu_ticks(root, pid);
        Activity {
            touched_kb,
            io_bytes: match (self.io, io) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            file_io: file_io(root, pid),
            cpu_ticks: self
                .cpu
                .iter()
                .filter_map(|(tid, was)| Some((*tid, cpu.get(tid)?.saturating_sub(*was))))
                .collect(),
            rdma_bytes: match (self.rdma, rdma_bytes(root)) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            stopped: stopped(root, pid),
            starved: starved(&self.sched, &threads_sched(root, pid), self.began.elapsed()),
            throttled_ms: self.throttled_ms(),
        }
    }

    /// The most any cgroup over the process was throttled since the watch began, in ms
    /// (`None`: no cgroup's CPU statistics could be read). v1 sums it over the CPUs the
    /// group's runqueues are on: it is said as at most the window.
    fn throttled_ms(&self) -> Option<u64> {
        let ns = self
            .throttled
            .iter()
            .map(|(file, was)| {
                cpu_stat_throttled_ns(file)
                    .unwrap_or(*was)
                    .saturating_sub(*was)
            })
            .max()?;
        Some((ns / 1_000_000).min(self.began.elapsed().as_millis() as u64))
    }
}

/// The `cpu.stat` files of the cgroups over `pid` (its own first, then each parent up to
/// the hierarchy's root), with their throttled time in ns: v1's `cpu` controller, else
/// v2's unified hierarchy. Mount points come from `/proc/self/mountinfo`.
fn throttled_ns(root: &Path, pid: i32) -> Vec<(std::path::PathBuf, u64)> {
    let Ok(groups) = std::fs::read_to_string(root.join(format!("proc/{pid}/cgroup"))) else {
        return Vec::new();
    };
    let Ok(mounts) = std::fs::read_to_string(root.join("proc/self/mountinfo")) else {
        return Vec::new();
    };
    // "ID:controllers:path": v1's cpu controller, or v2's "0::path".
    let v1 = groups.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    });
    let v2 = groups.lines().find_map(|l| l.strip_prefix("0::"));
    let mount = |v1: bool| {
        mounts.lines().find_map(|l| {
            // "... mount-point options - fstype source super-options"
            let (left, right) = l.split_once(" - ")?;
            let mut fields = left.split(' ');
            let (mount_root, point) = (fields.nth(3)?, fields.next()?);
            let mut r = right.split(' ');
            let (fstype, _, options) = (r.next()?, r.next()?, r.next()?);
            let ok = if v1 {
                fstype == "cgroup" && options.split(',').any(|o| o == "cpu")
            } else {
                fstype == "cgroup2"
            };
            ok.then(|| (root.join(point.trim_start_matches('/')), mount_root))
        })
    };
    let found = v1
        .and_then(|p| Some((mount(true)?, p)))
        .or_else(|| v2.and_then(|p| Some((mount(false)?, p))));
    let Some(((base, mount_root), path)) = found else {
        return Vec::new();
    };
    // A hierarchy mounted from a subtree (a container's) holds the paths below it.
    let path = path.strip_prefix(mount_root).unwrap_or(path);
    let mut files = Vec::new();
    let mut dir = base.join(path.trim_start_matches('/'));
    loop {
        let file = dir.join("cpu.stat");
        if let Some(ns) = cpu_stat_throttled_ns(&file) {
            files.push((file, ns));
        }
        if dir == base || !dir.pop() || !dir.starts_with(&base) {
            break;
        }
    }
    files
}

/// Throttled time in ns of a `cpu.stat`: v1's `throttled_time` (ns) or v2's
/// `throttled_usec`.
fn cpu_stat_throttled_ns(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (name, value) = l.split_once(' ')?;
        let value: u64 = value.trim().parse().ok()?;
        match name {
            "throttled_time" => Some(value),
            "throttled_usec" => Some(value.saturating_mul(1000)),
            _ => None,
        }
    })
}

/// The first thread that was ready to run for over half of `window` but hardly ran:
/// under [`RAN_AT_LEAST`], or in fewer than [`SLICES_AT_LEAST`] turns on a CPU. A rank
/// polling on a host loaded five times over still runs tens of milliseconds in thousands
/// of turns, each a turn of MPI's progress engine; one that cannot run at all (throttled,
/// outranked by real-time work) is not held by MPI.
///
/// The kernel adds a wait to `schedstat` only when the thread gets its CPU: a thread still
/// queued when read has its wait so far missing. A thread runnable when read is counted as
/// waiting for all of the window it neither ran nor was seen waiting (a running thread's
/// gap is a tick at most; one woken from a sleep just before is counted as waiting: a
/// doubt, never a proof).
fn starved(
    before: &BTreeMap<i32, Sched>,
    after: &BTreeMap<i32, Sched>,
    window: Duration,
) -> Option<Starved> {
    let window = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    before.iter().find_map(|(tid, b)| {
        let a = after.get(tid)?;
        let ran = a.ran.saturating_sub(b.ran);
        let mut waited = a.waited.saturating_sub(b.waited);
        if a.runnable {
            waited += window.saturating_sub(ran.saturating_add(waited));
        }
        let turns = a.slices.saturating_sub(b.slices);
        let hardly = ran < RAN_AT_LEAST.as_nanos() as u64 || turns < SLICES_AT_LEAST;
        (waited > window / 2 && hardly).then_some(Starved {
            tid: *tid,
            ran_ms: ran / 1_000_000,
            waited_ms: waited / 1_000_000,
        })
    })
}

/// CPU time a thread ready to run must get during a window to count as running.
const RAN_AT_LEAST: Duration = Duration::from_millis(5);

/// Turns on a CPU a thread ready to run must get during a window to count as running.
const SLICES_AT_LEAST: u64 = 20;

/// The scheduler times of each thread of `pid` (`schedstat`: ns run, ns waited, turns),
/// and whether it is runnable (`stat`'s state).
fn threads_sched(root: &Path, pid: i32) -> BTreeMap<i32, Sched> {
    tasks(root, pid)
        .into_iter()
        .filter_map(|tid| {
            let task = root.join(format!("proc/{pid}/task/{tid}"));
            let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
            let runnable = std::fs::read_to_string(task.join("stat"))
                .ok()
                .and_then(|s| state(&s))
                == Some('R');
            let mut n = text.split_whitespace().map(|f| f.parse::<u64>().ok());
            Some((
                tid,
                Sched {
                    ran: n.next()??,
                    waited: n.next()??,
                    slices: n.next()??,
                    runnable,
                },
            ))
        })
        .collect()
}

/// `Referenced` of `/proc/PID/smaps_rollup`, in kB.
fn referenced_kb(root: &Path, pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/smaps_rollup"))).ok()?;
    field(&text, "Referenced:")
}

/// The number after `name` on its line of `text` ("Referenced:     2120 kB").
fn field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// `rchar` + `wchar` of `/proc/PID/io`.
fn io_bytes(root: &Path, pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/io"))).ok()?;
    Some(field(&text, "rchar:")? + field(&text, "wchar:")?)
}

/// The CPU time (clock ticks) of each thread of `pid`.
fn threads_cpu_ticks(root: &Path, pid: i32) -> BTreeMap<i32, u64> {
    tasks(root, pid)
        .into_iter()
        .filter_map(|tid| {
            let stat =
                std::fs::read_to_string(root.join(format!("proc/{pid}/task/{tid}/stat"))).ok()?;
            Some((tid, stat_ticks(&stat)?))
        })
        .collect()
}

/// The thread ids of `pid` (none: it is gone).
pub(crate) fn tasks(root: &Path, pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(root.join(format!("proc/{pid}/task"))) else {
        return Vec::new();
    };
    let mut tids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// The first thread of `pid` in a system call on a regular file or a block device, or
/// waiting for asynchronous I/O, or in uninterruptible sleep.
fn file_io(root: &Path, pid: i32) -> Option<FileIo> {
    for tid in tasks(root, pid) {
        if let Some(call) =
            mqd_process::live::syscall::system_call_under(root, pid, tid).filter(|c| c.on_file)
        {
            return Some(FileIo {
                tid,
                syscall: call.name.map(str::to_owned),
                file: call.file,
            });
        }
        let disk_wait = std::fs::read_to_string(root.join(format!("proc/{pid}/task/{tid}/stat")))
            .ok()
            .and_then(|s| state(&s))
            == Some('D');
        if disk_wait {
            return Some(FileIo {
                tid,
                syscall: None,
                file: None,
            });
        }
    }
    None
}

/// Whether a thread of `pid` is stopped by a signal (state T; a tracer's stop is t).
fn stopped(root: &Path, pid: i32) -> bool {
    tasks(root, pid).into_iter().any(|tid| {
        std::fs::read_to_string(root.join(format!("proc/{pid}/task/{tid}/stat")))
            .ok()
            .and_then(|s| state(&s))
            == Some('T')
    })
}

/// The state letter of a `/proc/.../stat` line (after the command in parentheses).
fn state(stat: &str) -> Option<char> {
    stat.get(stat.rfind(')')? + 2..)?.chars().next()
}

/// Bytes every RDMA port of the host moved (received and sent), from the counters in
/// 4-byte words under `/sys/class/infiniband`; `None` without RDMA hardware.
fn rdma_bytes(root: &Path) -> Option<u64> {
    let devices = std::fs::read_dir(root.join("sys/class/infiniband")).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for device in devices.flatten() {
        let Ok(ports) = std::fs::read_dir(device.path().join("ports")) else {
            continue;
        };
        for port in ports.flatten() {
            for counter in ["port_rcv_data", "port_xmit_data"] {
                let path = port.path().join("counters").join(counter);
                if let Some(words) = std::fs::read_to_string(path)
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
                {
                    total = total.saturating_add(words.saturating_mul(4));
                    any = true;
                }
            }
        }
    }
    any.then_some(total)
}

/// The CPU time (user + system, clock ticks) thread `tid` of `pid` has used, from
/// `/proc`.
pub fn cpu_ticks(pid: i32, tid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat_ticks(&stat)
}

/// utime + stime of a `/proc/.../stat` line (fields 14 and 15, after the command name
/// in parentheses, which may hold spaces).
pub(crate) fn stat_ticks(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    // `rest` starts at field 3 (state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc` and `/sys` of one process with two threads.
    fn tree(dir: &Path, referenced: u64, rchar: u64, syscall: &str, state: char) {
        let p = dir.join("proc/42");
        std::fs::create_dir_all(p.join("task/42")).unwrap();
        std::fs::create_dir_all(p.join("task/43")).unwrap();
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::fs::write(
            p.join("smaps_rollup"),
            format!("Rss:   9000 kB\nReferenced:   {referenced} kB\n"),
        )
        .unwrap();
        std::fs::write(p.join("io"), format!("rchar: {rchar}\nwchar: 10\n")).unwrap();
        for (tid, ticks) in [(42, 7), (43, 100)] {
            std::fs::write(
                p.join(format!("task/{tid}/stat")),
                format!("{tid} (a b) {state} 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0"),
            )
            .unwrap();
        }
        std::fs::write(p.join("task/42/syscall"), "running\n").unwrap();
        std::fs::write(p.join("task/43/syscall"), syscall).unwrap();
        let file = dir.join("data.bin");
        std::fs::write(&file, b"x").unwrap();
        let _ = std::fs::remove_file(p.join("fd/5"));
        std::os::unix::fs::symlink(&file, p.join("fd/5")).unwrap();
        let port = dir.join("sys/class/infiniband/mlx5_0/ports/1/counters");
        std::fs::create_dir_all(&port).unwrap();
        std::fs::write(port.join("port_rcv_data"), format!("{}\n", rchar / 4)).unwrap();
        std::fs::write(port.join("port_xmit_data"), "0\n").unwrap();
    }

    #[test]
    fn a_process_reads_as_its_counters_moved_and_its_threads_wait() {
        let dir = std::env::temp_dir().join(format!("mqd-activity-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        tree(&dir, 2000, 100, "running\n", 'R');
        let base = Baseline::start_under(42, &dir);
        // A thread in write(2) on descriptor 5, a regular file.
        tree(
            &dir,
            1_500_000,
            4196,
            "1 0x5 0x7ffd 0x1000 0 0 0 0x7ffc 0x7f00\n",
            'S',
        );
        let a = base.read_under(&dir);
        assert_eq!(a.touched_kb, Some(1_500_000));
        assert_eq!(a.io_bytes, Some(4096));
        assert_eq!(a.rdma_bytes, Some(4096));
        let io = a.file_io.expect("a thread in write on a file");
        assert_eq!((io.tid, io.syscall.as_deref()), (43, Some("write")));
        assert!(io.file.is_some_and(|f| f.ends_with("data.bin")));
        // A thread in poll(2) (7) is no file I/O; one in state D is.
        tree(&dir, 10, 100, "7 0x5 0x1 0x3e8 0 0 0 0x7ffc 0x7f00\n", 'S');
        assert_eq!(base.read_under(&dir).file_io, None);
        tree(&dir, 10, 100, "running\n", 'D');
        let a = base.read_under(&dir);
        assert_eq!(a.file_io.map(|f| (f.tid, f.syscall)), Some((42, None)));
        assert_eq!(a.cpu_ticks.get(&42), Some(&0));
        assert!(!a.stopped);
        // Stopped by SIGSTOP.
        tree(&dir, 10, 100, "running\n", 'T');
        assert!(base.read_under(&dir).stopped);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn this_process_is_measured() {
        let pid = std::process::id() as i32;
        let base = Baseline::start(pid);
        // Touch 64 MB.
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        // And run: 200 ms of CPU (at most 3 ms a turn on a loaded host: dozens of turns),
        // however long a loaded host makes that take.
        let ran_ns = || {
            std::fs::read_to_string("/proc/thread-self/schedstat")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .expect("schedstat")
        };
        let began = ran_ns();
        let mut spin = 0u64;
        while ran_ns() - began < 200_000_000 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let a = base.read();
        assert!(a.touched_kb.is_some_and(|kb| kb >= 60 * 1024), "{a:?}");
        assert!(a.io_bytes.is_some());
        assert!(!a.cpu_ticks.is_empty());
        assert_eq!(a.starved, None, "a process that ran is not starved");
    }

    /// A process in cgroup `/slurm/job7` of v1's `cpu` controller (mounted as the machine
    /// has it) or of v2's hierarchy mounted from a container's subtree `/ct`.
    fn cgroup_tree(dir: &Path, v1: bool, own_ns: u64, parent_ns: u64) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.join("proc/42")).unwrap();
        std::fs::create_dir_all(dir.join("proc/self")).unwrap();
        let (groups, mountinfo, base) = if v1 {
            (
                "4:memory:/other\n2:cpuacct,cpu:/slurm/job7\n0::/\n",
                "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n",
                "sys/fs/cgroup/cpu,cpuacct",
            )
        } else {
            (
                "0::/ct/slurm/job7\n",
                "40 1 0:40 /ct /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
                "sys/fs/cgroup",
            )
        };
        std::fs::write(dir.join("proc/42/cgroup"), groups).unwrap();
        std::fs::write(dir.join("proc/self/mountinfo"), mountinfo).unwrap();
        let stat = |ns: u64| {
            if v1 {
                format!("nr_periods 9\nnr_throttled 3\nthrottled_time {ns}\n")
            } else {
                format!(
                    "usage_usec 5\nnr_throttled 3\nthrottled_usec {}\n",
                    ns / 1000
                )
            }
        };
        let job = dir.join(base).join("slurm/job7");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("cpu.stat"), stat(own_ns)).unwrap();
        std::fs::write(dir.join(base).join("slurm/cpu.stat"), stat(parent_ns)).unwrap();
    }

    #[test]
    fn a_process_held_back_by_its_cgroups_quota_reads_as_throttled() {
        let ms = 1_000_000;
        for v1 in [true, false] {
            let dir =
                std::env::temp_dir().join(format!("mqd-throttle-{}-{v1}", std::process::id()));
            cgroup_tree(&dir, v1, 10 * ms, 500 * ms);
            let mut base = Baseline::start_under(42, &dir);
            assert_eq!(base.read_under(&dir).throttled_ms, Some(0), "v1 {v1}");
            // A window of 2 s.
            base.began -= Duration::from_secs(2);
            // Its own group throttled 1.9 s more, its parent 30 ms: the most counts.
            cgroup_tree(&dir, v1, 1910 * ms, 530 * ms);
            assert_eq!(base.read_under(&dir).throttled_ms, Some(1900), "v1 {v1}");
            // The parent's quota held it back more than its own.
            cgroup_tree(&dir, v1, 20 * ms, 900 * ms);
            assert_eq!(base.read_under(&dir).throttled_ms, Some(400), "v1 {v1}");
            // Summed over many CPUs' runqueues, it says no more than the window.
            cgroup_tree(&dir, v1, 60_010 * ms, 900 * ms);
            // (The window is the time since `began`, so a loaded machine lengthens it.)
            let t = base.read_under(&dir).throttled_ms.unwrap();
            let window = base.began.elapsed().as_millis() as u64;
            assert!(
                (2000..=window).contains(&t) && window < 60_000,
                "v1 {v1}: {t} in a window of {window} ms"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Without cgroups to read: unknown, not zero.
        let dir = std::env::temp_dir().join(format!("mqd-throttle-none-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc/42")).unwrap();
        assert_eq!(
            Baseline::start_under(42, &dir)
                .read_under(&dir)
                .throttled_ms,
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_thread_that_waited_for_a_cpu_and_hardly_ran_is_starved() {
        let at = |ran, waited, slices, runnable| {
            BTreeMap::from([(
                7,
                Sched {
                    ran,
                    waited,
                    slices,
                    runnable,
                },
            )])
        };
        let start = at(5, 5, 5, true);
        let window = Duration::from_secs(2);
        let ms = 1_000_000;
        // Polling beside three others on two cores: ran half, waited half.
        assert_eq!(
            starved(&start, &at(900 * ms, 1100 * ms, 9000, true), window),
            None
        );
        // Asleep in the kernel: neither ran nor waited.
        assert_eq!(starved(&start, &at(ms, 5, 40, false), window), None);
        // A host loaded five times over: ran 60 ms in 6,000 turns.
        assert_eq!(
            starved(&start, &at(60 * ms, 1900 * ms, 6000, true), window),
            None
        );
        // Ready all along, ran 1 ms (the wait in progress counts).
        assert_eq!(
            starved(&start, &at(ms + 5, 1900 * ms + 5, 900, true), window),
            Some(Starved {
                tid: 7,
                ran_ms: 1,
                waited_ms: 1999
            })
        );
        // Ran 50 ms but got a CPU only 15 times.
        assert!(starved(&start, &at(50 * ms, 1900 * ms, 15, true), window).is_some());
        // Ran 100 ms in one turn, then queued to the end: the kernel has not yet added
        // that wait (it does when the thread next runs), but the thread is runnable.
        assert_eq!(
            starved(&start, &at(100 * ms + 5, 5, 6, true), window),
            Some(Starved {
                tid: 7,
                ran_ms: 100,
                waited_ms: 1900
            })
        );
        // Queued the whole window, never on a CPU: nothing added at all.
        assert!(starved(&start, &at(5, 5, 5, true), window).is_some());
        // The same gap asleep (a blocking MPI): not starved.
        assert_eq!(
            starved(&start, &at(100 * ms + 5, 5, 6, false), window),
            None
        );
        // A thread that came after the start is not judged.
        assert_eq!(
            starved(&BTreeMap::new(), &at(0, 1900 * ms, 1, true), window),
            None
        );
    }
}
