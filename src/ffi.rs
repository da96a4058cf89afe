//! The 18 exported functions of `mpi_interface.h`.
//!
//! Each body runs inside [`guard`], which turns an error into its code and a
//! panic into [`Error::Internal`]: nothing unwinds into the debugger.

use crate::callbacks::{CImage, CProcess, ImageServices};
use crate::debugger::{self, basic, boxed, unbox};
use crate::error::{Error, Result};
use crate::layout::{self, ImageQuery, Layout, Missing};
use crate::process::{Addresses, OpClass, ProcessInfo};
use crate::target::{Sizes, Target};
use mqd_abi::types::*;
use std::ffi::{CStr, c_char, c_int};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};
use std::sync::Once;

/// What the library keeps per image, in debugger memory.
pub(crate) struct ImageInfo {
    callbacks: mqs_image_callbacks,
    layout: std::result::Result<Layout, Missing>,
    checked: bool,
    message: [c_char; 1024],
}

/// One call from the debugger: what the library finds behind a C handle is borrowed for
/// the call's extent (`'call`, which no value can outlive), never longer.
#[derive(Clone, Copy)]
struct Call<'call>(PhantomData<fn(&'call ()) -> &'call ()>);

fn guard(body: impl for<'call> FnOnce(Call<'call>) -> Result<c_int>) -> c_int {
    let call = Call(PhantomData);
    match catch_unwind(AssertUnwindSafe(|| body(call))) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => e.code(),
        Err(_) => Error::Internal.code(),
    }
}

fn image_info<'call>(_: Call<'call>, image: *mut mqs_image) -> Result<&'call mut ImageInfo> {
    if image.is_null() {
        return Err(Error::NullArgument);
    }
    let get = basic()?
        .mqs_get_image_info_fp
        .ok_or(Error::MissingCallback)?;
    // SAFETY: debugger callback; the pointer is one we stored with put_image_info.
    let info = unsafe { get(image) }.cast::<ImageInfo>();
    // SAFETY: non-null pointers stored there are our live ImageInfo values.
    unsafe { info.as_mut() }.ok_or(Error::NoImageInfo)
}

fn process_info<'call>(
    _: Call<'call>,
    process: *mut mqs_process,
) -> Result<&'call mut ProcessInfo> {
    if process.is_null() {
        return Err(Error::NullArgument);
    }
    let get = basic()?
        .mqs_get_process_info_fp
        .ok_or(Error::MissingCallback)?;
    // SAFETY: debugger callback; the pointer is one we stored with put_process_info.
    let info = unsafe { get(process) }.cast::<ProcessInfo>();
    // SAFETY: non-null pointers stored there are our live ProcessInfo values.
    unsafe { info.as_mut() }.ok_or(Error::NoProcessInfo)
}

fn image_of(
    process: *mut mqs_process,
    callbacks: &mqs_process_callbacks,
) -> Result<*mut mqs_image> {
    let get = callbacks.mqs_get_image_fp.ok_or(Error::MissingCallback)?;
    // SAFETY: debugger callback.
    let image = unsafe { get(process) };
    if image.is_null() {
        Err(Error::NoImageInfo)
    } else {
        Ok(image)
    }
}

/// Records the debugger's basic callbacks; called once before anything else.
///
/// # Safety
/// `callbacks` must stay valid for as long as the library is used (the debugger owns it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_setup_basic_callbacks(callbacks: *const mqs_basic_callbacks) {
    static QUIET_PANICS: Once = Once::new();
    let _ = catch_unwind(|| {
        // The default hook would print to stderr, which debuggers read as failure.
        QUIET_PANICS.call_once(|| {
            std::panic::set_hook(Box::new(|_| {
                debugger::dprint(c"mqd: internal error caught at the C boundary");
            }))
        });
        debugger::set_basic(callbacks);
    });
}

/// A human-readable version string.
#[unsafe(no_mangle)]
pub extern "C" fn mqs_version_string() -> *const c_char {
    static VERSION: &CStr =
        c"mqd message queue support for MPICH (ch3, ch4, debug queues 4.x and 5.x), version 0.1.0";
    VERSION.as_ptr()
}

