//! `wirebench relay`: a user-space TCP relay to put in a path, so that a test can measure
//! what one more hop through a daemon or proxy costs (PVM's daemon route against its direct
//! route in the seed studies; a sidecar proxy today).
//!
//! Each accepted connection gets a connection to the forward address and two threads that
//! copy bytes through user space with read and write, as such a daemon does. Both sockets
//! have Nagle off, so the relay adds its copying and scheduling, not a coalescing delay.
//! Byte counts per connection are logged so that a test can check that nothing was lost.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::control::client::resolve;
use crate::control::server::DEFAULT_PORT;

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to accept connections on, [HOST:]PORT (default host 0.0.0.0).
    #[arg(long)]
    pub listen: String,
    /// Where to forward each connection, HOST[:PORT] (default port 5320).
    #[arg(long)]
    pub forward: String,
    /// Bytes copied per read and write call (binary suffixes).
    #[arg(long, default_value = "128K", value_parser = crate::cli::parse_bytes)]
    pub buffer: u64,
    /// Timeout of connecting to the forward address, e.g. 5s.
    #[arg(long, default_value = "10s", value_parser = crate::cli::parse_duration)]
    pub connect_timeout: Duration,
    /// Print one line per closed connection with the bytes relayed each way.
    #[arg(long, short)]
    pub verbose: bool,
}

/// A running relay: its listener and what it forwards to.
pub struct Relay {
    listener: TcpListener,
    forward: SocketAddr,
    buffer: usize,
    connect_timeout: Duration,
    log: bool,
}

impl Relay {
    pub fn bind(listen: SocketAddr, forward: SocketAddr, buffer: usize) -> Result<Relay> {
        let listener =
            TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
        Ok(Relay {
            listener,
            forward,
            buffer: buffer.max(1),
            connect_timeout: Duration::from_secs(10),
            log: false,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Relays connections until the process ends.
    pub fn serve(self) -> Result<()> {
        for conn in self.listener.incoming() {
            let client = match conn {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("wirebench relay: accept failed: {e}");
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let (forward, buffer, timeout, log) =
                (self.forward, self.buffer, self.connect_timeout, self.log);
            let _ = thread::Builder::new()
                .name("wb-relay".into())
                .spawn(move || relay_one(client, forward, buffer, timeout, log));
        }
        Ok(())
    }

    /// Relays in a background thread (tests).
    pub fn spawn(self) -> Result<SocketAddr> {
        let addr = self.local_addr()?;
        thread::Builder::new()
            .name("wb-relay-accept".into())
            .spawn(move || self.serve())?;
        Ok(addr)
    }
}

fn relay_one(client: TcpStream, forward: SocketAddr, buffer: usize, timeout: Duration, log: bool) {
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let server = match TcpStream::connect_timeout(&forward, timeout) {
        Ok(s) => s,
        Err(e) => {
            if log {
                eprintln!("wirebench relay: {peer}: cannot reach {forward}: {e}");
            }
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let up = Arc::new(AtomicU64::new(0));
    let down = Arc::new(AtomicU64::new(0));
    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => return,
    };
    let up_count = Arc::clone(&up);
    let upstream = thread::Builder::new()
        .name("wb-relay-up".into())
        .spawn(move || pump(c2, s2, buffer, &up_count));
    pump(server, client, buffer, &down);
    if let Ok(h) = upstream {
        let _ = h.join();
    }
    if log {
        eprintln!(
            "wirebench relay: {peer} -> {forward} closed: {} bytes up (to {forward}), {} bytes down",
            up.load(Ordering::Relaxed),
            down.load(Ordering::Relaxed)
        );
    }
}

/// Copies `from` to `to` until end of stream or an error, counting bytes into `count`; then
/// passes the end on (half-close) so the other direction can finish on its own.
fn pump(mut from: TcpStream, mut to: TcpStream, buffer: usize, count: &AtomicU64) {
    let mut buf = vec![0u8; buffer];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // A reset on one side resets the other: nothing half-open stays behind.
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        };
        if to.write_all(&buf[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
        count.fetch_add(n as u64, Ordering::Relaxed);
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// `wirebench relay`.
pub fn run(a: RelayArgs) -> Result<()> {
    let listen = if a.listen.chars().all(|c| c.is_ascii_digit()) {
        format!("0.0.0.0:{}", a.listen)
    } else {
        a.listen.clone()
    };
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen '{}': expected [HOST:]PORT", a.listen))?;
    let forward = resolve(&a.forward, DEFAULT_PORT)?;
    let mut relay = Relay::bind(
        listen,
        forward,
        usize::try_from(a.buffer).unwrap_or(1 << 17),
    )?;
    relay.connect_timeout = a.connect_timeout;
    relay.log = a.verbose;
    eprintln!(
        "wirebench relay on {} forwarding to {forward} (user-space copy, {} B per call; clients need --one-port)",
        relay.local_addr()?,
        relay.buffer
    );
    relay.serve()
}
