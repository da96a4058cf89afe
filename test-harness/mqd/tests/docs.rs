//! The documentation cannot rot: the README's quick start is run as written (its program,
//! its commands with this build's `mqd`, its output's lines checked in order), and every
//! relative link of the README and of `docs/` resolves.

mod support;

use mqd_fixtures::real_mpich;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::Scratch;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fenced block that follows the marker `<!-- quick-start: NAME -->` in `text`.
fn block<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let marker = format!("<!-- quick-start: {name} -->");
    let rest = text
        .split_once(&marker)
        .unwrap_or_else(|| panic!("the README has no {marker}"))
        .1;
    let mut lines = rest.lines().skip_while(|l| l.trim().is_empty());
    let fence = lines.next().unwrap_or_default();
    assert!(
        fence.starts_with("```"),
        "{marker} is not followed by a block"
    );
    lines.take_while(|l| !l.starts_with("```")).collect()
}

/// `text` with each number (`5`, `5.1`) written `#`.
fn numbers_out(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // Digits, and a point followed by more (not a sentence's full stop).
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        out.push('#');
    }
    out
}

#[test]
fn the_readmes_quick_start_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let scratch = Scratch::new("quick-start");
    let dir = scratch.path();
    std::fs::write(
        dir.join("ring.c"),
        block(&readme, "ring.c").join("\n") + "\n",
    )
    .unwrap();
    let commands = block(&readme, "commands");
    assert_eq!(commands.len(), 2, "a build and an mqd run: {commands:?}");
    // The build, as written.
    let build: Vec<&str> = commands[0].split_whitespace().collect();
    let built = Command::new(build[0])
        .args(&build[1..])
        .current_dir(dir)
        .output()
        .expect("the README's compiler");
    assert!(built.status.success(), "{:?}: {built:?}", commands[0]);
    // mqd run, as written, with this build's mqd.
    let run: Vec<&str> = commands[1].split_whitespace().collect();
    assert_eq!(run[0], "mqd", "{:?}", commands[1]);
    let mut command = Command::new(env!("CARGO_BIN_EXE_mqd"));
    command.args(&run[1..]).current_dir(dir);
    let said = real_mpich::run(command, Duration::from_secs(120));
    assert_eq!(
        said.status.and_then(|s| s.code()),
        Some(8),
        "{}",
        said.stderr
    );
    // Each line the README shows, in its order (its numbers may differ: a duration).
    let said_lines = numbers_out(&said.stderr);
    let mut rest = said_lines.as_str();
    for line in block(&readme, "output") {
        let line = numbers_out(line);
        match rest.find(&line) {
            Some(at) => rest = &rest[at + line.len()..],
            None => panic!(
                "the README shows {line:?}, which mqd run did not say in that order:\n{}",
                said.stderr
            ),
        }
    }
    // The demo of "The two commands": a deadlock, exit code 8.
    let mut demo = Command::new(env!("CARGO_BIN_EXE_mqd"));
    demo.arg("demo");
    let demo = real_mpich::run(demo, Duration::from_secs(120));
    assert_eq!(
        demo.status.and_then(|s| s.code()),
        Some(8),
        "{}",
        demo.stderr
    );
    assert!(
        String::from_utf8_lossy(&demo.stdout).contains("Deadlock: ranks 0 -> 1 -> 2 -> 3 -> 0"),
        "{}",
        demo.stderr
    );
    assert!(readme.contains("cargo run --release -p mqd -- demo"));
}

/// The relative link targets of Markdown `text`: `[words](target)` and `![alt](target)`,
/// outside code blocks and spans, without their `#anchor`.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans may hold brackets that are no links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or_default().trim();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                links.push(target.to_owned());
            }
            rest = &rest[end..];
        }
    }
    links
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_resolves() {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    assert!(guide.len() >= 10, "the guide's pages: {guide:?}");
    pages.extend(guide.iter().cloned());
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for link in relative_links(&text) {
            let target = page.parent().expect("a directory").join(&link);
            assert!(
                target.exists(),
                "{}: the link {link} leads nowhere",
                page.display()
            );
            checked += 1;
        }
    }
    // The README links every page of the guide.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for page in &guide {
        let name = page.file_name().unwrap().to_string_lossy();
        assert!(
            name == "README.md" || readme.contains(&format!("(docs/{name})")),
            "the README does not link docs/{name}"
        );
    }
    assert!(checked >= 15, "{checked} links checked");
    // A link that leads nowhere is found.
    assert_eq!(
        relative_links("see [a](missing.md#x) and `[b](code.md)` and [c](https://x.org)"),
        ["missing.md"]
    );
}

#[test]
fn the_readme_reads_in_five_minutes() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 320,
        "the README has {lines} lines: the detail goes to docs/"
    );
}
