//! The server side: a tonic server on the listener's runtime, the admission of each HTTP/2
//! connection by its hello, and the blocking connection a flow reads requests from and
//! answers them through. Also the plain echo service (`serve --grpc-echo`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use socket2::{SockRef, Socket};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::body::Body;
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status, Streaming};

use super::answer::Answer;

use super::codec::{TimedCodec, Times};
use super::io::Stream;
use super::wire::{self, Payload, UploadSummary};
use super::{
    decoding_limit, ALPN_H2, CONNECTION_WINDOW, COOKIE_KEY, ECHO_CALL_TIMEOUT,
    ECHO_CONNECTION_WINDOW, ECHO_KEEPALIVE, ECHO_MAX_CONNECTIONS, ECHO_MAX_MESSAGE,
    ECHO_MAX_PER_ADDRESS, ECHO_MAX_RESPONSE, ECHO_MAX_STREAMS, ECHO_SILENCE, ECHO_STREAM_WINDOW,
    HELLO_KEY, HELLO_MAX_DECODED, HELLO_WAIT, MAX_DECODED, MAX_FRAME, MAX_HEADER_LIST,
    MAX_PENDING_RESETS, MAX_STREAMS, REQUEST_QUEUE, STREAM_WINDOW, TEST_CONNECTION_DECODING,
    TEST_MAX_CONNECTIONS,
};
use crate::model::rpc::Serialisation;
use crate::model::vocab::Encoding;
use crate::transport::quic::engine::{Engine, EngineRef};
use crate::transport::tls::{self, Identity};
use crate::transport::{
    remaining, same_ip, sockopt, Connection, Cookie, EffectiveOptions, Listener, SocketOptions,
};

/// Connections whose hello waits for `accept`; more are refused.
const ADMISSION_QUEUE: usize = 64;

/// What a connection's calls hand its flow.
enum Incoming {
    /// A unary call's request and where its answer goes.
    Call {
        payload: Payload,
        reply: oneshot::Sender<Payload>,
    },
    /// A message of an Upload stream.
    Upload(Payload),
    /// The Upload stream ended.
    UploadEnd,
    /// A Download call: where the flow's messages go.
    Download(mpsc::Sender<std::result::Result<Payload, Status>>),
}

/// One accepted TCP (HTTP/2) connection, as its calls see it.
struct Peer {
    /// The cookie the connection was admitted with; unset until `accept` took it.
    admitted: OnceLock<[u8; 16]>,
    tx: mpsc::Sender<Incoming>,
    /// The flow's end of `tx`, taken when the connection is admitted.
    rx: Mutex<Option<mpsc::Receiver<Incoming>>>,
    /// The TCP connection is gone (hyper dropped it).
    closed: AtomicBool,
    close: Notify,
    times: Arc<Times>,
    candidates: mpsc::Sender<Candidate>,
    /// Encoded bytes this connection's calls may be decoding at once
    /// ([`TEST_CONNECTION_DECODING`]): each call takes its limit before its body is read.
    decoding: Arc<Semaphore>,
}

impl Peer {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.close.notify_one();
    }
}

/// The request extension (tonic's connect info) that names a call's connection.
#[derive(Clone)]
struct PeerInfo(Option<Arc<Peer>>);

/// A hello waiting for `accept`.
struct Candidate {
    peer: Arc<Peer>,
    cookie: [u8; 16],
    answer: oneshot::Sender<bool>,
}

/// An accepted TCP stream that tells its [`Peer`] when hyper drops it.
struct PeerIo {
    stream: Stream,
    info: PeerInfo,
    /// The listener's connection slot, given back when hyper drops the connection.
    _slot: OwnedSemaphorePermit,
    /// The echo's: the connection is closed once the client sent nothing for this long.
    silence: Option<Silence>,
    /// The echo's: this connection's place in its address's share.
    _share: Option<AddressShare>,
}

/// One connection's place among those of its address (the echo's per-address share); given
/// back when dropped.
struct AddressShare {
    open: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl AddressShare {
    fn take(
        open: &Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
        ip: std::net::IpAddr,
        max: usize,
    ) -> Option<AddressShare> {
        let mut o = open.lock().unwrap_or_else(|p| p.into_inner());
        let n = o.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(AddressShare {
            open: Arc::clone(open),
            ip,
        })
    }
}

impl Drop for AddressShare {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = o.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.remove(&self.ip);
            }
        }
    }
}

