//! Where an OpenMP process's parallel regions are: each placed at the directive that
//! made it, as the stack of the thread that forked it shows.

use crate::stack::{Frame, ThreadStack};

/// Whether a frame is a runtime's entry point that forks a parallel region (GCC's and
/// LLVM's ABIs, which Intel's and LLVM's runtimes both serve).
fn forks(frame: &Frame) -> bool {
    frame.function.as_deref().is_some_and(|n| {
        n.starts_with("GOMP_parallel")
            || n.starts_with("GOMP_teams")
            || n == "__kmpc_fork_call"
            || n == "__kmpc_fork_teams"
    })
}

/// Gives each region of a process's threads where its directive is: the caller of the
/// fork on the stack of the region's primary thread (thread 0 of it), and the line of
/// the outlined body's entry (`line_at` of its address: where compilers put the
/// directive), else the caller's line. A primary thread's forks, innermost first, are its
/// regions', innermost first: each fork on its stack made a region it is thread 0 of.
pub fn locate_regions(threads: &mut [ThreadStack], line_at: &dyn Fn(u64) -> Option<String>) {
    let mut sites: std::collections::HashMap<u32, (Option<String>, Option<String>)> =
        std::collections::HashMap::new();
    for t in threads.iter() {
        let Some(openmp) = t.openmp.as_ref().filter(|o| o.thread_num == Some(0)) else {
            continue;
        };
        let forks = (0..t.frames.len().saturating_sub(1)).filter(|&i| forks(&t.frames[i]));
        for (region, at) in openmp.regions.iter().zip(forks) {
            let caller = &t.frames[at + 1];
            // The body: the first frame inside the fork that is not the runtime's.
            let body = t.frames[..at]
                .iter()
                .rev()
                .find(|f| f.object != t.frames[at].object && !f.inlined && f.function.is_some());
            let directive = body.and_then(|f| line_at(f.address.checked_sub(f.offset)?));
            sites.entry(region.id).or_insert_with(|| {
                (
                    caller.function.clone(),
                    directive.or_else(|| caller.source()),
                )
            });
        }
    }
    for t in threads.iter_mut() {
        for region in t.openmp.iter_mut().flat_map(|o| o.regions.iter_mut()) {
            if let Some((function, source)) = sites.get(&region.id) {
                region.function.clone_from(function);
                region.source.clone_from(source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openmp::{OpenMpRegion, OpenMpThread};

    fn frame(function: &str, line: Option<u32>) -> Frame {
        Frame {
            function: Some(function.into()),
            file: line.map(|_| "solver.c".into()),
            line,
            ..Frame::default()
        }
    }

    fn thread(tid: i32, frames: Vec<Frame>, num: i64, regions: &[u32]) -> ThreadStack {
        ThreadStack {
            tid,
            frames,
            truncated: None,
            call: None,
            openmp: Some(OpenMpThread {
                thread_num: Some(num),
                regions: regions
                    .iter()
                    .map(|&id| OpenMpRegion {
                        id,
                        ..OpenMpRegion::default()
                    })
                    .collect(),
                ..OpenMpThread::default()
            }),
        }
    }

    #[test]
    fn each_region_is_placed_at_the_fork_of_its_primary_thread() {
        // Thread 0 of the inner region 0 (nested in region 1, which thread 9 forked at
        // solver.c:10): its innermost fork made region 0 at solver.c:20.
        let inner_primary = vec![
            frame("MPI_Recv", None),
            Frame {
                address: 0x110,
                offset: 0x10,
                object: Some("solver".into()),
                ..frame("inner._omp_fn.1", None)
            },
            Frame {
                object: Some("libiomp5.so".into()),
                ..frame("GOMP_parallel", Some(1))
            },
            frame("outer._omp_fn.0", Some(20)),
            frame("__kmp_invoke_microtask", None),
        ];
        let outer_primary = vec![
            frame("__kmp_join_barrier", None),
            frame("__kmpc_fork_call", None),
            frame("main", Some(10)),
        ];
        let mut threads = vec![
            thread(1, inner_primary, 0, &[0, 1]),
            thread(2, vec![frame("__kmp_suspend_64", None)], 1, &[0, 1]),
            thread(3, outer_primary, 0, &[1]),
            // A worker of region 1 at level 1: thread 1 there, no fork of its own.
            thread(
                4,
                vec![frame("GOMP_parallel", None), frame("x", Some(99))],
                1,
                &[1],
            ),
        ];
        // The outlined bodies' entries: the inner at 0x100 (solver.c:21), the outer's
        // line unknown (its caller's stays).
        let line_at = |a: u64| (a == 0x100).then(|| "solver.c:21".to_owned());
        locate_regions(&mut threads, &line_at);
        let site = |t: usize, r: usize| {
            let region = &threads[t].openmp.as_ref().unwrap().regions[r];
            (region.function.clone(), region.source.clone())
        };
        let inner = (Some("outer._omp_fn.0".into()), Some("solver.c:21".into()));
        let outer = (Some("main".into()), Some("solver.c:10".into()));
        assert_eq!(site(0, 0), inner);
        assert_eq!(site(1, 0), inner);
        assert_eq!(site(0, 1), outer);
        assert_eq!(site(2, 0), outer);
        assert_eq!(site(3, 0), outer);
    }
}
