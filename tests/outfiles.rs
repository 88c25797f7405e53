//! Files wirebench writes for the user: a symbolic link at the path is
//! refused in one line and its target left alone, even with --force; a file that exists is
//! refused without --force and replaced with it; a new path is written as before. Through
//! the real binary, on loopback, into temporary directories.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs wirebench and asserts success; returns stdout.
fn ok(args: &[&str]) -> String {
    let out = common::run(args);
    assert!(
        out.status.success(),
        "wirebench {args:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs wirebench and asserts it was refused: exit code 1 and exactly `wirebench: error:
/// LINE` on stderr, where LINE is `want`. Returns stdout.
fn refused(args: &[&str], want: &str) -> String {
    let out = common::run(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err, format!("wirebench: error: {want}\n"), "{args:?}");
    text(&out.stdout)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn link_line(p: &Path) -> String {
    format!(
        "{} is a symbolic link; wirebench does not write through links, not even with --force",
        p.display()
    )
}

fn exists_line(p: &Path) -> String {
    format!(
        "{} exists; wirebench does not replace files (use --force to replace it)",
        p.display()
    )
}

/// A temporary directory with a victim file and a link to it, as an attacker plants one
/// where an output will go.
struct Trap {
    dir: tempfile::TempDir,
    victim: PathBuf,
}

const PRECIOUS: &[u8] = b"precious: not to be overwritten\n";

impl Trap {
    fn new() -> Trap {
        let dir = tempfile::tempdir().expect("temp dir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, PRECIOUS).unwrap();
        Trap { dir, victim }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// A link `name` to the victim.
    fn link(&self, name: &str) -> PathBuf {
        let l = self.path(name);
        std::os::unix::fs::symlink(&self.victim, &l).unwrap();
        l
    }
    /// A regular file `name` holding `OLD`.
    fn old_file(&self, name: &str) -> PathBuf {
        let f = self.path(name);
        std::fs::write(&f, OLD).unwrap();
        f
    }
    fn victim_intact(&self) {
        assert_eq!(std::fs::read(&self.victim).unwrap(), PRECIOUS);
    }
}

const OLD: &[u8] = b"an older file\n";

/// For a command that writes `path` (the command line with `{}` for the path): refused onto
/// a link (even with --force) and onto a file that exists, replaced with --force, written
/// to a new path. `check` looks at what a written file holds. Returns the refused runs'
/// stdout, for the caller to check that nothing was measured.
fn the_four_cases(t: &Trap, args: &[&str], ext: &str, check: impl Fn(&[u8])) -> Vec<String> {
    let with = |path: &Path, force: bool| -> Vec<String> {
        let mut v: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == "{}" {
                    s(path).to_owned()
                } else {
                    (*a).to_owned()
                }
            })
            .collect();
        if force {
            v.push("--force".into());
        }
        v
    };
    let run = |path: &Path, force: bool, want: Option<String>| -> String {
        let v = with(path, force);
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        match want {
            Some(line) => refused(&v, &line),
            None => ok(&v),
        }
    };
    let mut stdouts = Vec::new();
    // (a) a link to the victim, and a dangling one: refused, with and without --force.
    let link = t.link(&format!("link.{ext}"));
    let dangling = t.path(&format!("dangling.{ext}"));
    std::os::unix::fs::symlink(t.path("nothing-here"), &dangling).unwrap();
    for force in [false, true] {
        stdouts.push(run(&link, force, Some(link_line(&link))));
        stdouts.push(run(&dangling, force, Some(link_line(&dangling))));
    }
    t.victim_intact();
    assert!(!t.path("nothing-here").exists());
    // (b) a file that exists, without --force: refused, unchanged.
    let old = t.old_file(&format!("old.{ext}"));
    stdouts.push(run(&old, false, Some(exists_line(&old))));
    assert_eq!(std::fs::read(&old).unwrap(), OLD);
    // (c) with --force: replaced.
    run(&old, true, None);
    check(&std::fs::read(&old).unwrap());
    // (d) a new path: written.
    let new = t.path(&format!("new.{ext}"));
    run(&new, false, None);
    check(&std::fs::read(&new).unwrap());
    stdouts
}

fn is_run_document(bytes: &[u8]) {
    let v: Value = serde_json::from_slice(bytes).expect("a JSON document");
    assert_eq!(v["schema"], "wirebench.run");
}

/// `run --output`: every refusal comes before the first point (stdout empty, no run saved),
/// so that nothing measured is lost to a refused file.
#[test]
fn run_output_is_never_written_through_a_link_nor_over_a_file() {
    let t = Trap::new();
    let db = t.path("results.sqlite");
    let refused_stdouts = the_four_cases(
        &t,
        &[
            "run",
            "pingpong",
            "-n",
            "20",
            "--json",
            "--db",
            s(&db),
            "--output",
            "{}",
        ],
        "json",
        is_run_document,
    );
    for out in refused_stdouts {
        assert_eq!(out, "", "a refused run printed a document: it measured");
    }
    // Two runs saved: the forced one and the new one, none of the refused.
    let runs = wirebench::store::db::Db::open_existing(&db)
        .unwrap()
        .list(&wirebench::store::db::Filter::default())
        .unwrap();
    assert_eq!(runs.len(), 2);
}

/// `run --plot` (round trips idle and under --load): refused before the first point.
#[test]
fn a_run_plot_is_never_written_through_a_link_nor_over_a_file() {
    let t = Trap::new();
    let stdouts = the_four_cases(
        &t,
        &[
            "run",
            "pingpong",
            "-n",
            "20",
            "--load",
            "tcp:1",
            "--json",
            "--no-save",
            "--plot",
            "{}",
        ],
        "svg",
        |b| assert!(b.starts_with(b"<svg"), "not an SVG"),
    );
    for out in stdouts {
        assert_eq!(out, "", "a refused run printed a document: it measured");
    }
}

/// `report -o`, `export -o` and `plot -o` from a saved run.
#[test]
fn report_export_and_plot_outputs_are_never_written_through_a_link_nor_over_a_file() {
    let t = Trap::new();
    let db = t.path("results.sqlite");
    // Enough samples for a valid latency (30 at least): a distribution leaves out one that is not.
    ok(&["run", "pingpong", "-n", "200", "--db", s(&db)]);
    the_four_cases(
        &t,
        &["report", "last", "--db", s(&db), "-o", "{}"],
        "html",
        |b| assert!(text(b).contains("<html"), "not the report"),
    );
    the_four_cases(
        &t,
        &["export", "last", "--json", "--db", s(&db), "-o", "{}"],
        "json",
        is_run_document,
    );
    the_four_cases(
        &t,
        &["plot", "last", "--kind", "cdf", "--db", s(&db), "-o", "{}"],
        "svg",
        |b| assert!(b.starts_with(b"<svg"), "not an SVG"),
    );
}

/// `app --plot`: refused before the ranks start (nothing printed, nothing saved).
#[test]
fn an_app_plot_is_never_written_through_a_link_nor_over_a_file() {
    let t = Trap::new();
    let stdouts = the_four_cases(
        &t,
        &[
            "app",
            "matmul",
            "--ranks",
            "2",
            "--n",
            "8,16",
            "--repetitions",
            "1",
            "--no-save",
            "--plot",
            "{}",
        ],
        "svg",
        |b| assert!(b.starts_with(b"<svg"), "not an SVG"),
    );
    for out in stdouts {
        assert_eq!(out, "", "a refused app ran its job");
    }
}

/// Every file under `dir` and what it holds, in name order.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let bytes = if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(e.path()).unwrap().display()).into_bytes()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (name, bytes)
        })
        .collect();
    v.sort();
    v
}

