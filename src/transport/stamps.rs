//! What a socket-backed connection keeps for path timing (`run --path-timing`): whether the
//! kernel's software stamps are on, whether the next sends ask for transmit stamps, and the
//! arrival stamp of the last data received. The system calls are `sys::timestamping`'s.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys::timestamping::{self, RxControl, TxStamp};

/// One connection's stamping state; boxed behind an Option so that a connection without path
/// timing carries one pointer and takes its usual send and recv calls.
#[derive(Default)]
pub(crate) struct Stamps {
    /// The transmit stamps every send asks for while on (0: none).
    flags: u32,
    /// The stamps a send asks for when asked to stamp ([`timestamping::tx_request_flags`]).
    request: u32,
    /// The arrival stamp of the data the last receive returned.
    pub last_rx: Option<i64>,
    control: RxControl,
}

impl Stamps {
    /// Turns stamping on for `fd` (`rx`: arrival stamps too; `ack`: TCP's TX_ACK asked for).
    pub fn enable(fd: BorrowedFd<'_>, rx: bool, ack: bool) -> io::Result<Box<Stamps>> {
        timestamping::enable(fd, rx)?;
        Ok(Box::new(Stamps {
            request: timestamping::tx_request_flags(ack),
            ..Stamps::default()
        }))
    }

    pub fn set(&mut self, on: bool) {
        self.flags = if on { self.request } else { 0 };
    }

    /// The transmit stamps the next send asks for (0: it goes as an ordinary send).
    #[inline]
    pub fn flags(&self) -> u32 {
        self.flags
    }

    #[inline]
    pub fn send(&self, fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
        timestamping::send_stamped(fd, buf, self.flags)
    }

    #[inline]
    pub fn recv(&mut self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
        let (n, stamp) = timestamping::recv_stamped(fd, buf, &mut self.control)?;
        if n > 0 {
            self.last_rx = stamp;
        }
        Ok(n)
    }
}

/// Reads `fd`'s transmit stamps into `out` (see [`timestamping::drain`]).
pub(crate) fn drain(fd: BorrowedFd<'_>, out: &mut [TxStamp]) -> io::Result<(usize, u64)> {
    timestamping::drain(fd, out)
}
