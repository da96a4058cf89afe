//! The callbacks driven directly, as a library would call them.

use super::contexts::*;
use super::counters::*;
use super::tables::*;
use super::*;
use mqd_abi::types::*;
use mqd_target::ByteOrder;
use mqd_target::TargetError;
use mqd_target::{TargetAbi, TypeId};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Arc;

/// A tiny in-memory target: one mapping, a few symbols and one struct type.
struct Mem {
    base: u64,
    bytes: Vec<u8>,
    order: ByteOrder,
}

impl mqd_target::Memory for Mem {
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let unmapped = TargetError::Unmapped {
            addr,
            len: buf.len(),
        };
        let start = addr.checked_sub(self.base).ok_or(unmapped.clone())? as usize;
        let end = start.checked_add(buf.len()).ok_or(unmapped.clone())?;
        let src = self.bytes.get(start..end).ok_or(unmapped)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl mqd_target::DebugInfo for Mem {
    fn find_symbol(&self, name: &str) -> Option<u64> {
        (name == "MPIR_dll_name").then_some(self.base)
    }
    fn find_function(&self, name: &str) -> Option<u64> {
        (name == "MPI_Init").then_some(0x4000)
    }
    fn find_type(&self, name: &str) -> Option<TypeId> {
        match name {
            "MPIR_Comm" | "struct MPIR_Comm" => Some(TypeId(7)),
            _ => None,
        }
    }
    fn type_size(&self, ty: TypeId) -> Option<u64> {
        (ty == TypeId(7)).then_some(1024)
    }
    fn field_offset(&self, ty: TypeId, field: &str) -> Option<u64> {
        (ty == TypeId(7) && field == "rank").then_some(24)
    }
    fn abi(&self) -> TargetAbi {
        TargetAbi {
            short: 2,
            int: 4,
            long: 8,
            long_long: 8,
            pointer: 8,
        }
    }
    fn byte_order(&self) -> ByteOrder {
        self.order
    }
}

impl mqd_target::Target for Mem {
    fn name(&self) -> String {
        "mem".into()
    }
}

struct Fixture {
    counters: Arc<SessionCounters>,
    image: *mut ImageContext,
    process: *mut ProcessContext,
}

impl Fixture {
    fn new(order: ByteOrder) -> Self {
        let counters = SessionCounters::new();
        let target = Mem {
            base: 0x1000,
            bytes: (0..=255u8).collect(),
            order,
        };
        let image = ImageContext::create(counters.clone(), Box::new(target));
        let process = ProcessContext::create(counters.clone(), image, 3);
        Fixture {
            counters,
            image,
            process,
        }
    }
    fn p(&self) -> *mut mqs_process {
        self.process as *mut mqs_process
    }
    fn i(&self) -> *mut mqs_image {
        self.image as *mut mqs_image
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once, process before image.
        unsafe {
            ProcessContext::destroy(self.process);
            ImageContext::destroy(self.image);
        }
    }
}

#[test]
fn byte_swapping_follows_target_order() {
    let other = match ByteOrder::host() {
        ByteOrder::Little => ByteOrder::Big,
        ByteOrder::Big => ByteOrder::Little,
    };
    let mut out = [0u8; 4];
    ByteOrder::host().to_host(&[1, 2, 3, 4], &mut out);
    assert_eq!(out, [1, 2, 3, 4]);
    other.to_host(&[1, 2, 3, 4], &mut out);
    assert_eq!(out, [4, 3, 2, 1]);
    let mut one = [0u8; 1];
    other.to_host(&[9], &mut one);
    assert_eq!(one, [9]);

    let f = Fixture::new(ByteOrder::Big);
    let mut v = 0x0102_0304_0506_0708u64.to_be_bytes();
    let p = v.as_mut_ptr() as *mut c_void;
    // In place, as some libraries call it.
    // SAFETY: valid 8-byte buffer.
    unsafe { cb_target_to_host(f.p(), p, p, 8) };
    assert_eq!(u64::from_ne_bytes(v), 0x0102_0304_0506_0708);
    let x = 0x1122u16.to_le_bytes();
    let mut y = [0u8; 2];
    let f = Fixture::new(ByteOrder::Little);
    // SAFETY: valid buffers.
    unsafe { cb_target_to_host(f.p(), x.as_ptr().cast(), y.as_mut_ptr().cast(), 2) };
    assert_eq!(u16::from_ne_bytes(y), 0x1122);
    // NULLs and negative lengths are ignored.
    // SAFETY: nothing is dereferenced.
    unsafe {
        cb_target_to_host(f.p(), std::ptr::null(), y.as_mut_ptr().cast(), 2);
        cb_target_to_host(f.p(), x.as_ptr().cast(), y.as_mut_ptr().cast(), -2);
    }
    assert_eq!(f.counters.snapshot().target_to_host_calls, 3);
}

#[test]
fn fetch_is_all_or_nothing_and_counted() {
    let f = Fixture::new(ByteOrder::Little);
    let mut buf = [0xEEu8; 8];
    // SAFETY: valid buffer of the stated length.
    unsafe {
        assert_eq!(
            cb_fetch_data(f.p(), 0x1010, 4, buf.as_mut_ptr().cast()),
            mqs_ok
        );
        assert_eq!(buf[..4], [0x10, 0x11, 0x12, 0x13]);
        // Straddles the end of the mapping: nothing written.
        assert_eq!(
            cb_fetch_data(f.p(), 0x10fc, 8, buf.as_mut_ptr().cast()),
            ERR_TARGET_UNREADABLE
        );
        assert_eq!(buf[..4], [0x10, 0x11, 0x12, 0x13]);
        assert_eq!(
            cb_fetch_data(f.p(), 0x1000, -1, buf.as_mut_ptr().cast()),
            ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            cb_fetch_data(f.p(), 0x1000, 4, std::ptr::null_mut()),
            ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            cb_fetch_data(f.p(), 0x1000, 0, std::ptr::null_mut()),
            mqs_ok
        );
        assert_eq!(
            cb_fetch_data(std::ptr::null_mut(), 0x1000, 4, buf.as_mut_ptr().cast()),
            ERR_BAD_HANDLE
        );
        // An image handle where a process is expected is refused, not misread.
        assert_eq!(
            cb_fetch_data(
                f.i() as *mut mqs_process,
                0x1000,
                4,
                buf.as_mut_ptr().cast()
            ),
            ERR_BAD_HANDLE
        );
    }
    let mut big = vec![0u8; 256];
    // SAFETY: valid buffer.
    assert_eq!(
        unsafe { cb_fetch_data(f.p(), 0x1000, 256, big.as_mut_ptr().cast()) },
        mqs_ok
    );
    assert_eq!(big, (0..=255u8).collect::<Vec<_>>());
    let c = f.counters.snapshot();
    assert_eq!(
        (c.fetches, c.failed_fetches, c.fetch_bytes, c.largest_fetch),
        (6, 3, 4 + 8 + 4 + 256, 256)
    );
}

#[test]
fn symbols_types_and_handles() {
    let f = Fixture::new(ByteOrder::Little);
    let _scope = SessionScope::enter(&f.counters);
    let mut addr: mqs_taddr_t = 0;
    // SAFETY: valid NUL-terminated names and output pointers.
    unsafe {
        assert_eq!(
            cb_find_symbol(f.i(), c"MPIR_dll_name".as_ptr() as *mut c_char, &mut addr),
            mqs_ok
        );
        assert_eq!(addr, 0x1000);
        assert_eq!(
            cb_find_symbol(f.i(), c"nope".as_ptr() as *mut c_char, &mut addr),
            ERR_SYMBOL_NOT_FOUND
        );
        assert_eq!(
            cb_find_symbol(f.i(), std::ptr::null_mut(), &mut addr),
            ERR_INVALID_ARGUMENT
        );
        let init = c"MPI_Init".as_ptr() as *mut c_char;
        assert_eq!(
            cb_find_function(f.i(), init, b'c' as c_int, std::ptr::null_mut()),
            mqs_ok
        );
        assert_eq!(
            cb_find_function(f.i(), init, b'c' as c_int, &mut addr),
            mqs_ok
        );
        assert_eq!(addr, 0x4000);
        let t1 = cb_find_type(f.i(), c"MPIR_Comm".as_ptr() as *mut c_char, b'c' as c_int);
        let t2 = cb_find_type(
            f.i(),
            c"struct MPIR_Comm".as_ptr() as *mut c_char,
            b'c' as c_int,
        );
        assert!(!t1.is_null());
        assert_eq!(t1, t2, "one handle per type");
        assert!(
            cb_find_type(
                f.i(),
                c"MPIR_Request".as_ptr() as *mut c_char,
                b'c' as c_int
            )
            .is_null()
        );
        assert_eq!(cb_field_offset(t1, c"rank".as_ptr() as *mut c_char), 24);
        assert_eq!(cb_field_offset(t1, c"nope".as_ptr() as *mut c_char), -1);
        assert_eq!(cb_field_offset(t1, std::ptr::null_mut()), -1);
        assert_eq!(cb_sizeof(t1), 1024);
        assert_eq!(cb_sizeof(std::ptr::null_mut()), -1);
        assert_eq!(cb_sizeof(f.i() as *mut mqs_type), -1);
        let mut sizes = mqs_target_type_sizes::default();
        cb_get_type_sizes(f.p(), &mut sizes);
        assert_eq!(sizes.long_size, 8);
        assert_eq!(cb_get_global_rank(f.p()), 3);
        assert_eq!(
            cb_get_global_rank(std::ptr::null_mut()),
            MQS_INVALID_PROCESS
        );
        assert_eq!(cb_get_image(f.p()), f.i());
        // Handles survive a new stop of the process.
        (*f.image).replace_target(Box::new(Mem {
            base: 0,
            bytes: vec![],
            order: ByteOrder::Little,
        }));
        assert_eq!(cb_sizeof(t1), 1024);
        assert_eq!(
            cb_find_type(f.i(), c"MPIR_Comm".as_ptr() as *mut c_char, b'c' as c_int),
            t1
        );
    }
    let c = f.counters.snapshot();
    assert_eq!(c.find_symbol_calls, 3);
    assert_eq!(c.find_function_calls, 2);
    assert_eq!(c.find_type_calls, 4);
    assert_eq!(
        c.field_offset_calls, 3,
        "a NULL field name is still a call on a valid type"
    );
    assert_eq!(c.sizeof_calls, 2);
    assert_eq!(c.type_sizes_calls, 1);
    assert_eq!(c.bad_handles, 3);
}

#[test]
fn info_pointers_round_trip() {
    let f = Fixture::new(ByteOrder::Little);
    let info = 0x1234usize as *mut mqs_image_info;
    let pinfo = 0x5678usize as *mut mqs_process_info;
    // SAFETY: the info pointers are stored, never dereferenced.
    unsafe {
        assert!(cb_get_image_info(f.i()).is_null());
        cb_put_image_info(f.i(), info);
        cb_put_process_info(f.p(), pinfo);
        assert_eq!(cb_get_image_info(f.i()), info);
        assert_eq!(cb_get_process_info(f.p()), pinfo);
        assert!(cb_get_process_info(f.i() as *mut mqs_process).is_null());
        cb_put_image_info(std::ptr::null_mut(), info);
        assert_eq!((*f.image).info(), info);
        assert_eq!((*f.process).info(), pinfo);
    }
    let c = f.counters.snapshot();
    assert_eq!((c.image_info_calls, c.process_info_calls), (3, 2));
}

#[test]
fn allocations_are_aligned_and_attributed_per_session() {
    let a = SessionCounters::new();
    let b = SessionCounters::new();
    let (pa, pb) = {
        let _s = SessionScope::enter(&a);
        // SAFETY: plain allocation calls.
        let pa = unsafe { cb_malloc(40) };
        let pb = {
            let _inner = SessionScope::enter(&b);
            // SAFETY: as above.
            unsafe { cb_malloc(0) }
        };
        (pa, pb)
    };
    assert!(!pa.is_null() && !pb.is_null());
    assert_eq!(pa as usize % MALLOC_ALIGN, 0);
    assert_eq!(pb as usize % MALLOC_ALIGN, 0);
    // SAFETY: pa is a 40-byte block.
    unsafe { std::ptr::write_bytes(pa as *mut u8, 1, 40) };
    let ca = a.snapshot();
    assert_eq!(
        (ca.mallocs, ca.outstanding_allocations, ca.outstanding_bytes),
        (1, 1, 40)
    );
    let cb = b.snapshot();
    assert_eq!(
        (cb.mallocs, cb.outstanding_allocations, cb.outstanding_bytes),
        (1, 1, 0)
    );
    {
        // Freed from b's scope: still credited to a, the owner.
        let _s = SessionScope::enter(&b);
        // SAFETY: blocks from cb_malloc.
        unsafe {
            cb_free(pa);
            cb_free(pb);
            cb_free(std::ptr::null_mut());
        }
    }
    let ca = a.snapshot();
    assert_eq!(
        (
            ca.frees,
            ca.outstanding_allocations,
            ca.outstanding_bytes,
            ca.bad_frees
        ),
        (1, 0, 0, 0)
    );
    let cb = b.snapshot();
    assert_eq!(
        (cb.frees, cb.outstanding_allocations, cb.bad_frees),
        (1, 0, 0)
    );
}

#[test]
fn bad_and_double_frees_are_counted_not_crashing() {
    let s = SessionCounters::new();
    let _scope = SessionScope::enter(&s);
    let mut on_stack = 0u64;
    // SAFETY: cb_free never dereferences a pointer it did not hand out.
    unsafe {
        let p = cb_malloc(16);
        cb_free(p);
        cb_free(p);
        cb_free(&mut on_stack as *mut u64 as *mut c_void);
        cb_free(0x10usize as *mut c_void);
    }
    let c = s.snapshot();
    assert_eq!(
        (c.mallocs, c.frees, c.bad_frees, c.outstanding_allocations),
        (1, 1, 3, 0)
    );
}

#[test]
fn huge_allocations_fail_cleanly() {
    let s = SessionCounters::new();
    let _scope = SessionScope::enter(&s);
    // SAFETY: plain allocation calls.
    unsafe {
        assert!(cb_malloc(usize::MAX).is_null());
        assert!(cb_malloc(MAX_ALLOCATION + 1).is_null());
    }
    let c = s.snapshot();
    assert_eq!(
        (c.mallocs, c.failed_mallocs, c.outstanding_allocations),
        (2, 2, 0)
    );
}

#[test]
fn dprints_lines_go_to_the_calling_session_and_reset_keeps_state() {
    let s = SessionCounters::new();
    let _scope = SessionScope::enter(&s);
    // SAFETY: NUL-terminated strings or NULL.
    let p = unsafe {
        cb_dprints(c"first line\n".as_ptr());
        cb_dprints(std::ptr::null());
        cb_dprints(c"second".as_ptr());
        cb_malloc(8)
    };
    let c = s.snapshot();
    assert_eq!(c.dprints, ["first line", "second"]);
    assert_eq!(c.dprints_calls, 3);
    s.reset();
    let c = s.snapshot();
    assert!(c.dprints.is_empty());
    assert_eq!(
        (c.mallocs, c.outstanding_allocations, c.outstanding_bytes),
        (0, 1, 8)
    );
    // SAFETY: block from cb_malloc.
    unsafe { cb_free(p) };
    assert_eq!(s.snapshot().outstanding_allocations, 0);
}

#[test]
fn error_text_is_static_and_specific() {
    assert_eq!(
        error_text(ERR_TARGET_UNREADABLE).to_str().unwrap(),
        "target memory unreadable"
    );
    assert_eq!(
        error_text(999).to_str().unwrap(),
        "unknown debugger error code"
    );
    // SAFETY: returns a static C string.
    let s = unsafe { CStr::from_ptr(cb_errorstring(ERR_SYMBOL_NOT_FOUND)) };
    assert_eq!(s.to_str().unwrap(), "symbol not found in the target");
    let codes = [
        ERR_TARGET_UNREADABLE,
        ERR_INVALID_ARGUMENT,
        ERR_BAD_HANDLE,
        ERR_SYMBOL_NOT_FOUND,
        ERR_FUNCTION_NOT_FOUND,
        ERR_INTERNAL,
    ];
    let texts: std::collections::HashSet<_> = codes.iter().map(|&c| error_text(c)).collect();
    assert_eq!(texts.len(), codes.len());
    assert!(BASIC_CALLBACKS_NULL_DIAGNOSTICS.mqs_dprints_fp.is_none());
    assert!(BASIC_CALLBACKS_NULL_DIAGNOSTICS.mqs_malloc_fp.is_some());
    assert!(IMAGE_CALLBACKS_NULL_SIZEOF.mqs_sizeof_fp.is_none());
}

#[test]
fn a_panicking_target_becomes_an_error_code() {
    struct Panics;
    impl mqd_target::Memory for Panics {
        fn read_memory(&self, _: u64, _: &mut [u8]) -> Result<(), TargetError> {
            panic!("target bug")
        }
    }

    impl mqd_target::DebugInfo for Panics {
        fn find_symbol(&self, _: &str) -> Option<u64> {
            panic!("target bug")
        }
        fn find_function(&self, _: &str) -> Option<u64> {
            None
        }
        fn find_type(&self, _: &str) -> Option<TypeId> {
            None
        }
        fn type_size(&self, _: TypeId) -> Option<u64> {
            None
        }
        fn field_offset(&self, _: TypeId, _: &str) -> Option<u64> {
            None
        }
        fn abi(&self) -> TargetAbi {
            TargetAbi::LP64
        }
        fn byte_order(&self) -> ByteOrder {
            ByteOrder::Little
        }
    }

    impl mqd_target::Target for Panics {
        fn name(&self) -> String {
            "panics".into()
        }
    }
    let counters = SessionCounters::new();
    let _scope = SessionScope::enter(&counters);
    let image = ImageContext::create(counters.clone(), Box::new(Panics));
    let process = ProcessContext::create(counters.clone(), image, 0);
    let mut buf = [0u8; 4];
    let mut addr = 0;
    // SAFETY: valid handles and buffers; destroyed once at the end.
    unsafe {
        assert_eq!(
            cb_fetch_data(process as *mut mqs_process, 0, 4, buf.as_mut_ptr().cast()),
            ERR_INTERNAL
        );
        assert_eq!(
            cb_find_symbol(
                image as *mut mqs_image,
                c"x".as_ptr() as *mut c_char,
                &mut addr
            ),
            ERR_INTERNAL
        );
        ProcessContext::destroy(process);
        ImageContext::destroy(image);
    }
    assert_eq!(counters.snapshot().callback_panics, 2);
}

/// A synthetic MPICH image (big-endian LP64, ch3) served through the callbacks: what a
/// library finds is what the image holds, converted to host order.
#[test]
fn a_synthetic_image_is_served_as_it_is_laid_out() {
    use mqd_synthetic::{Arch, Layout, ProcessSpec};
    use mqd_target::{DebugInfo, Memory};
    let image = ProcessSpec::example(Layout::Ch3, Arch::LP64_BE).build();
    let head = image
        .find_symbol("MPIR_All_communicators")
        .expect("the image has MPICH's communicator list");
    let comm = image
        .find_type("MPIR_Comm")
        .expect("and its communicator type");
    let size = image.type_size(comm).expect("of a known size");
    let offset = image
        .field_offset(comm, "context_id")
        .expect("with a context id");
    let mut word = [0u8; 8];
    image
        .read_memory(head, &mut word)
        .expect("the list head is readable");

    let counters = SessionCounters::new();
    let ctx = ImageContext::create(counters.clone(), Box::new(image));
    let process = ProcessContext::create(counters.clone(), ctx, 0);
    let (i, p) = (ctx as *mut mqs_image, process as *mut mqs_process);
    // SAFETY: handles made above, strings and buffers valid for each call.
    unsafe {
        let mut addr: mqs_taddr_t = 0;
        let name = c"MPIR_All_communicators".as_ptr() as *mut c_char;
        assert_eq!(cb_find_symbol(i, name, &mut addr), mqs_ok);
        assert_eq!(addr, head);
        let ty = cb_find_type(i, c"MPIR_Comm".as_ptr() as *mut c_char, b'c' as c_int);
        assert!(!ty.is_null());
        assert_eq!(cb_sizeof(ty) as u64, size);
        assert_eq!(
            cb_field_offset(ty, c"context_id".as_ptr() as *mut c_char) as u64,
            offset
        );
        let mut fetched = [0u8; 8];
        assert_eq!(
            cb_fetch_data(p, head, 8, fetched.as_mut_ptr().cast()),
            mqs_ok
        );
        assert_eq!(fetched, word);
        let mut host = [0u8; 8];
        cb_target_to_host(p, fetched.as_ptr().cast(), host.as_mut_ptr().cast(), 8);
        assert_eq!(u64::from_ne_bytes(host), u64::from_be_bytes(word));
        ProcessContext::destroy(process);
        ImageContext::destroy(ctx);
    }
    assert_eq!(counters.snapshot().fetches, 1);
}
