//! Cores built byte by byte: every class, byte order and corruption.

use super::file::*;
use super::format::*;
use super::*;
use mqd_target::ByteOrder;
use mqd_target::TargetError;
use std::path::Path;
use std::path::PathBuf;

/// A hand-made core: one class and byte order, a few segments and notes.
struct Builder {
    layout: Layout,
    loads: Vec<(u64, Vec<u8>, u64, u32)>,
    notes: Vec<(Vec<u8>, u32, Vec<u8>)>,
}

impl Builder {
    fn new(is_64: bool, little: bool) -> Builder {
        Builder {
            layout: Layout::new(is_64, little),
            loads: Vec::new(),
            notes: Vec::new(),
        }
    }
    fn put(&self, out: &mut Vec<u8>, v: u64, size: usize) {
        let bytes = v.to_le_bytes();
        let mut b = bytes[..size].to_vec();
        if !self.layout.little() {
            b.reverse();
        }
        out.extend_from_slice(&b);
    }
    fn word(&self, out: &mut Vec<u8>, v: u64) {
        self.put(out, v, self.layout.word_size());
    }
    fn build(&self) -> Vec<u8> {
        let l = self.layout;
        let ehsize = if l.is_64 { 64 } else { 52 };
        let phsize = usize::from(phentsize(l));
        let phnum = 1 + self.loads.len();
        let mut notes = Vec::new();
        for (name, ty, desc) in &self.notes {
            self.put(&mut notes, name.len() as u64 + 1, 4);
            self.put(&mut notes, desc.len() as u64, 4);
            self.put(&mut notes, u64::from(*ty), 4);
            notes.extend_from_slice(name);
            notes.push(0);
            while notes.len() % 4 != 0 {
                notes.push(0);
            }
            notes.extend_from_slice(desc);
            while notes.len() % 4 != 0 {
                notes.push(0);
            }
        }
        let notes_at = ehsize + phsize * phnum;
        let mut data_at = notes_at + notes.len();
        let mut out = Vec::new();
        out.extend_from_slice(b"\x7fELF");
        out.push(if l.is_64 { 2 } else { 1 });
        out.push(if l.little() { 1 } else { 2 });
        out.push(1);
        out.resize(16, 0);
        self.put(&mut out, u64::from(ET_CORE), 2);
        self.put(&mut out, 62, 2);
        self.put(&mut out, 1, 4);
        self.word(&mut out, 0); // entry
        self.word(&mut out, ehsize as u64); // phoff
        self.word(&mut out, 0); // shoff
        self.put(&mut out, 0, 4); // flags
        self.put(&mut out, ehsize as u64, 2);
        self.put(&mut out, phsize as u64, 2);
        self.put(&mut out, phnum as u64, 2);
        self.put(&mut out, 0, 6);
        assert_eq!(out.len(), ehsize);
        let ph = |out: &mut Vec<u8>,
                  ty: u32,
                  flags: u32,
                  offset: u64,
                  vaddr: u64,
                  filesz: u64,
                  memsz: u64| {
            if l.is_64 {
                self.put(out, u64::from(ty), 4);
                self.put(out, u64::from(flags), 4);
                for v in [offset, vaddr, 0, filesz, memsz, 4] {
                    self.put(out, v, 8);
                }
            } else {
                for v in [
                    u64::from(ty),
                    offset,
                    vaddr,
                    0,
                    filesz,
                    memsz,
                    u64::from(flags),
                    4,
                ] {
                    self.put(out, v, 4);
                }
            }
        };
        ph(
            &mut out,
            PT_NOTE,
            0,
            notes_at as u64,
            0,
            notes.len() as u64,
            0,
        );
        for (vaddr, bytes, memsz, flags) in &self.loads {
            ph(
                &mut out,
                PT_LOAD,
                *flags,
                data_at as u64,
                *vaddr,
                bytes.len() as u64,
                *memsz,
            );
            data_at += bytes.len();
        }
        out.extend_from_slice(&notes);
        for (_, bytes, _, _) in &self.loads {
            out.extend_from_slice(bytes);
        }
        out
    }
}

