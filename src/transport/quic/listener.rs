//! The server side: one UDP socket and endpoint per listener, shared by the test's flows;
//! handshakes and cookies taken in the background, admission of the test's own connections.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use quinn::{Endpoint, RecvStream, SendStream, VarInt, WriteError};
use socket2::{SockRef, Socket};
use tokio::sync::mpsc;

use super::connection::QuicConnection;
use super::engine::{Engine, EngineRef};
use super::tls::format_endpoint;
use super::tls::{self, Identity};
use super::{transport_config, udp_socket, ADMITTED, CLOSE_BAD_COOKIE, CLOSE_DONE, COOKIE_WAIT};
use crate::transport::{remaining, same_ip, sockopt, Connection, Cookie, Listener, SocketOptions};

/// Connections that finished their handshake and wait for `accept`; more are refused.
const ADMISSION_QUEUE: usize = 64;
/// Handshakes in progress at once on one listener.
const MAX_INCOMING: usize = 256;

fn server_config(identity: Identity) -> Result<quinn::ServerConfig> {
    let crypto = tls::server_crypto(identity)?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(transport_config(None, true))
        .max_incoming(MAX_INCOMING)
        .migration(false);
    Ok(cfg)
}

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
        if !same_ip(incoming.remote_address().ip(), peer) {
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

pub(super) struct QuicListener {
    engine: Arc<EngineRef>,
    endpoint: Endpoint,
    /// The endpoint's UDP socket (a duplicate descriptor), for its buffer sizes.
    options: Arc<Socket>,
    admitted: mpsc::Receiver<Candidate>,
    announced: String,
}

impl QuicListener {
    /// A listener on `local` with `identity`, admitting connections from `peer` alone.
    pub(super) fn open(identity: Identity, local: IpAddr, peer: IpAddr) -> Result<QuicListener> {
        let fingerprint = tls::sha256(identity.chain[0].as_ref());
        let config = server_config(identity)?;
        let socket = udp_socket(
            SocketAddr::new(local, 0),
            &SocketOptions::default(),
            Some(peer),
        )
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
        Ok(QuicListener {
            engine,
            endpoint,
            options,
            admitted: rx,
            announced: format_endpoint(port, &fingerprint),
        })
    }
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
            return Ok(Some(Box::new(QuicConnection::new(
                self.engine.clone(),
                c.conn,
                (c.send, c.recv),
                None,
                self.options.clone(),
            ))));
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
