//! The architecture, checked: the modules import each other only along the allowed edges and
//! never in a cycle, the command layer sits on top and nothing imports it, the command
//! line's types stay in it, and transports are named by their kind, not by strings.
//! Reads the source; no sockets, no timing.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source's production code lines: comments and doc comments left out (they may name
/// anything), and so is test code (files of tests, and a file's `#[cfg(test)] mod ... {`
/// at its end, which clippy keeps last): a test may build its fixtures from any layer.
fn code(path: &Path) -> Vec<(usize, String)> {
    let name = path.file_name().unwrap().to_string_lossy();
    if name.ends_with("_tests.rs") || name == "tests.rs" {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() == "#[cfg(test)]" {
            let next = lines.get(i + 1).map(|n| n.trim()).unwrap_or("");
            let module = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if module.starts_with("mod ") && module.ends_with('{') {
                break;
            }
        }
        if !l.trim_start().starts_with("//") {
            out.push((i + 1, (*l).to_owned()));
        }
    }
    out
}

/// The top-level module a file belongs to: src/plan/runner.rs -> "plan", src/units.rs -> "units".
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level names a `crate::` path starts with: `crate::plan::X` names `plan`, and
/// `crate::{plan::X, model, store::{a, b}}` names `plan`, `model` and `store`.
fn named_after_crate(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut names = Vec::new();
        let mut depth = 0;
        let mut at_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => at_start = true,
                c if at_start && !c.is_whitespace() => {
                    at_start = false;
                    names.push(ident(&group[i..]));
                }
                _ => {}
            }
        }
        names
    } else {
        vec![ident(rest)]
    }
}

/// Top-level module -> the top-level modules its production code names as `crate::X`
/// (grouped imports included). A `use` group may span lines: the file is read as one text.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let m = module_of(src, &f);
        if m == "main" || m == "lib" {
            continue;
        }
        let deps = g.entry(m.clone()).or_default();
        let text: String = code(&f).into_iter().map(|(_, l)| l + "\n").collect();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            for name in named_after_crate(rest) {
                if !name.is_empty() && name != m && name != "self" {
                    deps.insert(name);
                }
            }
        }
    }
    g
}

/// The edges the architecture allows between top-level modules, and only these: data flows
/// one way, from the commands through the glue and the plan to the patterns, transports and
/// the OS, and the measurements come back as the result model that output, store and
/// figures read. A new edge is a decision: add it here (README's architecture section
/// draws the same graph), and the test below still rejects any cycle.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "cmd",
        &[
            "agent",
            "app",
            "control",
            "env",
            "error",
            "figures",
            "glue",
            "group",
            "lab",
            "mesh",
            "metrics",
            "model",
            "outfile",
            "output",
            "pattern",
            "plan",
            "relay",
            "request",
            "stats",
            "store",
            "study",
            "text",
            "trace",
            "transport",
            "units",
        ],
    ),
    (
        // The standing instrument: schedules runs of requests, saves them, judges
        // regressions, and feeds its exporter.
        "agent",
        &[
            "env",
            "error",
            "glue",
            "lab",
            "metrics",
            "model",
            "output",
            "plan",
            "request",
            "stats",
            "store",
            "text",
            "transport",
            "units",
        ],
    ),
    (
        // The Prometheus exporter: reads plain snapshots, names no producer; its log lines
        // make what a client sent printable (text).
        "metrics",
        &["error", "model", "text", "units"],
    ),
    (
        "study",
        &[
            "env",
            "error",
            "figures",
            "instruments",
            "lab",
            "model",
            "outfile",
            "pattern",
            "plan",
            "relay",
            "request",
            "stats",
            "store",
            "text",
            "trace",
            "transport",
            "units",
        ],
    ),
    (
        "mesh",
        &[
            "control",
            "env",
            "error",
            "figures",
            "group",
            "lab",
            "model",
            "outfile",
            "output",
            "plan",
            "progress",
            "request",
            "store",
            "text",
            "transport",
            "units",
        ],
    ),
    (
        "glue",
        &[
            "env",
            "error",
            "figures",
            "lab",
            "model",
            "outfile",
            "output",
            "pattern",
            "plan",
            "progress",
            "request",
            "stats",
            "store",
            "text",
            "transport",
        ],
    ),
    (
        "store",
        &["env", "error", "model", "plan", "request", "text"],
    ),
    (
        "output",
        &["figures", "model", "plan", "stats", "text", "units"],
    ),
    ("relay", &["control", "units"]),
    (
        "plan",
        &[
            "control",
            "env",
            "error",
            "instruments",
            "lab",
            "model",
            "outfile",
            "pattern",
            "request",
            "stats",
            "sys",
            "text",
            "trace",
            "transport",
            "units",
        ],
    ),
    ("request", &["pattern", "trace", "transport", "units"]),
    (
        "control",
        &[
            "env",
            "error",
            "instruments",
            "pattern",
            "sys",
            "text",
            "transport",
            "units",
        ],
    ),
    (
        "app",
        &[
            "figures",
            "group",
            "lab",
            "progress",
            "stats",
            "text",
            "transport",
            "units",
        ],
    ),
    ("pattern", &["model", "stats", "sys", "transport", "units"]),
    ("group", &["lab", "transport", "units"]),
    (
        "figures",
        &["env", "model", "outfile", "stats", "text", "trace", "units"],
    ),
    (
        "transport",
        &["env", "error", "model", "stats", "sys", "text", "units"],
    ),
    (
        "lab",
        &[
            "env",
            "error",
            "instruments",
            "model",
            "sys",
            "text",
            "units",
        ],
    ),
    ("trace", &["model", "sys"]),
    ("env", &["model", "sys"]),
    ("sys", &[]),
    ("instruments", &["model"]),
    ("model", &["stats", "units"]),
    ("stats", &["units"]),
    ("error", &["text"]),
    ("units", &[]),
    ("text", &[]),
    ("test_support", &[]),
    ("outfile", &[]),
    ("console", &[]),
    ("progress", &["units"]),
];

