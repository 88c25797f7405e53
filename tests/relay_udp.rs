//! PVM's routed path on loopback: a test through relay A (TCP in), a UDP leg to relay B, and
//! B's TCP connection to the server. Every byte arrives, and the relays' counters agree with
//! the test's counts and with each other. Losses on the UDP leg are the state machine's unit
//! tests' business; here `--drop-every` (a test aid) only shows resending at work.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use common::{bin, run_json, u, Server, FINISH};
use serde_json::Value;

/// A `wirebench relay -v` on loopback; its log lines arrive on `log`.
struct Relay {
    child: Child,
    addr: String,
    log: mpsc::Receiver<String>,
    /// Closed-channel lines read so far.
    closed: std::cell::Cell<usize>,
}

impl Relay {
    fn start(args: &[&str]) -> Relay {
        let mut child = bin()
            .arg("relay")
            .args(args)
            .arg("-v")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("relay starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("relay prints its address").unwrap();
        let addr = first
            .split_whitespace()
            .nth(3)
            .expect("'wirebench relay on ADDR ...'")
            .to_owned();
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Relay {
            child,
            addr,
            log,
            closed: std::cell::Cell::new(0),
        }
    }

    /// B, then A in front of it, forwarding to `server`; A drops every `drop_every`-th
    /// datagram it sends when not 0.
    fn pair(server: &str, drop_every: u64) -> (Relay, Relay) {
        let b = Relay::start(&[
            "--listen-udp",
            "127.0.0.1:0",
            "--udp-peer",
            "127.0.0.1",
            "--forward",
            server,
        ]);
        let n = drop_every.to_string();
        let a = Relay::start(&[
            "--listen",
            "127.0.0.1:0",
            "--forward-udp",
            &b.addr,
            "--udp-bind",
            "127.0.0.1:0",
            "--drop-every",
            &n,
        ]);
        (a, b)
    }

    /// Log lines until one satisfies `want` (returned), failing the test after [`FINISH`].
    fn line(&self, want: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + FINISH;
        let mut seen = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let Ok(l) = self.log.recv_timeout(left) else {
                panic!("the relay never logged the line wanted; it logged: {seen:#?}");
            };
            if l.contains(" closed: ") {
                self.closed.set(self.closed.get() + 1);
            }
            if want(&l) {
                return l;
            }
            seen.push(l);
        }
    }

    /// Waits until `n` channels have been logged closed in all: their last datagrams (a FIN
    /// resent after a drop) may cross after the client has exited.
    fn wait_closed(&self, n: usize) {
        while self.closed.get() < n {
            self.line(|l| l.contains(" closed: "));
        }
    }