/// The interface version implemented: 2.
#[unsafe(no_mangle)]
pub extern "C" fn mqs_version_compatibility() -> c_int {
    MQS_INTERFACE_COMPATIBILITY
}

/// `sizeof(mqs_taddr_t)` of this build.
#[unsafe(no_mangle)]
pub extern "C" fn mqs_dll_taddr_width() -> c_int {
    size_of::<mqs_taddr_t>() as c_int
}

/// Text of one of this library's result codes.
#[unsafe(no_mangle)]
pub extern "C" fn mqs_dll_error_string(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        c if c == mqs_ok => c"no error",
        c if c == mqs_no_information => c"no information available",
        c if c == mqs_end_of_list => c"end of list",
        _ => Error::from_code(code).map_or(c"unknown error code", Error::text),
    };
    text.as_ptr()
}

/// Creates the library's state for an image.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_setup_image(
    image: *mut mqs_image,
    callbacks: *const mqs_image_callbacks,
) -> c_int {
    guard(|_| {
        if image.is_null() {
            return Err(Error::NullArgument);
        }
        // SAFETY: the debugger keeps the table alive; we copy it anyway.
        let callbacks = *unsafe { callbacks.as_ref() }.ok_or(Error::NullArgument)?;
        let put = basic()?
            .mqs_put_image_info_fp
            .ok_or(Error::MissingCallback)?;
        let info = boxed(ImageInfo {
            callbacks,
            layout: Err(Missing::Symbol(layout::SYM_ALL_COMMUNICATORS)),
            checked: false,
            message: [0; 1024],
        })?;
        // SAFETY: debugger callback taking ownership of the pointer until destroy.
        unsafe { put(image, info.as_ptr().cast()) };
        Ok(mqs_ok)
    })
}

/// Finds MPICH's layout in the image; says what is missing when there is none.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_image_has_queues(
    image: *mut mqs_image,
    message: *mut *const c_char,
) -> c_int {
    guard(|call| {
        let info = image_info(call, image)?;
        if !info.checked {
            let services = CImage {
                image,
                callbacks: &info.callbacks,
            };
            info.layout = layout::discover(&ImageQuery::new(&services));
            info.checked = true;
            match info.layout {
                Ok(l) => layout::describe_layout(&l, &mut info.message),
                Err(missing) => layout::describe_missing(missing, &mut info.message),
            }
        }
        if !message.is_null() {
            // SAFETY: the debugger gave a valid out pointer; the text lives in the image info.
            unsafe { *message = info.message.as_ptr() };
        }
        match info.layout {
            Ok(_) => Ok(mqs_ok),
            Err(missing) => Err(missing.error()),
        }
    })
}

/// Frees the library's state for an image.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_destroy_image_info(info: *mut mqs_image_info) {
    let _ = catch_unwind(|| {
        if let Some(info) = NonNull::new(info.cast::<ImageInfo>()) {
            // SAFETY: made by mqs_setup_image; the debugger destroys it once.
            unsafe { unbox(info) };
        }
    });
}

/// Creates the library's state for a process.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_setup_process(
    process: *mut mqs_process,
    callbacks: *const mqs_process_callbacks,
) -> c_int {
    guard(|call| {
        if process.is_null() {
            return Err(Error::NullArgument);
        }
        // SAFETY: the debugger keeps the table alive; we copy it.
        let callbacks = *unsafe { callbacks.as_ref() }.ok_or(Error::NullArgument)?;
        let image = image_of(process, &callbacks)?;
        let image = image_info(call, image)?;
        let type_sizes = image
            .callbacks
            .mqs_get_type_sizes_fp
            .ok_or(Error::MissingCallback)?;
        let mut target_sizes = mqs_target_type_sizes::default();
        // SAFETY: debugger callback filling the five ints of the struct.
        unsafe { type_sizes(process, &mut target_sizes) };
        let sizes = Sizes::from_target(&target_sizes)?;
        let global_rank = match callbacks.mqs_get_global_rank_fp {
            // SAFETY: debugger callback.
            Some(rank) => i64::from(unsafe { rank(process) }),
            None => -1,
        };
        let put = basic()?
            .mqs_put_process_info_fp
            .ok_or(Error::MissingCallback)?;
        let info = boxed(ProcessInfo::new(callbacks, sizes, global_rank))?;
        // SAFETY: debugger callback taking the pointer until destroy.
        unsafe { put(process, info.as_ptr().cast()) };
        Ok(mqs_ok)
    })
}