/// A deadline that every byte read from the client moves on.
struct Silence {
    limit: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Silence {
    fn new(limit: Duration) -> Silence {
        Silence {
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }
    fn heard(&mut self) {
        let next = tokio::time::Instant::now() + self.limit;
        self.deadline.as_mut().reset(next);
    }
    /// An error once the deadline passed; registers the task to be woken then.
    fn check(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.deadline.as_mut().poll(cx).is_ready().then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the gRPC client sent nothing for too long",
            )
        })
    }
}

impl Drop for PeerIo {
    fn drop(&mut self) {
        if let Some(p) = &self.info.0 {
            p.close();
        }
    }
}

impl Connected for PeerIo {
    type ConnectInfo = PeerInfo;
    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl AsyncRead for PeerIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut me.stream).poll_read(cx, buf);
        if let Some(s) = &mut me.silence {
            match &read {
                Poll::Ready(Ok(())) if buf.filled().len() > before => s.heard(),
                Poll::Pending => {
                    if let Some(e) = s.check(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
                _ => {}
            }
        }
        read
    }
}

impl AsyncWrite for PeerIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let wrote = Pin::new(&mut me.stream).poll_write(cx, buf);
        // A client that takes nothing and says nothing is silent too (h2 may not read while
        // its writes wait).
        if let (Poll::Pending, Some(s)) = (&wrote, &mut me.silence) {
            if let Some(e) = s.check(cx) {
                return Poll::Ready(Err(e));
            }
        }
        wrote
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let wrote = Pin::new(&mut me.stream).poll_write_vectored(cx, bufs);
        if let (Poll::Pending, Some(s)) = (&wrote, &mut me.silence) {
            if let Some(e) = s.check(cx) {
                return Poll::Ready(Err(e));
            }
        }
        wrote
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// What the service does with calls.
#[derive(Clone)]
pub(super) enum Mode {
    /// A test's data listener: calls go to the flow that accepted their connection; each
    /// decodes at most the point's limit (encoded bytes, set by [`Listener::limit_message`]).
    Test(Arc<AtomicUsize>),
    /// `serve --grpc-echo`: every call answered at once, counted.
    Echo(Arc<EchoCounts>),
}

