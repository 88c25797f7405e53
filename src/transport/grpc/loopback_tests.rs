//! The grpc transport over loopback sockets: pipelined calls answered in order, each
//! encoding's bytes counted exactly on both ends, client streams to their end, refused
//! cookies, the serialisation counts, and TLS pinned to the announced certificate. (Named `loopback...` so that the unit tier, which
//! runs without a network, leaves it out.) Counts only: no time is asserted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::Grpc;
use crate::model::vocab::Encoding;
use crate::test_support::HUNG;
use crate::transport::{Cookie, Listener, Shape, SocketOptions, Transport, TransportConfig};

fn grpc(encoding: Encoding) -> Grpc {
    Grpc::new(&TransportConfig {
        encoding,
        ..TransportConfig::default()
    })
    .unwrap()
}

/// grpc with `--tls` (the self-signed certificate on the server).
fn grpc_tls() -> Grpc {
    Grpc::new(&TransportConfig {
        tls: true,
        ..TransportConfig::default()
    })
    .unwrap()
}

/// A listener on loopback and what a client needs to reach it.
fn serve() -> (Box<dyn Listener>, SocketAddr, String, Cookie) {
    serve_with(&grpc(Encoding::Bytes))
}

fn serve_with(grpc: &Grpc) -> (Box<dyn Listener>, SocketAddr, String, Cookie) {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let listener = grpc.listen(lo, lo).unwrap();
    let endpoint = listener.endpoint();
    (
        listener,
        SocketAddr::from((Ipv4Addr::LOCALHOST, 9)),
        endpoint,
        Cookie::random().unwrap(),
    )
}

#[test]
fn pipelined_calls_come_back_in_order_with_their_sizes_in_every_encoding() {
    for encoding in [Encoding::Bytes, Encoding::Doubles, Encoding::Records] {
        let (mut listener, control, endpoint, cookie) = serve();
        const CALLS: usize = 20;
        const REQUEST: usize = 100; // 12 doubles and 4 bytes; 3 records and 4 bytes
        let server = std::thread::spawn(move || {
            let mut conn = listener
                .accept(&cookie, HUNG)
                .unwrap()
                .expect("a connection");
            conn.set_read_timeout(Some(HUNG)).unwrap();
            let mut buf = vec![0u8; 65_536];
            let mut got = 0;
            let mut calls = 0;
            loop {
                match conn.recv(&mut buf).unwrap() {
                    0 => break,
                    n => {
                        got += n;
                        calls += 1;
                        // Answer call i with i + 1 bytes.
                        conn.send(&vec![7u8; calls]).unwrap();
                    }
                }
            }
            (calls, got, conn.serialisation(false).unwrap())
        });
        let mut conn = grpc(encoding)
            .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
            .unwrap();
        conn.set_read_timeout(Some(HUNG)).unwrap();
        conn.expect(Shape::Exchange {
            response_size: Some(1),
        });
        let req = super::wire::filler(REQUEST);
        for _ in 0..CALLS {
            assert_eq!(conn.send(&req).unwrap(), REQUEST);
        }
        let mut buf = vec![0u8; 65_536];
        for i in 0..CALLS {
            assert_eq!(conn.recv(&mut buf).unwrap(), i + 1, "{encoding} call {i}");
        }
        let mine = conn.serialisation(false).unwrap();
        drop(conn);
        let (calls, got, theirs) = server.join().unwrap();
        assert_eq!((calls, got), (CALLS, CALLS * REQUEST), "{encoding}");
        // The hello is not counted: one encode and one decode per call on each end.
        assert_eq!(mine.encoding, encoding);
        assert_eq!(mine.encode.unwrap().count, CALLS as u64, "{encoding}");
        assert_eq!(mine.decode.unwrap().count, CALLS as u64, "{encoding}");
        assert_eq!(theirs.encoding, encoding);
        assert_eq!(
            theirs.decode.unwrap().count,
            CALLS as u64,
            "{encoding}: the hello is not counted"
        );
        assert_eq!(theirs.encode.unwrap().count, CALLS as u64, "{encoding}");
    }
}

#[test]
fn an_upload_delivers_every_byte_then_its_end() {
    let (mut listener, control, endpoint, cookie) = serve();
    const MESSAGES: usize = 300;
    const SIZE: usize = 10_007; // no whole number of doubles
    let server = std::thread::spawn(move || {
        let mut conn = listener
            .accept(&cookie, HUNG)
            .unwrap()
            .expect("a connection");
        conn.set_read_timeout(Some(HUNG)).unwrap();
        // Reads smaller than a message: the rest of it comes with the next read.
        let mut buf = vec![0u8; 4096];
        let mut got = 0;
        loop {
            match conn.recv(&mut buf).unwrap() {
                0 => break,
                n => got += n,
            }
        }
        got
    });
    let mut conn = grpc(Encoding::Doubles)
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
        .unwrap();
    conn.set_write_timeout(Some(HUNG)).unwrap();
    conn.expect(Shape::Send);
    let msg = super::wire::filler(SIZE);
    for _ in 0..MESSAGES {
        assert_eq!(conn.send(&msg).unwrap(), SIZE);
    }
    conn.shutdown_write().unwrap();
    assert_eq!(server.join().unwrap(), MESSAGES * SIZE);
    assert_eq!(
        conn.serialisation(false).unwrap().encode.unwrap().count,
        MESSAGES as u64
    );
}

