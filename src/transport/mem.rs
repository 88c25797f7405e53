//! An in-memory transport for tests: two connections joined by a scripted link, so that a
//! pattern's accounting (loss, duplicates, reordering, warm-up, the end of a stream) is
//! checked against exact expected counts, whatever the host's load. No kernel, no sockets.
//!
//! The link decides each message's fate by its index in the direction it travels (0 for the
//! first message ever sent, warm-up included): delivered, dropped, delivered twice, held back
//! behind the next n messages, or delivered after a delay. Datagram links keep message
//! boundaries; byte-stream links hand out what is queued in any slices the reader asks for.

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

struct Queue {
    /// Messages the reader may take, each with the instant it becomes visible.
    ready: VecDeque<(Instant, Vec<u8>)>,
    /// Messages held back: how many later messages must pass first.
    held: Vec<(usize, Vec<u8>)>,
    sent: u64,
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
                closed: false,
                script,
            }),
            arrived: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, buf: &[u8]) {
        let now = Instant::now();
        let mut q = self.lock();
        let index = q.sent;
        q.sent += 1;
        let fate = (q.script)(index);
        let mut enqueued = 0;
        match fate {
            Fate::Deliver => {
                q.ready.push_back((now, buf.to_vec()));
                enqueued = 1;
            }
            Fate::Drop => {}
            Fate::Duplicate => {
                q.ready.push_back((now, buf.to_vec()));
                q.ready.push_back((now, buf.to_vec()));
                enqueued = 1;
            }
            Fate::Hold(n) => q.held.push((n, buf.to_vec())),
            Fate::Delay(d) => {
                q.ready.push_back((now + d, buf.to_vec()));
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
    fn recv(&self, wait: Option<Duration>) -> io::Result<Option<Vec<u8>>> {
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
        read_timeout: None,
        nonblocking: false,
    };
    (end(&ab, &ba), end(&ba, &ab))
}

impl Drop for MemConnection {
    fn drop(&mut self) {
        self.out.close();
    }
}

impl Connection for MemConnection {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.send(buf);
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
                Some(m) => self.partial = m,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv_all(c: &mut MemConnection) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
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
