//! MPICH's own test client of the MQD interface, `tvtest` with its stub debugger `dbgstub`
//! (objects kept with the cached MPICH by `scripts/real-mpich`), linked once with MPICH's
//! `libtvmpich.so` and once with ours, each run under `mpiexec -n 2`.
//!
//! tvtest is its own debugger: it answers only the types, fields and symbols MPICH's library
//! asks for, passes no `sizeof`, and prints "Panic!" for anything else. Per rank and per
//! stage (the three displays of tvtest), ours must list every communicator and every entry
//! MPICH's library lists, and what tvtest itself says it expects; no "Panic!", "Failed" or
//! "Error" line may come from ours.
//!
//! The two runs are separate jobs, so a message in flight may be in a queue in one and
//! already matched in the other. Only these entries may differ, and they are named:
//! stage 1, the neighbour's tag-18 message arriving early (unexpected); stage 3, the tag-19
//! receive whose message tvtest sends just before the display.

use crate::*;
use std::collections::BTreeSet;

const TVTEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds tvtest against `m` and the library `dll`, in `dir`.
fn link_tvtest(m: &Mpich, dir: &Path, name: &str, dll: &Path) -> PathBuf {
    let sources = m.tvtest_sources();
    let object = dir.join("tvtest.o");
    if !object.exists() {
        let cc = Command::new(m.prefix.join("bin/mpicc"))
            .args(["-g", "-w", "-c", "-o"])
            .arg(&object)
            .arg(sources.join("tvtest.c"))
            .arg("-I")
            .arg(&sources)
            .output()
            .expect("run mpicc");
        assert!(
            cc.status.success(),
            "mpicc tvtest.c: {}",
            String::from_utf8_lossy(&cc.stderr)
        );
    }
    let exe = dir.join(name);
    let lib_dir = dll.parent().expect("library directory");
    let file = dll.file_name().expect("library file").to_string_lossy();
    // MPICH 4.0.2's queue heads are local symbols of libmpi.so: tvtest links libmpi.a.
    let ld = Command::new("gcc")
        .arg("-o")
        .arg(&exe)
        .arg(&object)
        .arg(sources.join("dbgstub.o"))
        .arg(m.prefix.join("lib/libmpi.a"))
        .arg(format!("-L{}", lib_dir.display()))
        .arg(format!("-l:{file}"))
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .args(m.static_libs())
        .output()
        .expect("run gcc");
    assert!(
        ld.status.success(),
        "linking {name}: {}",
        String::from_utf8_lossy(&ld.stderr)
    );
    exe
}

/// One entry as tvtest prints it, with where it was listed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    stage: usize,
    comm: String,
    class: &'static str,
    tag: i64,
    rank: i64,
    length: i64,
}

/// What one rank's tvtest printed, display by display.
#[derive(Debug, Default)]
struct Displays {
    /// Communicator names per stage (unnamed ones as "").
    comms: Vec<Vec<String>>,
    entries: BTreeSet<Listed>,
    /// Lines saying something went wrong.
    complaints: Vec<String>,
    version: Option<String>,
}

fn parse(stdout: &str, stderr: &str) -> Displays {
    let mut d = Displays::default();
    let mut comm = String::new();
    let mut class = "";
    for line in stdout.lines().chain(stderr.lines()) {
        let field = |prefix: &str| line.strip_prefix(prefix).map(str::to_owned);
        if line.starts_with("Should see pending recv") || line.starts_with("After a few") {
            d.comms.push(Vec::new());
        } else if let Some(name) = field("Communicator ") {
            comm = if name == "--unnamed--" {
                String::new()
            } else {
                name
            };
            if let Some(stage) = d.comms.last_mut() {
                stage.push(comm.clone());
            }
        } else if line.starts_with("Communicator") {
            comm = String::new();
            if let Some(stage) = d.comms.last_mut() {
                stage.push(String::new());
            }
        } else if line.starts_with("Pending receives for") {
            class = "receive";
        } else if line.starts_with("Unexpected messages for") {
            class = "unexpected";
        } else if line.starts_with("Pending sends for") {
            class = "send";
        } else if let Some(rest) = field("tag = ") {
            let numbers: Vec<i64> = rest
                .split(|c: char| !(c.is_ascii_digit() || c == '-'))
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [tag, rank, length] = numbers[..] {
                d.entries.insert(Listed {
                    stage: d.comms.len(),
                    comm: comm.clone(),
                    class,
                    tag,
                    rank,
                    length,
                });
            } else {
                d.complaints.push(format!("unparsed: {line}"));
            }
        } else if let Some(v) = field("Version string: ") {
            d.version = Some(v);
        } else if ["Panic", "Failed", "Error", "Unknown return", "Unexpected"]
            .iter()
            .any(|w| line.starts_with(w))
        {
            d.complaints.push(line.to_owned());
        }
    }
    d
}