    /// Ctrl-C: the relay prints its totals and exits.
    fn interrupt(&mut self) -> String {
        let pid = self.child.id().to_string();
        let ok = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(ok.success());
        let l = self.line(|l| l.contains("totals over UDP"));
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(130));
        l
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (bytes up, bytes down) of a relay's closed-channel or totals line.
fn up_down(l: &str) -> (u64, u64) {
    let num = |before: &str| -> u64 {
        let i = l
            .find(before)
            .unwrap_or_else(|| panic!("no '{before}' in {l}"));
        l[..i].split_whitespace().last().unwrap().parse().unwrap()
    };
    (num(" bytes up"), num(" bytes down"))
}

/// The number before `what` in a log line.
fn count(l: &str, what: &str) -> u64 {
    let i = l.find(what).unwrap_or_else(|| panic!("no '{what}' in {l}"));
    l[..i].split_whitespace().last().unwrap().parse().unwrap()
}

fn pingpong(to: &str, size: u64, n: u64) -> Value {
    let (s, n) = (size.to_string(), n.to_string());
    run_json(&[
        "pingpong",
        "--to",
        to,
        "--size",
        &s,
        "-n",
        &n,
        "--warmup",
        "5",
        "--no-save",
    ])
}

#[test]
fn pingpong_and_stream_cross_a_udp_leg_and_every_count_agrees() {
    let server = Server::start(&[]);
    let (mut a, mut b) = Relay::pair(&server.addr, 0);
    let (size, n) = (1000u64, 300u64);
    let direct = pingpong(&server.addr, size, n);
    let routed = pingpong(&a.addr, size, n);
    for v in [&direct, &routed] {
        assert_eq!(u(&v["points"][0]["latency"]["transactions"]), n);
    }
    assert_eq!(direct["server"]["one_port"], false);
    assert_eq!(routed["server"]["one_port"], true, "{}", routed["server"]);
    // The data channel: its 20-byte prefix and cookie, then 305 requests up, 305 responses
    // down, each 1000 bytes (a 1000-byte message is one datagram of 4078 bytes' payload).
    let moved = (n + 5) * size;
    let data = |l: &str| l.contains(" closed: ") && up_down(l) == (moved + 20, moved);
    let la = a.line(data);
    let lb = b.line(data);
    // Each message a TCP read on its way in (or more), one datagram each way per read.
    for l in [&la, &lb] {
        assert!(count(l, " data datagrams up") >= n + 5, "{l}");
        assert!(count(l, " data datagrams down") >= n + 5, "{l}");
    }
    assert_eq!(
        count(&la, " data datagrams up"),
        count(&lb, " data datagrams up"),
        "A sent what B took: {la} / {lb}"
    );
    assert_eq!(
        count(&la, " data datagrams down"),
        count(&lb, " data datagrams down")
    );

    let bytes: u64 = 4 << 20;
    let b_s = bytes.to_string();
    let v = run_json(&[
        "stream",
        "--to",
        &a.addr,
        "--bytes",
        &b_s,
        "--warmup",
        "0",
        "--no-save",
    ]);
    let t = &v["points"][0]["stream"]["totals"][0];
    assert_eq!(u(&t["bytes_sent"]), bytes);
    assert_eq!(u(&t["bytes_received"]), bytes);
    let data = |l: &str| l.contains(" closed: ") && up_down(l).0 == bytes + 20;
    let (la, lb) = (a.line(data), b.line(data));
    // 4 MiB in datagrams of at most 4078 bytes of data: at least 1029 of them.
    for l in [&la, &lb] {
        assert!(count(l, " data datagrams up") > bytes / 4078, "{l}");
    }
    assert_eq!(
        count(&la, " fragments of"),
        count(&lb, " data datagrams up") - 2
    );

    // Both relays' totals agree with each other, both ways, once every channel (control and
    // data of two runs) has ended.
    a.wait_closed(4);
    b.wait_closed(4);
    let (ta, tb) = (a.interrupt(), b.interrupt());
    assert_eq!(up_down(&ta), up_down(&tb), "{ta} / {tb}");
    assert_eq!(count(&ta, " from other than the peer relay ignored"), 0);
}

#[test]
fn a_udp_leg_that_drops_datagrams_resends_them_and_loses_nothing() {
    let server = Server::start(&[]);
    let (mut a, mut b) = Relay::pair(&server.addr, 9);
    let bytes: u64 = 1 << 20;
    for reverse in [false, true] {
        let b_s = bytes.to_string();
        let mut args = vec![
            "stream",
            "--to",
            &a.addr,
            "--bytes",
            &b_s,
            "--warmup",
            "0",
            "--no-save",
        ];
        if reverse {
            args.push("--reverse");
        }
        let v = run_json(&args);
        let t = &v["points"][0]["stream"]["totals"][0];
        assert_eq!(u(&t["bytes_sent"]), bytes);
        assert_eq!(u(&t["bytes_received"]), bytes);
    }
    let v = pingpong(&a.addr, 64, 200);
    assert_eq!(u(&v["points"][0]["latency"]["transactions"]), 200);
    // Three runs, two channels each (control and data), all ended.
    a.wait_closed(6);
    b.wait_closed(6);
    let ta = a.interrupt();
    let tb = b.interrupt();
    assert!(count(&ta, " datagrams dropped by --drop-every") > 0, "{ta}");
    // A's losses of data are A's resends; its lost acks make B resend, and A drop the
    // duplicates.
    assert!(count(&ta, " resent") > 0, "{ta}");
    assert!(count(&tb, " resent") > 0, "{tb}");
    assert_eq!(up_down(&ta), up_down(&tb), "{ta} / {tb}");
}

/// A TCP listener of the test's own that counts what it accepts and echoes each connection.
fn counting_echo() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepts = std::sync::Arc::new(AtomicUsize::new(0));
    let n = std::sync::Arc::clone(&accepts);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            n.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(k) = c.read(&mut buf) {
                    if k == 0 || c.write_all(&buf[..k]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepts)
}

/// Datagrams an attacker sends for one fresh channel id: the first version's OPEN, this
/// version's OPEN with a made-up tag, and an INIT (64 bytes, the only thing answered).
/// Whether the UDP socket bound to `addr` (127.0.0.1:PORT) has nothing waiting to be read
/// (its rx_queue in /proc/net/udp; true when no such socket is listed).
fn udp_queue_empty(addr: &str) -> bool {
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.get(1) == Some(&local.as_str()))
        .all(|f| {
            f.get(4)
                .and_then(|q| q.split(':').nth(1))
                .is_some_and(|rx| u64::from_str_radix(rx, 16) == Ok(0))
        })
}

fn forged_opens(id: u64) -> [Vec<u8>; 3] {
    let mut v1 = vec![1u8, 1];
    v1.extend_from_slice(&id.to_be_bytes());
    v1.extend_from_slice(&0u64.to_be_bytes());
    let mut v2 = vec![0x82, 1, 1];
    v2.extend_from_slice(&id.to_be_bytes());
    v2.extend_from_slice(&0u64.to_be_bytes());
    v2.extend_from_slice(&id.to_le_bytes());
    v2.extend_from_slice(&(!id).to_le_bytes());
    let mut init = vec![0x82, 4, 0];
    init.extend_from_slice(&id.to_be_bytes());
    init.extend_from_slice(&(!id).to_be_bytes());
    init.resize(64, 0);
    [v1, v2, init]
}

