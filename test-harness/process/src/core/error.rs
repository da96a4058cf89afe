//! Why a core file cannot be used.

use super::format::{ET_DYN, ET_EXEC, ET_REL};
use mqd_debuginfo::DebugInfoError;
use std::fmt;
use std::path::PathBuf;

/// Why a core file cannot be used. Every message is one line naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The core file cannot be opened or read.
    Io {
        /// The core file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// Not an ELF file at all.
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// An ELF file, but not a core (`e_type` is not `ET_CORE`).
    NotCore {
        /// The file.
        path: PathBuf,
        /// Its `e_type`.
        elf_type: u16,
    },
    /// A `PT_LOAD` or `PT_NOTE` segment (or the program header table) extends beyond
    /// the end of the file.
    Truncated {
        /// The core file.
        path: PathBuf,
        /// What is cut: "segment at 0x7f...", "notes segment at offset 0x...",
        /// "program header table".
        what: String,
        /// Bytes the file must have for it (`p_offset + p_filesz`).
        needs: u64,
        /// Bytes it has.
        has: u64,
    },
    /// The ELF header or program headers make no sense.
    Malformed {
        /// The core file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A note runs past its segment, or a known note has an impossible size or content.
    CorruptNotes {
        /// The core file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No `NT_FILE` note and no executable given: nothing says which files were mapped.
    NoFileMappings {
        /// The core file.
        path: PathBuf,
    },
    /// The executable given cannot be placed in the core's address space.
    Executable {
        /// The core file.
        path: PathBuf,
        /// The executable.
        exe: PathBuf,
        /// Why.
        message: String,
    },
    /// The mapped files give no symbols at all (all missing, none ELF).
    DebugInfo {
        /// The core file.
        path: PathBuf,
        /// What the address space said.
        error: DebugInfoError,
    },
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::Io { path, message } => {
                write!(f, "cannot read core file {}: {message}", path.display())
            }
            CoreError::NotElf { path } => {
                write!(
                    f,
                    "not an ELF core file: {} is not an ELF file",
                    path.display()
                )
            }
            CoreError::NotCore { path, elf_type } => {
                let kind = match *elf_type {
                    ET_REL => "a relocatable object",
                    ET_EXEC => "an executable",
                    ET_DYN => "a shared object or position-independent executable",
                    _ => "an ELF file of another type",
                };
                write!(
                    f,
                    "not an ELF core file: {} is {kind} (e_type {elf_type}, a core has 4)",
                    path.display()
                )
            }
            CoreError::Truncated {
                path,
                what,
                needs,
                has,
            } => write!(
                f,
                "truncated core file: {what} needs {needs} bytes, file has {has} ({}: the dump \
                 was cut short, e.g. by ulimit -c or a full disk)",
                path.display()
            ),
            CoreError::Malformed { path, message } => {
                write!(f, "malformed core file {}: {message}", path.display())
            }
            CoreError::CorruptNotes { path, message } => {
                write!(
                    f,
                    "corrupt notes in core file {}: {message}",
                    path.display()
                )
            }
            CoreError::NoFileMappings { path } => write!(
                f,
                "core file {} lacks file mappings (no NT_FILE note, as written by Linux before 3.7 \
                 and some dumpers): pass --exe with the crashed program's executable",
                path.display()
            ),
            CoreError::Executable { path, exe, message } => write!(
                f,
                "cannot place executable {} in core file {}: {message}",
                exe.display(),
                path.display()
            ),
            CoreError::DebugInfo { path, error } => {
                write!(f, "core file {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for CoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CoreError::DebugInfo { error, .. } => Some(error),
            _ => None,
        }
    }
}
