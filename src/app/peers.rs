//! The data plane of an application kernel: one connection from every rank to every other,
//! carrying framed messages of f64 (or of bytes), with the time spent inside sends and
//! receives counted, so that a kernel reports how much of its time it communicated.
//!
//! A frame is its length in elements (u64, little-endian) followed by the elements
//! (little-endian): the receiver checks that a message is the size it expects, so a kernel
//! whose ranks disagree fails on the first message instead of computing on garbage.
//! Packing and unpacking count as communication, as PVM's pack time did in
//! [Local ATM computing n.d.].

use std::io;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::transport::{Connection, Listener, Transport};

/// The connections of one rank to all the others, indexed by rank (None for itself).
pub struct Peers {
    rank: usize,
    conns: Vec<Option<Box<dyn Connection>>>,
    /// Time inside sends and receives since the last [`Peers::take_comm`].
    comm: Duration,
    /// Bytes of payload (frame headers left out) received since the last take.
    received: u64,
    /// Reused for packing and unpacking, so that a message costs no allocation.
    buf: Vec<u8>,
    /// What the connections run on, where their transport or listener owns it (QUIC's
    /// endpoint); dropped after them (fields drop in order).
    listeners: Vec<Box<dyn Listener>>,
    transports: Vec<Box<dyn Transport>>,
}

const HEADER: usize = 8;

impl Peers {
    /// `conns[r]` is the connection to rank r, None at `rank`; every connection already set
    /// with its read and write timeouts.
    pub fn new(rank: usize, conns: Vec<Option<Box<dyn Connection>>>) -> Result<Peers> {
        for (r, c) in conns.iter().enumerate() {
            if (r == rank) != c.is_none() {
                bail!("rank {rank}: the connection to rank {r} is missing or is to itself");
            }
        }
        Ok(Peers {
            rank,
            conns,
            comm: Duration::ZERO,
            received: 0,
            buf: Vec::new(),
            listeners: Vec::new(),
            transports: Vec::new(),
        })
    }

    /// These peers, keeping `transports` and `listeners` alive as long as their connections.
    pub fn keeping(
        mut self,
        transports: Vec<Box<dyn Transport>>,
        listeners: Vec<Box<dyn Listener>>,
    ) -> Peers {
        self.transports = transports;
        self.listeners = listeners;
        self
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.conns.len()
    }

    /// The time spent communicating since the last call, and the payload bytes received.
    pub fn take_comm(&mut self) -> (Duration, u64) {
        let taken = (self.comm, self.received);
        self.comm = Duration::ZERO;
        self.received = 0;
        taken
    }

    fn conn(&mut self, r: usize) -> Result<&mut Box<dyn Connection>> {
        let rank = self.rank;
        self.conns
            .get_mut(r)
            .and_then(|c| c.as_mut())
            .ok_or_else(|| anyhow!("rank {rank} has no connection to rank {r}"))
    }

    /// Sends `data` to rank `to` as one frame.
    pub fn send(&mut self, to: usize, data: &[f64]) -> Result<()> {
        let started = Instant::now();
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&(data.len() as u64).to_le_bytes());
        for x in data {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        let sent = send_all(self.conn(to)?.as_mut(), &buf);
        self.buf = buf;
        self.comm += started.elapsed();
        sent.with_context(|| format!("rank {} sending to rank {to}", self.rank))
    }

    /// Receives one frame of exactly `out.len()` elements from rank `from` into `out`.
    pub fn recv_into(&mut self, from: usize, out: &mut [f64]) -> Result<()> {
        let started = Instant::now();
        let got = self.recv_frame(from, out.len(), 8);
        if got.is_ok() {
            let (elements, _) = self.buf[HEADER..].as_chunks();
            for (x, b) in out.iter_mut().zip(elements) {
                *x = f64::from_le_bytes(*b);
            }
        }
        self.comm += started.elapsed();
        got
    }

    /// Receives one frame of exactly `len` elements from rank `from`.
    pub fn recv(&mut self, from: usize, len: usize) -> Result<Vec<f64>> {
        let mut out = vec![0.0; len];
        self.recv_into(from, &mut out)?;
        Ok(out)
    }

