//! A QUIC data connection: one bidirectional stream seen through the blocking
//! [`Connection`] trait, each call run on the connection's engine; errors as `io::Error`s
//! that say what the peer or the connection did; the lingering close when dropped.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use quinn::{
    ConnectionError, Endpoint, ReadError, RecvStream, SendStream, StoppedError, VarInt, WriteError,
};
use socket2::{SockRef, Socket};

use super::engine::EngineRef;
use super::CLOSE_DONE;
use crate::transport::{sockopt, Connection, EffectiveOptions, SocketOptions};

/// How long a dropped connection waits for the peer to acknowledge its data when no write
/// timeout was set.
const DEFAULT_LINGER: Duration = Duration::from_secs(10);

pub(super) struct QuicConnection {
    engine: Arc<EngineRef>,
    /// Always Some until drop hands them to the closing task.
    conn: Option<quinn::Connection>,
    send: Option<SendStream>,
    recv: Option<RecvStream>,
    /// The client's own endpoint; None on the server (the listener's serves all).
    endpoint: Option<Endpoint>,
    options: Arc<Socket>,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    nonblocking: bool,
    /// The peer finished its stream and every byte of it was read.
    eof: bool,
}

impl QuicConnection {
    /// A connection over `conn`'s stream (`send`, `recv`), blocking, without timeouts.
    /// `endpoint` is the client's own, kept as long as the connection; `options` the UDP
    /// socket underneath, for its buffer sizes.
    pub(super) fn new(
        engine: Arc<EngineRef>,
        conn: quinn::Connection,
        (send, recv): (SendStream, RecvStream),
        endpoint: Option<Endpoint>,
        options: Arc<Socket>,
    ) -> QuicConnection {
        QuicConnection {
            engine,
            conn: Some(conn),
            send: Some(send),
            recv: Some(recv),
            endpoint,
            options,
            read_timeout: None,
            write_timeout: None,
            nonblocking: false,
            eof: false,
        }
    }
}

fn read_error(e: ReadError) -> io::Error {
    match e {
        ReadError::Reset(code) => io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("the peer reset its QUIC stream (code {code})"),
        ),
        ReadError::ConnectionLost(c) => connection_lost(c),
        e => io::Error::other(format!("QUIC stream: {e}")),
    }
}

fn write_error(e: WriteError) -> io::Error {
    match e {
        WriteError::Stopped(code) => io::Error::new(
            io::ErrorKind::BrokenPipe,
            format!("the peer stopped reading the QUIC stream (code {code})"),
        ),
        WriteError::ConnectionLost(c) => connection_lost(c),
        e => io::Error::new(io::ErrorKind::BrokenPipe, format!("QUIC stream: {e}")),
    }
}

fn connection_lost(c: ConnectionError) -> io::Error {
    let kind = match c {
        ConnectionError::TimedOut => io::ErrorKind::TimedOut,
        _ => io::ErrorKind::ConnectionReset,
    };
    let why = match &c {
        ConnectionError::ApplicationClosed(a) => format!(
            "the peer closed the QUIC connection: {}",
            describe_close(&a.reason, &a.error_code.to_string())
        ),
        ConnectionError::TimedOut => "the QUIC connection went idle and timed out".to_owned(),
        e => format!("QUIC connection lost: {e}"),
    };
    io::Error::new(kind, why)
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "no progress within the timeout")
}

/// Awaits `f`, giving up after `limit` (when there is one).
async fn within<F: Future>(limit: Option<Duration>, f: F) -> io::Result<F::Output> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.map_err(|_| timed_out()),
        None => Ok(f.await),
    }
}

/// Polls `f` once after letting the runtime take one turn (its drivers move packets);
/// None if `f` is not ready.
async fn one_turn<T>(mut f: impl FnMut(&mut std::task::Context<'_>) -> Poll<T>) -> Option<T> {
    tokio::task::yield_now().await;
    std::future::poll_fn(|cx| {
        Poll::Ready(match f(cx) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        })
    })
    .await
}

