//! A real Prometheus server for a test (Debian's `/usr/bin/prometheus`): on a free loopback
//! port, with a storage directory of its own, scraping the loopback targets the test names
//! every second; queried through its HTTP API. Killed, and its directory removed, when dropped,
//! the test's failure included. Never the system's service, never port 9090.
//!
//! ```ignore
//! if !require(&[Need::Prometheus]) {
//!     return;
//! }
//! let prom = Prometheus::start(&[Scrape::new("self", &[ITSELF])]);
//! prom.wait_for("up{job=\"self\"} == 1", |r| r.len() == 1);
//! ```

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::need::PROMETHEUS;

/// A scrape target that stands for the Prometheus server itself.
pub const ITSELF: &str = "{itself}";

/// Polls of [`Prometheus::wait_for`] and of the start: every 200 ms, for at most this long. A
/// hang guard far beyond what a loaded two-CPU machine takes, never a time the test measures.
pub const PATIENCE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// One scrape job: its name, its loopback targets (HOST:PORT, or [`ITSELF`]) and path.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub job: String,
    pub targets: Vec<String>,
    pub metrics_path: String,
}

impl Scrape {
    pub fn new(job: &str, targets: &[&str]) -> Scrape {
        Scrape {
            job: job.to_owned(),
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            metrics_path: "/metrics".to_owned(),
        }
    }
}

/// One sample of an instant query's answer: its labels and value.
pub type Sample = (BTreeMap<String, String>, f64);

/// A running Prometheus server.
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    /// The network namespace it runs in (its loopback is that namespace's), None: the test's.
    netns: Option<String>,
}

impl Prometheus {
    /// Starts Prometheus inside network namespace `netns` (`ip netns exec`), listening on
    /// `port` of that namespace's loopback and scraping `jobs` there; queried from a thread
    /// that enters the namespace. A namespace of the test's own (a lab host's) has every port
    /// free, so the port is the caller's choice.
    pub fn start_in(netns: &str, port: u16, jobs: &[Scrape]) -> Prometheus {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut prom = Prometheus::spawn(addr, jobs, Some(netns));
        if let Err(log) = prom.wait_ready() {
            panic!("prometheus on {addr} in {netns} never became ready:\n{log}");
        }
        prom
    }

