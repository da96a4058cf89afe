//! The C fixture programs: they build, run, print READY, spawn jobs through MPIR and MPI2DD,
//! gate on MPIR_debug_gate, and carry the symbols and DWARF types of each MPICH layout.
//!
//! Memory of running fixtures is read and written through `/proc/PID/mem` (no ptrace stop),
//! symbols come from `nm`, types from `gdb -batch` (skipped when gdb is not installed).

use mqd_harness::fixtures::{
    self, ABORT_MESSAGE, ARENA, CH3, CH4, CH4_DWARF4, DEBUGLINK, DEBUGQ4, DEBUGQ5, DLL_PATH,
    JobOptions, PLAIN, RANK_BINARIES, SCENARIOS, STARTER, STARTER_MPI2DD, STRIPPED_ALL,
    STRIPPED_DEBUG, spawn_command, spawn_job, spawn_rank,
};
use mqd_harness::synthetic::Layout;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------ helpers

/// `nm` of a binary: name -> (kind letter, address).
fn nm(path: &Path) -> BTreeMap<String, (char, u64)> {
    let out = Command::new("nm")
        .arg(path)
        .output()
        .expect("nm (binutils) is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut symbols = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [addr, kind, name] = parts[..] {
            let addr = u64::from_str_radix(addr, 16).unwrap_or(0);
            let kind = kind.chars().next().unwrap_or('?');
            symbols.insert(name.to_owned(), (kind, addr));
        }
    }
    symbols
}