/// Finds MPICH's globals in this process (addresses differ per process).
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_process_has_queues(
    process: *mut mqs_process,
    message: *mut *mut c_char,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        let image = image_of(process, &info.callbacks)?;
        let image_info = image_info(call, image)?;
        let result = find_globals(process, image, image_info, info);
        let text = &mut info.message;
        match result {
            Ok(layout) => layout::describe_layout(&layout, text),
            Err(GlobalsError::Missing(missing)) => layout::describe_missing(missing, text),
            Err(GlobalsError::Failed(e)) => {
                let mut w = layout::MessageWriter::new(text);
                w.push("mqd: cannot read MPICH's queue globals in '%s': ");
                w.push(&e.text().to_string_lossy());
            }
        }
        if !message.is_null() {
            // SAFETY: valid out pointer; the text lives in the process info.
            unsafe { *message = info.message.as_mut_ptr() };
        }
        match result {
            Ok(_) => Ok(mqs_ok),
            Err(GlobalsError::Missing(missing)) => Err(missing.error()),
            Err(GlobalsError::Failed(e)) => Err(e),
        }
    })
}

/// Why a process's queue globals could not be found.
#[derive(Debug, Clone, Copy)]
enum GlobalsError {
    /// The image lacks something (named in the has-queues message).
    Missing(Missing),
    /// Reading or asking the debugger failed.
    Failed(Error),
}

impl From<Error> for GlobalsError {
    fn from(e: Error) -> GlobalsError {
        GlobalsError::Failed(e)
    }
}

fn find_globals(
    process: *mut mqs_process,
    image: *mut mqs_image,
    image_info: &ImageInfo,
    info: &mut ProcessInfo,
) -> std::result::Result<layout::Layout, GlobalsError> {
    let layout = match image_info.layout {
        Ok(l) if image_info.checked => l,
        Ok(_) => return Err(Error::NoQueues.into()),
        Err(missing) => return Err(GlobalsError::Missing(missing)),
    };
    if image_info.callbacks.mqs_find_symbol_fp.is_none() {
        return Err(Error::MissingCallback.into());
    }
    let symbols = CImage {
        image,
        callbacks: &image_info.callbacks,
    };
    let symbol = |name: &'static CStr| symbols.find_symbol(name).filter(|&addr| addr != 0);
    let required = |name| symbol(name).ok_or(GlobalsError::Missing(Missing::Symbol(name)));
    let all_communicators = required(layout::SYM_ALL_COMMUNICATORS)?;
    let addresses = if matches!(layout.queues, layout::QueueLayout::Debugq(_)) {
        Addresses {
            all_communicators,
            posted: required(layout::SYM_RECVQ_HEAD)?,
            unexpected: required(layout::SYM_UNEXPQ_HEAD)?,
            sends: symbol(layout::SYM_SENDQ_HEAD),
            self_queues: None,
            state: Default::default(),
        }
    } else {
        // These globals hold the address of the static head variables.
        let services = CProcess {
            process,
            callbacks: &info.callbacks,
        };
        let target = Target {
            services: &services,
            sizes: info.sizes,
        };
        let posted = target.read_pointer(required(layout::SYM_POSTED_HEAD_PTR)?)?;
        let unexpected = target.read_pointer(required(layout::SYM_UNEXPECTED_HEAD_PTR)?)?;
        let (has_sendq, has_self) = match layout.queues {
            layout::QueueLayout::RequestLists { sendq, request } => {
                (sendq.is_some(), request.self_request.is_some())
            }
            layout::QueueLayout::Debugq(_) => (false, false),
        };
        let self_queues = if has_self {
            symbol(layout::SYM_SELF_RECV_QUEUE).zip(symbol(layout::SYM_SELF_SEND_QUEUE))
        } else {
            None
        };
        Addresses {
            all_communicators,
            posted,
            unexpected,
            sends: symbol(layout::SYM_SENDQ_HEAD).filter(|_| has_sendq),
            self_queues,
            state: Default::default(),
        }
    };
    // Looked up only where the types were described: a stub debugger is never asked.
    let addresses = Addresses {
        state: crate::process::StateAddresses {
            process: layout.state.phase.and_then(|_| symbol(layout::SYM_PROCESS)),
            thread_info: layout
                .state
                .thread_level
                .and_then(|_| symbol(layout::SYM_THREAD_INFO)),
            world_model: layout
                .state
                .phase
                .filter(|_| layout.state.sessions)
                .and_then(|_| symbol(layout::SYM_WORLD_MODEL)),
        },
        ..addresses
    };
    info.layout = Some(layout);
    info.addresses = Some(addresses);
    Ok(layout)
}