    /// Sends `data` to rank `to` as one frame of bytes.
    pub fn send_bytes(&mut self, to: usize, data: &[u8]) -> Result<()> {
        let started = Instant::now();
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&(data.len() as u64).to_le_bytes());
        buf.extend_from_slice(data);
        let sent = send_all(self.conn(to)?.as_mut(), &buf);
        self.buf = buf;
        self.comm += started.elapsed();
        sent.with_context(|| format!("rank {} sending to rank {to}", self.rank))
    }

    /// Receives one frame of exactly `len` bytes from rank `from`; the bytes are valid
    /// until the next call.
    pub fn recv_bytes(&mut self, from: usize, len: usize) -> Result<&[u8]> {
        let started = Instant::now();
        let got = self.recv_frame(from, len, 1);
        self.comm += started.elapsed();
        got?;
        Ok(&self.buf[HEADER..])
    }

    /// Reads one frame of `len` elements of `width` bytes into `self.buf`.
    fn recv_frame(&mut self, from: usize, len: usize, width: usize) -> Result<()> {
        let rank = self.rank;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(HEADER + len * width, 0);
        let result = (|| -> Result<()> {
            let conn = self.conn(from)?.as_mut();
            recv_all(conn, &mut buf[..HEADER])?;
            let head = buf
                .first_chunk::<HEADER>()
                .context("a frame without its header")?;
            let announced = u64::from_le_bytes(*head);
            if announced != len as u64 {
                bail!("a message of {announced} elements where {len} were expected");
            }
            recv_all(conn, &mut buf[HEADER..])?;
            Ok(())
        })()
        .with_context(|| format!("rank {rank} receiving from rank {from}"));
        self.buf = buf;
        if result.is_ok() {
            self.received += (len * width) as u64;
        }
        result
    }

    /// Ends every connection in order: this side's end of data to all, then the peer's end
    /// read from each, so that nothing is left in flight when the ranks exit (MPI keeps a
    /// message nobody received until it finalises).
    pub fn close(mut self) -> Result<()> {
        for c in self.conns.iter_mut().flatten() {
            c.shutdown_write().context("ending a data connection")?;
        }
        let rank = self.rank;
        for (r, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            let mut byte = [0u8; 1];
            match c.recv(&mut byte) {
                Ok(0) => {}
                Ok(_) => bail!("rank {r} sent more to rank {rank} than the kernel asked for"),
                Err(e) => return Err(anyhow!(e).context(format!("rank {rank} closing rank {r}"))),
            }
        }
        Ok(())
    }
}

fn send_all(conn: &mut dyn Connection, mut buf: &[u8]) -> Result<()> {
    while !buf.is_empty() {
        match conn.send(buf) {
            Ok(0) => bail!("the connection took no bytes"),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timeout_named(e)),
        }
    }
    Ok(())
}

fn recv_all(conn: &mut dyn Connection, mut buf: &mut [u8]) -> Result<()> {
    while !buf.is_empty() {
        match conn.recv(buf) {
            Ok(0) => bail!("the peer closed the connection"),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timeout_named(e)),
        }
    }
    Ok(())
}

fn timeout_named(e: io::Error) -> anyhow::Error {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        anyhow!("no progress within the I/O timeout ({e})")
    } else {
        e.into()
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Peers joined by in-memory byte streams, one set per rank, for tests without sockets.
    use super::*;
    use crate::transport::mem::{pair, perfect, BYTES};

    pub fn mesh(size: usize) -> Vec<Peers> {
        let mut ends: std::collections::HashMap<(usize, usize), Box<dyn Connection>> =
            std::collections::HashMap::new();
        for a in 0..size {
            for b in a + 1..size {
                let (x, y) = pair(BYTES, perfect(), perfect());
                ends.insert((a, b), Box::new(x));
                ends.insert((b, a), Box::new(y));
            }
        }
        let conns: Vec<Vec<Option<Box<dyn Connection>>>> = (0..size)
            .map(|a| (0..size).map(|b| ends.remove(&(a, b))).collect())
            .collect();
        conns
            .into_iter()
            .enumerate()
            .map(|(r, c)| Peers::new(r, c).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_f64_and_bytes_and_count_what_arrived() {
        let mut p = testing::mesh(2);
        let mut b = p.pop().unwrap();
        let mut a = p.pop().unwrap();
        a.send(1, &[1.5, -2.0, f64::MIN_POSITIVE]).unwrap();
        a.send_bytes(1, b"chunk").unwrap();
        assert_eq!(b.recv(0, 3).unwrap(), vec![1.5, -2.0, f64::MIN_POSITIVE]);
        assert_eq!(b.recv_bytes(0, 5).unwrap(), b"chunk");
        assert_eq!(b.take_comm().1, 3 * 8 + 5);
        assert_eq!(b.take_comm().1, 0);
    }

    #[test]
    fn a_message_of_another_size_is_an_error_naming_both_ranks() {
        let mut p = testing::mesh(2);
        let mut b = p.pop().unwrap();
        let mut a = p.pop().unwrap();
        a.send(1, &[1.0, 2.0]).unwrap();
        let err = format!("{:#}", b.recv(0, 3).unwrap_err());
        assert!(err.contains("rank 1 receiving from rank 0"), "{err}");
        assert!(err.contains("2 elements where 3"), "{err}");
    }
}
