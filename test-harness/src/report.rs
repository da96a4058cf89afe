//! What `mqd` prints: a job's queues as JSON (schema `mqd/1`) or as text.
//!
//! The model is per rank: where the rank runs, and either the display the MQD
//! library gave for it or why there is none.

use crate::session::{CommunicatorView, Display, MqsError, Operation, OperationStatus, Queue};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Version of the JSON document; bumped on any incompatible change.
pub const SCHEMA: &str = "mqd/1";

/// One process of the job.
#[derive(Debug, Clone)]
pub struct RankDump {
    /// COMM_WORLD rank (-1 when unknown).
    pub rank: i32,
    /// Process id, when the process is live.
    pub pid: Option<i32>,
    /// Host it runs on.
    pub host: Option<String>,
    /// Executable path.
    pub executable: Option<String>,
    /// The library's has-queues message for the process.
    pub message: Option<String>,
    /// The display, or why there is none.
    pub outcome: Result<Display, String>,
}

/// A whole dump.
#[derive(Debug, Clone)]
pub struct JobDump {
    /// Path of the MQD library used.
    pub dll: String,
    /// Its `mqs_version_string`.
    pub dll_version: String,
    /// How the processes were found: "attach", "mpir", "mpi2dd", "demo".
    pub acquired_by: String,
    /// The starter's pid, for a job.
    pub starter_pid: Option<i32>,
    /// `MPIR_debug_abort_string` when the job is aborting.
    pub abort_message: Option<String>,
    /// The processes, in rank order.
    pub ranks: Vec<RankDump>,
}

fn error_json(e: &MqsError) -> Value {
    json!({ "code": e.code, "text": e.text, "message": e.message })
}

fn status_name(status: OperationStatus) -> Value {
    match status {
        OperationStatus::Pending => json!("pending"),
        OperationStatus::Matched => json!("matched"),
        OperationStatus::Complete => json!("complete"),
        OperationStatus::Other(n) => json!(n),
    }
}

fn operation_json(op: &Operation) -> Value {
    json!({
        "status": status_name(op.status),
        "desired_local_rank": op.desired_local_rank,
        "desired_global_rank": op.desired_global_rank,
        "tag_wild": op.tag_wild,
        "desired_tag": op.desired_tag,
        "desired_length": op.desired_length,
        "system_buffer": op.system_buffer,
        "buffer": op.buffer,
        "actual_local_rank": op.actual_local_rank,
        "actual_global_rank": op.actual_global_rank,
        "actual_tag": op.actual_tag,
        "actual_length": op.actual_length,
        "extra_text": op.extra_text,
    })
}

fn queue_json(queue: &Queue) -> Value {
    match queue {
        Queue::Operations(ops) => json!({
            "available": true,
            "operations": ops.iter().map(operation_json).collect::<Vec<_>>(),
            "error": null,
        }),
        Queue::NoInformation => json!({ "available": false, "operations": [], "error": null }),
        Queue::Error(e) => json!({ "available": false, "operations": [], "error": error_json(e) }),
    }
}

fn communicator_json(c: &CommunicatorView) -> Value {
    json!({
        "unique_id": c.unique_id,
        "name": c.name,
        "size": c.size,
        "local_rank": c.local_rank,
        "group": c.group,
        "group_error": c.group_error.as_ref().map(error_json),
        "pending_receives": queue_json(&c.pending_receives),
        "unexpected_messages": queue_json(&c.unexpected_messages),
        "pending_sends": queue_json(&c.pending_sends),
    })
}

/// A rank's members other than its communicators.
fn rank_header(r: &RankDump) -> Value {
    json!({
        "rank": r.rank,
        "pid": r.pid,
        "host": r.host,
        "executable": r.executable,
        "message": r.message,
        "error": r.outcome.as_ref().err(),
    })
}

