//! The results database, reports, plots and comparisons, through the real binary: runs are
//! measured over loopback into a temporary database, never the user's.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::need::{require_for, Need};
use serde_json::Value;
use wirebench::store::db::{Db, Filter};

fn wb(args: &[&str]) -> Output {
    common::bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("wirebench runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs wirebench and asserts success; returns stdout.
fn ok(args: &[&str]) -> String {
    let out = wb(args);
    assert!(
        out.status.success(),
        "wirebench {args:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs wirebench, asserts it fails with `code` and one line on stderr containing `needle`.
fn fails(args: &[&str], code: i32, needle: &str) {
    let out = wb(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line expected: {err}");
    assert!(err.contains(needle), "{args:?}: '{err}' lacks '{needle}'");
    assert!(!err.contains("panicked"), "{err}");
}

struct Tmp {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmp {
    fn new() -> Tmp {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_owned();
        Tmp { _dir: dir, path }
    }
    fn db(&self) -> String {
        self.path.join("results.sqlite").display().to_string()
    }
    fn file(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}

fn last_id(db: &str) -> i64 {
    Db::open_existing(Path::new(db))
        .unwrap()
        .resolve_id("last")
        .unwrap()
}

#[test]
fn runs_are_saved_and_come_back_through_history_show_export_import() {
    let t = Tmp::new();
    let db = t.db();
    let table = ok(&[
        "run", "pingpong", "--size", "1,64,1K", "-n", "200", "--db", &db,
    ]);
    let id = last_id(&db).to_string();

    let history = ok(&["history", "--db", &db]);
    assert!(
        history.contains("pingpong") && history.contains("t0 "),
        "{history}"
    );
    // The units line, the header and the run.
    assert_eq!(history.lines().count(), 3, "{history}");
    assert!(history.starts_with("# units: "), "{history}");

    // `show` prints the run's table again: same header and same rows.
    let shown = ok(&["show", &id, "--db", &db]);
    for line in table
        .lines()
        .filter(|l| l.starts_with("      ") || l.starts_with("# t0"))
    {
        assert!(shown.contains(line), "show lacks '{line}':\n{shown}");
    }

    let json = ok(&["export", &id, "--json", "--db", &db]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["schema"], "wirebench.run");
    assert_eq!(doc["points"].as_array().unwrap().len(), 3);
    let dist = doc["points"][0]["latency"]["distribution"]
        .as_array()
        .unwrap();
    let counted: u64 = dist.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 200, "every timed sample is in the distribution");

    let csv = ok(&["export", "last", "--csv", "--db", &db]);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv
        .starts_with("index,stream,direction,pattern,transport,run_started_at,run_id,client_host,server_host,size_bytes"));

    // A result from elsewhere: the exported document into a second database, then back.
    let file = t.file("run.json");
    ok(&["export", &id, "--json", "-o", &file, "--db", &db]);
    let other = t.file("other.sqlite");
    let said = ok(&["import", &file, "--db", &other]);
    assert!(said.contains("as run 1"), "{said}");
    let again = ok(&["export", "1", "--json", "--db", &other]);
    assert_eq!(
        serde_json::from_str::<Value>(&again).unwrap(),
        doc,
        "import keeps the document as it was"
    );
    assert!(ok(&["history", "--db", &other]).contains("[imported]"));

    // Filters.
    assert!(ok(&["history", "--pattern", "stream", "--db", &db]).contains("no saved runs"));
    assert!(
        ok(&["history", "--since", "2000-01-01", "-t", "tcp", "--db", &db]).contains("pingpong")
    );
    assert!(ok(&["history", "--until", "2000-01-01", "--db", &db]).contains("no saved runs"));
}

#[test]
fn no_save_and_failed_runs() {
    let t = Tmp::new();
    let db = t.db();
    ok(&["run", "pingpong", "-n", "50", "--no-save", "--json"]);
    assert!(!Path::new(&db).exists());

    // A run that fails half-way is saved with what it measured: here the server refuses the
    // second point (larger than its --max-message).
    let server = common::Server::start(&["--max-message", "1K"]);
    let out = wb(&[
        "run",
        "pingpong",
        "--to",
        &server.addr,
        "--size",
        "64,4K",
        "-n",
        "50",
        "--db",
        &db,
    ]);
    assert!(!out.status.success());
    let db_ = Db::open_existing(Path::new(&db)).unwrap();
    let rows = db_.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].complete);
    assert_eq!(rows[0].points, 1);
    let r = db_.load(rows[0].id).unwrap();
    assert!(r.error.is_some() && !r.complete);
    let listed = ok(&["history", "--incomplete", "--db", &db]);
    assert!(
        listed.contains("[incomplete: 1 of 2 planned points measured]"),
        "{listed}"
    );
}

#[test]
fn an_interrupted_run_keeps_the_points_it_finished() {
    let t = Tmp::new();
    let db = t.db();
    let mut child = common::bin()
        .args([
            "run",
            "pingpong",
            "--size",
            "1,2,3,4,5,6,7,8,9,10",
            "-d",
            "1s",
            "--db",
            &db,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let points = loop {
        let n = Db::open_existing(Path::new(&db))
            .ok()
            .and_then(|d| d.list(&Filter::default()).ok())
            .and_then(|rows| rows.first().map(|r| r.points))
            .unwrap_or(0);
        // Only a hang takes this long: the two points take 2 s.
        if n >= 2 || start.elapsed() > common::FINISH {
            break n;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // SIGKILL: nothing of the process runs after this, like a crash or a lost machine.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(points >= 2, "the run saved {points} points in a minute");
    let rows = Db::open_existing(Path::new(&db))
        .unwrap()
        .list(&Filter::default())
        .unwrap();
    assert!(!rows[0].complete && rows[0].points >= 2 && rows[0].points < 10);
    // Killed, the run never said how far it got: what it saved says so, with the planned
    // total (it once said "3 of the planned points measured" and left the total to guess).
    let n = rows[0].points;
    assert_eq!(rows[0].planned_points, Some(10));
    let shown = ok(&["show", "last", "--db", &db]);
    assert!(
        shown.contains(&format!("# incomplete: {n} of 10 planned points measured")),
        "{shown}"
    );
    let listed = ok(&["history", "--db", &db]);
    assert!(
        listed.contains(&format!("[incomplete: {n} of 10 planned points measured]")),
        "{listed}"
    );
    let doc: Value = serde_json::from_str(&ok(&["export", "last", "--json", "--db", &db])).unwrap();
    assert_eq!(doc["planned_points"], 10);
}

/// A run's JSON with every point's round-trip statistics replaced: mean and standard
/// deviation in ns over `n` samples, the same for every point.
fn with_rtt(doc: &Value, mean: f64, stddev: f64, n: u64) -> Value {
    let mut d = doc.clone();
    for p in d["points"].as_array_mut().unwrap() {
        let l = &mut p["latency"];
        l["rtt"]["mean_ns"] = mean.into();
        l["rtt"]["stddev_ns"] = stddev.into();
        l["rtt"]["samples"] = n.into();
        l["one_way_mean_ns"] = (mean / 2.0).into();
    }
    d
}

/// A run's JSON as if every point was measured `one_way_ns.len()` times, each run's one-way
/// latency (the headline, ns) as given: what `compare` tests between runs.
fn with_runs(doc: &Value, one_way_ns: &[f64]) -> Value {
    let mut d = doc.clone();
    let n = one_way_ns.len() as f64;
    let mean = one_way_ns.iter().sum::<f64>() / n;
    let sd = (one_way_ns.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    for p in d["points"].as_array_mut().unwrap() {
        p["runs"] = one_way_ns.len().into();
        let h = &mut p["headline"];
        h["values"] = one_way_ns.to_vec().into();
        h["over_runs"]["n"] = one_way_ns.len().into();
        h["over_runs"]["mean"] = mean.into();
        h["over_runs"]["stddev"] = sd.into();
    }
    d
}

/// A run's JSON as if measured with --path-timing: nine stages of one clock, stage i taking
/// i µs, on every point (built here: what is checked is how they are shown, not the stamps).
fn with_path_timing(doc: &Value) -> Value {
    let mut d = doc.clone();
    for p in d["points"].as_array_mut().unwrap() {
        let stages: Vec<Value> = [
            "client_send_to_queue",
            "client_queue_to_driver",
            "wire_out",
            "server_arrival_to_read",
            "server_turnaround",
            "server_send_to_queue",
            "server_queue_to_driver",
            "wire_back",
            "client_arrival_to_read",
        ]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ns = 1000 * (i as u64 + 1);
            serde_json::json!({"name": name, "samples": 150, "min_ns": ns / 2, "p50_ns": ns,
                "p99_ns": 3 * ns, "mean_ns": ns as f64})
        })
        .collect();
        p["path_timing"] = serde_json::json!({"messages": 150, "incomplete": 0,
            "clock": {"kind": "shared"}, "stages": stages, "rtt_min_ns": 40000,
            "rtt_p50_ns": 45000, "rtt_p99_ns": 90000, "rtt_mean_ns": 45500.0,
            "residual_mean_ns": 500.0, "residual_max_abs_ns": 2000});
    }
    d
}

fn import(t: &Tmp, db: &str, doc: &Value, name: &str) -> String {
    let file = t.file(name);
    std::fs::write(&file, doc.to_string()).unwrap();
    ok(&["import", &file, "--db", db]);
    last_id(db).to_string()
}

#[test]
fn compare_finds_a_known_difference() {
    let t = Tmp::new();
    let db = t.db();
    let base: Value = serde_json::from_str(&ok(&[
        "run",
        "pingpong",
        "--size",
        "1,64",
        "-n",
        "100",
        "--json",
        "--no-save",
    ]))
    .unwrap();
    // Three runs a side. B is 1.5 times slower at every point, its interval far beyond the
    // 5 % margin; C differs from A by 0.5 % with the same spread: the same within 5 %.
    let a = import(
        &t,
        &db,
        &with_runs(&base, &[10_000.0, 10_100.0, 9_900.0]),
        "a.json",
    );
    let b = import(
        &t,
        &db,
        &with_runs(&base, &[15_000.0, 15_150.0, 14_850.0]),
        "b.json",
    );
    let c = import(
        &t,
        &db,
        &with_runs(&base, &[10_050.0, 10_150.0, 9_950.0]),
        "c.json",
    );

    let out = ok(&["compare", &a, &b, "--db", &db]);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("point"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for r in &rows {
        assert!(
            r.contains("+50.00%")
                && r.contains("WORSE beyond the ±5% margin")
                && r.contains(" 3/3 "),
            "{r}"
        );
        assert!(
            r.contains(" 10.000 ") && r.contains(" 15.000 "),
            "one-way means in us: {r}"
        );
    }
    assert!(out.contains("2 figures: 2 worse"), "{out}");

    let gate = wb(&["compare", &a, &b, "--fail-if-worse", "5%", "--db", &db]);
    assert_eq!(gate.status.code(), Some(3), "{}", text(&gate.stderr));
    let err = text(&gate.stderr);
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("2 figure(s) worse by more than 5%"), "{err}");
    // A 60 % allowance lets a 50 % slowdown pass.
    ok(&["compare", &a, &b, "--fail-if-worse", "60", "--db", &db]);

    // The other way round it is an improvement, which never fails a gate.
    let back = ok(&["compare", &b, &a, "--fail-if-worse", "5%", "--db", &db]);
    assert!(
        back.contains("-33.33%") && back.contains("better beyond the ±5% margin"),
        "{back}"
    );

    // 0.5 %: the same within the margin, so not a failure even at a 0.1 % gate.
    let near = ok(&["compare", &a, &c, "--fail-if-worse", "0.1%", "--db", &db]);
    assert!(
        near.contains("+0.50%") && near.contains("same within ±5%"),
        "{near}"
    );
    // With no margin the interval (about +0.5 % ± 2 %) reaches both ways: inconclusive.
    let strict = ok(&["compare", &a, &c, "--margin", "0", "--db", &db]);
    assert!(strict.contains("inconclusive"), "{strict}");

    // The same comparison as JSON: both runs, and each change with its test and verdict.
    let doc: Value =
        serde_json::from_str(&ok(&["compare", &a, &b, "--json", "--db", &db])).unwrap();
    assert_eq!(doc["schema"], "wirebench.compare");
    assert_eq!(doc["schema_version"], 2);
    assert_eq!(doc["a"]["id"].as_i64().unwrap().to_string(), a);
    assert_eq!(doc["comparison"]["margin_percent"], 5.0);
    let changes = doc["comparison"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{doc}");
    for ch in changes {
        assert_eq!(ch["verdict"], "worse", "{ch}");
        assert_eq!(ch["test"]["on"], "runs", "{ch}");
        assert!(
            ch["test"]["ci_low_percent"].as_f64().unwrap() > 45.0,
            "{ch}"
        );
        assert!(
            (ch["percent"].as_f64().unwrap() - 50.0).abs() < 1e-9,
            "{ch}"
        );
    }
    // One run on a side (the measured document as it came): cannot tell, said on stderr
    // by the gate, which passes.
    let once = import(
        &t,
        &db,
        &with_rtt(&base, 40_000.0, 4_000.0, 200),
        "once.json",
    );
    let gate = wb(&["compare", &a, &once, "--fail-if-worse", "5%", "--db", &db]);
    assert_eq!(gate.status.code(), Some(0), "{}", text(&gate.stderr));
    assert!(
        text(&gate.stdout).contains("one run on a side: cannot tell; use --repeat 3 or more"),
        "{}",
        text(&gate.stdout)
    );
    assert!(
        text(&gate.stderr).contains("2 figure(s) measured once on a side: cannot tell, not failed"),
        "{}",
        text(&gate.stderr)
    );
    assert!(matches!(
        wb(&["compare", &a, &b, "--margin", "x", "--db", &db])
            .status
            .code(),
        Some(1) | Some(2)
    ));
    // history --json lists the three imported runs, newest first.
    let h: Value = serde_json::from_str(&ok(&["history", "--json", "--db", &db])).unwrap();
    assert_eq!(h["schema"], "wirebench.history");
    let ids: Vec<String> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec![once, c, b, a]);
}

#[test]
fn compare_two_runs_of_the_same_configuration() {
    let t = Tmp::new();
    let db = t.db();
    for _ in 0..2 {
        ok(&[
            "run", "rr", "--size", "1,64", "-n", "200", "--repeat", "3", "--db", &db,
        ]);
    }
    let out = ok(&["compare", "last-1", "last", "--db", &db]);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("point"))
        .collect();
    assert_eq!(rows.len(), 4, "two points, two figures each:\n{out}");
    assert!(
        rows.iter()
            .any(|r| r.contains("transactions per second") && r.contains(" 3/3 ")),
        "{out}"
    );
    assert!(!out.contains("only in"), "{out}");

    // A run against itself: no change at all, and no gate trips.
    let same = ok(&[
        "compare",
        "last",
        "last",
        "--fail-if-worse",
        "0%",
        "--db",
        &db,
    ]);
    // (Same within the margin, or inconclusive where three short runs spread widely: never
    // worse or better.)
    assert!(
        same.contains("+0.00%")
            && same.contains("4 figures: 0 worse, 0 better, ")
            && same.contains("0 cannot tell (one run on a side), 2 untested"),
        "{same}"
    );

    // A single stream run has nothing to test: said so, not guessed.
    ok(&["run", "stream", "-d", "200ms", "--db", &db]);
    let s = ok(&["compare", "last", "last", "--db", &db]);
    assert!(s.contains("one run on a side: cannot tell"), "{s}");
    fails(
        &["compare", "1", "last", "--db", &db],
        1,
        "only runs of the same pattern compare",
    );
}

#[test]
fn plot_writes_svg_and_png() {
    let t = Tmp::new();
    let db = t.db();
    ok(&[
        "run", "pingpong", "--size", "1,1K,64K", "-n", "100", "--db", &db,
    ]);
    let svg = t.file("t.svg");
    ok(&[
        "plot",
        "last",
        "--kind",
        "throughput",
        "-o",
        &svg,
        "--db",
        &db,
    ]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("message size (bytes)") && s.contains("Mbit/s"));
    let png = t.file("cdf.png");
    ok(&[
        "plot", "last", "--kind", "cdf", "--point", "1", "-o", &png, "--db", &db,
    ]);
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);

    fails(
        &[
            "plot",
            "last",
            "--kind",
            "latency",
            "-o",
            &t.file("x.pdf"),
            "--db",
            &db,
        ],
        1,
        "must end in .svg or .png",
    );
    fails(
        &["plot", "last", "--kind", "heatmap", "-o", &svg, "--db", &db],
        1,
        "sweeps two parameters",
    );
    fails(
        &["plot", "last", "--kind", "path", "-o", &svg, "--db", &db],
        1,
        "needs a pingpong or rr run with --path-timing",
    );
    // The stacked stages of a saved run with path timing, one bar per size.
    let doc: Value = serde_json::from_str(&ok(&["export", "last", "--json", "--db", &db])).unwrap();
    let id = import(&t, &db, &with_path_timing(&doc), "timed.json");
    let path_svg = t.file("path.svg");
    ok(&["plot", &id, "--kind", "path", "-o", &path_svg, "--db", &db]);
    let s = std::fs::read_to_string(&path_svg).unwrap();
    assert!(
        s.starts_with("<svg")
            && s.contains("450 round trips over 3 points")
            && s.contains("client arrival→read")
            && s.contains("mean per round trip, stages stacked (µs)"),
        "{s}"
    );
    fails(
        &[
            "plot", "last", "--kind", "cdf", "--point", "7", "-o", &svg, "--db", &db,
        ],
        1,
        "no latency distribution at point 7",
    );
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let t = Tmp::new();
    let db = t.db();
    fails(&["history", "--db", &db], 1, "no results database");
    assert!(
        !Path::new(&db).exists(),
        "reading must not create a database"
    );
    ok(&["run", "pingpong", "-n", "20", "--db", &db]);
    fails(&["show", "999", "--db", &db], 1, "no run 999");
    fails(&["show", "seven", "--db", &db], 1, "invalid run id 'seven'");
    fails(&["show", "last-5", "--db", &db], 1, "fewer runs");
    let junk = t.file("junk.json");
    std::fs::write(&junk, "{\"schema\": \"something else\"}").unwrap();
    fails(&["import", &junk, "--db", &db], 1, "not a wirebench result");
    std::fs::write(&junk, "[1, 2").unwrap();
    fails(&["import", &junk, "--db", &db], 1, "not a JSON document");
    fails(
        &["import", &t.file("nope.json"), "--db", &db],
        1,
        "nope.json",
    );
    fails(
        &["compare", "1", "1", "--fail-if-worse", "lots", "--db", &db],
        1,
        "invalid percentage",
    );
    fails(
        &["history", "--since", "yesterday", "--db", &db],
        1,
        "--since",
    );
    fails(&["export", "1", "--db", &db], 1, "--json or --csv");
    fails(
        &["run", "pingpong", "--db", &db, "--no-save"],
        2,
        "--no-save",
    );
    fails(
        &[
            "run",
            "pingpong",
            "-n",
            "5",
            "--db",
            "/proc/wirebench/results.sqlite",
        ],
        1,
        "/proc/wirebench",
    );
    std::fs::write(
        t.file("text.sqlite"),
        "this is not a database file at all, just text........",
    )
    .unwrap();
    fails(
        &["history", "--db", &t.file("text.sqlite")],
        1,
        "text.sqlite",
    );
}

/// Debian's chromium for the report test's browser half; None when there is none (or
/// WIREBENCH_SKIP_BROWSER=1), that half skipped and saying so, or failing the test with
/// WIREBENCH_REQUIRE_ALL=1 (CI installs Chromium).
fn chromium() -> Option<PathBuf> {
    if !require_for("the report in a real browser", &[Need::Chromium]) {
        return None;
    }
    common::need::chromium()
}

/// Runs headless chromium on `url` with `extra` flags; returns (stdout, stderr). Killed after
/// two minutes so that a hung browser fails the test instead of stalling it.
fn headless(browser: &Path, profile: &Path, extra: &[&str], url: &str) -> (String, String) {
    let out_path = profile.join("stdout.txt");
    let err_path = profile.join("stderr.txt");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        // Files, not pipes: the DOM and the log outgrow a pipe's buffer long before the
        // browser exits, and a full pipe would block it.
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (
        text(&std::fs::read(&out_path).unwrap()),
        text(&std::fs::read(&err_path).unwrap()),
    )
}

fn attr(dom: &str, name: &str) -> usize {
    let key = format!("{name}=\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in the DOM"));
    dom[at + key.len()..]
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The value of attribute `name` in one SVG element's text.
fn svg_attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let from = element.find(&key)? + key.len();
    Some(&element[from..from + element[from..].find('"')?])
}

/// Checks, in every SVG of `html`, that each legend line swatch has the stroke colour, width
/// and dash pattern of a line drawn before the legend (the series); the grey swatches of
/// style keys explain a dash pattern and match on it alone. Returns how many swatches were
/// dashed.
fn legend_strokes_match(html: &str) -> usize {
    let mut dashed = 0;
    for (k, svg) in html.split("<svg").skip(1).enumerate() {
        let svg = svg.split("</svg>").next().unwrap_or("");
        let Some(legend) = svg.find("opacity=\"0.9\" fill=\"#FFFFFF\"") else {
            continue;
        };
        let looks = |part: &str| -> Vec<(String, String, String)> {
            part.split("<polyline")
                .skip(1)
                .map(|e| {
                    let e = e.split('>').next().unwrap_or("");
                    let get = |n: &str| svg_attr(e, n).unwrap_or("").to_owned();
                    let dash = svg_attr(e, "stroke-dasharray")
                        .unwrap_or("solid")
                        .to_owned();
                    (get("stroke"), get("stroke-width"), dash)
                })
                .collect()
        };
        let series = looks(&svg[..legend]);
        for swatch in looks(&svg[legend..]) {
            let drawn = series.iter().any(|s| {
                if swatch.0 == "#5A5A5A" {
                    (&s.1, &s.2) == (&swatch.1, &swatch.2)
                } else {
                    *s == swatch
                }
            });
            assert!(
                drawn,
                "figure {k}: a legend entry is drawn {swatch:?}, no series so: {series:?}"
            );
            dashed += usize::from(swatch.2 != "solid");
        }
    }
    dashed
}

#[test]
fn report_renders_in_a_real_browser() {
    let t = Tmp::new();
    let db = t.db();
    ok(&[
        "run",
        "pingpong",
        "--size",
        "1..64K:*4",
        "-n",
        "150",
        "--nodelay",
        "--db",
        &db,
    ]);
    ok(&[
        "run",
        "pingpong",
        "--size",
        "1..64K:*4",
        "-n",
        "150",
        "--db",
        &db,
    ]);
    ok(&[
        "run", "stream", "-d", "300ms", "-i", "100ms", "--sndbuf", "64K,256K", "--rcvbuf",
        "64K,256K", "--db", &db,
    ]);
    ok(&["run", "rr", "--size", "1,100", "-n", "200", "--db", &db]);
    // Run 5: run 1 as if measured with --path-timing (the stages built here: the report's
    // stacked bars and table are what is checked, not the stamps).
    let timed = with_path_timing(
        &serde_json::from_str(&ok(&["export", "1", "--json", "--db", &db])).unwrap(),
    );
    import(&t, &db, &timed, "timed.json");
    let html_path = t.file("report.html");
    ok(&[
        "report", "1", "2", "3", "4", "5", "-o", &html_path, "--db", &db,
    ]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    for needle in [
        "Throughput against message size",
        "Latency against message size",
        "NetPIPE signature",
        "Latency histogram",
        "Latency distribution (CDF)",
        "Latency by percentile",
        "send buffer by receive buffer",
        "congestion window, size 128K",
        "Where the round trip",
        "wire out (µs, mean / p50)",
        "Derived metrics",
        "t0 = RTT/2",
        "Environment",
    ] {
        assert!(html.contains(needle), "the report lacks '{needle}'");
    }
    // Self-contained: nothing is fetched from anywhere.
    for external in ["http://", "https://", "src=", "<link"] {
        let outside_svg: String = html
            .split("<svg")
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    part
                } else {
                    part.split("</svg>").nth(1).unwrap_or("")
                }
            })
            .collect();
        assert!(
            !outside_svg.contains(external),
            "the report refers to '{external}'"
        );
    }
    let expected = html.matches("<figure>").count();
    assert!(expected >= 15, "{expected} figures");

    let Some(browser) = chromium() else { return };
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{html_path}");
    let (dom, log) = headless(&browser, profile.path(), &["--dump-dom"], &url);
    assert_eq!(
        attr(&dom, "data-figures"),
        expected,
        "every figure is in the DOM"
    );
    assert_eq!(
        attr(&dom, "data-figures-drawn"),
        expected,
        "every SVG drew something"
    );
    for line in log.lines() {
        assert!(
            !line.contains("CONSOLE") && !line.contains("Uncaught"),
            "console message while loading the report: {line}"
        );
    }
    // Every legend swatch the browser holds is drawn with a stroke (colour and dash pattern)
    // that a series of its figure is drawn with.
    let dashed = legend_strokes_match(&dom);
    assert!(dashed > 0, "no dashed legend entry in the report");

    // The screenshot stays as a test artifact, for a person to look at.
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &browser,
        profile.path(),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,4000",
            "--hide-scrollbars",
        ],
        &url,
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
}