/// Section names of an ELF file (`readelf -S`).
fn sections(path: &Path) -> String {
    let out = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(path)
        .output()
        .expect("readelf (binutils) is installed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running process of a fixture binary, read and written through /proc.
struct Proc {
    pid: i32,
    exe: PathBuf,
    symbols: BTreeMap<String, (char, u64)>,
}

impl Proc {
    fn new(pid: i32, binary: &str) -> Proc {
        let exe = fixtures::fixture(binary).canonicalize().unwrap();
        Proc {
            pid,
            symbols: nm(&exe),
            exe,
        }
    }

    /// Load bias of the executable: the start of its mapping at file offset 0 for a PIE,
    /// 0 for a fixed-address executable.
    fn bias(&self) -> u64 {
        let header = fs::read(&self.exe).unwrap();
        let e_type = u16::from_le_bytes([header[16], header[17]]);
        if e_type == 2 {
            return 0;
        }
        let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        for line in maps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() >= 6 && Path::new(fields[5]) == self.exe && fields[2] == "00000000" {
                let start = fields[0].split('-').next().unwrap();
                return u64::from_str_radix(start, 16).unwrap();
            }
        }
        panic!("no mapping of {} in pid {}", self.exe.display(), self.pid);
    }

    fn symbol(&self, name: &str) -> u64 {
        let (_, addr) = self
            .symbols
            .get(name)
            .unwrap_or_else(|| panic!("no symbol {name}"));
        self.bias() + addr
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mem = fs::File::open(format!("/proc/{}/mem", self.pid)).unwrap();
        let mut buf = vec![0; len];
        mem.read_exact_at(&mut buf, addr).unwrap();
        buf
    }

    fn read_i32(&self, addr: u64) -> i32 {
        i32::from_le_bytes(self.read(addr, 4).try_into().unwrap())
    }

    fn read_u64(&self, addr: u64) -> u64 {
        u64::from_le_bytes(self.read(addr, 8).try_into().unwrap())
    }

    fn read_string(&self, addr: u64) -> String {
        let mut out = Vec::new();
        for chunk in 0.. {
            let bytes = self.read(addr + 64 * chunk, 64);
            if let Some(end) = bytes.iter().position(|&b| b == 0) {
                out.extend_from_slice(&bytes[..end]);
                break;
            }
            out.extend_from_slice(&bytes);
        }
        String::from_utf8(out).unwrap()
    }

    fn write_i32(&self, addr: u64, value: i32) {
        let mem = fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/mem", self.pid))
            .unwrap();
        mem.write_all_at(&value.to_le_bytes(), addr).unwrap();
    }
}

fn exe_of(pid: i32) -> PathBuf {
    fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

fn parent_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Whether `pid` is gone (or a zombie, i.e. exited but not yet reaped by its parent).
fn exited(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.starts_with('Z') || after.starts_with('X')
        }
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ------------------------------------------------------------------ building and running

#[test]
fn every_fixture_is_built() {
    for name in [
        CH3,
        CH4,
        DEBUGQ4,
        DEBUGQ5,
        CH4_DWARF4,
        STARTER,
        STARTER_MPI2DD,
        PLAIN,
        STRIPPED_DEBUG,
        STRIPPED_ALL,
        DEBUGLINK,
    ] {
        let path = fixtures::fixture(name);
        assert!(path.is_file(), "{} was not built", path.display());
        assert!(path.starts_with(fixtures::dir()));
    }
    assert!(
        fixtures::dir()
            .join("mqd-fixture-debugq5-debuglink.debug")
            .is_file()
    );
    assert_eq!(fixtures::layout_binary(Layout::Ch4Am), CH4);
    for (layout, binary) in Layout::ALL.iter().zip(RANK_BINARIES) {
        assert_eq!(fixtures::layout_binary(*layout), binary);
    }
}

#[test]
fn the_dll_path_is_the_built_library() {
    let path = Path::new(DLL_PATH);
    assert!(path.is_absolute(), "{DLL_PATH}");
    assert_eq!(path.file_name().unwrap(), "libmqd_mpich.so");
    // target/<profile>/deps/, where cargo writes the cdylib on every build of its dependents.
    let profile_dir = fixtures::dir()
        .ancestors()
        .nth(4)
        .unwrap()
        .canonicalize()
        .unwrap();
    assert_eq!(path.parent().unwrap(), profile_dir.join("deps"));
    assert!(path.exists(), "{DLL_PATH} was not built");
}

#[test]
fn every_scenario_reaches_ready_in_every_layout() {
    // Start them all, then wait for each: 32 processes in parallel.
    let mut ranks = Vec::new();
    for binary in RANK_BINARIES {
        for scenario in SCENARIOS {
            let mut cmd = Command::new(fixtures::fixture(binary));
            cmd.args(["--scenario", scenario, "--rank", "1", "--size", "4"]);
            cmd.env_remove("MQD_WAIT_FOR_GATE");
            ranks.push((binary, scenario, spawn_command(cmd).unwrap()));
        }
    }
    for (binary, scenario, rank) in &mut ranks {
        rank.wait_ready(WAIT)
            .unwrap_or_else(|e| panic!("{binary} {scenario}: {e}"));
        assert!(rank.is_running(), "{binary} {scenario} exited after READY");
    }
    for (binary, scenario, rank) in ranks {
        let status = rank.terminate().unwrap();
        assert!(
            status.success(),
            "{binary} {scenario}: SIGTERM gave {status}"
        );
    }
}

#[test]
fn rank_and_size_come_from_the_environment() {
    let mut cmd = Command::new(fixtures::fixture(CH3));
    cmd.args(["--scenario", "comms"])
        .env("MQD_RANK", "2")
        .env("MQD_SIZE", "3")
        .env_remove("MQD_WAIT_FOR_GATE");
    let mut rank = spawn_command(cmd).unwrap();
    rank.wait_ready(WAIT).unwrap();
    let p = Proc::new(rank.pid(), CH3);
    // sequence_number of the comms scenario.
    assert_eq!(p.read_i32(p.symbol("MPIR_All_communicators")), 8);
}

#[test]
fn bad_arguments_are_refused() {
    let run = |binary: &str, args: &[&str]| {
        Command::new(fixtures::fixture(binary))
            .args(args)
            .env_remove("MQD_RANK")
            .env_remove("MQD_SIZE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    for args in [
        &["--scenario", "nonsense"][..],
        &[][..],
        &["--scenario", "ring", "--rank", "4", "--size", "4"][..],
        &["--scenario", "comms", "--size", "1"][..],
        &["--scenario", "ring", "--bogus"][..],
    ] {
        let out = run(DEBUGQ5, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
        assert!(!out.stderr.is_empty(), "{args:?} gave no message");
    }
    let help = run(CH3, &["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for scenario in SCENARIOS {
        assert!(text.contains(scenario), "--help lacks {scenario}: {text}");
    }
    let out = run(STARTER, &["-n", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(STARTER, &["--layout", "ch5", "ring"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plain_and_stripped_fixtures_run() {
    let mut plain = spawn_command(Command::new(fixtures::fixture(PLAIN))).unwrap();
    plain.wait_ready(WAIT).unwrap();
    for binary in [STRIPPED_DEBUG, STRIPPED_ALL, DEBUGLINK, CH4_DWARF4] {
        let rank = spawn_rank(binary, "wildcards", 0, 2).unwrap();
        assert!(exe_of(rank.pid()).ends_with(binary));
    }
    assert!(plain.terminate().unwrap().success());
}

#[test]
fn buffers_live_in_the_fixed_arena() {
    let rank = spawn_rank(DEBUGQ4, "wildcards", 0, 1).unwrap();
    let maps = fs::read_to_string(format!("/proc/{}/maps", rank.pid())).unwrap();
    assert!(
        maps.lines().any(|l| l.starts_with(&format!("{ARENA:x}-"))),
        "no arena at {ARENA:#x}:\n{maps}"
    );
    assert_eq!(fixtures::buffer(3), 0x4d51_4400_3000);
    assert_eq!(fixtures::big_buffer(2), 0x4d51_4410_0020);
}

// ------------------------------------------------------------------ MPIR and MPI2DD

#[test]
fn the_starter_spawns_four_ranks_and_publishes_them() {
    let job = spawn_job(&JobOptions::new(4, Layout::Debugq5, "ring")).unwrap();
    let pids = job.rank_pids().to_vec();
    assert_eq!(pids.len(), 4);
    assert_eq!(pids.iter().collect::<BTreeSet<_>>().len(), 4, "{pids:?}");
    let rank_exe = fixtures::fixture(DEBUGQ5).canonicalize().unwrap();
    for &pid in &pids {
        assert_eq!(exe_of(pid), rank_exe);
        assert_eq!(parent_of(pid), job.starter_pid());
    }

    // What a debugger reads in the starter.
    let starter = Proc::new(job.starter_pid(), STARTER);
    assert_eq!(starter.read_i32(starter.symbol("MPIR_proctable_size")), 4);
    assert_eq!(starter.read_i32(starter.symbol("MPIR_debug_state")), 1);
    assert_eq!(starter.read_i32(starter.symbol("MPIR_being_debugged")), 0);
    assert_eq!(
        starter.read_u64(starter.symbol("MPIR_debug_abort_string")),
        0
    );
    let table = starter.read_u64(starter.symbol("MPIR_proctable"));
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (i, &pid) in pids.iter().enumerate() {
        // MPIR_PROCDESC { char *host_name; char *executable_name; int pid; }: 24 bytes.
        let entry = table + 24 * i as u64;
        assert_eq!(starter.read_string(starter.read_u64(entry)), host.trim());
        assert_eq!(
            Path::new(&starter.read_string(starter.read_u64(entry + 8))),
            rank_exe
        );
        assert_eq!(starter.read_i32(entry + 16), pid);
    }

    // Each rank: COMM_WORLD rank from the starter, the ring's communicator list.
    for &pid in &pids {
        let rank = Proc::new(pid, DEBUGQ5);
        assert_eq!(rank.read_i32(rank.symbol("MPIR_All_communicators")), 3);
        assert_eq!(rank.read_i32(rank.symbol("MPIR_debug_gate")), 0);
        assert_eq!(rank.read_i32(rank.symbol("MPIR_being_debugged")), 0);
    }

    let status = job.terminate().unwrap();
    assert!(status.success(), "starter: {status}");
    for pid in pids {
        wait_until("the ranks to exit", || exited(pid));
    }
}

#[test]
fn the_starter_runs_every_layout() {
    for layout in Layout::ALL {
        let job = spawn_job(&JobOptions::new(2, layout, "compute")).unwrap();
        let exe = fixtures::fixture(fixtures::layout_binary(layout))
            .canonicalize()
            .unwrap();
        for &pid in job.rank_pids() {
            assert_eq!(exe_of(pid), exe, "{layout:?}");
        }
    }
}

#[test]
fn killing_the_starter_ends_the_ranks() {
    let job = spawn_job(&JobOptions::new(3, Layout::Ch3, "wildcards")).unwrap();
    let pids = job.rank_pids().to_vec();
    fixtures::send_signal(job.starter_pid(), "KILL").unwrap();
    for pid in pids {
        wait_until("orphaned ranks to exit", || exited(pid));
    }
}

#[test]
fn abort_publishes_the_abort_string() {
    let mut options = JobOptions::new(2, Layout::Ch4Am, "compute");
    options.abort = true;
    let job = spawn_job(&options).unwrap();
    let starter = Proc::new(job.starter_pid(), STARTER);
    assert_eq!(starter.read_i32(starter.symbol("MPIR_debug_state")), 2);
    let text = starter.read_u64(starter.symbol("MPIR_debug_abort_string"));
    assert_eq!(starter.read_string(text), ABORT_MESSAGE);
    assert_eq!(job.terminate().unwrap().code(), Some(3));
}

#[test]
fn the_mpi2dd_starter_publishes_mpi2dd_info() {
    let mut options = JobOptions::new(4, Layout::Debugq4, "sends");
    options.mpi2dd = true;
    options.abort = true;
    let job = spawn_job(&options).unwrap();
    let starter = Proc::new(job.starter_pid(), STARTER_MPI2DD);
    let info = starter.symbol("MPI2DD_info");
    let bytes = starter.read(info, 128);
    assert_eq!(&bytes[..5], b"MPI2\x7f");
    assert_eq!(bytes[5], 1, "version");
    assert_eq!(bytes[6], 1, "variant");
    assert_eq!(bytes[7], 8, "debug_state: MPI2DD_DEBUG_ABORT");
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(u32_at(8), 0, "debugger_flags");
    assert_eq!(u32_at(12) & 0x4, 0x4, "mpi_flags has I_AM_STARTER");
    assert_eq!(u64_at(16), 0, "dll_name_32");
    assert_eq!(starter.read_string(u64_at(24)), DLL_PATH, "dll_name_64");
    assert_eq!(
        starter.read_string(u64_at(48)),
        ABORT_MESSAGE,
        "abort_string"
    );
    let table = u64_at(56);
    assert_eq!(u32_at(80), 4, "proctable_size");
    for (i, &pid) in job.rank_pids().iter().enumerate() {
        // MPI2DD_PROCDESC, packed: host, executable, spawn_desc, comm_world_id, pid, rank.
        let entry = starter.read(table + 40 * i as u64, 40);
        let field = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap());
        assert_eq!(
            Path::new(&starter.read_string(field(8))),
            fixtures::fixture(DEBUGQ4).canonicalize().unwrap()
        );
        assert_eq!(field(16), 0, "spawn_desc");
        assert!(
            starter
                .read_string(field(24))
                .starts_with("mqd-fixture-job-")
        );
        assert_eq!(i32::from_le_bytes(entry[32..36].try_into().unwrap()), pid);
        assert_eq!(
            i32::from_le_bytes(entry[36..40].try_into().unwrap()),
            i as i32
        );
    }
    assert!(!starter.symbols.contains_key("MPIR_proctable"));
}

#[test]
fn the_mpir_starter_hands_mpi2dd_over() {
    let mut cmd = Command::new(fixtures::fixture(STARTER));
    cmd.args(["--mpi2dd", "-n", "2", "compute"]);
    let starter = spawn_command(cmd).unwrap();
    let pid = starter.pid();
    wait_until("the starter to exec the MPI2DD starter", || {
        fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe.ends_with(STARTER_MPI2DD))
    });
    let p = Proc::new(pid, STARTER_MPI2DD);
    wait_until("MPI2DD_info.proctable_size", || {
        p.read_i32(p.symbol("MPI2DD_info") + 80) == 2
    });
    // The ranks die with the starter (PR_SET_PDEATHSIG) when the guard kills it.
}

#[test]
fn the_gate_holds_a_rank_until_a_debugger_opens_it() {
    let mut cmd = Command::new(fixtures::fixture(CH4));
    cmd.args(["--scenario", "ring", "--rank", "0", "--size", "2"])
        .env("MQD_WAIT_FOR_GATE", "1")
        .stderr(Stdio::null());
    let mut rank = spawn_command(cmd).unwrap();
    assert!(
        rank.wait_ready(Duration::from_millis(500)).is_err(),
        "READY before the gate opened"
    );
    let p = Proc::new(rank.pid(), CH4);
    assert_eq!(p.read_i32(p.symbol("MPIR_being_debugged")), 1);
    // Nothing built yet.
    assert_eq!(p.read_i32(p.symbol("MPIR_All_communicators")), 0);
    p.write_i32(p.symbol("MPIR_debug_gate"), 1);
    rank.wait_ready(WAIT).unwrap();
    assert_eq!(p.read_i32(p.symbol("MPIR_All_communicators")), 3);
}

#[test]
fn the_freed_scenario_moves_on_at_sigusr1() {
    let mut rank = spawn_rank(DEBUGQ5, "freed", 1, 4).unwrap();
    let p = Proc::new(rank.pid(), DEBUGQ5);
    let list = p.symbol("MPIR_All_communicators");
    assert_eq!(p.read_i32(list), 4);
    rank.signal("USR1").unwrap();
    rank.wait_ready(WAIT).unwrap();
    assert_eq!(p.read_i32(list), 6);
    rank.signal("USR1").unwrap();
    assert!(rank.wait_ready(Duration::from_millis(300)).is_err());
    assert_eq!(p.read_i32(list), 6);
}

#[test]
fn every_rank_names_the_bundled_dll() {
    for binary in RANK_BINARIES {
        let rank = spawn_rank(binary, "compute", 0, 1).unwrap();
        let p = Proc::new(rank.pid(), binary);
        assert_eq!(
            p.read_string(p.symbol("MPIR_dll_name")),
            DLL_PATH,
            "{binary}"
        );
    }
}

// ------------------------------------------------------------------ symbols

fn assert_symbol(symbols: &BTreeMap<String, (char, u64)>, binary: &str, name: &str, kinds: &str) {
    let (kind, _) = symbols
        .get(name)
        .unwrap_or_else(|| panic!("{binary}: no symbol {name}"));
    assert!(
        kinds.contains(*kind),
        "{binary}: {name} is '{kind}', expected one of '{kinds}'"
    );
}

fn assert_no_symbol(symbols: &BTreeMap<String, (char, u64)>, binary: &str, name: &str) {
    assert!(
        !symbols.contains_key(name),
        "{binary}: unexpected symbol {name}"
    );
}

#[test]
fn ranks_have_the_symbols_of_their_layout() {
    for binary in RANK_BINARIES {
        let s = nm(&fixtures::fixture(binary));
        assert_symbol(&s, binary, "MPII_Wait_for_debugger", "T");
        assert_symbol(&s, binary, "MPIR_All_communicators", "BD");
        assert_symbol(&s, binary, "MPIR_Sendq_head", "BD");
        assert_symbol(&s, binary, "MPIR_dll_name", "D");
        assert_symbol(&s, binary, "MPIR_debug_gate", "BD");
        assert_symbol(&s, binary, "MPIR_being_debugged", "BD");
        assert_symbol(&s, binary, "MPIR_debug_state", "BD");
        assert_symbol(&s, binary, "MPIR_debug_abort_string", "BD");
        assert_no_symbol(&s, binary, "MPIR_proctable");
        assert_no_symbol(&s, binary, "MPI2DD_info");
    }
    // Layout A: the head pointers are LOCAL symbols, as in MPICH 4.0.2; so are the heads.
    let s = nm(&fixtures::fixture(CH3));
    assert_symbol(&s, CH3, "MPID_Recvq_posted_head_ptr", "dbr");
    assert_symbol(&s, CH3, "MPID_Recvq_unexpected_head_ptr", "dbr");
    assert_symbol(&s, CH3, "recvq_posted_head", "bd");
    assert_symbol(&s, CH3, "recvq_unexpected_head", "bd");
    assert_no_symbol(&s, CH3, "MPIR_Recvq_head");
    // Layout B: global head pointers into MPIDI_global.
    let s = nm(&fixtures::fixture(CH4));
    assert_symbol(&s, CH4, "MPID_Recvq_posted_head_ptr", "DR");
    assert_symbol(&s, CH4, "MPID_Recvq_unexpected_head_ptr", "DR");
    assert_symbol(&s, CH4, "MPIDI_global", "BD");
    assert_no_symbol(&s, CH4, "MPIR_Recvq_head");
    // Layout C.
    for binary in [DEBUGQ4, DEBUGQ5] {
        let s = nm(&fixtures::fixture(binary));
        assert_symbol(&s, binary, "MPIR_Recvq_head", "BD");
        assert_symbol(&s, binary, "MPIR_Unexpq_head", "BD");
        assert_no_symbol(&s, binary, "MPID_Recvq_posted_head_ptr");
        assert_no_symbol(&s, binary, "MPID_Recvq_unexpected_head_ptr");
    }
}

#[test]
fn starters_have_the_acquisition_symbols() {
    let s = nm(&fixtures::fixture(STARTER));
    for name in [
        "MPIR_proctable",
        "MPIR_proctable_size",
        "MPIR_debug_state",
        "MPIR_being_debugged",
        "MPIR_debug_abort_string",
        "MPIR_i_am_starter",
        "MPIR_partial_attach_ok",
        "MPIR_breakpointFn",
    ] {
        assert_symbol(&s, STARTER, name, "BD");
    }
    assert_symbol(&s, STARTER, "MPIR_Breakpoint", "T");
    assert_no_symbol(&s, STARTER, "MPI2DD_info");
    assert_no_symbol(&s, STARTER, "MPIR_dll_name");

    let s = nm(&fixtures::fixture(STARTER_MPI2DD));
    assert_symbol(&s, STARTER_MPI2DD, "MPI2DD_info", "D");
    assert_symbol(&s, STARTER_MPI2DD, "MPI2DD_breakpoint", "T");
    for name in [
        "MPIR_proctable",
        "MPIR_proctable_size",
        "MPIR_Breakpoint",
        "MPIR_debug_state",
    ] {
        assert_no_symbol(&s, STARTER_MPI2DD, name);
    }

    let s = nm(&fixtures::fixture(PLAIN));
    assert!(
        !s.keys().any(|k| k.starts_with("MPI")),
        "plain has MPI symbols: {s:?}"
    );
}

#[test]
fn stripped_copies_lack_what_they_should() {
    let full = sections(&fixtures::fixture(DEBUGQ5));
    assert!(full.contains(".debug_info"));
    assert!(full.contains(".symtab"));

    let no_debug = sections(&fixtures::fixture(STRIPPED_DEBUG));
    assert!(!no_debug.contains(".debug_info"));
    assert!(no_debug.contains(".symtab"));
    assert_symbol(
        &nm(&fixtures::fixture(STRIPPED_DEBUG)),
        STRIPPED_DEBUG,
        "MPIR_Recvq_head",
        "B",
    );

    let nothing = sections(&fixtures::fixture(STRIPPED_ALL));
    assert!(!nothing.contains(".debug_info"));
    assert!(!nothing.contains(".symtab"));
    assert!(!nm(&fixtures::fixture(STRIPPED_ALL)).contains_key("MPIR_Recvq_head"));

    let linked = sections(&fixtures::fixture(DEBUGLINK));
    assert!(!linked.contains(".debug_info"));
    assert!(linked.contains(".gnu_debuglink"));
    let debug_file = sections(&fixtures::dir().join("mqd-fixture-debugq5-debuglink.debug"));
    assert!(debug_file.contains(".debug_info"));

    let dwarf = Command::new("readelf")
        .arg("--debug-dump=info")
        .arg(fixtures::fixture(CH4_DWARF4))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dwarf.stdout);
    let versions: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Version:"))
        .map(str::trim)
        .collect();
    assert_eq!(
        versions,
        BTreeSet::from(["4"]),
        "DWARF versions of {CH4_DWARF4}"
    );
}

// ------------------------------------------------------------------ DWARF types (gdb)

fn gdb_available() -> bool {
    Command::new("gdb")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Evaluates each expression with `gdb -batch` on `binary`; `Err(message)` for each that
/// gdb refused.
fn gdb_eval(binary: &Path, exprs: &[&str]) -> Vec<Result<String, String>> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx"]);
    for (i, e) in exprs.iter().enumerate() {
        cmd.arg("-ex").arg(format!("echo <<{i}>>\\n"));
        cmd.arg("-ex").arg(format!("print {e}"));
    }
    cmd.arg(binary);
    let out = cmd.stderr(Stdio::piped()).output().expect("gdb runs");
    // gdb writes errors to stderr and values to stdout; merge them by the markers.
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut results = vec![Err("no output".to_owned()); exprs.len()];
    let mut current: Option<usize> = None;
    for line in stdout.lines() {
        if let Some(i) = line.strip_prefix("<<").and_then(|l| l.strip_suffix(">>")) {
            current = i.parse().ok();
        } else if let (Some(i), Some(value)) = (current, line.split_once(" = ")) {
            results[i] = Ok(value.1.to_owned());
        }
    }
    results
}

/// `offsetof`-style expressions that must resolve, plus `sizeof`s with expected values.
fn check_types(binary: &str, must_resolve: &[&str], sizes: &[(&str, u64)], absent: &[&str]) {
    let path = fixtures::fixture(binary);
    let resolve: Vec<String> = must_resolve
        .iter()
        .map(|e| match e.split_once("::") {
            // "Type::a.b" -> offset of a.b in Type
            Some((ty, field)) => format!("(long)&(({ty} *)0)->{field}"),
            None => format!("sizeof({e})"),
        })
        .collect();
    let mut exprs: Vec<&str> = resolve.iter().map(String::as_str).collect();
    let size_exprs: Vec<String> = sizes.iter().map(|(t, _)| format!("sizeof({t})")).collect();
    exprs.extend(size_exprs.iter().map(String::as_str));
    let absent_exprs: Vec<String> = absent.iter().map(|t| format!("sizeof({t})")).collect();
    exprs.extend(absent_exprs.iter().map(String::as_str));

    let results = gdb_eval(&path, &exprs);
    for (e, r) in must_resolve.iter().zip(&results) {
        assert!(r.is_ok(), "{binary}: gdb cannot resolve {e}");
    }
    for ((ty, want), r) in sizes.iter().zip(&results[must_resolve.len()..]) {
        assert_eq!(
            r.as_deref().map(|v| v.trim().parse::<u64>().ok()),
            Ok(Some(*want)),
            "{binary}: sizeof({ty})"
        );
    }
    for (ty, r) in absent
        .iter()
        .zip(&results[must_resolve.len() + sizes.len()..])
    {
        assert!(r.is_err(), "{binary}: type {ty} should not exist");
    }
}

/// What the DLL asks for in every layout.
const COMMON: &[&str] = &[
    "MPIR_Comm_list::sequence_number",
    "MPIR_Comm_list::head",
    "MPIR_Comm::handle",
    "MPIR_Comm::name",
    "MPIR_Comm::comm_next",
    "MPIR_Comm::rank",
    "MPIR_Comm::local_size",
    "MPIR_Comm::remote_size",
    "MPIR_Comm::context_id",
    "MPIR_Comm::recvcontext_id",
    "MPIR_Comm::comm_kind",
    "MPIR_Comm::local_group",
    "MPIR_Comm::remote_group",
    "MPIR_Comm::dev",
    "struct MPIR_Comm::name",
    "MPIR_Request::handle",
    "MPIR_Request::kind",
    "MPIR_Request::cc",
    "MPIR_Request::status.MPI_SOURCE",
    "MPIR_Request::status.MPI_TAG",
    "MPIR_Request::next",
    "MPIR_Request::dev",
    "MPI_Status::count_lo",
    "MPI_Status::count_hi_and_cancelled",
    "MPI_Status::MPI_ERROR",
    "MPIR_Group::handle",
    "MPIR_Group::ref_count",
    "MPIR_Group::size",
    "MPIR_Group::rank",
    "MPIR_Context_id_t",
];

const LRANK_GROUPS: &[&str] = &[
    "MPIR_Group::idx_of_first_lpid",
    "MPIR_Group::lrank_to_lpid",
    "MPII_Group_pmap_t::lpid",
    "MPII_Group_pmap_t::next_lpid",
];

const SENDQ: &[&str] = &[
    "MPIR_Sendq::sreq",
    "MPIR_Sendq::tag",
    "MPIR_Sendq::rank",
    "MPIR_Sendq::context_id",
    "MPIR_Sendq::next",
    "MPIR_Sendq::prev",
];

const DEBUGQ: &[&str] = &[
    "MPIR_Debugq::req",
    "MPIR_Debugq::tag",
    "MPIR_Debugq::rank",
    "MPIR_Debugq::context_id",
    "MPIR_Debugq::buf",
    "MPIR_Debugq::count",
    "MPIR_Debugq::next",
    "MPIR_Debugq::prev",
    "MPIR_Request::send",
    "MPIR_Request::recv",
    "MPIR_Request::unexp",
];

#[test]
fn dwarf_has_the_types_of_each_layout() {
    if !gdb_available() {
        eprintln!("gdb is not installed: DWARF type checks skipped");
        return;
    }
    let ch3: Vec<&str> = [
        COMMON,
        LRANK_GROUPS,
        SENDQ,
        &[
            "MPIDI_Request::match.parts.tag",
            "MPIDI_Request::match.parts.rank",
            "MPIDI_Request::match.parts.context_id",
            "MPIDI_Request::user_buf",
            "MPIDI_Request::user_count",
            "MPIDI_Request::datatype",
            "MPIDI_Request::recv_data_sz",
            "MPIDI_Request::next",
            "MPIDI_Message_match::parts",
            "MPIDI_Message_match::whole",
            "MPIDI_Message_match_parts_t::tag",
            "MPIDI_Message_match_parts_t::rank",
            "MPIDI_Message_match_parts_t::context_id",
            "MPIR_Request::dev.match.parts.context_id",
            "MPIDI_CH3I_comm_t::vcrt",
            "MPIDI_CH3I_comm_t::local_vcrt",
            "struct MPIDI_VCRT::size",
            "struct MPIDI_VCRT::vcr_table",
            "MPIDI_VC_t::lpid",
            "MPIDI_VC_t::pg_rank",
            "MPIR_Comm::dev.vcrt",
        ],
    ]
    .concat();
    check_types(
        CH3,
        &ch3,
        &[
            ("MPIR_Context_id_t", 2),
            ("MPIDI_Rank_t", 2),
            ("MPII_Group_pmap_t", 8),
            ("MPI_Aint", 8),
            ("MPI_Status", 20),
            ("MPIDI_Message_match", 8),
        ],
        &["MPIR_Debugq", "MPIDI_Devreq_t", "struct MPIR_Pmap"],
    );

    let ch4: Vec<&str> = [
        COMMON,
        LRANK_GROUPS,
        SENDQ,
        &[
            "MPIDI_Devreq_t::ch4",
            "MPIDI_Devreq_t::ch4.am",
            "MPIDI_Devreq_t::is_local",
            "MPIDI_Devreq_t::anysource_partner_request",
            "MPIDIG_req_t::buffer",
            "MPIDIG_req_t::count",
            "MPIDIG_req_t::datatype",
            "MPIDIG_req_t::u",
            "MPIDIG_req_t::u.recv.source",
            "MPIDIG_req_t::u.recv.context_id",
            "MPIDIG_req_t::u.recv.tag",
            "MPIDIG_req_t::u.send.dest",
            "MPIR_Request::dev.ch4.am.u.recv.tag",
            "MPIDI_Devcomm_t::ch4.map",
            "MPIDI_Devcomm_t::ch4.local_map",
            "MPIDI_rank_map_t::mode",
            "MPIDI_rank_map_t::avtid",
            "MPIDI_rank_map_t::size",
            "MPIDI_rank_map_t::reg.offset",
            "MPIDI_rank_map_t::reg.stride.stride",
            "MPIDI_rank_map_t::reg.stride.blocksize",
            "MPIDI_rank_map_t::irreg.lut.lpid",
            "MPIDI_per_vci_t::posted_list",
            "MPIDI_per_vci_t::unexp_list",
            "MPIDI_CH4_Global_t::per_vci",
        ],
    ]
    .concat();
    for binary in [CH4, CH4_DWARF4] {
        check_types(
            binary,
            &ch4,
            &[
                ("MPIR_Context_id_t", 2),
                ("MPII_Group_pmap_t", 8),
                ("MPI_Aint", 8),
            ],
            &["MPIR_Debugq", "MPIDI_Request", "struct MPIR_Pmap"],
        );
    }

    let debugq4: Vec<&str> = [COMMON, LRANK_GROUPS, DEBUGQ].concat();
    check_types(
        DEBUGQ4,
        &debugq4,
        &[
            ("MPIR_Context_id_t", 2),
            ("MPII_Group_pmap_t", 16),
            ("MPIR_Debugq", 56),
            ("MPI_Aint", 8),
        ],
        &[
            "MPIR_Sendq",
            "MPIDI_Request",
            "struct MPIR_Pmap",
            "MPIR_Lpid",
        ],
    );

    let debugq5: Vec<&str> = [
        COMMON,
        DEBUGQ,
        &[
            "MPIR_Group::pmap",
            "MPIR_Group::pmap.use_map",
            "MPIR_Group::pmap.u.map",
            "MPIR_Group::pmap.u.stride.offset",
            "MPIR_Group::pmap.u.stride.stride",
            "MPIR_Group::session_ptr",
            "struct MPIR_Pmap::use_map",
            "struct MPIR_Pmap::u",
            "MPIR_Comm::session_ptr",
        ],
    ]
    .concat();
    check_types(
        DEBUGQ5,
        &debugq5,
        &[
            ("MPIR_Context_id_t", 4),
            ("MPIR_Lpid", 8),
            ("MPIR_Debugq", 56),
            ("MPI_Aint", 8),
        ],
        &["MPIR_Sendq", "MPIDI_Request", "MPII_Group_pmap_t"],
    );

    // The debuglink copy's types are in its .debug file.
    check_types(
        DEBUGLINK,
        &["MPIR_Debugq::count"],
        &[("MPIR_Debugq", 56)],
        &[],
    );
    // No DWARF at all.
    check_types(STRIPPED_DEBUG, &[], &[], &["MPIR_Debugq", "MPIR_Comm"]);
}

#[test]
fn mpir_types_are_described_for_the_debugger() {
    if !gdb_available() {
        eprintln!("gdb is not installed: DWARF type checks skipped");
        return;
    }
    check_types(
        STARTER,
        &[
            "MPIR_PROCDESC::host_name",
            "MPIR_PROCDESC::executable_name",
            "MPIR_PROCDESC::pid",
            "MPIR_proctable",
        ],
        &[("MPIR_PROCDESC", 24)],
        &["struct MPI2DD_INFO"],
    );
    check_types(
        STARTER_MPI2DD,
        &[
            "struct MPI2DD_INFO::dll_name_64",
            "struct MPI2DD_INFO::proctable",
            "struct MPI2DD_PROCDESC::rank",
            "MPI2DD_info",
        ],
        &[("struct MPI2DD_INFO", 128), ("struct MPI2DD_PROCDESC", 40)],
        &["MPIR_PROCDESC"],
    );
}
