//! The library's own result codes (>= `mqs_first_user_code`) and their texts.

use mqd_abi::types::mqs_first_user_code;
use std::ffi::{CStr, c_int};

/// Everything that can go wrong inside the library, as a small `Copy` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Error {
    /// `mqs_setup_basic_callbacks` was not called, or gave NULL allocators.
    NoBasicCallbacks = mqs_first_user_code,
    /// The debugger's allocator returned NULL.
    OutOfMemory,
    /// An image call came before `mqs_setup_image`.
    NoImageInfo,
    /// A process call came before `mqs_setup_process`.
    NoProcessInfo,
    /// The debugger's callback table lacks a mandatory function.
    MissingCallback,
    /// A global symbol of MPICH's debugger support is missing.
    MissingSymbol,
    /// A type needed to decode the queues is unknown to the debugger.
    MissingType,
    /// A field of a known type is unknown to the debugger.
    MissingField,
    /// A type has a size this library cannot decode.
    UnsupportedWidth,
    /// `mqs_image_has_queues` found no layout it knows, or failed.
    NoQueues,
    /// A target read failed: memory unmapped or unreadable.
    ReadFailed,
    /// A list in the target loops back on itself.
    ListCycle,
    /// A list in the target is longer than any real MPI process has.
    ListTooLong,
    /// A target value is implausible (negative size, absurd count).
    ImplausibleValue,
    /// The operation class is not 0, 1 or 2.
    BadOpClass,
    /// The communicator iterator is not on a communicator.
    NoCurrentCommunicator,
    /// `mqs_update_communicator_list` has not succeeded yet.
    NoCommunicatorList,
    /// `mqs_next_operation` before `mqs_setup_operation_iterator`.
    NoOperationIterator,
    /// A NULL pointer where the interface requires one.
    NullArgument,
    /// An internal fault was caught at the C boundary.
    Internal,
}

const ALL: [Error; 20] = [
    Error::NoBasicCallbacks,
    Error::OutOfMemory,
    Error::NoImageInfo,
    Error::NoProcessInfo,
    Error::MissingCallback,
    Error::MissingSymbol,
    Error::MissingType,
    Error::MissingField,
    Error::UnsupportedWidth,
    Error::NoQueues,
    Error::ReadFailed,
    Error::ListCycle,
    Error::ListTooLong,
    Error::ImplausibleValue,
    Error::BadOpClass,
    Error::NoCurrentCommunicator,
    Error::NoCommunicatorList,
    Error::NoOperationIterator,
    Error::NullArgument,
    Error::Internal,
];

impl Error {
    /// The code returned through the C interface.
    pub fn code(self) -> c_int {
        self as c_int
    }

    /// The error with this code, if it is one of ours.
    pub fn from_code(code: c_int) -> Option<Error> {
        ALL.iter().copied().find(|e| e.code() == code)
    }

    /// What went wrong and what to do, as `mqs_dll_error_string` reports it.
    pub fn text(self) -> &'static CStr {
        match self {
            Error::NoBasicCallbacks => {
                c"mqs_setup_basic_callbacks was not called with a malloc and free callback"
            }
            Error::OutOfMemory => c"the debugger's allocator returned NULL",
            Error::NoImageInfo => c"mqs_setup_image was not called for this image",
            Error::NoProcessInfo => c"mqs_setup_process was not called for this process",
            Error::MissingCallback => {
                c"the debugger passed a callback table without a mandatory function"
            }
            Error::MissingSymbol => {
                c"a symbol of MPICH's debugger support is missing: MPICH built without --enable-debuginfo, or stripped"
            }
            Error::MissingType => {
                c"a type MPICH's queues need is unknown to the debugger: libmpi has no debug information (build MPICH with --enable-debuginfo, do not strip it)"
            }
            Error::MissingField => {
                c"an MPICH type lacks a field this library needs: an MPICH version or device this library does not know"
            }
            Error::UnsupportedWidth => c"an MPICH type has a size this library cannot decode",
            Error::NoQueues => {
                c"this image has no message queues this library can read (see mqs_image_has_queues' message)"
            }
            Error::ReadFailed => {
                c"target memory could not be read: a pointer in MPICH's lists leads to unmapped memory (corrupt process, or not stopped)"
            }
            Error::ListCycle => {
                c"a list in the target loops back on itself: memory is corrupt or the process was not stopped"
            }
            Error::ListTooLong => {
                c"a list in the target is longer than any real MPI process has: memory is corrupt"
            }
            Error::ImplausibleValue => {
                c"a value in the target is implausible (size or count out of range): memory is corrupt"
            }
            Error::BadOpClass => c"the operation class must be 0 (sends), 1 (receives) or 2 (unexpected)",
            Error::NoCurrentCommunicator => {
                c"the communicator iterator is not on a communicator: call mqs_setup_communicator_iterator first"
            }
            Error::NoCommunicatorList => {
                c"no communicator list: call mqs_update_communicator_list first"
            }
            Error::NoOperationIterator => {
                c"no operation iterator: call mqs_setup_operation_iterator first"
            }
            Error::NullArgument => c"a NULL pointer was passed where the interface requires one",
            Error::Internal => c"internal error in the message queue library (caught, nothing was changed)",
        }
    }
}

/// Result of the library's internal functions.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_have_text() {
        for e in ALL {
            assert_eq!(Error::from_code(e.code()), Some(e));
            assert!(e.text().to_bytes().len() > 20);
        }
        assert_eq!(Error::from_code(99), None);
        assert_eq!(Error::from_code(Error::Internal.code() + 1), None);
    }
}
