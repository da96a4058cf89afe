//! One process's display through an MQD library, into a rank of the model: what the
//! library says of its queues (or why it cannot), its MPI state, and its rank in
//! `MPI_COMM_WORLD` when nothing else gave it.

use crate::failure::{Failure, FailureKind};
use crate::session::{ProcessId, Session};
use mqd_abi::notes::SendListing;
use mqd_model::RankDump;
use mqd_target::{DebugInfo, Target};

/// The types every MQD library for MPICH needs from the debug information.
const MPICH_TYPES: [&[&str]; 3] = [
    &["MPIR_Comm_list"],
    &["MPIR_Comm", "MPID_Comm"],
    &["MPIR_Request", "MPID_Request"],
];

/// Whether the target's debug information describes MPICH's queue types.
pub fn has_mpich_types(target: &dyn DebugInfo) -> bool {
    MPICH_TYPES
        .iter()
        .all(|names| names.iter().any(|n| target.find_type(n).is_some()))
}

/// Why a process cannot have message queues, before asking the library.
pub fn not_debuggable(target: &dyn Target, debug_info: bool, hint: &str) -> Option<Failure> {
    let has = |s: &str| target.find_symbol(s).is_some();
    let mpi = has("MPIR_All_communicators") || has("MPIR_dll_name") || has("MPIR_debug_gate");
    let function = |s: &str| target.find_function(s).is_some();
    if !mpi && is_open_mpi(target) {
        return Some(Failure::of(
            FailureKind::NotMpi,
            target.name(),
            format!(
                "its MPI is Open MPI, whose message queues only Open MPI's own library (libompi_dbg_msgq.so) reads, and that library needs libmpi's debug types: here it has neither; its stacks still show where it is{hint}"
            ),
        ));
    }
    if !mpi && (function("PMPI_Init") || function("MPI_Init")) {
        return Some(Failure::of(
            FailureKind::NotMpi,
            target.name(),
            format!(
                "its MPI keeps no message queues for debuggers (no MPIR_All_communicators: MPICH and the MPIs built from it, such as Intel MPI, are packaged without --enable-debuginfo); its stacks still show where it is{hint}"
            ),
        ));
    }
    if !mpi {
        return Some(Failure::of(
            FailureKind::NotMpi,
            target.name(),
            format!(
                "it is not an MPI process, or is stripped of its symbol table: it has none of MPICH's debugger symbols (MPIR_All_communicators, MPIR_dll_name){hint}"
            ),
        ));
    }
    if !debug_info {
        return Some(Failure::of(
            FailureKind::NoDebugInfo,
            target.name(),
            format!(
                "it has no debug information: build MPICH (and the program) with -g / --enable-debuginfo and do not strip it, or install its separate debug files{hint}"
            ),
        ));
    }
    None
}

/// Whether the process runs Open MPI (its predefined communicator objects).
fn is_open_mpi(target: &dyn Target) -> bool {
    target.find_symbol("ompi_mpi_comm_world").is_some()
}

/// A library's failure on an Open MPI process in words that say its cause and what to
/// do: Open MPI's own library names only the type it missed, which a stripped libmpi
/// does not have; an MPICH library (mqd's own, where the job's is missing) finds none of
/// MPICH's types, which is no fault of the build.
fn explained_open_mpi(message: String) -> String {
    if message.contains("MPIR_") {
        return "its MPI is Open MPI, whose message queues only Open MPI's own library (libompi_dbg_msgq.so) reads, and it is not here; its stacks still show where it is".into();
    }
    let bare_type = !message.is_empty()
        && message
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if bare_type {
        return format!(
            "Open MPI's message-queue library needs libmpi's debug types and found no {message}: the distribution strips them (install libmpi's debug symbols, on Debian the openmpi dbgsym packages of the debian-debug archive, or use an Open MPI built with -g); its stacks still show where it is"
        );
    }
    message
}

/// A library's failure on an Intel MPI process without MPICH's types, in words that say
/// its cause: Intel MPI keeps MPICH's debugger symbols but ships libmpi without the
/// types of what they point to, which no build option of the program changes.
fn explained_intel_mpi(message: String) -> String {
    // The library's own reason, without the process's name and its guesses at a cause.
    let reason = message
        .rsplit_once("': ")
        .map_or(message.as_str(), |(_, r)| r);
    let reason = reason.split(". Likely cause").next().unwrap_or(reason);
    format!(
        "its MPI is Intel MPI, which keeps MPICH's debugger symbols but ships libmpi without the types of the objects they point to ({reason}), so no library can read its queues; its stacks and its calls' arguments still show where it is and what it waits for"
    )
}

