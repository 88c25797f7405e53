//! QUIC: the user-space reliable transport over UDP (RFC 9000), with quinn and rustls.
//!
//! One data connection is one QUIC connection carrying one bidirectional stream, so a
//! pattern sees a byte stream as it does over TCP. What is measured is the whole user-space
//! stack: packet protection (TLS 1.3 keys, AES-GCM or ChaCha20), loss recovery, congestion
//! control (quinn's default, CUBIC) and flow control, all on the calling thread.
//!
//! **Setup.** The client opens the stream and writes the test's 16-byte cookie; the server
//! admits the connection by writing one byte back. `connect` returns after that byte came,
//! so the client's "data connection setup" figure is the QUIC handshake (1 RTT and the TLS
//! cryptography) plus the cookie's round trip, plus making the client's UDP socket, runtime
//! and endpoint (a few hundred microseconds), reported apart from the data-path figures.
//! Packets start at quinn's 1200 bytes and MTU discovery raises them to at most 1452, as on
//! an Ethernet path, also on loopback: the figures are those of QUIC as deployed.
//!
//! **Certificates.** The server uses `--tls-cert`/`--tls-key` (PEM) or else a self-signed
//! certificate made once per process, and announces `PORT/sha256=HEX` over the control
//! connection: HEX is the SHA-256 of its certificate (DER). Without `--tls-ca` the client
//! accepts exactly that certificate (the control connection vouches for it) and still checks
//! the handshake signatures with it. With `--tls-ca FILE` the client verifies the server the
//! usual way (webpki) against those CA certificates, for the server's IP address: the
//! certificate must name that address as an IP SAN, since connections go to the address the
//! control connection reached, not to a host name. ALPN is "wirebench".
//!
//! **Threads.** The traits are blocking; quinn is async. Every connection waits with
//! `block_on` on a current-thread tokio runtime, so while a flow waits its own thread runs
//! the endpoint and connection drivers: a message crosses no thread on its way. A client
//! connection has its own UDP socket, endpoint and runtime. The server's listener has one
//! endpoint (one UDP socket) and one runtime, shared by all the connections it accepts, so
//! the flows of one test with `--parallel N` share one server socket and take turns driving
//! it (tokio lets one `block_on` drive at a time; the others are woken by it). A background
//! thread per runtime drives it while no flow does (acknowledgements, retransmissions and
//! closes must go on while a pattern is busy with its control connection); it holds the
//! runtime only after [`IDLE_GRACE`] without a flow in it and gives it back at once.
//!
//! **Ending.** `shutdown_write` finishes the stream and waits until the peer has
//! acknowledged every byte of it. Dropping a connection finishes the stream as closing a TCP
//! socket sends a FIN; the connection is then closed (code 0) in the background once the
//! peer has acknowledged everything, or after the write timeout.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{
    ConnectionError, Endpoint, EndpointConfig, IdleTimeout, ReadError, RecvStream, SendStream,
    StoppedError, TokioRuntime, VarInt, WriteError,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, Notify};

use super::{
    remaining, sockopt, Capabilities, Connection, Cookie, EffectiveOptions, Listener,
    SocketOptions, Transport, TransportConfig,
};

const ALPN: &[u8] = b"wirebench";
/// Server name the client asks for when it pins the announced certificate (no CA check).
const PINNED_NAME: &str = "wirebench";
/// Application close codes.
const CLOSE_DONE: u32 = 0;
const CLOSE_BAD_COOKIE: u32 = 1;
/// The byte with which the server admits a connection that presented the right cookie.
const ADMITTED: u8 = 0xa5;
/// How long a new connection may take from its first packet to presenting its cookie.
const COOKIE_WAIT: Duration = Duration::from_secs(5);
/// Connections that finished their handshake and wait for `accept`; more are refused.
const ADMISSION_QUEUE: usize = 64;
/// Handshakes in progress at once on one listener.
const MAX_INCOMING: usize = 256;
/// How long a runtime must go without a flow driving it before the background thread does.
const IDLE_GRACE: Duration = Duration::from_millis(2);
/// Idle timeout the client asks for, at least; the server asks for none, so the client's
/// value applies (QUIC takes the smaller non-zero one). It must exceed every wait of a test
/// during which nothing moves (io timeout, the control exchanges between connect and go), so
/// it is the larger of this and four io timeouts.
const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a dropped connection waits for the peer to acknowledge its data when no write
/// timeout was set.
const DEFAULT_LINGER: Duration = Duration::from_secs(10);

