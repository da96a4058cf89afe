//! A job's starter named by pid or by program name (`mqd job mpiexec`): the one process
//! of this host that runs a program of that name. None or several is an error that lists
//! what was found, so the user can give a pid.

/// Seconds, finite and at most an hour.
pub fn seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !value.is_finite() || !(0.0..=3600.0).contains(&value) {
        return Err(format!("{text} is not between 0 and 3600 seconds"));
    }
    Ok(value)
}

/// Most candidates listed in an error.
const LISTED: usize = 8;

/// The pid of `text`: a number, or the one process (not this one) whose program is named
/// `text` (its `argv[0]`, its executable's file name, or its command name).
pub fn starter(text: &str) -> Result<i32, String> {
    if let Ok(pid) = text.parse::<i32>() {
        return if pid > 0 {
            Ok(pid)
        } else {
            Err(format!("{text:?} is not a process id"))
        };
    }
    if text.is_empty() || text.contains('/') {
        return Err(format!(
            "{text:?} is neither a process id nor a program name (a file name, without '/')"
        ));
    }
    let me = std::process::id() as i32;
    let found: Vec<(i32, String)> = mqd_job::acquire::programs::processes()
        .into_iter()
        .filter(|(pid, _)| *pid != me)
        .filter(|(pid, _)| mqd_job::acquire::programs::runs(*pid, text))
        .collect();
    match found.as_slice() {
        [(pid, _)] => Ok(*pid),
        [] => Err(format!(
            "no process of this host runs a program named {text:?}: give the starter's pid"
        )),
        several => {
            let listed: Vec<String> = several
                .iter()
                .take(LISTED)
                .map(|(pid, line)| format!("{pid} ({line})"))
                .collect();
            let more = several.len().saturating_sub(LISTED);
            Err(format!(
                "{} processes run a program named {text:?}: {}{}; give the starter's pid",
                several.len(),
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::starter;

    #[test]
    fn numbers_are_pids_and_paths_are_refused() {
        assert_eq!(starter("42"), Ok(42));
        assert!(starter("0").is_err());
        assert!(starter("-3").is_err());
        assert!(starter("./mpiexec").unwrap_err().contains("without '/'"));
        assert!(
            starter("no-such-program-runs-here-mqd")
                .unwrap_err()
                .contains("give the starter's pid")
        );
    }
}
