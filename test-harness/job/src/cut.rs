//! One consistent cut of a job: every process stopped before any is let go.
//!
//! A dump of processes on one host stops them all before it reads any and lets them go
//! only after; across hosts, each host's dump says when its processes are stopped, and
//! holds them until the coordinator, once every host said so, releases them. What every
//! process showed then held at one moment: the moment the last one stopped.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Where the dumping side and the coordinating side of one host meet.
#[derive(Debug, Default)]
pub struct CutPoint {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    stopped: bool,
    released: bool,
}

impl CutPoint {
    /// A cut point nobody has reached.
    pub fn new() -> CutPoint {
        CutPoint::default()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state);
        self.changed.notify_all();
    }

    fn wait_for(&self, what: impl Fn(&State) -> bool, deadline: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while !what(&state) {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// The dumping side: every process it could attach is stopped.
    pub fn stopped(&self) {
        self.update(|s| s.stopped = true);
    }

    /// Whether the dumping side said its processes are stopped.
    pub fn is_stopped(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stopped
    }

    /// The coordinating side: waits until the processes are stopped, or `deadline`.
    pub fn wait_stopped(&self, deadline: Instant) -> bool {
        self.wait_for(|s| s.stopped, deadline)
    }

    /// The coordinating side: the processes may go (every host has stopped its own, or
    /// the cut was given up).
    pub fn release(&self) {
        self.update(|s| s.released = true);
    }

    /// The dumping side, its processes read: holds them until released or `deadline`;
    /// whether it was released.
    pub fn wait_release(&self, deadline: Instant) -> bool {
        self.wait_for(|s| s.released, deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_dump_is_held_until_released() {
        let cut = Arc::new(CutPoint::new());
        let soon = || Instant::now() + Duration::from_millis(50);
        assert!(!cut.wait_stopped(soon()));
        assert!(!cut.wait_release(soon()));
        let dumping = {
            let cut = cut.clone();
            std::thread::spawn(move || {
                cut.stopped();
                cut.wait_release(Instant::now() + Duration::from_secs(30))
            })
        };
        assert!(cut.wait_stopped(Instant::now() + Duration::from_secs(30)));
        assert!(cut.is_stopped());
        cut.release();
        assert!(dumping.join().expect("no panic"));
    }
}
