//! The stream's accounting over a scripted in-memory link (`transport::mem`): what the
//! receiver reports of lost, duplicated and reordered datagrams, and of the bytes of a byte
//! stream, is checked against the exact counts the script implies. No sockets, no timing:
//! the link does exactly what the script says however loaded the host is.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{run_receiver, run_sender, EndSignal, RecvPlan, SendPlan, StreamStats};
use crate::pattern::{DataChannel, FastPaths, RcvLowat, StopAt};
use crate::transport::mem::{self, Fate, Script, BYTES, DATAGRAMS};
use crate::transport::Capabilities;

const WARMUP: u64 = 5;
const TIMED: u64 = 100;

/// Sends WARMUP + TIMED writes of `size` bytes over a link scripted by `script`, receives
/// them, and returns (sender's stats, receiver's stats).
fn over_link(caps: Capabilities, script: Script, size: usize) -> (StreamStats, StreamStats) {
    let (a, b) = mem::pair(caps, script, mem::perfect());
    // A hang guard: the in-memory link never makes either side wait for long.
    let io = crate::test_support::HUNG;
    let mut tx = DataChannel::new(Box::new(a), caps, false, io).unwrap();
    let mut rx = DataChannel::new(Box::new(b), caps, false, io).unwrap();
    let end = EndSignal::default();
    let send = SendPlan {
        write_size: size,
        stop: StopAt {
            iterations: Some(TIMED),
            ..StopAt::default()
        },
        warmup: WARMUP,
        pace: None,
        interval: None,
        fast: FastPaths::default(),
        abort: None,
        align_intervals: false,
    };
    let recv = RecvPlan {
        read_size: 65_536,
        warmup_bytes: WARMUP * size as u64,
        warmup_datagrams: WARMUP,
        interval: None,
        expected: None,
        fast: FastPaths {
            rcvlowat: RcvLowat::Off,
            ..FastPaths::default()
        },
        buffers_fixed: false,
        align_intervals: false,
    };
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let stats = run_sender(&mut tx, &send, 0, None).unwrap();
            // What the control connection would carry: the datagrams sent, then done.
            end.sent_datagrams
                .store(stats.messages_timed, Ordering::Release);
            end.done.store(true, Ordering::Release);
            drop(tx);
            stats
        });
        let received = run_receiver(&mut rx, &recv, &end, io, 0, None).unwrap();
        (sender.join().unwrap(), received)
    })
}

#[test]
fn loss_duplicates_and_reordering_are_counted_exactly() {
    // Datagrams 0-4 are the warm-up, 5-104 timed. Dropped: every tenth from 7 on (7, 17, ...
    // 97, 10 of them), never 5, the one that starts the receiver's clock. Duplicated: 20 and
    // 40. Held back behind the next three: 50 (one reordering).
    let script: Script = Box::new(|i| match i {
        20 | 40 => Fate::Duplicate,
        50 => Fate::Hold(3),
        i if i >= 7 && i % 10 == 7 => Fate::Drop,
        _ => Fate::Deliver,
    });
    let (sent, got) = over_link(DATAGRAMS, script, 1000);
    assert_eq!(sent.messages_timed, TIMED);
    let loss = got.loss.expect("datagram accounting");
    assert_eq!(
        (
            loss.sent,
            loss.received,
            loss.lost,
            loss.duplicated,
            loss.reordered
        ),
        (100, 90, 10, 2, 1)
    );
    assert_eq!(loss.loss_ratio, 0.1);
    // Every delivered datagram counts in the bytes the receiver got, a duplicate too (as in
    // iperf3: the socket delivered it; `duplicated` says how many were copies), and the timed
    // bytes leave out the one that started the clock.
    assert_eq!(got.bytes_total, (WARMUP + 90 + 2) * 1000);
    assert_eq!(got.bytes_timed, (90 + 2 - 1) * 1000);
    assert_eq!(got.messages_timed, 90 + 2 - 1);
}

#[test]
fn a_perfect_link_loses_nothing_and_a_lost_warm_up_is_not_a_timed_loss() {
    let (_, got) = over_link(DATAGRAMS, mem::perfect(), 1000);
    let loss = got.loss.unwrap();
    assert_eq!((loss.sent, loss.received, loss.lost), (100, 100, 0));
    // Losing warm-up datagrams 1 and 3 costs the timed phase nothing.
    let script: Script = Box::new(|i| {
        if i == 1 || i == 3 {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    });
    let (_, got) = over_link(DATAGRAMS, script, 1000);
    let loss = got.loss.unwrap();
    assert_eq!((loss.sent, loss.received, loss.lost), (100, 100, 0));
    assert_eq!(got.bytes_total, (WARMUP - 2 + TIMED) * 1000);
}

#[test]
fn a_byte_stream_receives_every_byte_and_times_all_but_the_warm_up() {
    // Delays on a byte stream only slow it: every byte arrives, in order.
    let script: Script = Box::new(|i| {
        if i % 7 == 3 {
            Fate::Delay(Duration::from_millis(2))
        } else {
            Fate::Deliver
        }
    });
    let (sent, got) = over_link(BYTES, script, 4096);
    assert_eq!(sent.bytes_timed, TIMED * 4096);
    assert_eq!(got.bytes_total, (WARMUP + TIMED) * 4096);
    assert!(got.loss.is_none());
    // The receiver's timed bytes are the sent timed bytes less what was already waiting
    // when its clock started (counted as warm-up); nothing is counted twice.
    assert!(got.bytes_timed <= TIMED * 4096, "{}", got.bytes_timed);
    assert!(got.bytes_timed + got.untimed_tail_bytes + WARMUP * 4096 <= got.bytes_total);
}