/// An agent's database as `wirebench agent` leaves it, built through the store: two real
/// loopback runs (a ping-pong, a stream) saved again and again as `agent` runs of two
/// targets, a minute apart, some marked as regressions as the agent marks them.
/// Returns the regressions marked per label.
fn agent_database(t: &Tmp, db: &str) -> BTreeMap<String, usize> {
    ok(&["run", "pingpong", "--size", "64", "-n", "200", "--db", db]);
    ok(&["run", "stream", "-d", "200ms", "--db", db]);
    let store = Db::open_existing(Path::new(db)).unwrap();
    let ping = store.load(1).unwrap();
    let bulk = store.load(2).unwrap();
    for id in [1, 2] {
        store.delete(id).unwrap();
    }
    let mut marked = BTreeMap::new();
    let base = humantime::parse_rfc3339("2026-03-30T10:00:00Z").unwrap();
    for k in 0..6u64 {
        for (target, test, doc) in [
            ("lab", "ping64", &ping),
            ("lab", "bulk", &bulk),
            ("remote", "ping64", &ping),
        ] {
            let label = format!("{target}/{test}");
            let mut d = doc.clone();
            let at = |s: u64| {
                humantime::format_rfc3339_millis(base + Duration::from_secs(60 * k + s)).to_string()
            };
            d.started_at = at(0);
            d.finished_at = Some(at(1));
            d.label = Some(label.clone());
            let id = store
                .insert(&d, wirebench::store::db::Source::Agent)
                .unwrap();
            // The 5th and 6th runs of lab/ping64 and the 6th of lab/bulk regressed.
            if (k >= 4 && label == "lab/ping64") || (k == 5 && label == "lab/bulk") {
                store
                    .mark_regression(id, &format!("one-way latency +{}% (run {k})", 20 + k))
                    .unwrap();
                *marked.entry(label.clone()).or_insert(0) += 1;
            }
            marked.entry(label).or_insert(0);
        }
    }
    // A run of another source is never in the agent's report.
    ok(&["run", "pingpong", "--size", "64", "-n", "50", "--db", db]);
    let _ = t;
    marked
}

