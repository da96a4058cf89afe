//! `mqd watch`: samples of a job, what persisted across them and the answer of one
//! sample, held where one snapshot leaves it open; rank by rank, or by classes for a
//! job of more than [`RANKS_ONE_BY_ONE`](super::RANKS_ONE_BY_ONE) ranks.

use super::{
    ClassReport, Format, Output, by_classes_of, destination, dump_job, dump_processes,
    host_counters, write_failed,
};
use mqd::interrupt;
use mqd::reach::Reach;
use mqd::render::{class_watch, json, text};
use mqd::run;
use mqd::verdict_exit_code;
use mqd_job::acquire;
use mqd_job::dump::{JobContext, ProcessRef};
use mqd_job::stay::{CallWatch, RemoteCounters};
use mqd_library_host::failure::Failure;
use mqd_model::{Acquisition, JobDump, Persistence, RankSet};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Which sample answered a watch, how long a hold of it lasted, and the watch's asked
/// samples and interval.
struct Answer {
    at: usize,
    held: Option<u64>,
    samples: usize,
    interval: f64,
}

/// Samples the job (`--job`) or the processes `pids`, and reports what persisted.
pub(super) fn watch(
    samples: usize,
    interval: f64,
    job: Option<i32>,
    pids: Vec<i32>,
    output: &Output,
    reach: &Reach,
) -> Result<ExitCode, Failure> {
    let attached = match job {
        Some(starter) => Some(acquire::attach_job(starter).map_err(Failure::from)?),
        None => None,
    };
    let counters = attached.as_ref().and_then(|j| host_counters(j, reach));
    let remote = counters.as_ref().map(|c| c as &dyn RemoteCounters);
    let sample = || match &attached {
        Some(j) => dump_job(j, output, reach),
        None => {
            let processes: Vec<ProcessRef> = pids.iter().copied().map(ProcessRef::pid).collect();
            dump_processes(&processes, output, &JobContext::new(Acquisition::Attach))
        }
    };
    let holding = !output.no_hold && !output.no_stacks;
    let mut dumps = Vec::with_capacity(samples);
    // The hold under way: the sample it began at, its diagnosis, its watch, the ranks.
    let mut hold: Option<(usize, mqd_analysis::Analysis, CallWatch, RankSet)> = None;
    let mut measures = None;
    for i in 0..samples {
        if i > 0 && !interrupt::sleep(Duration::from_secs_f64(interval)) {
            break;
        }
        // Measured before the sample reads the processes' memory.
        measures = hold.as_ref().map(|(_, _, w, _)| w.measure());
        let dump = match sample() {
            Ok(dump) => dump,
            // Whatever was sampled is still worth reporting; a first failure is not.
            Err(f) if dumps.is_empty() => return Err(f),
            Err(f) => {
                eprintln!(
                    "mqd: sample {} failed, reporting the {} taken: {}",
                    i + 1,
                    dumps.len(),
                    f
                );
                break;
            }
        };
        // A watched rank that moved or worked: hold again from this sample.
        if let Some((_, _, w, ranks)) = &hold {
            let (stayed, busy) = run::stillness::Stays::stayed(w, &dump);
            let moved = ranks.difference(&stayed).difference(w.unwatched());
            if !moved.is_empty() || busy.is_some() {
                hold = None;
            }
        }
        if holding && hold.is_none() {
            let analysis = mqd_analysis::analyse(&dump);
            let ranks = mqd_analysis::hold::candidates(&analysis);
            if !ranks.is_empty() {
                let w = CallWatch::arm_across(&dump, &ranks, remote);
                hold = Some((i, analysis, w, ranks));
                measures = None;
            }
        }
        dumps.push(dump);
        if interrupt::requested().is_some() {
            break;
        }
    }
    if dumps.len() < samples {
        eprintln!(
            "mqd: watch stopped after {} of {samples} samples: reporting those",
            dumps.len()
        );
    }
    let persistence = mqd_analysis::persistent_dumps(&dumps);
    let last = dumps.len().saturating_sub(1);
    let empty = JobDump::of_ranks(Vec::new());
    let (at, answer) = match hold {
        Some((k, analysis, w, _)) => {
            // The window ends at the last sample; a hold begun there gets a window and a
            // snapshot of its own.
            let later;
            let end = match measures {
                // The window asked for: the samples' intervals.
                Some(m) if k < last => Some((
                    m,
                    Duration::from_secs_f64(interval * (last - k) as f64),
                    &dumps[last],
                )),
                _ if w.is_empty() => None,
                _ => {
                    later = w
                        .measure_through(
                            output.hold_window(),
                            mqd_analysis::hold::HOLD_STRETCH,
                            interrupt::sleep,
                        )
                        .and_then(|(m, asked)| Some((m, asked, sample().ok()?)));
                    later.as_ref().map(|(m, asked, d)| (m.clone(), *asked, d))
                }
            };
            let judged = match end {
                Some((m, asked, end)) => {
                    mqd_analysis::hold::judge(&dumps[k], end, analysis, &w.hold(m, asked))
                }
                // Nothing could be counted: the hold says why.
                None if w.is_empty() => mqd_analysis::hold::judge(
                    &dumps[k],
                    &dumps[k],
                    analysis,
                    &w.hold(w.measure(), Duration::ZERO),
                ),
                None => analysis.diagnosis,
            };
            (k, judged)
        }
        None => (
            last,
            mqd_analysis::diagnose(dumps.get(last).unwrap_or(&empty)),
        ),
    };
    let report = dumps
        .get(at)
        .filter(|d| by_classes_of(d.ranks.len(), output))
        .and_then(ClassReport::of_dump);
    if let Some(report) = report {
        let report = report.judged_by(answer);
        let held = report.hold.as_ref().map(|h| h.window_ms);
        let about = Answer {
            at,
            held,
            samples,
            interval,
        };
        return Ok(print_by_classes(&report, &persistence, &about, output));
    }
    let code = ExitCode::from(verdict_exit_code(answer.verdict));
    let mut out = match destination(output) {
        Ok(out) => std::io::BufWriter::new(out),
        Err(f) => return Err(f),
    };
    let written = if output.format() == Format::Json {
        let answered = json::WatchAnswer {
            at,
            dump: dumps.get(at).unwrap_or(&empty),
            diagnosis: &answer,
        };
        let doc = json::watch_document(&dumps, &persistence, &answered, samples, interval);
        serde_json::to_writer(&mut out, &doc)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        write!(
            out,
            "{}",
            text::watch_text(&dumps, &persistence, at, &answer)
        )
    };
    if let Err(e) = written.and_then(|()| out.flush()) {
        return Ok(write_failed("watch report", &e, code));
    }
    Ok(code)
}

