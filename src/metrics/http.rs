//! The exporter's HTTP server (tiny_http, no async runtime): one thread takes requests and
//! gives each its own short-lived thread, so that a slow `/probe` never holds up `/metrics`.
//! Requests in flight and probes running are capped; beyond the caps the answer is 503.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use super::exposition::{self, Format};
use super::families::{self, Exposed};
use super::{probe, MetricsSource};

/// Requests served at once; more get 503 at once (a scraper retries at its next interval).
const MAX_IN_FLIGHT: usize = 16;
/// Probes running at once: each is a measurement, and concurrent ones would disturb each
/// other's figures.
const MAX_PROBES: usize = 2;

/// An answer: status, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    fn text(status: u16, line: impl Into<String>) -> Reply {
        let mut body = line.into();
        body.push('\n');
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>wirebench exporter</title></head><body>\n<h1>wirebench exporter</h1>\n<p><a href=\"/metrics\">/metrics</a></p>\n<p><a href=\"/probe?target=TARGET&amp;module=TEST\">/probe?target=TARGET&amp;module=TEST</a> runs one test now (on <code>wirebench agent</code>)</p>\n</body></html>\n";

/// Counts a slot while held; gives it back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(count)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the exporter answers to one request (the routing, apart from sockets).
pub fn route(
    source: &dyn MetricsSource,
    method: &str,
    url: &str,
    accept: Option<&str>,
    probes: &Arc<AtomicUsize>,
) -> Reply {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if !matches!(path, "/" | "/metrics" | "/probe") {
        return Reply::text(404, format!("not found: {}", path.escape_debug()));
    }
    if method != "GET" {
        return Reply::text(405, format!("{path}: only GET"));
    }
    let mut format = Format::negotiate(accept);
    let exposed = match path {
        "/metrics" => {
            let agent = source.agent();
            Exposed {
                agent: agent.as_ref().map(|a| (a.running, a.cpu_seconds)),
                tests: agent.map(|a| a.tests).unwrap_or_default(),
                server: source.server(),
                build_info: true,
                probe: None,
            }
        }
        "/probe" => {
            let (target, module) = match probe::parameters(query) {
                Ok(p) => p,
                Err(why) => return Reply::text(400, why),
            };
            let Some(_slot) = Slot::take(probes, MAX_PROBES) else {
                return Reply::text(
                    503,
                    format!("{MAX_PROBES} probes are running: try again later"),
                );
            };
            probe::run(source, &target, &module)
        }
        _ => {
            return Reply {
                status: 200,
                content_type: "text/html; charset=utf-8",
                body: INDEX.to_string(),
            }
        }
    };
    let families = exposed.families();
    if format == Format::OpenMetrics && families::clash_in_openmetrics(&families) {
        // The text format is what every scraper, Prometheus included, also accepts.
        format = Format::Text;
    }
    match exposition::encode(&families::registry(families), format) {
        Ok(body) => Reply {
            status: 200,
            content_type: format.content_type(),
            body,
        },
        Err(_) => Reply::text(500, "the metrics could not be encoded"),
    }
}

/// The running server: its address, and what stops it.
pub struct Running {
    pub addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.accept.take() {
            // A request's own thread may still run (a probe); it holds its own references
            // and ends with its answer.
            let _ = t.join();
        }
    }
}

/// The one line of a failed bind: "--metrics ADDR: address in use".
fn bind_error(addr: SocketAddr, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    let why = match e.downcast_ref::<std::io::Error>().map(std::io::Error::kind) {
        Some(std::io::ErrorKind::AddrInUse) => "address in use".to_string(),
        Some(std::io::ErrorKind::AddrNotAvailable) => "no such local address".to_string(),
        Some(std::io::ErrorKind::PermissionDenied) => "permission denied".to_string(),
        _ => e.to_string(),
    };
    anyhow::anyhow!("--metrics {addr}: {why}")
}

pub fn start(addr: SocketAddr, source: Arc<dyn MetricsSource>) -> anyhow::Result<Running> {
    let server = tiny_http::Server::http(addr).map_err(|e| bind_error(addr, e.as_ref()))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow::anyhow!("--metrics {addr}: not bound to an IP address"))?;
    let server = Arc::new(server);
    let stop = Arc::new(AtomicBool::new(false));
    let accept = {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        thread::Builder::new()
            .name("wb-metrics".into())
            .spawn(move || accept_loop(&server, &stop, source))?
    };
    Ok(Running {
        addr: bound,
        server,
        stop,
        accept: Some(accept),
    })
}

