//! The study files in `studies/` and the study command's promises: every repository study runs
//! end to end in the lab with `--smoke` (lab tier: lab studies bring up their own network
//! namespaces, which needs root, iproute2 and nftables; without them the test says SKIPPED),
//! a bad axis value fails before anything is measured, and a study killed with SIGKILL
//! resumes without redoing a finished run (both on loopback, no root).

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::lab::SERIAL;
use common::need::{require, Need};
use serde_json::Value;

fn studies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("studies")
}

/// The repository's study files, in name order.
fn study_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(studies_dir())
        .expect("studies/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn wirebench(args: &[&str]) -> Output {
    common::bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("wirebench runs")
}

/// `study show last --json` of the database at `db`.
fn show_last(db: &Path) -> Value {
    let out = wirebench(&["study", "show", "last", "--json", "--db", path(db)]);
    assert!(
        out.status.success(),
        "study show: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("study show --json prints one document")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn the_repository_has_a_study_file_per_seed_experiment_and_each_reads() {
    let files = study_files();
    assert!(files.len() >= 6, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Each file opens by citing the study it reproduces by its REFERENCES.md key, and says
        // what it showed when it was run here.
        let key = text
            .strip_prefix("# [")
            .and_then(|rest| rest.split_once(']'))
            .map(|(key, _)| key)
            .unwrap_or_else(|| panic!("{}: no opening citation", f.display()));
        let references =
            std::fs::read_to_string(studies_dir().join("..").join("REFERENCES.md")).unwrap();
        assert!(
            references.contains(&format!("### [{key}]")),
            "{}: [{key}] is not a study of REFERENCES.md",
            f.display()
        );
        assert!(
            text.contains("What it showed here"),
            "{}: no record of its run",
            f.display()
        );
        let readme = std::fs::read_to_string(studies_dir().join("README.md")).unwrap();
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(readme.contains(name), "README.md does not list {name}");
    }
}

#[test]
fn every_repository_study_runs_in_the_lab_with_smoke_durations() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let files = study_files();
    for f in &files {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = wirebench(&["study", path(f), "--smoke", "--db", path(&db)]);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let v = show_last(&db);
        assert_eq!(v["schema"], "wirebench.study");
        assert_eq!(v["status"], "complete", "{}", f.display());
        assert_eq!(
            u(&v["runs_done"]),
            u(&v["runs_planned"]),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(u(&v["runs_failed"]), 0, "{}", f.display());
        let points = v["points"].as_array().expect("points");
        assert!(!points.is_empty(), "{}", f.display());
        for p in points {
            // A search point's figure is the rate it found; every other point's are its runs'.
            // A figure whose every run was not valid (a TCP connection that stalls for longer
            // than a smoke run, as tiny windows against a 9 KB MSS do) still counts: it names
            // why, which is what the study shows of that point.
            let has_figure = if p["search"].is_null() {
                p["figures"].as_array().is_some_and(|fs| {
                    !fs.is_empty()
                        && fs
                            .iter()
                            .all(|x| !x["over_runs"].is_null() || x["invalid_reason"].is_string())
                })
            } else {
                // A search that found a rate, or one whose every probe missed: since a probe
                // whose figures the physics guard marked invalid is a miss (a smoke probe on a
                // loaded host can be, with its reason on the probe's line), "not even the
                // lowest rate meets the target" is a result too; the search must have run.
                !p["search"]["over_runs"].is_null()
                    || p["search"]["best_bits_per_s"]
                        .as_array()
                        .is_some_and(|b| !b.is_empty())
            };
            assert!(has_figure, "{}: a point without a figure: {p}", f.display());
        }
    }
}

/// A small loopback study (no root needed).
fn loopback_study(dir: &Path, name: &str, body: &str) -> PathBuf {
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(&f, format!("name = \"{name}\"\n{body}")).unwrap();
    f
}

#[test]
fn a_bad_axis_value_fails_before_measuring_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let f = loopback_study(
        dir.path(),
        "bad",
        "[run]\npattern = \"stream\"\n[run.stop]\nduration = \"150ms\"\n[[axis]]\nname = \"window\"\nvalues = [\"16K\", \"4Q\"]\n",
    );
    let out = wirebench(&["study", path(&f), "--db", path(&db)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("axis 'window', value \"4Q\""), "{err}");
    // Nothing was measured: no study, no run.
    assert!(
        !db.exists() || {
            let l = wirebench(&["study", "list", "--json", "--db", path(&db)]);
            let v: Value = serde_json::from_slice(&l.stdout).unwrap();
            v["studies"].as_array().unwrap().is_empty()
        }
    );
}

/// Each finished slot's run id, by slot, from `study show --json`: the points' run ids in the
/// order the runs were recorded.
fn run_ids(v: &Value) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (i, p) in v["points"].as_array().unwrap().iter().enumerate() {
        for id in p["run_ids"].as_array().unwrap() {
            out.push((i as u64, u(id)));
        }
    }
    out.sort();
    out
}

