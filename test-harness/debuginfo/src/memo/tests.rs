use super::*;

fn die(unit: usize, offset: usize) -> DieRef {
    DieRef { unit, offset }
}

fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mqd-memo-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Removes the directory however the test ends.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sample(memo: &Memo) {
    memo.remember_name(NameKind::Struct, b"MPIR_Comm", Some(die(3, 1857)));
    memo.remember_name(NameKind::Plain, b"<mqd: not a type>", None);
    memo.remember_name(NameKind::Base, b"long long int", Some(die(0, 1409)));
    memo.remember_size(die(3, 1857), Some(832));
    memo.remember_size(die(3, 9), None);
    memo.remember_field(die(3, 1857), "dev.ch4.am", Some(776));
    memo.remember_field(die(3, 1857), "pmap", None);
}

fn check_sample(memo: &Memo) {
    assert_eq!(
        memo.name(NameKind::Struct, b"MPIR_Comm"),
        Some(Some(die(3, 1857)))
    );
    assert_eq!(
        memo.name(NameKind::Plain, b"MPIR_Comm"),
        None,
        "another namespace"
    );
    assert_eq!(memo.name(NameKind::Plain, b"<mqd: not a type>"), Some(None));
    assert_eq!(
        memo.name(NameKind::Base, b"long long int"),
        Some(Some(die(0, 1409)))
    );
    assert_eq!(memo.size(die(3, 1857)), Some(Some(832)));
    assert_eq!(memo.size(die(3, 9)), Some(None));
    assert_eq!(memo.size(die(3, 10)), None);
    assert_eq!(memo.field(die(3, 1857), "dev.ch4.am"), Some(Some(776)));
    assert_eq!(memo.field(die(3, 1857), "pmap"), Some(None));
    assert_eq!(memo.field(die(3, 1857), "dev"), None);
}

#[test]
fn answers_survive_a_run_and_only_new_ones_are_written() {
    let dir = temp_dir("survive");
    let _cleanup = Cleanup(dir.clone());
    let key = "id-0123abcd".to_owned();
    {
        let memo = Memo::in_dir(key.clone(), Some(dir.clone()));
        assert!(memo.is_empty());
        sample(&memo);
    }
    let file = dir.join("id-0123abcd.answers");
    let written = std::fs::metadata(&file)
        .expect("saved on drop")
        .modified()
        .unwrap();
    let memo = Memo::in_dir(key.clone(), Some(dir.clone()));
    assert!(!memo.is_empty());
    check_sample(&memo);
    drop(memo);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        written,
        "nothing new: not rewritten"
    );
    // Another file's answers are not these.
    assert!(Memo::in_dir("id-ffff".to_owned(), Some(dir.clone())).is_empty());
}

#[test]
fn without_a_directory_answers_last_the_run_only() {
    let memo = Memo::in_dir("id-1".to_owned(), None);
    sample(&memo);
    check_sample(&memo);
    drop(memo);
    assert!(Memo::in_dir("id-1".to_owned(), None).is_empty());
}

#[test]
fn what_a_line_cannot_hold_is_not_kept() {
    let dir = temp_dir("lines");
    let _cleanup = Cleanup(dir.clone());
    {
        let memo = Memo::in_dir("id-2".to_owned(), Some(dir.clone()));
        memo.remember_name(NameKind::Plain, b"two\nlines", Some(die(1, 2)));
        memo.remember_field(die(1, 2), "a\rb", Some(4));
        memo.remember_name(NameKind::Plain, b"\xff\xfe", Some(die(1, 3)));
        memo.remember_name(NameKind::Plain, b"kept", Some(die(1, 4)));
        assert_eq!(memo.name(NameKind::Plain, b"two\nlines"), None);
    }
    let memo = Memo::in_dir("id-2".to_owned(), Some(dir.clone()));
    assert_eq!(memo.name(NameKind::Plain, b"kept"), Some(Some(die(1, 4))));
    assert_eq!(memo.name(NameKind::Plain, b"\xff\xfe"), None, "not UTF-8");
    assert_eq!(memo.field(die(1, 2), "a\rb"), None);
}

