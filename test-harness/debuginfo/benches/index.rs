//! The type queries an MQD library makes at attach, on a real `libmpi.so` with full
//! DWARF (MPICH 4.0.2 ch3 as scripts/real-mpich builds it, about 11 MB of
//! `.debug_info`; `MQD_BENCH_LIBMPI` names another), with the C library (and its debug
//! file, when installed) mapped after it as in a real rank. Each iteration is a new
//! address space, as a new `mqd` run is:
//!
//! - `cold`: no answers kept from earlier runs: string sections searched, the library's
//!   DWARF indexed, the answers written;
//! - `warm`: the answers of an earlier run read back, no DWARF read;
//! - `absent`: a name no file defines, the first query of a run: the files are proved
//!   not to define it from their string sections alone.
//!
//! Run: `cargo bench -p mqd-debuginfo --bench index`

use criterion::{Criterion, criterion_group, criterion_main};
use mqd_debuginfo::{AddressSpace, Mapping, SearchOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The types and fields our library asks on a ch3 rank (from its answers file).
const QUERIES: &[(&str, &[&str])] = &[
    ("MPIR_Comm_list", &["sequence_number", "head"]),
    (
        "MPIR_Comm",
        &[
            "comm_kind",
            "comm_next",
            "context_id",
            "dev",
            "local_group",
            "local_size",
            "name",
            "rank",
            "recvcontext_id",
            "remote_group",
            "remote_size",
        ],
    ),
    ("MPIR_Request", &["cc", "dev", "next", "status"]),
    ("MPIR_Group", &["lrank_to_lpid", "pmap", "size"]),
    ("MPII_Group_pmap_t", &["lpid", "next_lpid"]),
    ("MPIDI_Request", &["match"]),
    ("MPIDI_Message_match", &["parts"]),
    (
        "MPIDI_Message_match_parts_t",
        &["context_id", "rank", "tag"],
    ),
    ("MPIDI_CH3I_comm_t", &["local_vcrt", "vcrt"]),
    ("MPIDI_VCRT", &["size", "vcr_table"]),
    ("MPIDI_VC_t", &["pg_rank"]),
    ("MPIR_Sendq", &["sreq", "tag", "rank", "context_id", "next"]),
    ("MPI_Aint", &[]),
    ("MPIR_Context_id_t", &[]),
    ("MPIDIG_req_t", &[]),
    ("<mqd: not a type>", &[]),
];

fn libmpi() -> PathBuf {
    if let Some(path) = std::env::var_os("MQD_BENCH_LIBMPI") {
        return path.into();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/real-mpich");
    let out = std::process::Command::new(&script)
        .arg("ch3")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(out.status.success(), "scripts/real-mpich ch3 failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("lib/libmpi.so.12")
}

fn mapping(path: &Path, start: u64) -> Mapping {
    Mapping {
        start,
        end: start + 0x1000,
        offset: 0,
        perms: "r--p".into(),
        path: Some(path.to_owned()),
    }
}

/// libc mapped below libmpi, as the loader places it: searched first.
fn space(libmpi: &Path, cache: &Path) -> AddressSpace {
    let libc = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
    let mut maps = Vec::new();
    if libc.exists() {
        maps.push(mapping(libc, 0x7f00_0000_0000));
    }
    maps.push(mapping(libmpi, 0x7f10_0000_0000));
    let options = SearchOptions {
        type_cache: Some(cache.to_owned()),
        ..SearchOptions::default()
    };
    AddressSpace::from_mappings_with(&maps, &options).expect("address space")
}

fn ask(space: &AddressSpace) -> u64 {
    let mut sum = 0;
    for (name, fields) in QUERIES {
        let Some(ty) = space.find_type(name) else {
            continue;
        };
        sum += space.type_size(ty).unwrap_or(0);
        for field in *fields {
            sum += space.field_offset(ty, field).unwrap_or(0);
        }
    }
    sum
}

fn bench(c: &mut Criterion) {
    let libmpi = libmpi();
    let cache = std::env::temp_dir().join(format!("mqd-bench-index-{}", std::process::id()));
    let clear = || {
        let _ = std::fs::remove_dir_all(&cache);
    };
    let mut group = c.benchmark_group("type queries of our library at attach");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("cold", |b| {
        b.iter_batched(
            clear,
            |()| ask(&space(&libmpi, &cache)),
            criterion::BatchSize::PerIteration,
        )
    });
    clear();
    let expected = ask(&space(&libmpi, &cache));
    group.bench_function("warm", |b| {
        b.iter(|| {
            let sum = ask(&space(&libmpi, &cache));
            assert_eq!(sum, expected, "warm answers differ from cold ones");
            sum
        })
    });
    group.bench_function("absent", |b| {
        b.iter_batched(
            clear,
            |()| space(&libmpi, &cache).find_type("no_type_has_this_name"),
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
    clear();
}

criterion_group!(benches, bench);
criterion_main!(benches);
