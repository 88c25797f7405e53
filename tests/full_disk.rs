//! Nothing measured is lost when the results database cannot take a run:
//! `wirebench run` against a database on a small, full tmpfs (in a private mount namespace,
//! so nothing outside the test sees it) still prints every point, fails, and leaves the whole
//! run in a recovery file that `wirebench import` brings into a database. Needs root for
//! `unshare -m` and `mount -t tmpfs`; without them each test says `SKIPPED <name>: <reason>`
//! on stderr and returns (common::need; a failure with WIREBENCH_REQUIRE_ALL=1).

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::need::{require, Need};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use wirebench::store::db::{Db, Filter};

/// The sweep that lost a run on a full disk: 7 sizes, 1 to 64 bytes.
const SIZES: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Room left on the full filesystem for the database to grow: its first row and point fit,
/// the seven points of the sweep do not. Measured with this sweep (a point's document is
/// about 4.5 KB; SQLite's rollback journal needs room too): 24 KiB took no row, 28 KiB a row
/// with 2 points, 40 KiB 3, 48 KiB 4. Pages are counted whole, so the lengths of the paths
/// the document records move these by a page at most.
const ROOM_FOR_SOME_POINTS_KIB: u64 = 40;

/// A test's directories: `fs`, where the 1 MiB tmpfs is mounted (inside the namespace only),
/// `out` on the real disk for the recovery files ($TMPDIR) and what the script copies out,
/// and an empty results database to start from.
struct Setup {
    _dir: tempfile::TempDir,
    fs: PathBuf,
    out: PathBuf,
    base_db: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let fs = dir.path().join("fs");
        let out = dir.path().join("out");
        std::fs::create_dir(&fs).unwrap();
        std::fs::create_dir(&out).unwrap();
        // Created (and migrated) here, on a disk with room, as a user's database would be.
        let base_db = dir.path().join("base.sqlite");
        Db::open_or_create(&base_db).unwrap();
        Setup {
            _dir: dir,
            fs,
            out,
            base_db,
        }
    }

    /// The database the run wrote, as the script copied it out before the tmpfs went away.
    fn db_after(&self) -> PathBuf {
        self.out.join("after.sqlite")
    }

    /// What was in the full directory after the run, one name a line.
    fn listing(&self) -> String {
        std::fs::read_to_string(self.out.join("listing")).unwrap()
    }

    /// A shell in a private mount namespace that mounts the tmpfs on `fs`, copies the
    /// database there, fills the filesystem to its last page and frees `room_kib` again,
    /// then runs `wirebench ARGS --db fs/results.sqlite` in `cwd` (the tmpfs when `cwd_full`)
    /// with $TMPDIR `tmpdir`. The script's exit code is wirebench's.
    fn command(&self, room_kib: u64, tmpdir: &Path, cwd_full: bool, args: &[&str]) -> Command {
        const SCRIPT: &str = r#"
            set -e
            fs=$1 base=$2 out=$3 room=$4 cwd_full=$5 wb=$6
            shift 6
            mount -t tmpfs -o size=1m tmpfs "$fs"
            cp "$base" "$fs/results.sqlite"
            dd if=/dev/zero of="$fs/filler" bs=4096 2>/dev/null || true
            if [ "$room" -gt 0 ]; then truncate -s "-${room}K" "$fs/filler"; fi
            if [ "$cwd_full" = 1 ]; then cd "$fs"; fi
            set +e
            "$wb" "$@" --db "$fs/results.sqlite"
            rc=$?
            cp "$fs/results.sqlite" "$out/after.sqlite"
            ls -A "$fs" > "$out/listing"
            exit $rc
        "#;
        let c = common::bin();
        let wb = c.get_program().to_owned();
        let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = c
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", SCRIPT, "sh"])
            .arg(&self.fs)
            .arg(&self.base_db)
            .arg(&self.out)
            .arg(room_kib.to_string())
            .arg(if cwd_full { "1" } else { "0" })
            .arg(wb)
            .args(args)
            .envs(envs)
            .env("TMPDIR", tmpdir)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, room_kib: u64, tmpdir: &Path, cwd_full: bool, args: &[&str]) -> Output {
        self.command(room_kib, tmpdir, cwd_full, args)
            .output()
            .expect("unshare runs")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The recovery file the one line on stderr names, checked to say how to import it.
fn named_recovery_file(stderr: &str) -> PathBuf {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("the run's") && l.contains(" are in "))
        .collect();
    assert!(
        !lines.is_empty(),
        "no line names a recovery file:\n{stderr}"
    );
    let line = lines[0];
    assert!(
        line.starts_with("wirebench: the results database ")
            && line.contains("could not be written (database or disk is full"),
        "{line}"
    );
    let after = line.split(" are in ").nth(1).unwrap();
    let path = after.split(" (wirebench import ").next().unwrap();
    assert!(
        after.contains(&format!("(wirebench import {path} adds them")),
        "{line}"
    );
    PathBuf::from(path)
}

