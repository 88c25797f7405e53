//! One established connection: messages cut into numbered frames, and frames taken back in.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use socket2::SockRef;

use super::iface::Iface;
use super::reassembly::Reassembly;
use super::wire::{Header, DATA, ETHERTYPE, HEADER};
use crate::sys::{packet, timestamping};
use crate::transport::{sockopt, Connection, EffectiveOptions, LinkCounters, SocketOptions};

/// One established raw data path: this end's port and socket, the peer's MAC and port.
pub(super) struct RawConnection {
    iface: Iface,
    fd: OwnedFd,
    peer_mac: [u8; 6],
    peer_port: u16,
    port: u16,
    /// Message bytes per frame: the smaller MTU of the two ends, less the header.
    payload: usize,
    next_seq: u32,
    next_message: u32,
    /// Send and receive frame buffers, one frame each, allocated once.
    tx: Vec<u8>,
    rx: Vec<u8>,
    /// Scratch for the kernel's control messages, and the arrival stamp of the frame that
    /// completed the last message received.
    rx_control: [u64; 8],
    last_stamp: Option<Duration>,
    reassembly: Reassembly,
    /// Path timing: the transmit stamps asked for once enabled, and those the next sends
    /// ask for (0: none); a message's stamps are its last frame's.
    stamp_request: u32,
    stamp_flags: u32,
}

impl RawConnection {
    pub(super) fn new(
        iface: Iface,
        fd: OwnedFd,
        peer_mac: [u8; 6],
        peer_port: u16,
        port: u16,
        frame_mtu: usize,
    ) -> RawConnection {
        RawConnection {
            iface,
            fd,
            peer_mac,
            peer_port,
            port,
            payload: frame_mtu - HEADER,
            next_seq: 0,
            next_message: 0,
            tx: vec![0u8; frame_mtu],
            rx: vec![0u8; frame_mtu],
            rx_control: [0; 8],
            last_stamp: None,
            reassembly: Reassembly::new(frame_mtu - HEADER),
            stamp_request: 0,
            stamp_flags: 0,
        }
    }

    /// Takes one frame into `buf`; Some(length) when it completed a message.
    fn take_frame(&mut self, n: usize, from: [u8; 6], buf: &mut [u8]) -> Option<usize> {
        let h = Header::read(&self.rx[..n])?;
        if h.kind != DATA
            || h.dst_port != self.port
            || h.src_port != self.peer_port
            || from != self.peer_mac
            || h.fragments == 0
            || h.fragment >= h.fragments
        {
            return None;
        }
        self.reassembly.take(h, &self.rx[HEADER..n], buf)
    }
}