#[test]
fn a_damaged_or_foreign_file_is_ignored_whole() {
    let mut answers = Answers::default();
    answers
        .names
        .insert((b'P', b"MPIR_Request".to_vec()), Some(die(21, 2774)));
    answers.sizes.insert(die(21, 2774), Some(400));
    answers
        .fields
        .insert((die(21, 2774), "dev.next".to_owned()), Some(160));
    let text = render("id-3", &answers);
    assert_eq!(parse(&text, "id-3"), Some(answers));
    assert_eq!(parse(&text, "id-4"), None, "another file's");
    for cut in 0..text.len() {
        assert_eq!(
            parse(&text[..cut], "id-3"),
            None,
            "cut at {cut}: {:?}",
            &text[..cut]
        );
    }
    let bytes = text.as_bytes();
    for at in 0..bytes.len() {
        let mut damaged = bytes.to_vec();
        damaged[at] ^= 0x04;
        if let Ok(damaged) = String::from_utf8(damaged) {
            assert_eq!(
                parse(&damaged, "id-3"),
                None,
                "byte {at} flipped: {damaged:?}"
            );
        }
    }
    let older = text.replacen("mqd-type-answers 1", "mqd-type-answers 0", 1);
    assert_eq!(parse(&older, "id-3"), None, "another format");
}

#[test]
fn a_corrupt_file_on_disk_is_replaced_by_a_good_one() {
    let dir = temp_dir("corrupt");
    let _cleanup = Cleanup(dir.clone());
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("id-5.answers");
    std::fs::write(
        &file,
        "mqd-type-answers 1 id-5\nN P 1 2 x\nend 7 00000000\n",
    )
    .unwrap();
    {
        let memo = Memo::in_dir("id-5".to_owned(), Some(dir.clone()));
        assert!(memo.is_empty(), "a bad checksum is no answer");
        sample(&memo);
    }
    check_sample(&Memo::in_dir("id-5".to_owned(), Some(dir.clone())));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(parse(&text, "id-5").is_some(), "{text}");
}

/// Writers that finish together merge what the file holds when each writes; a reader
/// meanwhile sees a whole file or none, never a part of one.
#[test]
fn concurrent_writers_never_leave_a_partial_file() {
    let dir = temp_dir("concurrent");
    let _cleanup = Cleanup(dir.clone());
    let file = dir.join("id-6.answers");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut seen = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(text) = std::fs::read_to_string(&file) {
                    assert!(parse(&text, "id-6").is_some(), "a partial file: {text:?}");
                    seen += 1;
                }
            }
            seen
        });
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let dir = dir.clone();
                scope.spawn(move || {
                    for round in 0..25 {
                        let memo = Memo::in_dir("id-6".to_owned(), Some(dir.clone()));
                        let name = format!("type_{writer}_{round}");
                        memo.remember_name(
                            NameKind::Plain,
                            name.as_bytes(),
                            Some(die(writer, round)),
                        );
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            reader.join().expect("reader") > 0,
            "the reader saw the file"
        );
    });
    let memo = Memo::in_dir("id-6".to_owned(), Some(dir.clone()));
    // The last writer's answer is there whatever the interleaving.
    let last = (0..8).filter(|&w| {
        memo.name(NameKind::Plain, format!("type_{w}_24").as_bytes())
            .is_some()
    });
    assert!(last.count() >= 1);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn keys_name_the_build_or_else_the_file_version() {
    let here = std::env::current_exe().unwrap();
    let stat = std::fs::metadata(&here).unwrap();
    assert_eq!(
        key_of(Some(&[0xab, 0x01, 0xff]), &here, &stat),
        format!("id-ab01ff-{}", stat.len())
    );
    let by_file = key_of(None, &here, &stat);
    assert!(by_file.starts_with("file-"), "{by_file}");
    assert_eq!(by_file, key_of(Some(&[]), &here, &stat));
    let other = std::fs::metadata("/").unwrap();
    assert_ne!(by_file, key_of(None, &here, &other));
}
