//! Where a type is looked up: the loader's order of objects, accelerator tables, and the
//! pages a scan releases.

use super::*;

/// Objects are searched as gdb searches the link map: the program, then the libraries
/// it needs, breadth first, whatever addresses they were mapped at; a type two of them
/// define differently is the first one's.
#[test]
fn objects_are_searched_in_the_loaders_order() {
    let dir = Scratch::new("order");
    let lib = |name: &str, size: usize, needs: Option<&str>| {
        let source = dir.write(
            &format!("{name}.c"),
            &format!("struct clash {{ char bytes[{size}]; }}; struct clash {name}_value;\n"),
        );
        let path = dir.path(&format!("lib{name}.so"));
        let soname = format!("-Wl,-soname,lib{name}.so");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"-g", &"-fPIC", &"-shared", &soname, &source, &"-o", &path];
        let link;
        if let Some(needs) = needs {
            link = format!("-l{needs}");
            args.extend([&"-L" as &dyn AsRef<std::ffi::OsStr>, &dir.0, &link]);
        }
        gcc(&args);
        path
    };
    // first needs second; the program needs first only.
    let second = lib("second", 16, None);
    let first = lib("first", 8, Some("second"));
    let main_c = dir.write("main.c", "int main(void) { return 0; }\n");
    let prog = dir.path("prog");
    gcc(&[
        &"-g",
        &"-fPIE",
        &"-pie",
        &main_c,
        &"-o",
        &prog,
        &"-L",
        &dir.0,
        &"-Wl,--no-as-needed",
        &"-lfirst",
    ]);
    let map = |path: &Path, start: u64| Mapping {
        start,
        end: start + 0x1000,
        offset: 0,
        perms: "r--p".into(),
        path: Some(path.to_owned()),
    };
    // Mapped in the other order: second lowest, as the loader's later mappings are.
    let maps = [
        map(&second, 0x7f00_0000_0000),
        map(&first, 0x7f10_0000_0000),
        map(&prog, 0x5555_0000_0000),
    ];
    let space = AddressSpace::from_mappings(&maps, None).unwrap();
    let order: Vec<PathBuf> = space.objects().into_iter().map(|(p, _)| p).collect();
    assert_eq!(order, vec![prog.clone(), first.clone(), second.clone()]);
    let clash = space.find_type("struct clash").expect("struct clash");
    assert_eq!(space.type_size(clash), Some(8), "the first library's");

    // A library no one needs (dlopen) comes after, in address order.
    let loose = lib("loose", 32, None);
    let maps = [map(&loose, 0x7e00_0000_0000), map(&prog, 0x5555_0000_0000)];
    let space = AddressSpace::from_mappings(&maps, None).unwrap();
    let order: Vec<PathBuf> = space.objects().into_iter().map(|(p, _)| p).collect();
    assert_eq!(order, vec![prog, loose]);
}

