//! Unit tests of the debuginfo module: maps parsing, load bias, hand-made ELF headers of
//! both classes and byte orders, the file cache. Tests with real compiled programs are
//! in `tests/debuginfo.rs`.

use super::*;
use crate::bytes::crc32;
use crate::elf::ElfObject;
use crate::maps::{LoadSegment, load_bias};
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn maps_lines_with_every_kind_of_path() {
    let text = "\
5612a0400000-5612a0401000 r--p 00000000 fd:01 1234567                    /usr/bin/prog
5612a0401000-5612a0402000 r-xp 00001000 fd:01 1234567                    /usr/bin/prog
5612a1000000-5612a1021000 rw-p 00000000 00:00 0                          [heap]
7f1c00000000-7f1c00021000 rw-p 00000000 00:00 0 
7f1c10000000-7f1c10001000 r--p 00002000 fd:01 42                         /tmp/with space/lib x.so (deleted)
not a maps line
7ffc00000000-7ffc00001000 r-xp 00000000 00:00 0                          [vdso]
";
    let maps = parse_proc_maps(text);
    assert_eq!(maps.len(), 6);
    assert_eq!(
        maps[0],
        Mapping {
            start: 0x5612_a040_0000,
            end: 0x5612_a040_1000,
            offset: 0,
            perms: "r--p".into(),
            path: Some("/usr/bin/prog".into()),
        }
    );
    assert_eq!(maps[1].offset, 0x1000);
    assert_eq!(maps[2].path.as_deref(), Some(Path::new("[heap]")));
    assert_eq!(maps[3].path, None);
    assert_eq!(
        maps[4].path.as_deref(),
        Some(Path::new("/tmp/with space/lib x.so (deleted)"))
    );
    assert_eq!(
        strip_deleted(maps[4].path.as_deref().unwrap()),
        ("/tmp/with space/lib x.so".into(), true)
    );
    assert_eq!(maps[5].perms, "r-xp");
}

#[test]
fn maps_rejects_malformed_lines() {
    for line in [
        "",
        "zzzz-1000 r--p 00000000 fd:01 1 /x",
        "2000-1000 r--p 00000000 fd:01 1 /x",
        "1000-2000 r--p 0000000g fd:01 1 /x",
        "1000-2000 r--p 00000000 fd01 1 /x",
        "1000-2000 r--p 00000000 fd:01 x /x",
        "1000-2000 rp 00000000 fd:01 1 /x",
    ] {
        assert!(parse_proc_maps(line).is_empty(), "{line:?}");
    }
}

fn mapping(start: u64, offset: u64) -> Mapping {
    Mapping {
        start,
        end: start + 0x1000,
        offset,
        perms: "r--p".into(),
        path: Some("/lib/x.so".into()),
    }
}

#[test]
fn bias_of_pie_library_and_fixed_executable() {
    // A typical PIE or library: segments at file offsets 0, 0x1000 (text), 0x2df0 (data,
    // whose first page is file offset 0x2000 mapped at vaddr page 0x3000).
    let loads = [
        LoadSegment {
            vaddr: 0,
            offset: 0,
            filesz: 0x6a0,
        },
        LoadSegment {
            vaddr: 0x1000,
            offset: 0x1000,
            filesz: 0x200,
        },
        LoadSegment {
            vaddr: 0x3df0,
            offset: 0x2df0,
            filesz: 0x250,
        },
    ];
    let base = 0x7f00_0000_0000;
    let all = [
        mapping(base, 0),
        mapping(base + 0x1000, 0x1000),
        mapping(base + 0x3000, 0x2000),
    ];
    let refs: Vec<&Mapping> = all.iter().collect();
    assert_eq!(load_bias(&refs, &loads), Some(base));
    // Only the data mapping left (the others unmapped): still the same bias.
    assert_eq!(load_bias(&refs[2..], &loads), Some(base));
    // Mappings in any order.
    let reversed: Vec<&Mapping> = all.iter().rev().collect();
    assert_eq!(load_bias(&reversed, &loads), Some(base));

    // A non-PIE executable linked at 0x400000 has bias 0.
    let exec = [LoadSegment {
        vaddr: 0x40_0000,
        offset: 0,
        filesz: 0x500,
    }];
    assert_eq!(load_bias(&[&mapping(0x40_0000, 0)], &exec), Some(0));
    // A mapping of no segment (the file mapped as data far into it): no bias.
    assert_eq!(load_bias(&[&mapping(0x1000, 0x10_0000)], &exec), None);
}

#[test]
fn debuglink_crc_is_crc32_iso_hdlc() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
}

#[test]
fn type_names_select_a_namespace() {
    assert_eq!(parse_type_name("MPIR_Comm"), (NameKind::Plain, "MPIR_Comm"));
    assert_eq!(
        parse_type_name(" struct  MPIR_Comm "),
        (NameKind::Struct, "MPIR_Comm")
    );
    assert_eq!(parse_type_name("union u"), (NameKind::Union, "u"));
    assert_eq!(parse_type_name("enum e"), (NameKind::Enum, "e"));
    assert_eq!(parse_type_name("structure"), (NameKind::Plain, "structure"));
}

