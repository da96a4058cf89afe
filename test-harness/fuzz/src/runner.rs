//! A fuzz loop in this process, without coverage feedback: every seed, then seeds
//! mutated AFL's way (bit and byte flips, interesting values, arithmetic, block
//! deletion, duplication and splicing) from a fixed random seed, so that a run is
//! repeatable. For CI's short runs and machines without AFL++; a campaign uses AFL++.

use crate::targets::{Target, run};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A failure: the input, and what the target said.
#[derive(Debug)]
pub struct Failure {
    /// The input that failed.
    pub input: Vec<u8>,
    /// The panic message, or "took N s".
    pub message: String,
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// Inputs run (seeds included).
    pub executions: u64,
    /// The first failure, which ended the run.
    pub failure: Option<Failure>,
}

/// How long a run goes on.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// At most this many inputs.
    pub executions: u64,
    /// At most this long.
    pub time: Duration,
    /// One input taking longer is a failure (a hang).
    pub per_input: Duration,
}

/// The checked-in seeds of `target`: `seeds/<name>/*` of this crate.
pub fn seeds(target: Target) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target.name());
    read_dir_files(&dir)
}

/// The inputs that once failed `target` (`regressions/<target>/`, named for the fault),
/// each run as a test ever since.
pub fn regressions(target: Target) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target.name());
    read_dir_files(&dir)
}

/// The files of a directory, by name; none when it does not exist.
pub fn read_dir_files(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Runs `target` on `seeds`, then on mutations of them, within `budget`.
pub fn fuzz(target: Target, seeds: &[Vec<u8>], budget: Budget, random_seed: u64) -> Report {
    let started = Instant::now();
    let mut rng = Rng(random_seed | 1);
    let executions = std::cell::Cell::new(0u64);
    let one = |input: Vec<u8>| -> Option<Failure> {
        executions.set(executions.get() + 1);
        let began = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run(target, &input)));
        let took = began.elapsed();
        match outcome {
            Err(panic) => Some(Failure {
                message: panic_message(&panic),
                input,
            }),
            Ok(()) if took > budget.per_input => Some(Failure {
                message: format!("took {:.1} s", took.as_secs_f64()),
                input,
            }),
            Ok(()) => None,
        }
    };
    let pool: Vec<Vec<u8>> = if seeds.is_empty() {
        vec![Vec::new()]
    } else {
        seeds.to_vec()
    };
    for seed in &pool {
        if let Some(failure) = one(seed.clone()) {
            return Report {
                executions: executions.get(),
                failure: Some(failure),
            };
        }
    }
    while executions.get() < budget.executions && started.elapsed() < budget.time {
        let base = &pool[rng.below(pool.len())];
        let other = &pool[rng.below(pool.len())];
        let input = mutate(base, other, &mut rng);
        if let Some(failure) = one(input) {
            return Report {
                executions: executions.get(),
                failure: Some(failure),
            };
        }
    }
    Report {
        executions: executions.get(),
        failure: None,
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// xorshift64*: small, fast, and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Values that make boundaries, as AFL's.
const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    u64::MAX,
];

/// One to eight stacked mutations of `base` (with `other` for splicing).
fn mutate(base: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = base.to_vec();
    for _ in 0..1 + rng.below(8) {
        if out.is_empty() {
            out.push(rng.next() as u8);
            continue;
        }
        let at = rng.below(out.len());
        match rng.below(8) {
            0 => out[at] ^= 1 << rng.below(8),
            1 => out[at] = rng.next() as u8,
            2 => {
                let width = [1, 2, 4, 8][rng.below(4)];
                let value = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                for (i, byte) in value.iter().take(width).enumerate() {
                    if let Some(slot) = out.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            3 => out[at] = out[at].wrapping_add(rng.below(70) as u8).wrapping_sub(35),
            4 => {
                let len = 1 + rng.below(out.len() - at).min(64);
                out.drain(at..at + len);
            }
            5 => {
                let len = 1 + rng.below(out.len() - at).min(64);
                let block = out[at..at + len].to_vec();
                let to = rng.below(out.len());
                out.splice(to..to, block);
            }
            6 if !other.is_empty() => {
                let from = rng.below(other.len());
                let len = 1 + rng.below(other.len() - from).min(256);
                let end = (at + len).min(out.len());
                out.splice(at..end, other[from..from + len].iter().copied());
            }
            _ => out.truncate(at + 1),
        }
    }
    out.truncate(1 << 20);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_repeatable_and_stay_bounded() {
        let base = vec![7u8; 100];
        let mut a = Rng(42);
        let mut b = Rng(42);
        for _ in 0..1000 {
            let (x, y) = (mutate(&base, &base, &mut a), mutate(&base, &base, &mut b));
            assert_eq!(x, y);
            assert!(x.len() <= 1 << 20);
        }
        let mut empty = Rng(1);
        assert!(!mutate(&[], &[], &mut empty).is_empty());
    }
}