/// A `.debug_names` table naming every top-level type DIE of `program` by its
/// `.debug_str` name, as clang and lld write them (DWARF 5, 6.1.1): one compile-unit
/// list, a hash table, and entries with `DW_IDX_compile_unit` and `DW_IDX_die_offset`.
fn debug_names_of(program: &Path) -> Vec<u8> {
    use gimli::{AttributeValue, constants};
    use object::{Object, ObjectSection};
    let data = std::fs::read(program).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let section = |id: gimli::SectionId| -> Vec<u8> {
        file.section_by_name(id.name())
            .map(|s| s.uncompressed_data().unwrap().into_owned())
            .unwrap_or_default()
    };
    let sections = gimli::DwarfSections::load(|id| Ok::<_, ()>(section(id))).unwrap();
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian));
    // (name, .debug_str offset, unit number, DIE offset in the unit, tag)
    let mut named: Vec<(Vec<u8>, u32, u32, u32, u16)> = Vec::new();
    let mut units = Vec::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next().unwrap() {
        let unit_number = u32::try_from(units.len()).unwrap();
        units.push(header.debug_info_offset().unwrap().0 as u32);
        let unit = dwarf.unit(header).unwrap();
        let mut tree = unit.entries_tree(None).unwrap();
        let mut children = tree.root().unwrap().children();
        while let Some(child) = children.next().unwrap() {
            let entry = child.entry();
            let tag = entry.tag();
            let is_type = [
                constants::DW_TAG_typedef,
                constants::DW_TAG_structure_type,
                constants::DW_TAG_union_type,
                constants::DW_TAG_enumeration_type,
                constants::DW_TAG_base_type,
            ]
            .contains(&tag);
            let declared = entry.attr_value(constants::DW_AT_declaration).is_some();
            let at = match entry.attr_value(constants::DW_AT_name) {
                Some(AttributeValue::DebugStrRef(at)) => at.0 as u32,
                Some(AttributeValue::DebugStrOffsetsIndex(i)) => {
                    dwarf.string_offset(&unit, i).unwrap().0 as u32
                }
                _ => continue,
            };
            if is_type && !declared {
                let name = dwarf
                    .debug_str
                    .get_str(gimli::DebugStrOffset(at as usize))
                    .unwrap();
                named.push((
                    name.to_vec(),
                    at,
                    unit_number,
                    entry.offset().0 as u32,
                    tag.0,
                ));
            }
        }
    }
    // Names once each, by bucket; a name's entries together.
    let hash = |name: &[u8]| {
        name.iter().fold(5381u32, |h, &b| {
            h.wrapping_mul(33).wrapping_add(u32::from(b))
        })
    };
    let mut names: Vec<(Vec<u8>, u32)> = named.iter().map(|n| (n.0.clone(), n.1)).collect();
    names.sort();
    names.dedup_by(|a, b| a.0 == b.0);
    let buckets = u32::try_from(names.len()).unwrap().max(1);
    names.sort_by_key(|(name, _)| (hash(name) % buckets, name.clone()));
    let tags: Vec<u16> = {
        let mut tags: Vec<u16> = named.iter().map(|n| n.4).collect();
        tags.sort_unstable();
        tags.dedup();
        tags
    };
    let mut abbrevs = Vec::new();
    for (code, tag) in tags.iter().enumerate() {
        // Codes and tags below 128: one LEB byte each.
        abbrevs.extend([code as u8 + 1, *tag as u8, 1, 0x0f, 3, 0x13, 0, 0]);
    }
    abbrevs.push(0);
    let mut pool = Vec::new();
    let mut entry_offsets = Vec::new();
    for (name, _) in &names {
        entry_offsets.push(u32::try_from(pool.len()).unwrap());
        for n in named.iter().filter(|n| &n.0 == name) {
            let code = tags.iter().position(|t| *t == n.4).unwrap() as u8 + 1;
            pool.push(code);
            pool.push(u8::try_from(n.2).unwrap());
            pool.extend(n.3.to_le_bytes());
        }
        pool.push(0);
    }
    let mut bucket_firsts = vec![0u32; buckets as usize];
    for (i, (name, _)) in names.iter().enumerate().rev() {
        bucket_firsts[(hash(name) % buckets) as usize] = i as u32 + 1;
    }
    let mut body = Vec::new();
    body.extend(5u16.to_le_bytes());
    body.extend(0u16.to_le_bytes());
    for n in [
        units.len() as u32,
        0,
        0,
        buckets,
        names.len() as u32,
        abbrevs.len() as u32,
        0,
    ] {
        body.extend(n.to_le_bytes());
    }
    units.iter().for_each(|u| body.extend(u.to_le_bytes()));
    bucket_firsts
        .iter()
        .for_each(|b| body.extend(b.to_le_bytes()));
    names
        .iter()
        .for_each(|(n, _)| body.extend(hash(n).to_le_bytes()));
    names
        .iter()
        .for_each(|(_, at)| body.extend(at.to_le_bytes()));
    entry_offsets
        .iter()
        .for_each(|o| body.extend(o.to_le_bytes()));
    body.extend(&abbrevs);
    body.extend(&pool);
    let mut out = u32::try_from(body.len()).unwrap().to_le_bytes().to_vec();
    out.extend(body);
    out
}

