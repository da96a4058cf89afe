//! `debuginfo` against real programs compiled with gcc at test time: symbols of a
//! running PIE and its shared library checked against the process's own addresses and
//! memory, DWARF 2 to 5 layouts checked against the compiler's `offsetof`/`sizeof`, and
//! stripped binaries with separate debug files found by build-id and `.gnu_debuglink`.

use mqd_debuginfo::{AddressSpace, Mapping, SearchOptions};
use mqd_target::ByteOrder;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A scratch directory, removed on drop.
mod lookup;

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqd-debuginfo-{tag}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills and reaps the child however the test ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(program: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) {
    let mut command = Command::new(program);
    for arg in args {
        command.arg(arg);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn gcc(args: &[&dyn AsRef<std::ffi::OsStr>]) {
    run("gcc", args);
}

/// Runs a program to completion and returns its output lines `KEY VALUE` as a map.
fn facts(program: &Path) -> HashMap<String, u64> {
    let output = Command::new(program).output().unwrap();
    assert!(output.status.success());
    parse_facts(&String::from_utf8_lossy(&output.stdout))
}

fn parse_facts(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            let value = value.trim();
            let value = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => value.parse().ok()?,
            };
            Some((key.to_owned(), value))
        })
        .collect()
}

/// The whole file mapped as one read-only segment at `start`, as a loader would map a
/// PIE's first page (enough for the bias: the first `PT_LOAD` is at offset 0).
fn fake_mapping(path: &Path, start: u64) -> Vec<Mapping> {
    vec![Mapping {
        start,
        end: start + 0x1000,
        offset: 0,
        perms: "r--p".into(),
        path: Some(path.to_owned()),
    }]
}

const BASE: u64 = 0x5555_0000_0000;

/// An address space of one PIE that is not running, with no global debug directory
/// unless given.
fn space_of(path: &Path, debug_dirs: Vec<PathBuf>) -> AddressSpace {
    let options = SearchOptions {
        debug_dirs,
        ..SearchOptions::default()
    };
    AddressSpace::from_mappings_with(&fake_mapping(path, BASE), &options).unwrap()
}

const LIB_C: &str = r#"
#include <stdio.h>
int lib_global = 1234;
static int lib_static = 5678;
int clash = 111;
struct lib_node { int key; struct lib_node *next; union { long l; double d; }; char tail[]; };
struct lib_node lib_head = { 42, 0, { 0 } };
int lib_func(int x) { return x + lib_static; }
static int lib_static_func(int x) { return x * 2; }
void lib_report(void) {
    printf("lib_static %p\n", (void *)&lib_static);
    printf("lib_global %p\n", (void *)&lib_global);
    printf("lib_head %p\n", (void *)&lib_head);
    printf("lib_func %p\n", (void *)&lib_func);
    printf("lib_static_func %p\n", (void *)&lib_static_func);
    printf("clash %p\n", (void *)&clash);
    printf("lib_node.next %zu\n", __builtin_offsetof(struct lib_node, next));
    printf("lib_node.d %zu\n", __builtin_offsetof(struct lib_node, d));
    printf("lib_node.tail %zu\n", __builtin_offsetof(struct lib_node, tail));
    printf("sizeof_lib_node %zu\n", sizeof(struct lib_node));
}
"#;

const MAIN_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
extern void lib_report(void);
extern int lib_func(int);
int main_global = 4321;
static int main_static = 8765;
static int clash = 222; /* local here; the library's global wins */
int main(void) {
    printf("main_global %p\n", (void *)&main_global);
    printf("main_static %p\n", (void *)&main_static);
    printf("main_clash %p\n", (void *)&clash);
    printf("main %p\n", (void *)&main);
    printf("clash_value %d\n", clash + lib_func(0) - lib_func(0));
    lib_report();
    printf("READY\n");
    fflush(stdout);
    for (;;) pause();
}
"#;

/// Reads `len` bytes of the process's memory.
fn read_mem(pid: u32, addr: u64, len: usize) -> Vec<u8> {
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut buf = vec![0; len];
    mem.read_exact_at(&mut buf, addr).unwrap();
    buf
}

fn read_i32(pid: u32, addr: u64) -> i32 {
    i32::from_ne_bytes(read_mem(pid, addr, 4).try_into().unwrap())
}

