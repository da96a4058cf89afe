//! Damaged, truncated, foreign and mutated core files: clear one-line errors, never a crash.

use crate::*;

// -------------------------------------------------------------------- damaged cores

/// `(p_offset, p_filesz)` of the PT_NOTE segment of an x86-64 core.
pub(crate) fn notes_range(core: &[u8]) -> (usize, usize) {
    let u16_at = |at: usize| u16::from_le_bytes(core[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(core[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(core[at..at + 8].try_into().unwrap()) as usize;
    let (phoff, phnum) = (u64_at(32), u16_at(56));
    (0..phnum)
        .map(|i| phoff + 56 * i)
        .find(|&ph| u32_at(ph) == 4)
        .map(|ph| (u64_at(ph + 8), u64_at(ph + 32)))
        .expect("the core has a PT_NOTE segment")
}

/// Offset in the core of the header of the first note of type `n_type`.
pub(crate) fn find_note(core: &[u8], n_type: u32) -> Option<usize> {
    let (start, size) = notes_range(core);
    let u32_at = |at: usize| u32::from_le_bytes(core[at..at + 4].try_into().unwrap()) as usize;
    let pad = |n: usize| (n + 3) & !3;
    let mut at = start;
    while at + 12 <= start + size {
        if u32_at(at + 8) == n_type as usize {
            return Some(at);
        }
        at += 12 + pad(u32_at(at)) + pad(u32_at(at + 4));
    }
    None
}

pub(crate) const NT_FILE: u32 = 0x4649_4c45;

/// The first rank of a job cored by gcore and by the kernel.
pub(crate) struct Cored {
    pub(crate) _job: Job,
    pub(crate) gcore: PathBuf,
    pub(crate) kernel: PathBuf,
}

pub(crate) fn cored(program: &Path, scenario: &str, size: i32) -> Cored {
    let mut job = Job::spawn(program, scenario, size);
    let pids = job.pids();
    let what = job.what.clone();
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcore = gcores(&pids, &gdb_dir, &what).remove(0);
    let kernel = kernel_cores(&mut job.ranks, &what).remove(0);
    Cored {
        _job: job,
        gcore,
        kernel,
    }
}

pub(crate) fn open_error(path: &Path) -> String {
    match CoreFile::open(path) {
        Ok(core) => panic!("{} opened: {core:?}", path.display()),
        Err(e) => e.to_string(),
    }
}

/// The error of a dump of queues only (with stacks, a core whose queues cannot be read
/// is still dumped: its rank says why, beside its stack).
pub(crate) fn dump_error(path: &Path) -> String {
    let mut context = JobContext::new(Acquisition::Core);
    context.stacks = false;
    match dump::dump_cores(
        dump::open_cores(&[path.to_owned()], None, context.type_cache.as_deref()),
        None,
        &context,
    ) {
        Ok(job) => panic!("{} dumped: {}", path.display(), to_json(&job)),
        Err(f) => f.to_string(),
    }
}

#[test]
pub(crate) fn truncated_corrupt_and_foreign_files_give_one_clear_error() {
    let program = fixtures::fixture(fixtures::DEBUGQ5);
    let cored = cored(&program, "ring", 1);
    let dir = TempDir::new("damaged");
    for (kind, core) in [("gcore", &cored.gcore), ("kernel", &cored.kernel)] {
        let bytes = std::fs::read(core).unwrap();
        let ok = CoreFile::open(core).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(
            ok.pid().is_some() && ok.has_file_mappings(),
            "{kind}: {ok:?}"
        );

        // Cut in half.
        let cut = dir.path().join(format!("{kind}.cut"));
        let half = bytes.len() / 2;
        std::fs::write(&cut, &bytes[..half]).unwrap();
        let (notes_start, notes_size) = notes_range(&bytes);
        if notes_start + notes_size > half {
            // The notes are cut: nothing says which process it was.
            let e = open_error(&cut);
            assert!(
                e.starts_with("truncated core file: notes segment")
                    && e.contains(&format!("file has {half}")),
                "{kind}: {e}"
            );
            assert!(!e.contains('\n'), "{kind}: one line: {e}");
            assert_eq!(dump_error(&cut), e, "{kind}");
        } else {
            // The notes are whole: read as far as it goes (as gdb does), the rest named
            // and unreadable.
            let core = CoreFile::open(&cut).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let missing = core.missing_ranges();
            assert!(!missing.is_empty(), "{kind}: {core:?}");
            let (start, end) = missing[0];
            let mut word = [0u8; 8];
            let e = core.read_memory(start, &mut word).unwrap_err().to_string();
            assert!(e.contains("cut short"), "{kind}: {e}");
            assert!(core.read_memory(end - 8, &mut word).is_err(), "{kind}");
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_mqd"))
                .arg("core")
                .arg(&cut)
                .output()
                .expect("run mqd");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains(&format!("the core file was cut short: {start:#x}-{end:#x}")),
                "{kind}: {stderr}"
            );
        }

        // Garbage over the notes.
        let (start, size) = notes_range(&bytes);
        let mut garbage = bytes.clone();
        let mut x = 0x9e37_79b9u32;
        for b in &mut garbage[start..start + size] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        let path = dir.path().join(format!("{kind}.garbage"));
        std::fs::write(&path, &garbage).unwrap();
        let e = open_error(&path);
        assert!(
            e.starts_with(&format!(
                "corrupt notes in core file {}: note 0",
                path.display()
            )),
            "{kind}: {e}"
        );
        assert_eq!(dump_error(&path), e, "{kind}");

        // An NT_FILE whose count does not fit.
        let at = find_note(&bytes, NT_FILE).expect("NT_FILE");
        let namesz = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let desc = at + 12 + ((namesz + 3) & !3);
        let mut bad = bytes.clone();
        bad[desc..desc + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let path = dir.path().join(format!("{kind}.ntfile"));
        std::fs::write(&path, &bad).unwrap();
        let e = open_error(&path);
        assert!(
            e.starts_with("corrupt notes in core file") && e.contains("NT_FILE"),
            "{kind}: {e}"
        );

        // Random damage to the headers and notes: an error or a core, never a panic.
        let mut seed = 0x2545_f491_4f6c_dd1du64 ^ bytes.len() as u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let path = dir.path().join(format!("{kind}.mutant"));
        let mut opened = 0;
        for i in 0..150 {
            let mut m = bytes.clone();
            for _ in 0..(next() % 6 + 1) {
                let at = if next() % 2 == 0 {
                    (next() as usize) % 0x1000.min(m.len())
                } else {
                    start + (next() as usize) % size
                };
                m[at] = next() as u8;
            }
            std::fs::write(&path, &m).unwrap();
            if let Ok(target) = CoreTarget::open(&path, None) {
                opened += 1;
                let mut buf = [0u8; 64];
                for addr in [
                    0u64,
                    fixtures::ARENA,
                    target.find_symbol("MPIR_All_communicators").unwrap_or(8),
                ] {
                    let _ = target.read_memory(addr, &mut buf);
                }
                if i % 10 == 0 {
                    let context = JobContext::new(Acquisition::Core);
                    let cores = dump::open_cores(
                        std::slice::from_ref(&path),
                        None,
                        mqd_debuginfo::memo::default_directory().as_deref(),
                    );
                    let _ = dump::dump_cores(cores, None, &context);
                }
            }
        }
        eprintln!("{kind}: {opened} of 150 damaged cores still opened");
    }

    // Not a core at all.
    let text = dir.path().join("text");
    std::fs::write(&text, "this is not a core file\n").unwrap();
    assert_eq!(
        open_error(&text),
        format!(
            "not an ELF core file: {} is not an ELF file",
            text.display()
        )
    );
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    assert!(open_error(&empty).starts_with("not an ELF core file"));
    let e = open_error(&program);
    assert!(
        e.starts_with(&format!("not an ELF core file: {} is a", program.display()))
            && e.contains("e_type"),
        "{e}"
    );
    assert_eq!(dump_error(&program), e);
    let missing = dir.path().join("no-such-core");
    assert!(
        open_error(&missing).starts_with(&format!("cannot read core file {}", missing.display()))
    );
    assert!(open_error(dir.path()).starts_with("cannot read core file"));
}

#[test]
pub(crate) fn core_without_file_mappings_needs_the_executable() {
    let program = fixtures::fixture(fixtures::CH4);
    let mut job = Job::spawn(&program, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, NT_FILE removed", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcores = gcores(&pids, &gdb_dir, &what);
    let kernel = kernel_cores(&mut job.ranks, &what);
    for (kind, cores) in [("gcore", gcores), ("kernel", kernel)] {
        let what = format!("{what} ({kind})");
        let stripped: Vec<PathBuf> = cores
            .iter()
            .map(|core| {
                let mut bytes = std::fs::read(core).unwrap();
                let at = find_note(&bytes, NT_FILE).expect("NT_FILE");
                bytes[at + 8..at + 12].copy_from_slice(&0x4e4f_4e45u32.to_le_bytes());
                let path = PathBuf::from(format!("{}.nofile", core.display()));
                std::fs::write(&path, bytes).unwrap();
                path
            })
            .collect();
        let core = CoreFile::open(&stripped[0]).unwrap();
        assert!(!core.has_file_mappings(), "{what}");
        let e = dump_error(&stripped[0]);
        assert!(
            e.contains("lacks file mappings") && e.contains("--exe"),
            "{what}: {e}"
        );
        let target = CoreTarget::open(&stripped[0], Some(&program))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let objects: Vec<PathBuf> = target.space.objects().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            objects.first(),
            Some(&program),
            "{what}: objects {objects:?}"
        );
        assert!(
            objects
                .iter()
                .any(|p| p.to_string_lossy().contains("libc.so")),
            "{what}: libc through link_map: {objects:?}"
        );
        let doc = core_dump(&stripped, Some(&program), &what);
        assert_same(&live, &doc, &stripped, Some(&program), &what);
    }
}

#[test]
pub(crate) fn moved_executable_is_missing_until_given() {
    let dir = TempDir::new("moved");
    let original = dir.path().join("mqd-fixture-copy");
    std::fs::copy(fixtures::fixture(fixtures::CH3), &original).unwrap();
    let mut job = Job::spawn(&original, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, moved", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcores = gcores(&pids, &gdb_dir, &what);
    let kernel = kernel_cores(&mut job.ranks, &what);
    let moved = dir.path().join("moved-away");
    std::fs::rename(&original, &moved).unwrap();
    for (kind, cores) in [("gcore", &gcores), ("kernel", &kernel)] {
        let what = format!("{what} ({kind})");
        let target = CoreTarget::open(&cores[0], None).unwrap_or_else(|e| panic!("{what}: {e}"));
        let warnings = target.warnings();
        assert!(
            warnings.iter().any(|w| w
                .starts_with(&format!("{} (mapped at 0x", original.display()))
                && w.contains("is missing")),
            "{what}: {warnings:?}"
        );
        let e = dump_error(&cores[0]);
        assert!(
            e.contains("is missing") && e.contains("--exe"),
            "{what}: {e}"
        );
        let doc = core_dump(cores, Some(&moved), &what);
        assert_same(&live, &doc, cores, Some(&moved), &what);
        let target = CoreTarget::open(&cores[0], Some(&moved)).unwrap();
        assert_eq!(target.warnings(), Vec::<String>::new(), "{what}");
    }
    // Another program given as --exe: refused, its symbols would be read over another
    // program's memory (the build-ids differ).
    std::fs::copy(fixtures::fixture(fixtures::DEBUGQ5), &moved).unwrap();
    for core in [&gcores[0], &kernel[0]] {
        let e = CoreTarget::open(core, Some(&moved))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("it is not the program the core ran") && e.contains("build-id"),
            "{}: {e}",
            core.display()
        );
    }
}

/// Every readable file-backed mapping and the fixture's arena read the same from the
/// cores as from the process: the pages the dumpers left out (code and constants of the
/// program and of libc) come from the mapped files.
#[test]
pub(crate) fn core_memory_is_the_process_memory() {
    use std::os::unix::fs::FileExt;
    let program = fixtures::fixture(fixtures::DEBUGQ4);
    let mut job = Job::spawn(&program, "wildcards", 1);
    let pid = job.pids()[0];
    let what = format!("{}, memory", job.what);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let maps = mqd_debuginfo::parse_proc_maps(&maps);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let ranges: Vec<(u64, u64, String, Vec<u8>)> = maps
        .iter()
        .filter(|m| m.perms.starts_with('r'))
        .filter(|m| m.start == fixtures::ARENA || m.path.as_deref().is_some_and(Path::is_absolute))
        .map(|m| {
            let mut bytes = vec![0u8; (m.end - m.start) as usize];
            mem.read_exact_at(&mut bytes, m.start)
                .unwrap_or_else(|e| panic!("{what}: read {m:?}: {e}"));
            let name = m
                .path
                .as_ref()
                .map_or("arena".into(), |p| format!("{} {}", p.display(), m.perms));
            (m.start, m.end, name, bytes)
        })
        .collect();
    assert!(
        ranges
            .iter()
            .any(|r| r.2.contains("libc.so") && r.2.ends_with("r-xp")),
        "{what}: libc's code is mapped: {maps:?}"
    );
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let gcore = gcores(&[pid], &gdb_dir, &what).remove(0);
    let kernel = kernel_cores(&mut job.ranks, &what).remove(0);
    for (kind, core) in [("gcore", gcore), ("kernel", kernel)] {
        let core = CoreFile::open(&core).unwrap();
        let mut from_files = 0;
        for (start, end, name, bytes) in &ranges {
            let mut got = vec![0u8; bytes.len()];
            core.read_memory(*start, &mut got)
                .unwrap_or_else(|e| panic!("{what} ({kind}): {start:#x}-{end:#x} {name}: {e}"));
            if let Some(i) = got.iter().zip(bytes).position(|(a, b)| a != b) {
                panic!(
                    "{what} ({kind}): {start:#x}-{end:#x} {name}: byte {:#x} differs",
                    *start + i as u64
                );
            }
            let dumped: u64 = core
                .segments()
                .iter()
                .filter(|s| s.vaddr < *end && s.end() > *start)
                .map(|s| s.filesz.min(end - s.vaddr.max(*start)))
                .sum();
            if dumped < end - start {
                from_files += 1;
            }
        }
        assert!(
            from_files > 0,
            "{what} ({kind}): some mapping is read from its file"
        );
        eprintln!(
            "{what} ({kind}): {} ranges equal, {from_files} of them read (partly) from the mapped files",
            ranges.len()
        );
    }
}

/// 100 000 posted receives per rank: the same from a core as live, and how long each took.
#[test]
pub(crate) fn big_queues_from_cores() {
    let program = fixtures::fixture(fixtures::DEBUGQ5);
    let job = Job::spawn(&program, "big", 2);
    let pids = job.pids();
    let what = job.what.clone();
    let start = Instant::now();
    let live = live_dump(&pids, &what);
    let live_time = start.elapsed();
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let cores = gcores(&pids, &gdb_dir, &what);
    let start = Instant::now();
    let doc = core_dump(&cores, None, &what);
    let core_time = start.elapsed();
    for rank in doc["ranks"].as_array().unwrap() {
        let receives = rank["communicators"][0]["pending_receives"]["operations"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            receives,
            fixtures::BIG_COUNT,
            "{what}: rank {}",
            rank["rank"]
        );
    }
    assert_same(&live, &doc, &cores, None, &what);
    eprintln!("{what}: live dump {live_time:.2?}, dump of the gcores {core_time:.2?}");
}

/// `mqd core [--json] [--exe PATH] CORE...`: the same document as the library call, text
/// with every rank, and one line on stderr with exit code 1 for a damaged core.
#[test]
pub(crate) fn mqd_core_command() {
    let program = fixtures::fixture(fixtures::CH4);
    let job = Job::spawn(&program, "ring", SIZE);
    let pids = job.pids();
    let what = format!("{}, mqd core", job.what);
    let live = live_dump(&pids, &what);
    let gdb_dir = job.dir.path().join("gdb");
    std::fs::create_dir_all(&gdb_dir).unwrap();
    let cores = gcores(&pids, &gdb_dir, &what);
    let mqd = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_mqd"))
            .arg("core")
            .args(args)
            .output()
            .expect("run mqd")
    };
    let os = |p: &Path| p.as_os_str().to_owned();
    let mut args: Vec<std::ffi::OsString> = vec!["--json".into()];
    args.extend(cores.iter().map(|c| os(c)));
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = mqd(&refs);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        mqd::verdict_of_exit_code(out.status.code()).is_some(),
        "{what}: {:?}: {stderr}",
        out.status
    );
    assert!(stderr.is_empty(), "{what}: stderr: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["schema"], "mqd/3");
    assert_same(&live, &doc, &cores, None, &what);

    // --exe with the executable the cores name changes nothing.
    let mut with_exe: Vec<&std::ffi::OsStr> = vec!["--exe".as_ref(), program.as_os_str()];
    with_exe.extend(refs.iter().copied());
    let out = mqd(&with_exe);
    assert!(
        mqd::verdict_of_exit_code(out.status.code()).is_some(),
        "{what}: --exe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(again, doc, "{what}: --exe");

    // Text, rank by rank.
    let mut per_rank: Vec<&std::ffi::OsStr> = vec!["--per-rank".as_ref()];
    per_rank.extend(refs[1..].iter().copied());
    let out = mqd(&per_rank);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        mqd::verdict_of_exit_code(out.status.code()).is_some(),
        "{what}: text: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (r, pid) in pids.iter().enumerate() {
        assert!(
            text.contains(&format!("rank {r} (pid {pid})")),
            "{what}: rank {r}:\n{text}"
        );
    }

    // Damaged or foreign files: exit 1, one line naming the cause.
    let cut = gdb_dir.join("cut");
    let bytes = std::fs::read(&cores[0]).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    for (file, start) in [
        (
            cut.clone(),
            // gdb writes the notes last: cut in half, they are gone.
            "mqd: truncated core file: notes segment at offset 0x".to_owned(),
        ),
        (program.clone(), "mqd: not an ELF core file: ".to_owned()),
        (
            gdb_dir.join("nothing"),
            format!(
                "mqd: cannot read core file {}",
                gdb_dir.join("nothing").display()
            ),
        ),
    ] {
        let out = mqd(&[file.as_os_str()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{what}: {}: {stderr}",
            file.display()
        );
        assert!(
            stderr.starts_with(&start) && stderr.lines().count() == 1,
            "{what}: {}: {stderr}",
            file.display()
        );
        assert!(out.stdout.is_empty(), "{what}: {}", file.display());
    }
    let out = mqd(&[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "mqd core without a core is a usage error"
    );
}