/// Flow-control windows. On loopback one stream moves a few Gbit/s at most with a round
/// trip of tens of microseconds, so these never limit it; on a long fat network 16 MiB per
/// stream is 1.3 Gbit/s at 100 ms. quinn's defaults (1.25 MB per stream) would cap a single
/// stream well below what a path of a few ms carries.
const STREAM_RECEIVE_WINDOW: u32 = 16 << 20;
const CONNECTION_RECEIVE_WINDOW: u32 = 32 << 20;
/// Bytes written but not yet acknowledged that quinn keeps per connection; a `send` blocks
/// beyond that. Like a TCP send buffer, it is also what a sender's clock may run ahead of
/// the receiver by: 4 MiB, the ceiling Linux gives an autotuned TCP send buffer by default
/// (net.ipv4.tcp_wmem), so that sender-side figures of both are comparable. (With 32 MiB a
/// 2 s stream over a 100 Mbit/s lab link reported 148 Mbit/s on the sender's clock.)
const SEND_WINDOW: u64 = 4 << 20;

// ---------------------------------------------------------------------------------------
// The transport

/// The server identity: certificate chain and private key.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Identity {
    fn clone_identity(&self) -> Identity {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The CA certificates a client verifies the server with.
struct Trust {
    path: PathBuf,
    roots: Arc<RootCertStore>,
}

pub struct Quic {
    identity: Option<Identity>,
    trust: Option<Trust>,
}

impl Quic {
    /// Reads the certificate files this side was given, so that a bad file is an error
    /// before any test starts.
    pub fn new(config: &TransportConfig) -> Result<Quic> {
        let identity = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(load_identity(cert, key)?),
            (None, None) => None,
            _ => bail!("--tls-cert and --tls-key go together"),
        };
        let trust = match &config.tls_ca {
            Some(path) => Some(load_trust(path)?),
            None => None,
        };
        Ok(Quic { identity, trust })
    }
}

fn load_identity(cert: &Path, key: &Path) -> Result<Identity> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("cannot read certificates from {}: {e}", cert.display()))?;
    if chain.is_empty() {
        bail!("{} holds no PEM certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow!("cannot read a private key from {}: {e}", key.display()))?;
    Ok(Identity { chain, key })
}

fn load_trust(path: &Path) -> Result<Trust> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("cannot read CA certificates from {}: {e}", path.display()))?;
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| anyhow!("bad CA certificate in {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(Trust {
        path: path.to_owned(),
        roots: Arc::new(roots),
    })
}