/// A `.debug_names` table that names every unit's DIEs answers the type queries
/// without a scan of the units, with the same answers. gdb's own tables, which name
/// units and spell names gdb's way, are not trusted: those files are scanned.
#[test]
fn an_accelerator_table_answers_without_a_scan() {
    let dir = Scratch::new("accelerated");
    let scanned = |path: &Path| {
        let path = std::fs::canonicalize(path).unwrap();
        mqd_debuginfo::indexed_files().contains(&path)
    };
    let (prog, facts) = build_types(&dir, "prog", &["-gdwarf-5"]);
    let table = dir.path("names.bin");
    std::fs::write(&table, debug_names_of(&prog)).unwrap();
    let named = dir.path("named");
    let section = format!(".debug_names={}", table.display());
    run("objcopy", &[&"--add-section", &section, &prog, &named]);
    let space = space_of(&named, vec![]);
    // Names in .debug_str, present and absent: the table answers.
    for name in ["struct outer", "outer3_t", "struct opaque", "union number"] {
        let ty = space.find_type(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(
            space.type_size(ty),
            Some(facts[&format!("size:{name}")]),
            "{name}"
        );
    }
    assert!(space.find_type("no_such_type").is_none());
    assert!(!scanned(&named), "answered by the table");
    // GCC writes short names ("int") inline, where no table points: those are found by
    // a scan, and every answer is the scan's.
    check_types(&space, &facts, "with .debug_names");
    assert!(scanned(&named), "inline names are scanned for");

    let by_gdb = dir.path("by-gdb");
    std::fs::copy(&prog, &by_gdb).unwrap();
    run("gdb-add-index", &[&"-dwarf-5", &by_gdb]);
    let space = space_of(&by_gdb, vec![]);
    check_types(&space, &facts, "with gdb's .debug_names");
    assert!(scanned(&by_gdb), "gdb's table is not trusted");
}

/// A program whose units span many pages, read from memory and from its file: the
/// pages a scan gives back to the kernel are a mapping's only, never bytes held in
/// memory (they would read back as zeros).
#[test]
fn scanned_pages_are_released_from_mappings_only() {
    let dir = Scratch::new("pages");
    let mut header = String::new();
    for i in 0..600 {
        header.push_str(&format!(
            "typedef struct s{i} {{ int a; long b; char name[16]; struct s{i} *self; \
             union {{ int u; double d; }}; short tail[4]; }} s{i}_t;\n"
        ));
    }
    dir.write("big.h", &header);
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"-g", &"-O0", &"-fno-eliminate-unused-debug-types", &"-o"];
    let prog = dir.path("big");
    args.push(&prog);
    let sources: Vec<PathBuf> = (0..8)
        .map(|unit| {
            let main = if unit == 0 {
                "int main(void) { return 0; }\n"
            } else {
                ""
            };
            dir.write(
                &format!("u{unit}.c"),
                &format!("#include \"big.h\"\nint unit{unit};\n{main}"),
            )
        })
        .collect();
    for source in &sources {
        args.push(source);
    }
    gcc(&args);
    let image = std::fs::read(&prog).unwrap();
    for space in [
        space_of(&prog, vec![]),
        AddressSpace::from_elf_image("big", image).unwrap(),
    ] {
        for i in [0, 299, 599] {
            let ty = space
                .find_type(&format!("s{i}_t"))
                .unwrap_or_else(|| panic!("s{i}_t in {space:?}"));
            assert_eq!(space.field_offset(ty, "d"), Some(40), "s{i}_t");
            assert_eq!(space.type_size(ty), Some(56), "s{i}_t");
        }
    }
}
