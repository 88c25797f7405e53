//! `--one-port` tests: data connections that arrive on the control port are routed, by the
//! cookie they present, to the test that is waiting for them.

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::transport::{Cookie, DATA_PREFIX};

/// How long a data connection on the control port may take to present its cookie.
const COOKIE_WAIT: Duration = Duration::from_secs(5);

/// Whether a transport's data can share the control port: the control listener accepts TCP
/// connections, so only plain TCP data can arrive there.
pub fn carries(transport: &str) -> bool {
    transport == "tcp"
}

/// The tests of one server that take data connections on its control port.
#[derive(Default)]
pub struct DataRoutes {
    waiting: Mutex<HashMap<[u8; 16], mpsc::Sender<TcpStream>>>,
}

/// Keeps a test's route open; dropping it removes the route.
pub struct Route {
    routes: Arc<DataRoutes>,
    cookie: [u8; 16],
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Ok(mut w) = self.routes.waiting.lock() {
            w.remove(&self.cookie);
        }
    }
}

impl DataRoutes {
    /// Opens a route for `cookie`: connections presenting it arrive on the receiver.
    pub fn open(routes: &Arc<DataRoutes>, cookie: &Cookie) -> (Route, mpsc::Receiver<TcpStream>) {
        let (tx, rx) = mpsc::channel();
        if let Ok(mut w) = routes.waiting.lock() {
            w.insert(cookie.0, tx);
        }
        (
            Route {
                routes: Arc::clone(routes),
                cookie: cookie.0,
            },
            rx,
        )
    }

    /// Routes a data connection whose prefix and cookie have already arrived, without
    /// waiting and without a thread of its own (a crr test opens one per transaction).
    /// Gives the connection back when that is not the case.
    pub fn deliver_if_ready(&self, mut stream: TcpStream) -> Option<TcpStream> {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let mut hello = [0u8; 20];
        // One non-blocking peek: the accept loop must not wait on any one connection.
        let peeked = recv(
            stream.as_raw_fd(),
            &mut hello,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
        );
        if !matches!(peeked, Ok(20)) || hello[..4] != DATA_PREFIX {
            return Some(stream);
        }
        // The peeked bytes are there: this read takes them at once.
        if stream.read_exact(&mut hello).is_ok() {
            self.hand_over(&hello[4..], stream);
        }
        None
    }

    fn hand_over(&self, cookie: &[u8], stream: TcpStream) {
        let tx = match self.waiting.lock() {
            Ok(w) => w.get(cookie).cloned(),
            Err(_) => None,
        };
        if let Some(tx) = tx {
            let _ = tx.send(stream);
        }
    }

    /// Reads the cookie of a connection that opened with the data prefix and hands the
    /// connection to its test. A connection with an unknown cookie is dropped.
    pub fn deliver(&self, mut stream: TcpStream) {
        let mut cookie = [0u8; 16];
        if stream.set_read_timeout(Some(COOKIE_WAIT)).is_err()
            || stream.read_exact(&mut cookie).is_err()
        {
            return;
        }
        self.hand_over(&cookie, stream);
    }
}