/// One damaged row (its stored document no longer reads) once failed the whole report: it is
/// left out, named on stderr and under "Runs left out", and every other run is reported.
#[test]
fn agent_report_leaves_out_a_damaged_run_and_says_so() {
    let t = Tmp::new();
    let db = t.db();
    agent_database(&t, &db);
    let store = Db::open_existing(Path::new(&db)).unwrap();
    let damaged = store
        .list(&Filter::default())
        .unwrap()
        .into_iter()
        .filter(|r| r.source == "agent" && r.label.as_deref() == Some("remote/ping64"))
        .map(|r| r.id)
        .min()
        .unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE runs SET report_json = '{\"broken' WHERE id = ?1",
        [damaged],
    )
    .unwrap();
    drop(conn);
    let html_path = t.file("damaged.html");
    let out = wb(&["report", "--source", "agent", "-o", &html_path, "--db", &db]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with(&format!("wirebench report: run {damaged} left out: ")))
            .count(),
        1,
        "{stderr}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("<h2>Runs left out</h2>"),
        "no list of runs left out"
    );
    assert!(html.contains(&format!("<tr><td>{damaged}</td>")));
    assert!(
        html.contains("<h2>remote/ping64</h2>\n<p>5 runs"),
        "the other 5 runs drawn"
    );
    assert!(html.contains("<h2>lab/ping64</h2>\n<p>6 runs"));
}