/// Runs `exe` under `mpiexec -n 2`, each rank's output in files of its own.
fn run_tvtest(m: &Mpich, dir: &Path, exe: &Path) -> Vec<Displays> {
    let tag = exe
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut cmd = Command::new(m.mpiexec());
    cmd.arg("-outfile-pattern")
        .arg(dir.join(format!("{tag}.out.%r")))
        .arg("-errfile-pattern")
        .arg(dir.join(format!("{tag}.err.%r")))
        .args(["-n", "2"])
        .arg(exe)
        .current_dir(dir);
    let run = real_mpich::run(cmd, TVTEST_TIMEOUT);
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{}: {:?} after {:?}\n{}",
        run.what,
        run.status,
        run.elapsed,
        run.stderr
    );
    (0..2)
        .map(|r| {
            let read = |kind: &str| {
                std::fs::read_to_string(dir.join(format!("{tag}.{kind}.{r}"))).unwrap_or_default()
            };
            parse(&read("out"), &read("err"))
        })
        .collect()
}

/// Entries in flight when tvtest displays, listed or not depending on timing.
fn racy(e: &Listed) -> bool {
    (e.stage == 1 && e.class == "unexpected" && e.tag == 18)
        || (e.stage == 3 && e.class == "receive" && e.tag == 19)
}

pub(crate) fn tvtest_lists_what_mpich_lists(device: Device) {
    let m = mpich(device);
    let scratch = Scratch::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "tvtest-{}-{}",
        device.name(),
        std::process::id()
    )));
    let dir = scratch.0.clone();
    let theirs = link_tvtest(m, &dir, "tvtest-mpich", &m.tvmpich());
    let ours_exe = link_tvtest(m, &dir, "tvtest-mqd", &ours());
    let theirs = run_tvtest(m, &dir, &theirs);
    let ours = run_tvtest(m, &dir, &ours_exe);
    let mut failures = Vec::new();
    for rank in 0..2 {
        let (t, o) = (&theirs[rank], &ours[rank]);
        let ctx = format!("{} rank {rank}", device.name());
        eprintln!(
            "{ctx}: MPICH's library listed {} entries, ours {}; communicators per stage {:?} / {:?}",
            t.entries.len(),
            o.entries.len(),
            t.comms.iter().map(Vec::len).collect::<Vec<_>>(),
            o.comms.iter().map(Vec::len).collect::<Vec<_>>()
        );
        if !o.version.as_deref().is_some_and(|v| v.starts_with("mqd ")) {
            failures.push(format!("{ctx}: tvtest did not load ours: {:?}", o.version));
        }
        if !o.complaints.is_empty() {
            failures.push(format!("{ctx}: ours: {:?}", o.complaints));
        }
        // MPICH's own run is the baseline: it must have worked.
        if !t.complaints.is_empty() || t.comms.len() != 3 {
            failures.push(format!(
                "{ctx}: MPICH's run is no baseline: {:?}, {} stages",
                t.complaints,
                t.comms.len()
            ));
        }
        if o.comms.len() != 3 {
            failures.push(format!("{ctx}: ours showed {} stages", o.comms.len()));
            continue;
        }
        for (stage, (tc, oc)) in t.comms.iter().zip(&o.comms).enumerate() {
            let mut missing = oc.clone();
            for name in tc {
                match missing.iter().position(|n| n == name) {
                    Some(i) => {
                        missing.remove(i);
                    }
                    None => failures.push(format!(
                        "{ctx}: stage {}: communicator {name:?} listed by MPICH's library, not ours ({oc:?})",
                        stage + 1
                    )),
                }
            }
        }
        let peer = 1 - rank as i64;
        let dup = "Dup of comm world";
        let expected = [
            (1, dup, "receive", 17, 1),
            (1, dup, "receive", 19, 10),
            (1, "MPI_COMM_WORLD", "send", 18, 1),
            (2, dup, "receive", 19, 10),
        ];
        for (stage, comm, class, tag, length) in expected {
            let want = Listed {
                stage,
                comm: comm.to_owned(),
                class,
                tag,
                rank: peer,
                length,
            };
            if !t.entries.contains(&want) {
                failures.push(format!("{ctx}: MPICH's library did not list {want:?}"));
            }
            if !o.entries.contains(&want) {
                failures.push(format!("{ctx}: ours did not list {want:?}"));
            }
        }
        for e in t.entries.difference(&o.entries) {
            if racy(e) {
                eprintln!("{ctx}: in flight in MPICH's run only: {e:?}");
            } else {
                failures.push(format!("{ctx}: MPICH's library listed {e:?}, ours did not"));
            }
        }
        for e in o.entries.difference(&t.entries) {
            eprintln!("{ctx}: listed by ours only: {e:?}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
