//! Every fuzz target on its checked-in seeds and a few thousand mutations of them, as CI
//! runs it; and the seeds reach past the first checks (a seed every target rejects at
//! once would fuzz nothing).

use mqd_debuginfo::AddressSpace;
use mqd_fuzz::Target;
use mqd_fuzz::runner::{Budget, fuzz, regressions, seeds};
use std::time::Duration;

#[test]
fn every_target_survives_a_short_run() {
    for target in Target::ALL {
        let seeds = seeds(target);
        assert!(!seeds.is_empty(), "{}: no seeds", target.name());
        let budget = Budget {
            executions: 20_000,
            time: Duration::from_secs(30),
            per_input: Duration::from_secs(5),
        };
        let report = fuzz(target, &seeds, budget, 0x6d71_6466);
        if let Some(failure) = report.failure {
            // Kept under target/: scripts/test removes its TMPDIR at the end.
            let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("mqd-fuzz-{}-failure", target.name()));
            let _ = std::fs::write(&path, &failure.input);
            panic!(
                "{}: {} (input saved to {}; replay: cargo run -p mqd-fuzz --bin mqd-fuzz -- {} {})",
                target.name(),
                failure.message,
                path.display(),
                target.name(),
                path.display()
            );
        }
        assert!(
            report.executions > seeds.len() as u64,
            "{}: no mutations ran",
            target.name()
        );
        eprintln!("{}: {} executions", target.name(), report.executions);
    }
}

#[test]
fn the_seeds_reach_deep() {
    for seed in seeds(Target::Elf) {
        let space = AddressSpace::from_elf_image("seed", seed).expect("an ELF seed");
        let outer = space.find_type("struct outer").expect("struct outer");
        assert_eq!(space.field_offset(outer, "named.y"), Some(32));
        assert!(space.find_symbol("main_global").is_some());
    }
    let mut real_cores = 0;
    for seed in seeds(Target::Core) {
        let path = std::env::temp_dir().join(format!("mqd-fuzz-seed-core-{}", std::process::id()));
        std::fs::write(&path, &seed).unwrap();
        let core = mqd_process::core::CoreFile::open(&path);
        let _ = std::fs::remove_file(&path);
        let core = core.expect("a core seed");
        if core.pid() == Some(4242) {
            // Made by hand.
            assert_eq!(core.segments().len(), 2);
            assert_eq!(core.file_mappings().len(), 1);
            continue;
        }
        // gdb's gcore of a program stopped at a breakpoint, its loads cut to 256 bytes.
        real_cores += 1;
        assert_eq!(core.threads().len(), 1);
        assert_eq!(core.signal(), Some(libc::SIGTRAP));
        assert!(
            core.file_mappings()
                .iter()
                .any(|m| m.path.ends_with("prog")),
            "{:?}",
            core.file_mappings()
        );
        let first = core.segments()[0].vaddr;
        let mut head = [0u8; 4];
        core.read_memory(first, &mut head)
            .expect("the program's first page");
        assert_eq!(&head, b"\x7fELF");
    }
    assert_eq!(real_cores, 1, "one seed is a real core");
    let mut with_arguments = 0;
    for seed in seeds(Target::Stack) {
        let (stack, _) = mqd_fuzz::unwound_stack(&seed).expect("an ELF in the stack seed");
        let names: Vec<&str> = stack
            .frames
            .iter()
            .filter_map(|f| f.function.as_deref())
            .collect();
        assert!(
            names.starts_with(&["inner"]) && names.contains(&"MPI_Recv"),
            "{names:?}, {:?}",
            stack.truncated
        );
        assert!(names.contains(&"main"), "{names:?}");
        // At -O1 gcc lets the arguments die once summed; at -O0 they are in the frame.
        if let Some(call) = stack.call {
            assert_eq!(
                (call.comm, call.peer, call.tag),
                (Some(5), Some(3), Some(4))
            );
            with_arguments += 1;
        }
    }
    assert!(
        with_arguments > 0,
        "no stack seed reaches MPI_Recv's arguments"
    );
    let mut read = 0;
    for seed in seeds(Target::Tables) {
        if let Ok(tables) = mqd_fuzz::starter_tables(&seed) {
            assert_eq!(tables.ranks.len(), 2);
            assert_eq!(tables.ranks[1].host, "node1");
            assert_eq!(tables.dll_name.as_deref(), Some("lib.so"));
            read += 1;
        }
    }
    assert!(
        read >= 4,
        "the MPIR seeds of both byte orders and widths are read"
    );
    for seed in seeds(Target::Records) {
        let recording = mqd_fuzz::recording(&seed).expect("a whole region");
        let calls: Vec<String> = recording
            .threads
            .iter()
            .filter_map(|t| match t {
                mqd_recording::ThreadRecord::Whole { call: Some(c), .. } => Some(c.name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(calls, ["MPI_Recv", "MPI_Bcast", "MPI_Sendrecv"]);
        assert!(
            recording
                .threads
                .contains(&mqd_recording::ThreadRecord::Torn { thread: 104 })
        );
        // The communicators: the world, a row whose members are in the pool, one torn, an
        // intercommunicator with its remote group.
        let groups: Vec<_> = recording
            .comms
            .iter()
            .filter_map(|c| match c {
                mqd_recording::CommRecord::Whole {
                    members, remote, ..
                } => Some((members.clone(), remote.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            groups,
            [
                (Some(vec![0, 1, 2, 3]), None),
                (Some(vec![2, 3]), None),
                (Some(vec![0, 1]), Some(vec![2, 3])),
            ]
        );
        assert_eq!(recording.comms.len(), 4);
        // The counts of two peers (their claims as the recorder makes them), the
        // lineages of the world and of the row, and MPI_Finalize entered; an Irecv
        // kept beside a request slot mid-write.
        assert_eq!(recording.traffic.len(), 2);
        assert!(!recording.traffic_torn);
        assert!(
            recording
                .traffic
                .iter()
                .any(|t| (t.peer, t.tag, t.lineage, t.sent, t.received) == (1, 7, 1, 3, 2))
        );
        assert!(recording.traffic.iter().any(|t| t.lineage == 0x5EED));
        assert_eq!(recording.header.finalize, mqd_recording::FINALIZE_ENTERED);
        assert!(
            recording
                .requests
                .contains(&mqd_recording::RequestRecord::Torn)
        );
        assert!(recording.requests.iter().any(|r| matches!(
            r,
            mqd_recording::RequestRecord::Whole {
                handle: 0xAC00_0001,
                peer: Some(1),
                tag: Some(7),
                ..
            }
        )));
    }
}

/// Every input a campaign or short run ever failed on (`regressions/`) passes now.
#[test]
fn past_findings_stay_fixed() {
    let mut found = 0;
    for target in Target::ALL {
        for input in regressions(target) {
            mqd_fuzz::run(target, &input);
            found += 1;
        }
    }
    assert!(found > 0, "the regression inputs are missing");
}