#[test]
fn agent_report_draws_each_label_over_time_with_regressions_marked() {
    let t = Tmp::new();
    let db = t.db();
    let marked = agent_database(&t, &db);
    let html_path = t.file("agent.html");
    fails(
        &["report", "-o", &html_path, "--db", &db],
        1,
        "give run ids (e.g. 'report last -o F') or --source agent",
    );
    fails(
        &[
            "report", "1", "--source", "agent", "-o", &html_path, "--db", &db,
        ],
        1,
        "not both",
    );
    fails(
        &["report", "--source", "run", "-o", &html_path, "--db", &db],
        1,
        "only 'agent' is",
    );
    fails(
        &[
            "report", "--source", "agent", "--target", "nowhere", "-o", &html_path, "--db", &db,
        ],
        1,
        "no agent runs of target nowhere",
    );
    fails(
        &[
            "report",
            "--source",
            "agent",
            "--since",
            "yesterday",
            "-o",
            &html_path,
            "--db",
            &db,
        ],
        1,
        "--since: invalid time",
    );
    // Everything since long ago: every label.
    let out = wb(&[
        "report",
        "--source",
        "agent",
        "--since",
        "2026-01-01",
        "-o",
        &html_path,
        "--db",
        &db,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("(3 figures)"),
        "{}",
        text(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    for (label, n) in &marked {
        assert_eq!(
            html.matches(&format!("<h2>{label}</h2>")).count(),
            1,
            "one section for {label}"
        );
        assert!(
            html.contains(&format!("{label}: "))
                && html.contains(&format!(
                    "6 runs; {}",
                    match n {
                        1 => "1 regression,".to_owned(),
                        n => format!("{n} regressions,"),
                    }
                )),
            "{label}"
        );
    }
    assert_eq!(html.matches("<figure>").count(), marked.len());
    let regressions: usize = marked.values().sum();
    assert_eq!(
        html.matches("<td>one-way latency +").count(),
        regressions,
        "every regression listed"
    );
    assert!(html.contains("run finish time (UTC, 2026-03-30)"));
    assert!(html.contains("one-way latency (RTT/2) (µs)"));
    assert!(html.contains("throughput (Mbit/s)") || html.contains("throughput (Gbit/s)"));
    for external in ["http://", "https://", "src=", "<link"] {
        let outside_svg: String = html
            .split("<svg")
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    part
                } else {
                    part.split("</svg>").nth(1).unwrap_or("")
                }
            })
            .collect();
        assert!(!outside_svg.contains(external), "refers to '{external}'");
    }
    // One target only.
    let one = t.file("remote.html");
    ok(&[
        "report", "--source", "agent", "--target", "remote", "-o", &one, "--db", &db,
    ]);
    let remote = std::fs::read_to_string(&one).unwrap();
    assert_eq!(remote.matches("<figure>").count(), 1);
    assert!(remote.contains("<h2>remote/ping64</h2>") && !remote.contains("<h2>lab/"));

    let Some(browser) = chromium() else { return };
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{html_path}");
    let (dom, log) = headless(&browser, profile.path(), &["--dump-dom"], &url);
    assert_eq!(
        attr(&dom, "data-figures"),
        marked.len(),
        "a figure per label"
    );
    assert_eq!(
        attr(&dom, "data-figures-drawn"),
        marked.len(),
        "every SVG drew"
    );
    for line in log.lines() {
        assert!(
            !line.contains("CONSOLE") && !line.contains("Uncaught"),
            "console message while loading the report: {line}"
        );
    }
    // The red triangles the browser holds: one per marked run, and one legend entry in each
    // figure that has any.
    let with_marks = marked.values().filter(|n| **n > 0).count();
    let triangles = dom.matches("fill=\"#C80000\"").count();
    assert_eq!(triangles, regressions + with_marks, "regression markers");
    legend_strokes_match(&dom);
}