/// The self-signed identity, made once per process: key generation is not free, and every
/// test would pay it again.
fn self_signed() -> Result<Identity> {
    static CELL: OnceLock<std::result::Result<Identity, String>> = OnceLock::new();
    let made = CELL.get_or_init(|| {
        let ck = rcgen::generate_simple_self_signed(vec![PINNED_NAME.to_owned()])
            .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
        Ok(Identity {
            chain: vec![ck.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into()),
        })
    });
    match made {
        Ok(id) => Ok(id.clone_identity()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn sha256(der: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the server announces: its UDP port and its certificate's fingerprint.
fn format_endpoint(port: u16, fingerprint: &[u8; 32]) -> String {
    format!("{port}/sha256={}", hex(fingerprint))
}

/// Parses `PORT/sha256=HEX` (64 hex digits).
fn parse_endpoint(s: &str) -> Result<(u16, [u8; 32])> {
    let bad = || {
        let shown: String = s.chars().take(100).collect();
        anyhow!(
            "the server announced a bad QUIC endpoint '{}' (expected PORT/sha256=HEX, 64 hex digits)",
            shown.escape_debug()
        )
    };
    let (port, rest) = s.split_once('/').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if port == 0 {
        return Err(bad());
    }
    let digits = rest.strip_prefix("sha256=").ok_or_else(bad)?;
    if digits.len() != 64 || !digits.is_ascii() {
        return Err(bad());
    }
    let mut fp = [0u8; 32];
    for (i, b) in fp.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok((port, fp))
}

/// The QUIC parameters both ends use; `idle` is None on the server (the client's applies).
fn transport_config(idle: Option<Duration>, server: bool) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_RECEIVE_WINDOW))
        .send_window(SEND_WINDOW)
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        // The client opens the one stream; the server opens none.
        .max_concurrent_bidi_streams(VarInt::from_u32(u32::from(server)))
        .datagram_receive_buffer_size(None)
        .max_idle_timeout(
            idle.map(|d| {
                IdleTimeout::try_from(d).unwrap_or_else(|_| IdleTimeout::from(VarInt::MAX))
            }),
        );
    Arc::new(t)
}

fn server_config(identity: Identity) -> Result<quinn::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("setting up TLS 1.3")?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| anyhow!("the server's certificate and key do not make a TLS identity: {e}"))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| anyhow!("TLS configuration unusable for QUIC: {e}"))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(transport_config(None, true))
        .max_incoming(MAX_INCOMING)
        .migration(false);
    Ok(cfg)
}