fn would_block() -> io::Error {
    io::Error::from(io::ErrorKind::WouldBlock)
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "QUIC connection already closed",
    )
}

impl Connection for QuicConnection {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let send = self.send.as_mut().ok_or_else(gone)?;
        if self.nonblocking {
            return match self.engine.run(one_turn(|cx| {
                std::pin::Pin::new(&mut *send).poll_write(cx, buf)
            })) {
                Some(r) => r.map_err(write_error),
                None => Err(would_block()),
            };
        }
        let limit = self.write_timeout;
        self.engine
            .run(async { within(limit, send.write(buf)).await })?
            .map_err(write_error)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        let recv = self.recv.as_mut().ok_or_else(gone)?;
        let got = if self.nonblocking {
            match self.engine.run(one_turn(|cx| recv.poll_read(cx, buf))) {
                // poll_read reports the end of the stream as 0 bytes.
                Some(r) => r.map(|n| (n > 0 || buf.is_empty()).then_some(n)),
                None => return Err(would_block()),
            }
        } else {
            let limit = self.read_timeout;
            self.engine
                .run(async { within(limit, recv.read(buf)).await })?
        };
        match got.map_err(read_error)? {
            Some(n) => Ok(n),
            None => {
                self.eof = true;
                Ok(0)
            }
        }
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.write_timeout = timeout;
        Ok(())
    }

    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    /// Finishes the stream and waits until the peer acknowledged all of it.
    fn shutdown_write(&mut self) -> io::Result<()> {
        let send = self.send.as_mut().ok_or_else(gone)?;
        if send.finish().is_err() {
            return Ok(()); // finished before
        }
        let stopped = send.stopped();
        let limit = self.write_timeout;
        match self.engine.run(async { within(limit, stopped).await })? {
            Ok(None) => Ok(()),
            Ok(Some(code)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("the peer stopped reading the QUIC stream (code {code})"),
            )),
            Err(StoppedError::ConnectionLost(c)) => Err(connection_lost(c)),
            Err(e) => Err(io::Error::other(format!("QUIC stream: {e}"))),
        }
    }

    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        sockopt::read_back(&SockRef::from(self.options.as_ref()), requested, false)
    }
}

impl Drop for QuicConnection {
    /// Like closing a TCP socket: the data written so far is still delivered. The stream is
    /// finished, reading stops, and the connection closes once the peer has acknowledged
    /// everything (or the write timeout passed), on the runtime, without holding up the
    /// caller.
    fn drop(&mut self) {
        let (Some(conn), Some(mut send), Some(mut recv)) =
            (self.conn.take(), self.send.take(), self.recv.take())
        else {
            return;
        };
        let linger = self.write_timeout.unwrap_or(DEFAULT_LINGER);
        let keep = (self.engine.clone(), self.endpoint.take());
        self.engine.spawn(async move {
            let _ = send.finish();
            // Read no more: unread data is discarded and the peer told to stop sending (a
            // no-op when the stream was read to its end).
            let _ = recv.stop(VarInt::from(CLOSE_DONE));
            let _ = tokio::time::timeout(linger, send.stopped()).await;
            conn.close(VarInt::from(CLOSE_DONE), b"done");
            // Let the connection's driver send the close before the runtime may go.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            drop(keep);
        });
        // Put the end of the stream on the wire now rather than when the background thread
        // next drives the runtime: the peer may be waiting for it.
        if tokio::runtime::Handle::try_current().is_err() {
            self.engine.run(async {
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
            });
        }
    }
}

pub(super) fn describe_close(reason: &[u8], code: &str) -> String {
    let text = String::from_utf8_lossy(reason);
    let text = text.trim();
    if text.is_empty() {
        code.to_owned()
    } else {
        format!("{} ({code})", text.escape_debug())
    }
}