/// [`communicator_json`], with each operation serialised on its own.
fn write_communicator_json(
    out: &mut impl std::io::Write,
    c: &CommunicatorView,
) -> std::io::Result<()> {
    let mut head = communicator_json(&c.clone_without_queues());
    let queues = [
        ("pending_receives", &c.pending_receives),
        ("unexpected_messages", &c.unexpected_messages),
        ("pending_sends", &c.pending_sends),
    ];
    if let Value::Object(members) = &mut head {
        for (key, _) in &queues {
            members.remove(*key);
        }
    }
    let head = serde_json::to_string(&head)?;
    out.write_all(head.strip_suffix('}').unwrap_or(&head).as_bytes())?;
    for (key, queue) in queues {
        let mut summary = queue_json(&match queue {
            Queue::Operations(_) => Queue::Operations(Vec::new()),
            other => other.clone(),
        });
        if let Value::Object(members) = &mut summary {
            members.remove("operations");
        }
        let summary = serde_json::to_string(&summary)?;
        write!(out, ",\"{key}\":")?;
        out.write_all(summary.strip_suffix('}').unwrap_or(&summary).as_bytes())?;
        out.write_all(b",\"operations\":[")?;
        for (i, op) in queue.ops().iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, &operation_json(op))?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"}")
}

impl CommunicatorView {
    /// A copy with empty queues (cheap even when the queues are huge).
    fn clone_without_queues(&self) -> CommunicatorView {
        CommunicatorView {
            unique_id: self.unique_id,
            local_rank: self.local_rank,
            size: self.size,
            name: self.name.clone(),
            group: self.group.clone(),
            group_error: self.group_error.clone(),
            pending_receives: Queue::NoInformation,
            unexpected_messages: Queue::NoInformation,
            pending_sends: Queue::NoInformation,
        }
    }
}

impl JobDump {
    /// The JSON document (schema [`SCHEMA`]).
    pub fn to_json(&self) -> Value {
        let ranks: Vec<Value> = self
            .ranks
            .iter()
            .map(|r| {
                let communicators = match &r.outcome {
                    Ok(d) => d.communicators.iter().map(communicator_json).collect(),
                    Err(_) => Vec::new(),
                };
                let mut rank = rank_header(r);
                rank["communicators"] = Value::Array(communicators);
                rank
            })
            .collect();
        let mut doc = self.to_json_header();
        doc["ranks"] = Value::Array(ranks);
        doc
    }