fn sizes(doc: &Value) -> Vec<u64> {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"]["size"].as_u64().unwrap())
        .collect()
}

/// The size column of `run`'s table: the first number of each row.
fn table_sizes(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// `wirebench import FILE` into a new database on a disk with room: the run comes back
/// whole, with its 7 points.
fn imports_whole(file: &Path, recovered: &Value, scratch: &Path) {
    let db = scratch.join("imported.sqlite");
    let out = common::run(&[
        "import",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "import: {}", text(&out.stderr));
    let db = Db::open_existing(&db).unwrap();
    let rows = db.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].points, 7);
    let back = db.load(rows[0].id).unwrap();
    assert_eq!(back.points.len(), 7);
    assert_eq!(
        serde_json::to_value(&back).unwrap()["points"],
        recovered["points"],
        "the imported points are the recovered ones"
    );
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The case that lost data: the database takes the run's first point(s), then the disk is full.
#[test]
fn a_disk_that_fills_mid_sweep_loses_no_measured_point() {
    if !require(&[Need::Root, Need::PrivateMount]) {
        return;
    }
    let server = common::Server::start(&[]);
    let s = Setup::new();
    let out = s.run(
        ROOM_FOR_SOME_POINTS_KIB,
        &s.out,
        false,
        &[
            "run",
            "pingpong",
            "--size",
            "1..64:*2",
            "-n",
            "50",
            "--to",
            &server.addr,
            "--json",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Everything measured is on stdout all the same.
    let printed: Value = serde_json::from_slice(&out.stdout).expect("stdout is the document");
    assert_eq!(sizes(&printed), SIZES);
    assert_eq!(printed["complete"], true);
    assert_eq!(printed["planned_points"], 7);

    // The database kept the run's first points, and says how many of how many.
    let db = Db::open_existing(&s.db_after()).unwrap();
    let rows = db.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1, "{stderr}");
    let held = rows[0].points;
    assert!(
        (1..7).contains(&held),
        "the database should hold some of the points, not all: {held} ({ROOM_FOR_SOME_POINTS_KIB} KiB of room is the test's to retune)"
    );
    assert!(!rows[0].complete);
    assert_eq!(rows[0].planned_points, Some(7));
    let file = named_recovery_file(&stderr);
    assert!(
        stderr.contains(&format!("; run {} there holds {held} of them)", rows[0].id)),
        "{stderr}"
    );

    // The full directory was tried first: the recovery file is in $TMPDIR, and no part of
    // one was left behind on the full disk.
    assert_eq!(file.parent(), Some(s.out.as_path()), "{stderr}");
    let listing = s.listing();
    assert!(!listing.contains("wirebench-recovery"), "{listing}");
    let recovered = read_json(&file);
    assert_eq!(
        recovered, printed,
        "the recovery file is the document printed"
    );
    imports_whole(&file, &recovered, &s.out);
    // The error the run ends with says the same, once.
    assert!(
        stderr.contains("wirebench: error: the run was not saved in "),
        "{stderr}"
    );
}

/// The database takes nothing at all (the run's row cannot be written): every point is in the
/// recovery file.
#[test]
fn a_full_disk_from_the_first_write_loses_no_measured_point() {
    if !require(&[Need::Root, Need::PrivateMount]) {
        return;
    }
    let server = common::Server::start(&[]);
    let s = Setup::new();
    let out = s.run(
        0,
        &s.out,
        false,
        &[
            "run",
            "pingpong",
            "--size",
            "1..64:*2",
            "-n",
            "50",
            "--to",
            &server.addr,
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        table_sizes(&text(&out.stdout)),
        SIZES,
        "{}",
        text(&out.stdout)
    );
    let db = Db::open_existing(&s.db_after()).unwrap();
    assert!(db.list(&Filter::default()).unwrap().is_empty());
    let file = named_recovery_file(&stderr);
    assert!(
        stderr.contains("; the database holds none of them)"),
        "{stderr}"
    );
    assert_eq!(file.parent(), Some(s.out.as_path()));
    assert!(!s.listing().contains("wirebench-recovery"));
    let recovered = read_json(&file);
    assert_eq!(sizes(&recovered), SIZES);
    assert_eq!(recovered["complete"], true);
    imports_whole(&file, &recovered, &s.out);
}

/// No place takes a recovery file (the database's directory, $TMPDIR and the current one all
/// on the full disk): the document goes to stderr, the last place left, and the user is told.
#[test]
fn with_nowhere_to_write_the_document_goes_to_stderr() {
    if !require(&[Need::Root, Need::PrivateMount]) {
        return;
    }
    let server = common::Server::start(&[]);
    let s = Setup::new();
    let out = s.run(
        0,
        &s.fs,
        true,
        &[
            "run",
            "pingpong",
            "--size",
            "1..64:*2",
            "-n",
            "50",
            "--to",
            &server.addr,
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !s.listing().contains("wirebench-recovery"),
        "{}",
        s.listing()
    );
    assert!(
        stderr.contains("wirebench: no recovery file could be written ("),
        "{stderr}"
    );
    // The document is the lines from the first "{" to the first "}" that closes it.
    let start = stderr.find("\n{\n").expect("a document on stderr") + 1;
    let end = start + stderr[start..].find("\n}\n").expect("the document ends") + 2;
    let doc: Value = serde_json::from_str(&stderr[start..end]).unwrap();
    assert_eq!(sizes(&doc), SIZES);
    assert!(
        stderr[end..].contains("nor a recovery file: the run's 7 points are in the document above"),
        "{stderr}"
    );
    // What was printed imports like any document.
    let file = s.out.join("from-stderr.json");
    std::fs::write(&file, &stderr[start..end]).unwrap();
    imports_whole(&file, &doc, &s.out);
}

/// Ctrl-C: the run ends after its current point, and the run's end writes the recovery file.
/// The second Ctrl-C ends the process at once, and writes it before that. Each Ctrl-C is sent
/// once the run shows it has measured a point (--json-stream), never after a fixed time.
#[test]
fn ctrl_c_on_a_full_disk_loses_no_measured_point() {
    if !require(&[Need::Root, Need::PrivateMount]) {
        return;
    }
    let server = common::Server::start(&[]);
    for twice in [false, true] {
        let s = Setup::new();
        // Long points, so that both signals land while the second one is measured.
        let mut child = s
            .command(
                0,
                &s.out,
                false,
                &[
                    "run",
                    "pingpong",
                    "--size",
                    "1,2,4",
                    "-d",
                    "5s",
                    "--to",
                    &server.addr,
                    "--json-stream",
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |r: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            rx
        };
        let stdout = lines(Box::new(child.stdout.take().unwrap()));
        let stderr = lines(Box::new(child.stderr.take().unwrap()));
        let wait_for = |rx: &mpsc::Receiver<String>, needle: &str| loop {
            match rx.recv_timeout(common::FINISH) {
                Ok(l) if l.contains(needle) => return,
                Ok(_) => {}
                Err(e) => panic!("no line with '{needle}': {e}"),
            }
        };
        wait_for(&stdout, "\"type\":\"point\"");
        // The child is `unshare`, which became the shell; Ctrl-C goes to wirebench, the
        // shell's child (the shell itself carries on after it, to copy the database out).
        let pid = wirebench_pid(child.id());
        let sigint = || {
            let sent = kill(Pid::from_raw(pid), Signal::SIGINT);
            assert_eq!(sent, Ok(()), "kill");
        };
        sigint();
        if twice {
            wait_for(&stderr, "interrupted: finishing the current point");
            sigint();
        }
        let status = child.wait().unwrap();
        // Both streams to their ends (the process is gone, so they end).
        let rest = stderr.iter().collect::<Vec<_>>().join("\n");
        let more_points = stdout
            .iter()
            .filter(|l| l.contains("\"type\":\"point\""))
            .count();
        // The script's exit code is wirebench's: 130 for the second Ctrl-C, 1 for a run
        // interrupted (and not saved).
        assert_eq!(
            status.code(),
            Some(if twice { 130 } else { 1 }),
            "twice {twice}: {rest}"
        );
        let file = named_recovery_file(&rest);
        assert_eq!(file.parent(), Some(s.out.as_path()));
        let recovered = read_json(&file);
        let n = recovered["points"].as_array().unwrap().len();
        // Every point the stream showed, and no other.
        assert_eq!(n, 1 + more_points, "twice {twice}: {rest}");
        assert!((1..3).contains(&n), "twice {twice}: {n} points");
        assert_eq!(recovered["complete"], false);
        assert_eq!(recovered["planned_points"], 3);
        let error = recovered["error"].as_str().unwrap();
        // The second Ctrl-C may come after the run has already ended (the first one fell
        // between two points, on a loaded host): then the run's own end wrote the file.
        let once = format!("interrupted after {n} of 3 points");
        if twice {
            let both = format!("interrupted (Ctrl-C twice) after {n} of 3 planned points measured");
            assert!(error == both || error == once, "{error}");
        } else {
            assert_eq!(error, once);
        }
    }
}

/// The wirebench process under `unshare`'s shell: the shell's child, waited for until the
/// shell has started it (found in /proc by its parent's pid).
fn wirebench_pid(shell: u32) -> i32 {
    let wb = env!("CARGO_BIN_EXE_wirebench");
    for _ in 0..600 {
        for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            // "pid (comm) state ppid ...": the fields after the last ')'.
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
            if ppid == Some(shell) && exe == Path::new(wb) {
                return pid;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the shell {shell} started no wirebench");
}

/// `wirebench agent` on a full disk: every run it measured is kept, in a recovery file of its
/// own that names the run, instead of being lost and counted as a failed run (it once saved
/// none of 125 and counted them as network failures).
#[test]
fn an_agent_on_a_full_disk_loses_no_measured_run() {
    if !require(&[Need::Root, Need::PrivateMount]) {
        return;
    }
    let server = common::Server::start(&[]);
    let s = Setup::new();
    let config = s.out.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nseed = 3\n[[target]]\nname = \"lo\"\naddress = \"{}\"\n[[test]]\nname = \"ping\"\nperiod = \"500ms\"\n[test.run]\npattern = \"pingpong\"\n[test.run.sizes]\nsize = [64]\n[test.run.stop]\niterations = 50\n",
            server.addr
        ),
    )
    .unwrap();
    let out = s.run(
        0,
        &s.out,
        false,
        &["agent", "--config", config.to_str().unwrap(), "--for", "2s"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let not_saved = stderr
        .lines()
        .filter(|l| l == &"wirebench agent: lo/ping: measured but not saved")
        .count();
    assert!(not_saved >= 1, "{stderr}");
    // Each such run names its own recovery file, on the disk with room ($TMPDIR).
    let files: Vec<PathBuf> = stderr
        .lines()
        .filter(|l| l.contains("the run's") && l.contains(" are in "))
        .map(|l| {
            let after = l.split(" are in ").nth(1).unwrap();
            PathBuf::from(after.split(" (wirebench import ").next().unwrap())
        })
        .collect();
    assert_eq!(files.len(), not_saved, "{stderr}");
    for f in &files {
        assert_eq!(f.parent(), Some(s.out.as_path()), "{stderr}");
        let doc = read_json(f);
        assert_eq!(doc["label"], "lo/ping");
        assert_eq!(doc["complete"], true);
        assert_eq!(doc["points"].as_array().unwrap().len(), 1);
    }
    let mut distinct = files.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), files.len(), "one file per run");
    // The closing line counts them as runs, none failed.
    assert!(
        stderr.contains(&format!("{not_saved} run(s), 0 failed")),
        "{stderr}"
    );
    let db = Db::open_existing(&s.db_after()).unwrap();
    assert!(db.list(&Filter::default()).unwrap().is_empty());
}
