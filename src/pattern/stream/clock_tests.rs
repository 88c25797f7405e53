//! How the stream keeps its clocks: a paced warm-up on the timed phase's schedule, the
//! receiver's clock started by sequence number, and both sides keeping time while the data
//! path is stalled. The logic runs over `transport::mem`, an in-memory link where no kernel is
//! needed; the stalls are real loopback TCP sockets.
//!
//! None of these tests asserts how fast anything went or how long anything took. Time enters
//! only where a loaded host cannot break it: a sleeping thread only ever makes a send later,
//! never earlier; a silence lasts until the code under test has reported it (its live interval
//! events), not for a fixed sleep; and what must end is waited for for a minute ([`HUNG`]), past
//! which it is hung.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{
    run_receiver, run_sender, EndSignal, IntervalEvent, Pace, RecvPlan, SendPlan, StreamStats,
};
use crate::pattern::{DataChannel, FastPaths, RcvLowat, StopAt};
use crate::transport::mem::{self, MemConnection, BYTES, DATAGRAMS};
use crate::transport::{self, Connection, Cookie, SocketOptions, TransportConfig};

/// How long a test waits for something that must happen before it calls the code hung: far
/// beyond anything a loaded host takes, so that only a real hang reaches it.
const HUNG: Duration = Duration::from_secs(60);

/// A connected in-memory pair with `caps`: the end for the code under test as a channel, and
/// the far end for the test.
fn mem_channel(caps: transport::Capabilities) -> (DataChannel, MemConnection) {
    let (near, far) = mem::pair(caps, mem::perfect(), mem::perfect());
    let ch = DataChannel::new(Box::new(near), caps, false, HUNG).unwrap();
    (ch, far)
}

/// A datagram channel that nothing ever arrives on (for the parts of the stream that need a
/// channel only to read TCP_INFO from, which it has none of).
pub(super) fn idle_channel() -> DataChannel {
    mem_channel(DATAGRAMS).0
}

