//! Live processes under ptrace: attach, read, cache, write, resume, detach, errors.
//!
//! A small C program, compiled with gcc at test time, prints the addresses of its
//! variables; the tests read them through [`LiveProcess`] and check what the process
//! does after detach.

use mqd_process::live::{
    AttachError, AttachMethod, AttachOptions, ExecutionCounter, LiveProcess, ReadMethod, StopReason,
};
use mqd_target::TargetError;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long counter;
volatile int got_usr1;
volatile int gate;
static const char message[] = "hello from the fixture";

static void on_usr1(int sig) { (void)sig; got_usr1++; }
static void *spin(void *arg) { for (;;) usleep(1000); return arg; }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "basic";
    signal(SIGUSR1, on_usr1);
    long ps = sysconf(_SC_PAGESIZE);
    /* Two readable pages, then a hole. (PROT_NONE would not do: ptrace and
       /proc/PID/mem read such pages, as debuggers do; process_vm_readv does not.) */
    unsigned char *p = mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2;
    for (long i = 0; i < 2 * ps; i++) p[i] = (unsigned char)(i * 7 + 3);
    munmap(p + 2 * ps, ps);
    if (!strcmp(mode, "threads")) {
        for (int i = 0; i < 3; i++) {
            pthread_t t;
            pthread_create(&t, NULL, spin, NULL);
        }
    }
    counter = 1; /* nonzero from READY on */
    printf("counter %p\ngot_usr1 %p\ngate %p\nbuf %p\npage %ld\nmessage %p\nREADY\n",
           (void *)&counter, (void *)&got_usr1, (void *)&gate, (void *)p, ps,
           (void *)message);
    fflush(stdout);
    if (!strcmp(mode, "vfork")) {
        /* The parent waits in uninterruptible (killable) sleep until the child exits. */
        pid_t child = vfork();
        if (child == 0) {
            struct timespec t = {2, 0};
            nanosleep(&t, NULL);
            _exit(0);
        }
        return 7;
    }
    for (;;) {
        counter++;
        if (gate == 1) return 42;
        usleep(1000);
    }
}
"#;

fn program() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        // Each test may run in a process of its own: every process builds under names of
        // its own and links the program into place unless another did first (a rename
        // would replace the file a running test reads as its target's executable).
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("live-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id();
        let source = dir.join(format!("target.{me}.c"));
        let built = dir.join(format!("live-target.{me}"));
        // Named by its source, so that one built from another version is never reused.
        let exe = dir.join(format!("live-target-{:016x}", {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            PROGRAM.hash(&mut h);
            h.finish()
        }));
        if exe.exists() {
            return exe;
        }
        std::fs::write(&source, PROGRAM).unwrap();
        let status = Command::new("gcc")
            .args(["-g", "-O0", "-pthread", "-o"])
            .arg(&built)
            .arg(&source)
            .status()
            .expect("gcc is needed for the live tests");
        let _ = std::fs::remove_file(&source);
        assert!(status.success(), "gcc failed");
        match std::fs::hard_link(&built, &exe) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("{}: {e}", exe.display()),
        }
        let _ = std::fs::remove_file(&built);
        exe
    })
    .clone()
}

/// A running copy of the program; killed and reaped when dropped.
struct Proc {
    child: Child,
    vars: HashMap<String, u64>,
}