impl Transport for Quic {
    fn name(&self) -> &'static str {
        "quic"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            message_boundaries: false,
            max_message: u64::MAX,
            tcp_options: false,
            host_local: false,
            syscall_batching: false,
            rcvlowat: false,
        }
    }

    fn listen(&self, local: IpAddr, peer: IpAddr) -> Result<Box<dyn Listener>> {
        let identity = match &self.identity {
            Some(id) => id.clone_identity(),
            None => self_signed()?,
        };
        let fingerprint = sha256(identity.chain[0].as_ref());
        let config = server_config(identity)?;
        let socket = udp_socket(SocketAddr::new(local, 0), &SocketOptions::default())
            .with_context(|| format!("binding the QUIC data socket on {local}"))?;
        let options = Arc::new(socket.try_clone().context("duplicating the UDP socket")?);
        let engine = Engine::start()?;
        let endpoint = engine
            .endpoint(socket, Some(config))
            .context("starting the QUIC endpoint")?;
        let port = endpoint
            .local_addr()
            .context("reading the QUIC data port")?
            .port();
        let (tx, rx) = mpsc::channel(ADMISSION_QUEUE);
        engine.spawn(admit(endpoint.clone(), peer, tx));
        Ok(Box::new(QuicListener {
            engine,
            endpoint,
            options,
            admitted: rx,
            announced: format_endpoint(port, &fingerprint),
        }))
    }

    fn connect(
        &self,
        control: SocketAddr,
        endpoint: &str,
        opts: &SocketOptions,
        cookie: &Cookie,
        timeout: Duration,
    ) -> Result<Box<dyn Connection>> {
        let (port, fingerprint) = parse_endpoint(endpoint)?;
        let addr = SocketAddr::new(control.ip(), port);
        let failure = Arc::new(Mutex::new(None));
        let (verifier, server_name): (Arc<dyn ServerCertVerifier>, String) = match &self.trust {
            None => (
                Arc::new(Pinned {
                    sha256: fingerprint,
                    provider: provider(),
                    failure: failure.clone(),
                }),
                PINNED_NAME.to_owned(),
            ),
            Some(trust) => {
                let inner =
                    WebPkiServerVerifier::builder_with_provider(trust.roots.clone(), provider())
                        .build()
                        .map_err(|e| anyhow!("cannot verify with {}: {e}", trust.path.display()))?;
                (
                    Arc::new(Recorded {
                        inner,
                        ca: trust.path.clone(),
                        failure: failure.clone(),
                    }),
                    addr.ip().to_string(),
                )
            }
        };
        let mut tls = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("setting up TLS 1.3")?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = QuicClientConfig::try_from(tls)
            .map_err(|e| anyhow!("TLS configuration unusable for QUIC: {e}"))?;
        let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
        client_config.transport_config(transport_config(
            Some(MIN_IDLE_TIMEOUT.max(timeout.saturating_mul(4))),
            false,
        ));

        let unspecified = match addr {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let socket = udp_socket(SocketAddr::new(unspecified, 0), opts)
            .context("making the QUIC data socket")?;
        let options = Arc::new(socket.try_clone().context("duplicating the UDP socket")?);
        let engine = Engine::start()?;
        let quinn_endpoint = engine
            .endpoint(socket, None)
            .context("starting the QUIC endpoint")?;

        let handshake_failed = |why: String| anyhow!("QUIC handshake with {addr} failed: {why}");
        // Whether the handshake was done when time ran out.
        let mut shook_hands = false;
        let outcome = engine.run(async {
            tokio::time::timeout(timeout, async {
                let connecting = quinn_endpoint
                    .connect_with(client_config, addr, &server_name)
                    .map_err(|e| Step::Handshake(e.to_string()))?;
                let conn = connecting.await.map_err(Step::from_connection)?;
                shook_hands = true;
                let (mut send, mut recv) = conn.open_bi().await.map_err(Step::from_connection)?;
                send.write_all(&cookie.0).await.map_err(Step::from_write)?;
                let mut admitted = [0u8; 1];
                recv.read_exact(&mut admitted)
                    .await
                    .map_err(Step::from_read_exact)?;
                if admitted[0] != ADMITTED {
                    return Err(Step::Admission(
                        "the server answered the test cookie with an unexpected byte".into(),
                    ));
                }
                Ok((conn, send, recv))
            })
            .await
        });
        let recorded = || failure.lock().ok().and_then(|mut f| f.take());
        let (conn, send, recv) = match outcome {
            Ok(Ok(c)) => c,
            Ok(Err(Step::Handshake(why))) => {
                return Err(handshake_failed(recorded().unwrap_or(why)));
            }
            Ok(Err(Step::Admission(why))) => {
                bail!("QUIC data connection to {addr} not admitted: {why}")
            }
            Err(_) if shook_hands => bail!(
                "QUIC data connection to {addr} not admitted: the server did not accept it within {}",
                humantime::format_duration(timeout)
            ),
            Err(_) => {
                return Err(handshake_failed(recorded().unwrap_or_else(|| {
                    format!(
                        "no answer within {} (is a wirebench server reachable over UDP there?)",
                        humantime::format_duration(timeout)
                    )
                })));
            }
        };
        Ok(Box::new(QuicConnection {
            engine,
            conn: Some(conn),
            send: Some(send),
            recv: Some(recv),
            endpoint: Some(quinn_endpoint),
            options,
            read_timeout: None,
            write_timeout: None,
            nonblocking: false,
            eof: false,
        }))
    }
}

/// Where setting up a client connection failed.
enum Step {
    /// TLS or QUIC handshake: the reason to print.
    Handshake(String),
    /// The handshake worked, the test cookie did not.
    Admission(String),
}

impl Step {
    fn from_connection(e: ConnectionError) -> Step {
        match e {
            ConnectionError::ApplicationClosed(c)
                if c.error_code == VarInt::from(CLOSE_BAD_COOKIE) =>
            {
                Step::Admission("the server refused the test cookie".into())
            }
            ConnectionError::ConnectionClosed(c) => Step::Handshake(format!(
                "the server closed the connection: {}",
                describe_close(&c.reason, &c.error_code.to_string())
            )),
            e => Step::Handshake(e.to_string()),
        }
    }
    fn from_write(e: WriteError) -> Step {
        match e {
            WriteError::ConnectionLost(c) => Step::from_connection(c),
            e => Step::Admission(format!("sending the test cookie: {e}")),
        }
    }
    fn from_read_exact(e: quinn::ReadExactError) -> Step {
        match e {
            quinn::ReadExactError::ReadError(ReadError::ConnectionLost(c)) => {
                Step::from_connection(c)
            }
            e => Step::Admission(format!(
                "waiting for the server to admit the connection: {e}"
            )),
        }
    }
}