#[test]
fn figures_that_are_not_valid_stay_marked_in_history_show_compare_and_report() {
    let t = Tmp::new();
    let db = t.db();
    // A stream of 64 KiB after its warm-up: one write, microseconds; no valid rate.
    let table = ok(&["run", "stream", "--bytes", "64K", "--db", &db]);
    assert!(table.contains("! receiver: timed phase"), "{table}");

    let history = ok(&["history", "--db", &db]);
    assert!(
        history.contains("! Mbit/s (! not valid: receiver: timed phase"),
        "{history}"
    );
    let shown = ok(&["show", "last", "--db", &db]);
    assert!(shown.contains("! receiver: timed phase"), "{shown}");

    let cmp = ok(&["compare", "last", "last", "--db", &db]);
    assert!(
        cmp.contains("NOT VALID: A: receiver: timed phase") && cmp.contains("B: receiver:"),
        "{cmp}"
    );
    let gate = wb(&[
        "compare",
        "last",
        "last",
        "--fail-if-worse",
        "5%",
        "--db",
        &db,
    ]);
    assert_eq!(
        gate.status.code(),
        Some(0),
        "no worse figure: {}",
        text(&gate.stderr)
    );

    let html = t.file("invalid.html");
    ok(&["report", "last", "-o", &html, "--db", &db]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("that are not valid measurements")
            && page.contains("receiver: timed phase")
            && page.contains("not valid (! after a figure)"),
        "{page}"
    );
}

