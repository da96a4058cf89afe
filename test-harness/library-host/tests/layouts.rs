//! Every layout (A ch3, B ch4, C 4.x, C 5.x) on LP64 little-endian, ILP32
//! little-endian and LP64 big-endian targets: every field of every communicator
//! and operation against an independent model of the synthetic process.

use mqd_fixtures::expect::*;
use mqd_library_host::session::OperationStatus;
use mqd_synthetic::{
    BuildOptions, CommSpec, Layout, MPI_ANY_SOURCE, MPI_ANY_TAG, PmapEncoding, ProcessSpec,
    RequestSpec, SyntheticTarget,
};

/// tvtest's world plus wildcards, unexpected messages, completed requests,
/// intercommunicator traffic both ways, a 130-byte name and collective traffic
/// on a context offset that no communicator owns.
fn rich_spec(layout: Layout, arch: mqd_synthetic::Arch) -> ProcessSpec {
    let mut spec = ProcessSpec::example(layout, arch);
    let long_name = format!("{}-end", "a-very-long-communicator-name-".repeat(5));
    assert!(long_name.len() > 127);
    spec.comms
        .insert(0, CommSpec::intra(7, &long_name, 544, 2, vec![3, 2, 1, 0]));
    spec.posted
        .insert(0, RequestSpec::recv(544, 1, 3, 0x5000, 7).completed(1, 3));
    spec.posted.push(RequestSpec::recv(
        528,
        MPI_ANY_SOURCE,
        MPI_ANY_TAG,
        0x6000,
        2,
    ));
    spec.posted.push(RequestSpec::recv(481, 0, 1, 0x6100, 1)); // collective context of the dup
    spec.unexpected.push(RequestSpec::unexpected(528, 0, 11, 9));
    // What CH3 says of a sender reaches the model through the library's notes: a
    // synchronous sender waits, an eager standard sender has gone on (the expected
    // operations say so independently of both the library and the debugger).
    spec.unexpected.push(
        RequestSpec::unexpected(528, 1, 14, 9)
            .completed(1, 14)
            .synchronous(),
    );
    spec.unexpected
        .push(RequestSpec::unexpected(528, 2, 15, 4).completed(2, 15));
    spec.sends.insert(
        0,
        RequestSpec::send(544, 3, 12, 0x7000, 1 << 20).completed(3, 12),
    );
    spec.sends.push(RequestSpec::send(528, 1, 13, 0x7100, 5)); // a send recorded with recvcontext_id (4.1+)
    // Traffic on COMM_SELF (context 16), which ch4 keeps in its self queues.
    spec.posted.push(RequestSpec::recv(16, 0, 31, 0x7200, 2));
    spec.unexpected.push(RequestSpec {
        buffer: 0x7300,
        ..RequestSpec::unexpected(16, 0, 32, 3)
    });
    spec.sends.push(RequestSpec::send(16, 0, 32, 0x7300, 3));
    spec.sequence_number = 6;
    spec
}

fn check(layout: Layout, options: BuildOptions) {
    for arch in ARCHES {
        let spec = rich_spec(layout, arch);
        let target = SyntheticTarget::build_with(&spec, &options);
        let want = expected_display(&spec, &options, &target, 1);
        let what = format!("{} {} {:?}", layout.name(), arch.name(), options);
        let (dbg, got) = display_once(target, 1);
        assert_display(&what, &got, &want);
        let counters = dbg.counters();
        assert_eq!(counters.bad_frees, 0, "{what}");
        assert_eq!(counters.failed_fetches, 0, "{what}");
        let handle = dbg.counter_handle();
        drop(dbg);
        assert_eq!(
            handle.snapshot().outstanding_allocations,
            0,
            "{what}: leaked debugger memory"
        );
    }
}

#[test]
fn ch3() {
    check(Layout::Ch3, BuildOptions::default());
    check(
        Layout::Ch3,
        BuildOptions {
            lazy_groups: true,
            ..BuildOptions::default()
        },
    );
}

#[test]
fn ch4_active_messages() {
    check(Layout::Ch4Am, BuildOptions::default());
    check(
        Layout::Ch4Am,
        BuildOptions {
            lazy_groups: true,
            ..BuildOptions::default()
        },
    );
}

#[test]
fn debug_queues_4x() {
    check(Layout::Debugq4, BuildOptions::default());
}

#[test]
fn debug_queues_5x() {
    check(Layout::Debugq5, BuildOptions::default());
    check(
        Layout::Debugq5,
        BuildOptions {
            pmap: PmapEncoding::Map,
            ..BuildOptions::default()
        },
    );
}

/// The values MPICH's own DLL gets wrong, spelled out rather than modelled.
#[test]
fn values_mpich_dll_gets_wrong_are_right() {
    for layout in LAYOUTS {
        let spec = rich_spec(layout, mqd_synthetic::Arch::LP64_LE);
        let (_dbg, display) = display_once(spec.build(), 1);
        let by_name = |n: &str| {
            display
                .communicators
                .iter()
                .find(|c| c.name.starts_with(n))
                .unwrap_or_else(|| panic!("{}: no communicator {n}", layout.name()))
        };
        let dup = by_name("Dup of comm world");
        let any = dup
            .pending_receives
            .ops()
            .iter()
            .find(|o| o.desired_tag == 19)
            .expect("tag 19 receive");
        assert_eq!(
            any.desired_local_rank,
            -1,
            "{}: ANY_SOURCE is -1, never 65534",
            layout.name()
        );
        let world = by_name("MPI_COMM_WORLD");
        let wild = &world.pending_receives.ops()[0];
        assert!(wild.tag_wild);
        assert_eq!(
            wild.status,
            OperationStatus::Complete,
            "{}: completion from cc",
            layout.name()
        );
        assert_eq!(
            wild.desired_length,
            1 << 33,
            "{}: MPI_Aint count at full width",
            layout.name()
        );
        let inter = by_name("inter");
        assert_eq!(inter.size, 2, "{}: size is local_size", layout.name());
        assert_eq!(
            inter.pending_sends.ops().len(),
            2,
            "{}: intercommunicator sends",
            layout.name()
        );
        let to_remote_1 = inter
            .pending_sends
            .ops()
            .iter()
            .find(|o| o.desired_tag == 13)
            .expect("tag 13 send");
        assert_eq!(
            to_remote_1.desired_global_rank,
            2,
            "{}: global rank via the remote group",
            layout.name()
        );
        let long = by_name("a-very-long");
        assert_eq!(long.name.len(), 63);
        assert_eq!(
            long.group
                .as_ref()
                .map(mqd_model::CommGroup::to_vec)
                .as_deref(),
            Some(&[3, 2, 1, 0][..])
        );
        assert_eq!(
            world
                .group
                .as_ref()
                .map(mqd_model::CommGroup::to_vec)
                .as_deref(),
            Some(&[0, 1, 2, 3][..])
        );
        assert_eq!(
            by_name("MPI_COMM_SELF")
                .group
                .as_ref()
                .map(mqd_model::CommGroup::to_vec)
                .as_deref(),
            Some(&[1][..])
        );
        // Collective-context traffic is shown on its communicator, as such.
        let internal: Vec<&mqd_model::Operation> = display
            .communicators
            .iter()
            .flat_map(|c| c.pending_receives.ops())
            .filter(|o| o.desired_tag == 1)
            .collect();
        assert!(
            !internal.is_empty() && internal.iter().all(|o| o.collective),
            "{}: collective-context traffic: {internal:?}",
            layout.name()
        );
        assert!(
            internal
                .iter()
                .all(|o| o.extra_text[0].starts_with("collective-internal"))
        );
    }
}
