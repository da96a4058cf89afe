//! Every thread's stack as the model holds it: the MPI library's frames marked, and the
//! arguments of the MPI call each thread is in.

use crate::call_args::CommLayout;
use crate::caller_args::caller_arguments;
use crate::records::{self, Records};
use mqd_debuginfo::AddressSpace;
use mqd_debuginfo::stack::{self, Runtime, StackReader};
use mqd_mpi_abi::comm_objects::CommObjects;
use mqd_mpi_abi::tables::Abi;
use mqd_target::Memory;

/// The MPI library as a runtime: the objects that define `PMPI_Init` (or Fortran's
/// `pmpi_init_`, or `pmpi_init_f08_` of Open MPI's `use mpi_f08` library), the libraries
/// they need and the plugins they load (Open MPI's components, libfabric's providers),
/// and the hang recorder's wrappers (the program calls MPI through them). A thread inside
/// them is inside MPI, whatever its frames are named.
pub const MPI: Runtime = Runtime {
    entry_points: &[
        "PMPI_Init",
        "pmpi_init_",
        "pmpi_init_f08_",
        mqd_recording::ENTRY,
    ],
    system: stack::SYSTEM_LIBRARIES,
};

/// The stacks of one process: its objects' unwinder, and MPICH's handle tables for the
/// arguments of MPI calls.
pub struct MpiStacks {
    reader: StackReader,
    /// A CPython in the process, whose Python frames are merged into its threads'.
    python: Option<mqd_python::Found>,
    layout: CommLayout,
    abi: Option<Abi>,
    /// The library's communicator objects, for the program's own communicators where
    /// the library has no DWARF.
    comms: Option<CommObjects>,
    /// The hang recorder's region, where the process has the recorder loaded.
    records: Option<Records>,
    /// Open MPI's Fortran bindings are loaded: they call `PMPI_` directly, so the
    /// recorder misses their calls and its collective counts may be short.
    fortran_unseen: bool,
    /// The messages the recorder counted, once its records are read.
    traffic: std::cell::RefCell<Option<mqd_model::Traffic>>,
    /// In or past `MPI_Finalize`, as the recorder saw it.
    phase: std::cell::Cell<Option<mqd_model::MpiPhase>>,
    /// A loaded object that calls the MPI's `PMPI_` procedures itself, and one it calls:
    /// its calls bypass the recorder, so its counts may fall short.
    bypass: Option<(String, String)>,
}

impl MpiStacks {
    /// The stacks of the objects of `space`.
    pub fn new(space: &AddressSpace) -> MpiStacks {
        MpiStacks::with_reader(space, StackReader::new(space, &MPI))
    }

    /// The stacks of a process: its objects and its vDSO (from `auxv`).
    pub fn for_process(
        space: &AddressSpace,
        auxv: &[(u64, u64)],
        memory: &dyn Memory,
    ) -> MpiStacks {
        MpiStacks::with_reader(space, StackReader::for_process(space, &MPI, auxv, memory))
    }

