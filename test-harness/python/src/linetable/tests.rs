use super::*;
use std::process::Command;

/// The machine's own CPython says, for every code object of some of its standard
/// library, its location table and the line of each instruction (`co_lines`): the
/// decoder must agree on every code unit.
#[test]
fn locations_agree_with_the_interpreter_on_its_standard_library() {
    let script = r#"
import json, sys, types, inspect, argparse, json as j, collections, unittest.case as u
out = []
def walk(code):
    lines = {}
    for start, end, line in code.co_lines():
        for off in range(start, end, 2):
            lines[off] = line
    out.append({"table": code.co_linetable.hex(), "first": code.co_firstlineno,
                "lines": sorted(lines.items()), "size": len(code.co_code)})
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            walk(c)
for m in (inspect, argparse, j.decoder, collections, u):
    walk(compile(open(m.__file__).read(), m.__file__, "exec"))
print(json.dumps({"minor": sys.version_info[1], "codes": out}))
"#;
    let run = Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("python3 (scripts/test installs it)");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8(run.stdout).unwrap();
    let minor: u32 = field(&text, "\"minor\": ").unwrap().parse().unwrap();
    assert!(
        minor >= 11,
        "location tables are 3.11's and later's, this is 3.{minor}"
    );
    let mut checked = 0;
    for code in text.split("{\"table\": \"").skip(1) {
        let hex = &code[..code.find('"').unwrap()];
        let table: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let first: i32 = field(code, "\"first\": ").unwrap().parse().unwrap();
        let lines = &code[code.find("\"lines\": [").unwrap() + 10..];
        let lines = &lines[..lines.find("]]").map_or(0, |i| i + 1)];
        for pair in lines.split("], [") {
            let pair = pair.trim_matches(|c| c == '[' || c == ']');
            if pair.is_empty() {
                continue;
            }
            let (offset, line) = pair.split_once(", ").unwrap();
            let offset: u64 = offset.parse().unwrap();
            let want = line.parse::<u32>().ok();
            assert_eq!(
                line_of(Format::Locations, &table, first, offset),
                want,
                "offset {offset} of a code object at line {first}"
            );
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} instructions checked");
}

/// The text after `key` up to the next `,` or `]`.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    Some(&rest[..rest.find([',', '}']).unwrap_or(rest.len())])
}

#[test]
fn lnotab_pairs_add_lines_at_byte_offsets() {
    // def f():        line 10
    //     a = 1       line 11, bytes 0-3
    //     b = 2       line 12, bytes 4-7
    //     return a    line 14, bytes 8-...
    let table = [0, 1, 4, 1, 4, 2];
    let at = |o| line_of(Format::Lnotab, &table, 10, o);
    assert_eq!(
        [at(0), at(3), at(4), at(8), at(40)],
        [Some(11), Some(11), Some(12), Some(14), Some(14)]
    );
    // A negative line increment (a loop's test placed after its body).
    assert_eq!(line_of(Format::Lnotab, &[0, 3, 6, 0xfe], 1, 6), Some(2));
}

#[test]
fn pep626_ranges_carry_lines_and_minus_128_is_none() {
    // Bytes 0-5 line 5 (+0), 6-9 no line, 10-13 line 7 (+2 from 5).
    let table = [6, 0, 4, 0x80, 4, 2];
    let at = |o| line_of(Format::Pep626, &table, 5, o);
    assert_eq!(
        [at(0), at(5), at(6), at(10), at(13), at(14)],
        [Some(5), Some(5), None, Some(7), Some(7), None]
    );
}

#[test]
fn location_entries_of_every_kind() {
    let table = [
        // Short form (kind 0), 2 code units, a column byte: line + 0.
        0x80 | 1,
        0x12,
        // One-line form, kind 12: line + 2, one unit, two column bytes.
        0x80 | (12 << 3),
        4,
        9,
        // No columns, kind 13: svarint -3 (raw 7), 3 units.
        0x80 | (13 << 3) | 2,
        7,
        // Long form, kind 14: +70 (raw 140 = 12 + 2*64: bytes 0x40|12, 2), end line,
        // column and end column varints; 1 unit.
        0x80 | (14 << 3),
        0x40 | 12,
        2,
        0,
        5,
        9,
        // No location, kind 15: 1 unit.
        0x80 | (15 << 3),
    ];
    let at = |units: u64| line_of(Format::Locations, &table, 20, 2 * units);
    assert_eq!(
        (0..9).map(at).collect::<Vec<_>>(),
        [
            Some(20),
            Some(20),
            Some(22),
            Some(19),
            Some(19),
            Some(19),
            Some(89),
            None,
            None
        ]
    );
    // A byte that is no entry's header: nothing is made up.
    assert_eq!(line_of(Format::Locations, &[0x12], 20, 0), None);
}

proptest::proptest! {
    /// Any bytes: a line or none, never a panic.
    #[test]
    fn any_table_is_read_without_panicking(
        table in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        first in -5i32..100_000,
        offset in 0u64..300,
    ) {
        for format in [Format::Lnotab, Format::Pep626, Format::Locations] {
            let _ = line_of(format, &table, first, offset);
        }
    }
}
