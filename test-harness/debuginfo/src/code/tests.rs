use super::*;
use object::{Object, ObjectSection, ObjectSymbol};

/// Units written by gcc, with functions inlined across lines, static helpers and a
/// loop: what a stack's frames are made of.
const UNITS: [(&str, &str); 3] = [
    (
        "ring.c",
        "static inline int left(int r, int n) { return (r + n - 1) % n; }\n\
         static inline int right(int r, int n) { return (r + 1) % n; }\n\
         int ring(int r, int n, int *out) {\n\
           int s = 0;\n\
           for (int i = 0; i < n; i++) { s += left(r + i, n) * right(r, n + i); out[i % 4] = s; }\n\
           return s;\n\
         }\n",
    ),
    (
        "grid.c",
        "struct cell { int row, col; };\n\
         static int owner(struct cell c, int cols) { return c.row * cols + c.col; }\n\
         int grid(int rows, int cols) {\n\
           int total = 0;\n\
           for (int r = 0; r < rows; r++)\n\
             for (int c = 0; c < cols; c++) { struct cell x = {r, c}; total ^= owner(x, cols); }\n\
           return total;\n\
         }\n",
    ),
    (
        "main.c",
        "int ring(int, int, int *); int grid(int, int);\n\
         int main(int argc, char **argv) { int out[4]; (void)argv;\n\
           return ring(argc, argc + 3, out) + grid(argc, argc * 2) + out[argc % 4]; }\n",
    ),
];

struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load(elf: &[u8], hide: &str) -> CodeInfo {
    let file = object::File::parse(elf).unwrap();
    let section = |name: &str| -> Result<SectionBytes, String> {
        Ok(match file.section_by_name(name).filter(|_| name != hide) {
            Some(s) => SectionBytes::owned(s.uncompressed_data().unwrap().into_owned()),
            None => SectionBytes::empty(),
        })
    };
    CodeInfo::load(elf, &section).unwrap()
}

/// The units `.debug_aranges` places are parsed only when an address in them is asked
/// about, and answer every address as the units parsed up front (no aranges) do.
#[test]
fn units_placed_by_aranges_answer_as_units_read_up_front() {
    let dir = std::env::temp_dir().join(format!("mqd-code-aranges-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _scratch = Scratch(dir.clone());
    let mut sources = Vec::new();
    for (name, text) in UNITS {
        std::fs::write(dir.join(name), text).unwrap();
        sources.push(dir.join(name));
    }
    let program = dir.join("program");
    let built = std::process::Command::new("gcc")
        .args(["-O2", "-g", "-gdwarf-5", "-o"])
        .arg(&program)
        .args(&sources)
        .status()
        .expect("gcc");
    assert!(built.success());
    let elf = std::fs::read(&program).unwrap();
    let lazy = load(&elf, "");
    let eager = load(&elf, ".debug_aranges");
    let parsed = |code: &CodeInfo| code.units.iter().filter(|u| u.unit.get().is_some()).count();
    assert!(lazy.units.len() >= 3, "{} units", lazy.units.len());
    assert_eq!(parsed(&lazy), 0, "gcc's aranges place every unit");
    assert_eq!(parsed(&eager), eager.units.len());
    assert_eq!(lazy.ranges, eager.ranges);

    let file = object::File::parse(&*elf).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let mut named = 0;
    for svma in text.address()..text.address() + text.size() {
        let (a, b) = (lazy.source_frames(svma), eager.source_frames(svma));
        assert_eq!(a, b, "at {svma:#x}");
        let names = |s: Option<Scopes>| -> Vec<Option<String>> {
            s.map(|s| s.scopes.into_iter().map(|s| s.name).collect())
                .unwrap_or_default()
        };
        assert_eq!(names(lazy.scopes_at(svma)), names(eager.scopes_at(svma)));
        named += usize::from(a.iter().any(|f| f.function.is_some()));
    }
    let functions: Vec<_> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .filter_map(|s| s.name().ok())
        .collect();
    for f in ["ring", "grid", "main"] {
        assert!(functions.contains(&f), "{functions:?}");
    }
    assert!(named > 0);
    // Asked about, only the units holding the addresses were parsed.
    assert!(parsed(&lazy) >= 3 && parsed(&lazy) <= lazy.units.len());
}