/// Starts `program`, which prints `KEY VALUE` lines then `READY` and waits; returns the
/// guarded child and what it printed.
fn spawn_ready(program: &Path) -> (ChildGuard, HashMap<String, u64>) {
    let child = Command::new(program)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = ChildGuard(child);
    let stdout = child.0.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let done = line == "READY";
            if sender.send(line).is_err() || done {
                break;
            }
        }
    });
    let mut text = String::new();
    loop {
        let line = receiver
            .recv_timeout(Duration::from_secs(20))
            .expect("the program did not print READY");
        if line == "READY" {
            break;
        }
        text.push_str(&line);
        text.push('\n');
    }
    (child, parse_facts(&text))
}

const SMALL_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
int small_global = 31;
static int small_static = 32;
struct small { int a; long b; } small_value = { 1, 2 };
int main(void) {
    printf("small_global %p\n", (void *)&small_global);
    printf("small_static %p\n", (void *)&small_static);
    printf("main %p\n", (void *)&main);
    printf("READY\n");
    fflush(stdout);
    for (;;) pause();
}
"#;

#[test]
fn symbols_of_running_fixed_static_and_deleted_executables() {
    let dir = Scratch::new("exec");
    let source = dir.write("small.c", SMALL_C);
    for (case, flags) in [
        ("fixed", &["-no-pie"][..]),
        ("static", &["-static"]),
        ("deleted", &["-fPIE", "-pie"]),
    ] {
        let prog = dir.path(case);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"-g", &"-O0"];
        for flag in flags {
            args.push(flag);
        }
        args.extend([&source as &dyn AsRef<std::ffi::OsStr>, &"-o", &prog]);
        gcc(&args);
        let (child, printed) = spawn_ready(&prog);
        let pid = child.0.id();
        if case == "deleted" {
            // Removed (or rebuilt) while running: read through /proc/PID/map_files.
            std::fs::remove_file(&prog).unwrap();
        }
        let space = AddressSpace::from_pid(i32::try_from(pid).unwrap()).unwrap();
        let objects = space.objects();
        assert!(objects[0].0.ends_with(case), "{case}: {objects:?}");
        assert_eq!(
            space.main_executable(),
            Some(objects[0].0.clone()),
            "{case}"
        );
        if case == "deleted" {
            assert_ne!(objects[0].1, 0, "{case}: a PIE is relocated");
        } else {
            assert_eq!(objects[0].1, 0, "{case}: linked at its run-time address");
        }
        if case == "static" {
            assert_eq!(objects.len(), 1, "{case}: {objects:?}");
        }
        for name in ["small_global", "small_static"] {
            assert_eq!(
                space.find_symbol(name),
                Some(printed[name]),
                "{case}: {name}"
            );
        }
        assert_eq!(space.find_function("main"), Some(printed["main"]), "{case}");
        assert_eq!(read_i32(pid, printed["small_static"]), 32);
        let small = space.find_type("struct small").expect(case);
        assert_eq!(space.field_offset(small, "b"), Some(8), "{case}");
        assert_eq!(space.type_size(small), Some(16), "{case}");
        drop(child);
    }
}