/// What a plain echo service answered, for its log.
#[derive(Default)]
pub struct EchoCounts {
    pub calls: AtomicU64,
    pub uploads: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

#[derive(Clone)]
pub(super) struct EchoService {
    mode: Mode,
}

type HttpResult = std::result::Result<http::Response<Body>, Infallible>;

fn permission_denied(why: &str) -> Status {
    Status::permission_denied(why.to_owned())
}

fn cookie_of<T>(req: &Request<T>) -> Option<[u8; 16]> {
    let v = req.metadata().get(COOKIE_KEY)?.to_str().ok()?;
    Cookie::from_hex(v).map(|c| c.0)
}

/// The cookie in a call's HTTP/2 headers (its metadata), read before its body.
fn cookie_in(headers: &http::HeaderMap) -> Option<[u8; 16]> {
    let v = headers.get(COOKIE_KEY)?.to_str().ok()?;
    Cookie::from_hex(v).map(|c| c.0)
}

/// The answer a plain echo gives: Some(n) for `response_size` n bytes in the request's
/// encoding, None for the request itself (`response_size` 0 or below). A size above
/// [`ECHO_MAX_RESPONSE`] is refused, and nothing is made for it.
fn echo_answer(p: &Payload) -> std::result::Result<Option<usize>, Status> {
    if p.response_size > ECHO_MAX_RESPONSE {
        return Err(Status::resource_exhausted(format!(
            "response_size {} is over this echo service's limit of {ECHO_MAX_RESPONSE} bytes",
            p.response_size
        )));
    }
    Ok(usize::try_from(p.response_size).ok().filter(|n| *n > 0))
}

/// The connection a test's call came on, once admitted with the call's cookie.
fn admitted_peer<T>(info: &PeerInfo, req: &Request<T>) -> std::result::Result<Arc<Peer>, Status> {
    admitted_with(info, cookie_of(req))
}

fn admitted_with(
    info: &PeerInfo,
    cookie: Option<[u8; 16]>,
) -> std::result::Result<Arc<Peer>, Status> {
    let Some(peer) = info.0.clone() else {
        return Err(Status::internal("no connection for the call"));
    };
    match (peer.admitted.get(), cookie) {
        (Some(a), Some(c)) if *a == c => Ok(peer),
        (None, _) => Err(permission_denied("the connection has not been admitted")),
        _ => Err(permission_denied("wrong or missing test cookie")),
    }
}

/// `serve --grpc-echo`'s Call: the request decoded under the echo's limit, then the answer
/// made while it is sent ([`Answer`]), so that its size costs no allocation and a client that
/// does not read holds the server to its window.
async fn echo_call(
    counts: &EchoCounts,
    req: http::Request<Body>,
    times: &Arc<Times>,
) -> http::Response<Body> {
    let mut codec = TimedCodec::<Payload, Payload>::new(times);
    let mut stream = Streaming::new_request(
        tonic::codec::Codec::decoder(&mut codec),
        req.into_body(),
        None,
        Some(ECHO_MAX_MESSAGE),
    );
    let p = match stream.message().await {
        Ok(Some(p)) => p,
        Ok(None) => return Status::invalid_argument("a Call without its message").into_http(),
        Err(status) => return status.into_http(),
    };
    drop(stream);
    counts.calls.fetch_add(1, Ordering::Relaxed);
    counts
        .bytes_in
        .fetch_add(wire::app_len(&p) as u64, Ordering::Relaxed);
    let (answer, len) = match echo_answer(&p) {
        Err(status) => return status.into_http(),
        Ok(Some(n)) => (Answer::filler(wire::encoding_of(&p), n), n),
        Ok(None) => {
            let echo = Payload {
                response_size: 0,
                ..p
            };
            (Answer::message(&echo), wire::app_len(&echo))
        }
    };
    counts.bytes_out.fetch_add(len as u64, Ordering::Relaxed);
    let mut r = http::Response::new(Body::new(answer));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    r
}

async fn on_call(
    info: PeerInfo,
    req: Request<Payload>,
) -> std::result::Result<Response<Payload>, Status> {
    if req.metadata().contains_key(HELLO_KEY) {
        return hello(info, req).await;
    }
    let peer = admitted_peer(&info, &req)?;
    let (reply, answer) = oneshot::channel();
    peer.tx
        .send(Incoming::Call {
            payload: req.into_inner(),
            reply,
        })
        .await
        .map_err(|_| Status::unavailable("the test's flow is gone"))?;
    match answer.await {
        Ok(p) => Ok(Response::new(p)),
        Err(_) => Err(Status::unavailable(
            "the test's flow ended without answering",
        )),
    }
}

/// A connection's first call: it waits until a flow accepted the connection for its cookie.
async fn hello(
    info: PeerInfo,
    req: Request<Payload>,
) -> std::result::Result<Response<Payload>, Status> {
    let Some(peer) = info.0 else {
        return Err(Status::internal("no connection for the call"));
    };
    let Some(cookie) = cookie_of(&req) else {
        return Err(permission_denied("no test cookie"));
    };
    if peer.admitted.get().is_some() {
        return Err(permission_denied("the connection said hello twice"));
    }
    let (answer, admitted) = oneshot::channel();
    let c = Candidate {
        peer: peer.clone(),
        cookie,
        answer,
    };
    if peer.candidates.try_send(c).is_err() {
        return Err(Status::unavailable("no test is accepting connections"));
    }
    match tokio::time::timeout(HELLO_WAIT, admitted).await {
        Ok(Ok(true)) => Ok(Response::new(Payload::default())),
        Ok(Ok(false)) => Err(permission_denied("wrong test cookie")),
        _ => Err(Status::unavailable("no test accepted the connection")),
    }
}

async fn on_upload(
    mode: Mode,
    info: PeerInfo,
    req: Request<Streaming<Payload>>,
) -> std::result::Result<Response<UploadSummary>, Status> {
    let peer = match &mode {
        Mode::Test(_) => Some(admitted_peer(&info, &req)?),
        Mode::Echo(_) => None,
    };
    let mut stream = req.into_inner();
    let mut summary = UploadSummary::default();
    while let Some(p) = stream.message().await? {
        summary.messages += 1;
        summary.bytes += wire::app_len(&p) as i64;
        if let Some(peer) = &peer {
            peer.tx
                .send(Incoming::Upload(p))
                .await
                .map_err(|_| Status::unavailable("the test's flow is gone"))?;
        }
    }
    match (&mode, &peer) {
        (Mode::Echo(counts), _) => {
            counts.uploads.fetch_add(1, Ordering::Relaxed);
            counts
                .bytes_in
                .fetch_add(summary.bytes as u64, Ordering::Relaxed);
        }
        (Mode::Test(_), Some(peer)) => {
            let _ = peer.tx.send(Incoming::UploadEnd).await;
        }
        (Mode::Test(_), None) => {}
    }
    Ok(Response::new(summary))
}

type DownloadStream = ReceiverStream<std::result::Result<Payload, Status>>;

async fn on_download(
    mode: Mode,
    info: PeerInfo,
    req: Request<Payload>,
) -> std::result::Result<Response<DownloadStream>, Status> {
    if let Mode::Echo(_) = mode {
        return Err(Status::unimplemented(
            "the echo service answers Call and Upload",
        ));
    }
    let peer = admitted_peer(&info, &req)?;
    let (tx, rx) = mpsc::channel(super::UPLOAD_QUEUE);
    peer.tx
        .send(Incoming::Download(tx))
        .await
        .map_err(|_| Status::unavailable("the test's flow is gone"))?;
    Ok(Response::new(ReceiverStream::new(rx)))
}

/// A test's call, judged by its headers alone: Ok(None) for a hello (its cookie is judged by
/// the flow that accepts it), Ok(peer) for a call with its connection's cookie.
fn admit_headers(
    info: &PeerInfo,
    req: &http::Request<Body>,
) -> std::result::Result<Option<Arc<Peer>>, Status> {
    let cookie = cookie_in(req.headers());
    if req.uri().path() == wire::CALL && req.headers().contains_key(HELLO_KEY) {
        return match cookie {
            Some(_) => Ok(None),
            None => Err(permission_denied("no test cookie")),
        };
    }
    admitted_with(info, cookie).map(Some)
}

fn unimplemented_path() -> http::Response<Body> {
    let mut r = http::Response::new(Body::default());
    let h = r.headers_mut();
    h.insert(
        "grpc-status",
        http::HeaderValue::from(tonic::Code::Unimplemented as i32),
    );
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    r
}

impl tower_service::Service<http::Request<Body>> for EchoService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = HttpResult> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let info = req
            .extensions()
            .get::<PeerInfo>()
            .cloned()
            .unwrap_or(PeerInfo(None));
        let mode = self.mode.clone();
        Box::pin(async move {
            // A hello is no message of the test's: its codec times go nowhere.
            let times = match &info.0 {
                Some(p) if !req.headers().contains_key(HELLO_KEY) => p.times.clone(),
                _ => Times::new(),
            };
            // What a call may decode, decided from its headers before a byte of its body is
            // read: a test's call without the connection's cookie is refused here, and an
            // admitted one first reserves its limit from the connection's share.
            let (max, _decoding) = match &mode {
                Mode::Echo(_) => (ECHO_MAX_MESSAGE, None),
                Mode::Test(limit) => match admit_headers(&info, &req) {
                    Err(status) => return Ok(status.into_http()),
                    Ok(None) => (HELLO_MAX_DECODED, None),
                    Ok(Some(peer)) => {
                        let max = limit.load(Ordering::Relaxed).min(TEST_CONNECTION_DECODING);
                        let permits = u32::try_from(max).unwrap_or(u32::MAX);
                        match peer.decoding.clone().acquire_many_owned(permits).await {
                            Ok(p) => (max, Some(p)),
                            Err(_) => {
                                return Ok(Status::unavailable("the connection closed").into_http())
                            }
                        }
                    }
                },
            };
            let resp = match (req.uri().path(), &mode) {
                (wire::CALL, Mode::Echo(counts)) => echo_call(counts, req, &times).await,
                (wire::CALL, Mode::Test(_)) => {
                    let mut g =
                        tonic::server::Grpc::new(TimedCodec::<Payload, Payload>::new(&times))
                            .max_decoding_message_size(max)
                            .max_encoding_message_size(MAX_DECODED);
                    let svc = tower::service_fn(move |r| on_call(info.clone(), r));
                    g.unary(svc, req).await
                }
                (wire::UPLOAD, _) => {
                    let mut g =
                        tonic::server::Grpc::new(TimedCodec::<UploadSummary, Payload>::new(&times))
                            .max_decoding_message_size(max)
                            .max_encoding_message_size(MAX_DECODED);
                    let svc = tower::service_fn(move |r| on_upload(mode.clone(), info.clone(), r));
                    g.client_streaming(svc, req).await
                }
                (wire::DOWNLOAD, _) => {
                    let mut g =
                        tonic::server::Grpc::new(TimedCodec::<Payload, Payload>::new(&times))
                            .max_decoding_message_size(max)
                            .max_encoding_message_size(MAX_DECODED);
                    let svc =
                        tower::service_fn(move |r| on_download(mode.clone(), info.clone(), r));
                    g.server_streaming(svc, req).await
                }
                _ => unimplemented_path(),
            };
            Ok(resp)
        })
    }
}

