//! The grpc transport over loopback sockets: pipelined calls answered in order, each
//! encoding's bytes counted exactly on both ends, client streams to their end, refused
//! cookies, and the serialisation counts. (Named `loopback...` so that the unit tier, which
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
}

/// A listener on loopback and what a client needs to reach it.
fn serve() -> (Box<dyn Listener>, SocketAddr, String, Cookie) {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let listener = grpc(Encoding::Bytes).listen(lo, lo).unwrap();
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