/// A watch's report by classes: what persisted by rank sets, then the answering
/// sample's classes (text), or the class document with the watch's (JSON).
fn print_by_classes(
    report: &ClassReport,
    persistence: &Persistence,
    answer: &Answer,
    output: &Output,
) -> ExitCode {
    let code = ExitCode::from(verdict_exit_code(report.diagnosis.verdict));
    let mut out = match destination(output) {
        Ok(out) => std::io::BufWriter::new(out),
        Err(f) => {
            eprintln!("mqd: {f}");
            return ExitCode::from(mqd::exit_code(f.kind));
        }
    };
    // The document streamed, as `mqd job`'s: its classes may be every rank's dump.
    let written = if output.format() == Format::Json {
        let mut doc = report.json();
        doc.head["watch"] = serde_json::json!({
            "samples": persistence.samples,
            "samples_requested": answer.samples,
            "interval_seconds": answer.interval,
            "diagnosis_sample": answer.at,
            "persistent": class_watch::persistence_json(persistence),
        });
        doc.write_to(&mut out).and_then(|()| out.write_all(b"\n"))
    } else {
        let held = answer
            .held
            .map(|ms| format!(", held from it for {:.1} s", ms as f64 / 1000.0))
            .unwrap_or_default();
        write!(
            out,
            "{}\nThe job at sample {}{held}:\n{}",
            class_watch::persistence_text(persistence),
            answer.at + 1,
            report.text()
        )
    };
    if let Err(e) = written.and_then(|()| out.flush()) {
        return write_failed("watch report", &e, code);
    }
    code
}