/// A bound TCP listener for the data port, with the requested options, non-blocking.
fn bind(addr: SocketAddr) -> Result<(std::net::TcpListener, Socket)> {
    let sock = Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .context("creating a TCP socket")?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())
        .with_context(|| format!("binding a TCP socket to {addr}"))?;
    sock.listen(1024)?;
    sock.set_nonblocking(true)?;
    let dup = sock.try_clone().context("duplicating the data socket")?;
    Ok((sock.into(), dup))
}

/// Serves `mode` on `listener` until `stop`, admitting TCP connections from `peer` alone
/// (all with None), counting the others in `strangers`; with `tls`, each connection's TLS
/// handshake comes first.
async fn serve(
    listener: std::net::TcpListener,
    mode: Mode,
    peer: Option<IpAddr>,
    strangers: Arc<AtomicU64>,
    candidates: mpsc::Sender<Candidate>,
    tls: Option<TlsAcceptor>,
    stop: oneshot::Receiver<()>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let test = matches!(mode, Mode::Test(_));
    let new_peer = move || {
        if test {
            let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
            PeerInfo(Some(Arc::new(Peer {
                admitted: OnceLock::new(),
                tx,
                rx: Mutex::new(Some(rx)),
                closed: AtomicBool::new(false),
                close: Notify::new(),
                times: Times::new(),
                candidates: candidates.clone(),
                decoding: Arc::new(Semaphore::new(TEST_CONNECTION_DECODING)),
            })))
        } else {
            PeerInfo(None)
        }
    };
    // Connections go to the server through a queue, so that one slow TLS handshake holds up
    // no other connection; the loop ends when the server drops the queue.
    let (ready, incoming) = mpsc::channel::<io::Result<PeerIo>>(ADMISSION_QUEUE);
    let slots = Arc::new(Semaphore::new(TEST_MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = ready.closed() => return,
            };
            // A failed accept (no descriptor left) drops that connection; the rest go on.
            let Ok((stream, from)) = accepted else {
                continue;
            };
            if let Some(p) = peer {
                if !same_ip(from.ip(), p) {
                    strangers.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            // Over the cap the connection is closed before any HTTP/2.
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let info = new_peer();
            match &tls {
                None => {
                    let io = PeerIo {
                        stream: Stream::Plain(stream),
                        info,
                        _slot: slot,
                        silence: None,
                        _share: None,
                    };
                    if ready.send(Ok(io)).await.is_err() {
                        return;
                    }
                }
                Some(acceptor) => {
                    let (acceptor, ready) = (acceptor.clone(), ready.clone());
                    tokio::spawn(async move {
                        // A client that fails or stalls its handshake is dropped; its own
                        // side says why (the verifier's reason).
                        let shook = tokio::time::timeout(HELLO_WAIT, acceptor.accept(stream)).await;
                        if let Ok(Ok(s)) = shook {
                            let stream = Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)));
                            let io = PeerIo {
                                stream,
                                info,
                                _slot: slot,
                                silence: None,
                                _share: None,
                            };
                            let _ = ready.send(Ok(io)).await;
                        }
                    });
                }
            }
        }
    });
    // No keep-alive pings and no deadlines here: a test's client drives its HTTP/2 only while
    // its flow sends or receives, so it would miss pings in a think time, and a point may
    // last an hour. The listener lives as long as its test and only the control peer's
    // address reaches it; a call is judged by its cookie before its body is read.
    tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_concurrent_streams(MAX_STREAMS)
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .http2_max_header_list_size(MAX_HEADER_LIST)
        .max_frame_size(MAX_FRAME)
        .serve_with_incoming_shutdown(EchoService { mode }, ReceiverStream::new(incoming), async {
            let _ = stop.await;
        })
        .await?;
    Ok(())
}