#[test]
fn a_study_killed_with_sigkill_resumes_without_redoing_a_finished_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let f = loopback_study(
        dir.path(),
        "resume",
        "repetitions = 2\nseed = 7\n[run]\npattern = \"rr\"\n[run.stop]\nduration = \"150ms\"\nwarmup = 0\n[[axis]]\nname = \"size\"\nvalues = [64, 512]\n[[axis]]\nname = \"nodelay\"\nvalues = [false, true]\n",
    );
    let mut child = common::bin()
        .args(["study", path(&f), "--db", path(&db)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the study starts");
    // Kill it once at least one run is recorded (and before the last: 8 runs of 150 ms each
    // in their own processes leave time; if it finished anyway, the test says so below).
    let deadline = Instant::now() + Duration::from_secs(120);
    let before = loop {
        assert!(Instant::now() < deadline, "no run recorded in 120 s");
        if db.exists() {
            let out = wirebench(&["study", "show", "last", "--json", "--db", path(&db)]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                if u(&v["runs_done"]) >= 1 {
                    child.kill().expect("SIGKILL");
                    break v;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.wait().unwrap();
    // What was recorded at the moment of the kill (a run may have been recorded after the
    // poll and before the kill): read again now that nothing writes.
    let killed = show_last(&db);
    let done_at_kill = u(&killed["runs_done"]);
    assert!(done_at_kill >= u(&before["runs_done"]));
    let planned = u(&killed["runs_planned"]);
    assert_eq!(planned, 8);
    assert!(
        done_at_kill < planned,
        "the study finished before it could be killed; nothing to resume"
    );
    let ids_at_kill = run_ids(&killed);
    assert_eq!(ids_at_kill.len() as u64, done_at_kill);

    let out = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["study", path(&f), "--resume", "--db", path(&db)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("resuming: {done_at_kill} of {planned} done")),
        "{err}"
    );
    let after = show_last(&db);
    assert_eq!(after["id"], killed["id"], "the same study goes on");
    assert_eq!(after["status"], "complete");
    assert_eq!(u(&after["runs_done"]), planned);
    assert_eq!(u(&after["runs_failed"]), 0);
    // No slot done twice: every point has its two repetitions, and the runs recorded before
    // the kill are still the ones recorded for their points.
    let ids_after = run_ids(&after);
    assert_eq!(ids_after.len() as u64, planned);
    for p in after["points"].as_array().unwrap() {
        assert_eq!(p["run_ids"].as_array().unwrap().len(), 2, "{p}");
    }
    for pair in &ids_at_kill {
        assert!(ids_after.contains(pair), "{pair:?} lost: {ids_after:?}");
    }
    let mut unique: Vec<u64> = ids_after.iter().map(|(_, id)| *id).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len() as u64, planned);
}