#[test]
fn symbols_of_a_running_pie_and_its_shared_library() {
    let dir = Scratch::new("live");
    let lib_c = dir.write("lib.c", LIB_C);
    let main_c = dir.write("main.c", MAIN_C);
    let lib = dir.path("libdi.so");
    let prog = dir.path("prog");
    gcc(&[&"-g", &"-O0", &"-fPIC", &"-shared", &lib_c, &"-o", &lib]);
    let rpath = format!("-Wl,-rpath,{}", dir.0.display());
    gcc(&[
        &"-g", &"-O0", &"-fPIE", &"-pie", &main_c, &"-o", &prog, &"-L", &dir.0, &"-ldi", &rpath,
    ]);

    let (mut child, printed) = spawn_ready(&prog);
    let pid = child.0.id();

    let space = AddressSpace::from_pid(i32::try_from(pid).unwrap()).unwrap();
    assert_eq!(
        space.main_executable(),
        Some(std::fs::canonicalize(&prog).unwrap())
    );
    let objects = space.objects();
    assert_eq!(objects[0].0, std::fs::canonicalize(&prog).unwrap());
    assert_ne!(objects[0].1, 0, "a PIE is relocated");
    let lib_bias = objects
        .iter()
        .find(|(path, _)| path.ends_with("libdi.so"))
        .expect("libdi.so mapped")
        .1;
    assert_ne!(lib_bias, 0);
    assert!(space.problems().is_empty(), "{:?}", space.problems());

    for name in [
        "main_global",
        "main_static",
        "lib_global",
        "lib_static",
        "lib_head",
    ] {
        assert_eq!(space.find_symbol(name), Some(printed[name]), "{name}");
    }
    // A global in the library wins over a `static` of the same name in the executable.
    assert_eq!(space.find_symbol("clash"), Some(printed["clash"]));
    assert_ne!(printed["clash"], printed["main_clash"]);
    for name in ["main", "lib_func", "lib_static_func"] {
        assert_eq!(space.find_function(name), Some(printed[name]), "{name}");
    }
    // Functions are not variables, and undefined symbols are nobody's.
    assert_eq!(space.find_symbol("lib_func"), None);
    assert_eq!(space.find_function("lib_global"), None);
    assert_eq!(space.find_symbol("no_such_symbol"), None);

    // The memory at those addresses holds the initial values.
    let at = |name: &str| read_i32(pid, space.find_symbol(name).unwrap());
    assert_eq!(at("main_global"), 4321);
    assert_eq!(at("main_static"), 8765);
    assert_eq!(at("lib_global"), 1234);
    assert_eq!(at("lib_static"), 5678);
    assert_eq!(at("clash"), 111);
    assert_eq!(at("lib_head"), 42);

    // Types of the library, through the running process.
    let node = space.find_type("struct lib_node").unwrap();
    assert_eq!(space.type_size(node), Some(printed["sizeof_lib_node"]));
    assert_eq!(
        space.field_offset(node, "next"),
        Some(printed["lib_node.next"])
    );
    assert_eq!(space.field_offset(node, "d"), Some(printed["lib_node.d"]));
    assert_eq!(
        space.field_offset(node, "tail"),
        Some(printed["lib_node.tail"])
    );
    let next_field = space.field_offset(node, "next").unwrap();
    let next = read_mem(pid, space.find_symbol("lib_head").unwrap() + next_field, 8);
    assert_eq!(next, [0; 8]);

    assert!(space.has_debug_info());
    assert_eq!(space.byte_order(), ByteOrder::Little);
    let sizes = space.abi();
    assert_eq!(
        (
            sizes.short,
            sizes.int,
            sizes.long,
            sizes.long_long,
            sizes.pointer
        ),
        (2, 4, 8, 8, 8)
    );

    // The process is still running and answering: its memory is unchanged.
    assert_eq!(at("main_global"), 4321);
    assert!(child.0.try_wait().unwrap().is_none());
}

const TYPES_C: &str = r#"
#include <stdio.h>
#include <stddef.h>
struct opaque;                      /* only declared in this unit */
typedef struct opaque opaque_t;
opaque_t *opaque_ptr;
struct inner { short s; long l; };
struct outer {
    int first;
    struct inner in;
    union { int u_int; struct { char c; long deep; }; };
    struct { int x; int y; } named;
    unsigned flags : 3;
    unsigned more : 7;
    long tail[];
};
typedef struct outer outer_t;
typedef outer_t outer2_t;
typedef const volatile outer2_t outer3_t;
union number { int i; double d; char bytes[12]; };
enum color { RED, GREEN = 5 };
typedef enum color color_t;
typedef int int_matrix_t[3][4];
typedef struct { char tag; void *ptr; } anon_t;
outer3_t *op;
union number num;
color_t col;
int_matrix_t matrix;
anon_t anon;
short s; long long ll;
int main_global = 1;
static int main_static = 2;
extern void report_other(void);
#define OFF(t, f) printf("off:" #t "." #f " %zu\n", offsetof(t, f))
#define SIZE(t) printf("size:" #t " %zu\n", sizeof(t))
int main(void) {
    OFF(struct outer, first); OFF(struct outer, in); OFF(struct outer, in.l);
    OFF(struct outer, u_int); OFF(struct outer, c); OFF(struct outer, deep);
    OFF(struct outer, named); OFF(struct outer, named.y); OFF(struct outer, tail);
    OFF(union number, d); OFF(union number, bytes); OFF(anon_t, ptr);
    SIZE(struct outer); SIZE(outer3_t); SIZE(union number); SIZE(color_t);
    SIZE(int_matrix_t); SIZE(anon_t); SIZE(struct inner);
    printf("addr:main_static %p\n", (void *)&main_static);
    report_other();
    return main_static - 2;
}
"#;