pub(super) struct GrpcListener {
    engine: Arc<EngineRef>,
    port: u16,
    /// With TLS: the SHA-256 of the certificate, announced with the port.
    fingerprint: Option<[u8; 32]>,
    /// The listening socket (a duplicate): accepted connections inherit its buffer sizes.
    options: Arc<Socket>,
    candidates: mpsc::Receiver<Candidate>,
    strangers: Arc<AtomicU64>,
    /// What a call may decode, encoded bytes: the current point's limit.
    decoding: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
}

impl GrpcListener {
    /// A listener on `local` admitting connections from `peer` alone; with `identity`, over
    /// TLS with it.
    pub(super) fn open(
        local: IpAddr,
        peer: IpAddr,
        identity: Option<Identity>,
    ) -> Result<GrpcListener> {
        let (fingerprint, acceptor) = match identity {
            Some(id) => {
                let fingerprint = tls::sha256(id.chain[0].as_ref());
                let config = tls::server_config(id, ALPN_H2)?;
                (Some(fingerprint), Some(TlsAcceptor::from(Arc::new(config))))
            }
            None => (None, None),
        };
        let (listener, options) = bind(SocketAddr::new(local, 0))
            .with_context(|| format!("binding the gRPC data port on {local}"))?;
        let port = listener.local_addr()?.port();
        let engine = Engine::start()?;
        let (tx, candidates) = mpsc::channel(ADMISSION_QUEUE);
        let (stop, stopped) = oneshot::channel();
        let strangers = Arc::new(AtomicU64::new(0));
        let s = strangers.clone();
        // Until a point says its message size, the transport's largest.
        let decoding = Arc::new(AtomicUsize::new(MAX_DECODED));
        let mode = Mode::Test(decoding.clone());
        engine.spawn(async move {
            let _ = serve(listener, mode, Some(peer), s, tx, acceptor, stopped).await;
        });
        Ok(GrpcListener {
            engine,
            port,
            fingerprint,
            options: Arc::new(options),
            candidates,
            strangers,
            decoding,
            stop: Some(stop),
        })
    }
}

