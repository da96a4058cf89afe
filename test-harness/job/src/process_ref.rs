//! The process to dump, as the job's proctable names it (or a bare pid).

/// A process to dump, with what the job (proctable) says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRef {
    /// COMM_WORLD rank when a proctable gave it.
    pub rank: Option<i32>,
    /// Process id.
    pub pid: i32,
    /// Host name from the proctable.
    pub host: Option<String>,
    /// Executable from the proctable.
    pub executable: Option<String>,
}

impl ProcessRef {
    /// A bare pid.
    pub fn pid(pid: i32) -> ProcessRef {
        ProcessRef {
            rank: None,
            pid,
            host: None,
            executable: None,
        }
    }
}
