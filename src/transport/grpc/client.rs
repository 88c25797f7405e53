//! The client side: one tonic channel (one HTTP/2 connection) per data connection on its own
//! engine; unary calls started by `send` and collected in order by `recv`; an Upload or a
//! Download stream for a one-way pattern.

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use bytes::Bytes;
use http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status, Streaming};

use super::codec::{TimedCodec, Times};
use super::io::Stream;
use super::server::read_times;
use super::wire::{self, Payload, UploadSummary};
use super::{
    default_shape, ALPN_H2, CONNECTION_WINDOW, COOKIE_KEY, HELLO_KEY, MAX_DECODED, MAX_IN_FLIGHT,
    STREAM_WINDOW, UPLOAD_QUEUE,
};
use crate::model::rpc::Serialisation;
use crate::model::vocab::Encoding;
use crate::transport::quic::engine::{Engine, EngineRef};
use crate::transport::tls::{self, Trust};
use crate::transport::{sockopt, Connection, Cookie, EffectiveOptions, Shape, SocketOptions};

type Grpc = tonic::client::Grpc<Channel>;

/// How a client connection checks the server's certificate (`--tls`): against `trust`
/// (`--tls-ca`), or else exactly the one with SHA-256 `fingerprint`.
pub(super) struct Secure<'a> {
    pub(super) trust: Option<&'a Trust>,
    pub(super) fingerprint: [u8; 32],
}
type CallResult = std::result::Result<Payload, Status>;
/// The running Upload call, which answers with the server's summary.
type UploadCall = JoinHandle<std::result::Result<UploadSummary, Status>>;

/// An outstanding call: still running, or its answer kept until `recv` takes it.
enum Slot {
    Running(JoinHandle<CallResult>),
    Done(CallResult),
}

pub(super) struct GrpcClient {
    engine: Arc<EngineRef>,
    grpc: Grpc,
    times: Arc<Times>,
    /// The test cookie as metadata; None against another implementation's service.
    cookie: Option<MetadataValue<tonic::metadata::Ascii>>,
    encoding: Encoding,
    shape: Shape,
    calls: VecDeque<Slot>,
    upload: Option<(mpsc::Sender<Payload>, UploadCall)>,
    download: Option<Streaming<Payload>>,
    current: Bytes,
    /// A duplicate of the TCP socket, for its options.
    socket: Option<Arc<Socket>>,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    nonblocking: bool,
}

fn status_error(s: &Status) -> io::Error {
    let kind = match s.code() {
        tonic::Code::PermissionDenied => io::ErrorKind::PermissionDenied,
        tonic::Code::DeadlineExceeded => io::ErrorKind::TimedOut,
        tonic::Code::Unavailable | tonic::Code::Cancelled => io::ErrorKind::ConnectionReset,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(
        kind,
        format!("gRPC call failed: {:?}: {}", s.code(), s.message()),
    )
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no {what} within the timeout"),
    )
}

/// The TCP socket of the channel, with `opts` applied before it connects.
fn tcp_socket(addr: SocketAddr, opts: &SocketOptions) -> Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .context("creating a TCP socket")?;
    sockopt::apply(&SockRef::from(&sock), opts, false)?;
    let unspecified = match addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    sock.bind(&SocketAddr::new(unspecified, 0).into())?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