#[test]
fn a_hockney_fit_that_is_not_valid_is_never_shown_as_a_result() {
    let t = Tmp::new();
    let db = t.db();
    let mut doc: Value = serde_json::from_str(&ok(&[
        "run",
        "pingpong",
        "--size",
        "1,1K,64K",
        "-n",
        "100",
        "--json",
        "--no-save",
    ]))
    .unwrap();
    // As a document from before fits were judged would hold it: a fit with a negative t0
    // (the README's example once printed t0 = -0.02 us, n_1/2 = -66 B), no verdict.
    let m = doc["sweep_metrics"][0]["metrics"].as_object_mut().unwrap();
    for k in [
        "fit_valid",
        "fit_invalid_reason",
        "largest_size",
        "r_max_at_largest",
        "r_max_note",
        "n_half_note",
    ] {
        m.remove(k);
    }
    // The whole fit is set, so that the verdict does not hang on what loopback measured (on a
    // loaded host the measured slope itself came out negative once, and the reason was that).
    m.insert(
        "fit".into(),
        serde_json::json!({
            "t0_ns": -20.0,
            "r_inf_bits_per_s": 2.64e10,
            "n_half_bytes": -66.0,
            "r_squared": 0.999,
            "points": 3
        }),
    );
    let file = t.file("old.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    ok(&["import", &file, "--db", &db]);

    let shown = ok(&["show", "last", "--db", &db]);
    let fit = shown.lines().find(|l| l.starts_with("# fit")).unwrap();
    assert!(
        fit.contains("no valid fit: the fitted t0 is not positive") && !fit.contains("-0.02"),
        "{fit}"
    );
    // The numbers stay in the JSON, for inspection, with the verdict beside them.
    let back: Value =
        serde_json::from_str(&ok(&["export", "last", "--json", "--db", &db])).unwrap();
    let m = &back["sweep_metrics"][0]["metrics"];
    assert_eq!(m["fit_valid"], false);
    assert_eq!(m["fit"]["n_half_bytes"], -66.0);
    assert!(m["r_max_at_largest"].is_boolean());

    let html = t.file("fit.html");
    ok(&["report", "last", "-o", &html, "--db", &db]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("no valid fit: the fitted t0 is not positive"),
        "{page}"
    );
    assert!(!page.contains("n_1/2 -66"), "{page}");
}

/// CSV is written by the csv crate: a field with a comma or a quote (a host name, a reason)
/// is quoted and reads back whole, and every record has the header's fields.
#[test]
fn csv_quotes_what_needs_quoting_and_reads_back_whole() {
    let t = Tmp::new();
    let db = t.file("q.sqlite");
    let out = common::run(&["run", "pingpong", "-n", "20", "--json", "--no-save"]);
    assert!(out.status.success());
    let mut doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["client_environment"]["hostname"] = Value::from("lab, \"a\" 1");
    let file = t.file("q.json");
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    ok(&["import", &file, "--db", &db]);
    let text = ok(&["export", "last", "--csv", "--db", &db]);
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header = r.headers().unwrap().clone();
    let host = header.iter().position(|h| h == "client_host").unwrap();
    let reason = header.iter().position(|h| h == "invalid_reason").unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].len(), header.len());
    assert_eq!(&rows[0][host], "lab, \"a\" 1");
    // 20 samples are below the floor for a mean: the reason is there, whole.
    assert!(rows[0][reason].contains("20 samples"), "{:?}", &rows[0]);
}

