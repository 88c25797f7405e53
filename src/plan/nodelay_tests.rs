//! When a stream turns Nagle's algorithm off by itself (`automatic_nodelay`), and when the
//! choice is the user's: planned without a socket, from the request alone.
use super::*;
use crate::transport::TransportKind;

fn stream(transport: TransportKind) -> Request {
    let mut r = Request::new(PatternKind::Stream, transport);
    r.output.save = false;
    r
}

fn nodelay(r: &Request) -> (bool, bool) {
    let plan = build(r).unwrap();
    let each = plan.points.iter().map(|p| p.client_socket.nodelay);
    let server = plan.points.iter().map(|p| p.spec.server_socket.nodelay);
    let all: Vec<bool> = each.chain(server).collect();
    assert!(
        all.windows(2).all(|w| w[0] == w[1]),
        "every point and both ends alike: {all:?}"
    );
    (all[0], plan.nodelay_auto)
}

#[test]
fn a_bulk_tcp_stream_turns_nagle_off_and_says_so() {
    assert_eq!(nodelay(&stream(TransportKind::Tcp)), (true, true));
    let mut r = stream(TransportKind::Tcp);
    r.sizes.write_size = Some(64 * 1024);
    assert_eq!(nodelay(&r), (true, true));
}

#[test]
fn nagle_stays_where_it_is_the_study() {
    // Asked for.
    let mut r = stream(TransportKind::Tcp);
    r.socket.nagle = true;
    assert_eq!(nodelay(&r), (false, false));
    // Writes below one full segment of any path, or a sweep that has one.
    let mut r = stream(TransportKind::Tcp);
    r.sizes.write_size = Some(64 * 1024 - 1);
    assert_eq!(nodelay(&r), (false, false));
    let mut r = stream(TransportKind::Tcp);
    r.sizes.size = Some(vec![1024, 128 * 1024]);
    assert_eq!(nodelay(&r), (false, false));
    // A socket buffer fixed anywhere in the run, on either end: the seeds' stalls.
    for set in [
        |r: &mut Request| r.buffers.sndbuf = Some(vec![0, 16 * 1024]),
        |r: &mut Request| r.buffers.window = Some(vec![1 << 20]),
        |r: &mut Request| r.buffers.server_rcvbuf = Some(vec![64 * 1024]),
    ] {
        let mut r = stream(TransportKind::Tcp);
        set(&mut r);
        assert_eq!(nodelay(&r), (false, false));
    }
    // Kernel buffers named as such (0) are still the kernel's.
    let mut r = stream(TransportKind::Tcp);
    r.buffers.sndbuf = Some(vec![0]);
    assert_eq!(nodelay(&r), (true, true));
    // Exchanges keep the kernel's default: Nagle's effect on messages is what they measure.
    let mut r = Request::new(PatternKind::Pingpong, TransportKind::Tcp);
    r.sizes.size = Some(vec![128 * 1024]);
    assert_eq!(nodelay(&r), (false, false));
    // MPTCP's subflows are not plain TCP.
    assert!(!nodelay(&stream(TransportKind::Mptcp)).1);
}

#[test]
fn nodelay_asked_for_is_not_automatic() {
    let mut r = stream(TransportKind::Tcp);
    r.socket.nodelay = true;
    assert_eq!(nodelay(&r), (true, false));
}

#[test]
fn nagle_is_refused_where_there_is_no_tcp() {
    let mut r = stream(TransportKind::Udp);
    r.socket.nagle = true;
    let e = build(&r).err().unwrap().to_string();
    assert!(e.contains("--nagle applies to TCP only"), "{e}");
}