impl GrpcClient {
    /// Opens a channel to `addr` and, with a cookie, says hello with it; returns once the
    /// server admitted the connection (or, without a cookie, once HTTP/2 is up).
    pub(super) fn connect(
        addr: SocketAddr,
        opts: &SocketOptions,
        cookie: Option<&Cookie>,
        encoding: Encoding,
        secure: Option<Secure<'_>>,
        timeout: Duration,
    ) -> Result<GrpcClient> {
        let engine = Engine::start()?;
        let kept: Arc<Mutex<Option<Socket>>> = Arc::new(Mutex::new(None));
        let keep = kept.clone();
        let opts = opts.clone();
        // Why the certificate was refused, as the verifier saw it.
        let failure = Arc::new(Mutex::new(None));
        let tls = match &secure {
            Some(s) => {
                let (config, name) =
                    tls::client_config(s.trust, s.fingerprint, addr.ip(), &failure, ALPN_H2)?;
                let name = ServerName::try_from(name)
                    .map_err(|e| anyhow!("the server name for TLS: {e}"))?;
                Some((TlsConnector::from(Arc::new(config)), name))
            }
            None => None,
        };
        let connector = tower::service_fn(move |_: http::Uri| {
            let made = tcp_socket(addr, &opts).and_then(|s| {
                if let Ok(mut k) = keep.lock() {
                    *k = Some(s.try_clone()?);
                }
                Ok(s)
            });
            let tls = tls.clone();
            async move {
                let sock = made.map_err(|e| io::Error::other(format!("{e:#}")))?;
                let std: std::net::TcpStream = sock.into();
                let stream = tokio::net::TcpSocket::from_std_stream(std)
                    .connect(addr)
                    .await?;
                stream.set_nodelay(true)?;
                let stream = match tls {
                    None => Stream::Plain(stream),
                    Some((connector, name)) => {
                        let s = connector.connect(name, stream).await?;
                        Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(s)))
                    }
                };
                Ok::<_, io::Error>(TokioIo::new(stream))
            }
        });
        // tonic's own connector refuses an https URI without its TLS features, so the URI
        // the connector gets says http and the requests' origin says https.
        let scheme = if secure.is_some() { "https" } else { "http" };
        let origin: http::Uri = format!("{scheme}://{addr}")
            .parse()
            .context("the gRPC endpoint's URI")?;
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .context("the gRPC endpoint's URI")?
            .origin(origin)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .buffer_size(MAX_IN_FLIGHT + 8)
            .tcp_nodelay(true);
        let cookie = match cookie {
            Some(c) => Some(
                MetadataValue::try_from(c.to_hex())
                    .map_err(|_| anyhow!("the test cookie is not valid metadata"))?,
            ),
            None => None,
        };
        let times = Times::new();
        let hello_cookie = cookie.clone();
        let codec = TimedCodec::<Payload, Payload>::new(&times);
        let outcome = engine.run(async {
            tokio::time::timeout(timeout, async {
                let channel = endpoint
                    .connect_with_connector(connector)
                    .await
                    .map_err(|e| {
                        let why = tls::failure_or(&failure, source_chain(&e));
                        if secure.is_some() {
                            anyhow!("gRPC TLS connection to {addr} failed: {why}")
                        } else {
                            anyhow!("gRPC connection to {addr} failed: {why}")
                        }
                    })?;
                let mut grpc = Grpc::new(channel)
                    .max_decoding_message_size(MAX_DECODED)
                    .max_encoding_message_size(MAX_DECODED);
                if let Some(c) = hello_cookie {
                    let mut req = Request::new(Payload::default());
                    req.metadata_mut().insert(COOKIE_KEY, c);
                    req.metadata_mut()
                        .insert(HELLO_KEY, MetadataValue::from_static("1"));
                    grpc.ready()
                        .await
                        .map_err(|e| anyhow!("gRPC connection to {addr}: {e}"))?;
                    grpc.unary(req, PathAndQuery::from_static(wire::CALL), codec)
                        .await
                        .map_err(|s| {
                            anyhow!(
                                "gRPC data connection to {addr} not admitted: {:?}: {}",
                                s.code(),
                                s.message()
                            )
                        })?;
                }
                Ok::<_, anyhow::Error>(grpc)
            })
            .await
        });
        let grpc = match outcome {
            Ok(r) => r?,
            Err(_) => bail!(
                "gRPC connection to {addr}: no answer within {}",
                crate::units::format_seconds(timeout.as_secs_f64())
            ),
        };
        // The hello is no message of the test's.
        times.encode.clear();
        times.decode.clear();
        let socket = kept.lock().ok().and_then(|mut k| k.take()).map(Arc::new);
        Ok(GrpcClient {
            engine,
            grpc,
            times,
            cookie,
            encoding,
            shape: default_shape(),
            calls: VecDeque::new(),
            upload: None,
            download: None,
            current: Bytes::new(),
            socket,
            read_timeout: None,
            write_timeout: None,
            nonblocking: false,
        })
    }

    fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Some(c) = &self.cookie {
            req.metadata_mut().insert(COOKIE_KEY, c.clone());
        }
        req
    }

    /// Lets the runtime's tasks move (a call just started goes out on the wire).
    fn nudge(&self) {
        self.engine.run(async {
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
        });
    }

    /// Runs `f` on the engine within `timeout` (None: no limit).
    fn run_for<F: std::future::Future>(
        &self,
        timeout: Option<Duration>,
        f: F,
    ) -> Option<F::Output> {
        match timeout {
            Some(t) => self
                .engine
                .run(async { tokio::time::timeout(t, f).await })
                .ok(),
            None => Some(self.engine.run(f)),
        }
    }

    fn start_call(&mut self, buf: &[u8], response_size: Option<u64>) -> io::Result<usize> {
        if self.calls.len() >= MAX_IN_FLIGHT {
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Wait for the oldest to finish, and keep its answer for `recv`.
            let timeout = self.write_timeout;
            let engine = self.engine.clone();
            let Some(Slot::Running(h)) = self.calls.front_mut() else {
                return Err(io::Error::other(format!(
                    "{MAX_IN_FLIGHT} gRPC calls are outstanding: receive their answers first"
                )));
            };
            let done = match timeout {
                Some(t) => engine.run(async { tokio::time::timeout(t, h).await }).ok(),
                None => Some(engine.run(h)),
            }
            .ok_or_else(|| timed_out("answer to make room for a call"))?;
            let done = done.unwrap_or_else(|e| Err(Status::internal(e.to_string())));
            self.calls[0] = Slot::Done(done);
            if self.calls.len() >= MAX_IN_FLIGHT {
                return Err(io::Error::other(format!(
                    "{MAX_IN_FLIGHT} gRPC calls are outstanding: receive their answers first"
                )));
            }
        }
        let size = response_size.unwrap_or(buf.len() as u64);
        let p = wire::to_payload(buf, self.encoding, i64::try_from(size).unwrap_or(i64::MAX));
        let req = self.request(p);
        let mut grpc = self.grpc.clone();
        let codec = TimedCodec::<Payload, Payload>::new(&self.times);
        let h = self.engine.spawn_task(async move {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            grpc.unary(req, PathAndQuery::from_static(wire::CALL), codec)
                .await
                .map(|r| r.into_inner())
        });
        self.calls.push_back(Slot::Running(h));
        self.nudge();
        Ok(buf.len())
    }

    fn upload(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.upload.is_none() {
            let (tx, rx) = mpsc::channel(UPLOAD_QUEUE);
            let req = self.request(ReceiverStream::new(rx));
            let mut grpc = self.grpc.clone();
            let codec = TimedCodec::<Payload, UploadSummary>::new(&self.times);
            let h = self.engine.spawn_task(async move {
                grpc.ready()
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?;
                grpc.client_streaming(req, PathAndQuery::from_static(wire::UPLOAD), codec)
                    .await
                    .map(|r| r.into_inner())
            });
            self.upload = Some((tx, h));
        }
        let p = wire::to_payload(buf, self.encoding, 0);
        let Some((tx, _)) = &self.upload else {
            return Err(io::Error::other("no Upload call"));
        };
        match tx.try_send(p) {
            Ok(()) => return Ok(buf.len()),
            Err(mpsc::error::TrySendError::Full(_)) if self.nonblocking => {
                self.nudge();
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Err(mpsc::error::TrySendError::Full(p)) => {
                let tx = tx.clone();
                match self.run_for(self.write_timeout, tx.send(p)) {
                    None => return Err(timed_out("room for a message")),
                    Some(Ok(())) => return Ok(buf.len()),
                    Some(Err(_)) => {}
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
        // The call ended: say why.
        Err(self.finish_upload().err().unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the gRPC Upload call ended")
        }))
    }

    /// Ends the Upload stream and waits for the server's summary.
    fn finish_upload(&mut self) -> io::Result<()> {
        let Some((tx, h)) = self.upload.take() else {
            return Ok(());
        };
        drop(tx);
        match self.run_for(self.write_timeout, h) {
            None => Err(timed_out("Upload summary")),
            Some(Ok(Ok(_))) => Ok(()),
            Some(Ok(Err(s))) => Err(status_error(&s)),
            Some(Err(e)) => Err(io::Error::other(e.to_string())),
        }
    }

    /// The oldest call's answer; WouldBlock (non-blocking) or TimedOut while it is not back.
    fn answer(&mut self) -> io::Result<Payload> {
        let Some(front) = self.calls.front_mut() else {
            return Err(io::Error::other(
                "nothing to receive: no gRPC call is outstanding",
            ));
        };
        if let Slot::Running(h) = front {
            if self.nonblocking {
                if !h.is_finished() {
                    self.engine.run(async {
                        tokio::task::yield_now().await;
                    });
                }
                if !h.is_finished() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
            }
            let timeout = if self.nonblocking {
                None
            } else {
                self.read_timeout
            };
            let done = match timeout {
                Some(t) => self
                    .engine
                    .run(async { tokio::time::timeout(t, h).await })
                    .map_err(|_| timed_out("answer"))?,
                None => self.engine.run(h),
            };
            *front = Slot::Done(done.unwrap_or_else(|e| Err(Status::internal(e.to_string()))));
        }
        match self.calls.pop_front() {
            Some(Slot::Done(Ok(p))) => Ok(p),
            Some(Slot::Done(Err(s))) => Err(status_error(&s)),
            _ => Err(io::Error::other("a gRPC call was lost")),
        }
    }

    fn download(&mut self) -> io::Result<Option<Payload>> {
        if self.download.is_none() {
            let req = self.request(Payload::default());
            let mut grpc = self.grpc.clone();
            let codec = TimedCodec::<Payload, Payload>::new(&self.times);
            let started = self.run_for(self.read_timeout, async move {
                grpc.ready()
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?;
                grpc.server_streaming(req, PathAndQuery::from_static(wire::DOWNLOAD), codec)
                    .await
                    .map(|r| r.into_inner())
            });
            match started {
                None => return Err(timed_out("Download stream")),
                Some(Err(s)) => return Err(status_error(&s)),
                Some(Ok(s)) => self.download = Some(s),
            }
        }
        let Some(stream) = self.download.as_mut() else {
            return Ok(None);
        };
        let next = if self.nonblocking {
            let got = self
                .engine
                .run(async { tokio::time::timeout(Duration::ZERO, stream.message()).await });
            match got {
                Ok(m) => m,
                Err(_) => return Err(io::ErrorKind::WouldBlock.into()),
            }
        } else {
            let engine = &self.engine;
            match self.read_timeout {
                Some(t) => engine
                    .run(async { tokio::time::timeout(t, stream.message()).await })
                    .map_err(|_| timed_out("message"))?,
                None => engine.run(stream.message()),
            }
        };
        next.map_err(|s| status_error(&s))
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

impl Connection for GrpcClient {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.shape {
            Shape::Exchange { response_size } => self.start_call(buf, response_size),
            Shape::Send => self.upload(buf),
            Shape::Receive => Err(io::Error::other(
                "this gRPC connection receives a Download stream: it sends nothing",
            )),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.current.is_empty() {
            let p = match self.shape {
                Shape::Exchange { .. } => self.answer()?,
                Shape::Receive => match self.download()? {
                    Some(p) => p,
                    None => return Ok(0),
                },
                Shape::Send => return Ok(0),
            };
            self.current = wire::app_bytes(p);
            if self.current.is_empty() {
                // An empty answer is a message of 0 bytes, not the end of the stream: a
                // pattern asks for 1 byte at least, so this is only another service's.
                return Ok(0);
            }
        }
        let n = self.current.len().min(buf.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
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
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.finish_upload()
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        match &self.socket {
            Some(s) => sockopt::read_back(&SockRef::from(s.as_ref()), requested, true),
            None => EffectiveOptions {
                sndbuf_requested: requested.sndbuf,
                rcvbuf_requested: requested.rcvbuf,
                ..EffectiveOptions::default()
            },
        }
    }
    fn expect(&mut self, shape: Shape) {
        self.shape = shape;
    }
    fn serialisation(&self, reset: bool) -> Option<Serialisation> {
        Some(read_times(&self.times, self.encoding, reset))
    }
}
