//! The exporter's HTTP server: HTTP/1.1 on a tokio runtime of one thread, one request a
//! connection. Every cost a client can make it pay is bounded before a byte is read: the
//! connections at once (in all and from one address), the request head's size and the time
//! it may take to arrive, the time an answer may take to leave, the probes running and the
//! threads they run on. A connection over a cap is closed at once, with a 503 only where the
//! socket takes it without waiting: the accept loop never waits on any client. Each
//! connection is answered once and closed, so a client that pipelines requests and never
//! reads holds at most one answer and one slot, for at most the write deadline.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::exposition::{self, Format};
use super::families::{self, Exposed};
use super::{probe, MetricsSource};
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
    if path == "/probe" && !source.offers_probes() {
        return Reply::text(
            404,
            "not found: /probe (a server runs no probes: `wirebench agent` does)",
        );
    }
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

/// What the exporter holds itself to. The defaults keep a flood's cost to a few MiB and a
/// handful of threads: 64 connections of at most 8 KiB of head each, one runtime thread, and
/// the probes' threads.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; more are closed at once.
    pub max_connections: usize,
    /// Connections open at once from one address (a scraper needs one or two).
    pub max_per_address: usize,
    /// The longest request head (request line and headers); longer gets 431.
    pub max_head_bytes: usize,
    /// The time a request head has to arrive in full from the connection's accept.
    pub head_deadline: Duration,
    /// The time an answer has to be taken by the client.
    pub write_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            max_per_address: 16,
            max_head_bytes: 8 * 1024,
            head_deadline: Duration::from_secs(5),
            write_deadline: Duration::from_secs(10),
        }
    }
}

/// Connections refused, closed for a slow or oversized head, and answers given up: what an
/// attack cost the exporter, for tests and the stop line.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections open now.
    pub open: AtomicUsize,
    pub refused: AtomicUsize,
    pub head_timeouts: AtomicUsize,
    pub heads_too_large: AtomicUsize,
    pub write_timeouts: AtomicUsize,
    pub answered: AtomicUsize,
}

/// The running server: its address, and what stops it.
pub struct Running {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // A probe's thread may still run: it holds its own references and ends with its
            // run, unwaited (the runtime is shut down in the background).
            let _ = t.join();
        }
    }
}

/// The one line of a failed bind: "--metrics ADDR: address in use".
fn bind_error(addr: SocketAddr, e: &std::io::Error) -> anyhow::Error {
    let why = match e.kind() {
        std::io::ErrorKind::AddrInUse => "address in use".to_string(),
        std::io::ErrorKind::AddrNotAvailable => "no such local address".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    };
    anyhow::anyhow!("--metrics {addr}: {why}")
}