fn write(bytes: &[u8]) -> (tempdir::Dir, PathBuf) {
    let dir = tempdir::Dir::new();
    let path = dir.0.join("core");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

mod tempdir {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};
    pub struct Dir(pub PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "mqd-core-unit-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn prstatus(b: &Builder, pid: u32, signal: u16) -> Vec<u8> {
    let word = b.layout.word_size();
    let mut d = vec![0u8; 16 + 2 * word];
    let mut sig = Vec::new();
    b.put(&mut sig, u64::from(signal), 2);
    d[12..14].copy_from_slice(&sig);
    b.put(&mut d, u64::from(pid), 4);
    d.resize(if b.layout.is_64 { 336 } else { 144 }, 0);
    d
}

fn prpsinfo(b: &Builder, pid: u32, name: &str, args: &str) -> Vec<u8> {
    let mut d = vec![0u8; if b.layout.is_64 { 24 } else { 12 }];
    d[0] = 1;
    d[1] = b'S';
    b.put(&mut d, u64::from(pid), 4);
    b.put(&mut d, 1, 4);
    b.put(&mut d, 0, 8);
    let mut fname = name.as_bytes().to_vec();
    fname.resize(16, 0);
    d.extend_from_slice(&fname);
    let mut psargs = args.as_bytes().to_vec();
    psargs.resize(80, 0);
    d.extend_from_slice(&psargs);
    d
}

fn file_note(b: &Builder, page: u64, maps: &[(u64, u64, u64, &str)]) -> Vec<u8> {
    let mut d = Vec::new();
    b.word(&mut d, maps.len() as u64);
    b.word(&mut d, page);
    for (start, end, pages, _) in maps {
        b.word(&mut d, *start);
        b.word(&mut d, *end);
        b.word(&mut d, *pages);
    }
    for (_, _, _, name) in maps {
        d.extend_from_slice(name.as_bytes());
        d.push(0);
    }
    d
}

fn sample(is_64: bool, little: bool, mapped: &Path) -> Builder {
    let mut b = Builder::new(is_64, little);
    b.loads
        .push((0x10000, vec![0xaa; 0x1000], 0x3000, PF_R | PF_W));
    b.loads.push((0x20000, vec![0xbb; 0x1000], 0x1000, PF_R));
    b.loads.push((0x40000, Vec::new(), 0x1000, PF_R | PF_W));
    let ps = prstatus(&b, 4242, 3);
    let info = prpsinfo(&b, 4242, "a.out", "./a.out -v");
    let files = file_note(
        &b,
        0x1000,
        &[
            (0x20000, 0x23000, 0, mapped.to_str().unwrap()),
            // Held entirely by the core: needs no file.
            (0x10000, 0x11000, 0, "/dev/shm/gone (deleted)"),
        ],
    );
    b.notes.push((b"CORE".to_vec(), NT_PRSTATUS, ps));
    b.notes.push((b"CORE".to_vec(), NT_PRPSINFO, info));
    b.notes.push((b"CORE".to_vec(), NT_FILE, files));
    b
}

#[test]
fn every_class_and_byte_order() {
    for (is_64, little) in [(true, true), (false, true), (true, false), (false, false)] {
        let dir = tempdir::Dir::new();
        let mapped = dir.0.join("lib.so");
        // Two pages and a half: the mapping's third page is half file, half zeros.
        let mut contents: Vec<u8> = (0..0x2800u32).map(|i| (i % 251) as u8).collect();
        contents[..0x1000].fill(0xbb);
        std::fs::write(&mapped, &contents).unwrap();
        let b = sample(is_64, little, &mapped);
        let path = dir.0.join("core");
        std::fs::write(&path, b.build()).unwrap();
        let core = CoreFile::open(&path).unwrap();
        let what = format!("is_64 {is_64} little {little}");
        assert_eq!(core.is_64(), is_64, "{what}");
        assert_eq!(core.byte_order() == ByteOrder::Little, little, "{what}");
        assert_eq!(core.pid(), Some(4242), "{what}");
        assert_eq!(core.threads(), &[4242], "{what}");
        assert_eq!(core.signal(), Some(3), "{what}");
        let info = core.process_info().unwrap();
        assert_eq!(
            (info.program.as_str(), info.arguments.as_str(), info.state),
            ("a.out", "./a.out -v", 'S'),
            "{what}"
        );
        assert_eq!(core.file_mappings().len(), 2, "{what}");
        assert_eq!(core.mappings()[0].perms, "rw-p", "{what}");
        assert_eq!(core.mappings()[1].perms, "r--p", "{what}");
        let mut buf = [0u8; 8];
        // Dumped bytes, then the untouched anonymous tail reads as zeros.
        core.read_memory(0x10ff8, &mut buf).unwrap();
        assert_eq!(
            buf,
            [0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa],
            "{what}"
        );
        core.read_memory(0x10ffc, &mut buf).unwrap();
        assert_eq!(buf, [0xaa, 0xaa, 0xaa, 0xaa, 0, 0, 0, 0], "{what}");
        // The file-backed mapping: first page in the core, the rest from the file.
        core.read_memory(0x20ffc, &mut buf).unwrap();
        assert_eq!(&buf[..4], &[0xbb; 4], "{what}");
        assert_eq!(&buf[4..], &contents[0x1000..0x1004], "{what}");
        core.read_memory(0x227fc, &mut buf).unwrap();
        assert_eq!(&buf[..4], &contents[0x27fc..0x2800], "{what}");
        assert_eq!(&buf[4..], &[0; 4], "{what}");
        // Memory left out of the dump is an error, not zeros; unmapped is unmapped.
        assert!(
            matches!(
                core.read_memory(0x40000, &mut buf),
                Err(TargetError::Unavailable { .. })
            ),
            "{what}"
        );
        assert_eq!(
            core.read_memory(0x30000, &mut buf),
            Err(TargetError::Unmapped {
                addr: 0x30000,
                len: 8
            }),
            "{what}"
        );
        assert!(core.read_memory(u64::MAX - 3, &mut buf).is_err(), "{what}");
        assert_eq!(core.check_files(), Vec::<FileProblem>::new(), "{what}");
        // A changed file is noticed from the core's copy of its first page.
        contents[..16].fill(0xcc);
        std::fs::write(&mapped, &contents).unwrap();
        let core = CoreFile::open(&path).unwrap();
        let warnings: Vec<String> = core.check_files().iter().map(|p| p.to_string()).collect();
        assert!(
            warnings.len() == 1 && warnings[0].contains("changed since the crash"),
            "{what}: {warnings:?}"
        );
        std::fs::remove_file(&mapped).unwrap();
        let core = CoreFile::open(&path).unwrap();
        let problems = core.check_files();
        assert!(
            problems.len() == 1 && problems[0].is_missing(),
            "{what}: {problems:?}"
        );
        let warnings: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert!(
            warnings.len() == 1 && warnings[0].contains("is missing"),
            "{what}: {warnings:?}"
        );
        assert!(
            matches!(core.read_memory(0x21000, &mut buf), Err(TargetError::Unavailable { why: m, .. }) if m.contains("missing")),
            "{what}"
        );
    }
}

#[test]
fn clear_errors() {
    let dir = tempdir::Dir::new();
    let mapped = dir.0.join("lib.so");
    std::fs::write(&mapped, [0u8; 0x3000]).unwrap();
    let good = sample(true, true, &mapped).build();
    let err = |bytes: &[u8]| {
        let (_dir, path) = write(bytes);
        CoreFile::open(&path).unwrap_err().to_string()
    };
    assert!(err(b"").starts_with("not an ELF core file"));
    assert!(err(b"hello world, this is text").starts_with("not an ELF core file"));
    let mut exec = good.clone();
    exec[16] = ET_EXEC as u8;
    assert!(err(&exec).contains("is an executable"), "{}", err(&exec));
    // Cut in half: the notes are whole, what lies past the cut is named and unreadable.
    let (_cut_dir, cut_path) = write(&good[..good.len() / 2]);
    let cut = CoreFile::open(&cut_path).expect("a core cut after its notes opens");
    let missing = cut.missing_ranges();
    assert!(!missing.is_empty(), "{cut:?}");
    let mut word = [0u8; 8];
    assert!(
        matches!(cut.read_memory(missing[0].0, &mut word), Err(TargetError::Unavailable { why: m, .. }) if m.contains("cut short")),
        "{missing:x?}"
    );
    // Cut inside the notes: nothing says which process it was.
    let notes = err(&good[..64 + 56 * 4 + 16]);
    assert!(
        notes.starts_with("truncated core file: notes segment"),
        "{notes}"
    );
    assert!(
        notes.contains("needs") && notes.contains("file has"),
        "{notes}"
    );
    assert!(
        err(&good[..40]).starts_with("malformed core file"),
        "{}",
        err(&good[..40])
    );
    // Garbage over the notes.
    let notes_at = 64 + 56 * 4;
    let mut garbage = good.clone();
    for (i, b) in garbage[notes_at..notes_at + 64].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(97).wrapping_add(200);
    }
    assert!(
        err(&garbage).starts_with("corrupt notes in core file"),
        "{}",
        err(&garbage)
    );
    // A mapping at a file offset no file reaches (found by fuzzing: reading it overflowed).
    let mut far = sample(true, true, &mapped);
    let pages = (i64::MAX as u64) / 0x1000;
    let files = file_note(&far, 0x1000, &[(0x20000, 0x23000, pages, "/lib/far.so")]);
    far.notes.retain(|n| n.1 != NT_FILE);
    far.notes.push((b"CORE".to_vec(), NT_FILE, files));
    let e = err(&far.build());
    assert!(
        e.contains("NT_FILE") && e.contains("runs past any file's end"),
        "{e}"
    );
    // No NT_FILE: the target needs the executable.
    let mut b = sample(true, true, &mapped);
    b.notes.retain(|n| n.1 != NT_FILE);
    let (_d, path) = write(&b.build());
    let e = CoreTarget::open(&path, None).unwrap_err().to_string();
    assert!(
        e.contains("lacks file mappings") && e.contains("--exe"),
        "{e}"
    );
}

#[test]
fn never_panics_on_mutations() {
    let dir = tempdir::Dir::new();
    let mapped = dir.0.join("lib.so");
    std::fs::write(&mapped, [7u8; 0x3000]).unwrap();
    let good = sample(true, true, &mapped).build();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let path = dir.0.join("mutant");
    for _ in 0..500 {
        let mut bytes = good.clone();
        for _ in 0..(next() % 8 + 1) {
            let at = (next() as usize) % bytes.len().min(0x200);
            bytes[at] = next() as u8;
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(core) = CoreFile::open(&path) {
            let mut buf = [0u8; 64];
            for addr in [0x10000u64, 0x20000, 0x21000, 0x40000, 0] {
                let _ = core.read_memory(addr, &mut buf);
            }
            let _ = core.check_files();
            let _ = core.mappings();
        }
    }
}