impl Proc {
    fn start(mode: &str) -> Proc {
        let mut child = Command::new(program())
            .arg(mode)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut vars = HashMap::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if line == "READY" {
                break;
            }
            let (name, value) = line.split_once(' ').unwrap();
            let value = value.trim_start_matches("0x");
            let radix = if name == "page" { 10 } else { 16 };
            vars.insert(name.to_string(), u64::from_str_radix(value, radix).unwrap());
        }
        Proc { child, vars }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn var(&self, name: &str) -> u64 {
        self.vars[name]
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn state(pid: i32) -> char {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    text[text.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

fn thread_states(pid: i32) -> Vec<char> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| {
            let tid: i32 = e.unwrap().file_name().to_str().unwrap().parse().unwrap();
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
            text[text.rfind(')').unwrap() + 2..].chars().next().unwrap()
        })
        .collect()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn read_u64(process: &LiveProcess, addr: u64) -> u64 {
    let mut b = [0u8; 8];
    process.read(addr, &mut b).unwrap();
    u64::from_ne_bytes(b)
}

fn read_i32(process: &LiveProcess, addr: u64) -> i32 {
    let mut b = [0u8; 4];
    process.read(addr, &mut b).unwrap();
    i32::from_ne_bytes(b)
}

/// The counter as a fresh attach sees it (the process is left as it was).
fn peek_counter(p: &Proc) -> u64 {
    let process = LiveProcess::attach(p.pid()).unwrap();
    let value = read_u64(&process, p.var("counter"));
    process.detach().unwrap();
    value
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(7).wrapping_add(3)) as u8
}

#[test]
fn attach_reads_known_values_and_detach_restores() {
    let p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    assert_eq!(process.pid(), p.pid());
    assert!(!process.was_stopped());
    assert!(process.is_stopped());
    assert_eq!(state(p.pid()), 't', "a traced process is in tracing stop");
    let c1 = read_u64(&process, p.var("counter"));
    thread::sleep(Duration::from_millis(30));
    let c2 = read_u64(&process, p.var("counter"));
    assert_eq!(c1, c2, "a stopped process does not count");
    let message = process.read_c_string(p.var("message"), 4096).unwrap();
    assert_eq!(message, b"hello from the fixture");
    let short = process.read_c_string(p.var("message"), 5).unwrap();
    assert_eq!(short, b"hello");
    let mut buf = vec![0u8; 100];
    process.read(p.var("buf") + 10, &mut buf).unwrap();
    assert!(
        buf.iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(10 + i as u64))
    );
    assert_eq!(
        process.executable().unwrap().canonicalize().unwrap(),
        program().canonicalize().unwrap()
    );
    process.detach().unwrap();
    wait_for("the process to run again", || state(p.pid()) != 't');
    wait_for("the counter to move on", || peek_counter(&p) > c2);
}

#[test]
fn page_boundaries_and_unmapped_memory() {
    let p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    let buf = p.var("buf");
    let page = p.var("page");
    // Across the boundary of the two readable pages.
    let mut across = vec![0u8; 64];
    process.read(buf + page - 32, &mut across).unwrap();
    assert!(
        across
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(page - 32 + i as u64))
    );
    // Into the unreadable third page: all or nothing, the whole request reported.
    let end = buf + 2 * page;
    let mut into = [0u8; 16];
    assert_eq!(
        process.read(end - 8, &mut into),
        Err(TargetError::Unmapped {
            addr: end - 8,
            len: 16
        })
    );
    // ... and the readable part through read_partial.
    assert_eq!(process.read_partial(end - 8, &mut into), Ok(8));
    assert!(
        into[..8]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(2 * page - 8 + i as u64))
    );
    assert_eq!(process.read_partial(end, &mut into), Ok(0));
    // A large read that ends in the unreadable page.
    let mut large = vec![0u8; 3 * page as usize];
    assert!(matches!(
        process.read(buf, &mut large),
        Err(TargetError::Unmapped { .. })
    ));
    assert_eq!(process.read_partial(buf, &mut large), Ok(2 * page as usize));
    // Nothing at page 0, nor in the kernel's half, nor past the end of the address space.
    let mut word = [0u8; 8];
    assert_eq!(
        process.read(0, &mut word),
        Err(TargetError::Unmapped { addr: 0, len: 8 })
    );
    assert!(matches!(
        process.read(0xffff_8000_0000_0000, &mut word),
        Err(TargetError::Unmapped { .. })
    ));
    assert!(matches!(
        process.read(u64::MAX - 3, &mut word),
        Err(TargetError::Unmapped { .. })
    ));
    // A string running into unreadable memory ends there.
    let tail: Vec<u8> = (2 * page - 8..2 * page).map(pattern).collect();
    let expected: Vec<u8> = tail.iter().copied().take_while(|&b| b != 0).collect();
    assert_eq!(process.read_c_string(end - 8, 4096).unwrap(), expected);
    assert!(process.read_c_string(end, 4096).is_err());
    process.detach().unwrap();
}

