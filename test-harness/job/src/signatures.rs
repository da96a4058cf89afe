//! Where the arguments a wait depends on sit in the parameter lists of the blocking MPI
//! calls (0-based positions of the C bindings; `tests/mpi_abi.rs` checks every one
//! against the MPI standard's own list of parameters). Large-count `_c` bindings keep
//! the same positions.

/// The positions of one call's arguments that say what it waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signature {
    /// The call, without `MPI_`.
    pub name: &'static str,
    /// `comm`.
    pub comm: Option<usize>,
    /// `dest` or `source` (a point-to-point call's peer).
    pub peer: Option<usize>,
    /// `tag`.
    pub tag: Option<usize>,
    /// `root`.
    pub root: Option<usize>,
    /// A send's or receive's `count` and `datatype`.
    pub message: Option<(usize, usize)>,
    /// `MPI_Sendrecv`'s receive side: `source` and `recvtag`.
    pub receive: Option<(usize, usize)>,
    /// It carries no data (a barrier, communicator management).
    pub no_data: bool,
}

const fn p2p(name: &'static str, peer: usize, tag: usize, comm: usize) -> Signature {
    Signature {
        name,
        comm: Some(comm),
        peer: Some(peer),
        tag: Some(tag),
        root: None,
        message: None,
        receive: None,
        no_data: false,
    }
}

const fn message(name: &'static str) -> Signature {
    Signature {
        message: Some((1, 2)),
        ..p2p(name, 3, 4, 5)
    }
}

const fn collective(name: &'static str, comm: usize) -> Signature {
    Signature {
        name,
        comm: Some(comm),
        peer: None,
        tag: None,
        root: None,
        message: None,
        receive: None,
        no_data: false,
    }
}

/// A collective without data.
const fn synchronizing(name: &'static str, comm: usize) -> Signature {
    Signature {
        no_data: true,
        ..collective(name, comm)
    }
}

/// A collective whose `count` and `datatype` are its message at each member.
const fn reducing(name: &'static str, comm: usize) -> Signature {
    Signature {
        message: Some((2, 3)),
        ..collective(name, comm)
    }
}

const fn rooted(name: &'static str, root: usize, comm: usize) -> Signature {
    Signature {
        root: Some(root),
        ..collective(name, comm)
    }
}

/// The calls a rank blocks in whose arguments name peers and communicators.
pub const SIGNATURES: &[Signature] = &[
    message("Send"),
    message("Ssend"),
    message("Bsend"),
    message("Rsend"),
    message("Recv"),
    p2p("Probe", 0, 1, 2),
    p2p("Mprobe", 0, 1, 2),
    Signature {
        message: Some((1, 2)),
        receive: Some((8, 9)),
        ..p2p("Sendrecv", 3, 4, 10)
    },
    Signature {
        message: Some((1, 2)),
        receive: Some((5, 6)),
        ..p2p("Sendrecv_replace", 3, 4, 7)
    },
    synchronizing("Barrier", 0),
    Signature {
        message: Some((1, 2)),
        ..rooted("Bcast", 3, 4)
    },
    Signature {
        message: Some((2, 3)),
        ..rooted("Reduce", 5, 6)
    },
    reducing("Allreduce", 5),
    rooted("Gather", 6, 7),
    rooted("Scatter", 6, 7),
    rooted("Gatherv", 7, 8),
    rooted("Scatterv", 7, 8),
    collective("Allgather", 6),
    collective("Allgatherv", 7),
    collective("Alltoall", 6),
    collective("Alltoallv", 8),
    collective("Alltoallw", 8),
    collective("Reduce_scatter", 5),
    collective("Reduce_scatter_block", 5),
    reducing("Scan", 5),
    reducing("Exscan", 5),
    synchronizing("Comm_dup", 0),
    synchronizing("Comm_split", 0),
    synchronizing("Comm_create", 0),
    synchronizing("Comm_split_type", 0),
    collective("Neighbor_allgather", 6),
    collective("Neighbor_alltoall", 6),
    collective("Win_create", 4),
    collective("Win_allocate", 3),
];

impl Signature {
    /// The signature of an MPI function (`MPI_Ssend`, `PMPI_Recv_c`, `Bcast`).
    pub fn of(function: &str) -> Option<&'static Signature> {
        let name = function.strip_prefix('P').unwrap_or(function);
        let name = name.strip_prefix("MPI_").unwrap_or(name);
        let name = name.strip_suffix("_c").unwrap_or(name);
        SIGNATURES.iter().find(|s| s.name == name)
    }

    /// How many leading arguments hold all of these.
    pub fn arguments(&self) -> usize {
        [
            self.comm,
            self.peer,
            self.tag,
            self.root,
            self.message.map(|m| m.0.max(m.1)),
            self.receive.map(|r| r.0.max(r.1)),
        ]
        .into_iter()
        .flatten()
        .max()
        .map_or(0, |m| m + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard's parameters of each procedure, from the model's list of them.
    fn standard(name: &str) -> Vec<&'static str> {
        let list = include_str!("../../model/data/mpi-standard.tsv");
        let line = list
            .lines()
            .find(|l| l.split('\t').next() == Some(name))
            .unwrap_or_else(|| panic!("{name} is not in the standard's list"));
        let params = line.split('\t').nth(2).unwrap_or_default();
        params
            .split_whitespace()
            .map(|p| p.split(':').next().unwrap_or_default())
            .collect()
    }

    #[test]
    fn every_position_names_the_standards_parameter() {
        for s in SIGNATURES {
            let params = standard(&format!("MPI_{}", s.name));
            let at = |i: Option<usize>, names: &[&str], what: &str| {
                if let Some(i) = i {
                    let found = params.get(i).copied().unwrap_or("(none)");
                    assert!(
                        names.contains(&found),
                        "MPI_{}: {what} at {i} is {found}, not one of {names:?}",
                        s.name
                    );
                }
            };
            at(s.comm, &["comm"], "comm");
            at(s.peer, &["dest", "source"], "peer");
            at(s.tag, &["tag", "sendtag"], "tag");
            at(s.root, &["root"], "root");
            at(s.message.map(|m| m.0), &["count", "sendcount"], "count");
            assert!(!(s.no_data && s.message.is_some()), "MPI_{}", s.name);
            at(
                s.message.map(|m| m.1),
                &["datatype", "sendtype"],
                "datatype",
            );
            at(s.receive.map(|r| r.0), &["source"], "receive source");
            at(s.receive.map(|r| r.1), &["recvtag"], "receive tag");
        }
    }

    #[test]
    fn bindings_find_their_signature() {
        assert_eq!(Signature::of("PMPI_Ssend").map(|s| s.name), Some("Ssend"));
        assert_eq!(Signature::of("MPI_Send_c").map(|s| s.name), Some("Send"));
        assert_eq!(
            Signature::of("MPI_Sendrecv").map(|s| s.arguments()),
            Some(11)
        );
        assert!(Signature::of("MPI_Comm_rank").is_none());
    }
}
