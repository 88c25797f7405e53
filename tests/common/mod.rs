//! Helpers for the integration tests: run the real binary, parse its JSON, run servers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

pub mod hostile;
pub mod lab;
pub mod proc;

/// The binary, with its default results database in a per-process temporary directory:
/// `run` saves every run by default, and tests must never write to the real home.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wirebench"));
    c.env(
        "XDG_DATA_HOME",
        std::env::temp_dir().join(format!("wirebench-tests-{}", std::process::id())),
    );
    c
}

pub fn run(args: &[&str]) -> Output {
    bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("wirebench runs")
}

/// Runs `wirebench run ... --json`, asserts success and returns the parsed document.
pub fn run_json(args: &[&str]) -> Value {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "wirebench {all:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).expect("stdout is one JSON document");
    assert_eq!(v["schema"], "wirebench.run");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["complete"], true);
    v
}

/// A `wirebench serve` on loopback with an ephemeral port, killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        let mut child = bin()
            .args(["serve", "--listen", "127.0.0.1", "--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let first = lines
            .next()
            .expect("server prints its address")
            .expect("utf-8");
        let addr = first
            .rsplit(' ')
            .next()
            .expect("address at the end of the line")
            .to_owned();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an unsigned integer, got {v}"))
}