#[test]
fn every_read_method_agrees() {
    let p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    let buf = p.var("buf");
    let page = p.var("page");
    let mut reference = vec![0u8; 300];
    process.read(buf + page - 150, &mut reference).unwrap();
    for method in [
        ReadMethod::ProcMem,
        ReadMethod::Peek,
        ReadMethod::ProcessVmReadv,
    ] {
        process.clear_cache();
        process.set_read_method(method);
        let mut got = vec![0u8; 300];
        process.read(buf + page - 150, &mut got).unwrap();
        assert_eq!(got, reference, "{method:?}");
        assert_eq!(
            read_u64(&process, p.var("counter")),
            read_u64(&process, p.var("counter"))
        );
        let end = buf + 2 * page;
        let mut into = [0u8; 16];
        assert_eq!(
            process.read(end - 8, &mut into),
            Err(TargetError::Unmapped {
                addr: end - 8,
                len: 16
            }),
            "{method:?}"
        );
        assert_eq!(
            process.read_partial(end - 8, &mut into),
            Ok(8),
            "{method:?}"
        );
        assert_eq!(process.read_method(), method);
    }
    process.detach().unwrap();
}

#[test]
fn cache_turns_small_reads_into_few_syscalls() {
    let p = Proc::start("basic");
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    let buf = p.var("buf");
    process.reset_stats();
    // 2000 small reads spread over the two readable pages.
    for i in 0..2000u64 {
        let mut b = [0u8; 8];
        let at = buf + (i * 13) % (2 * 4096 - 8);
        process.read(at, &mut b).unwrap();
        assert_eq!(b[0], pattern(at - buf));
    }
    let stats = process.stats();
    assert_eq!(stats.requests, 2000);
    assert_eq!(stats.syscalls, 2, "{stats:?}");
    assert_eq!(stats.blocks_fetched, 2);
    assert_eq!(stats.cache_hits, 1998);
    // A read spanning many uncached blocks is one system call.
    process.clear_cache();
    process.reset_stats();
    let mut both = vec![0u8; 2 * 4096];
    process.read(buf, &mut both).unwrap();
    assert_eq!(process.stats().syscalls, 1);
    // Resuming drops the cache: the counter is read afresh.
    let before = read_u64(&process, p.var("counter"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        process.resume().unwrap();
        assert!(!process.is_stopped());
        thread::sleep(Duration::from_millis(10));
        process.interrupt().unwrap();
        assert!(process.is_stopped());
        let syscalls = process.stats().syscalls;
        let after = read_u64(&process, p.var("counter"));
        assert_eq!(process.stats().syscalls, syscalls + 1);
        if after > before {
            break;
        }
        assert!(Instant::now() < deadline, "the counter never moved");
    }
    // An unreadable block is remembered too.
    let end = buf + 2 * 4096;
    let mut b = [0u8; 4];
    process.read(end, &mut b).unwrap_err();
    let syscalls = process.stats().syscalls;
    process.read(end + 8, &mut b).unwrap_err();
    assert_eq!(process.stats().syscalls, syscalls);
    process.detach().unwrap();
}

#[test]
fn reads_of_a_running_process_are_not_cached() {
    let p = Proc::start("basic");
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    process.resume().unwrap();
    let first = read_u64(&process, p.var("counter"));
    wait_for("the counter to move", || {
        read_u64(&process, p.var("counter")) > first
    });
    process.detach().unwrap();
}

#[test]
fn write_releases_a_gate() {
    let mut p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    let gate = p.var("gate");
    assert_eq!(read_i32(&process, gate), 0);
    process.write(gate, &1i32.to_ne_bytes()).unwrap();
    assert_eq!(
        read_i32(&process, gate),
        1,
        "the write invalidates the cache"
    );
    // Unaligned multi-word writes round-trip too (restored afterwards).
    let buf = p.var("buf") + 4093;
    let mut old = [0u8; 11];
    process.read(buf, &mut old).unwrap();
    process.write(buf, b"hello world").unwrap();
    let mut back = [0u8; 11];
    process.read(buf, &mut back).unwrap();
    assert_eq!(&back, b"hello world");
    process.write(buf, &old).unwrap();
    let end = p.var("buf") + 2 * p.var("page");
    assert!(matches!(
        process.write(end, &[1, 2, 3]),
        Err(TargetError::Unmapped { .. })
    ));
    process.detach().unwrap();
    let status = p.child.wait().unwrap();
    assert_eq!(status.code(), Some(42));
}

#[test]
fn detach_leaves_a_stopped_process_stopped() {
    let p = Proc::start("basic");
    unsafe { libc::kill(p.pid(), libc::SIGSTOP) };
    wait_for("the process to stop", || state(p.pid()) == 'T');
    for method in [AttachMethod::Seize, AttachMethod::Attach] {
        let options = AttachOptions {
            method,
            ..AttachOptions::default()
        };
        let process = LiveProcess::attach_with(p.pid(), options).unwrap();
        assert!(process.was_stopped(), "{method:?}");
        let c1 = read_u64(&process, p.var("counter"));
        process.detach().unwrap();
        wait_for("the process to stop again", || state(p.pid()) == 'T');
        thread::sleep(Duration::from_millis(50));
        assert_eq!(state(p.pid()), 'T', "{method:?}");
        let process = LiveProcess::attach(p.pid()).unwrap();
        assert_eq!(read_u64(&process, p.var("counter")), c1, "{method:?}");
        process.detach().unwrap();
    }
    // Resuming it while attached does not change that either.
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    process.resume().unwrap();
    process.interrupt().unwrap();
    process.detach().unwrap();
    wait_for("the process to stop again", || state(p.pid()) == 'T');
    unsafe { libc::kill(p.pid(), libc::SIGCONT) };
    wait_for("the process to run", || state(p.pid()) != 'T');
    let c = peek_counter(&p);
    wait_for("the counter to move on", || peek_counter(&p) > c);
}

#[test]
fn ptrace_attach_fallback_leaves_a_running_process_running() {
    let p = Proc::start("basic");
    let options = AttachOptions {
        method: AttachMethod::Attach,
        ..AttachOptions::default()
    };
    let mut process = LiveProcess::attach_with(p.pid(), options).unwrap();
    assert!(!process.was_stopped());
    let c1 = read_u64(&process, p.var("counter"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        process.resume().unwrap();
        thread::sleep(Duration::from_millis(10));
        process.interrupt().unwrap();
        if read_u64(&process, p.var("counter")) > c1 {
            break;
        }
        assert!(Instant::now() < deadline, "the counter never moved");
    }
    process.detach().unwrap();
    // No stray SIGSTOP stops it later.
    thread::sleep(Duration::from_millis(50));
    assert!(matches!(state(p.pid()), 'R' | 'S'), "{}", state(p.pid()));
    let c3 = peek_counter(&p);
    wait_for("the counter to move on", || peek_counter(&p) > c3);
}

#[test]
fn a_signal_sent_while_attached_is_delivered_after_detach() {
    let p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    unsafe { libc::kill(p.pid(), libc::SIGUSR1) };
    thread::sleep(Duration::from_millis(20));
    assert_eq!(read_i32(&process, p.var("got_usr1")), 0);
    process.detach().unwrap();
    wait_for("SIGUSR1 to be handled", || {
        let process = LiveProcess::attach(p.pid()).unwrap();
        let got = read_i32(&process, p.var("got_usr1"));
        process.detach().unwrap();
        got == 1
    });
}

#[test]
fn a_signal_taken_while_running_is_delivered_again() {
    let p = Proc::start("basic");
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    process.resume().unwrap();
    unsafe { libc::kill(p.pid(), libc::SIGUSR1) };
    let event = process.wait_stop(Duration::from_secs(5)).unwrap();
    assert_eq!(event.reason, StopReason::Signal(libc::SIGUSR1));
    assert_eq!(event.tid, p.pid());
    assert_eq!(process.pending_signals(), vec![(p.pid(), libc::SIGUSR1)]);
    assert_eq!(read_i32(&process, p.var("got_usr1")), 0);
    process.detach().unwrap();
    wait_for("SIGUSR1 to be handled", || {
        let process = LiveProcess::attach(p.pid()).unwrap();
        let got = read_i32(&process, p.var("got_usr1"));
        process.detach().unwrap();
        got == 1
    });
    // And a SIGSTOP taken while attached stops it after detach.
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    process.resume().unwrap();
    unsafe { libc::kill(p.pid(), libc::SIGSTOP) };
    let event = process.wait_stop(Duration::from_secs(5)).unwrap();
    assert_eq!(event.reason, StopReason::Signal(libc::SIGSTOP));
    process.detach().unwrap();
    wait_for("the process to stop", || state(p.pid()) == 'T');
}

#[test]
fn every_thread_is_stopped_while_attached() {
    let p = Proc::start("threads");
    wait_for("4 threads", || thread_states(p.pid()).len() == 4);
    let process = LiveProcess::attach(p.pid()).unwrap();
    assert_eq!(process.threads().len(), 4);
    assert!(thread_states(p.pid()).iter().all(|&s| s == 't'));
    process.detach().unwrap();
    wait_for("the threads to run", || {
        thread_states(p.pid()).iter().all(|&s| s != 't')
    });
}

#[test]
fn several_processes_at_once_from_several_threads() {
    let procs: Vec<Proc> = (0..3).map(|_| Proc::start("basic")).collect();
    let attached: Vec<LiveProcess> = procs
        .iter()
        .map(|p| LiveProcess::attach(p.pid()).unwrap())
        .collect();
    for (p, process) in procs.iter().zip(&attached) {
        assert!(read_u64(process, p.var("counter")) > 0);
    }
    // A LiveProcess may move to another thread; its tracer thread stays the same.
    let handles: Vec<_> = attached
        .into_iter()
        .map(|mut process| {
            thread::spawn(move || {
                process.resume().unwrap();
                thread::sleep(Duration::from_millis(10));
                process.interrupt().unwrap();
                process.detach().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // And several threads may attach at once.
    let pids: Vec<i32> = procs.iter().map(Proc::pid).collect();
    let handles: Vec<_> = pids
        .into_iter()
        .map(|pid| thread::spawn(move || LiveProcess::attach(pid).unwrap().detach().unwrap()))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for p in &procs {
        wait_for("the process to run", || matches!(state(p.pid()), 'R' | 'S'));
    }
}

#[test]
fn drop_detaches() {
    let p = Proc::start("basic");
    {
        let _process = LiveProcess::attach(p.pid()).unwrap();
        assert_eq!(state(p.pid()), 't');
    }
    wait_for("the process to run", || state(p.pid()) != 't');
    let c = peek_counter(&p);
    wait_for("the counter to move on", || peek_counter(&p) > c);
}

#[test]
fn errors_name_their_cause() {
    let e = LiveProcess::attach(999_999_999).unwrap_err();
    assert_eq!(e, AttachError::NoSuchProcess { pid: 999_999_999 });
    assert_eq!(e.to_string(), "no such process: pid 999999999");
    assert!(matches!(
        LiveProcess::attach(-5),
        Err(AttachError::NoSuchProcess { .. })
    ));

    // A reaped process.
    let mut done = Command::new("true").spawn().unwrap();
    let pid = done.id() as i32;
    done.wait().unwrap();
    assert!(matches!(
        LiveProcess::attach(pid),
        Err(AttachError::NoSuchProcess { .. })
    ));

    // A zombie (exited, not reaped).
    let mut zombie = Command::new("true").spawn().unwrap();
    let pid = zombie.id() as i32;
    wait_for("a zombie", || state(pid) == 'Z');
    let e = LiveProcess::attach(pid).unwrap_err();
    assert_eq!(e, AttachError::Exited { pid });
    assert_eq!(e.to_string(), format!("pid {pid} has exited"));
    zombie.wait().unwrap();

    // This process itself.
    let own = std::process::id() as i32;
    assert!(matches!(
        LiveProcess::attach(own),
        Err(AttachError::OwnProcess { .. })
    ));

    // A kernel thread.
    if let Some(kthread) = kernel_thread() {
        let e = LiveProcess::attach(kthread).unwrap_err();
        assert_eq!(e, AttachError::KernelThread { pid: kthread });
        assert!(e.to_string().contains("kernel thread"), "{e}");
    }

    // A process that is already traced.
    let p = Proc::start("basic");
    let first = LiveProcess::attach(p.pid()).unwrap();
    let e = LiveProcess::attach(p.pid()).unwrap_err();
    assert!(matches!(e, AttachError::AlreadyTraced { .. }), "{e:?}");
    assert!(e.to_string().contains("already traced"), "{e}");
    first.detach().unwrap();
}

fn kernel_thread() -> Option<i32> {
    let flags = |pid: i32| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        text[text.rfind(')')? + 1..]
            .split_whitespace()
            .nth(6)?
            .parse()
            .ok()
    };
    (2..200).find(|&pid| flags(pid).is_some_and(|f| f & 0x0020_0000 != 0))
}

#[test]
fn a_process_in_uninterruptible_sleep_times_out_and_is_left_running() {
    let mut p = Proc::start("vfork");
    // The parent now waits for its vfork child (2 s) in state D.
    wait_for("the vfork", || state(p.pid()) == 'D');
    let options = AttachOptions {
        timeout: Duration::from_millis(300),
        ..AttachOptions::default()
    };
    let started = Instant::now();
    let e = LiveProcess::attach_with(p.pid(), options).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    match &e {
        AttachError::Timeout { pid, state, .. } => {
            assert_eq!(*pid, p.pid());
            assert_eq!(*state, 'D');
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("uninterruptible sleep"), "{e}");
    // Once the vfork child exits, the parent goes on and exits by itself: no trap left.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the process was left stopped");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(7));
}

#[test]
fn spawn_stops_at_exec_and_runs_after_detach() {
    let mut command = Command::new(program());
    command.arg("basic").stdout(Stdio::null());
    let (mut process, mut child) = LiveProcess::spawn(command, Duration::from_secs(5)).unwrap();
    assert!(process.is_stopped());
    let pc = process.pc(process.pid()).unwrap();
    assert_ne!(pc, 0);
    // Stopped before the program's first instruction: main has not run.
    let exe_text = std::fs::read_to_string(format!("/proc/{}/maps", process.pid())).unwrap();
    assert!(!exe_text.contains("[heap]"));
    process.step(process.pid()).unwrap();
    assert_ne!(process.pc(process.pid()).unwrap(), pc);
    assert!(process.pending_signals().is_empty());
    process.detach().unwrap();
    thread::sleep(Duration::from_millis(50));
    assert!(child.try_wait().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kill_leaves_the_exit_status_to_the_parent() {
    use std::os::unix::process::ExitStatusExt;
    let mut p = Proc::start("basic");
    let process = LiveProcess::attach(p.pid()).unwrap();
    process.kill().unwrap();
    let status = p.child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
fn a_process_that_dies_while_attached() {
    let p = Proc::start("basic");
    let mut process = LiveProcess::attach(p.pid()).unwrap();
    process.resume().unwrap();
    unsafe { libc::kill(p.pid(), libc::SIGKILL) };
    let event = process.wait_stop(Duration::from_secs(5)).unwrap();
    assert_eq!(event.reason, StopReason::Killed(libc::SIGKILL));
    let mut word = [0u8; 8];
    assert!(process.read(p.var("counter"), &mut word).is_err());
    assert!(process.resume().is_err());
    process.detach().unwrap();
}

/// `usleep`'s address in the fixture: its main loop calls it every millisecond.
fn usleep_address(pid: i32) -> u64 {
    let space = mqd_debuginfo::AddressSpace::from_pid(pid).unwrap();
    space
        .find_function("usleep")
        .expect("usleep in the C library")
}

#[test]
fn an_execution_counter_counts_a_running_thread_without_stopping_it() {
    let p = Proc::start("basic");
    let usleep = usleep_address(p.pid());
    let counter = ExecutionCounter::new(p.pid(), usleep).unwrap();
    // Data, never executed.
    let never = ExecutionCounter::new(p.pid(), p.var("message")).unwrap();
    wait_for("usleep to be counted", || counter.count().unwrap() > 20);
    assert_eq!(never.count().unwrap(), 0);
    assert_ne!(state(p.pid()), 't', "nothing traces it");
    drop(counter);
    let c = peek_counter(&p);
    wait_for("the counter to move on", || peek_counter(&p) > c + 20);
    // The first execution only: counted once, then the breakpoint is off.
    let first = ExecutionCounter::first(p.pid(), usleep).unwrap();
    let never = ExecutionCounter::first(p.pid(), p.var("message")).unwrap();
    wait_for("usleep's first execution", || first.count().unwrap() == 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(first.count().unwrap(), 1);
    assert_eq!(never.count().unwrap(), 0);
}