/// The header of every datagram that reached `far` so far: (sequence number, send time in
/// ns since the sender's epoch).
fn headers(far: &mut MemConnection) -> Vec<(u64, f64)> {
    far.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    loop {
        match far.recv(&mut buf) {
            Ok(n) if n >= 16 => out.push((
                u64::from_le_bytes(buf[..8].try_into().unwrap()),
                u64::from_le_bytes(buf[8..16].try_into().unwrap()) as f64,
            )),
            Ok(n) => panic!("a datagram of {n} bytes, shorter than its header"),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Waits (at most [`HUNG`]) until `live` has brought `n` interval reports of 0 bytes; false
/// when they did not come (the sender of the reports ended, or hung).
fn empty_reports(live: &mpsc::Receiver<IntervalEvent>, n: usize) -> bool {
    let until = Instant::now() + HUNG;
    let mut seen = 0;
    while seen < n {
        let left = until.saturating_duration_since(Instant::now());
        match live.recv_timeout(left) {
            Ok(ev) if ev.interval.bytes == 0 => seen += 1,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

fn send_plan(
    write_size: usize,
    stop: StopAt,
    warmup: u64,
    pace: Option<Pace>,
) -> SendPlan<'static> {
    SendPlan {
        write_size,
        stop,
        warmup,
        pace,
        interval: None,
        fast: FastPaths::default(),
        abort: None,
        align_intervals: false,
    }
}

fn recv_plan(warmup_bytes: u64, warmup_datagrams: u64, interval: Duration) -> RecvPlan {
    RecvPlan {
        read_size: 65_536,
        warmup_bytes,
        warmup_datagrams,
        interval: Some(interval),
        expected: None,
        fast: FastPaths {
            rcvlowat: RcvLowat::Off,
            ..FastPaths::default()
        },
        buffers_fixed: false,
        align_intervals: false,
    }
}

fn iterations(n: u64) -> StopAt {
    StopAt {
        iterations: Some(n),
        ..StopAt::default()
    }
}

/// A datagram of `len` bytes numbered `seq`.
fn datagram(seq: u64, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d[..8].copy_from_slice(&seq.to_le_bytes());
    d
}

const MS: f64 = 1e6;

#[test]
fn a_paced_datagram_warm_up_leaves_on_the_timed_phase_s_schedule() {
    // One datagram every 2 ms, 5 of warm-up and 5 timed: datagram j may leave 2j ms after the
    // warm-up began, and never earlier, warm-up or not. Each datagram carries its send time
    // since the sender's epoch, taken before the warm-up began, so `sent_ns >= 2j ms` holds
    // however late a loaded host lets them out. Back to back (the old warm-up), datagrams 1-5
    // would leave within microseconds.
    let pace = Pace {
        interval_ns: 2.0 * MS,
        burst: 1,
    };
    let (mut ch, mut far) = mem_channel(DATAGRAMS);
    let stats = run_sender(
        &mut ch,
        &send_plan(100, iterations(5), 5, Some(pace)),
        0,
        None,
    )
    .unwrap();
    assert_eq!(stats.messages_timed, 5);
    let sent = headers(&mut far);
    assert_eq!(sent.len(), 10);
    for (j, &(seq, sent_ns)) in sent.iter().enumerate() {
        assert_eq!(seq, j as u64);
        assert!(
            sent_ns >= pace.due_ns(j as u64),
            "datagram {j} left at {sent_ns} ns, before its slot at {} ns",
            pace.due_ns(j as u64)
        );
    }
}

#[test]
fn a_bursty_warm_up_ends_its_step_before_the_timed_phase_begins() {
    // Bursts of 4 every 4 ms (1 ms per datagram), 6 of warm-up: the warm-up leaves at 0 ms
    // (4) and 4 ms (2); its second step is the warm-up's to the end, so the timed phase
    // begins at 8 ms and its bursts leave at 8 ms and 12 ms. No step lets out more than 4.
    let pace = Pace {
        interval_ns: MS,
        burst: 4,
    };
    let (mut ch, mut far) = mem_channel(DATAGRAMS);
    run_sender(
        &mut ch,
        &send_plan(100, iterations(8), 6, Some(pace)),
        0,
        None,
    )
    .unwrap();
    let sent = headers(&mut far);
    let due_ms = [0, 0, 0, 0, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12];
    assert_eq!(sent.len(), due_ms.len());
    for (j, &(_, sent_ns)) in sent.iter().enumerate() {
        assert!(
            sent_ns >= due_ms[j] as f64 * MS,
            "datagram {j} left at {sent_ns} ns, before {} ms",
            due_ms[j]
        );
    }
}

#[test]
fn a_paced_byte_stream_warm_up_is_paced_too() {
    // The same schedule for a byte stream (TCP): write j no earlier than 2j ms after the
    // sender started. Bytes carry no time stamp, so the in-memory link notes when each write
    // was sent, against an instant taken before the sender started.
    let pace = Pace {
        interval_ns: 2.0 * MS,
        burst: 1,
    };
    let (mut ch, far) = mem_channel(BYTES);
    let before = Instant::now();
    let stats = run_sender(
        &mut ch,
        &send_plan(1000, iterations(4), 4, Some(pace)),
        0,
        None,
    )
    .unwrap();
    assert_eq!((stats.messages_timed, stats.bytes_timed), (4, 4000));
    let sent = far.peer_sends();
    assert_eq!(sent.len(), 8);
    for (j, at) in sent.iter().enumerate() {
        let since = at.duration_since(before).as_nanos() as f64;
        assert!(since >= pace.due_ns(j as u64), "write {j} at {since} ns");
    }
}

#[test]
fn the_receiver_s_clock_starts_at_the_first_timed_sequence_number() {
    // Three warm-up datagrams (0-2). Number 3 arrives before the late warm-up number 2: 3
    // starts the clock and is not counted (it arrived before the clock started), 2 is never
    // timed, 4 and 5 are. All queued before the receiver starts: no timing involved.
    let (mut ch, mut far) = mem_channel(DATAGRAMS);
    for seq in [0, 1, 3, 2, 4, 5] {
        far.send(&datagram(seq, 100)).unwrap();
    }
    let end = EndSignal::default();
    end.sent_datagrams.store(3, Ordering::SeqCst);
    end.done.store(true, Ordering::SeqCst);
    let plan = recv_plan(0, 3, Duration::from_secs(1));
    let s = run_receiver(&mut ch, &plan, &end, HUNG, 0, None).unwrap();
    assert_eq!(
        (s.bytes_total, s.bytes_timed, s.messages_timed),
        (600, 200, 2)
    );
    let loss = s.loss.unwrap();
    assert_eq!((loss.sent, loss.received, loss.lost), (3, 3, 0));
    drop(far);
}

#[test]
fn the_datagram_receiver_s_phase_runs_from_the_first_to_the_last_arrival_stamp() {
    // Two warm-up datagrams, then eleven timed ones that arrived 3 ms apart, 2 s before the
    // receiver reads any of them (a reader held off its CPU while its buffer filled). The
    // phase is the 30 ms between the first timed arrival and the last, exactly: both ends are
    // the kernel's stamps, mapped to the receiver's clock by one offset. Timed at the reads,
    // as the raw receiver was, it lasted the few microseconds the reads took.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        - Duration::from_secs(2);
    let ms = Duration::from_millis(1);
    let (mut ch, mut far) = mem_channel(DATAGRAMS);
    far.send_stamped(&datagram(0, 100), wall).unwrap();
    far.send_stamped(&datagram(1, 100), wall + ms).unwrap();
    for k in 0..11u32 {
        let stamp = wall + 5 * ms + 3 * k * ms;
        far.send_stamped(&datagram(2 + u64::from(k), 100), stamp)
            .unwrap();
    }
    let end = EndSignal::default();
    end.sent_datagrams.store(11, Ordering::SeqCst);
    end.done.store(true, Ordering::SeqCst);
    let plan = recv_plan(0, 2, Duration::from_secs(1));
    let s = run_receiver(&mut ch, &plan, &end, HUNG, 0, None).unwrap();
    assert_eq!(s.elapsed_ns, 30_000_000);
    // The first timed datagram starts the clock and is not counted.
    assert_eq!((s.bytes_timed, s.messages_timed), (1000, 10));
    assert_eq!(s.untimed_tail_bytes, 0);
    assert!(s.fallbacks.is_empty(), "{:?}", s.fallbacks);
    drop(far);
}

/// Zero-byte intervals, each with a rate of 0.
fn empty_intervals(s: &StreamStats) -> usize {
    s.intervals
        .iter()
        .filter(|iv| iv.bytes == 0)
        .inspect(|iv| assert_eq!(iv.bits_per_s, 0.0, "{iv:?}"))
        .count()
}

/// The intervals cover the timed phase and nothing beyond it, and hold all its bytes.
fn assert_intervals_cover(s: &StreamStats) {
    let sum: u64 = s.intervals.iter().map(|iv| iv.bytes).sum();
    assert_eq!(sum, s.bytes_timed, "{:?}", s.intervals);
    let last = s.intervals.last().expect("intervals");
    assert!(
        last.end_ns.abs_diff(s.elapsed_ns) < 1_000,
        "last interval ends at {} ns, the timed phase at {} ns",
        last.end_ns,
        s.elapsed_ns
    );
}

#[test]
fn a_datagram_receiver_reports_intervals_while_nothing_arrives() {
    // 100 ms intervals. The first timed datagram starts the clock; the next two come only
    // once the receiver has reported three intervals of 0 bytes on its live channel, so the
    // silence lasts as long as the reports need, however slowly a loaded host runs the
    // receiver (before, none were reported: an interval was recorded only when a datagram
    // came, and the sender of the last two would have waited a minute for them). The last
    // two arrive less than half an interval after the third report, so the receiver folds
    // them into it (a stub is never an interval of its own): two empty ones remain.
    let (mut ch, mut far) = mem_channel(DATAGRAMS);
    for seq in 0..3 {
        far.send(&datagram(seq, 100)).unwrap();
    }
    let end = EndSignal::default();
    let plan = recv_plan(0, 2, Duration::from_millis(100));
    let (live, reports) = mpsc::channel();
    let (s, silence_reported) = std::thread::scope(|sc| {
        let end = &end;
        let feeder = sc.spawn(move || {
            let reported = empty_reports(&reports, 3);
            for seq in 3..5 {
                far.send(&datagram(seq, 100)).unwrap();
            }
            end.sent_datagrams.store(3, Ordering::SeqCst);
            end.done.store(true, Ordering::SeqCst);
            // The link stays open until the receiver returns and drops its live channel.
            while reports.recv().is_ok() {}
            reported
        });
        let s = run_receiver(&mut ch, &plan, end, HUNG, 0, Some(&live));
        drop(live);
        (s, feeder.join().unwrap())
    });
    let s = s.unwrap();
    assert!(
        silence_reported,
        "no intervals reported while nothing arrived"
    );
    assert_eq!((s.bytes_timed, s.messages_timed), (200, 2));
    assert!(empty_intervals(&s) >= 2, "{:?}", s.intervals);
    // The two after the silence end the intervals (one of them alone when the receiver was
    // held off its CPU between the two).
    assert!(s.intervals.last().unwrap().bytes > 0, "{:?}", s.intervals);
    assert_intervals_cover(&s);
}

/// A loopback TCP connection made by the transport itself, with `opts` on both ends; the
/// client's end as a channel with `io_timeout`, and the server's raw end.
fn tcp_pair(opts: &SocketOptions, io_timeout: Duration) -> (DataChannel, Box<dyn Connection>) {
    let tcp = transport::TransportKind::Tcp
        .open(&TransportConfig::default())
        .unwrap();
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut listener = tcp.listen(local, local).unwrap();
    listener.configure(opts).unwrap();
    let endpoint = listener.endpoint();
    let cookie = Cookie::random().unwrap();
    let wait = HUNG;
    let control = SocketAddr::new(local, 1);
    let client = tcp
        .connect(control, &endpoint, opts, &cookie, wait)
        .unwrap();
    let server = listener.accept(&cookie, wait).unwrap().expect("accepted");
    let ch = DataChannel::new(client, tcp.capabilities(), false, io_timeout).unwrap();
    (ch, server)
}

/// 8 KiB buffers on both ends (16 KiB once Linux doubles them): a peer that never reads
/// stops a sender within some tens of KiB.
fn small_buffers() -> SocketOptions {
    SocketOptions {
        sndbuf: 8192,
        rcvbuf: 8192,
        ..SocketOptions::default()
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_sender_blocked_by_a_peer_that_never_re {
    use super::*;

    #[test]
    fn a_sender_blocked_by_a_peer_that_never_reads_keeps_its_intervals_and_its_deadline() {
        // 4 KiB writes into 8 KiB buffers whose peer never reads: after a few writes every write
        // blocks for good. With -d 1s and 200 ms intervals the sender must end its timed phase
        // at its deadline, not wait out its I/O timeout (a minute here, so that only the
        // deadline can end it in time: waiting the timeout out would be an error).
        let (mut ch, _peer) = tcp_pair(&small_buffers(), HUNG);
        let mut plan = send_plan(
            4096,
            StopAt {
                duration: Some(Duration::from_secs(1)),
                ..StopAt::default()
            },
            1,
            None,
        );
        plan.interval = Some(Duration::from_millis(200));
        let s = run_sender(&mut ch, &plan, 0, None).expect("the sender ends at its deadline");
        // A late wake-up only lengthens the phase.
        assert!(
            s.elapsed_ns >= 1_000_000_000,
            "timed phase of {} ns for -d 1s",
            s.elapsed_ns
        );
        // Each interval is recorded by the first pass of the loop at or after its due time and
        // the fifth by the pass that ends the phase: never more than five (fewer where a host
        // kept the sender off its CPU for a whole interval, which merges two).
        let n = s.intervals.len();
        assert!((1..=5).contains(&n), "{n} intervals: {:?}", s.intervals);
        assert_intervals_cover(&s);
        assert!(s.bytes_timed > 0);
        // Blocked for good: the two buffers took some tens of KiB, however long it waited.
        assert!(s.bytes_total < 1 << 20, "{} bytes moved", s.bytes_total);
        // The peer acknowledged what reached its buffer, never more than the warm-up and the
        // timed phase handed over.
        let acked = s.bytes_acked_timed.expect("TCP keeps TCP_INFO");
        assert!(acked <= 4096 + s.bytes_timed, "acked {acked}");
        assert!(s.intervals.iter().all(|iv| iv.acked_bytes.is_some()));
        let acked_in_intervals: u64 = s.intervals.iter().filter_map(|iv| iv.acked_bytes).sum();
        assert!(acked_in_intervals <= 4096 + s.bytes_timed);
    }

    #[test]
    fn a_sender_blocked_by_a_peer_that_never_reads_reports_its_intervals_as_they_fall_due() {
        // The same stalled sender with a deadline ten minutes out: while every write blocks it
        // still reports each interval as it falls due, 0 bytes each (before, a blocked write
        // recorded nothing until it returned). The test waits for two such reports on the
        // live channel, then ends the test from outside as its control thread would.
        let (mut ch, _peer) = tcp_pair(&small_buffers(), HUNG);
        let abort = AtomicBool::new(false);
        let mut plan = send_plan(
            4096,
            StopAt {
                duration: Some(Duration::from_secs(600)),
                ..StopAt::default()
            },
            1,
            None,
        );
        plan.interval = Some(Duration::from_millis(200));
        plan.abort = Some(&abort);
        let (live, reports) = mpsc::channel();
        let (result, reported) = std::thread::scope(|sc| {
            let abort = &abort;
            let watcher = sc.spawn(move || {
                let reported = empty_reports(&reports, 2);
                // Ended either way: a sender that reports nothing must not run ten minutes.
                abort.store(true, Ordering::SeqCst);
                reported
            });
            let result = run_sender(&mut ch, &plan, 0, Some(&live));
            drop(live);
            (result, watcher.join().unwrap())
        });
        assert!(reported, "no interval of 0 bytes reported while blocked");
        let e = result.expect_err("ended from outside");
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_sender_that_moves_nothing_for_the_io_t {
    use super::*;

    #[test]
    fn a_sender_that_moves_nothing_for_the_io_timeout_still_fails() {
        // The short write timeout is not an I/O timeout: with --io-timeout 300ms and a deadline
        // two minutes out the blocked sender fails with the usual timeout. Had it waited for
        // its deadline instead, it would have ended without an error.
        let (mut ch, _peer) = tcp_pair(&small_buffers(), Duration::from_millis(300));
        let plan = send_plan(
            4096,
            StopAt {
                duration: Some(Duration::from_secs(120)),
                ..StopAt::default()
            },
            0,
            None,
        );
        let e = run_sender(&mut ch, &plan, 0, None).expect_err("no progress for 300 ms");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_blocked_byte_stream_receiver_reports_i {
    use super::*;

    #[test]
    fn a_blocked_byte_stream_receiver_reports_intervals_of_0_bytes() {
        // The peer writes the warm-up (10 000 bytes) and 500 timed bytes in one go, which
        // start the receiver's clock (uncounted: they came before it), then nothing until the
        // receiver has reported three intervals of 0 bytes on its live channel, then 1000
        // bytes, and closes. With 100 ms intervals the receiver reports the silence as it
        // happens (before, none: a blocked read recorded nothing, and the peer would have
        // waited a minute for the reports). The third report may take in the 1000 bytes, which
        // follow it within half an interval (a stub is folded into the interval before it).
        let (mut ch, mut peer) = tcp_pair(&SocketOptions::default(), HUNG);
        let plan = recv_plan(10_000, 0, Duration::from_millis(100));
        let end = EndSignal::default();
        let (live, reports) = mpsc::channel();
        let (s, reported) = std::thread::scope(|sc| {
            let writer = sc.spawn(move || {
                peer.send(&vec![1u8; 10_500]).unwrap();
                let reported = empty_reports(&reports, 3);
                peer.send(&[2u8; 1000]).unwrap();
                peer.shutdown_write().unwrap();
                // The socket stays open until the receiver returns and drops its live channel.
                while reports.recv().is_ok() {}
                reported
            });
            let s = run_receiver(&mut ch, &plan, &end, HUNG, 0, Some(&live));
            drop(live);
            (s, writer.join().unwrap())
        });
        let s = s.unwrap();
        assert!(
            reported,
            "no interval of 0 bytes reported while nothing came"
        );
        assert_eq!(s.bytes_timed, 1000);
        assert!(empty_intervals(&s) >= 2, "{:?}", s.intervals);
        // The silence comes first: two empty intervals at least before the 1000 bytes.
        let first_bytes = s.intervals.iter().position(|iv| iv.bytes > 0).unwrap();
        assert!(first_bytes >= 2, "{:?}", s.intervals);
        assert_intervals_cover(&s);
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_byte_stream_receiver_that_gets_nothing {
    use super::*;

    #[test]
    fn a_byte_stream_receiver_that_gets_nothing_for_the_io_timeout_still_fails() {
        // Nothing tells this receiver that the stream is done: only its I/O timeout ends it.
        let (mut ch, mut peer) = tcp_pair(&SocketOptions::default(), Duration::from_millis(300));
        peer.send(&[1u8; 1000]).unwrap();
        let plan = recv_plan(1000, 0, Duration::from_millis(50));
        let end = EndSignal::default();
        let e = run_receiver(&mut ch, &plan, &end, Duration::from_millis(300), 0, None)
            .expect_err("nothing for 300 ms");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        drop(peer);
    }
}

#[test]
fn a_paced_sender_stops_at_its_abort_without_waiting_for_its_next_slot() {
    // One datagram an hour for two hours (and in the warm-up, once a day): the sender sleeps
    // nearly all the time, and must still end once its control thread aborts the test. The
    // abort comes after the first datagram, while the sender waits for the second: a sender
    // that slept to its next slot before looking would not be back within the minute the
    // test waits.
    for (pace, warmup) in [(3_600e9, 0), (86_400e9, 2)] {
        // 'static for the sender's thread, which the test leaves behind if it hangs.
        let abort: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let (mut ch, far) = mem_channel(DATAGRAMS);
        let mut plan = send_plan(
            100,
            StopAt {
                duration: Some(Duration::from_secs(7_200)),
                bytes: None,
                iterations: None,
            },
            warmup,
            Some(Pace {
                interval_ns: pace,
                burst: 1,
            }),
        );
        plan.abort = Some(abort);
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(run_sender(&mut ch, &plan, 0, None));
        });
        let until = Instant::now() + HUNG;
        while far.peer_sends().is_empty() {
            assert!(Instant::now() < until, "pace {pace} ns: nothing sent");
            std::thread::sleep(Duration::from_millis(1));
        }
        abort.store(true, Ordering::SeqCst);
        let e = result
            .recv_timeout(HUNG)
            .unwrap_or_else(|_| panic!("pace {pace} ns: the sender did not stop at its abort"))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
        assert_eq!(far.peer_sends().len(), 1, "pace {pace} ns");
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_stalled_warm_up_splits_neither_phase {
    use super::*;

    #[test]
    fn a_warm_up_stalled_in_flight_lies_before_both_phases() {
        // 64 warm-up writes of 4 KiB (256 KiB) fit the sender's 2 MiB buffer, so its warm-up
        // writes return at once, but not the receiver's 16 KiB: most of the warm-up stays
        // unacknowledged in flight until the receiver, asleep for 400 ms, reads. Before, the
        // sender's clock started when its warm-up writes returned, the receiver's after the
        // stall: the sender's 200 ms phase held the whole stall, the receiver's none of it.
        //
        // Now the sender's phase begins once its warm-up is acknowledged, which cannot happen
        // before the receiver woke and read (its buffer holds a sixteenth of the warm-up), so
        // the sender returns no earlier than the wake-up plus its whole phase. That is an
        // order of events, which a loaded host only delays: it cannot break it.
        let opts = SocketOptions {
            sndbuf: 1 << 20,
            rcvbuf: 8192,
            ..SocketOptions::default()
        };
        let (mut tx, peer) = tcp_pair(&opts, HUNG);
        let mut rx = DataChannel::new(peer, BYTES, false, HUNG).unwrap();
        let send = send_plan(
            4096,
            StopAt {
                duration: Some(Duration::from_millis(200)),
                ..StopAt::default()
            },
            64,
            None,
        );
        let mut recv = recv_plan(64 * 4096, 0, Duration::from_secs(1));
        recv.interval = None;
        let end = EndSignal::default();
        let (sent, returned, (got, woke)) = std::thread::scope(|sc| {
            let receiver = sc.spawn(|| {
                std::thread::sleep(Duration::from_millis(400));
                let woke = Instant::now();
                let s = run_receiver(&mut rx, &recv, &end, HUNG, 0, None);
                (s.unwrap(), woke)
            });
            let sent = run_sender(&mut tx, &send, 0, None).unwrap();
            let returned = Instant::now();
            (sent, returned, receiver.join().unwrap())
        });
        let phase = Duration::from_nanos(sent.elapsed_ns);
        assert!(
            returned >= woke + phase,
            "the sender's phase of {phase:?} began {:?} before the receiver woke",
            (woke + phase).saturating_duration_since(returned)
        );
        assert!(sent.bytes_timed > 0 && got.bytes_timed > 0);
        assert_eq!(got.bytes_total, sent.bytes_total);
        // The acknowledged bytes of the phase are timed bytes only: the warm-up was all
        // acknowledged before it began.
        assert!(sent.bytes_acked_timed.unwrap() <= sent.bytes_timed);
    }
}