impl Drop for GrpcListener {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.engine.run(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
    }
}

impl Listener for GrpcListener {
    fn endpoint(&self) -> String {
        match &self.fingerprint {
            Some(fp) => tls::endpoint::format_endpoint(self.port, fp),
            None => self.port.to_string(),
        }
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        sockopt::apply(&SockRef::from(&self.options), opts, false)
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
            let queue = &mut self.candidates;
            let next = self
                .engine
                .run(async { tokio::time::timeout(left, queue.recv()).await });
            let c = match next {
                Err(_) => return Ok(None),
                Ok(None) => bail!("the gRPC server stopped"),
                Ok(Some(c)) => c,
            };
            if c.cookie != cookie.0 || c.peer.admitted.set(c.cookie).is_err() {
                let _ = c.answer.send(false);
                continue;
            }
            let rx = c.peer.rx.lock().ok().and_then(|mut r| r.take());
            let Some(rx) = rx else {
                let _ = c.answer.send(false);
                continue;
            };
            if c.answer.send(true).is_err() {
                continue; // the hello gave up waiting
            }
            return Ok(Some(Box::new(ServerConn {
                engine: self.engine.clone(),
                options: self.options.clone(),
                peer: c.peer,
                rx,
                pending: VecDeque::new(),
                download: None,
                current: Bytes::new(),
                encoding: Encoding::Bytes,
                read_timeout: None,
                write_timeout: None,
                nonblocking: false,
                eof: false,
            })));
        }
    }
    fn strangers(&self) -> u64 {
        self.strangers.load(Ordering::Relaxed)
    }
    fn limit_message(&mut self, largest: u64) {
        self.decoding
            .store(decoding_limit(largest), Ordering::Relaxed);
    }
}

