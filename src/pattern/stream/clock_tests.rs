//! How the stream keeps its clocks: a paced warm-up on the timed phase's schedule, and the
//! receiver's clock started by sequence number. The logic runs against an in-memory
//! connection; no kernel is needed.
//!
//! None of these tests asserts how fast anything went. Where time matters, the assertion is a
//! bound a loaded host cannot break: a sleeping thread only ever makes a send later, never
//! earlier.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{run_receiver, run_sender, EndSignal, Pace, RecvPlan, SendPlan};
use crate::pattern::{DataChannel, FastPaths, RcvLowat, StopAt};
use crate::transport::{Capabilities, Connection, EffectiveOptions, SocketOptions};

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
struct Memory {
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

fn send_plan(write_size: usize, stop: StopAt, warmup: u64, pace: Option<Pace>) -> SendPlan {
    SendPlan {
        write_size,
        stop,
        warmup,
        pace,
        interval: None,
        fast: FastPaths::default(),
    }
}

fn recv_plan(warmup_bytes: u64, warmup_datagrams: u64, interval: Duration) -> RecvPlan {
    RecvPlan {
        read_size: 65_536,
        warmup_bytes,
        warmup_datagrams,
        interval: Some(interval),
        fast: FastPaths {
            rcvlowat: RcvLowat::Off,
            ..FastPaths::default()
        },
        buffers_fixed: false,
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
