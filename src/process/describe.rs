//! One queue element as an `mqs_pending_operation`, with the library's notes.

use super::*;
use mqd_abi::notes::{COLLECTIVE_INTERNAL, REMOTE_GROUP, RENDEZVOUS_PREFIX, REQUEST_PREFIX};

impl ProcessInfo {
    /// Fills `out` with entry `e` of `comm` from the queue of `class`.
    pub(super) fn describe(
        &self,
        out: &mut mqs_pending_operation,
        e: &Entry,
        comm: &Comm,
        class: OpClass,
        flavour: Flavour,
    ) {
        // SAFETY: all-zero is a valid mqs_pending_operation.
        *out = unsafe { std::mem::zeroed() };
        let mut lines = ExtraText::new(&mut out.extra_text);
        out.desired_length = e.count as _;
        out.buffer = e.buffer as _;
        out.actual_local_rank = -1;
        out.actual_global_rank = -1;
        out.actual_tag = -1;
        // What the program would not recognise as its own operation comes first.
        if e.collective {
            lines.line(format_args!("{COLLECTIVE_INTERNAL}"));
        }
        match class {
            OpClass::PendingReceives => {
                let any_source = e.peer == MPI_ANY_SOURCE;
                let any_tag = e.tag == MPI_ANY_TAG;
                out.status = if e.complete {
                    mqs_status::mqs_st_complete as i32
                } else {
                    mqs_status::mqs_st_pending as i32
                };
                out.desired_local_rank = if any_source { -1 } else { e.peer as _ };
                out.desired_global_rank = if any_source {
                    -1
                } else {
                    self.world_rank(comm, e.peer) as _
                };
                out.tag_wild = any_tag as i32;
                out.desired_tag = e.tag as _;
                if let Some((source, tag)) = e.status {
                    out.actual_local_rank = source as _;
                    out.actual_global_rank = self.world_rank(comm, source) as _;
                    out.actual_tag = tag as _;
                    out.actual_length = e.count as _;
                }
                if !e.collective {
                    lines.line(format_args!("posted receive (MPI_Recv/MPI_Irecv)"));
                }
                match (any_source, any_tag) {
                    (true, true) => {
                        lines.line(format_args!("from MPI_ANY_SOURCE, tag MPI_ANY_TAG"))
                    }
                    (true, false) => lines.line(format_args!("from MPI_ANY_SOURCE")),
                    (false, true) => lines.line(format_args!("tag MPI_ANY_TAG")),
                    (false, false) => {}
                }
                if e.single_process {
                    // CH4's self queue keeps no source: rank 0 is the only one there is.
                    lines.line(format_args!("on a single-process communicator"));
                }
            }
            OpClass::UnexpectedMessages => {
                out.status = mqs_status::mqs_st_pending as i32;
                out.system_buffer = 1;
                out.desired_local_rank = e.peer as _;
                out.desired_global_rank = self.world_rank(comm, e.peer) as _;
                out.desired_tag = e.tag as _;
                out.actual_local_rank = out.desired_local_rank;
                out.actual_global_rank = out.desired_global_rank;
                out.actual_tag = out.desired_tag;
                // The status holds the size even where CH3 leaves recv_data_sz stale
                // (messages a rank sent to itself).
                let length = e.status_count.or(e.data_size).unwrap_or(e.count);
                out.desired_length = length as _;
                out.actual_length = length as _;
                lines.line(format_args!("unexpected message: no receive posted yet"));
                match (e.message_kind, e.data_size, flavour) {
                    (2, ..) => lines.line(format_args!(
                        "{RENDEZVOUS_PREFIX}{length} bytes still at the sender"
                    )),
                    (3, ..) if e.single_process => lines.line(format_args!(
                        "sent to itself: count {length} in its send buffer"
                    )),
                    (3, ..) => lines.line(format_args!(
                        "sent to itself: {length} bytes in its send buffer"
                    )),
                    (_, Some(_), _) => lines.line(format_args!("{length} bytes buffered by MPICH")),
                    (_, None, Flavour::Ch4Am) => lines.line(format_args!("length in bytes")),
                    (_, None, Flavour::Debugq4 | Flavour::Debugq5) => {
                        lines.line(format_args!("length not recorded by this MPICH"))
                    }
                    (_, None, Flavour::Ch3) => {}
                }
            }
            OpClass::PendingSends => {
                out.status = if e.complete {
                    mqs_status::mqs_st_complete as i32
                } else {
                    mqs_status::mqs_st_pending as i32
                };
                out.desired_local_rank = e.peer as _;
                out.desired_global_rank = self.world_rank(comm, e.peer) as _;
                out.desired_tag = e.tag as _;
                out.actual_local_rank = out.desired_local_rank;
                out.actual_global_rank = out.desired_global_rank;
                out.actual_tag = out.desired_tag;
                out.actual_length = out.desired_length;
                match (flavour, e.collective) {
                    (_, true) => {}
                    (Flavour::Ch3 | Flavour::Ch4Am, false) => {
                        lines.line(format_args!("non-blocking send (MPI_Isend family)"))
                    }
                    (Flavour::Debugq4 | Flavour::Debugq5, false) => {
                        lines.line(format_args!("send (blocking or non-blocking)"))
                    }
                }
            }
        }
        // CH3 says whether an unexpected message's sender waits for it (synchronous
        // send) or went on (standard eager send): what a deadlock analysis needs.
        let sender = match (class, e.synchronous, e.message_kind) {
            (OpClass::UnexpectedMessages, Some(true), _) => Some(SenderNote::Waits),
            (OpClass::UnexpectedMessages, Some(false), 1) => Some(SenderNote::GoneOn),
            _ => None,
        };
        if e.complete && class == OpClass::UnexpectedMessages {
            match sender {
                Some(note) => lines.line(format_args!("{ALL_DATA_ARRIVED}; {}", note.text())),
                None => lines.line(format_args!("{ALL_DATA_ARRIVED}")),
            }
        } else if let (OpClass::UnexpectedMessages, Some(note)) = (class, sender) {
            lines.line(format_args!("{}", note.text()));
        } else if e.complete {
            lines.line(format_args!("completed, not yet waited or freed"));
        }
        if e.request != 0 {
            lines.line(format_args!("{REQUEST_PREFIX}{:x}", e.request));
        }
        if comm.inter {
            lines.line(format_args!("{REMOTE_GROUP}"));
        }
    }
}