/// `--label`: kept with the run in the database and its document, printed with its table;
/// a run without one has no "label" in its document (the schema is unchanged for it).
#[test]
fn a_label_is_kept_with_the_run_and_shown() {
    let t = Tmp::new();
    let db = t.db();
    let label = "nightly, after the \"firmware\" update";
    let table = ok(&["run", "pingpong", "-n", "30", "--label", label, "--db", &db]);
    assert!(table.contains(&format!("# label: {label}")), "{table}");
    let doc: Value = serde_json::from_str(&ok(&["export", "last", "--json", "--db", &db])).unwrap();
    assert_eq!(doc["label"], label);
    assert!(ok(&["show", "last", "--db", &db]).contains(&format!("# label: {label}")));
    ok(&["run", "pingpong", "-n", "30", "--db", &db]);
    let doc: Value = serde_json::from_str(&ok(&["export", "last", "--json", "--db", &db])).unwrap();
    assert!(doc.get("label").is_none(), "{doc}");
}

/// The committed JSON Schema (schema/wirebench.run.schema.json) names every key a real run
/// document has, at the top, in a point and in a stream's totals.
#[test]
fn the_committed_schema_names_every_key_of_a_real_document() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/wirebench.run.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let out = common::run(&["run", "stream", "-d", "200ms", "--json", "--no-save"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |v: &Value, props: &Value, what: &str| {
        for k in v.as_object().unwrap().keys() {
            assert!(props.get(k).is_some(), "{what}.{k} is not in the schema");
        }
    };
    check(&doc, &schema["properties"], "run");
    let defs = &schema["$defs"];
    check(
        &doc["points"][0],
        &defs["PointResult"]["properties"],
        "point",
    );
    check(
        &doc["points"][0]["stream"]["totals"][0],
        &defs["DirectionTotal"]["properties"],
        "totals",
    );
}

/// A saved run can be labelled after the fact and deleted; a delete that names one missing
/// run deletes nothing.
#[test]
fn runs_are_labelled_and_deleted() {
    let t = Tmp::new();
    let db = t.db();
    for _ in 0..2 {
        ok(&["run", "pingpong", "-n", "50", "--db", &db]);
    }
    let out = ok(&["label", "last", "after the firmware update", "--db", &db]);
    assert!(out.contains("label after the firmware update"), "{out}");
    let shown = ok(&["show", "last", "--db", &db]);
    assert!(
        shown.contains("# label: after the firmware update"),
        "{shown}"
    );
    ok(&["label", "last", "--clear", "--db", &db]);
    assert!(!ok(&["show", "last", "--db", &db]).contains("# label:"));

    let refused = wb(&["delete", "1", "99", "--db", &db]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("no run 99"),
        "{}",
        text(&refused.stderr)
    );
    let h: Value = serde_json::from_str(&ok(&["history", "--json", "--db", &db])).unwrap();
    assert_eq!(
        h["runs"].as_array().unwrap().len(),
        2,
        "a refused delete deletes nothing"
    );

    assert!(ok(&["delete", "1", "--db", &db]).contains("deleted run 1"));
    let h: Value = serde_json::from_str(&ok(&["history", "--json", "--db", &db])).unwrap();
    let ids: Vec<i64> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![2]);
}