    fn with_reader(space: &AddressSpace, reader: StackReader) -> MpiStacks {
        // MPICH's handle tables, when its symbols are there to say so.
        let layout = if space.find_symbol("MPIR_Comm_builtin").is_some() {
            CommLayout::of(space)
        } else {
            CommLayout::default()
        };
        let abi = Abi::of(space);
        let records = Records::of(space);
        let bypass = records.and_then(|_| bypassing(space));
        MpiStacks {
            reader,
            python: python_of(space),
            layout,
            comms: abi.as_ref().map(|abi| CommObjects::of(space, abi)),
            abi,
            records,
            bypass,
            traffic: std::cell::RefCell::new(None),
            phase: std::cell::Cell::new(None),
            fortran_unseen: space.objects().iter().any(|(path, _)| {
                path.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("libmpi_mpifh") || n.starts_with("libmpi_usempi")
                })
            }),
        }
    }

    /// These stacks with Python frames merged in (`true`, the default) or not.
    pub fn python_frames(mut self, merge: bool) -> MpiStacks {
        if !merge {
            self.python = None;
        }
        self
    }

    /// The unwinder.
    pub fn reader(&self) -> &StackReader {
        &self.reader
    }

    /// The model's stack of a thread `reader` unwound, with the arguments of its MPI
    /// call read through `read` (8 bytes at an address), in the process of COMM_WORLD
    /// rank `world_rank` (when known).
    pub fn thread(
        &self,
        stack: stack::ThreadStack,
        world_rank: Option<i32>,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> mqd_model::ThreadStack {
        let call = stack.registers.as_ref().and_then(|regs| {
            // The library's own DWARF first (MPICH with debug information), else the
            // caller's side.
            match self
                .layout
                .call_arguments(&self.reader, &stack.frames, regs, read)
            {
                Some(mut call) => {
                    if let (Some(abi), Some(comm)) = (&self.abi, call.comm) {
                        call.predefined = abi.predefined_comm(comm as u64).map(str::to_owned);
                    }
                    Some(call)
                }
                None => {
                    let abi = self.abi.as_ref()?;
                    caller_arguments(
                        &self.reader,
                        abi,
                        self.comms.as_ref(),
                        world_rank,
                        &stack.frames,
                        regs,
                        read,
                    )
                }
            }
        });
        mqd_model::ThreadStack {
            openmp: None,
            tid: stack.tid,
            frames: stack.frames.into_iter().map(frame).collect(),
            truncated: stack.truncated,
            call,
        }
    }

    /// The model's stacks of `stacks`, their memory read from `memory`, in the process
    /// of COMM_WORLD rank `world_rank` (when known); Python frames merged in where the
    /// process runs CPython (why they could not be, in `notes`).
    pub fn threads(
        &self,
        stacks: Vec<stack::ThreadStack>,
        world_rank: Option<i32>,
        memory: &dyn Memory,
        notes: &mut Vec<String>,
    ) -> Vec<mqd_model::ThreadStack> {
        let mut pages = mqd_target::PageReader::new(memory);
        let mut read = |addr: u64| pages.word(addr);
        let mut threads: Vec<mqd_model::ThreadStack> = stacks
            .into_iter()
            .map(|s| self.thread(s, world_rank, &mut read))
            .collect();
        if let Some(found) = &self.records {
            self.take_records(found, memory, &mut threads, (world_rank, notes));
        }
        if let Some(python) = &self.python
            && let Err(why) = python.merge(&mut threads, memory)
        {
            notes.push(format!("Python frames not read: {why}"));
        }
        threads
    }

    /// The messages the hang recorder counted in the process whose threads were read
    /// last, where its records were read and agree with every thread's frames.
    pub fn traffic(&self) -> Option<mqd_model::Traffic> {
        self.traffic.borrow_mut().take()
    }

    /// In or past `MPI_Finalize`, where the recorder of the process read last says so.
    pub fn recorded_phase(&self) -> Option<mqd_model::MpiPhase> {
        self.phase.take()
    }

    /// The receive or synchronous send a recorded wait waits for, by its requests'
    /// handles (read where the call's argument points) in the recorder's request table;
    /// not where a loaded object calls the MPI itself (its requests are not kept).
    fn waited_request(
        &self,
        call: &mqd_recording::ThreadCall,
        (recording, abi): (&mqd_recording::Recording, &Abi),
        pages: &mut mqd_target::PageReader,
    ) -> Option<(mqd_recording::ThreadCall, records::Waited)> {
        if self.fortran_unseen || self.bypass.is_some() {
            return None;
        }
        let count = match call.name.as_str() {
            "MPI_Wait" => 1,
            "MPI_Waitall" | "MPI_Waitany" | "MPI_Waitsome" => call.request_count,
            _ => return None,
        };
        if count == 0 || count > records::WAITED_REQUESTS {
            return None;
        }
        // An `MPI_Request` is an `int` in the MPICH family, a pointer in Open MPI's ABI.
        let (size, mask) = match recording.header.abi {
            2 => (8, u64::MAX),
            _ => (4, 0xffff_ffff),
        };
        let array = call.requests?;
        let handles = (0..count)
            .map(|k| Some(pages.word(array + k * size)? & mask))
            .collect::<Option<Vec<u64>>>()?;
        records::waited_request(call, &recording.requests, &handles, abi)
    }

    /// Each thread's call as the hang recorder kept it, over what its frames said.
    fn take_records(
        &self,
        found: &Records,
        memory: &dyn Memory,
        threads: &mut [mqd_model::ThreadStack],
        (world_rank, notes): (Option<i32>, &mut Vec<String>),
    ) {
        let mut pages = mqd_target::PageReader::new(memory);
        let recording = match found.read(memory) {
            Ok(r) => r,
            Err(damage) => {
                notes.push(format!(
                    "the hang recorder is loaded but its records cannot be read ({damage}): calls are read from the frames"
                ));
                return;
            }
        };
        let Some(abi) = self.abi.clone().or_else(|| records::abi_of(&recording)) else {
            notes.push("the hang recorder's records name no MPI ABI this mqd knows: calls are read from the frames".into());
            return;
        };
        let mut taken = 0;
        let mut uncounted = false;
        // A thread its frames place in a call its record does not (stopped entering or
        // leaving it: a receive counted, its frames still in it): the counts are not
        // used.
        let mut agreed = true;
        for thread in threads.iter_mut() {
            match records::thread_record(&recording, thread.tid) {
                Some(mqd_recording::ThreadRecord::Whole {
                    call: Some(call), ..
                }) => {
                    let recorded = records::call_arguments(call, &abi, &recording.comms);
                    let mut merged = records::merge(recorded, thread.call.take());
                    if let Some((waited, what)) =
                        self.waited_request(call, (&recording, &abi), &mut pages)
                    {
                        let mut args = records::call_arguments(&waited, &abi, &recording.comms);
                        for source in args.sources.values_mut() {
                            *source = "the hang recorder's request table".into();
                        }
                        // Still the wait, waiting as what its request is.
                        args.function.clone_from(&merged.function);
                        args.called.clone_from(&merged.called);
                        merged = records::merge(args, Some(merged));
                        match what {
                            records::Waited::Receive => {}
                            records::Waited::SynchronousSend => merged.synchronous = true,
                            records::Waited::Collective(name) => merged.waits_for = Some(name),
                        }
                    }
                    if (self.fortran_unseen || self.bypass.is_some())
                        && merged.collective.take().is_some()
                    {
                        uncounted = true;
                    }
                    // The communicator's object, where the frames did not say it: what
                    // the queues name the communicator by.
                    if merged.comm_address.is_none()
                        && let Some(address) = merged.comm.and_then(|h| self.layout.object_of(h))
                    {
                        merged.comm_address = Some(address);
                        merged.context_id =
                            self.layout.context_id_at(address, &mut |a| pages.word(a));
                    }
                    thread.call = Some(merged);
                    taken += 1;
                }
                Some(mqd_recording::ThreadRecord::Torn { .. }) => {
                    agreed = false;
                    notes.push(format!(
                        "thread {}: stopped while the hang recorder wrote its record (entering or leaving a call): its call is read from its frames",
                        thread.tid
                    ));
                }
                Some(mqd_recording::ThreadRecord::Whole { call: None, .. }) | None => {
                    agreed &= thread.call.is_none();
                    if let Some(binding) = fortran_binding(thread) {
                        notes.push(format!(
                            "thread {}: in the Fortran binding {binding}, which this MPI does not route through its C procedure (Open MPI's call PMPI_ directly): the recorder did not see the call, read from its frames",
                            thread.tid
                        ));
                    }
                }
            }
        }
        if recording.header.overflow & mqd_recording::OVERFLOW_THREADS != 0 {
            notes.push(
                "the hang recorder ran out of thread slots: threads beyond them have no records"
                    .into(),
            );
        }
        if uncounted && self.fortran_unseen {
            notes.push("the hang recorder's collective counts are not used: Open MPI's Fortran bindings are loaded, and their calls bypass it".into());
        } else if uncounted && let Some((object, name)) = &self.bypass {
            notes.push(format!("the hang recorder's collective counts are not used: {object} calls the MPI's {name} and the like itself, bypassing it"));
        }
        if let Some((object, name)) = &self.bypass {
            notes.push(format!("the hang recorder's message counts prove nothing: {object} calls the MPI's {name} and the like itself, bypassing it"));
        }
        notes.push(format!(
            "the hang recorder's records read: {taken} thread(s) in an MPI call"
        ));
        let recorded_rank = recording
            .header
            .world_rank
            .and_then(|r| i32::try_from(r).ok());
        if world_rank.is_some_and(|r| recorded_rank.is_some_and(|s| s != r)) {
            notes.push(format!(
                "the hang recorder's records are of rank {}, not of this rank: its message counts are not used",
                recorded_rank.unwrap_or(-1)
            ));
            return;
        }
        self.phase.set(records::phase_of(&recording));
        if !agreed {
            notes.push("the hang recorder's message counts are not used: a thread was caught entering or leaving a call".into());
            return;
        }
        *self.traffic.borrow_mut() = Some(records::traffic_of(
            &recording,
            &abi,
            !self.fortran_unseen && self.bypass.is_none(),
            notes,
        ));
    }

    /// [`MpiStacks::threads`] of the process of `space` and `memory`, with what its
    /// OpenMP runtime says of each thread where `openmp` reads it.
    pub fn threads_of(
        &self,
        stacks: Vec<stack::ThreadStack>,
        world_rank: Option<i32>,
        (space, memory): (&AddressSpace, &dyn Memory),
        openmp: Option<&mut mqd_ompd_host::OpenMpReader>,
        notes: &mut Vec<String>,
    ) -> Vec<mqd_model::ThreadStack> {
        let os: Vec<mqd_ompd_host::callbacks::OsThread> = stacks
            .iter()
            .map(|s| mqd_ompd_host::callbacks::OsThread {
                tid: s.tid,
                pthread: s.thread_pointer,
            })
            .collect();
        let mut threads = self.threads(stacks, world_rank, memory, notes);
        if let Some(reader) = openmp {
            let name = |a: u64| self.reader.frames_at(a, false).pop()?.function;
            let line = |a: u64| frame(self.reader.frames_at(a, false).pop()?).source();
            let code = mqd_ompd_host::Code {
                function_at: &name,
                line_at: &line,
            };
            reader.read(space, memory, &os, &mut threads, notes, code);
        }
        threads
    }
}

