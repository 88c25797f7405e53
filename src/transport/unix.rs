//! Unix-domain stream sockets: the local IPC baseline, no network stack underneath.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use socket2::SockRef;

use super::bytestream::{present_cookie, ByteStream, CookieGate};
use super::{sockopt, Capabilities, Connection, Cookie, Listener, SocketOptions, Transport};

pub struct Unix;

impl Transport for Unix {
    fn name(&self) -> &'static str {
        "unix"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            message_boundaries: false,
            max_message: u64::MAX,
            tcp_options: false,
            host_local: true,
            syscall_batching: false,
            rcvlowat: false,
        }
    }
    /// The socket is a path on the server's host: `peer` is not an address it could check (the
    /// transport itself keeps the data on this host).
    fn listen(&self, _local: IpAddr, _peer: IpAddr) -> Result<Box<dyn Listener>> {
        let token = Cookie::random()?.to_hex();
        let path = std::env::temp_dir().join(format!(
            "wirebench-{}-{}.sock",
            std::process::id(),
            &token[..12]
        ));
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("binding Unix data socket {}", path.display()))?;
        listener
            .set_nonblocking(true)
            .context("making the Unix data listener non-blocking")?;
        Ok(Box::new(UnixDataListener {
            listener,
            gate: CookieGate::new(),
            path,
            opts: SocketOptions::default(),
        }))
    }
    fn connect(
        &self,
        _control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let mut stream = UnixStream::connect(endpoint).with_context(|| {
            format!("connecting to Unix socket {endpoint} (the unix transport needs the server on this host)")
        })?;
        sockopt::apply(&SockRef::from(&stream), opts, false)?;
        present_cookie(&mut stream, cookie, timeout)?;
        Ok(Box::new(ByteStream::new(stream, false)))
    }
}

struct UnixDataListener {
    listener: UnixListener,
    gate: CookieGate<UnixStream>,
    path: PathBuf,
    opts: SocketOptions,
}

impl Drop for UnixDataListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Listener for UnixDataListener {
    fn endpoint(&self) -> String {
        self.path.display().to_string()
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
        let listener = &self.listener;
        self.gate.accept(
            listener.as_fd(),
            || listener.accept().map(|(s, _)| Some(s)),
            cookie,
            timeout,
            &self.opts,
            false,
            "Unix",
        )
    }
}
