//! When a stream turns Nagle's algorithm off by itself (`automatic_nodelay`), and when the
//! choice is the user's: decided from the request alone, with the host's default congestion
//! control given, so that no test depends on the kernel it runs on.
use super::axes::default_size;
use super::*;
use crate::transport::TransportKind;

fn stream(transport: TransportKind) -> Request {
    let mut r = Request::new(PatternKind::Stream, transport);
    r.output.save = false;
    r
}

fn caps(t: TransportKind) -> Capabilities {
    t.capabilities().unwrap()
}

fn cc(name: &str) -> Option<CcName> {
    CcName::new(name)
}

/// The decision for `r` with 128 KiB writes unless it names sizes, its own --cc list, and
/// `default` as this host's default algorithm.
fn auto(r: &Request, default: &str) -> bool {
    let sizes = r
        .sizes
        .size
        .clone()
        .unwrap_or_else(|| vec![r.sizes.write_size.unwrap_or(default_size(r.pattern, true))]);
    let ccs: Vec<Option<CcName>> = if r.socket.cc.is_empty() {
        vec![None]
    } else {
        r.socket.cc.iter().map(|c| cc(c)).collect()
    };
    automatic_nodelay(r, &caps(r.transport), &sizes, &ccs, Some(default))
}

#[test]
fn a_bulk_tcp_stream_that_paces_itself_turns_nagle_off() {
    assert!(auto(&stream(TransportKind::Tcp), "bbr"));
    let mut r = stream(TransportKind::Tcp);
    r.sizes.write_size = Some(64 * 1024);
    assert!(auto(&r, "bbr"));
    // Asked for by name, whatever the host's default.
    let mut r = stream(TransportKind::Tcp);
    r.socket.cc = vec!["bbr".into()];
    assert!(auto(&r, "cubic"));
    // A server started here sends with this host's default too.
    let mut r = stream(TransportKind::Tcp);
    r.traffic.direction = Direction::Reverse;
    assert!(auto(&r, "bbr"));
}

#[test]
fn nagle_stays_where_the_sender_does_not_pace_itself_or_is_not_known() {
    // Under cubic Nagle did not cost, and TCP_NODELAY did.
    assert!(!auto(&stream(TransportKind::Tcp), "cubic"));
    let mut r = stream(TransportKind::Tcp);
    r.socket.cc = vec!["cubic".into()];
    assert!(!auto(&r, "bbr"));
    // A sweep with one algorithm that does not pace keeps Nagle for every point.
    r.socket.cc = vec!["bbr".into(), "cubic".into()];
    assert!(!auto(&r, "bbr"));
    // A remote server sends with its own default, which this host does not know.
    for direction in [Direction::Reverse, Direction::Bidir] {
        let mut r = stream(TransportKind::Tcp);
        r.server.to = Some("192.0.2.1:5201".into());
        r.traffic.direction = direction;
        assert!(!auto(&r, "bbr"));
        r.socket.cc = vec!["bbr".into()];
        assert!(auto(&r, "cubic"), "named, it is known");
    }
}

#[test]
fn nagle_stays_where_it_is_the_study() {
    // Asked for.
    let mut r = stream(TransportKind::Tcp);
    r.socket.nagle = true;
    assert!(!auto(&r, "bbr"));
    // Writes below one full segment of any path, or a sweep that has one.
    let mut r = stream(TransportKind::Tcp);
    r.sizes.write_size = Some(64 * 1024 - 1);
    assert!(!auto(&r, "bbr"));
    let mut r = stream(TransportKind::Tcp);
    r.sizes.size = Some(vec![1024, 128 * 1024]);
    assert!(!auto(&r, "bbr"));
    // A socket buffer fixed anywhere in the run, on either end: the stalls of the studies in REFERENCES.md.
    for set in [
        |r: &mut Request| r.buffers.sndbuf = Some(vec![0, 16 * 1024]),
        |r: &mut Request| r.buffers.window = Some(vec![1 << 20]),
        |r: &mut Request| r.buffers.server_rcvbuf = Some(vec![64 * 1024]),
    ] {
        let mut r = stream(TransportKind::Tcp);
        set(&mut r);
        assert!(!auto(&r, "bbr"));
    }
    // Kernel buffers named as such (0) are still the kernel's.
    let mut r = stream(TransportKind::Tcp);
    r.buffers.sndbuf = Some(vec![0]);
    assert!(auto(&r, "bbr"));
    // Exchanges keep the kernel's default: Nagle's effect on messages is what they measure.
    let mut r = Request::new(PatternKind::Pingpong, TransportKind::Tcp);
    r.sizes.size = Some(vec![128 * 1024]);
    assert!(!auto(&r, "bbr"));
    // MPTCP's subflows are not plain TCP.
    assert!(!auto(&stream(TransportKind::Mptcp), "bbr"));
    // TCP_NODELAY asked for is not automatic.
    let mut r = stream(TransportKind::Tcp);
    r.socket.nodelay = true;
    assert!(!auto(&r, "bbr"));
}

#[test]
fn the_plan_carries_its_decision_to_every_point_and_both_ends() {
    // On a host that defaults to BBR and on one that defaults to cubic, whatever this one
    // uses: the rule decides both ways, and both decisions reach every point's two ends.
    for (default, nagle, off) in [
        ("bbr", false, true),
        ("bbr", true, false),
        ("cubic", false, false),
        ("cubic", true, false),
    ] {
        let mut r = stream(TransportKind::Tcp);
        r.socket.nagle = nagle;
        r.sizes.size = Some(vec![64 * 1024, 128 * 1024]);
        let plan = build_on(&r, || Some(default.to_owned())).unwrap();
        let what = format!("default {default}, --nagle {nagle}");
        assert_eq!(plan.nodelay_auto, off, "{what}");
        assert_eq!(plan.points.len(), 2, "{what}");
        for p in &plan.points {
            assert_eq!(p.client_socket.nodelay, off, "{what}");
            assert_eq!(p.spec.server_socket.nodelay, off, "{what}");
        }
    }
}

#[test]
fn nagle_is_refused_where_there_is_no_tcp() {
    let mut r = stream(TransportKind::Udp);
    r.socket.nagle = true;
    let e = build(&r).err().unwrap().to_string();
    assert!(e.contains("--nagle applies to TCP only"), "{e}");
}
