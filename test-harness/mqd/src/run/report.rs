//! What `mqd run --report DIR` leaves for a CI system to keep: the text report, the JSON
//! document, the merged stacks, the wait-for graph as SVG (when Graphviz is there), and a
//! JUnit XML file whose one test case fails with the verdict when the job hung, so that
//! GitLab, Jenkins and GitHub show it among the test results.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the job ended, as the report tells it.
pub enum Ending {
    /// It ended by itself with this exit status (128 + N for signal N).
    Ended(i32),
    /// mqd declared it hung, or its `--timeout` passed: the verdict line, and why.
    Stopped {
        /// "Verdict: deadlock (...)".
        verdict: String,
        /// "no rank made progress for 5 min" or "--timeout 30 min passed".
        trigger: String,
    },
}

/// The report of one `mqd run`.
pub struct Report {
    /// The command run.
    pub command: String,
    /// How long it ran.
    pub elapsed: Duration,
    /// How it ended.
    pub ending: Ending,
    /// The text report (`mqd job`'s), when the job was dumped.
    pub text: Option<String>,
    /// The JSON document, when the job was dumped.
    pub json: Option<String>,
    /// The merged stacks as text.
    pub stacks: Option<String>,
    /// The wait-for graph in Graphviz DOT.
    pub dot: Option<String>,
}

/// Name of the JUnit test case.
pub const CASE_HUNG: &str = "MPI job hung";
/// Name of the JUnit test case of a job that ended by itself.
pub const CASE_ENDED: &str = "MPI job ran to its end";

impl Report {
    /// The text for people: the report, or a line saying how the job ended.
    pub fn summary(&self) -> String {
        match (&self.ending, &self.text) {
            (Ending::Stopped { trigger, .. }, Some(text)) => {
                format!("mqd run: {trigger}: `{}`\n\n{text}", self.command)
            }
            (Ending::Stopped { trigger, verdict }, None) => {
                format!("mqd run: {trigger}: `{}`\n{verdict}\n", self.command)
            }
            (Ending::Ended(status), _) => format!(
                "mqd run: `{}` ended by itself with status {status} after {}; no hang was seen\n",
                self.command,
                super::duration::words(self.elapsed)
            ),
        }
    }

    /// Writes the files into `dir` (made if missing); the paths written, and the files
    /// that could not be made (Graphviz missing) with why.
    pub fn write(&self, dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot make the report directory {}: {e}", dir.display()))?;
        let mut written = Vec::new();
        let mut skipped = Vec::new();
        let mut put = |name: &str, text: &str| -> Result<(), String> {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            written.push(path);
            Ok(())
        };
        put("report.txt", &self.summary())?;
        if let Some(json) = &self.json {
            put("report.json", json)?;
        }
        if let Some(stacks) = &self.stacks {
            put("stacks.txt", stacks)?;
        }
        put("junit.xml", &self.junit())?;
        if let Some(dot) = &self.dot {
            let path = dir.join("wait-for.svg");
            match crate::render::dot::render(dot, "svg", &path) {
                Ok(()) => written.push(path),
                Err(e) => skipped.push(format!("wait-for.svg: {e}")),
            }
        }
        Ok((written, skipped))
    }

    /// The JUnit XML document: one test suite `mqd run` with one test case, failing
    /// (message: the verdict, body: the text report) when the job was stopped.
    pub fn junit(&self) -> String {
        let time = format!("{:.3}", self.elapsed.as_secs_f64());
        let (name, failures, body) = match &self.ending {
            Ending::Stopped { verdict, trigger } => (
                CASE_HUNG,
                1,
                format!(
                    "      <failure message=\"{}\" type=\"{}\">{}</failure>\n",
                    escape(verdict),
                    escape(trigger),
                    escape(&self.summary())
                ),
            ),
            Ending::Ended(_) => (
                CASE_ENDED,
                0,
                format!(
                    "      <system-out>{}</system-out>\n",
                    escape(&self.summary())
                ),
            ),
        };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuites name=\"mqd run\" tests=\"1\" failures=\"{failures}\" errors=\"0\" time=\"{time}\">\n\
             \x20 <testsuite name=\"mqd run\" tests=\"1\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time}\">\n\
             \x20   <testcase classname=\"mqd.run\" name=\"{name}\" time=\"{time}\">\n\
             {body}\
             \x20   </testcase>\n\
             \x20 </testsuite>\n\
             </testsuites>\n"
        )
    }
}

/// `text` as XML character data or attribute value: markup escaped, and characters XML
/// 1.0 cannot hold (control characters a program printed) replaced.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hung() -> Report {
        Report {
            command: "mpiexec -n 4 ./ring".into(),
            elapsed: Duration::from_millis(61_500),
            ending: Ending::Stopped {
                verdict: "Verdict: deadlock (ranks 0-3 proven blocked) <&>".into(),
                trigger: "no rank made progress for 60 s".into(),
            },
            text: Some("Deadlock: ranks 0 -> 1 \u{1}\nVerdict: deadlock\n".into()),
            json: Some("{}".into()),
            stacks: Some("ranks 0-3: main\n".into()),
            dot: None,
        }
    }

    #[test]
    fn a_hang_is_one_failing_case_with_the_verdict() {
        let xml = hung().junit();
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("name=\"MPI job hung\""), "{xml}");
        assert!(
            xml.contains("message=\"Verdict: deadlock (ranks 0-3 proven blocked) &lt;&amp;&gt;\""),
            "{xml}"
        );
        assert!(xml.contains("time=\"61.500\""), "{xml}");
        // A control character the job printed cannot break the document.
        assert!(!xml.contains('\u{1}') && xml.contains('\u{fffd}'), "{xml}");
    }

    #[test]
    fn an_ended_job_is_one_passing_case() {
        let mut r = hung();
        r.ending = Ending::Ended(0);
        let xml = r.junit();
        assert!(
            xml.contains("failures=\"0\"") && !xml.contains("<failure"),
            "{xml}"
        );
        assert!(xml.contains("ended by itself with status 0"), "{xml}");
    }

    #[test]
    fn the_directory_gets_every_file() {
        let dir = std::env::temp_dir().join(format!("mqd-report-test-{}", std::process::id()));
        let (written, skipped) = hung().write(&dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["report.txt", "report.json", "stacks.txt", "junit.xml"]
        );
        assert!(skipped.is_empty());
        let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
        assert!(
            text.starts_with("mqd run: no rank made progress for 60 s"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
