//! Hostile gRPC clients against `serve --grpc-echo` and a gRPC test's data port, the server in
//! a child process under a 1 GiB address-space limit (prlimit), so that a failure is an
//! allocation refused in that process and never pressure on this machine. A raw HTTP/2 client
//! (h2) sends what no gRPC client would: answers of any size asked for, messages declared
//! and never finished, windows never opened, calls without the test's cookie. Each case
//! checks the refusal's gRPC status, that the server is alive, its resident memory, and that
//! a well-behaved call from another connection is answered afterwards. Counts and statuses
//! only: the one sleep lets the sent data reach the server, and timeouts are hang guards.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use bytes::Bytes;
use common::hostile::{greet, point_spec, read_frame, test_spec, write_frame};
use serde_json::json;

/// The server's address space: the old echo aborted under it (12 unfinished 191 MiB messages).
const ADDRESS_SPACE: u64 = 1 << 30;
/// Resident memory the server may reach during an attack: the echo's own bound is 228 MiB
/// (ECHO_HELD_BOUND in src/transport/grpc/mod.rs) above a baseline of a few MiB.
const RSS_BOUND_KIB: u64 = 300 << 10;
/// The echo's caps (src/transport/grpc/mod.rs), as a client meets them.
const ECHO_MAX_RESPONSE: u64 = 3 << 20;
const ECHO_MAX_MESSAGE: usize = 4 << 20;
const ECHO_MAX_CONNECTIONS: usize = 12;
const ECHO_MAX_PER_ADDRESS: usize = 3;
const ECHO_MAX_STREAMS: usize = 4;

const CALL: &str = "/wirebench.v1.Echo/Call";
const UPLOAD: &str = "/wirebench.v1.Echo/Upload";

/// gRPC status codes.
const OK: u32 = 0;
const PERMISSION_DENIED: u32 = 7;
const RESOURCE_EXHAUSTED: u32 = 8;
const OUT_OF_RANGE: u32 = 11;