const OTHER_C: &str = r#"
#include <stdio.h>
#include <stddef.h>
struct opaque { int a; char b[3]; double c; };
struct opaque the_opaque;
void report_other(void) {
    printf("off:struct opaque.c %zu\n", offsetof(struct opaque, c));
    printf("size:struct opaque %zu\n", sizeof(struct opaque));
}
"#;

/// Builds the types program with `flags` into `dir/name`; returns its path and what it
/// printed (`off:TYPE.PATH`, `size:TYPE`, `addr:SYMBOL`, addresses as if loaded at 0).
fn build_types(dir: &Scratch, name: &str, flags: &[&str]) -> (PathBuf, HashMap<String, u64>) {
    let types_c = dir.write("types.c", TYPES_C);
    let other_c = dir.write("other.c", OTHER_C);
    let out = dir.path(name);
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"-O0", &"-fPIE", &"-pie"];
    for flag in flags {
        args.push(flag);
    }
    args.extend([
        &types_c as &dyn AsRef<std::ffi::OsStr>,
        &other_c,
        &"-o",
        &out,
    ]);
    gcc(&args);
    let facts = facts(&out);
    (out, facts)
}

fn check_types(space: &AddressSpace, facts: &HashMap<String, u64>, what: &str) {
    let ty = |name: &str| {
        space
            .find_type(name)
            .unwrap_or_else(|| panic!("{what}: no type {name}"))
    };
    // Offsets: by the tag, the typedef chain (down to a cv-qualified typedef of a
    // typedef), through anonymous members, along dotted paths.
    for spelling in ["struct outer", "outer", "outer_t", "outer2_t", "outer3_t"] {
        let outer = ty(spelling);
        for path in [
            "first", "in", "in.l", "u_int", "c", "deep", "named", "named.y", "tail",
        ] {
            assert_eq!(
                space.field_offset(outer, path),
                Some(facts[&format!("off:struct outer.{path}")]),
                "{what}: {spelling}.{path}"
            );
        }
        assert_eq!(
            space.type_size(outer),
            Some(facts["size:struct outer"]),
            "{what}: {spelling}"
        );
        for missing in ["nope", "in.nope", "first.x", "", "in.", ".in", "tail.x"] {
            assert_eq!(
                space.field_offset(outer, missing),
                None,
                "{what}: {spelling}.{missing:?}"
            );
        }
        // Bit-fields: the byte holding the first bit.
        let flags = space.field_offset(outer, "flags").expect("flags");
        assert!(
            flags >= facts["off:struct outer.named"] + 8 && flags < facts["off:struct outer.tail"]
        );
    }
    let number = ty("union number");
    assert_eq!(ty("number"), number);
    assert_eq!(
        space.field_offset(number, "d"),
        Some(facts["off:union number.d"])
    );
    assert_eq!(
        space.field_offset(number, "bytes"),
        Some(facts["off:union number.bytes"])
    );
    assert_eq!(space.type_size(number), Some(facts["size:union number"]));
    assert_eq!(space.type_size(ty("color_t")), Some(facts["size:color_t"]));
    assert_eq!(
        space.type_size(ty("enum color")),
        Some(facts["size:color_t"])
    );
    assert_eq!(
        space.type_size(ty("int_matrix_t")),
        Some(facts["size:int_matrix_t"])
    );
    assert_eq!(space.type_size(ty("anon_t")), Some(facts["size:anon_t"]));
    assert_eq!(
        space.field_offset(ty("anon_t"), "ptr"),
        Some(facts["off:anon_t.ptr"])
    );
    assert_eq!(
        space.type_size(ty("inner")),
        Some(facts["size:struct inner"])
    );
    // Declared only in the first unit: the definition of the second one is used.
    for spelling in ["opaque_t", "struct opaque", "opaque"] {
        let opaque = ty(spelling);
        assert_eq!(
            space.type_size(opaque),
            Some(facts["size:struct opaque"]),
            "{what}: {spelling}"
        );
        assert_eq!(
            space.field_offset(opaque, "c"),
            Some(facts["off:struct opaque.c"]),
            "{what}"
        );
    }
    // Base types.
    assert_eq!(space.type_size(ty("int")), Some(4));
    assert_eq!(space.type_size(ty("long int")), Some(8));
    assert_eq!(space.type_size(ty("char")), Some(1));
    // Not types, or not of that kind.
    for name in [
        "no_such_type",
        "struct outer_t",
        "union outer",
        "enum outer",
        "",
        "struct ",
    ] {
        assert_eq!(space.find_type(name), None, "{what}: {name:?}");
    }
    // Handles are stable.
    assert_eq!(ty("outer_t"), ty("outer_t"));
    let sizes = space.abi();
    assert_eq!(
        (
            sizes.short,
            sizes.int,
            sizes.long,
            sizes.long_long,
            sizes.pointer
        ),
        (2, 4, 8, 8, 8)
    );
}

