//! A data connection as patterns use it: whole messages, timeouts, and optional busy polling,
//! the same for every transport.

use std::io;
use std::time::{Duration, Instant};

use crate::transport::{Capabilities, Connection, Shape, TxStamp};

/// How many empty polls a spinning receive makes between clock reads.
const SPINS_PER_CLOCK_READ: u32 = 1024;

pub struct DataChannel {
    conn: Box<dyn Connection>,
    caps: Capabilities,
    spin: bool,
    read_timeout: Duration,
    /// What `new` was given: how long a send or receive may make no progress at all.
    io_timeout: Duration,
    /// Byte streams only: every message goes with a [`LENGTH_PREFIX`]-byte length before it
    /// (see [`DataChannel::set_framed`]).
    framed: bool,
    /// A framed message as written: its length, then its bytes.
    frame: Vec<u8>,
}

/// Bytes of the length before each message of a framed byte stream: big-endian, unsigned.
pub const LENGTH_PREFIX: usize = 4;

/// The error of a send or receive that made no progress within the I/O timeout.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "no data within the timeout")
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl DataChannel {
    /// Wraps a connection. With `spin`, receives busy-poll a non-blocking socket instead of
    /// sleeping in the kernel; `io_timeout` bounds every send and receive either way.
    pub fn new(
        mut conn: Box<dyn Connection>,
        caps: Capabilities,
        spin: bool,
        io_timeout: Duration,
    ) -> io::Result<DataChannel> {
        conn.set_write_timeout(Some(io_timeout))?;
        conn.set_read_timeout(Some(io_timeout))?;
        if spin {
            conn.set_nonblocking(true)?;
        }
        Ok(DataChannel {
            conn,
            caps,
            spin,
            read_timeout: io_timeout,
            io_timeout,
            framed: false,
            frame: Vec::new(),
        })
    }

    /// Frames every message of a byte stream with its length ([`LENGTH_PREFIX`] bytes), so
    /// that a message of 0 bytes is still something on the wire (a datagram of 0 bytes is a
    /// message by itself: on a transport with message boundaries this does nothing). Both
    /// ends of a connection must agree.
    pub fn set_framed(&mut self, on: bool) {
        self.framed = on && !self.caps.message_boundaries;
    }

    /// Whether messages go with their length (a byte stream told to by `set_framed`).
    pub fn framed(&self) -> bool {
        self.framed
    }

    /// The framed message: its length and its bytes, in `self.frame`.
    fn build_frame(&mut self, buf: &[u8]) -> io::Result<()> {
        let len = u32::try_from(buf.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a framed message holds at most 4 GiB - 1",
            )
        })?;
        self.frame.clear();
        self.frame.extend_from_slice(&len.to_be_bytes());
        self.frame.extend_from_slice(buf);
        Ok(())
    }

    /// The I/O timeout the channel was made with (`--io-timeout`): a pattern that shortens a
    /// socket's timeouts still fails once nothing moved for this long.
    pub fn io_timeout(&self) -> Duration {
        self.io_timeout
    }

    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    pub fn connection(&self) -> &dyn Connection {
        self.conn.as_ref()
    }

    /// Tells the transport what the pattern is about to do (see [`Shape`]).
    pub fn expect(&mut self, shape: Shape) {
        self.conn.expect(shape);
    }

    /// Whether receives and sends busy-poll a non-blocking socket.
    pub fn spinning(&self) -> bool {
        self.spin
    }

    /// Changes how long a receive may wait before it reports `TimedOut`.
    pub fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        self.read_timeout = t;
        if !self.spin {
            self.conn.set_read_timeout(Some(t))?;
        }
        Ok(())
    }

    /// Changes how long a blocking send may wait for buffer space before it returns what it
    /// took so far, or `TimedOut` when it took nothing. Spinning sockets never wait.
    pub fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        if !self.spin {
            self.conn.set_write_timeout(Some(t))?;
        }
        Ok(())
    }

    /// One receive call. Ok(0) is end of stream. Errors of kind `TimedOut` mean no data came
    /// within the read timeout.
    #[inline]
    pub fn recv_some(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.spin {
            return match self.conn.recv(buf) {
                Err(e) if is_timeout(&e) => Err(timed_out()),
                r => r,
            };
        }
        let mut spins = 0u32;
        let mut started: Option<Instant> = None;
        loop {
            match self.conn.recv(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    spins += 1;
                    if spins.is_multiple_of(SPINS_PER_CLOCK_READ) {
                        let t0 = *started.get_or_insert_with(Instant::now);
                        if t0.elapsed() >= self.read_timeout {
                            return Err(timed_out());
                        }
                    }
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// One send call; a non-blocking (spinning) socket retries until the kernel takes bytes.
    #[inline]
    pub fn send_some(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.conn.send(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.spin => {
                    std::hint::spin_loop()
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                r => return r,
            }
        }
    }

    /// One send call, never repeated: on a spinning socket `WouldBlock` when the kernel has no
    /// room, on a blocking one `TimedOut` when the write timeout passed with nothing taken.
    /// For a sender that keeps its own clock while the data path is stalled.
    #[inline]
    pub fn send_once(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.conn.send(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.spin => return Err(e),
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                r => return r,
            }
        }
    }

    /// Sends one whole message.
    #[inline]
    pub fn send_message(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.caps.message_boundaries {
            self.send_some(buf).map(|_| ())
        } else if self.framed {
            self.build_frame(buf)?;
            let frame = std::mem::take(&mut self.frame);
            let r = self.send_all(&frame);
            self.frame = frame;
            r
        } else {
            self.send_all(buf)
        }
    }

    /// Writes all of `buf` to a byte stream.
    #[inline]
    fn send_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut off = 0;
        while off < buf.len() {
            let n = self.send_some(&buf[off..])?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            off += n;
        }
        Ok(())
    }

    /// Sends one whole message in calls of at most `write_size` bytes each (0: one call), as
    /// an application that writes a message piece by piece does: on TCP without TCP_NODELAY
    /// the pieces after the first wait for Nagle's algorithm. A datagram cannot be split (the
    /// plan refuses it), so on a message transport the whole message is sent as one.
    #[inline]
    pub fn send_message_split(&mut self, buf: &[u8], write_size: usize) -> io::Result<()> {
        if write_size == 0 || self.caps.message_boundaries {
            return self.send_message(buf);
        }
        if self.framed {
            // The length goes in the first piece, as a header an application writes first.
            self.build_frame(buf)?;
            let frame = std::mem::take(&mut self.frame);
            let r = frame
                .chunks(write_size)
                .try_for_each(|piece| self.send_all(piece));
            self.frame = frame;
            return r;
        }
        if write_size >= buf.len() {
            return self.send_message(buf);
        }
        for piece in buf.chunks(write_size) {
            self.send_message(piece)?;
        }
        Ok(())
    }

    /// Receives one whole message into `buf`: exactly `buf.len()` bytes on a byte stream
    /// (framed: as many as its length says, at most `buf.len()`), one datagram on a message
    /// transport. Ok(None) is a clean end of stream before the message: on a reliable message
    /// transport (grpc) an empty receive, since no run sends an empty message there (the plan
    /// refuses size 0 on it); a datagram transport has no end of stream.
    #[inline]
    pub fn recv_message(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if self.caps.message_boundaries {
            return match self.recv_some(buf)? {
                0 if self.caps.reliable => Ok(None),
                n => Ok(Some(n)),
            };
        }
        if self.framed {
            let mut len = [0u8; LENGTH_PREFIX];
            if self.recv_exact(&mut len)?.is_none() {
                return Ok(None);
            }
            let len = u32::from_be_bytes(len) as usize;
            let Some(body) = buf.get_mut(..len) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a framed message of {len} bytes, larger than the {} expected",
                        buf.len()
                    ),
                ));
            };
            return match self.recv_exact(body)? {
                Some(n) => Ok(Some(n)),
                None if len == 0 => Ok(Some(0)),
                None => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection in the middle of a message",
                )),
            };
        }
        self.recv_exact(buf)
    }

    /// Exactly `buf.len()` bytes of a byte stream; Ok(None) at a clean end before the first.
    #[inline]
    fn recv_exact(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut off = 0;
        while off < buf.len() {
            match self.recv_some(&mut buf[off..])? {
                0 if off == 0 => return Ok(None),
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed the connection in the middle of a message",
                    ))
                }
                n => off += n,
            }
        }
        Ok(Some(off))
    }

    /// Puts the connection in non-blocking mode (or back) for a pattern that keeps its own
    /// clock and must never block in a call: the open-loop requester. A spinning channel is
    /// non-blocking already and stays so.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        if self.spin {
            return Ok(());
        }
        self.conn.set_nonblocking(on)
    }

    /// One send call on a non-blocking connection: Ok(None) when the kernel has no room.
    #[inline]
    pub fn try_send(&mut self, buf: &[u8]) -> io::Result<Option<usize>> {
        loop {
            match self.conn.send(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Ok(None),
                Ok(n) => return Ok(Some(n)),
                Err(e) => return Err(e),
            }
        }
    }

    /// One receive call on a non-blocking connection: Ok(None) when nothing is there, Ok(Some(0))
    /// at the end of the stream.
    #[inline]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match self.conn.recv(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Ok(None),
                Ok(n) => return Ok(Some(n)),
                Err(e) => return Err(e),
            }
        }
    }

    pub fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.shutdown_write()
    }

    /// Path timing: see [`Connection::enable_stamps`].
    pub fn enable_stamps(&mut self) -> io::Result<bool> {
        self.conn.enable_stamps()
    }

    /// Path timing: see [`Connection::stamp_sends`].
    #[inline]
    pub fn stamp_sends(&mut self, on: bool) {
        self.conn.stamp_sends(on);
    }

    /// Path timing: see [`Connection::rx_stamp`].
    #[inline]
    pub fn rx_stamp(&self) -> Option<i64> {
        self.conn.rx_stamp()
    }

    /// Path timing: see [`Connection::drain_tx_stamps`].
    pub fn drain_tx_stamps(&mut self, out: &mut [TxStamp]) -> io::Result<(usize, u64)> {
        self.conn.drain_tx_stamps(out)
    }
}