#[test]
fn a_download_brings_every_message_the_server_sends() {
    let (mut listener, control, endpoint, cookie) = serve();
    const MESSAGES: usize = 50;
    let server = std::thread::spawn(move || {
        let mut conn = listener
            .accept(&cookie, HUNG)
            .unwrap()
            .expect("a connection");
        conn.set_write_timeout(Some(HUNG)).unwrap();
        for i in 0..MESSAGES {
            conn.send(&vec![1u8; 1000 + i]).unwrap();
        }
        conn.shutdown_write().unwrap();
        // Keep the connection until the client has read everything.
        std::thread::sleep(std::time::Duration::from_millis(50));
        conn
    });
    let mut conn = grpc(Encoding::Records)
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
        .unwrap();
    conn.set_read_timeout(Some(HUNG)).unwrap();
    conn.expect(Shape::Receive);
    let mut buf = vec![0u8; 65_536];
    let mut sizes = Vec::new();
    loop {
        match conn.recv(&mut buf).unwrap() {
            0 => break,
            n => sizes.push(n),
        }
    }
    let _keep = server.join().unwrap();
    assert_eq!(sizes, (0..MESSAGES).map(|i| 1000 + i).collect::<Vec<_>>());
}

#[test]
fn a_wrong_cookie_is_not_admitted_and_the_right_one_still_is() {
    let (mut listener, control, endpoint, cookie) = serve();
    let server = std::thread::spawn(move || {
        let conn = listener.accept(&cookie, HUNG).unwrap();
        conn.is_some()
    });
    let wrong = Cookie::random().unwrap();
    let err = grpc(Encoding::Bytes)
        .connect(control, &endpoint, &SocketOptions::default(), &wrong, HUNG)
        .err()
        .expect("refused");
    assert!(format!("{err:#}").contains("PermissionDenied"), "{err:#}");
    let _ok = grpc(Encoding::Bytes)
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
        .unwrap();
    assert!(server.join().unwrap());
}

#[test]
fn tls_pinned_to_the_announced_certificate_carries_pipelined_calls() {
    let (mut listener, control, endpoint, cookie) = serve_with(&grpc_tls());
    let fingerprint = crate::transport::tls::sha256(
        crate::transport::tls::self_signed().unwrap().chain[0].as_ref(),
    );
    assert!(
        endpoint.ends_with(&format!(
            "/sha256={}",
            crate::transport::tls::hex(&fingerprint)
        )),
        "{endpoint}"
    );
    const CALLS: usize = 50;
    const REQUEST: usize = 1024;
    let server = std::thread::spawn(move || {
        let mut conn = listener
            .accept(&cookie, HUNG)
            .unwrap()
            .expect("a connection");
        conn.set_read_timeout(Some(HUNG)).unwrap();
        let mut buf = vec![0u8; 65_536];
        let (mut calls, mut got) = (0, 0);
        loop {
            match conn.recv(&mut buf).unwrap() {
                0 => break,
                n => {
                    got += n;
                    calls += 1;
                    conn.send(&vec![3u8; calls]).unwrap();
                }
            }
        }
        (calls, got)
    });
    let mut conn = grpc_tls()
        .connect(control, &endpoint, &SocketOptions::default(), &cookie, HUNG)
        .unwrap();
    conn.set_read_timeout(Some(HUNG)).unwrap();
    conn.expect(Shape::Exchange {
        response_size: Some(1),
    });
    let req = super::wire::filler(REQUEST);
    // All the calls outstanding at once on the one TLS connection.
    for _ in 0..CALLS {
        assert_eq!(conn.send(&req).unwrap(), REQUEST);
    }
    let mut buf = vec![0u8; 65_536];
    for i in 0..CALLS {
        assert_eq!(conn.recv(&mut buf).unwrap(), i + 1, "call {i}");
    }
    drop(conn);
    assert_eq!(server.join().unwrap(), (CALLS, CALLS * REQUEST));
}

#[test]
fn tls_client_pinned_to_a_wrong_fingerprint_is_refused() {
    let (mut listener, control, endpoint, cookie) = serve_with(&grpc_tls());
    let (port, _) = crate::transport::tls::endpoint::parse_endpoint("grpc", &endpoint).unwrap();
    let forged = crate::transport::tls::endpoint::format_endpoint(port, &[0x11; 32]);
    let err = grpc_tls()
        .connect(control, &forged, &SocketOptions::default(), &cookie, HUNG)
        .err()
        .expect("refused");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("does not match the one it announced on the control connection"),
        "{msg}"
    );
    assert!(msg.contains(&"11".repeat(32)), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    // The refused client never reached the flow.
    assert!(listener
        .accept(&cookie, std::time::Duration::from_millis(100))
        .unwrap()
        .is_none());
}

#[test]
fn tls_and_plain_ends_refuse_each_other_in_one_line() {
    let (_tls_listener, control, tls_endpoint, cookie) = serve_with(&grpc_tls());
    let err = grpc(Encoding::Bytes)
        .connect(
            control,
            &tls_endpoint,
            &SocketOptions::default(),
            &cookie,
            HUNG,
        )
        .err()
        .expect("refused");
    assert!(
        format!("{err:#}").contains("serves TLS, which this client did not ask for"),
        "{err:#}"
    );
    let (_plain_listener, control, plain_endpoint, cookie) = serve();
    let err = grpc_tls()
        .connect(
            control,
            &plain_endpoint,
            &SocketOptions::default(),
            &cookie,
            HUNG,
        )
        .err()
        .expect("refused");
    assert!(
        format!("{err:#}").contains("announced no certificate"),
        "{err:#}"
    );
}
