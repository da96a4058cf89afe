//! Pictures of the wait-for graph: DOT text and its rendering by Graphviz.

mod support;

use mqd::render::dot::{self as graph, Collapse, DotOptions};
use mqd_model::WaitKind;
use mqd_synthetic::{Layout, MPI_ANY_SOURCE, ProcessSpec, RequestSpec};
use std::collections::BTreeSet;
use support::*;

#[test]
fn dot_of_the_ring_highlights_the_cycle() {
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    assert_eq!(
        dot.nodes.keys().collect::<Vec<_>>(),
        ["r0", "r1", "r2", "r3"]
    );
    assert!(
        dot.nodes["r0"].contains("label=\"rank 0\\npid 1000\\nsynthetic\""),
        "{text}"
    );
    assert!(
        dot.nodes["r0"].contains("color=\"red\""),
        "deadlocked node: {text}"
    );
    let pairs: BTreeSet<(String, String)> = dot
        .edges
        .iter()
        .map(|(a, b, _)| (a.clone(), b.clone()))
        .collect();
    let want: BTreeSet<(String, String)> = (0..4)
        .map(|r| (format!("r{r}"), format!("r{}", (r + 1) % 4)))
        .collect();
    assert_eq!(pairs, want);
    // Listed sends: a possible deadlock, red and dashed.
    for (_, _, attrs) in &dot.edges {
        assert!(attrs.contains("label=\"send tag 5\\nring\""), "{attrs}");
        assert!(
            attrs.contains("color=\"red\"") && attrs.contains("style=\"dashed\""),
            "{attrs}"
        );
    }
    assert!(
        text.contains("undetermined (possible deadlock: ranks 0-3)"),
        "{text}"
    );
    // Blocking MPI_Ssends on ch3 (their stacks say): proven, red and bold.
    let job = blocked_ssend_ring(Layout::Ch3);
    let text = graph::to_dot(&job, &diagnose(&job), &DotOptions::default());
    let dot = parse_dot(&text);
    assert_eq!(dot.edges.len(), 4, "{text}");
    for (_, _, attrs) in &dot.edges {
        assert!(
            attrs.contains("color=\"red\"") && attrs.contains("bold"),
            "{attrs}"
        );
    }
    assert!(text.contains(", deadlock: ranks 0-3;"), "{text}");
}

#[test]
fn dot_colours_kinds_and_marks_idle_and_any_source() {
    // Rank 0 computes, rank 1 receives from rank 0, rank 2 from any source, rank 3 has a
    // message waiting unexpected at rank 1.
    // (The 4.x debug queues do not say whether they list every send: the message may
    // come from a blocking send.)
    let mut specs: Vec<ProcessSpec> = (0..4).map(|r| base(Layout::Debugq4, 4, r)).collect();
    specs[1].posted = vec![RequestSpec::recv(0, 0, 7, 0x7000_0000, 1)];
    specs[1].unexpected = vec![RequestSpec::unexpected(0, 3, 8, 0)];
    specs[2].posted = vec![RequestSpec::recv(0, MPI_ANY_SOURCE, 7, 0x7000_0000, 1)];
    let job = job(&specs);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    let edge = |a: &str, b: &str| {
        dot.edges
            .iter()
            .find(|(x, y, _)| x == a && y == b)
            .unwrap_or_else(|| panic!("{a} -> {b}:\n{text}"))
            .2
            .clone()
    };
    assert!(edge("r1", "r0").contains(&format!(
        "color=\"{}\"",
        graph::kind_colour(WaitKind::Receive)
    )));
    assert!(edge("r1", "r0").contains("label=\"recv tag 7\\nMPI_COMM_WORLD\""));
    assert!(edge("r3", "r1").contains(&format!(
        "color=\"{}\"",
        graph::kind_colour(WaitKind::Unexpected)
    )));
    assert!(edge("r3", "r1").contains("label=\"unexpected tag 8\\nMPI_COMM_WORLD\""));
    // The any-source receive goes to an "any of" node, which points at every member.
    let any = edge("r2", "p0");
    assert!(any.contains("dashed"), "{any}");
    assert!(
        dot.nodes["p0"].contains("any of ranks 0-3\\non MPI_COMM_WORLD"),
        "{text}"
    );
    for r in 0..4 {
        edge("p0", &format!("r{r}"));
    }
    assert!(
        dot.nodes["r0"].contains("no pending p2p") && dot.nodes["r0"].contains("#fff2b3"),
        "{text}"
    );
    assert!(
        !text.contains("color=\"red\""),
        "no deadlock, nothing red:\n{text}"
    );
}