fn describe_close(reason: &[u8], code: &str) -> String {
    let text = String::from_utf8_lossy(reason);
    let text = text.trim();
    if text.is_empty() {
        code.to_owned()
    } else {
        format!("{} ({code})", text.escape_debug())
    }
}

/// A UDP socket bound to `addr`, non-blocking, with the requested buffer sizes.
fn udp_socket(addr: SocketAddr, opts: &SocketOptions) -> Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .context("creating a UDP socket")?;
    sockopt::apply(&SockRef::from(&sock), opts, false)?;
    sock.bind(&addr.into())
        .with_context(|| format!("binding a UDP socket to {addr}"))?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

// ---------------------------------------------------------------------------------------
// Certificate verification on the client

/// Accepts exactly the certificate whose fingerprint the server announced over control.
#[derive(Debug)]
struct Pinned {
    sha256: [u8; 32],
    provider: Arc<CryptoProvider>,
    failure: Arc<Mutex<Option<String>>>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let got = sha256(end_entity.as_ref());
        if got == self.sha256 {
            return Ok(ServerCertVerified::assertion());
        }
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(format!(
                "the server's certificate does not match the one it announced on the control connection (SHA-256 {}, announced {})",
                hex(&got),
                hex(&self.sha256)
            ));
        }
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::ApplicationVerificationFailure,
        ))
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The usual webpki verification against `--tls-ca`, remembering why it refused.
#[derive(Debug)]
struct Recorded {
    inner: Arc<WebPkiServerVerifier>,
    ca: PathBuf,
    failure: Arc<Mutex<Option<String>>>,
}

impl ServerCertVerifier for Recorded {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .inspect_err(|e| {
                if let Ok(mut f) = self.failure.lock() {
                    *f = Some(format!(
                        "the server's certificate does not verify against the CA certificates in {} for {}: {e}",
                        self.ca.display(),
                        server_name.to_str()
                    ));
                }
            })
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

// ---------------------------------------------------------------------------------------
// The runtime that flows drive themselves

/// A current-thread tokio runtime driven by whichever flow waits on it, and by a background
/// thread while none does.
struct Engine {
    rt: Runtime,
    /// Flows inside [`EngineRef::run`] now.
    inside: AtomicUsize,
    /// Entries into `run` so far: tells the background thread a pause from a busy runtime.
    entries: AtomicU64,
    /// The background thread drives the runtime (or is about to).
    background: AtomicBool,
    /// Asks the background thread to give the runtime back (or to look at `stop`).
    give_back: Notify,
    /// No user is left: the background thread ends, and the runtime with it.
    stop: AtomicBool,
}

/// A user's share of an [`Engine`]: the listener, its connections, a client connection, a
/// closing connection. When the last share goes, the engine stops.
struct EngineRef(Arc<Engine>);

impl Drop for EngineRef {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
        self.0.give_back.notify_one();
    }
}

impl Engine {
    fn start() -> Result<Arc<EngineRef>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("starting a tokio runtime for QUIC")?;
        let engine = Arc::new(Engine {
            rt,
            inside: AtomicUsize::new(0),
            entries: AtomicU64::new(0),
            background: AtomicBool::new(false),
            give_back: Notify::new(),
            stop: AtomicBool::new(false),
        });
        let bg = engine.clone();
        std::thread::Builder::new()
            .name("wirebench-quic".into())
            .spawn(move || bg.drive_while_idle())
            .context("starting the QUIC driver thread")?;
        Ok(Arc::new(EngineRef(engine)))
    }

    /// The background thread: drives the runtime whenever no flow has for [`IDLE_GRACE`].
    fn drive_while_idle(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            let seen = self.entries.load(Ordering::SeqCst);
            std::thread::sleep(IDLE_GRACE);
            if self.inside.load(Ordering::SeqCst) != 0
                || self.entries.load(Ordering::SeqCst) != seen
            {
                continue;
            }
            // A flow entering now either sees `background` and asks for the runtime back, or
            // is seen here and the background thread stays out.
            self.background.store(true, Ordering::SeqCst);
            if self.inside.load(Ordering::SeqCst) == 0 && !self.stop.load(Ordering::SeqCst) {
                self.rt.block_on(self.give_back.notified());
            }
            self.background.store(false, Ordering::SeqCst);
        }
    }
}