/// Frees the library's state for a process.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_destroy_process_info(info: *mut mqs_process_info) {
    let _ = catch_unwind(|| {
        if let Some(info) = NonNull::new(info.cast::<ProcessInfo>()) {
            // SAFETY: made by mqs_setup_process; the debugger destroys it once.
            unsafe { unbox(info) };
        }
    });
}

/// Starts a display: re-reads the communicator list if MPICH changed it.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_update_communicator_list(process: *mut mqs_process) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        let callbacks = info.callbacks;
        let services = CProcess {
            process,
            callbacks: &callbacks,
        };
        info.update_communicators(&services)?;
        Ok(mqs_ok)
    })
}

/// Moves the communicator iterator to the first communicator.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_setup_communicator_iterator(process: *mut mqs_process) -> c_int {
    guard(|call| {
        let more = process_info(call, process)?.first_communicator()?;
        Ok(if more { mqs_ok } else { mqs_end_of_list })
    })
}

/// Describes the current communicator.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_get_communicator(
    process: *mut mqs_process,
    comm: *mut mqs_communicator,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        // SAFETY: the debugger passes writable storage for one communicator.
        let out = unsafe { comm.as_mut() }.ok_or(Error::NullArgument)?;
        info.communicator(out)?;
        Ok(mqs_ok)
    })
}

/// COMM_WORLD ranks of the current communicator's group, `size` ints.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_get_comm_group(process: *mut mqs_process, group: *mut c_int) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        if group.is_null() {
            return Err(Error::NullArgument);
        }
        let Some(ranks) = info.group()? else {
            return Ok(mqs_no_information);
        };
        // SAFETY: the caller allocated `size` ints, and `ranks` has exactly `size`.
        unsafe { ptr::copy_nonoverlapping(ranks.as_ptr(), group, ranks.len()) };
        Ok(mqs_ok)
    })
}

/// Moves the communicator iterator on.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_next_communicator(process: *mut mqs_process) -> c_int {
    guard(|call| {
        let more = process_info(call, process)?.next_communicator()?;
        Ok(if more { mqs_ok } else { mqs_end_of_list })
    })
}

/// Starts iterating one queue of the current communicator.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_setup_operation_iterator(
    process: *mut mqs_process,
    op_class: c_int,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        let class = OpClass::from_c(op_class)?;
        let callbacks = info.callbacks;
        let services = CProcess {
            process,
            callbacks: &callbacks,
        };
        let available = info.start_operations(&services, class)?;
        Ok(if available {
            mqs_ok
        } else {
            mqs_no_information
        })
    })
}