#[test]
fn strange_and_spoofed_opens_make_no_connection_and_get_no_more_back_than_they_sent() {
    use std::io::{Read, Write};
    use std::net::UdpSocket;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let (server, accepts) = counting_echo();
    // A's port, taken first by the spoofer: B takes datagrams from that address and port only.
    let spoofer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a_port = spoofer.local_addr().unwrap().port();
    let peer = format!("127.0.0.1:{a_port}");
    let mut b = Relay::start(&[
        "--listen-udp",
        "127.0.0.1:0",
        "--udp-peer",
        &peer,
        "--forward",
        &server,
    ]);
    // A stranger on another port of the same address: ignored, nothing comes back.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    for id in 0..300u64 {
        for d in forged_opens(0x5000 + id) {
            stranger.send_to(&d, &b.addr).unwrap();
        }
    }
    // B takes them all before the spoofer begins: a burst of 900 datagrams overflows a
    // socket's default buffer when a loaded host runs B late, and the spoofer's first INIT,
    // dropped by the kernel then, was never answered.
    assert!(
        common::wait_until(common::FINISH, || udp_queue_empty(&b.addr)),
        "relay B never read the stranger's datagrams"
    );
    // The spoofer, from the peer's exact address: each id's INIT is answered with a cookie
    // (awaited, so that B's socket never overflows and every datagram is counted), then a
    // made-up ECHO follows.
    spoofer
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut sent, mut back) = (0usize, 0usize);
    let mut buf = [0u8; 2048];
    for id in 0..300u64 {
        let [v1, v2, init] = forged_opens(0x9000 + id);
        for d in [&v1, &v2, &init] {
            sent += spoofer.send_to(d, &b.addr).unwrap();
        }
        let (n, _) = spoofer.recv_from(&mut buf).expect("a cookie for the INIT");
        back += n;
        assert!(n < init.len(), "the answer is shorter than the INIT");
        let mut echo = vec![0x82, 6, 0];
        echo.extend_from_slice(&init[3..19]);
        echo.extend_from_slice(&[0xee; 32]);
        sent += spoofer.send_to(&echo, &b.addr).unwrap();
    }
    drop(spoofer);
    // A now takes its own port; a real connection crosses the leg.
    let a = Relay::start(&[
        "--listen",
        "127.0.0.1:0",
        "--forward-udp",
        &b.addr,
        "--udp-bind",
        &peer,
    ]);
    let mut c = std::net::TcpStream::connect(&a.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"through the leg").unwrap();
    let mut got = [0u8; 15];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through the leg");
    drop(c);
    // Only the real connection reached the server.
    assert_eq!(accepts.load(Ordering::SeqCst), 1);
    // The stranger got nothing back; the spoofer only cookies, fewer bytes than it sent.
    stranger.set_nonblocking(true).unwrap();
    assert!(
        stranger.recv_from(&mut buf).is_err(),
        "nothing for the stranger"
    );
    assert!(back <= sent / 2, "{back} bytes back for {sent} sent");
    let tb = b.interrupt();
    assert_eq!(count(&tb, " failed verification"), 3 * 300, "{tb}");
    assert!(count(&tb, " cookies sent") > 300, "{tb}");
    assert_eq!(count(&tb, " channels ("), 1, "{tb}");
    assert_eq!(accepts.load(Ordering::SeqCst), 1);
}

/// Relay A towards B's UDP leg with the key in `key_file`, on an ephemeral port.
fn keyed_opener(b_addr: &str, key_file: &str) -> Relay {
    Relay::start(&[
        "--listen",
        "127.0.0.1:0",
        "--forward-udp",
        b_addr,
        "--udp-bind",
        "127.0.0.1:0",
        "--psk-file",
        key_file,
    ])
}

#[test]
fn with_a_pre_shared_key_only_a_relay_holding_it_crosses_the_leg() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let (server, accepts) = counting_echo();
    let dir = std::env::temp_dir().join(format!("wb-relay-psk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str, k: &str| {
        let p = dir.join(name);
        std::fs::write(&p, k).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let (k1, k2) = (
        key("k1", "0123456789abcdef-one\n"),
        key("k2", "0123456789abcdef-two\n"),
    );
    let b = Relay::start(&[
        "--listen-udp",
        "127.0.0.1:0",
        "--udp-peer",
        "127.0.0.1",
        "--forward",
        &server,
        "--psk-file",
        &k1,
    ]);
    // Another key: the handshake fails, B says so in one line and connects nothing.
    let wrong = keyed_opener(&b.addr, &k2);
    let mut c = std::net::TcpStream::connect(&wrong.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = c.write_all(b"x");
    let mut buf = [0u8; 8];
    assert!(
        matches!(c.read(&mut buf), Ok(0) | Err(_)),
        "closed unrelayed"
    );
    b.line(|l| l.contains("has another pre-shared key than this one"));
    wrong.line(|l| l.contains("did not complete the UDP leg's handshake"));
    assert_eq!(accepts.load(Ordering::SeqCst), 0);
    // The same key: relayed.
    let a = keyed_opener(&b.addr, &k1);
    let mut c = std::net::TcpStream::connect(&a.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"keyed").unwrap();
    let mut got = [0u8; 5];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"keyed");
    assert_eq!(accepts.load(Ordering::SeqCst), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
