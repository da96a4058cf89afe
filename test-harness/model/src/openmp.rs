//! What an OpenMP runtime says of a thread, through its own debugging library (OMPD):
//! the thread's state, the parallel regions it is in, and its task.

use serde::{Deserialize, Serialize};

/// One thread as the OpenMP runtime sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenMpThread {
    /// Its state, named as in `omp-tools.h` without `ompt_state_`
    /// (`wait_barrier_implicit_parallel`); a value the library does not name is
    /// `state_0x…`. `None` where the runtime tracks no states (`OMP_DEBUG` unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The state's value (`ompt_state_t`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_value: Option<i64>,
    /// What it waits on (a lock's address, ...), where the state is a wait and says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_id: Option<u64>,
    /// Its number in its team (`thread-num-var`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_num: Option<i64>,
    /// The parallel regions it is in, innermost first; empty outside any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<OpenMpRegion>,
    /// The task it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<OpenMpTask>,
}

/// A parallel region.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenMpRegion {
    /// The region's number in its process: threads of one region share it.
    pub id: u32,
    /// Its team's size (`team-size-var`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_size: Option<i64>,
    /// Its nesting level (`levels-var`: 1 for an outermost region).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<i64>,
    /// The function whose `parallel` directive made it, from the stack of the thread
    /// that forked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The directive's source line ("solver.c:120").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenMpTask {
    /// The function it runs (the outlined body, or the runtime's wrapper of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// An implicit task (a region's thread's own), as opposed to an explicit `task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implicit: Option<bool>,
}

/// What a state means for the thread in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// Working (serial, parallel, a reduction...) or in the runtime's overhead.
    Working,
    /// Waiting at a barrier.
    Barrier,
    /// Waiting for tasks (`taskwait`, `taskgroup`).
    Tasks,
    /// Waiting for mutual exclusion (a lock, `critical`, `atomic`, `ordered`).
    Mutex,
    /// Waiting for a target device.
    Target,
    /// An idle thread of the pool, waiting for work.
    Idle,
    /// A value outside the groups `omp-tools.h` defines.
    Unknown,
}

impl OpenMpThread {
    /// What its state means, where it has one.
    pub fn kind(&self) -> Option<StateKind> {
        self.state_value.map(state_kind)
    }

    /// What it waits for until another thread of its process acts, when its state is
    /// such a wait ("OpenMP wait_barrier_implicit_parallel"): a barrier, tasks, a lock or
    /// other mutual exclusion, or work (an idle thread). A target device's wait ends by
    /// itself, and a working thread waits for nothing the runtime knows.
    pub fn waits_for_threads(&self) -> Option<String> {
        match self.kind()? {
            StateKind::Barrier | StateKind::Tasks | StateKind::Mutex | StateKind::Idle => {
                Some(format!("OpenMP {}", self.state.as_deref()?))
            }
            StateKind::Working | StateKind::Target | StateKind::Unknown => None,
        }
    }

    /// Its innermost region.
    pub fn region(&self) -> Option<&OpenMpRegion> {
        self.regions.first()
    }
}

/// What state `value` means, by the groups of `omp-tools.h`: work below 0x10, barrier
/// waits to 0x1f, task waits to 0x3f, mutex waits to 0x7f, target waits to 0xff; idle
/// 0x100, overhead 0x101.
pub fn state_kind(value: i64) -> StateKind {
    match value {
        0x000..=0x00f | 0x101 => StateKind::Working,
        0x010..=0x01f => StateKind::Barrier,
        0x020..=0x03f => StateKind::Tasks,
        0x040..=0x07f => StateKind::Mutex,
        0x080..=0x0ff => StateKind::Target,
        0x100 => StateKind::Idle,
        _ => StateKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_fall_in_the_groups_of_omp_tools_h() {
        assert_eq!(state_kind(0x001), StateKind::Working);
        assert_eq!(state_kind(0x101), StateKind::Working);
        assert_eq!(state_kind(0x011), StateKind::Barrier);
        assert_eq!(state_kind(0x015), StateKind::Barrier);
        assert_eq!(state_kind(0x020), StateKind::Tasks);
        assert_eq!(state_kind(0x041), StateKind::Mutex);
        assert_eq!(state_kind(0x082), StateKind::Target);
        assert_eq!(state_kind(0x100), StateKind::Idle);
        assert_eq!(state_kind(0x102), StateKind::Unknown);
        assert_eq!(state_kind(0x200), StateKind::Unknown);
        assert_eq!(state_kind(-1), StateKind::Unknown);
    }
}
