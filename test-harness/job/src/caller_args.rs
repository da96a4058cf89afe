//! The MPI call a thread is in, read from the caller's side: where the MPI library has
//! no DWARF (every packaged MPI), the program's frame that called it still says which
//! function it called (its call instruction, through the PLT slot's relocation) and
//! what it passed (its DWARF call site, or the instructions that set up the argument
//! registers). The values mean what the library's ABI ([`mqd_mpi_abi::tables`]) says.

use crate::call_args::frame_registers;
use crate::signatures::Signature;
use mqd_debuginfo::call_site::Argument;
use mqd_debuginfo::cfi::Registers;
use mqd_debuginfo::stack::{Frame, StackReader};
use mqd_model::CallArguments;
use mqd_mpi_abi::comm_objects::CommObjects;
use mqd_mpi_abi::tables::{Abi, HandleKind};
use std::cell::RefCell;

/// The arguments of the MPI call `frames` (unwound from `start`) are in, read in the
/// frame of the program that called the MPI library; `None` when no frame is in MPI. A
/// communicator of the program's own is named by its members where `comms` reads its
/// object (in the process of COMM_WORLD rank `world_rank`, when known).
pub fn caller_arguments(
    reader: &StackReader,
    abi: &Abi,
    comms: Option<&CommObjects>,
    world_rank: Option<i32>,
    frames: &[Frame],
    start: &Registers,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Option<CallArguments> {
    let physical: Vec<&Frame> = frames.iter().filter(|f| !f.inlined).collect();
    // The outermost frame of the MPI library, and the program's frame that called it.
    let entry = physical.iter().rposition(|f| f.runtime)?;
    let caller = entry + 1;
    let caller_frame = physical.get(caller)?;
    // A thread the MPI library started is called by the C library, not the program.
    let file = caller_frame.object.as_deref().unwrap_or_default();
    let file = file.rsplit('/').next().unwrap_or(file);
    if mqd_debuginfo::stack::SYSTEM_LIBRARIES
        .iter()
        .any(|s| file.starts_with(s))
    {
        return None;
    }
    let return_address = caller_frame.address;
    let entry_name = physical[entry].function.as_deref().filter(|n| is_mpi(n));
    // A call the caller's side cannot name: the frame's own name, and why.
    let unread = |function: &str, why: String| {
        let mut arguments = CallArguments {
            function: function.to_owned(),
            ..CallArguments::default()
        };
        arguments.unknown.insert("call".to_owned(), why);
        Some(arguments)
    };
    let Some((regs, _)) = frame_registers(reader, &physical, start, caller, read) else {
        return unread(
            entry_name.unwrap_or("MPI"),
            "the caller's registers could not be recovered".into(),
        );
    };
    // The caller's own CFA: its DWARF frame base.
    let cfa = regs.pc().and_then(|pc| {
        let tables = reader.tables_at(pc.checked_sub(1)?)?;
        tables.unwind(&regs, false, read).map(|s| s.1)
    });
    let read = RefCell::new(read);
    let sized = |a: u64, size: usize| -> Option<u64> {
        let word = (read.borrow_mut())(a)?;
        Some(match size {
            8 => word,
            1..=7 => word & ((1u64 << (size * 8)) - 1),
            _ => return None,
        })
    };
    // The frame's own name and the call's must be the same MPI function.
    let same = |name: &str| is_mpi(name) && entry_name.is_none_or(|e| base(e) == base(name));
    let mut site = reader.call_site(return_address, &regs, &sized);
    let mut how = "the caller's call";
    if let (Ok(name), Some(function)) = (&site.callee, site.target)
        && !is_mpi(name)
    {
        // The caller called a function of its own that jumped on into MPI (a tail call).
        let other = |name: &str| is_mpi(name) && !same(name);
        let tail = reader.tail_call_site(function, return_address, &same, &other);
        site = match tail.callee {
            Ok(_) => {
                how = "a tail call from the function the caller called";
                tail
            }
            Err(why) => {
                return unread(
                    entry_name.unwrap_or("MPI"),
                    format!(
                        "the caller's call instruction calls {name}, not the MPI function, and {why}"
                    ),
                );
            }
        };
    }
    let called = match &site.callee {
        Ok(name) if same(name) => name.clone(),
        Ok(name) if is_mpi(name) => {
            return unread(
                entry_name.unwrap_or("MPI"),
                format!("the caller calls {name}, but the MPI frame is another function"),
            );
        }
        Ok(name) => {
            return unread(
                entry_name.unwrap_or("MPI"),
                format!("the caller's call instruction calls {name}, not the MPI function"),
            );
        }
        Err(why) => return unread(entry_name.unwrap_or("MPI"), why.clone()),
    };
    let Some(binding) = mqd_model::calls::binding(&called) else {
        return unread(&called, format!("{called} is not a call mqd knows"));
    };
    // A Fortran binding is named by its call; its arguments are passed by reference.
    let (function, called) = if binding.fortran {
        (
            format!(
                "{called} ({how}: the Fortran binding of {})",
                binding.call.name
            ),
            binding.call.name.to_owned(),
        )
    } else {
        (format!("{called} ({how})"), called)
    };
    let mut arguments = CallArguments {
        function,
        called: Some(called.clone()),
        ..CallArguments::default()
    };
    let Some(signature) = Signature::of(binding.call.name) else {
        return Some(arguments);
    };
    let entry = |n: u16| entry_value(reader, &physical, start, caller, n, &sized, 0);
    let values = site.arguments(signature.arguments(), &regs, cfa, &sized, &entry);
    let large = binding.large_count;
    let mut get = |name: &str, at: Option<usize>| -> Option<u64> {
        let result = values.get(at?)?;
        let (value, source) = match result {
            Ok(Argument { value, source }) => (*value, source.describe()),
            Err(why) => {
                arguments.unknown.insert(name.to_owned(), why.clone());
                return None;
            }
        };
        if !binding.fortran {
            arguments.sources.insert(name.to_owned(), source);
            return Some(value);
        }
        // Fortran's INTEGER (a count of a large-count binding: INTEGER(MPI_COUNT_KIND)).
        let size = if large && name == "count" { 8 } else { 4 };
        match sized(value, size) {
            Some(v) => {
                arguments.sources.insert(
                    name.to_owned(),
                    format!("the caller's memory at {value:#x} (passed by reference: its address from {source})"),
                );
                Some(v)
            }
            None => {
                arguments.unknown.insert(
                    name.to_owned(),
                    format!(
                        "passed by reference at {value:#x} (from {source}), which could not be read"
                    ),
                );
                None
            }
        }
    };
    let comm = get("comm", signature.comm);
    let peer = get(
        if signature.name.starts_with("Recv") || signature.name.contains("robe") {
            "source"
        } else {
            "dest"
        },
        signature.peer,
    );
    let tag = get("tag", signature.tag);
    let root = get("root", signature.root);
    let count = get("count", signature.message.map(|m| m.0));
    let datatype = get("datatype", signature.message.map(|m| m.1));
    let recv_peer = get("source", signature.receive.map(|r| r.0));
    let recv_tag = get("recvtag", signature.receive.map(|r| r.1));
    // A Fortran handle is converted as MPI_Comm_f2c and MPI_Type_f2c would.
    let mut convert = |name: &str, kind: HandleKind, value: Option<u64>| {
        let value = value?;
        if !binding.fortran {
            return Some(value);
        }
        match abi.from_fortran(kind, value, &mut **read.borrow_mut()) {
            Ok(c) => Some(c),
            Err(why) => {
                arguments.sources.remove(name);
                arguments.unknown.insert(
                    name.to_owned(),
                    format!("Fortran handle {}: {why}", value as u32 as i32),
                );
                None
            }
        }
    };
    let comm = convert("comm", HandleKind::Comm, comm);
    let datatype = convert("datatype", HandleKind::Datatype, datatype);
    arguments.comm = comm.map(|c| abi.handle(c));
    arguments.predefined = comm.and_then(|c| abi.predefined_comm(c)).map(str::to_owned);
    arguments.peer = peer.map(|p| abi.rank(p));
    arguments.tag = tag.map(|t| abi.tag(t));
    arguments.root = root.map(|r| abi.rank(r));
    arguments.recv_peer = recv_peer.map(|p| abi.rank(p));
    arguments.recv_tag = recv_tag.map(|t| abi.tag(t));
    // A count is an int, or an MPI_Count for a large-count binding.
    let count = count.map(|c| {
        if large {
            c
        } else {
            u64::from(c as u32 as i32 as u32)
        }
    });
    arguments.bytes = if signature.no_data {
        Some(0)
    } else {
        count
            .zip(datatype.and_then(|d| abi.datatype_size(d)))
            .and_then(|(c, s)| c.checked_mul(s))
    };
    if let Some(handle) = comm.filter(|_| arguments.predefined.is_none()) {
        let object = match comms {
            Some(comms) => comms.read(handle, world_rank, &mut **read.borrow_mut()),
            None => Err("the MPI library's objects are not read".into()),
        };
        match object {
            Ok(object) => {
                arguments.sources.insert(
                    "members".into(),
                    format!(
                        "the MPI library's communicator object at {:#x}",
                        object.address
                    ),
                );
                arguments.members = Some(object.members);
                arguments.context_id = Some(object.context_id);
                arguments.comm_address = Some(object.address);
            }
            Err(why) => {
                arguments.unknown.insert(
                    "members".into(),
                    format!("the communicator is the program's own, and its members are not known: {why}"),
                );
            }
        }
    }
    Some(arguments)
}

/// Most frames out an argument is followed through helpers that pass on their own.
const MAX_ENTRY_DEPTH: u32 = 4;

/// Argument register `number` (DWARF) as frame `index` of `physical` (unwound from
/// `start`) was entered: what frame `index + 1` passed at its call, as that call site
/// says, through that frame's own entry values in turn. `None` where not known, or where
/// the call there is not to frame `index`'s function (a tail call between them).
fn entry_value(
    reader: &StackReader,
    physical: &[&Frame],
    start: &Registers,
    index: usize,
    number: u16,
    sized: &dyn Fn(u64, usize) -> Option<u64>,
    depth: u32,
) -> Option<u64> {
    if depth >= MAX_ENTRY_DEPTH {
        return None;
    }
    let position = mqd_debuginfo::call_site::ARGUMENT_REGISTERS
        .iter()
        .position(|&r| r == number)?;
    let callee = physical.get(index)?;
    callee.function.as_ref()?;
    let function = callee.address.checked_sub(callee.offset)?;
    let outer = index + 1;
    let frame = physical.get(outer)?;
    let (regs, _) = frame_registers(reader, physical, start, outer, &mut |a| sized(a, 8))?;
    let cfa = regs.pc().and_then(|pc| {
        let tables = reader.tables_at(pc.checked_sub(1)?)?;
        tables
            .unwind(&regs, false, &mut |a| sized(a, 8))
            .map(|s| s.1)
    });
    let site = reader.call_site(frame.address, &regs, sized);
    if site.target != Some(function) {
        return None;
    }
    let entry = |n: u16| entry_value(reader, physical, start, outer, n, sized, depth + 1);
    let values = site.arguments(position + 1, &regs, cfa, sized, &entry);
    values.into_iter().nth(position)?.ok().map(|a| a.value)
}

/// An MPI procedure in any binding (`MPI_Ssend`, `PMPI_Ssend`, `mpi_ssend_`,
/// `mpi_ssend_f08ts_`...).
fn is_mpi(name: &str) -> bool {
    mqd_model::calls::canonical(name).is_some()
}

/// The call a name of any binding stands for: `MPI_Ssend` of `pmpi_ssend_`.
fn base(name: &str) -> Option<&'static str> {
    mqd_model::calls::canonical(name).map(|c| c.name)
}
