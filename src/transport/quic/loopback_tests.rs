//! The QUIC transport over loopback sockets: data both ways, the end of a stream, refused
//! certificates, cookies and strangers, non-blocking receives. (Named `loopback...` so that
//! the unit tier, which runs without a network, leaves it out.)

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::tls::{format_endpoint, parse_endpoint};
use super::Quic;
use crate::test_support::HUNG;
use crate::transport::{Cookie, Listener, SocketOptions, Transport, TransportConfig};

/// A listener on loopback and what a client needs to reach it.
fn serve() -> (Box<dyn Listener>, SocketAddr, String, Cookie) {
    let quic = Quic::new(&TransportConfig::default()).unwrap();
    let listener = quic
        .listen(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        )
        .unwrap();
    let endpoint = listener.endpoint();
    // connect() takes the control address: only its IP is used.
    let control = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
    (listener, control, endpoint, Cookie::random().unwrap())
}

#[test]
fn bytes_flow_both_ways_and_end_cleanly() {
    // Every timeout here is a hang guard: a handshake and a few bytes on loopback.
    let (mut listener, control, endpoint, cookie) = serve();
    let server = std::thread::spawn(move || {
        let mut conn = listener
            .accept(&cookie, HUNG)
            .unwrap()
            .expect("a connection");
        conn.set_read_timeout(Some(HUNG)).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            match conn.recv(&mut buf).unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        conn.send(&got[..3]).unwrap();
        conn.shutdown_write().unwrap();
        got
    });
    let quic = Quic::new(&TransportConfig::default()).unwrap();
    let mut conn = quic
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
        .unwrap();
    conn.set_read_timeout(Some(HUNG)).unwrap();
    let msg = b"hello over quic";
    let mut off = 0;
    while off < msg.len() {
        off += conn.send(&msg[off..]).unwrap();
    }
    conn.shutdown_write().unwrap();
    let mut back = [0u8; 8];
    let n = conn.recv(&mut back).unwrap();
    assert_eq!(&back[..n], b"hel");
    assert_eq!(conn.recv(&mut back).unwrap(), 0, "end of stream");
    assert_eq!(conn.recv(&mut back).unwrap(), 0, "end of stream stays");
    assert_eq!(server.join().unwrap(), msg);
    let e = conn.effective_options(&SocketOptions::default());
    assert!(e.rcvbuf_bytes.is_some_and(|b| b > 0));
}