/// The flow's end of an admitted connection.
struct ServerConn {
    engine: Arc<EngineRef>,
    options: Arc<Socket>,
    peer: Arc<Peer>,
    rx: mpsc::Receiver<Incoming>,
    /// Calls received and not yet answered, oldest first.
    pending: VecDeque<oneshot::Sender<Payload>>,
    download: Option<mpsc::Sender<std::result::Result<Payload, Status>>>,
    /// What is left of the message being read.
    current: Bytes,
    /// The encoding of the latest request: answers go in it.
    encoding: Encoding,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    nonblocking: bool,
    eof: bool,
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no {what} within the timeout"),
    )
}

impl ServerConn {
    /// The next thing the connection's calls hand over; None at the end of the connection.
    fn next(&mut self, timeout: Option<Duration>) -> io::Result<Option<Incoming>> {
        if self.eof {
            return Ok(None);
        }
        let (rx, peer) = (&mut self.rx, &self.peer);
        let wait = async {
            loop {
                if let Ok(m) = rx.try_recv() {
                    return Some(m);
                }
                if peer.closed.load(Ordering::SeqCst) {
                    return None;
                }
                tokio::select! {
                    m = rx.recv() => return m,
                    _ = peer.close.notified() => {}
                }
            }
        };
        let got = if self.nonblocking {
            let got = self.engine.run(async {
                tokio::task::yield_now().await;
                tokio::time::timeout(Duration::ZERO, wait).await
            });
            match got {
                Ok(m) => m,
                Err(_) => return Err(io::ErrorKind::WouldBlock.into()),
            }
        } else {
            match timeout {
                Some(t) => self
                    .engine
                    .run(async { tokio::time::timeout(t, wait).await })
                    .map_err(|_| timed_out("request"))?,
                None => self.engine.run(wait),
            }
        };
        if got.is_none() {
            self.eof = true;
        }
        Ok(got)
    }
}

fn copy_out(current: &mut Bytes, buf: &mut [u8]) -> usize {
    let n = current.len().min(buf.len());
    buf[..n].copy_from_slice(&current[..n]);
    let _ = current.split_to(n);
    n
}

impl Connection for ServerConn {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            if let Some(reply) = self.pending.pop_front() {
                let answer = wire::to_payload(buf, self.encoding, 0);
                return match reply.send(answer) {
                    Ok(()) => Ok(buf.len()),
                    Err(_) => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the gRPC call went away before its answer",
                    )),
                };
            }
            if let Some(tx) = &self.download {
                let p = wire::to_payload(buf, self.encoding, 0);
                let sent = match tx.try_send(Ok(p)) {
                    Ok(()) => Ok(()),
                    Err(mpsc::error::TrySendError::Full(p)) if !self.nonblocking => {
                        let wait = tx.send(p);
                        match self.write_timeout {
                            Some(t) => self
                                .engine
                                .run(async { tokio::time::timeout(t, wait).await })
                                .map_err(|_| timed_out("room for a message"))?
                                .map_err(|_| ()),
                            None => self.engine.run(wait).map_err(|_| ()),
                        }
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        return Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
                };
                return match sent {
                    Ok(()) => Ok(buf.len()),
                    Err(()) => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the client ended its gRPC Download call",
                    )),
                };
            }
            // Nothing to answer yet: a flow that sends first waits for the client's call.
            match self.next(self.write_timeout)? {
                Some(m) => self.take(m)?,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the client closed the gRPC connection",
                    ))
                }
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.current.is_empty() {
                return Ok(copy_out(&mut self.current, buf));
            }
            match self.next(self.read_timeout)? {
                None | Some(Incoming::UploadEnd) => {
                    self.eof = true;
                    return Ok(0);
                }
                Some(m) => {
                    self.take(m)?;
                }
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
    fn shutdown_write(&mut self) -> io::Result<()> {
        // The end of a Download stream; calls end with their answers.
        self.download = None;
        Ok(())
    }
    fn effective_options(&self, requested: &SocketOptions) -> EffectiveOptions {
        // The accepted socket is hyper's: the listening socket's buffer sizes are what it
        // inherited.
        sockopt::read_back(&SockRef::from(self.options.as_ref()), requested, false)
    }
    fn serialisation(&self, reset: bool) -> Option<Serialisation> {
        Some(read_times(&self.peer.times, self.encoding, reset))
    }
}

