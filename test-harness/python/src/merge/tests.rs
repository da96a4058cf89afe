use super::*;

fn native(frames: &[(&str, &str)]) -> ThreadStack {
    ThreadStack {
        openmp: None,
        tid: 7,
        frames: frames
            .iter()
            .map(|(function, object)| Frame {
                function: Some((*function).to_owned()),
                object: Some((*object).to_owned()),
                ..Frame::default()
            })
            .collect(),
        truncated: None,
        call: None,
    }
}

fn py(function: &str, line: u32, entry: bool) -> PyFrame {
    PyFrame {
        function: function.to_owned(),
        file: "/app/solver.py".to_owned(),
        line: Some(line),
        entry,
    }
}

const PYTHON: &str = "/usr/bin/python3.11";

fn names(stack: &ThreadStack) -> Vec<String> {
    stack
        .frames
        .iter()
        .map(|f| match f.language {
            Some(Language::Python) => {
                format!("{}:{}", f.function.as_deref().unwrap(), f.line.unwrap())
            }
            None => f.function.clone().unwrap(),
        })
        .collect()
}

#[test]
fn each_evaluation_loop_becomes_the_python_frames_it_runs() {
    let mut stack = native(&[
        ("MPID_Progress_wait", "/usr/lib/libmpi.so.12"),
        ("PMPI_Allreduce", "/usr/lib/libmpi.so.12"),
        (
            "__pyx_pw_6mpi4py_3MPI_4Comm_allreduce",
            "/venv/mpi4py/MPI.so",
        ),
        ("cfunction_vectorcall_FASTCALL_KEYWORDS", PYTHON),
        (EVAL_LOOP, PYTHON),
        ("_PyEval_Vector", PYTHON),
        ("slot_tp_call", PYTHON),
        (EVAL_LOOP, PYTHON),
        ("pymain_run_python", PYTHON),
        ("__libc_start_main", "/usr/lib/libc.so.6"),
    ]);
    let thread = PyThread {
        native_id: Some(7),
        pthread: None,
        frames: vec![
            py("step", 88, false),
            py("Solver.run", 40, true),
            py("main", 12, false),
            py("<module>", 3, true),
        ],
        truncated: None,
    };
    merge(&mut stack, &thread, &|o| o == PYTHON);
    assert_eq!(
        names(&stack),
        [
            "MPID_Progress_wait",
            "PMPI_Allreduce",
            "__pyx_pw_6mpi4py_3MPI_4Comm_allreduce",
            "step:88",
            "Solver.run:40",
            "main:12",
            "<module>:3",
            "__libc_start_main"
        ]
    );
    assert_eq!(stack.truncated, None);
}

#[test]
fn what_the_interpreter_does_inside_the_innermost_python_frame_is_kept() {
    let mut stack = native(&[
        ("pthread_cond_timedwait", "/usr/lib/libc.so.6"),
        ("take_gil", PYTHON),
        (EVAL_LOOP, PYTHON),
        ("Py_RunMain", PYTHON),
    ]);
    let thread = PyThread {
        native_id: Some(7),
        pthread: None,
        frames: vec![py("<module>", 1, true)],
        truncated: None,
    };
    merge(&mut stack, &thread, &|o| o == PYTHON);
    assert_eq!(
        names(&stack),
        ["pthread_cond_timedwait", "take_gil", "<module>:1"]
    );
}

#[test]
fn python_frames_the_native_walk_did_not_reach_are_placed_last_and_said() {
    let mut stack = native(&[("PMPI_Recv", "/usr/lib/libmpi.so.12"), (EVAL_LOOP, PYTHON)]);
    stack.truncated = None;
    let thread = PyThread {
        native_id: Some(7),
        pthread: None,
        frames: vec![py("recv_all", 5, true), py("<module>", 9, true)],
        truncated: None,
    };
    merge(&mut stack, &thread, &|o| o == PYTHON);
    assert_eq!(names(&stack), ["PMPI_Recv", "recv_all:5", "<module>:9"]);
    assert!(
        stack
            .truncated
            .as_deref()
            .unwrap()
            .contains("outermost Python frames")
    );
    // No Python frames: the stack stays as it was.
    let mut stack = native(&[(EVAL_LOOP, PYTHON)]);
    merge(
        &mut stack,
        &PyThread {
            native_id: Some(7),
            pthread: None,
            frames: vec![],
            truncated: None,
        },
        &|o| o == PYTHON,
    );
    assert_eq!(names(&stack), [EVAL_LOOP]);
}
