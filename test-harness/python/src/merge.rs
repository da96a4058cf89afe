//! A thread's Python frames merged into its native stack, as `py-spy dump --native`
//! shows them: each native frame of the evaluation loop replaced by the Python frames
//! it was executing, the interpreter's own frames between and around them left out,
//! everything else (C extensions, the MPI library, the C library) kept.

use crate::frames::{PyFrame, PyThread};
use mqd_model::{Frame, Language, ThreadStack};

/// The interpreter's evaluation loop: one native frame per run of Python frames.
pub const EVAL_LOOP: &str = "_PyEval_EvalFrameDefault";

/// Merges `python` into `stack`; `interpreter` says whether an object (a frame's
/// `object`) is the interpreter's (its executable, or `libpython`). The interpreter's
/// frames inside the innermost Python frame are kept where they are its own work
/// (`take_gil`, a sort: only the C library's frames inside them), not the glue to an
/// extension's function. Where the two walks disagree (fewer evaluation loops than runs of Python
/// frames), the Python frames left are put outermost and the stack says so.
pub fn merge(stack: &mut ThreadStack, python: &PyThread, interpreter: &dyn Fn(&str) -> bool) {
    if python.frames.is_empty() {
        return;
    }
    let mut runs = runs(&python.frames).into_iter();
    let mut merged = Vec::with_capacity(stack.frames.len() + python.frames.len());
    // Innermost, before any frame of other code (an extension, the MPI library): what
    // the interpreter itself is doing.
    let mut own_work = true;
    for frame in std::mem::take(&mut stack.frames) {
        let ours = frame.object.as_deref().is_some_and(interpreter);
        if ours && frame.function.as_deref() == Some(EVAL_LOOP) {
            own_work = false;
            match runs.next() {
                Some(run) => merged.extend(run.iter().map(|f| python_frame(f))),
                // A loop entered that has not pushed its first frame yet.
                None => merged.push(frame),
            }
        } else if !ours {
            own_work &= frame.object.as_deref().is_some_and(system);
            merged.push(frame);
        } else if own_work {
            merged.push(frame);
        }
    }
    let left: Vec<&PyFrame> = runs.flatten().collect();
    if !left.is_empty() {
        merged.extend(left.into_iter().map(python_frame));
        stack.truncated.get_or_insert_with(|| {
            "the native walk ended before the interpreter's outer frames: the outermost Python frames are placed last".to_owned()
        });
    }
    stack.frames = merged;
}

/// An object of the C library or the dynamic loader: what the interpreter's own work
/// calls (locks, sleeps, allocation).
fn system(object: &str) -> bool {
    let name = object.rsplit('/').next().unwrap_or(object);
    [
        "libc.so",
        "libc-",
        "libpthread",
        "ld-linux",
        "libm.so",
        "linux-vdso",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The Python frames split into the runs one evaluation loop executes, innermost
/// first: a run ends with the frame that entered its loop.
fn runs(frames: &[PyFrame]) -> Vec<Vec<&PyFrame>> {
    let mut runs = vec![Vec::new()];
    for f in frames {
        runs.last_mut().expect("never empty").push(f);
        if f.entry {
            runs.push(Vec::new());
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

fn python_frame(f: &PyFrame) -> Frame {
    Frame {
        function: Some(f.function.clone()),
        file: Some(f.file.clone()),
        line: f.line,
        language: Some(Language::Python),
        ..Frame::default()
    }
}

#[cfg(test)]
mod tests;
