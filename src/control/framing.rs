//! Length-prefixed JSON frames on the control connection.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The
//! length is checked before anything is allocated, so garbage cannot make a peer allocate.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{de::DeserializeOwned, Serialize};

/// The largest control frame either side accepts, bytes.
pub const MAX_FRAME: u32 = 1 << 20;

pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<()> {
    let body = serde_json::to_vec(msg).context("encoding a control message")?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .context("control message too large")?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).context("sending a control message")?;
    w.flush().context("sending a control message")?;
    Ok(())
}

/// Reads one frame. Timeouts surface as errors that say so.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T> {
    receive(r).into_result()
}

/// What one attempt to read a frame gave: the protocol's state machines (see machine/) take
/// each kind of outcome as an input of its own, so a driver must not fold them into one error.
#[derive(Debug)]
pub enum Received<T> {
    Message(T),
    /// Bytes that are not a frame, or a frame that is not a message: why, as users see it.
    Garbage(String),
    TimedOut,
    Closed,
    Failed(anyhow::Error),
}

impl<T> Received<T> {
    /// The message, or the error `read_frame` has always given.
    pub fn into_result(self) -> Result<T> {
        match self {
            Received::Message(m) => Ok(m),
            Received::Garbage(why) => Err(anyhow::Error::msg(why)),
            Received::TimedOut => bail!("control connection timed out"),
            Received::Closed => bail!("control connection closed by peer"),
            Received::Failed(e) => Err(e),
        }
    }
}

/// Reads one frame, telling apart garbage, a timeout, the peer's close and a failure.
pub fn receive<T: DeserializeOwned>(r: &mut impl Read) -> Received<T> {
    let mut len = [0u8; 4];
    if let Err(e) = r.read_exact(&mut len) {
        return describe(e);
    }
    let len = u32::from_be_bytes(len);
    if len == 0 || len > MAX_FRAME {
        return Received::Garbage(format!(
            "malformed control frame (length {len}, limit {MAX_FRAME}): not a wirebench peer?"
        ));
    }
    let mut body = vec![0u8; len as usize];
    if let Err(e) = r.read_exact(&mut body) {
        return describe(e);
    }
    match serde_json::from_slice(&body) {
        Ok(m) => Received::Message(m),
        Err(e) => Received::Garbage(format!("malformed control message: {e}")),
    }
}

/// [`receive`] of a frame that must be complete by `deadline` (see [`read_frame_by`]).
pub fn receive_by<T: DeserializeOwned>(r: &mut impl TimedRead, deadline: Instant) -> Received<T> {
    receive(&mut Deadline { inner: r, deadline })
}

/// A source whose reads can be bounded in time: a control connection.
pub trait TimedRead: Read {
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;
}

impl TimedRead for TcpStream {
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

/// Reads one frame that must be complete by `deadline`, however its bytes are spread out.
/// A per-read timeout would let a peer that sends one byte just inside each timeout hold the
/// reader forever (a 1-byte-per-second hello was once accepted after 78 s): each read here
/// waits only for what is left of the frame's time.
pub fn read_frame_by<T: DeserializeOwned>(r: &mut impl TimedRead, deadline: Instant) -> Result<T> {
    receive_by(r, deadline).into_result()
}

struct Deadline<'a, R> {
    inner: &'a mut R,
    deadline: Instant,
}

impl<R: TimedRead> Read for Deadline<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.inner.set_read_timeout(Some(left))?;
        self.inner.read(buf)
    }
}

fn describe<T>(e: io::Error) -> Received<T> {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => Received::Closed,
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Received::TimedOut,
        _ => Received::Failed(anyhow::Error::new(e).context("control connection failed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::protocol::ClientMessage;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &ClientMessage::EndPoint).unwrap();
        let back: ClientMessage = read_frame(&mut buf.as_slice()).unwrap();
        assert_eq!(back, ClientMessage::EndPoint);
    }

    #[test]
    fn oversized_and_empty_frames_are_refused_before_allocating() {
        for len in [0u32, MAX_FRAME + 1, u32::MAX] {
            let bytes = len.to_be_bytes();
            let e = read_frame::<ClientMessage>(&mut bytes.as_slice()).unwrap_err();
            assert!(e.to_string().contains("malformed control frame"), "{e}");
        }
    }

    /// Gives one byte per read, each after `gap`, and honours the read timeout it is given
    /// the way a socket does (waits at most that long, then fails).
    struct Dribble {
        bytes: Vec<u8>,
        at: usize,
        gap: Duration,
        timeout: Option<Duration>,
    }

    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let t = self.timeout.expect("every read has a timeout");
            if t < self.gap {
                std::thread::sleep(t);
                return Err(io::ErrorKind::WouldBlock.into());
            }
            std::thread::sleep(self.gap);
            if self.at == self.bytes.len() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.bytes[self.at];
            self.at += 1;
            Ok(1)
        }
    }

    impl TimedRead for Dribble {
        fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
            self.timeout = timeout;
            Ok(())
        }
    }

    fn dribble(gap: Duration) -> Dribble {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &ClientMessage::EndPoint).unwrap();
        Dribble {
            bytes,
            at: 0,
            gap,
            timeout: None,
        }
    }

    #[test]
    fn a_frame_dribbled_past_its_deadline_is_cut_off() {
        // Every byte arrives well inside any per-read timeout; the frame as a whole cannot.
        let mut slow = dribble(Duration::from_millis(20));
        let total = slow.bytes.len();
        let deadline = Instant::now() + Duration::from_millis(100);
        let e = read_frame_by::<ClientMessage>(&mut slow, deadline).unwrap_err();
        assert!(e.to_string().contains("timed out"), "{e}");
        assert!(slow.at < total, "read all {total} bytes");
        // Past the deadline, nothing more is read at all.
        let before = slow.at;
        assert!(read_frame_by::<ClientMessage>(&mut slow, deadline).is_err());
        assert_eq!(slow.at, before);
    }

    #[test]
    fn a_frame_inside_its_deadline_is_read() {
        let mut quick = dribble(Duration::ZERO);
        let deadline = Instant::now() + Duration::from_secs(60);
        let m = read_frame_by::<ClientMessage>(&mut quick, deadline).unwrap();
        assert_eq!(m, ClientMessage::EndPoint);
        // Each read waited only for what was left of the frame's time, never more.
        assert!(quick.timeout.unwrap() <= Duration::from_secs(60));
    }

    #[test]
    fn truncated_and_invalid_frames_are_errors() {
        let e = read_frame::<ClientMessage>(&mut [0u8, 0, 0, 9, b'{'].as_slice()).unwrap_err();
        assert!(e.to_string().contains("closed"), "{e}");
        let mut buf = 4u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"nope");
        let e = read_frame::<ClientMessage>(&mut buf.as_slice()).unwrap_err();
        assert!(e.to_string().contains("malformed control message"), "{e}");
    }
}
