//! The engine: a current-thread tokio runtime that quinn's drivers run on, driven by
//! whichever flow waits on it and by a background thread while none does. The grpc
//! transport runs tonic on it the same way.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quinn::{Endpoint, EndpointConfig, TokioRuntime};
use socket2::Socket;
use tokio::runtime::Runtime;
use tokio::sync::Notify;

/// How long a runtime must go without a flow driving it before the background thread does.
const IDLE_GRACE: Duration = Duration::from_millis(2);

/// A current-thread tokio runtime driven by whichever flow waits on it, and by a background
/// thread while none does.
pub(in crate::transport) struct Engine {
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
pub(in crate::transport) struct EngineRef(Arc<Engine>);

impl Drop for EngineRef {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
        self.0.give_back.notify_one();
    }
}

impl Engine {
    pub(in crate::transport) fn start() -> Result<Arc<EngineRef>> {
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
    pub(in crate::transport) fn run<F: Future>(&self, f: F) -> F::Output {
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

    pub(in crate::transport) fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.0.rt.spawn(f);
    }

    /// Spawns `f` on the runtime; its output comes back through the handle.
    pub(in crate::transport) fn spawn_task<F>(&self, f: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.rt.spawn(f)
    }

    /// A quinn endpoint on `socket`, its driver on this runtime.
    pub(in crate::transport) fn endpoint(
        &self,
        socket: Socket,
        server: Option<quinn::ServerConfig>,
    ) -> Result<Endpoint> {
        let _in_runtime = self.0.rt.enter();
        Ok(Endpoint::new(
            EndpointConfig::default(),
            server,
            socket.into(),
            Arc::new(TokioRuntime),
        )?)
    }
}