#[test]
fn types_from_dwarf_2_to_5_and_type_units() {
    let dir = Scratch::new("types");
    for flags in [
        &["-gdwarf-5"][..],
        &["-gdwarf-4"],
        &["-gdwarf-4", "-fdebug-types-section"],
        &["-gdwarf-5", "-fdebug-types-section"],
        &["-gdwarf-3"],
        &["-gdwarf-2", "-gstrict-dwarf"],
        &["-gdwarf-5", "-gz"],
    ] {
        let (prog, facts) = build_types(&dir, "prog", flags);
        let space = space_of(&prog, vec![]);
        assert!(space.has_debug_info());
        check_types(&space, &facts, &flags.join(" "));
        // The same bytes held in memory, not mapped from a file, answer the same.
        let image = std::fs::read(&prog).unwrap();
        let in_memory = AddressSpace::from_elf_image("prog", image).unwrap();
        check_types(
            &in_memory,
            &facts,
            &format!("{} in memory", flags.join(" ")),
        );
        // The program ran at another (page-aligned) bias.
        let link_time = space.find_symbol("main_static").unwrap() - BASE;
        assert_eq!(
            link_time % 4096,
            facts["addr:main_static"] % 4096,
            "{flags:?}"
        );
    }
}

#[test]
fn separate_debug_files_by_build_id_and_debuglink() {
    let dir = Scratch::new("separate");
    let (prog, facts) = build_types(&dir, "prog", &["-gdwarf-5"]);
    let main_static = space_of(&prog, vec![]).find_symbol("main_static").unwrap();
    let build_id = {
        let data = std::fs::read(&prog).unwrap();
        let file = object::File::parse(&*data).unwrap();
        use object::Object;
        file.build_id()
            .unwrap()
            .expect("gcc links with a build-id")
            .to_vec()
    };
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let global = dir.path("debug-root");
    std::fs::create_dir_all(&global).unwrap();

    // Build-id: fully stripped, its .symtab and DWARF only in the debug file.
    let by_id_dir = dir.path("by-id");
    std::fs::create_dir_all(&by_id_dir).unwrap();
    let stripped = by_id_dir.join("prog");
    std::fs::copy(&prog, &stripped).unwrap();
    let debug_file = global
        .join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    std::fs::create_dir_all(debug_file.parent().unwrap()).unwrap();
    run("objcopy", &[&"--only-keep-debug", &stripped, &debug_file]);
    run("strip", &[&"--strip-all", &stripped]);
    let space = space_of(&stripped, vec![global.clone()]);
    assert_eq!(space.debug_file(&stripped), Some(debug_file.clone()));
    assert!(space.has_debug_info());
    check_types(&space, &facts, "build-id");
    assert_eq!(
        space.find_symbol("main_static"),
        Some(main_static),
        "local symbol from the debug file"
    );
    // Without the debug directory: nothing but .dynsym.
    let bare = space_of(&stripped, vec![]);
    assert!(!bare.has_debug_info());
    assert_eq!(bare.debug_file(&stripped), None);
    assert_eq!(bare.find_type("outer_t"), None);
    assert_eq!(bare.find_symbol("main_static"), None);
    let sizes = bare.abi();
    assert_eq!(
        (sizes.long, sizes.pointer),
        (8, 8),
        "defaults of ELFCLASS64"
    );

    std::fs::remove_file(&debug_file).unwrap();

    // Debuglink, the debug file beside the object, in .debug/, or under a debug
    // directory followed by the object's directory.
    let debug_name = "prog.debug";
    let made = dir.path(debug_name);
    run("objcopy", &[&"--only-keep-debug", &prog, &made]);
    let linked = dir.path("linked");
    std::fs::copy(&prog, &linked).unwrap();
    run("strip", &[&"--strip-all", &linked]);
    let link_arg = format!("--add-gnu-debuglink={}", made.display());
    run("objcopy", &[&link_arg, &linked]);
    for (case, place) in [
        ("beside", PathBuf::from(".")),
        ("dot-debug", PathBuf::from(".debug")),
        ("global", PathBuf::from("GLOBAL")),
    ] {
        let object_dir = dir.path(&format!("link-{case}"));
        std::fs::create_dir_all(&object_dir).unwrap();
        let object = object_dir.join("prog");
        std::fs::copy(&linked, &object).unwrap();
        let target = if place == Path::new("GLOBAL") {
            global
                .join(object_dir.strip_prefix("/").unwrap())
                .join(debug_name)
        } else {
            object_dir.join(&place).join(debug_name)
        };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&made, &target).unwrap();
        let space = space_of(&object, vec![global.clone()]);
        assert_eq!(
            space.debug_file(&object),
            Some(std::fs::canonicalize(&target).unwrap()),
            "{case}"
        );
        check_types(&space, &facts, case);
        assert_eq!(
            space.find_symbol("main_static"),
            Some(main_static),
            "{case}"
        );
        std::fs::remove_file(&target).unwrap();
        let space = space_of(&object, vec![global.clone()]);
        assert!(!space.has_debug_info(), "{case}: debug file removed");
    }

    // `strip -g` keeps .symtab: symbols without types.
    let symbols_only = dir.path("symbols-only");
    std::fs::copy(&prog, &symbols_only).unwrap();
    run("strip", &[&"-g", &symbols_only]);
    let space = space_of(&symbols_only, vec![]);
    assert!(!space.has_debug_info());
    assert_eq!(space.find_type("outer_t"), None);
    assert_eq!(space.find_symbol("main_static"), Some(main_static));
}