/// `report`, `plot` and `export -o` each say on one line of stderr which file they wrote,
/// and print nothing on stdout.
#[test]
fn writing_a_file_says_which_file() {
    let t = Tmp::new();
    let db = t.db();
    ok(&[
        "run", "pingpong", "--size", "1,1K", "-n", "100", "--db", &db,
    ]);
    let said = |args: &[&str]| {
        let out = wb(args);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
        err
    };
    let html = t.file("report.html");
    let err = said(&["report", "last", "-o", &html, "--db", &db]);
    let figures = std::fs::read_to_string(&html)
        .unwrap()
        .matches("<figcaption>Figure ")
        .count();
    assert!(figures > 1, "{figures}");
    assert_eq!(err, format!("wrote {html} ({figures} figures)\n"));
    let svg = t.file("t.svg");
    let err = said(&["plot", "last", "-k", "latency", "-o", &svg, "--db", &db]);
    assert_eq!(err, format!("wrote {svg} (latency)\n"));
    let json = t.file("run.json");
    let err = said(&["export", "1", "--json", "-o", &json, "--db", &db]);
    assert_eq!(err, format!("wrote {json} (run 1, JSON)\n"));
    let csv = t.file("run.csv");
    let err = said(&["export", "last", "--csv", "-o", &csv, "--db", &db]);
    assert_eq!(err, format!("wrote {csv} (run 1, CSV)\n"));
    assert!(std::fs::metadata(&csv).unwrap().len() > 0);
}

/// `history --label`, `--source`, `--since` with an offset, and a bad date: one line, exit 1.
#[test]
fn history_filters_by_label_and_source() {
    let t = Tmp::new();
    let db = t.db();
    ok(&[
        "run",
        "pingpong",
        "--size",
        "1",
        "-n",
        "50",
        "--label",
        "Before the update",
        "--db",
        &db,
    ]);
    ok(&["run", "pingpong", "--size", "1", "-n", "50", "--db", &db]);
    let listed = ok(&["history", "--db", &db]);
    // The units line, then the header.
    let header = listed.lines().nth(1).unwrap();
    for column in ["source", "label", "pattern", "via", "points"] {
        assert!(header.contains(column), "{listed}");
    }
    assert_eq!(listed.lines().count(), 4, "{listed}");
    let found = ok(&["history", "--label", "BEFORE", "--db", &db]);
    assert_eq!(found.lines().count(), 3, "{found}");
    assert!(found.contains("Before the update"), "{found}");
    let runs = ok(&["history", "--source", "run", "--all", "--db", &db]);
    assert_eq!(runs.lines().count(), 4, "{runs}");
    for none in [
        vec!["history", "--source", "study"],
        vec!["history", "--source", "mesh"],
        vec!["history", "--since", "2999-01-01T00:00:00+02:00"],
    ] {
        let mut args = none.clone();
        args.extend(["--db", &db]);
        assert!(ok(&args).contains("no saved runs match"), "{none:?}");
    }
    assert!(ok(&["history", "--source", "app", "--db", &db]).contains("no saved application runs"));
    fails(
        &["history", "--until", "2025-02-30T00:00:00Z", "--db", &db],
        1,
        "--until: invalid time",
    );
    // --json names each run's source and label.
    let h: Value = serde_json::from_str(&ok(&["history", "--json", "--db", &db])).unwrap();
    assert_eq!(h["runs"][1]["label"], "Before the update");
    assert_eq!(h["runs"][0]["source"], "run");
}
