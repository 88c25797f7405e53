//! An in-memory transport for tests: two connections joined by a scripted link, so that a
//! pattern's accounting (loss, duplicates, reordering, warm-up, the end of a stream) is
//! checked against exact expected counts, whatever the host's load. No kernel, no sockets.
//!
//! The link decides each message's fate by its index in the direction it travels (0 for the
//! first message ever sent, warm-up included): delivered, dropped, delivered twice, held back
//! behind the next n messages, or delivered after a delay. Datagram links keep message
//! boundaries; byte-stream links hand out what is queued in any slices the reader asks for.
//!
//! Each end also tells a test when its peer sent every message ([`MemConnection::peer_sends`]),
//! and a message may carry the arrival stamp a raw transport's kernel would have put on it
//! ([`MemConnection::send_stamped`], read back through `Connection::arrival_stamp`).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Capabilities, Connection, EffectiveOptions, SocketOptions};

/// What the link does with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    /// Delivered, and a copy right after it.
    Duplicate,
    /// Delivered after the next `n` messages (reordering).
    Hold(usize),
    /// Delivered once this much time has passed since it was sent.
    Delay(Duration),
}

/// A message's fate by its index in its direction.
pub type Script = Box<dyn FnMut(u64) -> Fate + Send>;

/// A link that delivers everything at once, in order.
pub fn perfect() -> Script {
    Box::new(|_| Fate::Deliver)
}

/// Message-oriented (UDP-like) or byte-stream (TCP-like) capabilities for a pair.
pub const DATAGRAMS: Capabilities = Capabilities {
    reliable: false,
    message_boundaries: true,
    max_message: 65_507,
    tcp_options: false,
    host_local: false,
    syscall_batching: false,
    rcvlowat: false,
};

pub const BYTES: Capabilities = Capabilities {
    reliable: true,
    message_boundaries: false,
    ..DATAGRAMS
};

/// A message on its way, with the arrival stamp it carries, if any.
struct Message {
    data: Vec<u8>,
    stamp: Option<Duration>,
}

struct Queue {
    /// Messages the reader may take, each with the instant it becomes visible.
    ready: VecDeque<(Instant, Message)>,
    /// Messages held back: how many later messages must pass first.
    held: Vec<(usize, Message)>,
    sent: u64,
    /// When each message was sent, whatever its fate.
    sent_at: Vec<Instant>,
    closed: bool,
    script: Script,
}

struct Link {
    queue: Mutex<Queue>,
    arrived: Condvar,
}