impl EngineRef {
    /// Runs `f` to completion on this thread, driving the runtime meanwhile (or waiting for
    /// whoever drives it).
    fn run<F: Future>(&self, f: F) -> F::Output {
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let e = &self.0;
        e.inside.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(&e.inside);
        e.entries.fetch_add(1, Ordering::SeqCst);
        if e.background.load(Ordering::SeqCst) {
            e.give_back.notify_one();
        }
        e.rt.block_on(f)
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.0.rt.spawn(f);
    }

    /// A quinn endpoint on `socket`, its driver on this runtime.
    fn endpoint(&self, socket: Socket, server: Option<quinn::ServerConfig>) -> Result<Endpoint> {
        let _in_runtime = self.0.rt.enter();
        Ok(Endpoint::new(
            EndpointConfig::default(),
            server,
            socket.into(),
            Arc::new(TokioRuntime),
        )?)
    }
}

// ---------------------------------------------------------------------------------------
// The server side

/// A connection that finished its handshake and opened its stream with 16 bytes.
struct Candidate {
    conn: quinn::Connection,
    send: SendStream,
    recv: RecvStream,
    cookie: [u8; 16],
}

/// Runs on the listener's runtime: every incoming connection gets its handshake and its
/// first 16 bytes, within [`COOKIE_WAIT`], without holding up the others.
async fn admit(endpoint: Endpoint, peer: IpAddr, queue: mpsc::Sender<Candidate>) {
    while let Some(incoming) = endpoint.accept().await {
        // Only the control peer may open data connections (see Transport::listen); a stranger
        // is dropped without an answer, so a forged source address gets nothing sent to it.
        if !super::same_ip(incoming.remote_address().ip(), peer) {
            incoming.ignore();
            continue;
        }
        let queue = queue.clone();
        tokio::spawn(async move {
            let handshake = async {
                let conn = incoming.await.ok()?;
                let (send, mut recv) = conn.accept_bi().await.ok()?;
                let mut cookie = [0u8; 16];
                recv.read_exact(&mut cookie).await.ok()?;
                Some(Candidate {
                    conn,
                    send,
                    recv,
                    cookie,
                })
            };
            if let Ok(Some(c)) = tokio::time::timeout(COOKIE_WAIT, handshake).await {
                // A full queue means nobody is accepting: the connection is dropped (closed).
                let _ = queue.try_send(c);
            }
        });
    }
}

struct QuicListener {
    engine: Arc<EngineRef>,
    endpoint: Endpoint,
    /// The endpoint's UDP socket (a duplicate descriptor), for its buffer sizes.
    options: Arc<Socket>,
    admitted: mpsc::Receiver<Candidate>,
    announced: String,
}