    /// Writes the same document as [`JobDump::to_json`] (compact, plus `extra`
    /// top-level members) without building it in memory first: a rank with a
    /// million queued operations streams out in one pass.
    pub fn write_json(
        &self,
        out: &mut impl std::io::Write,
        extra: &[(&str, Value)],
    ) -> std::io::Result<()> {
        let mut head = self.to_json_header();
        for (key, value) in extra {
            head[*key] = value.clone();
        }
        let head = serde_json::to_string(&head)?;
        // Objects are written whole but for their last member, the big array.
        out.write_all(head.strip_suffix('}').unwrap_or(&head).as_bytes())?;
        out.write_all(b",\"ranks\":[")?;
        for (i, r) in self.ranks.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let rank = serde_json::to_string(&rank_header(r))?;
            out.write_all(rank.strip_suffix('}').unwrap_or(&rank).as_bytes())?;
            out.write_all(b",\"communicators\":[")?;
            if let Ok(display) = &r.outcome {
                for (j, c) in display.communicators.iter().enumerate() {
                    if j > 0 {
                        out.write_all(b",")?;
                    }
                    write_communicator_json(out, c)?;
                }
            }
            out.write_all(b"]}")?;
        }
        out.write_all(b"]}\n")
    }

    fn to_json_header(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "dll": { "path": self.dll, "version": self.dll_version },
            "acquired_by": self.acquired_by,
            "starter_pid": self.starter_pid,
            "abort_message": self.abort_message,
        })
    }

    /// A readable listing per rank and communicator.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(abort) = &self.abort_message {
            let _ = writeln!(out, "job is aborting: {abort}\n");
        }
        for r in &self.ranks {
            let place = match (r.pid, &r.host) {
                (Some(pid), Some(host)) => format!(" (pid {pid} on {host})"),
                (Some(pid), None) => format!(" (pid {pid})"),
                _ => String::new(),
            };
            let _ = writeln!(out, "rank {}{place}", r.rank);
            match &r.outcome {
                Err(e) => {
                    let _ = writeln!(out, "  no message queues: {e}");
                }
                Ok(d) => {
                    for c in &d.communicators {
                        write_communicator(&mut out, c);
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

fn write_communicator(out: &mut String, c: &CommunicatorView) {
    let group = match &c.group {
        Some(g) => format!(", world ranks {}", ranks_text(g)),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  {:?}: rank {} of {}{group}",
        c.name, c.local_rank, c.size
    );
    for (label, queue) in [
        ("receive", &c.pending_receives),
        ("unexpected", &c.unexpected_messages),
        ("send", &c.pending_sends),
    ] {
        match queue {
            Queue::Operations(ops) => {
                for op in ops {
                    let _ = writeln!(out, "    {label:<10} {}", operation_text(op, label));
                }
            }
            Queue::NoInformation => {}
            Queue::Error(e) => {
                let _ = writeln!(out, "    {label:<10} error: {}", e.text);
            }
        }
    }
}

fn peer(local: i64, global: i64) -> String {
    match (local, global) {
        (l, _) if l < 0 => "any source".into(),
        (l, g) if g >= 0 && g != l => format!("{l} (world {g})"),
        (l, _) => l.to_string(),
    }
}

fn operation_text(op: &Operation, label: &str) -> String {
    let direction = match label {
        "send" => "to",
        _ => "from",
    };
    let tag = if op.tag_wild {
        "any".into()
    } else {
        op.desired_tag.to_string()
    };
    let status = match op.status {
        OperationStatus::Pending => "",
        OperationStatus::Matched => ", matched",
        OperationStatus::Complete => ", complete",
        OperationStatus::Other(_) => ", unknown status",
    };
    format!(
        "{direction} {} tag {tag} count {} buf {:#x}{status}",
        peer(op.desired_local_rank, op.desired_global_rank),
        op.desired_length,
        op.buffer
    )
}

/// "0-3,5,7-9".
pub fn ranks_text(ranks: &[i32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", ranks[i], ranks[j])
        } else if j == i + 1 {
            format!("{},{}", ranks[i], ranks[j])
        } else {
            ranks[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_json_is_the_document() {
        use crate::session::{Operation, OperationStatus};
        let op = Operation {
            status: OperationStatus::Complete,
            desired_local_rank: -1,
            desired_global_rank: -1,
            tag_wild: true,
            desired_tag: -1,
            desired_length: 3,
            system_buffer: false,
            buffer: 0x1000,
            actual_local_rank: 2,
            actual_global_rank: 5,
            actual_tag: 9,
            actual_length: 3,
            extra_text: vec!["posted receive".into()],
        };
        let comm = CommunicatorView {
            unique_id: 0x10,
            local_rank: 0,
            size: 2,
            name: "c \"quoted\"".into(),
            group: Some(vec![4, 5]),
            group_error: None,
            pending_receives: Queue::Operations(vec![op]),
            unexpected_messages: Queue::NoInformation,
            pending_sends: Queue::Operations(Vec::new()),
        };
        let rank = |n, outcome| RankDump {
            rank: n,
            pid: Some(100 + n),
            host: Some("h".into()),
            executable: None,
            message: None,
            outcome,
        };
        let job = JobDump {
            dll: "/x.so".into(),
            dll_version: "v".into(),
            acquired_by: "attach".into(),
            starter_pid: None,
            abort_message: None,
            ranks: vec![
                rank(
                    0,
                    Ok(Display {
                        communicators: vec![comm.clone(), comm],
                    }),
                ),
                rank(1, Err("gone".into())),
            ],
        };
        let mut out = Vec::new();
        job.write_json(&mut out, &[("verdict", json!("fine"))])
            .unwrap();
        let streamed: Value = serde_json::from_slice(&out).unwrap();
        let mut whole = job.to_json();
        whole["verdict"] = json!("fine");
        assert_eq!(streamed, whole);
        assert_eq!(whole["ranks"][1]["error"], "gone");
        assert_eq!(
            whole["ranks"][0]["communicators"][1]["pending_receives"]["operations"][0]["actual_global_rank"],
            5
        );
    }

    #[test]
    fn rank_ranges() {
        assert_eq!(ranks_text(&[0, 1, 2, 3, 5, 7, 8, 9]), "0-3,5,7-9");
        assert_eq!(ranks_text(&[3, 2, 1]), "3,2,1");
        assert_eq!(ranks_text(&[4, 5]), "4,5");
        assert_eq!(ranks_text(&[]), "");
    }
}