fn accept_loop(server: &tiny_http::Server, stop: &AtomicBool, source: Arc<dyn MetricsSource>) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let probes = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let Ok(request) = server.recv() else {
            continue;
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Some(slot) = Slot::take(&in_flight, MAX_IN_FLIGHT) else {
            let reply = Reply::text(503, format!("{MAX_IN_FLIGHT} requests in flight"));
            answer(request, reply);
            continue;
        };
        let (source, probes) = (Arc::clone(&source), Arc::clone(&probes));
        let spawned = thread::Builder::new()
            .name("wb-metrics-req".into())
            .spawn(move || {
                let _slot = slot;
                let accept = request
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Accept"))
                    .map(|h| h.value.as_str().to_string());
                let method = request.method().as_str().to_string();
                let reply = route(
                    source.as_ref(),
                    &method,
                    request.url(),
                    accept.as_deref(),
                    &probes,
                );
                answer(request, reply);
            });
        if let Err(e) = spawned {
            eprintln!("wirebench metrics: no thread for a request: {e}");
        }
    }
}

fn answer(request: tiny_http::Request, reply: Reply) {
    let mut response = tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
    if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", reply.content_type) {
        response = response.with_header(h);
    }
    // The scraper may have gone; nothing is owed to it.
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use super::*;
    use crate::model::agent::{AgentSnapshot, ServerSnapshot, TestState};

    /// An agent with one test; its probe succeeds for target "b" and fails otherwise.
    struct Fake;

    fn state() -> TestState {
        TestState {
            target: "b".into(),
            test: "ping64".into(),
            transport: "tcp".into(),
            pattern: "pingpong".into(),
            size_bytes: 64,
            runs_total: 4,
            ..TestState::default()
        }
    }

    impl MetricsSource for Fake {
        fn agent(&self) -> Option<AgentSnapshot> {
            Some(AgentSnapshot {
                tests: vec![state()],
                running: 0,
                cpu_seconds: 1.5,
            })
        }
        fn server(&self) -> Option<ServerSnapshot> {
            None
        }
        fn probe(&self, target: &str, module: &str) -> Result<TestState, String> {
            if target == "b" && module == "ping64" {
                Ok(state())
            } else {
                Err(format!("no test {module} against {target}"))
            }
        }
    }

    fn get(url: &str, accept: Option<&str>) -> Reply {
        route(&Fake, "GET", url, accept, &Arc::new(AtomicUsize::new(0)))
    }

    #[test]
    fn metrics_in_either_format_by_the_accept_header() {
        let text = get("/metrics", None);
        assert_eq!((text.status, text.content_type), (200, exposition::TEXT));
        assert!(text
            .body
            .contains("wirebench_runs_total{target=\"b\",test=\"ping64\"} 4\n"));
        assert!(text
            .body
            .contains("wirebench_agent_cpu_seconds_total 1.5\n"));
        assert!(!text.body.contains("# EOF"));
        let om = get(
            "/metrics",
            Some("application/openmetrics-text; version=1.0.0"),
        );
        assert_eq!((om.status, om.content_type), (200, exposition::OPENMETRICS));
        assert!(om.body.ends_with("# EOF\n"));
        // No server behind this source: no server families, and no probe outcome.
        assert!(!text.body.contains("wirebench_server_"));
        assert!(!text.body.contains("wirebench_probe_"));
    }

    #[test]
    fn a_probe_answers_its_test_or_a_failure_as_a_value() {
        let ok = get("/probe?target=b&module=ping64", None);
        assert_eq!(ok.status, 200);
        assert!(ok.body.contains("wirebench_probe_success 1.0\n"));
        assert!(ok.body.contains("wirebench_probe_duration_seconds "));
        assert!(ok
            .body
            .contains("wirebench_runs_total{target=\"b\",test=\"ping64\"} 4\n"));
        // The agent's own families belong to /metrics.
        assert!(!ok.body.contains("wirebench_agent_"));
        assert!(!ok.body.contains("wirebench_build_info"));
        let failed = get("/probe?target=c%3A5320&module=ping64", None);
        assert_eq!(failed.status, 200);
        assert!(failed.body.contains("wirebench_probe_success 0.0\n"));
        assert!(!failed.body.contains("wirebench_runs_total"));
    }

    #[test]
    fn bad_requests_get_one_line_and_their_status() {
        for (url, status, line) in [
            ("/probe?module=ping64", 400, "missing parameter: target\n"),
            ("/probe?target=b", 400, "missing parameter: module\n"),
            ("/probe?target=&module=x", 400, "empty parameter: target\n"),
            (
                "/probe?target=%zz&module=x",
                400,
                "target: not a valid URL-encoded value\n",
            ),
            ("/nothing", 404, "not found: /nothing\n"),
        ] {
            let r = get(url, None);
            assert_eq!((r.status, r.body.as_str()), (status, line), "{url}");
        }
        let post = route(
            &Fake,
            "POST",
            "/metrics",
            None,
            &Arc::new(AtomicUsize::new(0)),
        );
        assert_eq!(post.status, 405);
        assert!(get("/", None).body.contains("href=\"/metrics\""));
    }

    /// A server's families are valid OpenMetrics too: a scrape that asks for it gets it.
    #[test]
    fn a_server_answers_openmetrics_scrapes_in_openmetrics() {
        struct ServerOnly;
        impl MetricsSource for ServerOnly {
            fn agent(&self) -> Option<AgentSnapshot> {
                None
            }
            fn server(&self) -> Option<ServerSnapshot> {
                Some(ServerSnapshot::default())
            }
            fn probe(&self, _: &str, _: &str) -> Result<TestState, String> {
                Err("no".into())
            }
        }
        let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        let r = route(
            &ServerOnly,
            "GET",
            "/metrics",
            Some(om),
            &Arc::new(AtomicUsize::new(0)),
        );
        assert_eq!(r.status, 200);
        assert_ne!(r.content_type, exposition::TEXT);
        assert!(r.body.contains("wirebench_server_active_sessions 0.0\n"));
        assert!(r.body.contains("wirebench_server_sessions_total 0\n"));
    }

    #[test]
    fn probes_beyond_the_cap_are_refused_with_503() {
        let probes = Arc::new(AtomicUsize::new(MAX_PROBES));
        let r = route(&Fake, "GET", "/probe?target=b&module=ping64", None, &probes);
        assert_eq!(r.status, 503);
        assert_eq!(probes.load(Ordering::SeqCst), MAX_PROBES);
        // /metrics is not a probe: it is served whatever the probes do.
        let m = route(&Fake, "GET", "/metrics", None, &probes);
        assert_eq!(m.status, 200);
    }

    /// One HTTP/1.1 request, the connection closed after it: (status, headers and body).
    fn fetch(addr: SocketAddr, path: &str, accept: &str) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let accept = if accept.is_empty() {
            String::new()
        } else {
            format!("Accept: {accept}\r\n")
        };
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        let status = all.split(' ').nth(1).unwrap().parse().unwrap();
        (status, all)
    }

    #[test]
    fn loopback_server_routes_and_stops_when_dropped() {
        let server =
            crate::metrics::serve(SocketAddr::from(([127, 0, 0, 1], 0)), Arc::new(Fake)).unwrap();
        let addr = server.addr;
        let (status, text) = fetch(addr, "/metrics", "");
        assert_eq!(status, 200);
        assert!(text.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(text.contains("wirebench_build_info{version="));
        let (status, om) = fetch(addr, "/metrics", "application/openmetrics-text");
        assert_eq!(status, 200);
        assert!(om.contains("application/openmetrics-text; version=1.0.0"));
        assert!(om.ends_with("# EOF\n"));
        assert_eq!(fetch(addr, "/probe?target=b&module=ping64", "").0, 200);
        assert_eq!(fetch(addr, "/probe?target=b", "").0, 400);
        assert_eq!(fetch(addr, "/elsewhere", "").0, 404);
        // The same address cannot be taken twice: one line says so.
        let again = crate::metrics::serve(addr, Arc::new(Fake)).err().unwrap();
        assert_eq!(
            again.to_string(),
            format!("--metrics {addr}: address in use")
        );
        // Dropping it joins its accepting thread (this would hang if unblocking failed).
        drop(server);
    }
}
