//! The system call a thread is in, read from `/proc/PID/task/TID/syscall` (its number
//! and arguments while it waits in one), named, with the file its first argument names
//! when it works on a file: what a thread that does not stop is doing, and what a
//! process working on files is writing.

use std::path::Path;

/// A thread in a system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemCall {
    /// Its name (`pwrite64`), when the table knows it.
    pub name: Option<&'static str>,
    /// It works on a regular file or a block device (or waits for asynchronous I/O).
    pub on_file: bool,
    /// The file it works on, when it names one.
    pub file: Option<String>,
}

impl std::fmt::Display for SystemCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.name, &self.file) {
            (Some(name), Some(file)) => write!(f, "{name} on {file}"),
            (Some(name), None) => write!(f, "{name}"),
            (None, _) => write!(f, "a system call"),
        }
    }
}

/// System calls that work on the file their first argument names, by number.
#[cfg(target_arch = "x86_64")]
const FILE_CALLS: &[(u64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (40, "sendfile"),
    (74, "fsync"),
    (75, "fdatasync"),
    (77, "ftruncate"),
    (275, "splice"),
    (277, "sync_file_range"),
    (285, "fallocate"),
    (295, "preadv"),
    (296, "pwritev"),
    (326, "copy_file_range"),
    (327, "preadv2"),
    (328, "pwritev2"),
];
#[cfg(target_arch = "aarch64")]
const FILE_CALLS: &[(u64, &str)] = &[
    (46, "ftruncate"),
    (47, "fallocate"),
    (63, "read"),
    (64, "write"),
    (65, "readv"),
    (66, "writev"),
    (67, "pread64"),
    (68, "pwrite64"),
    (69, "preadv"),
    (70, "pwritev"),
    (71, "sendfile"),
    (76, "splice"),
    (82, "fsync"),
    (83, "fdatasync"),
    (84, "sync_file_range"),
    (285, "copy_file_range"),
    (286, "preadv2"),
    (287, "pwritev2"),
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const FILE_CALLS: &[(u64, &str)] = &[];

/// System calls that wait for asynchronous I/O: whatever file, the process works on one.
#[cfg(target_arch = "x86_64")]
const AIO_CALLS: &[(u64, &str)] = &[(208, "io_getevents"), (426, "io_uring_enter")];
#[cfg(target_arch = "aarch64")]
const AIO_CALLS: &[(u64, &str)] = &[(4, "io_getevents"), (426, "io_uring_enter")];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AIO_CALLS: &[(u64, &str)] = &[];

/// The system call thread `tid` of `pid` waits in; `None` while it runs, or when `/proc`
/// does not say.
pub fn system_call(pid: i32, tid: i32) -> Option<SystemCall> {
    system_call_under(Path::new("/"), pid, tid)
}

/// [`system_call`] with `/proc` under `root` (tests give a tree of their own).
pub fn system_call_under(root: &Path, pid: i32, tid: i32) -> Option<SystemCall> {
    let line = std::fs::read_to_string(root.join(format!("proc/{pid}/task/{tid}/syscall"))).ok()?;
    let mut words = line.split_whitespace();
    let number: u64 = words.next()?.parse().ok()?;
    if let Some((_, name)) = AIO_CALLS.iter().find(|(n, _)| *n == number) {
        return Some(SystemCall {
            name: Some(name),
            on_file: true,
            file: None,
        });
    }
    let Some((_, name)) = FILE_CALLS.iter().find(|(n, _)| *n == number) else {
        return Some(SystemCall {
            name: None,
            on_file: false,
            file: None,
        });
    };
    let fd = words
        .next()
        .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok());
    let link = fd.map(|fd| root.join(format!("proc/{pid}/fd/{fd}")));
    let kind = link.as_ref().and_then(|l| std::fs::metadata(l).ok());
    use std::os::unix::fs::FileTypeExt;
    let on_file = kind.is_some_and(|m| m.file_type().is_file() || m.file_type().is_block_device());
    Some(SystemCall {
        name: Some(name),
        on_file,
        file: on_file
            .then(|| link.and_then(|l| std::fs::read_link(l).ok()))
            .flatten()
            .map(|p| p.display().to_string()),
    })
}