#[test]
fn debuglink_without_build_id_is_checked_by_crc() {
    let dir = Scratch::new("crc");
    let (prog, facts) = build_types(&dir, "prog", &["-gdwarf-4", "-Wl,--build-id=none"]);
    let main_static = space_of(&prog, vec![]).find_symbol("main_static").unwrap();
    let made = dir.path("prog.debug");
    run("objcopy", &[&"--only-keep-debug", &prog, &made]);
    let object_dir = dir.path("bin");
    std::fs::create_dir_all(&object_dir).unwrap();
    let object = object_dir.join("prog");
    std::fs::copy(&prog, &object).unwrap();
    run("strip", &[&"--strip-all", &object]);
    let link_arg = format!("--add-gnu-debuglink={}", made.display());
    run("objcopy", &[&link_arg, &object]);
    let target = object_dir.join("prog.debug");
    std::fs::copy(&made, &target).unwrap();
    let space = space_of(&object, vec![]);
    assert_eq!(
        space.debug_file(&object),
        Some(std::fs::canonicalize(&target).unwrap())
    );
    check_types(&space, &facts, "crc");
    assert_eq!(space.find_symbol("main_static"), Some(main_static));

    // A debug file of another build under that name has another CRC: not used.
    let (other, _) = build_types(
        &dir,
        "other",
        &["-gdwarf-4", "-Wl,--build-id=none", "-DOTHER=1", "-O1"],
    );
    run("objcopy", &[&"--only-keep-debug", &other, &target]);
    let space = space_of(&object, vec![]);
    assert_eq!(space.debug_file(&object), None);
    assert!(!space.has_debug_info());
}
