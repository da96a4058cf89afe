//! What a core holds of its threads' stacks, and what it lacks.

use super::file::CoreFile;

impl CoreFile {
    /// The address ranges a truncated core should hold but does not, with the size the
    /// file would need: reads there fail.
    pub fn missing_ranges(&self) -> Vec<(u64, u64)> {
        self.segments
            .iter()
            .filter(|s| s.present < s.filesz)
            .map(|s| (s.vaddr + s.present, s.vaddr + s.filesz))
            .collect()
    }

    /// The stack of every thread the core holds, unwound by `reader` from the registers
    /// it recorded (x86_64) and the memory it holds (or its mapped files).
    pub fn stacks(
        &self,
        reader: &mqd_debuginfo::stack::StackReader,
    ) -> Vec<mqd_debuginfo::stack::ThreadStack> {
        self.threads
            .iter()
            .enumerate()
            .map(
                |(i, &tid)| match self.registers.get(i).and_then(Option::as_ref) {
                    Some(regs) => {
                        let mut stack = reader.unwind(tid, regs, |addr| {
                            let mut word = [0u8; 8];
                            self.read_memory(addr, &mut word).ok()?;
                            Some(u64::from_le_bytes(word))
                        });
                        stack.thread_pointer = self.thread_pointers.get(i).copied().flatten();
                        stack
                    }
                    None => mqd_debuginfo::stack::ThreadStack::unwalked(
                        tid,
                        "the core records no x86_64 registers for it",
                    ),
                },
            )
            .collect()
    }
}
