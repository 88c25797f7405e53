//! The command layer: iperf3's short flags where they do not clash, shell completions and
//! the man page.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{run, Server};

/// `-c HOST:PORT` is `--to`, `-l` the message size and `-J` the JSON document, as in iperf3.
#[test]
fn iperf3_client_flags_run_a_pingpong() {
    let server = Server::start(&[]);
    let out = run(&[
        "run",
        "pingpong",
        "-c",
        &server.addr,
        "-l",
        "64",
        "-n",
        "20",
        "-J",
        "--no-save",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    assert_eq!(v["server"]["address"], server.addr.as_str());
    assert_eq!(v["server"]["self_hosted"], false);
    assert_eq!(v["points"][0]["key"]["size"], 64);
}

/// `-b` is `--rate`; `-w` sets both socket buffers, and a sweep of it moves them together.
#[test]
fn iperf3_rate_and_window_flags() {
    let server = Server::start(&[]);
    let v = common::run_json(&[
        "stream",
        "-c",
        &server.addr,
        "-b",
        "50M",
        "-w",
        "256K,512K",
        "-d",
        "200ms",
        "--warmup",
        "1",
        "--no-save",
    ]);
    assert_eq!(v["settings"]["rate"], "50M");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "one point per -w value, not their product");
    for (p, want) in points.iter().zip([262_144, 524_288]) {
        let k = &p["key"];
        assert_eq!(k["sndbuf"], want);
        assert_eq!(k["rcvbuf"], want);
        assert_eq!(k["server_sndbuf"], want);
        assert_eq!(k["server_rcvbuf"], want);
    }
    // An explicit --rcvbuf overrides -w on its side.
    let v = common::run_json(&[
        "stream",
        "-c",
        &server.addr,
        "-w",
        "256K",
        "--rcvbuf",
        "0",
        "-d",
        "200ms",
        "--warmup",
        "1",
        "--no-save",
    ]);
    let k = &v["points"][0]["key"];
    assert_eq!(k["sndbuf"], 262_144);
    assert_eq!(k["rcvbuf"], 0);
}

/// Every iperf3 alias is documented in its flag's help.
#[test]
fn aliases_are_in_the_help() {
    let out = run(&["run", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for alias in ["-c", "-b", "-l", "-w", "-J"] {
        assert!(
            help.contains(&format!("iperf3: {alias}")),
            "run --help should say 'iperf3: {alias}'"
        );
    }
}

/// The help says what the defaults really are and lists every transport (clap may wrap its
/// lines anywhere: compared with whitespace joined).
#[test]
fn help_is_true() {
    let help = |args: &[&str]| {
        let out = run(args);
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let h = help(&["run", "--help"]);
    // The stream's default write over a reliable transport is 128 KiB (src/plan), not 64K.
    assert!(
        h.contains("128K for streams over reliable transports"),
        "{h}"
    );
    assert!(
        h.contains("tcp, udp, unix, mptcp, quic, raw or grpc"),
        "{h}"
    );
    let h = help(&["compare-transports", "--help"]);
    assert!(
        h.contains("tcp, udp, unix, mptcp, quic, raw and grpc"),
        "{h}"
    );
    let h = help(&["lab", "down", "--help"]);
    assert!(h.contains("--all Remove every lab"), "{h}");
}

/// `wirebench completions SHELL` prints a script made from the clap definitions.
#[test]
fn completions_cover_the_options() {
    let out = run(&["completions", "bash"]);
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("wirebench"));
    assert!(script.contains("--transport"));
    assert!(script.contains("compare-transports"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        // fish spells it `-l transport`.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("transport"),
            "{shell}"
        );
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `wirebench man` prints wirebench(1); with --dir it writes a page per command.
#[test]
fn man_pages() {
    let out = run(&["man"]);
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    // clap_mangen puts two lines defining the quote character before the title.
    let title = page
        .lines()
        .take(3)
        .find(|l| l.starts_with(".TH"))
        .unwrap_or_else(|| panic!("no .TH in the first lines:\n{page}"));
    assert!(title.starts_with(".TH wirebench 1"), "{page}");
    assert!(page.contains("compare\\-transports"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let out = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    for name in [
        "wirebench.1",
        "wirebench-run.1",
        "wirebench-serve.1",
        "wirebench-lab-up.1",
    ] {
        let path = dir.path().join(name);
        assert!(listed.contains(path.to_str().unwrap()), "{listed}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(".TH"), "{name}");
    }
    // Hidden commands (the lab's delay line) get no page.
    assert!(!dir.path().join("wirebench-lab-delay-line.1").exists());
}

/// Runs wirebench with stdout and stderr both on a pipe whose reader is already gone, as
/// `wirebench ... 2>&1 | head -c1` leaves them once head has exited: every write fails with
/// EPIPE (Rust ignores SIGPIPE), deterministically, whatever the timing.
fn through_a_closed_pipe(args: &[&str], db: &str) -> std::process::Output {
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    let writer2 = writer.try_clone().expect("dup");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", db]);
    let out = common::bin()
        .args(&all)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::from(writer2))
        .output()
        .expect("wirebench runs");
    assert_ne!(out.status.code(), Some(101), "{all:?} panicked");
    assert!(out.status.code().is_some(), "{all:?} died by a signal");
    out
}

/// `args` with only stdout on a closed pipe: stderr is read, and holds no panic.
fn stdout_closed_only(args: &[&str], db: &str) -> std::process::Output {
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", db]);
    let out = common::bin()
        .args(&all)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("wirebench runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{all:?}: {err}");
    assert_ne!(out.status.code(), Some(101), "{all:?}: {err}");
    out
}

/// Every command survives a closed stdout and stderr: no panic ("failed printing to stdout",
/// exit 101), and `run` still saves what it measured.
#[test]
fn commands_survive_a_closed_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let out = through_a_closed_pipe(&["run", "pingpong", "-n", "50", "--size", "1,64"], db);
    assert_eq!(out.status.code(), Some(0));
    let out = through_a_closed_pipe(&["run", "pingpong", "-n", "50", "--json"], db);
    assert_eq!(out.status.code(), Some(0));
    // Both runs were saved although nobody read a line of them.
    let h = run(&["history", "--json", "--db", db]);
    let v: serde_json::Value = serde_json::from_slice(&h.stdout).expect("history --json");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2, "{v}");
    // (The runs below add more.)
    for args in [
        &["history"][..],
        &["history", "--json"],
        &["show", "last"],
        &["export", "last", "--json"],
        &["export", "last", "--csv"],
        &["compare", "last-1", "last"],
        &["compare", "last-1", "last", "--json"],
    ] {
        let out = through_a_closed_pipe(args, db);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
    for args in [
        &["history", "--json"][..],
        &["export", "last", "--json"],
        &["show", "last"],
        &["run", "pingpong", "-n", "50"],
    ] {
        assert_eq!(
            stdout_closed_only(args, db).status.code(),
            Some(0),
            "{args:?}"
        );
    }
    // A failure still exits with its code, though it cannot say why.
    let out = through_a_closed_pipe(&["show", "999"], db);
    assert_eq!(out.status.code(), Some(1));

    // A study, then `study show` through the closed pipe.
    let f = dir.path().join("pipe.toml");
    std::fs::write(
        &f,
        "name = \"pipe\"\n[run]\npattern = \"pingpong\"\n[run.stop]\niterations = 50\n[[axis]]\nname = \"size\"\nvalues = [1, 64]\n",
    )
    .unwrap();
    let out = through_a_closed_pipe(&["study", f.to_str().unwrap()], db);
    assert_eq!(out.status.code(), Some(0));
    for args in [
        &["study", "show", "last"][..],
        &["study", "show", "last", "--json"],
    ] {
        let out = through_a_closed_pipe(args, db);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}
