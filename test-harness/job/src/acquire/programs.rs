//! The programs the processes of this host run: what names a job's starter.

/// The processes of this host with their command lines.
pub fn processes() -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .map(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| {
                    raw.split(|&b| b == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            (pid, line)
        })
        .collect()
}

/// Whether process `pid` runs a program named `name`.
pub fn runs(pid: i32, name: &str) -> bool {
    let base = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
    let argv0 = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|raw| {
            let first = raw.split(|&b| b == 0).next()?.to_vec();
            String::from_utf8(first).ok()
        })
        .map(|a| base(&a));
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| base(&p.display().to_string()));
    // The kernel keeps 15 bytes of the command name.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_owned());
    argv0.as_deref() == Some(name)
        || exe.as_deref() == Some(name)
        || (name.len() <= 15 && comm.as_deref() == Some(name))
}
