//! The cache of type answers across `mqd` runs: a warm run reads no DWARF and prints
//! the same dump; `--no-cache`, a corrupt cache, an unwritable one and concurrent cold
//! runs change nothing in what is printed. Every test starts its rank and its own
//! cache directory, and removes both.

use mqd_fixtures as fixtures;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A cache directory of its own, removed however the test ends.
struct CacheDir(PathBuf);

impl CacheDir {
    fn new(what: &str) -> CacheDir {
        let dir =
            std::env::temp_dir().join(format!("mqd-type-cache-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        CacheDir(dir)
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.0)
            .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mqd(cache: &Path, extra: &[&str], pid: i32) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mqd"))
        .env("MQD_CACHE_DIR", cache)
        .args(["dump", "--json", "--stats"])
        .args(extra)
        .arg(pid.to_string())
        .output()
        .expect("run mqd")
}

/// The dump, and the files whose DWARF the run indexed.
fn dump(out: &Output) -> (Value, Vec<String>) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(dumped(out), "mqd failed ({}): {stderr}", out.status);
    let stats: Value = stderr
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no statistics line: {stderr}"));
    let indexed = stats["mqd_stats"]["indexed_debug_files"]
        .as_array()
        .expect("indexed_debug_files")
        .iter()
        .map(|f| f.as_str().expect("a path").to_owned())
        .collect();
    let doc = serde_json::from_slice(&out.stdout).expect("JSON dump");
    (doc, indexed)
}

/// A verdict: none (0), deadlock (8) or undetermined (9, a lone rank of a larger job);
/// anything else is a failure.
fn dumped(out: &Output) -> bool {
    matches!(out.status.code(), Some(0 | 8 | 9))
}

/// A rank asleep in its wait: every dump of it reads the same.
fn rank() -> fixtures::Rank {
    let rank = fixtures::spawn_rank(fixtures::DEBUGQ5, "ring", 0, 1).expect("start a fixture rank");
    rank.wait_asleep(Duration::from_secs(30))
        .expect("the rank sleeps in its wait");
    rank
}

#[test]
fn a_warm_run_reads_no_dwarf_and_prints_the_same_dump() {
    let mut rank = rank();
    let cache = CacheDir::new("warm");
    let (cold, indexed) = dump(&mqd(&cache.0, &[], rank.pid()));
    assert!(
        indexed.iter().any(|f| f.contains("mqd-fixture-debugq5")),
        "a cold run indexes the rank's program: {indexed:?}"
    );
    assert!(
        !cache.files().is_empty(),
        "answers kept in {}",
        cache.0.display()
    );
    let (warm, indexed) = dump(&mqd(&cache.0, &[], rank.pid()));
    assert_eq!(indexed, Vec::<String>::new(), "a warm run indexes nothing");
    assert_eq!(warm, cold);
    assert!(
        cold["ranks"][0]["communicators"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );

    let bypass = CacheDir::new("bypass");
    let (uncached, indexed) = dump(&mqd(&bypass.0, &["--no-cache"], rank.pid()));
    assert!(!indexed.is_empty(), "--no-cache reads the DWARF");
    assert_eq!(uncached, cold);
    assert!(bypass.files().is_empty(), "--no-cache writes nothing");
    assert!(rank.is_running());
}

#[test]
fn a_corrupt_cache_is_ignored_and_rewritten() {
    let mut rank = rank();
    let cache = CacheDir::new("corrupt");
    let (cold, _) = dump(&mqd(&cache.0, &[], rank.pid()));
    let files = cache.files();
    assert!(!files.is_empty());
    for (n, file) in files.iter().enumerate() {
        let text = std::fs::read(file).unwrap();
        let damaged = match n % 3 {
            // Truncated, a byte changed, or not ours at all.
            0 => text[..text.len() / 2].to_vec(),
            1 => {
                let mut t = text.clone();
                let at = t.len() / 3;
                t[at] = if t[at] == b'7' { b'8' } else { b'7' };
                t
            }
            _ => b"\x00\xffgarbage".to_vec(),
        };
        std::fs::write(file, damaged).unwrap();
    }
    let (again, indexed) = dump(&mqd(&cache.0, &[], rank.pid()));
    assert_eq!(again, cold, "a damaged cache changes nothing printed");
    assert!(!indexed.is_empty(), "damaged answers are not used");
    let (warm, indexed) = dump(&mqd(&cache.0, &[], rank.pid()));
    assert_eq!(
        indexed,
        Vec::<String>::new(),
        "the cache was rewritten whole"
    );
    assert_eq!(warm, cold);
    assert!(rank.is_running());
}

#[test]
fn an_unusable_cache_directory_costs_speed_only() {
    let mut rank = rank();
    let cache = CacheDir::new("unusable");
    // A file where the directory should be: nothing can be read or written there.
    std::fs::write(&cache.0, "not a directory").unwrap();
    let out = mqd(&cache.0, &[], rank.pid());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (doc, indexed) = dump(&out);
    assert!(!indexed.is_empty());
    assert_eq!(
        stderr.lines().count(),
        1,
        "only the statistics line, no complaint: {stderr}"
    );
    assert!(
        doc["ranks"][0]["communicators"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    let _ = std::fs::remove_file(&cache.0);
    assert!(rank.is_running());
}

#[test]
fn concurrent_cold_runs_agree_and_leave_a_whole_cache() {
    let mut rank = rank();
    let cache = CacheDir::new("concurrent");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_mqd"))
                .env("MQD_CACHE_DIR", &cache.0)
                .args(["dump", "--json", "--stats"])
                .arg(rank.pid().to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start mqd")
        })
        .collect();
    // Attaching is exclusive: the runs that found the rank traced report it, the
    // others dump it; what they dump is the same.
    let outputs: Vec<Output> = runs
        .into_iter()
        .map(|child| child.wait_with_output().expect("wait for mqd"))
        .collect();
    let dumps: Vec<Value> = outputs
        .iter()
        .filter(|o| dumped(o))
        .map(|o| dump(o).0)
        .collect();
    assert!(!dumps.is_empty(), "some run dumped the rank");
    assert!(dumps.windows(2).all(|w| w[0] == w[1]), "the runs disagree");
    let leftovers: Vec<_> = cache
        .files()
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let (warm, indexed) = dump(&mqd(&cache.0, &[], rank.pid()));
    assert_eq!(
        indexed,
        Vec::<String>::new(),
        "the cache is whole and complete"
    );
    assert_eq!(warm, dumps[0]);
    assert!(rank.is_running());
}