/// Asserts that a directory's `now` is what it was (`then`), naming what changed.
fn same(now: &[(String, Vec<u8>)], then: &[(String, Vec<u8>)], what: &str) {
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(now), names(then), "{what}");
    for ((name, a), (_, b)) in now.iter().zip(then) {
        assert!(a == b, "{what}: {name} changed");
    }
}

/// `study report --out DIR`: written into a new DIR; refused when run again (naming the
/// first file that exists, before writing any); replaced with --force; a link planted in
/// DIR, or DIR itself a link, refused even with --force, with nothing written.
#[test]
fn a_study_report_directory_is_checked_before_anything_is_written() {
    let t = Trap::new();
    let db = t.path("results.sqlite");
    let study = t.path("outfiles.toml");
    std::fs::write(
        &study,
        "name = \"outfiles\"\nseed = 1\n[run]\npattern = \"pingpong\"\n[run.stop]\nduration = \"150ms\"\n[[axis]]\nname = \"size\"\nvalues = [1, 64]\n",
    )
    .unwrap();
    ok(&["study", s(&study), "--db", s(&db)]);
    let report = |dir: &Path, force: bool| -> Vec<String> {
        let mut v = vec!["study", "report", "last", "--db", s(&db), "--out", s(dir)];
        if force {
            v.push("--force");
        }
        v.into_iter().map(str::to_owned).collect()
    };
    let run_ok = |v: Vec<String>| ok(&v.iter().map(String::as_str).collect::<Vec<_>>());
    let run_refused = |v: Vec<String>, want: &str| {
        refused(&v.iter().map(String::as_str).collect::<Vec<_>>(), want)
    };

    // A new directory: the page and the figures, each listed.
    let out = t.path("report");
    let listed = run_ok(report(&out, false));
    let first = contents(&out);
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"index.html"), "{names:?}");
    assert!(
        names.iter().any(|n| n.ends_with(".svg")),
        "no figure written: {names:?}"
    );
    assert_eq!(listed.lines().count(), first.len(), "{listed}");

    // Again, without --force: the first file (the page) named, the directory as it was.
    let index = out.join("index.html");
    run_refused(report(&out, false), &exists_line(&index));
    same(
        &contents(&out),
        &first,
        "a refused report changed its directory",
    );

    // With --force: replaced (a changed page comes back whole).
    std::fs::write(&index, OLD).unwrap();
    run_ok(report(&out, true));
    let again = contents(&out);
    assert_eq!(again.len(), first.len());
    assert!(std::fs::read_to_string(&index)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));

    // A link planted inside: refused even with --force, and nothing else written there.
    let planted = t.path("planted");
    std::fs::create_dir(&planted).unwrap();
    let figure = first.iter().find(|(n, _)| n.ends_with(".svg")).unwrap();
    let trap = planted.join(&figure.0);
    std::os::unix::fs::symlink(&t.victim, &trap).unwrap();
    let before = contents(&planted);
    for force in [false, true] {
        run_refused(report(&planted, force), &link_line(&trap));
    }
    t.victim_intact();
    same(
        &contents(&planted),
        &before,
        "a file was written before the refusal",
    );

    // DIR itself a link to a directory: refused, nothing written where it points.
    let elsewhere = t.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let dir_link = t.path("dir-link");
    std::os::unix::fs::symlink(&elsewhere, &dir_link).unwrap();
    for force in [false, true] {
        run_refused(report(&dir_link, force), &link_line(&dir_link));
    }
    assert!(contents(&elsewhere).is_empty());
}

