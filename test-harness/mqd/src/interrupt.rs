//! Ctrl-C and SIGTERM as requests, not deaths: `mqd` finishes the dump it is in (every
//! process is let go as it was), prints what it has, and ends what it started. The
//! handler only sets a flag; the command polls it between steps.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The signal asked for, 0 for none.
static REQUESTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn note(signal: libc::c_int) {
    REQUESTED.store(signal, Ordering::SeqCst);
}

/// Turns SIGINT, SIGTERM and SIGHUP into requests [`requested`] reports.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe;
        // the action is fully initialised before the call.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that asked `mqd` to stop, if one did.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Sleeps `duration`, waking early when a stop is requested; false when one was.
pub fn sleep(duration: Duration) -> bool {
    let end = Instant::now() + duration;
    while requested().is_none() {
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
    false
}

/// The exit code of a command a signal stopped: 128 + the signal, as shells report it.
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(130)
}