/// The first loaded object that imports a `PMPI_` procedure (the MPI's own libraries
/// define them; a Fortran binding library or a profiling tool loaded before the recorder
/// calls them), with the procedure; each object's answer kept for the process's life.
pub(crate) fn bypassing(space: &AddressSpace) -> Option<(String, String)> {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Mutex;
    static KNOWN: Mutex<Option<HashMap<PathBuf, Option<String>>>> = Mutex::new(None);
    let mut known = KNOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let known = known.get_or_insert_with(HashMap::new);
    space.objects().iter().find_map(|(path, _)| {
        let name = known
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                // An object whose symbols cannot be read may call anything.
                mqd_debuginfo::dynsym::imports(path, "PMPI_")
                    .unwrap_or_else(|_| Some("procedures (its symbols cannot be read)".into()))
            })
            .clone()?;
        let object = path.file_name()?.to_string_lossy().into_owned();
        Some((object, name))
    })
}

/// The Fortran binding (`mpi_recv_`, `pmpi_recv__`, `mpi_recv_f08_`...) a thread's
/// frames say it is in, where they do.
fn fortran_binding(thread: &mqd_model::ThreadStack) -> Option<&str> {
    thread.frames.iter().rev().find_map(|f| {
        let name = f.function.as_deref()?;
        let call = name
            .strip_prefix("pmpi_")
            .or_else(|| name.strip_prefix("mpi_"))?;
        (call.ends_with('_') && call.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
            .then_some(name)
    })
}

/// A CPython runtime in the process of `space`, as its objects show it: `_PyRuntime`
/// by its symbol, else (a stripped `.symtab`, 3.10+) by the section it has to itself in
/// the object that defines the interpreter's API.
fn python_of(space: &AddressSpace) -> Option<mqd_python::Found> {
    const API: &str = "PyEval_EvalCode";
    let runtime = space
        .find_symbol("_PyRuntime")
        .or_else(|| space.section_of_definer(API, ".PyRuntime").map(|r| r.start));
    let objects: Vec<String> = space
        .objects()
        .into_iter()
        .map(|(p, _)| p.display().to_string())
        .filter(|p| mqd_python::minor_of_name(p).is_some())
        .collect();
    // Neither: a process that links the interpreter is scanned, any other is not one.
    if runtime.is_none() && (objects.is_empty() || space.find_function(API).is_none()) {
        return None;
    }
    Some(mqd_python::Found {
        runtime,
        data: match runtime {
            Some(_) => Vec::new(),
            None => [".data", ".bss"]
                .iter()
                .filter_map(|s| space.section_of_definer(API, s))
                .collect(),
        },
        version_at: space.find_symbol("Py_Version"),
        minor_by_name: objects.iter().find_map(|p| mqd_python::minor_of_name(p)),
        objects,
        pthread_tid: space.find_symbol("_thread_db_pthread_tid"),
    })
}

/// The model's frame of a frame of a stack.
pub fn frame(f: stack::Frame) -> mqd_model::Frame {
    mqd_model::Frame {
        address: f.address,
        function: f.function,
        object: f.object,
        offset: f.offset,
        file: f.file,
        line: f.line,
        inlined: f.inlined,
        mpi: f.runtime,
        language: None,
    }
}