/// The modules of `g` in an order where every module comes after all it imports, or the
/// modules left on a cycle.
fn layers(g: &BTreeMap<String, BTreeSet<String>>) -> Result<Vec<String>, Vec<String>> {
    let mut placed: Vec<String> = Vec::new();
    let mut left: BTreeSet<&String> = g.keys().collect();
    while !left.is_empty() {
        let ready: Vec<&String> = left
            .iter()
            .copied()
            .filter(|m| g[*m].iter().all(|d| !left.contains(d)))
            .collect();
        if ready.is_empty() {
            return Err(left.into_iter().cloned().collect());
        }
        for m in ready {
            left.remove(m);
            placed.push(m.clone());
        }
    }
    Ok(placed)
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module graph has no cycle, every edge in it is one [`ALLOWED`] names, and the
/// allowed graph itself has no cycle; the graph is printed bottom-up for the record (`cargo
/// test --test layers -- --nocapture`). No module below the command layer imports it, and
/// the leaves stay leaves.
#[test]
fn every_import_between_modules_is_an_allowed_edge_and_none_is_a_cycle() {
    let g = graph(&src());
    let allowed: BTreeMap<String, BTreeSet<String>> = ALLOWED
        .iter()
        .map(|(m, deps)| (m.to_string(), deps.iter().map(|d| d.to_string()).collect()))
        .collect();
    let order =
        layers(&allowed).unwrap_or_else(|cycle| panic!("ALLOWED has a cycle among {cycle:?}"));
    for m in &order {
        println!(
            "{m} -> {}",
            g.get(m)
                .map(|d| d.iter().cloned().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        );
    }
    let mut unknown = Vec::new();
    for (m, deps) in &g {
        let Some(ok) = allowed.get(m) else {
            unknown.push(format!("module {m} is not in ALLOWED"));
            continue;
        };
        for d in deps {
            if !ok.contains(d) {
                unknown.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "imports that tests/layers.rs's ALLOWED does not list (add an edge only if it keeps the \
         data flowing one way; the cycle check still holds): {unknown:#?}"
    );
    if let Err(cycle) = layers(&g) {
        panic!("the module graph has a cycle among {cycle:?}");
    }
    let offenders: Vec<&String> = g
        .iter()
        .filter(|(m, deps)| m.as_str() != "cmd" && deps.contains("cmd"))
        .map(|(m, _)| m)
        .collect();
    assert!(
        offenders.is_empty(),
        "modules below the command layer import it: {offenders:?}"
    );
    assert!(!g.contains_key("cli"), "{g:?}");
    for leaf in ["units", "sys", "text", "console", "outfile"] {
        assert!(g[leaf].is_empty(), "{leaf} imports {:?}", g[leaf]);
    }
}

/// The checker itself: grouped imports count, a cycle is found, test code is left out.
#[test]
fn the_checker_sees_grouped_imports_and_cycles() {
    assert_eq!(
        named_after_crate("{plan::X, model,\n store::{a, b}};"),
        ["plan", "model", "store"]
    );
    assert_eq!(named_after_crate("output::table::TableSink;"), ["output"]);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["c".to_string()].into());
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(layers(&g).unwrap(), ["c", "b", "a"]);
    g.get_mut("c").unwrap().insert("a".into());
    assert_eq!(layers(&g).unwrap_err(), ["a", "b", "c"]);
}

/// `RunArgs` (clap's view of `run`) exists only in the command layer; below it, a run is a
/// typed `Request`.
#[test]
fn the_command_line_types_stay_in_the_command_layer() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for f in &files {
        // The binary's entry point parses the command line; it is above the command layer.
        if ["cmd", "main"].contains(&module_of(&root, f).as_str()) {
            continue;
        }
        for (n, line) in code(f) {
            for word in ["RunArgs", "MpiArgs", "ServeArgs", "clap::Parser", "#[arg("] {
                if line.contains(word) {
                    found.push(format!("{}:{n}: {word}", f.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// Transports are `TransportKind`s: no code compares a transport with a string of its name,
/// outside the one file that maps names to kinds and the transports' own `name()`.
#[test]
fn no_transport_is_named_by_a_string_comparison() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let names = ["tcp", "udp", "unix", "mptcp", "quic", "raw", "mpi"];
    let mut found = Vec::new();
    for f in &files {
        if f.ends_with("model/vocab.rs") {
            continue;
        }
        for (n, line) in code(f) {
            for name in names {
                let quoted = format!("\"{name}\"");
                let compared = [
                    format!("== {quoted}"),
                    format!("!= {quoted}"),
                    format!("{quoted} =>"),
                    format!("by_name({quoted}"),
                ];
                if compared.iter().any(|c| line.contains(c.as_str())) {
                    found.push(format!("{}:{n}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
