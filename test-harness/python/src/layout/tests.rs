use super::*;

/// A 3.13 debug-offsets table with `words` after the cookie.
fn table(words: &[(usize, u64)], len: usize) -> Vec<u8> {
    let mut t = vec![0u8; len];
    t[..8].copy_from_slice(DEBUG_COOKIE);
    for &(at, v) in words {
        t[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    t
}

#[test]
fn debug_offsets_say_their_version_and_are_refused_where_mqd_would_misread_them() {
    let ok = table(&[(8, 0x030d_00f0), (40, 632), (72, 7344), (344, 200)], 600);
    let layout = from_debug_offsets(&ok).unwrap();
    assert_eq!(layout.version, (3, 13));
    assert_eq!(layout.runtime_interpreters_head, 632);
    assert_eq!(layout.interp_threads_head, 7344);
    assert_eq!(
        layout.frame_instr,
        Instr::Pointer {
            offset: 0,
            code_adaptive: 200
        }
    );
    let err = |t: &[u8]| from_debug_offsets(t).unwrap_err();
    assert!(err(&[0u8; 600]).contains("xdebugpy"));
    assert!(err(&table(&[(8, 0x030d_00f0), (16, 1)], 600)).contains("free-threaded"));
    assert!(err(&table(&[(8, 0x030e_00f0)], 800)).contains("3.14"));
    assert!(err(&table(&[(8, 0x030d_00f0)], 300)).contains("cut short"));
    assert!(err(&table(&[(8, 0x020d_00f0)], 600)).contains("version"));
}

#[test]
fn tables_cover_3_8_to_3_12_and_nothing_else() {
    for minor in 8..=12 {
        assert_eq!(of_version(minor).unwrap().version, (3, minor));
    }
    assert!(of_version(7).is_none() && of_version(13).is_none());
}