#[test]
fn address_space_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<AddressSpace>();
    check::<DebugInfoError>();
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqd-debuginfo-unit-{tag}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An ELF file with a header and one `PT_LOAD` of the whole file at `vaddr`, no
/// sections: exact bytes for either class and byte order.
fn tiny_elf(is_64: bool, big_endian: bool, exec: bool, vaddr: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let u16_ = |out: &mut Vec<u8>, v: u16| {
        out.extend_from_slice(&if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    };
    let u32_ = |out: &mut Vec<u8>, v: u32| {
        out.extend_from_slice(&if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    };
    let word = |out: &mut Vec<u8>, v: u64| {
        if is_64 {
            out.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        } else {
            let v = u32::try_from(v).unwrap();
            out.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
    };
    let (ehsize, phentsize, shentsize) = if is_64 {
        (64u16, 56u16, 64u16)
    } else {
        (52, 32, 40)
    };
    let total = 0x200u64;
    out.extend_from_slice(b"\x7fELF");
    out.push(if is_64 { 2 } else { 1 });
    out.push(if big_endian { 2 } else { 1 });
    out.push(1);
    out.extend_from_slice(&[0; 9]);
    u16_(&mut out, if exec { 2 } else { 3 }); // e_type
    u16_(&mut out, if big_endian { 43 } else { 62 }); // e_machine: SPARC V9, x86-64
    u32_(&mut out, 1); // e_version
    word(&mut out, vaddr); // e_entry
    word(&mut out, u64::from(ehsize)); // e_phoff
    word(&mut out, 0); // e_shoff
    u32_(&mut out, 0); // e_flags
    u16_(&mut out, ehsize);
    u16_(&mut out, phentsize);
    u16_(&mut out, 1); // e_phnum
    u16_(&mut out, shentsize);
    u16_(&mut out, 0); // e_shnum
    u16_(&mut out, 0); // e_shstrndx
    assert_eq!(out.len(), usize::from(ehsize));
    u32_(&mut out, 1); // PT_LOAD
    if is_64 {
        u32_(&mut out, 5); // p_flags
        word(&mut out, 0); // p_offset
        word(&mut out, vaddr);
        word(&mut out, vaddr);
        word(&mut out, total);
        word(&mut out, total);
        word(&mut out, 0x1000);
    } else {
        word(&mut out, 0);
        word(&mut out, vaddr);
        word(&mut out, vaddr);
        word(&mut out, total);
        word(&mut out, total);
        u32_(&mut out, 5);
        word(&mut out, 0x1000);
    }
    out.resize(usize::try_from(total).unwrap(), 0);
    out
}

#[test]
fn class_and_byte_order_from_the_elf_header() {
    let scratch = Scratch::new("classes");
    for (is_64, big) in [(true, false), (true, true), (false, false), (false, true)] {
        let path = scratch.0.join(format!("elf-{is_64}-{big}"));
        std::fs::write(&path, tiny_elf(is_64, big, true, 0x1_0000)).unwrap();
        let maps = [Mapping {
            start: 0x1_0000,
            end: 0x1_1000,
            offset: 0,
            perms: "r-xp".into(),
            path: Some(path.clone()),
        }];
        let space = AddressSpace::from_mappings(&maps, None).unwrap();
        assert_eq!(space.objects(), vec![(path.clone(), 0)]);
        assert_eq!(space.main_executable(), Some(path.clone()));
        assert_eq!(
            space.byte_order(),
            if big {
                ByteOrder::Big
            } else {
                ByteOrder::Little
            }
        );
        let sizes = space.abi();
        let word = if is_64 { 8 } else { 4 };
        assert_eq!(
            (
                sizes.short,
                sizes.int,
                sizes.long,
                sizes.long_long,
                sizes.pointer
            ),
            (2, 4, word, 8, word),
            "is_64 {is_64} big {big}"
        );
        assert!(!space.has_debug_info());
        assert_eq!(space.find_symbol("anything"), None);
        assert_eq!(space.find_type("int"), None);
    }
}

#[test]
fn library_bias_and_executable_order() {
    let scratch = Scratch::new("order");
    let lib = scratch.0.join("libx.so");
    let exe = scratch.0.join("prog");
    std::fs::write(&lib, tiny_elf(true, false, false, 0)).unwrap();
    std::fs::write(&exe, tiny_elf(true, false, true, 0x40_0000)).unwrap();
    let map = |start, path: &Path| Mapping {
        start,
        end: start + 0x1000,
        offset: 0,
        perms: "r--p".into(),
        path: Some(path.to_owned()),
    };
    // The library is mapped first (lower address): the executable still comes first.
    let maps = [map(0x20_0000, &lib), map(0x40_0000, &exe)];
    let space = AddressSpace::from_mappings(&maps, None).unwrap();
    assert_eq!(
        space.objects(),
        vec![(exe.clone(), 0), (lib.clone(), 0x20_0000)]
    );
    assert_eq!(space.main_executable(), Some(exe.clone()));
    // Told otherwise, it believes it.
    let options = SearchOptions {
        executable: Some(lib.clone()),
        ..SearchOptions::default()
    };
    let space = AddressSpace::from_mappings_with(&maps, &options).unwrap();
    assert_eq!(space.main_executable(), Some(lib));
}

#[test]
fn errors_name_their_cause() {
    let scratch = Scratch::new("errors");
    let text = scratch.0.join("notes.txt");
    std::fs::write(&text, "not an ELF file at all\n").unwrap();
    let maps = |path: &Path| {
        vec![Mapping {
            start: 0x1000,
            end: 0x2000,
            offset: 0,
            perms: "r--p".into(),
            path: Some(path.to_owned()),
        }]
    };
    let err = AddressSpace::from_mappings(&maps(&text), None).unwrap_err();
    assert_eq!(err, DebugInfoError::NotElf { path: text.clone() });
    assert!(err.to_string().contains("not an ELF file"), "{err}");

    let missing = scratch.0.join("missing.so");
    let err = AddressSpace::from_mappings(&maps(&missing), None).unwrap_err();
    assert!(
        matches!(err, DebugInfoError::Io { ref path, .. } if *path == missing),
        "{err:?}"
    );

    let err = AddressSpace::from_mappings(&[], None).unwrap_err();
    assert_eq!(err, DebugInfoError::NoObjects);

    // A truncated ELF header.
    let short = scratch.0.join("short");
    std::fs::write(&short, b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0").unwrap();
    let err = AddressSpace::from_mappings(&maps(&short), None).unwrap_err();
    assert!(matches!(err, DebugInfoError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().starts_with("malformed ELF file"), "{err}");

    assert_eq!(
        AddressSpace::from_pid(0).unwrap_err(),
        DebugInfoError::NoSuchProcess { pid: 0 }
    );
    assert_eq!(
        AddressSpace::from_pid(i32::MAX).unwrap_err().to_string(),
        format!("no such process: {}", i32::MAX)
    );
}

#[test]
fn a_file_is_parsed_once_while_in_use() {
    let scratch = Scratch::new("cache");
    let path = scratch.0.join("prog");
    std::fs::write(&path, tiny_elf(true, false, true, 0x40_0000)).unwrap();
    let a = ElfObject::open(&path, None).unwrap();
    // Another spelling of the same file.
    let b = ElfObject::open(&scratch.0.join(".").join("prog"), None).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // A rewritten file (new inode) is parsed anew.
    let tmp = scratch.0.join("prog.new");
    std::fs::write(&tmp, tiny_elf(true, false, true, 0x40_0000)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let c = ElfObject::open(&path, None).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
}

#[test]
fn this_test_process_from_its_pid() {
    let space = AddressSpace::from_pid(i32::try_from(std::process::id()).unwrap()).unwrap();
    let exe = std::env::current_exe().unwrap();
    assert_eq!(space.main_executable(), Some(exe));
    assert!(
        space
            .objects()
            .iter()
            .any(|(path, _)| path.to_string_lossy().contains("libc.so")),
        "{space:?}"
    );
    assert_eq!(space.byte_order(), ByteOrder::Little);
    // glibc's exported variables are in its .dynsym.
    let environ = space.find_symbol("environ").expect("environ");
    assert_ne!(environ, 0);
    assert!(space.find_function("malloc").is_some());
}

#[test]
fn ranks_share_one_index_built_once_under_concurrent_queries() {
    let scratch = Scratch::new("shared");
    let source = scratch.0.join("rank.c");
    std::fs::write(
        &source,
        "struct request { int kind; long tag; }; struct request the_request;\n\
         int main(void) { return 0; }\n",
    )
    .unwrap();
    let prog = scratch.0.join("rank");
    let status = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-fPIE", "-pie", "-o"])
        .arg(&prog)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    let maps = [Mapping {
        start: 0x5555_0000_0000,
        end: 0x5555_0000_1000,
        offset: 0,
        perms: "r--p".into(),
        path: Some(prog.clone()),
    }];
    // Four "ranks" attached from four threads ask their first type at once.
    let spaces: Vec<AddressSpace> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let space = AddressSpace::from_mappings(&maps, None).unwrap();
                    let request = space.find_type("struct request").unwrap();
                    assert_eq!(space.field_offset(request, "tag"), Some(8));
                    space
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = spaces[0].dwarf_of(0).unwrap();
    for space in &spaces[1..] {
        assert!(Arc::ptr_eq(
            &space.objects[0].elf,
            &spaces[0].objects[0].elf
        ));
        assert!(Arc::ptr_eq(space.dwarf_of(0).unwrap(), first));
    }
}
