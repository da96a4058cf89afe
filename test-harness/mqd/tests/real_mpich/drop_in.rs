//! The drop-in path, as docs/library.md gives it: `scripts/install-into-mpich` run on a copy of
//! the cached MPICH prefix puts ours in place of `libtvmpich.so`. The copy is then mounted
//! over the original prefix in a private mount namespace (so that the path MPICH compiled
//! into `MPIR_dll_name` leads to it), a job runs there, and `mqd job --dll job` (the
//! library the job names, as TotalView loads it) must load ours through `MPIR_dll_name`;
//! the library at that path must give our version string.

use crate::*;
use mqd_library_host::library::MqsLibrary;
use std::os::unix::process::CommandExt;

const DROP_IN_TIMEOUT: Duration = Duration::from_secs(120);

/// The process group of the namespace, killed when dropped (before its directory goes).
struct Sandbox {
    group: Option<i32>,
    dir: Scratch,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(pgid) = self.group {
            // SAFETY: killpg(2) with a process group id we created.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
        }
    }
}

/// In the namespace: the copy over the original prefix, a 4-rank ring, `mqd job` on it.
const SCRIPT: &str = r#"
set -u
copy=$1 orig=$2 mpiexec=$3 program=$4 mqd=$5 out=$6
mount --bind "$copy" "$orig" || exit 90
: > "$out/job.out" # there before the first look for READY lines
"$mpiexec" -n 4 "$program" --scenario ring > "$out/job.out" 2>&1 &
job=$!
tries=0
until [ "$(grep -c '^READY' "$out/job.out")" -ge 4 ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ]; then kill -TERM "$job"; exit 91; fi
    sleep 0.1
done
sleep 1
"$mqd" job --dll job --json --stats "$job" > "$out/mqd.json" 2> "$out/mqd.err"
rc=$?
kill -TERM "$job"
wait "$job"
exit $rc
"#;

pub(crate) fn drop_in_replaces_libtvmpich(device: Device) {
    let m = mpich(device);
    let dir = Scratch::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "drop-in-{}-{}",
        device.name(),
        std::process::id()
    )));
    let mut sandbox = Sandbox { group: None, dir };
    let copy = sandbox.dir.0.join("mpich");
    let out = sandbox.dir.0.join("out");
    std::fs::create_dir_all(&out).expect("output directory");

    let cp = Command::new("cp")
        .arg("-a")
        .arg(&m.prefix)
        .arg(&copy)
        .status()
        .expect("run cp");
    assert!(
        cp.success(),
        "cp -a {} {}",
        m.prefix.display(),
        copy.display()
    );

    // The README's command, with the library the tests built.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-into-mpich");
    let installed = Command::new(&script)
        .arg(&copy)
        .arg(ours())
        .output()
        .expect("run scripts/install-into-mpich");
    let said = String::from_utf8_lossy(&installed.stderr);
    assert!(installed.status.success(), "{}: {said}", script.display());
    // A copy still names the original prefix (mounted over below); the script says so.
    let named = m.prefix.join("lib/libtvmpich.so");
    assert!(
        said.contains(&format!(
            "warning: this MPICH names {} in MPIR_dll_name",
            named.display()
        )),
        "{said}"
    );
    let link = copy.join("lib/libtvmpich.so");
    assert_eq!(
        std::fs::read_link(&link).ok(),
        Some(PathBuf::from("libmqd_mpich.so")),
        "{said}"
    );
    assert!(
        said.contains("to put MPICH's own library back: ln -sfn libtvmpich.so.12"),
        "{said}"
    );
    // MPICH's own library is kept for the way back.
    assert!(copy.join("lib/libtvmpich.so.12").exists());

    // A debugger reading MPIR_dll_name loads ours and gets our version string.
    let lib = MqsLibrary::load(&link).unwrap_or_else(|e| panic!("{}: {e}", link.display()));
    assert!(
        lib.version_string()
            .starts_with("mqd message queue support"),
        "{}",
        lib.version_string()
    );

    let mut child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            SCRIPT,
            "sh",
        ])
        .arg(&copy)
        .arg(&m.prefix)
        .arg(m.mpiexec())
        .arg(&m.program)
        .arg(env!("CARGO_BIN_EXE_mqd"))
        .arg(&out)
        .env_remove("MQD_DLL")
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("unshare (util-linux) runs; scripts/test installs it");
    sandbox.group = Some(child.id() as i32);
    let status = wait_child(&mut child, DROP_IN_TIMEOUT);
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    let (job, json, err) = (read("job.out"), read("mqd.json"), read("mqd.err"));
    assert!(
        status.is_some_and(|s| mqd::verdict_of_exit_code(s.code()).is_some()),
        "{status:?} (90: bind mount failed, 91: the job never got ready; else mqd's)\njob:\n{job}\nmqd:\n{err}"
    );
    let stats = err
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("no --stats line in\n{err}"));
    assert_eq!(
        stats["mqd_stats"]["dll"],
        json!(named.display().to_string()),
        "mqd job loaded the library MPIR_dll_name names"
    );
    let doc: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let ranks = doc["ranks"].as_array().cloned().unwrap_or_default();
    assert_eq!(ranks.len(), 4, "{json}");
    let layout = match device {
        Device::Ch3 => "has MPICH ch3 device queues",
        Device::Ch4 => "has MPICH ch4 active-message queues",
    };
    for r in &ranks {
        let message = r["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("mqd: '") && message.contains(layout),
            "rank {}: not decoded by ours: {message:?}",
            r["rank"]
        );
    }
    assert_eq!(doc["diagnosis"]["deadlock"], json!(true), "{json}");
}
