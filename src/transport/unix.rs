//! Unix-domain stream sockets: the local IPC baseline, no network stack underneath.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use socket2::SockRef;

use super::{
    remaining, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, Listener,
    SocketOptions, Transport,
};
use crate::sys;

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
        }
    }
    fn listen(&self, _local: IpAddr) -> Result<Box<dyn Listener>> {
        let token = Cookie::random()?.to_hex();
        let path = std::env::temp_dir().join(format!(
            "wirebench-{}-{}.sock",
            std::process::id(),
            &token[..12]
        ));
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("binding Unix data socket {}", path.display()))?;
        Ok(Box::new(UnixDataListener {
            listener,
            path,
            opts: SocketOptions::default(),
        }))
    }
    fn connect(
        &self,
        _server: IpAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let mut stream = UnixStream::connect(endpoint).with_context(|| {
            format!("connecting to Unix socket {endpoint} (the unix transport needs the server on this host)")
        })?;
        sockopt::apply(&SockRef::from(&stream), opts, false)?;
        stream.set_write_timeout(Some(timeout))?;
        stream
            .write_all(&cookie.0)
            .context("sending the test cookie")?;
        Ok(Box::new(UnixConnection { stream }))
    }
}

struct UnixDataListener {
    listener: UnixListener,
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
        let deadline = Instant::now() + timeout;
        loop {
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            if !sys::wait_readable(self.listener.as_fd(), left)? {
                return Ok(None);
            }
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("accepting a Unix data connection"),
            };
            stream.set_read_timeout(Some(left.min(Duration::from_secs(5))))?;
            let mut got = [0u8; 16];
            if stream.read_exact(&mut got).is_err() || got != cookie.0 {
                continue;
            }
            stream.set_read_timeout(None)?;
            sockopt::apply(&SockRef::from(&stream), &self.opts, false)?;
            return Ok(Some(Box::new(UnixConnection { stream })));
        }
    }
}

struct UnixConnection {
    stream: UnixStream,
}

impl Connection for UnixConnection {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(timeout)
    }
    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.stream.set_nonblocking(on)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Write)
    }
    fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.stream))
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(&self.stream), requested, false)
    }
}