#[test]
fn dot_of_a_knot_highlights_the_any_source_wait() {
    let scratch = Scratch::new("dot-of-a-knot-highlights");
    let job = knot_job();
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    let attrs = |a: &str, b: &str| {
        dot.edges
            .iter()
            .find(|(x, y, _)| x == a && y == b)
            .unwrap_or_else(|| panic!("{a} -> {b}:\n{text}"))
            .2
            .clone()
    };
    assert!(attrs("r0", "p0").contains("color=\"red\""), "{text}");
    // A possible knot: dashed and thinner than a proven one.
    assert!(
        attrs("r0", "p0").contains("style=\"dashed\", penwidth=1.5"),
        "{text}"
    );
    for r in 0..3 {
        assert!(
            attrs("p0", &format!("r{r}")).contains("color=\"red\""),
            "{text}"
        );
    }
    assert!(attrs("r1", "r0").contains("color=\"red\""), "{text}");
    graph::render(&text, "svg", &scratch.file("knot.svg")).unwrap();
}

#[test]
fn dot_collapses_large_jobs_into_rank_set_nodes() {
    let job = ssend_ring(Layout::Debugq5, 64, true);
    let d = diagnose(&job);
    let text = graph::to_dot(&job, &d, &DotOptions::default());
    let dot = parse_dot(&text);
    assert_eq!(dot.nodes.keys().collect::<Vec<_>>(), ["g0"], "{text}");
    assert!(dot.nodes["g0"].contains("ranks 0-63 (64)"), "{text}");
    assert_eq!(dot.edges.len(), 1, "{text}");
    let (a, b, attrs) = &dot.edges[0];
    assert_eq!((a.as_str(), b.as_str()), ("g0", "g0"));
    assert!(
        attrs.contains("send to right tag 5\\nring\\n\u{d7}64"),
        "{attrs}"
    );
    assert!(attrs.contains("color=\"red\""), "{attrs}");
    // Small jobs collapse on request; large ones can be drawn whole.
    let small = ssend_ring(Layout::Debugq5, 4, true);
    let collapsed = graph::to_dot(
        &small,
        &diagnose(&small),
        &DotOptions {
            collapse: Collapse::Always,
            ..DotOptions::default()
        },
    );
    assert_eq!(parse_dot(&collapsed).nodes.len(), 1);
    let whole = graph::to_dot(
        &job,
        &d,
        &DotOptions {
            collapse: Collapse::Never,
            ..DotOptions::default()
        },
    );
    let whole = parse_dot(&whole);
    assert_eq!((whole.nodes.len(), whole.edges.len()), (64, 64));
}

#[test]
fn graphviz_renders_the_dot_text() {
    let scratch = Scratch::new("graphviz-renders-the-dot");
    // Graphviz is part of the project's setup (.ci/run installs it): no silent skip.
    let version = std::process::Command::new("dot").arg("-V").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "Graphviz's dot is missing: {}",
        graph::INSTALL_HINT
    );
    let job = ssend_ring(Layout::Debugq5, 4, true);
    let d = diagnose(&job);
    let dot = graph::to_dot(&job, &d, &DotOptions::default());
    let svg = scratch.file("ring.svg");
    graph::render(&dot, "svg", &svg).unwrap();
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("<svg"), "{svg_text}");
    for r in 0..4 {
        assert!(
            svg_text.contains(&format!("<title>r{r}</title>")),
            "{svg_text}"
        );
    }
    assert!(
        svg_text.contains("<title>r3&#45;&gt;r0</title>"),
        "{svg_text}"
    );
    assert!(svg_text.contains("stroke=\"red\""), "cycle drawn red");
    let png = scratch.file("ring.png");
    graph::render(&dot, "png", &png).unwrap();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    // Large (collapsed) graphs and names that need escaping render too.
    let big = ssend_ring(Layout::Debugq5, 64, true);
    let big_dot = graph::to_dot(&big, &diagnose(&big), &DotOptions::default());
    graph::render(&big_dot, "svg", &scratch.file("big.svg")).unwrap();
    let mut odd = ssend_ring(Layout::Debugq5, 2, true);
    for r in &mut odd.ranks {
        r.host = Some("a \"quoted\" \\ host".into());
    }
    let odd_dot = graph::to_dot(&odd, &diagnose(&odd), &DotOptions::default());
    parse_dot(&odd_dot);
    graph::render(&odd_dot, "svg", &scratch.file("odd.svg")).unwrap();
    // Errors say what to do.
    let err = graph::render(&dot, "gif", &scratch.file("x.gif")).unwrap_err();
    assert!(err.contains("svg and png"), "{err}");
    let err = graph::render("digraph {", "svg", &scratch.file("bad.svg")).unwrap_err();
    assert!(err.contains("failed"), "{err}");
}

#[test]
fn a_missing_graphviz_says_how_to_install_it() {
    let scratch = Scratch::new("a-missing-graphviz-says-");
    let err = graph::render_with(
        "/nonexistent/mqd-test/dot",
        "digraph {}",
        "svg",
        &scratch.file("none.svg"),
    )
    .unwrap_err();
    assert!(
        err.contains("is not installed") && err.contains("apt-get install graphviz"),
        "{err}"
    );
}