    fn spawn(addr: SocketAddr, jobs: &[Scrape], netns: Option<&str>) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("wirebench-prometheus-")
            .tempdir()
            .expect("a temporary directory");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_text(addr, jobs)).expect("config written");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        // `ip netns exec` runs the server in place of itself: the child is Prometheus.
        let mut command = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, PROMETHEUS]);
                c
            }
            None => Command::new(PROMETHEUS),
        };
        let child = command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            addr,
            dir,
            netns: netns.map(str::to_owned),
        }
    }

    /// Starts Prometheus scraping `jobs` every second and waits until `/-/ready` answers 200.
    /// The port is found free just before the start; when another process takes it in between,
    /// the start is tried again on another one.
    pub fn start(jobs: &[Scrape]) -> Prometheus {
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut prom = Prometheus::spawn(addr, jobs, None);
            match prom.wait_ready() {
                Ok(()) => return prom,
                Err(log) if log.contains("address already in use") => last_log = log,
                Err(log) => panic!("prometheus on {addr} never became ready:\n{log}"),
            }
        }
        panic!("prometheus found no free port in 5 tries:\n{last_log}");
    }

    /// Ok once `/-/ready` answers 200; Err(the server's log) when it exited or never did.
    fn wait_ready(&mut self) -> Result<(), String> {
        let until = Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited ({status}):\n{}", self.log()));
            }
            if matches!(self.get("/-/ready"), Ok((200, _))) {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(format!("not ready within {PATIENCE:?}:\n{}", self.log()));
            }
            std::thread::sleep(POLL);
        }
    }

    /// What the server wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.log")
    }

    /// An instant query through `/api/v1/query`: the samples of a vector (a scalar: one sample
    /// without labels); Err with Prometheus's own error (a bad expression, say).
    pub fn query(&self, expr: &str) -> Result<Vec<Sample>, String> {
        self.query_path(format!("/api/v1/query?query={}", percent_encode(expr)))
    }

    /// [`Prometheus::query`] evaluated at `unix_s` (seconds since the epoch): queries at one
    /// time see the samples of the same scrapes.
    pub fn query_at(&self, expr: &str, unix_s: f64) -> Result<Vec<Sample>, String> {
        self.query_path(format!(
            "/api/v1/query?query={}&time={unix_s:.3}",
            percent_encode(expr)
        ))
    }

    /// A GET of the server's API, from inside its namespace when it has one.
    fn get(&self, path: &str) -> Result<(u16, String), String> {
        let Some(ns) = &self.netns else {
            return get(self.addr, path);
        };
        let (addr, path) = (self.addr, path.to_owned());
        wirebench::lab::in_netns(ns, move || Ok(get(addr, &path)))
            .map_err(|e| format!("entering {ns}: {e:#}"))?
    }

    fn query_path(&self, path: String) -> Result<Vec<Sample>, String> {
        let (status, body) = self.get(&path)?;
        let v: Value = serde_json::from_str(&body)
            .map_err(|e| format!("HTTP {status}: not JSON ({e}): {body}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "HTTP {status}: {}: {}",
                v["errorType"].as_str().unwrap_or("?"),
                v["error"].as_str().unwrap_or(&body)
            ));
        }
        let data = &v["data"];
        let value = |pair: &Value| -> Result<f64, String> {
            pair[1]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .ok_or_else(|| format!("not a [time, \"value\"] pair: {pair}"))
        };
        match data["resultType"].as_str() {
            Some("vector") => data["result"]
                .as_array()
                .ok_or_else(|| format!("no result array: {body}"))?
                .iter()
                .map(|s| {
                    let labels = s["metric"]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                                .collect()
                        })
                        .unwrap_or_default();
                    Ok((labels, value(&s["value"])?))
                })
                .collect(),
            Some("scalar") => Ok(vec![(BTreeMap::new(), value(&data["result"])?)]),
            other => Err(format!(
                "result type {other:?} is not an instant vector: {body}"
            )),
        }
    }

    /// Polls `expr` every 200 ms until its samples satisfy `done`, and returns them; fails the
    /// test, with the last answer and the server's log, when [`PATIENCE`] has passed.
    pub fn wait_for(&self, expr: &str, done: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
        let until = Instant::now() + PATIENCE;
        loop {
            let answer = self.query(expr);
            if let Ok(samples) = &answer {
                if done(samples) {
                    return samples.clone();
                }
            }
            if Instant::now() >= until {
                panic!(
                    "{expr}: not as expected within {PATIENCE:?}; last answer {answer:?}\n{}",
                    self.log()
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("prometheus on {} logged:\n{}", self.addr, self.log());
        }
        // The storage directory goes with `dir`.
    }
}

/// The configuration: every job scraped every second (timeout under the interval, as
/// Prometheus requires).
fn config_text(own: SocketAddr, jobs: &[Scrape]) -> String {
    let mut s = String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n");
    for job in jobs {
        let targets: Vec<String> = job
            .targets
            .iter()
            .map(|t| {
                let t = if t == ITSELF {
                    own.to_string()
                } else {
                    t.clone()
                };
                format!("\"{t}\"")
            })
            .collect();
        s += &format!(
            "  - job_name: \"{}\"\n    metrics_path: \"{}\"\n    static_configs:\n      - targets: [{}]\n",
            job.job,
            job.metrics_path,
            targets.join(", ")
        );
    }
    s
}

/// A loopback port free a moment ago (the kernel's choice for port 0).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    l.local_addr().expect("its address").port()
}

/// A plain HTTP/1.0 GET (the server answers and closes; no chunking): (status, body).
pub fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let io = |e: std::io::Error| format!("GET http://{addr}{path}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
    )
    .map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET http://{addr}{path}: no end of headers in {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("GET http://{addr}{path}: no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// A query parameter's value, every byte but the unreserved ones percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
