//! How the stream keeps its clocks: a paced warm-up on the timed phase's schedule, the
//! receiver's clock started by sequence number, and both sides keeping time while the data
//! path is stalled. The logic runs against an in-memory connection where no kernel is needed;
//! the stalls are real loopback TCP sockets.
//!
//! None of these tests asserts how fast anything went. Where time matters, the assertion is a
//! bound a loaded host cannot break: a sleeping thread only ever makes a send later, never
//! earlier, and a deadline is held to within half a second.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{run_receiver, run_sender, EndSignal, Pace, RecvPlan, SendPlan, StreamStats};
use crate::pattern::{DataChannel, FastPaths, RcvLowat, StopAt};
use crate::transport::{
    self, Capabilities, Connection, Cookie, EffectiveOptions, SocketOptions, TransportConfig,
};

const DATAGRAMS: Capabilities = Capabilities {
    reliable: false,
    message_boundaries: true,
    max_message: 65_507,
    tcp_options: false,
    host_local: false,
    syscall_batching: false,
    rcvlowat: false,
};

const BYTES: Capabilities = Capabilities {
    reliable: true,
    message_boundaries: false,
    ..DATAGRAMS
};

/// Sends taken by [`Memory`]: when, and the first 16 bytes (a datagram's header).
type Sent = Arc<Mutex<Vec<(Instant, [u8; 16])>>>;

/// An in-memory connection: every send is taken whole and noted; receives come from a channel
/// and honour the read timeout (a disconnected channel is the end of the stream).
pub(super) struct Memory {
    sent: Sent,
    incoming: Option<mpsc::Receiver<Vec<u8>>>,
    read_timeout: Option<Duration>,
}

impl Memory {
    fn sender() -> (Memory, Sent) {
        let sent = Sent::default();
        let m = Memory {
            sent: sent.clone(),
            incoming: None,
            read_timeout: None,
        };
        (m, sent)
    }

    fn receiver(incoming: mpsc::Receiver<Vec<u8>>) -> Memory {
        Memory {
            sent: Sent::default(),
            incoming: Some(incoming),
            read_timeout: None,
        }
    }
}