impl Listener for QuicListener {
    fn endpoint(&self) -> String {
        self.announced.clone()
    }
    fn configure(&mut self, opts: &SocketOptions) -> Result<()> {
        // One UDP socket serves every connection of the test: the latest request applies.
        sockopt::apply(&SockRef::from(self.options.as_ref()), opts, false)
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
            let queue = &mut self.admitted;
            let next = self
                .engine
                .run(async { tokio::time::timeout(left, queue.recv()).await });
            let mut c = match next {
                Err(_) => return Ok(None),
                Ok(None) => bail!("the QUIC endpoint stopped accepting connections"),
                Ok(Some(c)) => c,
            };
            if c.cookie != cookie.0 {
                c.conn
                    .close(VarInt::from(CLOSE_BAD_COOKIE), b"wrong test cookie");
                continue;
            }
            let send = &mut c.send;
            let answered = self.engine.run(async {
                tokio::time::timeout(left.min(COOKIE_WAIT), async {
                    send.write_all(&[ADMITTED]).await?;
                    // Let the connection's driver put the byte on the wire now.
                    tokio::task::yield_now().await;
                    Ok::<(), WriteError>(())
                })
                .await
            });
            if !matches!(answered, Ok(Ok(()))) {
                continue; // the client went away meanwhile
            }
            return Ok(Some(Box::new(QuicConnection {
                engine: self.engine.clone(),
                conn: Some(c.conn),
                send: Some(c.send),
                recv: Some(c.recv),
                endpoint: None,
                options: self.options.clone(),
                read_timeout: None,
                write_timeout: None,
                nonblocking: false,
                eof: false,
            })));
        }
    }
}

impl Drop for QuicListener {
    fn drop(&mut self) {
        // The test is over: tell whatever is still connected, and let the close go out.
        self.endpoint.close(VarInt::from(CLOSE_DONE), b"test over");
        self.engine.run(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
    }
}

// ---------------------------------------------------------------------------------------
// A data connection

struct QuicConnection {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_round_trips() {
        let fp: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        let s = format_endpoint(4433, &fp);
        assert_eq!(parse_endpoint(&s).unwrap(), (4433, fp));
        // Upper-case hex digits are fine too.
        assert_eq!(
            parse_endpoint(&s.to_uppercase().replace("SHA", "sha"))
                .unwrap()
                .1,
            fp
        );
    }

    #[test]
    fn bad_endpoints_are_one_line_errors() {
        let good_hex = "ab".repeat(32);
        for bad in [
            String::new(),
            "4433".to_owned(),
            format!("4433/{good_hex}"),
            format!("4433/sha1={good_hex}"),
            format!("0/sha256={good_hex}"),
            format!("70000/sha256={good_hex}"),
            format!("port/sha256={good_hex}"),
            "4433/sha256=abcd".to_owned(),
            format!("4433/sha256={}", "zz".repeat(32)),
            format!("4433/sha256={good_hex}00"),
            format!("4433/sha256={}é", "ab".repeat(31)),
            "4433/sha256=\nab".to_owned(),
        ] {
            let e = parse_endpoint(&bad).expect_err(&bad);
            let msg = format!("{e:#}");
            assert!(!msg.contains('\n'), "{msg}");
            assert!(msg.contains("PORT/sha256=HEX"), "{msg}");
        }
    }

    /// A listener on loopback and what a client needs to reach it.
    fn serve() -> (Box<dyn Listener>, SocketAddr, String, Cookie) {
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let listener = quic
            .listen(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
            )
            .unwrap();
        let endpoint = listener.endpoint();
        // connect() takes the control address: only its IP is used.
        let control = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
        (listener, control, endpoint, Cookie::random().unwrap())
    }

