//! An ELF file's dynamic symbols: the names it defines for others to bind to, and a copy
//! of it in which some of them are made local, which the dynamic linker's lookups skip
//! (how mqd fits the hang recorder's exports to an MPI).

use object::{Object, ObjectSection, ObjectSymbol};
use std::path::Path;

/// A file mapped for reading.
fn mapped(path: &Path) -> Result<memmap2::Mmap, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: read only; a file changed under the map changes what is read, nothing else.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))
}

/// The names `path` defines in its dynamic symbol table, global or weak.
pub fn defined(path: &Path) -> Result<Vec<String>, String> {
    let data = mapped(path)?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("{}: not an ELF file: {e}", path.display()))?;
    Ok(file
        .dynamic_symbols()
        .filter(|s| !s.is_undefined() && s.is_global())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect())
}

/// Whether `path` imports (binds to another object's definition of) a dynamic symbol
/// whose name starts with `prefix`: the first such name.
pub fn imports(path: &Path, prefix: &str) -> Result<Option<String>, String> {
    let data = mapped(path)?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("{}: not an ELF file: {e}", path.display()))?;
    Ok(file
        .dynamic_symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok())
        .find(|n| n.starts_with(prefix))
        .map(str::to_owned))
}

/// The bytes of the 64-bit ELF file at `path` with each defined dynamic symbol that
/// `keep` refuses made local (its binding `STB_LOCAL`, its type kept), and their names,
/// sorted.
pub fn with_local(
    path: &Path,
    keep: impl Fn(&str) -> bool,
) -> Result<(Vec<u8>, Vec<String>), String> {
    let data = mapped(path)?;
    let what = path.display();
    let file = object::File::parse(&*data).map_err(|e| format!("{what}: {e}"))?;
    if !matches!(file.format(), object::BinaryFormat::Elf) || !file.is_64() {
        return Err(format!("{what}: not a 64-bit ELF file"));
    }
    let (table, table_size) = file
        .section_by_name(".dynsym")
        .and_then(|s| s.file_range())
        .ok_or_else(|| format!("{what}: no dynamic symbol table"))?;
    // Elf64_Sym: st_name (4), st_info (1), st_other (1), st_shndx (2), value, size.
    const ENTRY: u64 = 24;
    const INFO: u64 = 4;
    let mut bytes = data.to_vec();
    let mut names = Vec::new();
    for symbol in file.dynamic_symbols() {
        let Ok(name) = symbol.name() else { continue };
        if symbol.is_undefined() || keep(name) {
            continue;
        }
        let at = table + symbol.index().0 as u64 * ENTRY + INFO;
        let info = usize::try_from(at)
            .ok()
            .filter(|_| at < table + table_size)
            .and_then(|i| bytes.get_mut(i))
            .ok_or_else(|| format!("{what}: a symbol beyond its table"))?;
        *info &= 0x0f;
        names.push(name.to_owned());
    }
    names.sort();
    Ok((bytes, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C library this test runs with: what it defines, and a copy with `getpid`
    /// made local, which reads back without it and with every other name it had.
    #[test]
    fn a_symbol_made_local_is_no_longer_defined() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("this test's C library");
        let before = defined(Path::new(libc)).unwrap();
        assert!(before.iter().any(|n| n == "getpid"), "{libc}");
        let (bytes, hidden) = with_local(Path::new(libc), |n| n != "getpid").unwrap();
        assert_eq!(hidden, ["getpid"]);
        let dir = std::env::temp_dir().join(format!("mqd-dynsym-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("libc-copy.so");
        std::fs::write(&copy, bytes).unwrap();
        let after = defined(&copy);
        let _ = std::fs::remove_dir_all(&dir);
        let mut after = after.unwrap();
        after.push("getpid".into());
        let (mut a, mut b) = (after, before);
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}