#[test]
fn a_certificate_other_than_the_announced_one_is_refused() {
    let (_listener, control, endpoint, cookie) = serve();
    let (port, _) = parse_endpoint(&endpoint).unwrap();
    let forged = format_endpoint(port, &[0x11; 32]);
    // An hour's handshake timeout: a refusal that waited for a timeout would not come within
    // the minute the test waits for it, so one that comes is the fingerprint check's.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let got = quic.connect(
            control,
            &forged,
            &SocketOptions::default(),
            &cookie,
            Duration::from_secs(3600),
        );
        let _ = tx.send(got.map(drop).map_err(|e| format!("{e:#}")));
    });
    let err = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) => panic!("a forged fingerprint must not connect"),
        Ok(Err(e)) => e,
        Err(_) => panic!("the forged fingerprint was not refused: the handshake waited"),
    };
    assert!(err.starts_with("QUIC handshake with 127.0.0.1:"), "{err}");
    assert!(err.contains("does not match"), "{err}");
    assert!(err.contains(&"11".repeat(32)), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn a_wrong_cookie_is_not_admitted() {
    // The listener checks a connection's cookie in its accept, so it accepts (and admits
    // nothing) until the client has its answer: a single accept of 1.5 s, which a loaded host
    // could spend before the client's handshake reached it, left the client waiting for an
    // answer that never came. The client's own timeout is a hang guard: a refusal that waited
    // for it would say so, not "refused the test cookie".
    let (mut listener, control, endpoint, cookie) = serve();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = std::thread::spawn({
        let answered = answered.clone();
        move || {
            let mut admitted = 0;
            while !answered.load(std::sync::atomic::Ordering::SeqCst) {
                if listener
                    .accept(&cookie, Duration::from_millis(100))
                    .unwrap()
                    .is_some()
                {
                    admitted += 1;
                }
            }
            admitted
        }
    });
    let quic = Quic::new(&TransportConfig::default()).unwrap();
    let got = quic.connect(
        control,
        &endpoint,
        &SocketOptions::default(),
        &Cookie([0; 16]),
        HUNG,
    );
    answered.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = match got {
        Ok(_) => panic!("a wrong cookie must not be admitted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("refused the test cookie"), "{err}");
    assert_eq!(server.join().unwrap(), 0, "the listener admitted nothing");
}

/// Reflection: a QUIC connection from another address than the control peer gets no
/// answer at all (not even the handshake's), and the listener admits nothing.
#[test]
fn a_connection_from_another_address_than_the_control_peer_gets_no_answer() {
    let quic = Quic::new(&TransportConfig::default()).unwrap();
    let mut listener = quic
        .listen(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        )
        .unwrap();
    let endpoint = listener.endpoint();
    let cookie = Cookie::random().unwrap();
    let server = std::thread::spawn(move || {
        listener
            .accept(&cookie, Duration::from_millis(1500))
            .unwrap()
            .is_none()
    });
    let control = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
    let got = quic.connect(
        control,
        &endpoint,
        &SocketOptions::default(),
        &cookie,
        Duration::from_secs(2),
    );
    assert!(got.is_err(), "a stranger's connection was answered");
    assert!(server.join().unwrap(), "the listener admitted a stranger");
}

/// A QUIC Initial-sized packet of a version nobody speaks (0x?a?a?a?a is reserved to force
/// version negotiation, RFC 9000 section 15): an endpoint that sees it answers with a Version
/// Negotiation packet to the source address, whoever it is.
fn unknown_version_probe() -> Vec<u8> {
    let mut p = vec![0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8];
    p.extend_from_slice(&[7; 8]); // destination connection ID
    p.push(8);
    p.extend_from_slice(&[9; 8]); // source connection ID
    p.resize(1200, 0);
    p
}

/// 200 packets of an unknown version from 127.0.0.3 once got 92 Version
/// Negotiation packets back: quinn answers them itself, before the listener's check of the
/// peer. Now the data socket's kernel filter drops every datagram that is not from the control
/// peer, so a stranger gets nothing; the same probe from the control peer is still answered
/// (which shows the probe is one quinn answers).
#[test]
fn a_stranger_gets_not_even_a_version_negotiation() {
    let (_listener, _control, endpoint, _cookie) = serve();
    let (port, _) = parse_endpoint(&endpoint).unwrap();
    let to = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let probe = unknown_version_probe();
    let stranger = std::net::UdpSocket::bind("127.0.0.3:0").unwrap();
    for _ in 0..200 {
        stranger.send_to(&probe, to).unwrap();
    }
    // The peer's probes go after the stranger's: answers go out in the order the packets were
    // read, so once the peer has one, any answer to the stranger would be queued already.
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(60);
    let answered = loop {
        peer.send_to(&probe, to).unwrap();
        if let Ok((n, _)) = peer.recv_from(&mut buf) {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "the control peer's probe was never answered"
        );
    };
    // A Version Negotiation packet: long header, version 0.
    assert!(answered > 5 && buf[0] & 0x80 != 0 && buf[1..5] == [0, 0, 0, 0]);
    stranger.set_nonblocking(true).unwrap();
    let mut to_stranger = 0;
    while stranger.recv_from(&mut buf).is_ok() {
        to_stranger += 1;
    }
    assert_eq!(to_stranger, 0, "packets were sent to a stranger");
}

#[test]
fn nonblocking_receive_reports_would_block_then_data() {
    // The server sends only once the client has been told WouldBlock: an order of events,
    // not a sleep the client must outpace. A minute without progress is a hang.
    let hung = Duration::from_secs(60);
    let (mut listener, control, endpoint, cookie) = serve();
    let (blocked, client_blocked) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let mut conn = listener
            .accept(&cookie, hung)
            .unwrap()
            .expect("a connection");
        client_blocked
            .recv_timeout(hung)
            .expect("the client was never told WouldBlock");
        conn.send(b"x").unwrap();
        conn.shutdown_write().unwrap();
    });
    let quic = Quic::new(&TransportConfig::default()).unwrap();
    let mut conn = quic
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, hung)
        .unwrap();
    conn.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4];
    let mut would_block = 0;
    let deadline = Instant::now() + hung;
    let n = loop {
        match conn.recv(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if would_block == 0 {
                    blocked.send(()).unwrap();
                }
                would_block += 1;
            }
            r => break r.unwrap(),
        }
        assert!(Instant::now() < deadline, "no data while spinning");
    };
    assert_eq!(&buf[..n], b"x");
    assert!(would_block > 0);
    let eof = loop {
        match conn.recv(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => break r.unwrap(),
        }
        assert!(Instant::now() < deadline, "no end of stream while spinning");
    };
    assert_eq!(eof, 0);
    server.join().unwrap();
}
