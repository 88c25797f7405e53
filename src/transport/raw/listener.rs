//! The server side: a listener on a port of its own that turns admitted HELLOs into connections.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::SockRef;

use super::connection::RawConnection;
use super::handshake::{answer_hellos, Accepted, Hello};
use super::iface::{peer_mac, Iface};
use super::socket::{next_port, open_socket};
use super::wire::{format_mac, handshake_frame, ACK, ETHERTYPE, HEADER};
use crate::sys::packet;
use crate::transport::{remaining, sockopt, Connection, Cookie, Listener, SocketOptions};

pub(super) struct RawListener {
    iface: Iface,
    port: u16,
    opts: SocketOptions,
    accepted: Arc<Accepted>,
    hellos: mpsc::Receiver<Hello>,
    stop: Arc<AtomicBool>,
}

impl RawListener {
    /// A listener on `iface` for HELLOs from `peer`'s MAC alone, answered by a thread of its
    /// own until the listener is dropped.
    pub(super) fn open(iface: Iface, peer: IpAddr) -> Result<RawListener> {
        let peer_mac = peer_mac(&iface, peer)?;
        let port = next_port()?;
        let fd = Arc::new(open_socket(&iface, port)?);
        let accepted = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, hellos) = mpsc::sync_channel(HELLO_QUEUE);
        {
            let (fd, accepted, stop) = (Arc::clone(&fd), Arc::clone(&accepted), Arc::clone(&stop));
            let (index, mtu) = (iface.index, iface.mtu);
            thread::Builder::new()
                .name("wb-raw-hello".into())
                .spawn(move || answer_hellos(&fd, index, mtu, peer_mac, &accepted, &stop, &tx))
                .context("starting the raw handshake thread")?;
        }
        Ok(RawListener {
            iface,
            port,
            opts: SocketOptions::default(),
            accepted,
            hellos,
            stop,
        })
    }
}

impl Drop for RawListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// New HELLOs waiting for accept; further ones are dropped (their clients repeat them), so a
/// flood of HELLOs while nobody accepts costs no memory.
const HELLO_QUEUE: usize = 64;

impl Listener for RawListener {
    fn endpoint(&self) -> String {
        format!(
            "{}/{}/{}",
            format_mac(self.iface.mac),
            self.port,
            self.iface.mtu
        )
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        self.opts = opts.clone();
        Ok(())
    }
    fn accept(
        &mut self,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Option<Box<dyn Connection>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            let (h, from, got, client_mtu) = match self.hellos.recv_timeout(left) {
                Ok(hello) => hello,
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the raw handshake thread stopped")
                }
            };
            if got != cookie.0 {
                continue;
            }
            let already = self
                .accepted
                .lock()
                .map_err(|_| anyhow::anyhow!("raw handshake state poisoned"))?
                .contains_key(&(from, h.src_port));
            if already {
                continue; // a repeat that raced with our own ACK
            }
            let mut conn_port = next_port()?;
            while conn_port == self.port || conn_port == h.src_port {
                conn_port = conn_port.wrapping_add(1).max(1);
            }
            let iface = self.iface.clone();
            let fd = open_socket(&iface, conn_port)?;
            sockopt::apply(&SockRef::from(&fd), &self.opts, false)?;
            // Recorded before the ACK goes out, so a repeated HELLO finds it.
            self.accepted
                .lock()
                .map_err(|_| anyhow::anyhow!("raw handshake state poisoned"))?
                .insert((from, h.src_port), conn_port);
            let ack = handshake_frame(ACK, h.src_port, conn_port, cookie, iface.mtu);
            packet::send_to(fd.as_fd(), &ack, iface.index, ETHERTYPE, from)
                .context("answering a raw HELLO")?;
            let frame_mtu = iface.mtu.min(client_mtu.max(HEADER + 64));
            return Ok(Some(Box::new(RawConnection::new(
                iface, fd, from, h.src_port, conn_port, frame_mtu,
            ))));
        }
    }
}