/// The next operation of the queue being iterated.
///
/// # Safety
/// Called by a debugger as `mpi_interface.h` specifies: handles are its own,
/// out-pointers are NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqs_next_operation(
    process: *mut mqs_process,
    op: *mut mqs_pending_operation,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        // SAFETY: the debugger passes writable storage for one operation.
        let out = unsafe { op.as_mut() }.ok_or(Error::NullArgument)?;
        let more = info.next_operation(out)?;
        Ok(if more { mqs_ok } else { mqs_end_of_list })
    })
}

/// An extension of this library (not in the MQD standard; look it up with `dlsym`): the
/// context ids of the current communicator, what MPI matches its messages by. An
/// intracommunicator's are equal and the same in every member; each side of an
/// intercommunicator receives with the id the other side sends with.
///
/// # Safety
/// Called by a debugger with its own process handle, after
/// `mqs_setup_communicator_iterator`; the out-pointers valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqd_get_comm_context_ids(
    process: *mut mqs_process,
    context_id: *mut mqs_tword_t,
    recv_context_id: *mut mqs_tword_t,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        if context_id.is_null() || recv_context_id.is_null() {
            return Err(Error::NullArgument);
        }
        let (send, receive) = info.context_ids()?;
        // SAFETY: both checked non-NULL; the caller passes storage for one word each.
        unsafe {
            *context_id = send as mqs_tword_t;
            *recv_context_id = receive as mqs_tword_t;
        }
        Ok(mqs_ok)
    })
}

/// An extension of this library (look it up with `dlsym`): what MPICH records of the process, read
/// now: `phase` 0 before `MPI_Init`, 1 inside it, 2 initialized, 3 after
/// `MPI_Finalize` returned; `thread_level` `MPI_THREAD_SINGLE` (0) to
/// `MPI_THREAD_MULTIPLE` (3); -1 for what is unknown. `mqs_no_information` when neither
/// is known (the debug information does not describe them).
///
/// # Safety
/// Called by a debugger with its own process handle after `mqs_process_has_queues`;
/// the out-pointers valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mqd_get_mpi_state(
    process: *mut mqs_process,
    phase: *mut c_int,
    thread_level: *mut c_int,
) -> c_int {
    guard(|call| {
        let info = process_info(call, process)?;
        if phase.is_null() || thread_level.is_null() {
            return Err(Error::NullArgument);
        }
        let callbacks = info.callbacks;
        let services = CProcess {
            process,
            callbacks: &callbacks,
        };
        let Some((p, t)) = info.mpi_state(&services)? else {
            return Ok(mqs_no_information);
        };
        // SAFETY: both checked non-NULL; the caller passes storage for one int each.
        unsafe {
            *phase = p as c_int;
            *thread_level = t as c_int;
        }
        Ok(mqs_ok)
    })
}

// Every export has the signature the loader resolves its symbol as: one definition.
const _: () = {
    use mqd_abi::entry::*;
    let _: SetupBasicCallbacksFn = mqs_setup_basic_callbacks;
    let _: VersionStringFn = mqs_version_string;
    let _: IntFn = mqs_version_compatibility;
    let _: IntFn = mqs_dll_taddr_width;
    let _: DllErrorStringFn = mqs_dll_error_string;
    let _: SetupImageFn = mqs_setup_image;
    let _: ImageHasQueuesFn = mqs_image_has_queues;
    let _: DestroyImageInfoFn = mqs_destroy_image_info;
    let _: SetupProcessFn = mqs_setup_process;
    let _: ProcessHasQueuesFn = mqs_process_has_queues;
    let _: DestroyProcessInfoFn = mqs_destroy_process_info;
    let _: ProcessFn = mqs_update_communicator_list;
    let _: ProcessFn = mqs_setup_communicator_iterator;
    let _: GetCommunicatorFn = mqs_get_communicator;
    let _: GetCommGroupFn = mqs_get_comm_group;
    let _: ProcessFn = mqs_next_communicator;
    let _: SetupOperationIteratorFn = mqs_setup_operation_iterator;
    let _: NextOperationFn = mqs_next_operation;
    let _: GetCommContextIdsFn = mqd_get_comm_context_ids;
    let _: GetMpiStateFn = mqd_get_mpi_state;
};
