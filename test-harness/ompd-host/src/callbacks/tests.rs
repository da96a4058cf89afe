use super::*;
use std::collections::HashMap;

/// Memory of one region at 0x1000, symbols by name, a thread-local one per thread.
struct Fake {
    memory: Vec<u8>,
    symbols: HashMap<&'static str, u64>,
}

impl Source for Fake {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some(start) = addr.checked_sub(0x1000).map(|a| a as usize) else {
            return false;
        };
        match self.memory.get(start..start + buf.len()) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
    fn symbol(&self, name: &str, thread: Option<&OsThread>) -> Option<u64> {
        match thread {
            Some(t) if name == "tls" => Some(0x9000 + t.tid as u64),
            _ => self.symbols.get(name).copied(),
        }
    }
    fn sizes(&self) -> TypeSizes {
        TypeSizes {
            char_: 1,
            short: 2,
            int: 4,
            long: 8,
            long_long: 8,
            pointer: 8,
        }
    }
}

fn fake() -> Fake {
    let mut memory = vec![0u8; 256];
    memory[..6].copy_from_slice(b"hello\0");
    memory[200..].fill(b'x');
    Fake {
        memory,
        symbols: HashMap::from([("ompd_state", 0x1010)]),
    }
}

const THREADS: [OsThread; 2] = [
    OsThread {
        tid: 7,
        pthread: Some(0x7f00),
    },
    OsThread {
        tid: 8,
        pthread: None,
    },
];

#[test]
fn memory_strings_and_symbols_are_served_and_counted() {
    let source = fake();
    let space = Space::new(&source, &THREADS);
    let cx = space.as_context();
    let mut buf = [0u8; 4];
    let at = Address {
        segment: 0,
        address: 0x1001,
    };
    // SAFETY: the table's functions, given this test's context and buffers.
    unsafe {
        assert_eq!(
            (CALLBACKS.read_memory)(cx, std::ptr::null_mut(), &at, 4, buf.as_mut_ptr().cast()),
            0
        );
        assert_eq!(&buf, b"ello");
        let far = Address {
            segment: 0,
            address: 0x10fe,
        };
        assert_eq!(
            (CALLBACKS.read_memory)(cx, std::ptr::null_mut(), &far, 4, buf.as_mut_ptr().cast()),
            abi::RC_ERROR
        );
        let mut text = [0xffu8; 16];
        let start = Address {
            segment: 0,
            address: 0x1000,
        };
        assert_eq!(
            (CALLBACKS.read_string)(
                cx,
                std::ptr::null_mut(),
                &start,
                16,
                text.as_mut_ptr().cast()
            ),
            0
        );
        assert_eq!(&text[..6], b"hello\0");
        // A string that runs into unreadable memory ends there, not in an error.
        let tail = Address {
            segment: 0,
            address: 0x1000 + 250,
        };
        assert_eq!(
            (CALLBACKS.read_string)(
                cx,
                std::ptr::null_mut(),
                &tail,
                16,
                text.as_mut_ptr().cast()
            ),
            0
        );
        assert_eq!(&text[..6], b"xxxxxx");
        let mut found = Address::default();
        assert_eq!(
            (CALLBACKS.symbol_addr_lookup)(
                cx,
                std::ptr::null_mut(),
                c"ompd_state".as_ptr(),
                &mut found,
                std::ptr::null()
            ),
            0
        );
        assert_eq!(found.address, 0x1010);
        assert_eq!(
            (CALLBACKS.symbol_addr_lookup)(
                cx,
                std::ptr::null_mut(),
                c"absent".as_ptr(),
                &mut found,
                std::ptr::null()
            ),
            abi::RC_ERROR
        );
    }
    let c = space.counters();
    assert_eq!((c.reads, c.symbols), (4, 2));
    assert_eq!(c.bytes, 4 + 6 + 6);
}

#[test]
fn threads_are_found_by_pthread_or_kernel_id_and_thread_local_symbols_are_theirs() {
    let source = fake();
    let space = Space::new(&source, &THREADS);
    let cx = space.as_context();
    let mut thread: *mut Context = std::ptr::null_mut();
    let pthread: u64 = 0x7f00;
    let lwp: u32 = 8;
    let mut found = Address::default();
    // SAFETY: as above.
    unsafe {
        let get = CALLBACKS.get_thread_context_for_thread_id;
        assert_eq!(
            get(
                cx,
                abi::THREAD_ID_PTHREAD,
                8,
                (&pthread as *const u64).cast(),
                &mut thread
            ),
            0
        );
        assert_eq!(
            (CALLBACKS.symbol_addr_lookup)(
                cx,
                thread,
                c"tls".as_ptr(),
                &mut found,
                std::ptr::null()
            ),
            0
        );
        assert_eq!(found.address, 0x9007);
        assert_eq!(
            get(
                cx,
                abi::THREAD_ID_LWP,
                4,
                (&lwp as *const u32).cast(),
                &mut thread
            ),
            0
        );
        assert_eq!(
            (CALLBACKS.symbol_addr_lookup)(
                cx,
                thread,
                c"tls".as_ptr(),
                &mut found,
                std::ptr::null()
            ),
            0
        );
        assert_eq!(found.address, 0x9008);
        let other: u64 = 0x1234;
        assert_eq!(
            get(
                cx,
                abi::THREAD_ID_PTHREAD,
                8,
                (&other as *const u64).cast(),
                &mut thread
            ),
            abi::RC_UNAVAILABLE
        );
        assert_eq!(
            get(cx, 2, 8, (&other as *const u64).cast(), &mut thread),
            abi::RC_UNSUPPORTED
        );
        assert_eq!(
            get(
                cx,
                abi::THREAD_ID_PTHREAD,
                4,
                (&lwp as *const u32).cast(),
                &mut thread
            ),
            abi::RC_BAD_INPUT
        );
        // A thread context that is not one of ours is refused, not followed.
        let forged = &other as *const u64 as *mut Context;
        assert_eq!(
            (CALLBACKS.symbol_addr_lookup)(
                cx,
                forged,
                c"tls".as_ptr(),
                &mut found,
                std::ptr::null()
            ),
            abi::RC_STALE_HANDLE
        );
    }
}

#[test]
fn memory_is_given_zeroed_conversion_is_in_place_and_nothing_is_written() {
    let mut p: *mut c_void = std::ptr::null_mut();
    let mut words = [1u32, 2, 3];
    // SAFETY: as above; the block is freed by the table's own free.
    unsafe {
        assert_eq!((CALLBACKS.alloc_memory)(64, &mut p), 0);
        assert!(
            std::slice::from_raw_parts(p as *const u8, 64)
                .iter()
                .all(|&b| b == 0)
        );
        assert_eq!((CALLBACKS.free_memory)(p), 0);
        let w = words.as_mut_ptr().cast();
        assert_eq!(
            (CALLBACKS.device_to_host)(std::ptr::null_mut(), w, 4, 3, w),
            0
        );
        let at = Address::default();
        assert_eq!(
            (CALLBACKS.write_memory)(std::ptr::null_mut(), std::ptr::null_mut(), &at, 4, w),
            abi::RC_UNSUPPORTED
        );
    }
    assert_eq!(words, [1, 2, 3]);
}
