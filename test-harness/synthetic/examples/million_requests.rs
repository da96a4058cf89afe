//! How long a synthetic process of a million requests takes to describe and to build, per
//! layout, and the memory it maps (a measurement, not a test):
//!
//!   cargo run --release -p mqd-synthetic --example million_requests

use mqd_synthetic::{Arch, Layout, ProcessSpec};
use std::time::Instant;

fn main() {
    for layout in Layout::ALL {
        let start = Instant::now();
        let spec = ProcessSpec::big_queue(layout, Arch::LP64_LE, 100, 1_000_000);
        let spec_time = start.elapsed();
        let t = spec.build();
        let bytes = t.mapped_bytes();
        println!(
            "{}: spec {:?}, build {:?}, {} MiB mapped",
            layout.name(),
            spec_time,
            start.elapsed() - spec_time,
            bytes >> 20
        );
    }
}