/// One process (live or core) through the library: its has-queues message and display
/// go into `dump`, and so does its rank when no proctable gave it (its rank in
/// COMM_WORLD). A failure is recorded in `dump` and returned.
pub fn display_into(
    debugger: &mut Session,
    target: Box<dyn Target>,
    debug_info: bool,
    hint: &str,
    rank: Option<i32>,
    dump: &mut RankDump,
) -> Result<(), Failure> {
    let failed = |dump: &mut RankDump, f: Failure| {
        dump.outcome = Err(f.cause.clone());
        Err(f)
    };
    if let Some(f) = not_debuggable(target.as_ref(), debug_info, hint) {
        return failed(dump, f);
    }
    // Asked before the target goes to the session: a library that finds no queues in a
    // process whose debug information lacks MPICH's types is missing debug information.
    let typed = has_mpich_types(target.as_ref());
    let open_mpi = is_open_mpi(target.as_ref());
    let intel = target.find_function("I_MPI_Check_image_status").is_some();
    let name = target.name();
    // A failure in the words of what the process runs.
    let explained = |message: String| {
        if open_mpi {
            explained_open_mpi(message)
        } else if intel && !typed {
            explained_intel_mpi(message)
        } else {
            message
        }
    };
    let p = match debugger.add_process(target, rank.unwrap_or(-1)) {
        Ok(p) => p,
        Err(e) => {
            let message = e.message.clone().unwrap_or_else(|| e.text.clone());
            let message = message.strip_prefix("mqd: ").unwrap_or(&message).to_owned();
            let message = explained(message);
            let kind = if typed {
                FailureKind::NotMpi
            } else {
                FailureKind::NoDebugInfo
            };
            return failed(dump, Failure::of(kind, name, message));
        }
    };
    display_process(debugger, p, dump);
    if let Err(message) = &mut dump.outcome {
        *message = explained(std::mem::take(message));
    }
    if rank.is_none()
        && let Some(world) = dump
            .communicators()
            .iter()
            .find(|c| c.name == "MPI_COMM_WORLD")
    {
        dump.rank = world.local_rank as i32;
    }
    Ok(())
}

/// The has-queues message and display of a process of the session, into `dump`.
pub fn display_process(debugger: &mut Session, p: ProcessId, dump: &mut RankDump) {
    dump.message = debugger.process_message(p).map(str::to_owned);
    dump.lists_blocking_sends = lists_blocking_sends(dump.message.as_deref());
    dump.outcome = debugger.display(p).map(|d| d.communicators).map_err(|e| {
        format!("{} {}", e.text, e.message.unwrap_or_default())
            .trim()
            .to_owned()
    });
    dump.mpi = debugger.mpi_state(p);
}

/// Whether a process's send queues list blocking sends, as its has-queues message says
/// (`None`: the library does not say).
pub fn lists_blocking_sends(message: Option<&str>) -> Option<bool> {
    message
        .and_then(SendListing::find)
        .map(|l| l == SendListing::All)
}

/// A rank nothing was read of yet.
pub fn blank_rank(rank: i32, pid: Option<i32>, executable: Option<String>) -> RankDump {
    RankDump::unread(rank, pid, executable)
}

#[cfg(test)]
mod tests {
    use super::explained_open_mpi;

    #[test]
    fn a_bare_missing_type_becomes_its_cause_and_what_to_do() {
        let words = explained_open_mpi("opal_list_item_t".into());
        assert!(words.contains("found no opal_list_item_t"), "{words}");
        assert!(words.contains("install libmpi's debug symbols"), "{words}");
    }

    #[test]
    fn an_mpich_library_on_open_mpi_names_the_library_it_needs() {
        let words = explained_open_mpi("no symbol MPIR_All_communicators".into());
        assert!(words.contains("libompi_dbg_msgq.so"), "{words}");
    }

    #[test]
    fn intel_mpi_without_types_is_named_with_the_cause() {
        let words = super::explained_intel_mpi(
            "no message queues in 'rank 0 (pid 7, /x/ring)': type MPIR_Comm_list unknown to the debugger. Likely cause: MPICH built without --enable-debuginfo".into(),
        );
        assert_eq!(
            words,
            "its MPI is Intel MPI, which keeps MPICH's debugger symbols but ships libmpi without the types of the objects they point to (type MPIR_Comm_list unknown to the debugger), so no library can read its queues; its stacks and its calls' arguments still show where it is and what it waits for"
        );
    }

    #[test]
    fn a_sentence_is_kept_as_it_is() {
        let message = "could not read the communicator list at 0x10".to_owned();
        assert_eq!(explained_open_mpi(message.clone()), message);
    }
}