/// `wirebench serve` under the address-space limit, killed on drop.
struct Limited {
    child: Child,
    control: String,
    echo: Option<SocketAddr>,
    _log: Receiver<String>,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Limited {
    fn start(extra: &[&str]) -> Limited {
        let mut child = Command::new("prlimit")
            .arg(format!("--as={ADDRESS_SPACE}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_wirebench"))
            .args(["serve", "--listen", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env_remove("WIREBENCH_PSK")
            .env(
                "XDG_DATA_HOME",
                std::env::temp_dir().join(format!("wirebench-tests-{}", std::process::id())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("prlimit and the server start");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        let control = first.rsplit(' ').next().unwrap().to_owned();
        let mut echo = None;
        if extra.contains(&"--grpc-echo") {
            let line = lines.next().expect("the echo's line").expect("utf-8");
            let at = line.split(" on ").nth(1).expect("echo address");
            let addr = at.split(": ").next().unwrap();
            echo = Some(addr.parse().expect("IP:PORT"));
        }
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Limited {
            child,
            control,
            echo,
            _log: log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn assert_alive(&mut self, after: &str) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the server died after {after}"
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A hang guard: every case ends long before it.
const GUARD: Duration = Duration::from_secs(120);

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A `Payload` (proto/wirebench_echo.proto) asking for `response_size` bytes, carrying `data`
/// bytes of its own.
fn payload(response_size: u64, data: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(data + 16);
    if response_size > 0 {
        m.push(0x08);
        varint(response_size, &mut m);
    }
    if data > 0 {
        m.push(0x12);
        varint(data as u64, &mut m);
        m.resize(m.len() + data, 0x5a);
    }
    m
}

/// A gRPC message frame: uncompressed, its length, the message.
fn framed(message: &[u8]) -> Bytes {
    let mut f = vec![0u8];
    f.extend_from_slice(&(message.len() as u32).to_be_bytes());
    f.extend_from_slice(message);
    Bytes::from(f)
}

/// The first bytes of a frame that declares `declared` bytes and carries `carried` of them.
fn unfinished(declared: usize, carried: usize) -> Bytes {
    let mut f = vec![0u8];
    f.extend_from_slice(&(declared as u32).to_be_bytes());
    f.resize(5 + carried, 0x5a);
    Bytes::from(f)
}

type Sender = h2::client::SendRequest<Bytes>;

/// An HTTP/2 connection whose frames a task of the runtime moves, from the next of 200
/// loopback addresses (127.0.1.1 on), so that the echo's per-address share does not limit
/// what a case sends. `window`: the receive window this client grants per stream (0: the
/// server may send it nothing).
async fn connect(addr: SocketAddr, window: u32) -> Option<Sender> {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 200;
    connect_as([127, 0, 1, n + 1], addr, window).await
}

/// [`connect`] from the loopback address `from`.
async fn connect_as(from: [u8; 4], addr: SocketAddr, window: u32) -> Option<Sender> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((from, 0))).ok()?;
    let tcp = socket.connect(addr).await.ok()?;
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tcp)
        .await
        .ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Some(send)
}

fn request(addr: SocketAddr, path: &str, metadata: &[(&str, &str)]) -> http::Request<()> {
    let mut r = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in metadata {
        r = r.header(*k, *v);
    }
    r.body(()).unwrap()
}

/// Starts a call and sends `body` (ending the stream with `end`); returns the stream (kept
/// open while the caller holds it) and the answer's future.
async fn start(
    send: &Sender,
    req: http::Request<()>,
    body: Bytes,
    end: bool,
) -> Option<(h2::SendStream<Bytes>, h2::client::ResponseFuture)> {
    let mut send = send.clone().ready().await.ok()?;
    let (answer, mut stream) = send.send_request(req, false).ok()?;
    stream.send_data(body, end).ok()?;
    Some((stream, answer))
}

/// The gRPC status of an answer and the message bytes it carried.
async fn finish(answer: h2::client::ResponseFuture) -> (Option<u32>, usize) {
    let Ok(resp) = answer.await else {
        return (None, 0);
    };
    let status = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    };
    let mut code = status(resp.headers());
    let mut body = resp.into_body();
    let mut n = 0;
    while let Some(chunk) = body.data().await {
        let Ok(c) = chunk else { break };
        n += c.len();
        let _ = body.flow_control().release_capacity(c.len());
    }
    if code.is_none() {
        if let Ok(Some(t)) = body.trailers().await {
            code = status(&t);
        }
    }
    (code, n)
}

async fn call(
    addr: SocketAddr,
    path: &str,
    metadata: &[(&str, &str)],
    body: Bytes,
) -> (Option<u32>, usize) {
    let Some(send) = connect(addr, 1 << 20).await else {
        return (None, 0);
    };
    let Some((_stream, answer)) = start(&send, request(addr, path, metadata), body, true).await
    else {
        return (None, 0);
    };
    finish(answer).await
}

/// The bytes of an echo's answer of n data bytes: its frame header, the field's key and
/// length, the bytes.
fn answer_len(n: u64) -> usize {
    let mut v = Vec::new();
    varint(n, &mut v);
    5 + 1 + v.len() + n as usize
}

/// After an attack: the server lives, its resident memory stayed under the bound at its
/// peak, and a well-behaved call is answered.
fn held_up(
    server: &mut Limited,
    after: &str,
    peak: common::proc::Held,
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
) {
    server.assert_alive(after);
    eprintln!("the server's peak: {peak:?}");
    assert!(
        peak.rss_kib < RSS_BOUND_KIB,
        "resident {} KiB at peak",
        peak.rss_kib
    );
    well_behaved(rt, addr);
}

/// A well-behaved call from a connection of its own: answered in full. The hostile
/// connections a case held are gone, but the server may not have seen them go yet, so a
/// refused connection is tried again (a bounded number of times).
fn well_behaved(rt: &tokio::runtime::Runtime, addr: SocketAddr) {
    for _ in 0..50 {
        let got = rt.block_on(async {
            tokio::time::timeout(GUARD, call(addr, CALL, &[], framed(&payload(1000, 10))))
                .await
                .expect("hang guard")
        });
        if got.0.is_some() {
            assert_eq!(got, (Some(OK), answer_len(1000)));
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no well-behaved call was answered");
}

#[test]
fn the_echo_refuses_answers_larger_than_its_cap_before_allocating_them() {
    let mut server = Limited::start(&["--grpc-echo", "127.0.0.1:0"]);
    let addr = server.echo.unwrap();
    let rt = runtime();
    for asked in [
        1u64 << 62,
        i64::MAX as u64,
        1 << 30,
        48 << 20,
        ECHO_MAX_RESPONSE + 1,
    ] {
        let got = rt.block_on(async {
            tokio::time::timeout(GUARD, call(addr, CALL, &[], framed(&payload(asked, 0))))
                .await
                .expect("hang guard")
        });
        assert_eq!(got, (Some(RESOURCE_EXHAUSTED), 0), "response_size {asked}");
        server.assert_alive(&format!("response_size {asked}"));
    }
    // The cap itself is answered in full, and a message declared over the decoding limit
    // is refused at its header.
    let got = rt.block_on(call(
        addr,
        CALL,
        &[],
        framed(&payload(ECHO_MAX_RESPONSE, 0)),
    ));
    assert_eq!(got, (Some(OK), answer_len(ECHO_MAX_RESPONSE)));
    for declared in [ECHO_MAX_MESSAGE + 1, 191 << 20, u32::MAX as usize] {
        let got = rt.block_on(call(addr, CALL, &[], unfinished(declared, 100)));
        assert_eq!(got, (Some(OUT_OF_RANGE), 0), "declared {declared}");
    }
    server.assert_alive("the oversized calls");
    well_behaved(&rt, addr);
}

/// Twice the connections the echo admits, each with every stream it may open sending a
/// message of the largest size and never finishing it, and calls beyond the streams: the
/// server's memory stays under the bound, and it answers once they are gone.
#[test]
fn unfinished_messages_on_every_stream_of_every_connection_stay_bounded() {
    let mut server = Limited::start(&["--grpc-echo", "127.0.0.1:0"]);
    let addr = server.echo.unwrap();
    let pid = server.pid();
    let rt = runtime();
    let ((), peak) = common::proc::peak_while(pid, || {
        rt.block_on(async {
            let (mut senders, mut held) = (Vec::new(), Vec::new());
            for _ in 0..2 * ECHO_MAX_CONNECTIONS {
                let Some(send) = connect(addr, 1 << 20).await else {
                    continue;
                };
                // An oversized one too: refused at its header, its room given back.
                let req = request(addr, UPLOAD, &[]);
                if let Ok(Some(s)) = tokio::time::timeout(
                    Duration::from_secs(5),
                    start(&send, req, unfinished(191 << 20, 1 << 20), false),
                )
                .await
                {
                    held.push(s);
                }
                for _ in 0..ECHO_MAX_STREAMS {
                    let req = request(addr, UPLOAD, &[]);
                    let body = unfinished(ECHO_MAX_MESSAGE, ECHO_MAX_MESSAGE - 1024);
                    let started = tokio::time::timeout(
                        Duration::from_secs(5),
                        start(&send, req, body, false),
                    )
                    .await;
                    if let Ok(Some(s)) = started {
                        held.push(s);
                    }
                }
                senders.push(send);
            }
            // What was sent reaches the server (its windows open as it reads).
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(held);
            drop(senders);
        });
    });
    held_up(&mut server, "the unfinished messages", peak, &rt, addr);
}

/// A client that opens no window: every connection the echo admits asks on every stream for
/// the largest answer and takes none of it. What the server holds for them stays under the
/// bound; every call was taken (the count is exact) and answered with headers.
#[test]
fn answers_nobody_reads_stay_bounded() {
    let mut server = Limited::start(&["--grpc-echo", "127.0.0.1:0"]);
    let addr = server.echo.unwrap();
    let pid = server.pid();
    let rt = runtime();
    let (started, peak) = common::proc::peak_while(pid, || {
        rt.block_on(async {
            let (mut senders, mut held) = (Vec::new(), Vec::new());
            for _ in 0..ECHO_MAX_CONNECTIONS {
                let Some(send) = connect(addr, 0).await else {
                    continue;
                };
                for _ in 0..ECHO_MAX_STREAMS {
                    let req = request(addr, CALL, &[]);
                    let body = framed(&payload(ECHO_MAX_RESPONSE, 0));
                    let started = tokio::time::timeout(GUARD, start(&send, req, body, true)).await;
                    if let Ok(Some(s)) = started {
                        held.push(s);
                    }
                }
                senders.push(send);
            }
            let started = held.len();
            let mut answered = 0;
            for (_stream, answer) in held.iter_mut() {
                if let Ok(Ok(r)) = tokio::time::timeout(GUARD, answer).await {
                    answered += usize::from(r.status() == http::StatusCode::OK);
                }
            }
            assert_eq!(answered, started);
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(held);
            drop(senders);
            started
        })
    });
    assert_eq!(started, ECHO_MAX_CONNECTIONS * ECHO_MAX_STREAMS);
    held_up(&mut server, "the unread answers", peak, &rt, addr);
}

/// A grpc test's data port, while its point waits for its connection: calls without the
/// test's cookie, with a wrong one, or on a connection not admitted, are refused with
/// PERMISSION_DENIED before their bodies are read, however large they say they are; an
/// admitted connection's calls decode no more than the point's messages need. The server's
/// memory stays small, and a real grpc test runs afterwards.
#[test]
fn a_data_port_refuses_calls_without_the_cookie_before_reading_their_bodies() {
    let mut server = Limited::start(&["--io-timeout", "30s"]);
    let (mut c, _) = greet(&server.control).unwrap();
    let open = json!({"type": "open", "spec": test_spec("pingpong", "grpc", "forward")});
    write_frame(&mut c, &open).unwrap();
    let opened = read_frame(&mut c).unwrap();
    let port: u16 = opened["endpoint"].as_str().unwrap().parse().unwrap();
    let cookie = opened["cookie"].as_str().unwrap().to_owned();
    write_frame(
        &mut c,
        &json!({"type": "point", "spec": point_spec(1000, 5000)}),
    )
    .unwrap();
    read_frame(&mut c).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let wrong = "00".repeat(16);
    let pid = server.pid();
    let rt = runtime();
    let (codes, peak) = common::proc::peak_while(pid, || {
        rt.block_on(async {
            let mut codes = Vec::new();
            let send = connect_as([127, 0, 0, 1], addr, 1 << 20)
                .await
                .expect("the data port");
            let kinds: [(&str, Vec<(&str, &str)>); 5] = [
                (UPLOAD, vec![]),
                (CALL, vec![]),
                (UPLOAD, vec![("wb-cookie", wrong.as_str())]),
                (CALL, vec![("wb-hello", "1")]),
                // The right cookie on a connection that said no hello.
                (UPLOAD, vec![("wb-cookie", cookie.as_str())]),
            ];
            let mut held = Vec::new();
            for i in 0..30 {
                let (path, md) = &kinds[i % kinds.len()];
                let req = request(addr, path, md);
                let body = unfinished(100 << 20, 1 << 20);
                let s = tokio::time::timeout(GUARD, start(&send, req, body, false))
                    .await
                    .expect("hang guard")
                    .expect("a stream");
                held.push(s);
            }
            for (_stream, answer) in held {
                let got = tokio::time::timeout(GUARD, finish(answer)).await;
                codes.push(got.expect("hang guard").0);
            }
            // Admitted with the cookie: its calls decode no more than 1000-byte messages need.
            let admitted = connect_as([127, 0, 0, 1], addr, 1 << 20)
                .await
                .expect("the data port");
            let hello = request(addr, CALL, &[("wb-cookie", &cookie), ("wb-hello", "1")]);
            let (_s, answer) = start(&admitted, hello, framed(&[]), true).await.unwrap();
            codes.push(finish(answer).await.0);
            let req = request(addr, UPLOAD, &[("wb-cookie", &cookie)]);
            let (_s, answer) = start(&admitted, req, unfinished(100 << 20, 1 << 20), false)
                .await
                .unwrap();
            codes.push(finish(answer).await.0);
            codes
        })
    });
    let mut want = vec![Some(PERMISSION_DENIED); 30];
    want.extend([Some(OK), Some(OUT_OF_RANGE)]);
    assert_eq!(codes, want);
    server.assert_alive("the calls without the cookie");
    eprintln!("the server's peak: {peak:?}");
    assert!(
        peak.rss_kib < RSS_BOUND_KIB,
        "resident {} KiB at peak",
        peak.rss_kib
    );
    drop(c);
    let out = common::run(&[
        "run",
        "pingpong",
        "-t",
        "grpc",
        "--to",
        &server.control,
        "-n",
        "20",
        "--no-save",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One address holding idle connections gets a quarter of the echo's: the rest of its
/// connections are closed at accept, and a client at another address is still answered.
#[test]
fn one_address_holds_at_most_a_quarter_of_the_echos_connections() {
    let mut server = Limited::start(&["--grpc-echo", "127.0.0.1:0"]);
    let addr = server.echo.unwrap();
    let rt = runtime();
    let answered = rt.block_on(async {
        let (mut kept, mut senders) = (Vec::new(), Vec::new());
        let mut answered = 0;
        for _ in 0..ECHO_MAX_CONNECTIONS {
            let Some(send) = connect_as([127, 0, 0, 9], addr, 1 << 20).await else {
                continue;
            };
            let req = request(addr, CALL, &[]);
            let body = framed(&payload(1000, 10));
            if let Ok(Some((stream, reply))) =
                tokio::time::timeout(GUARD, start(&send, req, body, true)).await
            {
                if let Ok((Some(OK), _)) = tokio::time::timeout(GUARD, finish(reply)).await {
                    answered += 1;
                }
                kept.push(stream);
            }
            // Held open (idle, as a client answering pings would) until the end.
            senders.push(send);
        }
        // The well-behaved call comes while they are held.
        let other = tokio::time::timeout(GUARD, call(addr, CALL, &[], framed(&payload(1000, 10))))
            .await
            .expect("hang guard");
        assert_eq!(other, (Some(OK), answer_len(1000)));
        drop((kept, senders));
        answered
    });
    assert_eq!(answered, ECHO_MAX_PER_ADDRESS);
    server.assert_alive("one address's idle connections");
    well_behaved(&rt, addr);
}