/// `man --dir DIR` twice: the second refused, naming the first page, unless --force.
#[test]
fn man_pages_are_not_replaced_without_force() {
    let t = Trap::new();
    let dir = t.path("man1");
    let listed = ok(&["man", "--dir", s(&dir)]);
    let first = listed.lines().next().expect("pages listed").to_owned();
    let pages = contents(&dir);
    refused(&["man", "--dir", s(&dir)], &exists_line(Path::new(&first)));
    same(&contents(&dir), &pages, "a refused man changed the pages");
    std::fs::write(&first, OLD).unwrap();
    ok(&["man", "--dir", s(&dir), "--force"]);
    same(
        &contents(&dir),
        &pages,
        "--force did not write the pages back",
    );
}

/// `run --trace`: the four cases before the first point (needs root for CAP_NET_RAW, as
/// tests/trace.rs); then `trace plot --out DIR` of the file written, twice.
#[test]
fn trace_files_are_never_written_through_a_link_nor_over_a_file() {
    if !common::need::require(&[common::need::Need::Root]) {
        return;
    }
    let t = Trap::new();
    let pcap = |b: &[u8]| {
        // The classic pcap magic, either byte order, microseconds or nanoseconds.
        let magic = u32::from_le_bytes(b[..4].try_into().unwrap());
        assert!(
            [0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1].contains(&magic),
            "not a pcap: {magic:#x}"
        );
        assert!(b.len() > 24, "no packet captured");
    };
    let stdouts = the_four_cases(
        &t,
        &[
            "run",
            "pingpong",
            "-n",
            "20",
            "--json",
            "--no-save",
            "--trace",
            "{}",
        ],
        "pcap",
        pcap,
    );
    for out in stdouts {
        assert_eq!(out, "", "a refused run printed a document: it measured");
    }
    // Idle, then under load: the run captures into its own file twice, which it may.
    let loaded = t.path("loaded.pcap");
    ok(&[
        "run",
        "pingpong",
        "-n",
        "20",
        "--load",
        "tcp:1",
        "--no-save",
        "--trace",
        s(&loaded),
    ]);
    pcap(&std::fs::read(&loaded).unwrap());

    let plots = t.path("plots");
    let listed = ok(&["trace", "plot", s(&loaded), "--out", s(&plots)]);
    let first = listed.lines().next().expect("figures listed").to_owned();
    let figures = contents(&plots);
    refused(
        &["trace", "plot", s(&loaded), "--out", s(&plots)],
        &exists_line(Path::new(&first)),
    );
    same(
        &contents(&plots),
        &figures,
        "a refused plot changed its directory",
    );
    ok(&["trace", "plot", s(&loaded), "--out", s(&plots), "--force"]);
}