    #[test]
    fn bytes_flow_both_ways_and_end_cleanly() {
        let (mut listener, control, endpoint, cookie) = serve();
        let server = std::thread::spawn(move || {
            let mut conn = listener
                .accept(&cookie, Duration::from_secs(5))
                .unwrap()
                .expect("a connection");
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 7];
            loop {
                match conn.recv(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            conn.send(&got[..3]).unwrap();
            conn.shutdown_write().unwrap();
            got
        });
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let mut conn = quic
            .connect(
                control,
                &endpoint,
                &SocketOptions::default(),
                &cookie,
                Duration::from_secs(5),
            )
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let msg = b"hello over quic";
        let mut off = 0;
        while off < msg.len() {
            off += conn.send(&msg[off..]).unwrap();
        }
        conn.shutdown_write().unwrap();
        let mut back = [0u8; 8];
        let n = conn.recv(&mut back).unwrap();
        assert_eq!(&back[..n], b"hel");
        assert_eq!(conn.recv(&mut back).unwrap(), 0, "end of stream");
        assert_eq!(conn.recv(&mut back).unwrap(), 0, "end of stream stays");
        assert_eq!(server.join().unwrap(), msg);
        let e = conn.effective_options(&SocketOptions::default());
        assert!(e.rcvbuf_bytes.is_some_and(|b| b > 0));
    }

    #[test]
    fn a_certificate_other_than_the_announced_one_is_refused() {
        let (_listener, control, endpoint, cookie) = serve();
        let (port, _) = parse_endpoint(&endpoint).unwrap();
        let forged = format_endpoint(port, &[0x11; 32]);
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let started = Instant::now();
        let err = match quic.connect(
            control,
            &forged,
            &SocketOptions::default(),
            &cookie,
            Duration::from_secs(10),
        ) {
            Ok(_) => panic!("a forged fingerprint must not connect"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(err.starts_with("QUIC handshake with 127.0.0.1:"), "{err}");
        assert!(err.contains("does not match"), "{err}");
        assert!(err.contains(&"11".repeat(32)), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn a_wrong_cookie_is_not_admitted() {
        let (mut listener, control, endpoint, cookie) = serve();
        let server = std::thread::spawn(move || {
            listener
                .accept(&cookie, Duration::from_millis(1500))
                .unwrap()
                .is_none()
        });
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let err = match quic.connect(
            control,
            &endpoint,
            &SocketOptions::default(),
            &Cookie([0; 16]),
            Duration::from_secs(5),
        ) {
            Ok(_) => panic!("a wrong cookie must not be admitted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("refused the test cookie"), "{err}");
        assert!(server.join().unwrap(), "the listener admitted nothing");
    }

    /// Reflection: a QUIC connection from another address than the control peer gets no
    /// answer at all (not even the handshake's), and the listener admits nothing.
    #[test]
    fn a_connection_from_another_address_than_the_control_peer_gets_no_answer() {
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let mut listener = quic
            .listen(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            )
            .unwrap();
        let endpoint = listener.endpoint();
        let cookie = Cookie::random().unwrap();
        let server = std::thread::spawn(move || {
            listener
                .accept(&cookie, Duration::from_millis(1500))
                .unwrap()
                .is_none()
        });
        let control = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
        let got = quic.connect(
            control,
            &endpoint,
            &SocketOptions::default(),
            &cookie,
            Duration::from_secs(2),
        );
        assert!(got.is_err(), "a stranger's connection was answered");
        assert!(server.join().unwrap(), "the listener admitted a stranger");
    }

    #[test]
    fn nonblocking_receive_reports_would_block_then_data() {
        let (mut listener, control, endpoint, cookie) = serve();
        let server = std::thread::spawn(move || {
            let mut conn = listener
                .accept(&cookie, Duration::from_secs(5))
                .unwrap()
                .expect("a connection");
            std::thread::sleep(Duration::from_millis(50));
            conn.send(b"x").unwrap();
            conn.shutdown_write().unwrap();
        });
        let quic = Quic::new(&TransportConfig::default()).unwrap();
        let mut conn = quic
            .connect(
                control,
                &endpoint,
                &SocketOptions::default(),
                &cookie,
                Duration::from_secs(5),
            )
            .unwrap();
        conn.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4];
        let mut would_block = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        let n = loop {
            match conn.recv(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => would_block += 1,
                r => break r.unwrap(),
            }
            assert!(Instant::now() < deadline, "no data while spinning");
        };
        assert_eq!(&buf[..n], b"x");
        assert!(would_block > 0);
        let eof = loop {
            match conn.recv(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => break r.unwrap(),
            }
            assert!(Instant::now() < deadline, "no end of stream while spinning");
        };
        assert_eq!(eof, 0);
        server.join().unwrap();
    }

    #[test]
    fn self_signed_identity_is_made_once() {
        let a = self_signed().unwrap();
        let b = self_signed().unwrap();
        assert_eq!(a.chain, b.chain);
        assert_eq!(sha256(a.chain[0].as_ref()), sha256(b.chain[0].as_ref()));
    }
}