impl Link {
    fn new(script: Script) -> Arc<Link> {
        Arc::new(Link {
            queue: Mutex::new(Queue {
                ready: VecDeque::new(),
                held: Vec::new(),
                sent: 0,
                sent_at: Vec::new(),
                closed: false,
                script,
            }),
            arrived: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, buf: &[u8], stamp: Option<Duration>) {
        let now = Instant::now();
        let mut q = self.lock();
        let index = q.sent;
        q.sent += 1;
        q.sent_at.push(now);
        let fate = (q.script)(index);
        let message = || Message {
            data: buf.to_vec(),
            stamp,
        };
        let mut enqueued = 0;
        match fate {
            Fate::Deliver => {
                q.ready.push_back((now, message()));
                enqueued = 1;
            }
            Fate::Drop => {}
            Fate::Duplicate => {
                q.ready.push_back((now, message()));
                q.ready.push_back((now, message()));
                enqueued = 1;
            }
            Fate::Hold(n) => q.held.push((n, message())),
            Fate::Delay(d) => {
                q.ready.push_back((now + d, message()));
                enqueued = 1;
            }
        }
        // A message that went ahead counts down the ones held back behind it.
        if enqueued > 0 {
            let mut i = 0;
            while i < q.held.len() {
                q.held[i].0 = q.held[i].0.saturating_sub(enqueued);
                if q.held[i].0 == 0 {
                    let (_, m) = q.held.remove(i);
                    q.ready.push_back((now, m));
                } else {
                    i += 1;
                }
            }
        }
        self.arrived.notify_all();
    }

    fn close(&self) {
        let mut q = self.lock();
        // Whatever is still held back leaves now: the stream ended behind it.
        let held: Vec<_> = q.held.drain(..).map(|(_, m)| m).collect();
        let now = Instant::now();
        q.ready.extend(held.into_iter().map(|m| (now, m)));
        q.closed = true;
        self.arrived.notify_all();
    }

    /// The next visible message, waiting up to `wait`; None at the end of the stream,
    /// Err(WouldBlock) when the wait passed.
    fn recv(&self, wait: Option<Duration>) -> io::Result<Option<Message>> {
        let until = wait.map(|w| Instant::now() + w);
        let mut q = self.lock();
        loop {
            let now = Instant::now();
            // Earliest visible message first (a delayed one lets later ones pass).
            let pick = q
                .ready
                .iter()
                .enumerate()
                .filter(|(_, (at, _))| *at <= now)
                .min_by_key(|(_, (at, _))| *at)
                .map(|(i, _)| i);
            if let Some(i) = pick {
                return Ok(q.ready.remove(i).map(|(_, m)| m));
            }
            if q.closed && q.ready.is_empty() {
                return Ok(None);
            }
            let next_visible = q.ready.iter().map(|(at, _)| *at).min();
            let limit = match (until, next_visible) {
                (Some(u), Some(v)) => Some(u.min(v)),
                (u, v) => u.or(v),
            };
            match limit {
                Some(l) if l <= now => {
                    if until.is_some_and(|u| u <= now) {
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                }
                Some(l) => {
                    q = self
                        .arrived
                        .wait_timeout(q, l - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                None => q = self.arrived.wait(q).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

/// One end of an in-memory pair.
pub struct MemConnection {
    out: Arc<Link>,
    inbound: Arc<Link>,
    boundaries: bool,
    /// Bytes of a byte-stream message the reader has not taken yet.
    partial: Vec<u8>,
    /// The arrival stamp of the message the last `recv` took from.
    stamp: Option<Duration>,
    read_timeout: Option<Duration>,
    nonblocking: bool,
}

/// Two connected ends: `a_to_b` scripts what `a` sends, `b_to_a` what `b` sends. With
/// `caps.message_boundaries` false the pair is a byte stream, and the scripts may only
/// deliver or delay (a byte stream loses nothing).
pub fn pair(caps: Capabilities, a_to_b: Script, b_to_a: Script) -> (MemConnection, MemConnection) {
    let (ab, ba) = (Link::new(a_to_b), Link::new(b_to_a));
    let end = |out: &Arc<Link>, inbound: &Arc<Link>| MemConnection {
        out: Arc::clone(out),
        inbound: Arc::clone(inbound),
        boundaries: caps.message_boundaries,
        partial: Vec::new(),
        stamp: None,
        read_timeout: None,
        nonblocking: false,
    };
    (end(&ab, &ba), end(&ba, &ab))
}

impl MemConnection {
    /// Sends `buf` as [`Connection::send`] does, carrying `stamp` (CLOCK_REALTIME since the
    /// epoch) as its arrival stamp: what the far end's `arrival_stamp` gives after the `recv`
    /// that returns it, as a raw transport's connection gives the kernel's.
    pub fn send_stamped(&mut self, buf: &[u8], stamp: Duration) -> io::Result<usize> {
        self.out.send(buf, Some(stamp));
        Ok(buf.len())
    }

    /// When the other end sent each of its messages so far, in order, dropped ones included:
    /// a test reads the times of a sender's writes here, against an instant of its own.
    pub fn peer_sends(&self) -> Vec<Instant> {
        self.inbound.lock().sent_at.clone()
    }
}

impl Drop for MemConnection {
    fn drop(&mut self) {
        self.out.close();
    }
}

impl Connection for MemConnection {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.send(buf, None);
        Ok(buf.len())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.partial.is_empty() {
            let wait = if self.nonblocking {
                Some(Duration::ZERO)
            } else {
                self.read_timeout
            };
            match self.inbound.recv(wait)? {
                Some(m) => {
                    self.partial = m.data;
                    self.stamp = m.stamp;
                }
                None => return Ok(0),
            }
        }
        let n = self.partial.len().min(buf.len());
        buf[..n].copy_from_slice(&self.partial[..n]);
        if self.boundaries {
            // A datagram larger than the buffer is cut, as the kernel does.
            self.partial.clear();
        } else {
            self.partial.drain(..n);
        }
        Ok(n)
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }

    fn set_write_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.out.close();
        Ok(())
    }

    fn effective_options(&self, _: &SocketOptions) -> EffectiveOptions {
        EffectiveOptions::default()
    }

    fn arrival_stamp(&self) -> Option<Duration> {
        self.stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv_all(c: &mut MemConnection) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        // A hang guard: the last message is delayed 50 ms at most.
        c.set_read_timeout(Some(crate::test_support::HUNG)).unwrap();
        loop {
            match c.recv(&mut buf).unwrap() {
                0 => return got,
                n => got.push(buf[..n].to_vec()),
            }
        }
    }

    #[test]
    fn the_script_drops_duplicates_and_reorders_exactly() {
        let script: Script = Box::new(|i| match i {
            1 => Fate::Drop,
            2 => Fate::Duplicate,
            3 => Fate::Hold(2),
            _ => Fate::Deliver,
        });
        let (mut a, mut b) = pair(DATAGRAMS, script, perfect());
        for i in 0..7u8 {
            a.send(&[i]).unwrap();
        }
        drop(a);
        let got: Vec<u8> = recv_all(&mut b).into_iter().map(|m| m[0]).collect();
        assert_eq!(got, vec![0, 2, 2, 4, 5, 3, 6]);
    }

    #[test]
    fn a_delayed_message_lets_later_ones_pass_and_a_byte_stream_keeps_its_bytes() {
        let script: Script = Box::new(|i| {
            if i == 0 {
                Fate::Delay(Duration::from_millis(50))
            } else {
                Fate::Deliver
            }
        });
        let (mut a, mut b) = pair(DATAGRAMS, script, perfect());
        a.send(&[0]).unwrap();
        a.send(&[1]).unwrap();
        drop(a);
        let got: Vec<u8> = recv_all(&mut b).into_iter().map(|m| m[0]).collect();
        assert_eq!(got, vec![1, 0]);

        let (mut a, mut b) = pair(BYTES, perfect(), perfect());
        a.send(&[1, 2, 3, 4, 5]).unwrap();
        drop(a);
        let mut buf = [0u8; 2];
        let mut bytes = Vec::new();
        loop {
            match b.recv(&mut buf).unwrap() {
                0 => break,
                n => bytes.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(bytes, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn stamps_ride_with_their_messages_and_every_send_is_noted() {
        // Message 1 is dropped: its send is still noted, and the stamps of the others reach
        // the reader with them.
        let script: Script = Box::new(|i| if i == 1 { Fate::Drop } else { Fate::Deliver });
        let (mut a, mut b) = pair(DATAGRAMS, script, perfect());
        let before = Instant::now();
        let s = Duration::from_secs;
        a.send_stamped(&[0], s(10)).unwrap();
        a.send_stamped(&[1], s(11)).unwrap();
        a.send(&[2]).unwrap();
        let sends = b.peer_sends();
        assert_eq!(sends.len(), 3);
        assert!(sends[0] >= before && sends.windows(2).all(|w| w[0] <= w[1]));
        assert!(a.peer_sends().is_empty(), "b sent nothing");
        b.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.arrival_stamp(), None, "nothing read yet");
        assert_eq!((b.recv(&mut buf).unwrap(), buf[0]), (1, 0));
        assert_eq!(b.arrival_stamp(), Some(s(10)));
        assert_eq!((b.recv(&mut buf).unwrap(), buf[0]), (1, 2));
        assert_eq!(b.arrival_stamp(), None, "sent without a stamp");
    }

    #[test]
    fn a_read_timeout_is_would_block_and_the_other_direction_is_independent() {
        let (mut a, mut b) = pair(DATAGRAMS, perfect(), perfect());
        b.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let e = b.recv(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        b.send(&[9]).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(a.recv(&mut buf).unwrap(), 1);
        assert_eq!(buf[0], 9);
    }
}