impl Connection for Memory {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut head = [0u8; 16];
        let n = buf.len().min(16);
        head[..n].copy_from_slice(&buf[..n]);
        self.sent.lock().unwrap().push((Instant::now(), head));
        Ok(buf.len())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(rx) = &self.incoming else {
            return Ok(0);
        };
        let wait = self.read_timeout.unwrap_or(Duration::from_secs(3600));
        match rx.recv_timeout(wait) {
            Ok(d) => {
                buf[..d.len()].copy_from_slice(&d);
                Ok(d.len())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(io::ErrorKind::WouldBlock.into()),
            Err(mpsc::RecvTimeoutError::Disconnected) => Ok(0),
        }
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }
    fn set_write_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
    fn set_nonblocking(&mut self, _: bool) -> io::Result<()> {
        Ok(())
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn effective_options(&self, _: &SocketOptions) -> EffectiveOptions {
        EffectiveOptions::default()
    }
}

/// A datagram channel over [`Memory`] that nothing ever arrives on (for the parts of the
/// stream that need a channel only to read TCP_INFO from, which it has none of).
pub(super) fn idle_channel() -> DataChannel {
    let (_tx, rx) = mpsc::channel();
    DataChannel::new(
        Box::new(Memory::receiver(rx)),
        DATAGRAMS,
        false,
        Duration::from_secs(5),
    )
    .unwrap()
}

/// Datagrams that arrived before they are read, each with the kernel's arrival stamp, as a
/// raw transport's connection hands them over (see `Connection::arrival_stamp`).
struct StampedFrames {
    incoming: std::collections::VecDeque<(Vec<u8>, Duration)>,
    last: Option<Duration>,
}

impl Connection for StampedFrames {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some((d, stamp)) = self.incoming.pop_front() else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        buf[..d.len()].copy_from_slice(&d);
        self.last = Some(stamp);
        Ok(d.len())
    }
    fn set_read_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
    fn set_write_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
    fn set_nonblocking(&mut self, _: bool) -> io::Result<()> {
        Ok(())
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn effective_options(&self, _: &SocketOptions) -> EffectiveOptions {
        EffectiveOptions::default()
    }
    fn arrival_stamp(&self) -> Option<Duration> {
        self.last
    }
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
    let (conn, sent) = Memory::sender();
    let mut ch =
        DataChannel::new(Box::new(conn), DATAGRAMS, false, Duration::from_secs(5)).unwrap();
    let stats = run_sender(
        &mut ch,
        &send_plan(100, iterations(5), 5, Some(pace)),
        0,
        None,
    )
    .unwrap();
    assert_eq!(stats.messages_timed, 5);
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 10);
    for (j, (_, head)) in sent.iter().enumerate() {
        let seq = u64::from_le_bytes(head[..8].try_into().unwrap());
        let sent_ns = u64::from_le_bytes(head[8..16].try_into().unwrap()) as f64;
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
    let (conn, sent) = Memory::sender();
    let mut ch =
        DataChannel::new(Box::new(conn), DATAGRAMS, false, Duration::from_secs(5)).unwrap();
    run_sender(
        &mut ch,
        &send_plan(100, iterations(8), 6, Some(pace)),
        0,
        None,
    )
    .unwrap();
    let sent = sent.lock().unwrap();
    let due_ms = [0, 0, 0, 0, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12];
    assert_eq!(sent.len(), due_ms.len());
    for (j, (_, head)) in sent.iter().enumerate() {
        let sent_ns = u64::from_le_bytes(head[8..16].try_into().unwrap()) as f64;
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
    // sender started. Bytes carry no time stamp, so the in-memory connection notes when each
    // write came, against an instant taken before the sender started.
    let pace = Pace {
        interval_ns: 2.0 * MS,
        burst: 1,
    };
    let (conn, sent) = Memory::sender();
    let mut ch = DataChannel::new(Box::new(conn), BYTES, false, Duration::from_secs(5)).unwrap();
    let before = Instant::now();
    let stats = run_sender(
        &mut ch,
        &send_plan(1000, iterations(4), 4, Some(pace)),
        0,
        None,
    )
    .unwrap();
    assert_eq!((stats.messages_timed, stats.bytes_timed), (4, 4000));
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 8);
    for (j, (at, _)) in sent.iter().enumerate() {
        let since = at.duration_since(before).as_nanos() as f64;
        assert!(since >= pace.due_ns(j as u64), "write {j} at {since} ns");
    }
}

#[test]
fn the_receiver_s_clock_starts_at_the_first_timed_sequence_number() {
    // Three warm-up datagrams (0-2). Number 3 arrives before the late warm-up number 2: 3
    // starts the clock and is not counted (it arrived before the clock started), 2 is never
    // timed, 4 and 5 are. All queued before the receiver starts: no timing involved.
    let (tx, rx) = mpsc::channel();
    for seq in [0, 1, 3, 2, 4, 5] {
        tx.send(datagram(seq, 100)).unwrap();
    }
    let mut ch = DataChannel::new(
        Box::new(Memory::receiver(rx)),
        DATAGRAMS,
        false,
        Duration::from_secs(5),
    )
    .unwrap();
    let end = EndSignal::default();
    end.sent_datagrams.store(3, Ordering::SeqCst);
    end.done.store(true, Ordering::SeqCst);
    let plan = recv_plan(0, 3, Duration::from_secs(1));
    let s = run_receiver(&mut ch, &plan, &end, Duration::from_secs(5), 0, None).unwrap();
    assert_eq!(
        (s.bytes_total, s.bytes_timed, s.messages_timed),
        (600, 200, 2)
    );
    let loss = s.loss.unwrap();
    assert_eq!((loss.sent, loss.received, loss.lost), (3, 3, 0));
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
    let mut incoming = std::collections::VecDeque::new();
    incoming.push_back((datagram(0, 100), wall));
    incoming.push_back((datagram(1, 100), wall + ms));
    for k in 0..11u32 {
        incoming.push_back((datagram(2 + u64::from(k), 100), wall + 5 * ms + 3 * k * ms));
    }
    let conn = StampedFrames {
        incoming,
        last: None,
    };
    let mut ch =
        DataChannel::new(Box::new(conn), DATAGRAMS, false, Duration::from_secs(5)).unwrap();
    let end = EndSignal::default();
    end.sent_datagrams.store(11, Ordering::SeqCst);
    end.done.store(true, Ordering::SeqCst);
    let plan = recv_plan(0, 2, Duration::from_secs(1));
    let s = run_receiver(&mut ch, &plan, &end, Duration::from_secs(5), 0, None).unwrap();
    assert_eq!(s.elapsed_ns, 30_000_000);
    // The first timed datagram starts the clock and is not counted.
    assert_eq!((s.bytes_timed, s.messages_timed), (1000, 10));
    assert_eq!(s.untimed_tail_bytes, 0);
    assert!(s.fallbacks.is_empty(), "{:?}", s.fallbacks);
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
    // 100 ms intervals, and 600 ms without a datagram between the first timed one (which
    // starts the clock) and the next two. The receiver polls at most 5 ms at a time, so the
    // silence is at least 5 intervals of 0 bytes on an idle host; a host that keeps the
    // receiver off its CPU for a whole interval merges two, so at least 2 are asserted
    // (before, none: an interval was recorded only when a datagram came).
    let (tx, rx) = mpsc::channel();
    let end = Arc::new(EndSignal::default());
    let feeder = {
        let end = end.clone();
        std::thread::spawn(move || {
            for seq in 0..3 {
                tx.send(datagram(seq, 100)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(600));
            for seq in 3..5 {
                tx.send(datagram(seq, 100)).unwrap();
            }
            end.sent_datagrams.store(3, Ordering::SeqCst);
            end.done.store(true, Ordering::SeqCst);
            // Keep the channel open until the receiver has read everything.
            std::thread::sleep(Duration::from_millis(200));
        })
    };
    let mut ch = DataChannel::new(
        Box::new(Memory::receiver(rx)),
        DATAGRAMS,
        false,
        Duration::from_secs(5),
    )
    .unwrap();
    let plan = recv_plan(0, 2, Duration::from_millis(100));
    let s = run_receiver(&mut ch, &plan, &end, Duration::from_secs(5), 0, None).unwrap();
    feeder.join().unwrap();
    assert_eq!((s.bytes_timed, s.messages_timed), (200, 2));
    assert!(empty_intervals(&s) >= 2, "{:?}", s.intervals);
    // The two after the silence end the intervals (one of them alone when the receiver was
    // held off its CPU between the two for half an interval).
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
    let wait = Duration::from_secs(5);
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
        // blocks for good. With -d 1s and 200 ms intervals, the sender must still report every
        // interval and end its timed phase at 1 s, not wait out the 10 s I/O timeout.
        //
        // Intervals: each is recorded by the first pass of the loop at or after its due time, and
        // a blocked write returns within STALL_CHECK; the fifth is due at the deadline itself and
        // is recorded by the pass that ends the phase, after which nothing is left to close. So
        // exactly 5 on an idle host; a host that keeps the sender off its CPU for a whole interval
        // merges two into one, hence 4 or 5.
        let (mut ch, _peer) = tcp_pair(&small_buffers(), Duration::from_secs(10));
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
        assert!(
            (1_000_000_000..1_500_000_000).contains(&s.elapsed_ns),
            "timed phase of {} ns for -d 1s",
            s.elapsed_ns
        );
        let n = s.intervals.len();
        assert!((4..=5).contains(&n), "{n} intervals: {:?}", s.intervals);
        assert_intervals_cover(&s);
        assert!(s.bytes_timed > 0);
        // Some tens of KiB fill the buffers within the first interval; from 0.4 s on nothing
        // moves, and the reports say so.
        for iv in s.intervals.iter().filter(|iv| iv.start_ns >= 400_000_000) {
            assert_eq!((iv.bytes, iv.bits_per_s), (0, 0.0), "{iv:?}");
        }
        // The peer acknowledged what reached its buffer, never more than the warm-up and the
        // timed phase handed over.
        let acked = s.bytes_acked_timed.expect("TCP keeps TCP_INFO");
        assert!(acked <= 4096 + s.bytes_timed, "acked {acked}");
        assert!(s.intervals.iter().all(|iv| iv.acked_bytes.is_some()));
        let acked_in_intervals: u64 = s.intervals.iter().filter_map(|iv| iv.acked_bytes).sum();
        assert!(acked_in_intervals <= 4096 + s.bytes_timed);
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_sender_that_moves_nothing_for_the_io_t {
    use super::*;

    #[test]
    fn a_sender_that_moves_nothing_for_the_io_timeout_still_fails() {
        // The short write timeout is not an I/O timeout: with --io-timeout 300ms and -d 30s the
        // blocked sender fails with the usual timeout, long before its deadline.
        let (mut ch, _peer) = tcp_pair(&small_buffers(), Duration::from_millis(300));
        let plan = send_plan(
            4096,
            StopAt {
                duration: Some(Duration::from_secs(30)),
                ..StopAt::default()
            },
            0,
            None,
        );
        let started = Instant::now();
        let e = run_sender(&mut ch, &plan, 0, None).expect_err("no progress for 300 ms");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_blocked_byte_stream_receiver_reports_i {
    use super::*;

    #[test]
    fn a_blocked_byte_stream_receiver_reports_intervals_of_0_bytes() {
        // The peer writes the warm-up (10 000 bytes) and 500 timed bytes in one go, which
        // start the receiver's clock (uncounted: they came before it), waits 600 ms, writes
        // 1000 bytes and closes. With 100 ms intervals the receiver reports the silence as it
        // happens: 5 or 6 intervals of 0 bytes on an idle host, at least 2 on one that keeps
        // the receiver off its CPU for whole intervals (before, none: a blocked read recorded
        // nothing).
        let (mut ch, mut peer) = tcp_pair(&SocketOptions::default(), Duration::from_secs(10));
        let writer = std::thread::spawn(move || {
            peer.send(&vec![1u8; 10_500]).unwrap();
            std::thread::sleep(Duration::from_millis(600));
            peer.send(&[2u8; 1000]).unwrap();
            peer.shutdown_write().unwrap();
            // Keep the socket open until the reader has seen the end.
            std::thread::sleep(Duration::from_millis(200));
        });
        let plan = recv_plan(10_000, 0, Duration::from_millis(100));
        let end = EndSignal::default();
        let s = run_receiver(&mut ch, &plan, &end, Duration::from_secs(10), 0, None).unwrap();
        writer.join().unwrap();
        assert_eq!(s.bytes_timed, 1000);
        assert!(empty_intervals(&s) >= 2, "{:?}", s.intervals);
        assert_eq!(s.intervals.last().unwrap().bytes, 1000);
        assert_intervals_cover(&s);
    }
}

/// Needs sockets on loopback: the loopback tier (see README, Tests).
mod loopback_a_byte_stream_receiver_that_gets_nothing {
    use super::*;

    #[test]
    fn a_byte_stream_receiver_that_gets_nothing_for_the_io_timeout_still_fails() {
        let (mut ch, mut peer) = tcp_pair(&SocketOptions::default(), Duration::from_millis(300));
        peer.send(&[1u8; 1000]).unwrap();
        let plan = recv_plan(1000, 0, Duration::from_millis(50));
        let end = EndSignal::default();
        let started = Instant::now();
        let e = run_receiver(&mut ch, &plan, &end, Duration::from_millis(300), 0, None)
            .expect_err("nothing for 300 ms");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(started.elapsed() < Duration::from_secs(20));
        drop(peer);
    }
}

#[test]
fn a_paced_sender_stops_within_a_slice_of_its_abort_whatever_its_pace() {
    // One datagram a second for a minute (and in the warm-up, once a day): the sender sleeps
    // nearly all the time, and must still end soon after its control thread aborts the test.
    // The bound is far above ABORT_CHECK, which a loaded host may stretch.
    for (pace, warmup) in [(1e9, 0), (86_400e9, 2)] {
        let abort = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&abort);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::SeqCst);
        });
        let (conn, _sent) = Memory::sender();
        let mut ch =
            DataChannel::new(Box::new(conn), DATAGRAMS, false, Duration::from_secs(5)).unwrap();
        let mut plan = send_plan(
            100,
            StopAt {
                duration: Some(Duration::from_secs(60)),
                bytes: None,
                iterations: None,
            },
            warmup,
            Some(Pace {
                interval_ns: pace,
                burst: 1,
            }),
        );
        plan.abort = Some(&abort);
        let started = Instant::now();
        let e = run_sender(&mut ch, &plan, 0, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "stopped after {:?}",
            started.elapsed()
        );
        setter.join().unwrap();
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
        let (mut tx, peer) = tcp_pair(&opts, Duration::from_secs(10));
        let mut rx = DataChannel::new(peer, BYTES, false, Duration::from_secs(10)).unwrap();
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
                let s = run_receiver(&mut rx, &recv, &end, Duration::from_secs(10), 0, None);
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