pub fn start(
    addr: SocketAddr,
    source: Arc<dyn MetricsSource>,
    limits: Limits,
) -> anyhow::Result<Running> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| bind_error(addr, &e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| bind_error(addr, &e))?;
    let bound = listener.local_addr().map_err(|e| bind_error(addr, &e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        // A probe runs on a thread of its own; a /metrics answer is made on one too (it
        // takes the agent's lock). The probe cap keeps probes from taking them all.
        .max_blocking_threads(MAX_PROBES + 2)
        .thread_name("wb-metrics-work")
        .build()?;
    let counters = Arc::new(Counters::default());
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let thread = {
        let counters = Arc::clone(&counters);
        thread::Builder::new()
            .name("wb-metrics".into())
            .spawn(move || {
                runtime.block_on(accept_loop(listener, source, limits, counters, stopped));
                runtime.shutdown_background();
            })?
    };
    Ok(Running {
        addr: bound,
        counters,
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// The connections open now, in all and by address; a ticket gives its place back when
/// dropped.
#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

struct Ticket {
    open: Arc<Mutex<Open>>,
    counters: Arc<Counters>,
    ip: IpAddr,
}

impl Ticket {
    fn take(
        open: &Arc<Mutex<Open>>,
        counters: &Arc<Counters>,
        ip: IpAddr,
        limits: &Limits,
    ) -> Option<Ticket> {
        let mut o = open.lock().unwrap_or_else(|p| p.into_inner());
        let here = o.by_address.get(&ip).copied().unwrap_or(0);
        if o.total >= limits.max_connections || here >= limits.max_per_address {
            return None;
        }
        o.total += 1;
        *o.by_address.entry(ip).or_insert(0) += 1;
        counters.open.store(o.total, Ordering::SeqCst);
        Some(Ticket {
            open: Arc::clone(open),
            counters: Arc::clone(counters),
            ip,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        o.total = o.total.saturating_sub(1);
        self.counters.open.store(o.total, Ordering::SeqCst);
        if let Some(n) = o.by_address.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.by_address.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    source: Arc<dyn MetricsSource>,
    limits: Limits,
    counters: Arc<Counters>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        eprintln!("wirebench metrics: the listening socket could not be registered");
        return;
    };
    let open = Arc::new(Mutex::new(Open::default()));
    let probes = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            // Out of descriptors, or a connection reset before it was taken: the loop goes
            // on (after a pause, so that a lack of descriptors does not spin it).
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(ticket) = Ticket::take(&open, &counters, peer.ip().to_canonical(), &limits) else {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            // Only what the socket takes now: the loop never waits on a client.
            let _ = stream.try_write(&head_of(&Reply::text(503, "too many connections"), 0));
            continue;
        };
        let (source, probes, counters) = (
            Arc::clone(&source),
            Arc::clone(&probes),
            Arc::clone(&counters),
        );
        tokio::spawn(async move {
            let _ticket = ticket;
            connection(stream, source, probes, limits, &counters).await;
        });
    }
}

/// What a request head gave: method, target and the Accept header.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    url: String,
    accept: Option<String>,
}

/// Why a head was not taken.
#[derive(Debug, PartialEq, Eq)]
enum BadHead {
    /// The client closed before a whole head came.
    Closed,
    TooLarge,
    Malformed,
}

/// Parses `buf` as a request head: None while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, BadHead> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {
            let accept = request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("accept"))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .map(str::to_string);
            Ok(Some(Head {
                method: request.method.unwrap_or("").to_string(),
                url: request.path.unwrap_or("").to_string(),
                accept,
            }))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(BadHead::TooLarge),
        Err(_) => Err(BadHead::Malformed),
    }
}

/// Reads one request head into a buffer of at most `max` bytes.
async fn read_head(stream: &mut TcpStream, max: usize) -> Result<Head, BadHead> {
    let mut buf = vec![0u8; max];
    let mut filled = 0;
    loop {
        if filled == max {
            return Err(BadHead::TooLarge);
        }
        let n = stream
            .read(&mut buf[filled..])
            .await
            .map_err(|_| BadHead::Closed)?;
        if n == 0 {
            return Err(BadHead::Closed);
        }
        filled += n;
        if let Some(head) = parse_head(&buf[..filled])? {
            return Ok(head);
        }
    }
}

async fn connection(
    mut stream: TcpStream,
    source: Arc<dyn MetricsSource>,
    probes: Arc<AtomicUsize>,
    limits: Limits,
    counters: &Counters,
) {
    let head = tokio::time::timeout(
        limits.head_deadline,
        read_head(&mut stream, limits.max_head_bytes),
    )
    .await;
    let reply = match head {
        Err(_) => {
            counters.head_timeouts.fetch_add(1, Ordering::Relaxed);
            Reply::text(408, "the request head did not arrive in time")
        }
        Ok(Err(BadHead::Closed)) => return,
        Ok(Err(BadHead::TooLarge)) => {
            counters.heads_too_large.fetch_add(1, Ordering::Relaxed);
            Reply::text(
                431,
                format!("the request head is over {} bytes", limits.max_head_bytes),
            )
        }
        Ok(Err(BadHead::Malformed)) => Reply::text(400, "not an HTTP/1.1 request"),
        Ok(Ok(head)) => {
            // Routing may run a probe (a measurement) or take the agent's lock: off the
            // runtime's one thread.
            let routed = tokio::task::spawn_blocking(move || {
                route(
                    source.as_ref(),
                    &head.method,
                    &head.url,
                    head.accept.as_deref(),
                    &probes,
                )
            })
            .await;
            routed.unwrap_or_else(|_| Reply::text(500, "the answer could not be made"))
        }
    };
    let written = tokio::time::timeout(limits.write_deadline, async {
        stream.write_all(&head_of(&reply, reply.body.len())).await?;
        stream.write_all(reply.body.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    match written {
        Ok(_) => {
            counters.answered.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => {
            counters.write_timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The status line and headers of `reply` with a body of `length` bytes.
fn head_of(reply: &Reply, length: usize) -> Vec<u8> {
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n",
        reply.status, reply.content_type
    )
    .into_bytes()
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

    /// A connection over a cap, a head that never ends, one over the size cap and a client
    /// that pipelines requests and never reads each cost one slot for a bounded time, are
    /// counted exactly, and leave the exporter answering others.
    #[test]
    fn loopback_caps_hold_and_others_are_served() {
        let limits = Limits {
            max_connections: 8,
            max_per_address: 3,
            max_head_bytes: 1024,
            // Long enough that a loaded host's scheduler never makes a real request late
            // (the scrapes below send their head right after connecting), short enough that
            // the idle ones are cut off soon.
            head_deadline: Duration::from_secs(3),
            write_deadline: Duration::from_secs(3),
        };
        let server = crate::metrics::serve_within(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            Arc::new(Fake),
            limits,
        )
        .unwrap();
        let addr = server.addr;
        let counters = server.counters();
        let from = |ip: [u8; 4]| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
            s.connect(&addr.into()).unwrap();
            let s: TcpStream = s.into();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s
        };
        // Three idle connections from one address take its share; a fourth is refused.
        let idle: Vec<TcpStream> = (0..3).map(|_| from([127, 0, 0, 1])).collect();
        let wait = |what: &str, f: &dyn Fn() -> bool| {
            let until = std::time::Instant::now() + Duration::from_secs(60);
            while !f() {
                assert!(std::time::Instant::now() < until, "{what}");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let mut fourth = from([127, 0, 0, 1]);
        let mut refused = String::new();
        let _ = fourth.read_to_string(&mut refused);
        assert!(
            refused.is_empty() || refused.starts_with("HTTP/1.1 503 "),
            "{refused}"
        );
        wait("the fourth counted as refused", &|| {
            counters.refused.load(Ordering::SeqCst) == 1
        });
        // Another address is served meanwhile.
        let mut other = from([127, 0, 0, 2]);
        write!(other, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("Connection: close\r\n"));
        // The idle ones are cut off at the head deadline, with a 408.
        for mut s in idle {
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            assert!(got.is_empty() || got.starts_with("HTTP/1.1 408 "), "{got}");
        }
        wait("three head time-outs", &|| {
            counters.head_timeouts.load(Ordering::SeqCst) == 3
        });
        // A header line that never ends: 431 after 1 KiB, whatever more is sent.
        let mut long = from([127, 0, 0, 3]);
        long.write_all(b"GET /metrics HTTP/1.1\r\nX: ").unwrap();
        let _ = long.write_all(&[b'a'; 4096]);
        wait("one head too large", &|| {
            counters.heads_too_large.load(Ordering::SeqCst) == 1
        });
        // 4 000 pipelined requests, never read: one answer is written (or given up at the
        // write deadline), the rest never read; others are served all along.
        let mut pipeliner = from([127, 0, 0, 4]);
        pipeliner
            .set_write_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let many = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4000);
        let _ = pipeliner.write_all(many.as_bytes());
        let mut again = from([127, 0, 0, 2]);
        write!(again, "GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut answer = String::new();
        again.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        drop(pipeliner);
        wait("every connection given back", &|| {
            let o = counters.answered.load(Ordering::SeqCst)
                + counters.write_timeouts.load(Ordering::SeqCst);
            // two scrapes, three 408s, one 431, the pipeliner's one answer.
            o == 7 && counters.open.load(Ordering::SeqCst) == 0
        });
        // A ninth connection at once from nine addresses: the total cap holds.
        let held: Vec<TcpStream> = (10..18).map(|i| from([127, 0, 0, i])).collect();
        let mut ninth = from([127, 0, 0, 30]);
        let mut got = String::new();
        let _ = ninth.read_to_string(&mut got);
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 503 "), "{got}");
        wait("the ninth counted as refused", &|| {
            counters.refused.load(Ordering::SeqCst) == 2
        });
        drop(held);
    }
}