/// Fills the five 64-byte lines of `extra_text`, each NUL-terminated.
pub(super) struct ExtraText<'a> {
    lines: &'a mut [[c_char; 64]; 5],
    used: usize,
}

impl<'a> ExtraText<'a> {
    pub(super) fn new(lines: &'a mut [[c_char; 64]; 5]) -> Self {
        ExtraText { lines, used: 0 }
    }

    pub(super) fn line(&mut self, text: std::fmt::Arguments<'_>) {
        let Some(slot) = self.lines.get_mut(self.used) else {
            return;
        };
        let mut bytes = [0u8; 63];
        let mut cursor = std::io::Cursor::new(&mut bytes[..]);
        // A line longer than 63 bytes is cut; the write error only says so.
        let _ = cursor.write_fmt(text);
        let len = cursor.position() as usize;
        for (dst, &b) in slot.iter_mut().zip(&bytes[..len]) {
            *dst = b as c_char;
        }
        slot[len.min(63)] = 0;
        self.used += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &[c_char; 64]) -> Vec<u8> {
        name.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    }

    #[test]
    fn extra_text_lines_are_cut_and_terminated() {
        let mut lines = [[1 as c_char; 64]; 5];
        let mut t = ExtraText::new(&mut lines);
        t.line(format_args!("{}", "y".repeat(100)));
        t.line(format_args!("short"));
        for _ in 0..5 {
            t.line(format_args!("more"));
        }
        assert_eq!(text(&lines[0]).len(), 63);
        assert_eq!(text(&lines[1]), b"short");
        assert_eq!(text(&lines[4]), b"more");
    }
}