impl ServerConn {
    /// Takes one handed-over item: a request to answer, a message to read, a stream to fill.
    fn take(&mut self, m: Incoming) -> io::Result<()> {
        match m {
            Incoming::Call { payload, reply } => {
                self.encoding = wire::encoding_of(&payload);
                self.pending.push_back(reply);
                self.current = wire::app_bytes(payload);
            }
            Incoming::Upload(payload) => {
                self.encoding = wire::encoding_of(&payload);
                self.current = wire::app_bytes(payload);
            }
            Incoming::UploadEnd => self.eof = true,
            Incoming::Download(tx) => {
                self.download = Some(tx);
            }
        }
        Ok(())
    }
}

/// A connection's serialisation times, and with `reset` a new start.
pub(super) fn read_times(times: &Times, encoding: Encoding, reset: bool) -> Serialisation {
    let s = Serialisation {
        encoding,
        encode: times.encode.summary(),
        decode: times.decode.summary(),
    };
    if reset {
        times.encode.clear();
        times.decode.clear();
    }
    s
}

/// `wirebench serve --grpc-echo ADDR`: a plain echo service on its own runtime, answering
/// every client that reaches it (the caller's access rules admit them); runs until `stop`.
pub fn serve_echo(
    addr: SocketAddr,
    counts: Arc<EchoCounts>,
    allow: Arc<dyn Fn(IpAddr) -> bool + Send + Sync>,
) -> Result<(
    SocketAddr,
    oneshot::Sender<()>,
    std::thread::JoinHandle<Result<()>>,
)> {
    let (listener, _options) =
        bind(addr).with_context(|| format!("binding the gRPC echo service to {addr}"))?;
    let local = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel();
    let slots = Arc::new(Semaphore::new(ECHO_MAX_CONNECTIONS));
    let shares = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("starting a tokio runtime for the gRPC echo service")?;
    let thread = std::thread::Builder::new()
        .name("wirebench-grpc-echo".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).filter_map(
                    move |accepted| {
                        let stream = accepted.ok()?;
                        let from = stream.peer_addr().ok()?;
                        if !allow(from.ip()) {
                            return None;
                        }
                        // Over its address's share or the cap, the connection is closed
                        // before any HTTP/2.
                        let share = AddressShare::take(
                            &shares,
                            from.ip().to_canonical(),
                            ECHO_MAX_PER_ADDRESS,
                        )?;
                        let slot = slots.clone().try_acquire_owned().ok()?;
                        let _ = stream.set_nodelay(true);
                        // The kernel's probes find a peer that vanished without a word.
                        let _ = SockRef::from(&stream).set_tcp_keepalive(
                            &socket2::TcpKeepalive::new().with_time(ECHO_KEEPALIVE),
                        );
                        Some(Ok::<_, io::Error>(PeerIo {
                            stream: Stream::Plain(stream),
                            info: PeerInfo(None),
                            _slot: slot,
                            silence: Some(Silence::new(ECHO_SILENCE)),
                            _share: Some(share),
                        }))
                    },
                );
                // The caps and why: see ECHO_HELD_BOUND (mod.rs).
                tonic::transport::Server::builder()
                    .initial_stream_window_size(ECHO_STREAM_WINDOW)
                    .initial_connection_window_size(ECHO_CONNECTION_WINDOW)
                    .max_concurrent_streams(ECHO_MAX_STREAMS)
                    .concurrency_limit_per_connection(ECHO_MAX_STREAMS as usize)
                    .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
                    .http2_max_header_list_size(MAX_HEADER_LIST)
                    .max_frame_size(MAX_FRAME)
                    .http2_keepalive_interval(Some(ECHO_KEEPALIVE))
                    .http2_keepalive_timeout(Some(ECHO_KEEPALIVE))
                    .timeout(ECHO_CALL_TIMEOUT)
                    .serve_with_incoming_shutdown(
                        EchoService {
                            mode: Mode::Echo(counts),
                        },
                        incoming,
                        async {
                            let _ = stopped.await;
                        },
                    )
                    .await?;
                Ok(())
            })
        })
        .context("starting the gRPC echo thread")?;
    Ok((local, stop, thread))
}