impl Connection for RawConnection {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fragments = buf.len().div_ceil(self.payload).max(1);
        let fragments = u16::try_from(fragments).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "message too large for the raw transport",
            )
        })?;
        let message = self.next_message;
        self.next_message = self.next_message.wrapping_add(1);
        for i in 0..fragments {
            let start = usize::from(i) * self.payload;
            let chunk = &buf[start.min(buf.len())..(start + self.payload).min(buf.len())];
            Header {
                kind: DATA,
                dst_port: self.peer_port,
                src_port: self.port,
                seq: self.next_seq,
                message,
                fragment: i,
                fragments,
                length: buf.len() as u32,
            }
            .write(&mut self.tx[..HEADER]);
            self.tx[HEADER..HEADER + chunk.len()].copy_from_slice(chunk);
            if self.stamp_flags != 0 && i + 1 == fragments {
                packet::send_to_stamped(
                    self.fd.as_fd(),
                    &self.tx[..HEADER + chunk.len()],
                    self.iface.index,
                    ETHERTYPE,
                    self.peer_mac,
                    self.stamp_flags,
                )?;
            } else {
                packet::send_to(
                    self.fd.as_fd(),
                    &self.tx[..HEADER + chunk.len()],
                    self.iface.index,
                    ETHERTYPE,
                    self.peer_mac,
                )?;
            }
            // Only a frame that left takes a number: a refused send is no gap on the link.
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        Ok(buf.len())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let (n, from, stamp) =
                packet::recv_from_stamped(self.fd.as_fd(), &mut self.rx, &mut self.rx_control)?;
            if let Some(len) = self.take_frame(n, from, buf) {
                self.last_stamp = stamp;
                return Ok(len);
            }
        }
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        SockRef::from(&self.fd).set_read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        SockRef::from(&self.fd).set_write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        SockRef::from(&self.fd).set_nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.fd), requested, false)
    }
    fn arrival_stamp(&self) -> Option<Duration> {
        self.last_stamp
    }
    fn link_counters(&self) -> Option<LinkCounters> {
        Some(self.reassembly.counters())
    }
    fn enable_stamps(&mut self) -> io::Result<bool> {
        // Arrivals are stamped already (SO_TIMESTAMPNS, `arrival_stamp`): transmit stamps only.
        timestamping::enable(self.fd.as_fd(), false)?;
        self.stamp_request = timestamping::tx_request_flags(false);
        Ok(true)
    }
    fn stamp_sends(&mut self, on: bool) {
        self.stamp_flags = if on { self.stamp_request } else { 0 };
    }
    fn rx_stamp(&self) -> Option<i64> {
        self.last_stamp
            .and_then(|d| i64::try_from(d.as_nanos()).ok())
            .filter(|_| self.stamp_request != 0)
    }
    fn drain_tx_stamps(
        &mut self,
        out: &mut [crate::transport::TxStamp],
    ) -> io::Result<(usize, u64)> {
        if self.stamp_request == 0 {
            return Ok((0, 0));
        }
        timestamping::drain(self.fd.as_fd(), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 7];
    const PAYLOAD: usize = 100;

    /// A connection whose receive path is fed by hand (its descriptor is never used), and
    /// the buffer messages are reassembled into.
    struct Fed {
        c: RawConnection,
        buf: Vec<u8>,
    }

    impl Fed {
        fn new() -> Fed {
            let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
            let iface = Iface {
                name: "test".into(),
                index: 0,
                mac: [2, 0, 0, 0, 0, 9],
                mtu: HEADER + PAYLOAD,
            };
            Fed {
                c: RawConnection::new(iface, fd, PEER, 7, 9, HEADER + PAYLOAD),
                buf: vec![0; 8 * PAYLOAD],
            }
        }

        /// Hands over frame `fragment` of `fragments` of a message whose bytes are all
        /// `message as u8`; Some(length) when that completed the message.
        fn feed(&mut self, seq: u32, message: u32, fragment: u16, fragments: u16) -> Option<usize> {
            let length = usize::from(fragments) * PAYLOAD - 1;
            let body = (length - usize::from(fragment) * PAYLOAD).min(PAYLOAD);
            Header {
                kind: DATA,
                dst_port: 9,
                src_port: 7,
                seq,
                message,
                fragment,
                fragments,
                length: length as u32,
            }
            .write(&mut self.c.rx[..HEADER]);
            self.c.rx[HEADER..HEADER + body].fill(message as u8);
            let got = self.c.take_frame(HEADER + body, PEER, &mut self.buf);
            if let Some(n) = got {
                assert!(
                    self.buf[..n].iter().all(|&b| b == message as u8),
                    "message {message}"
                );
            }
            got
        }
    }

    #[test]
    fn reassembly_counts_incomplete_messages_and_late_frames() {
        let mut c = Fed::new();
        let whole = Some(3 * PAYLOAD - 1);
        // Message 0 whole; message 1 misses its middle frame (seq 4).
        assert_eq!(c.feed(0, 0, 0, 3), None);
        assert_eq!(c.feed(1, 0, 1, 3), None);
        assert_eq!(c.feed(2, 0, 2, 3), whole);
        assert_eq!(c.feed(3, 1, 0, 3), None);
        assert_eq!(c.feed(5, 1, 2, 3), None);
        // Message 2's first frame gives message 1 up; its frames in another order still do.
        assert_eq!(c.feed(7, 2, 1, 3), None);
        assert_eq!(c.feed(6, 2, 0, 3), None);
        // A duplicate is not taken for the missing frame.
        assert_eq!(c.feed(6, 2, 0, 3), None);
        assert_eq!(c.feed(8, 2, 2, 3), whole);
        // Message 4 (one frame) overtakes message 3 (one frame): 3 is whole and still
        // delivered, as a late datagram is.
        assert_eq!(c.feed(10, 4, 0, 1), Some(PAYLOAD - 1));
        assert_eq!(c.feed(9, 3, 0, 1), Some(PAYLOAD - 1));
        // Message 6 overtakes message 5 (two frames): 5's late frame is dropped.
        assert_eq!(c.feed(12, 6, 0, 1), Some(PAYLOAD - 1));
        assert_eq!(c.feed(11, 5, 0, 2), None);
        // Message 7 is cut off when the counters are read.
        assert_eq!(c.feed(13, 7, 0, 2), None);
        let k = c.c.link_counters().unwrap();
        assert_eq!(k.received, 13, "every frame but seq 4, once");
        assert_eq!(k.lost, 1);
        assert_eq!(k.reordered, 3, "seq 6 after 7, 9 after 10, 11 after 12");
        assert_eq!(k.duplicated, 1);
        assert_eq!(k.late, 1, "seq 11");
        assert_eq!(k.messages_incomplete, 2, "message 1, and 7 still waiting");
    }

    #[test]
    fn frames_of_other_connections_are_not_counted() {
        let mut fed = Fed::new();
        assert_eq!(fed.feed(0, 0, 0, 1), Some(PAYLOAD - 1));
        let c = &mut fed.c;
        Header {
            kind: DATA,
            dst_port: 9,
            src_port: 8, // another peer port
            seq: 1,
            message: 1,
            fragment: 0,
            fragments: 1,
            length: 10,
        }
        .write(&mut c.rx[..HEADER]);
        let mut buf = [0u8; PAYLOAD];
        assert_eq!(c.take_frame(HEADER + 10, PEER, &mut buf), None);
        let k = c.link_counters().unwrap();
        assert_eq!((k.received, k.lost), (1, 0));
    }
}
