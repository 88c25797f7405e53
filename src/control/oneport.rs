//! `--one-port` tests: data connections that arrive on the control port are routed, by the
//! cookie they present, to the test that is waiting for them.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Mutex};

use crate::transport::Cookie;

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

    /// Hands a data connection that has presented `cookie` (after the data prefix) to its
    /// test. A connection with an unknown cookie is dropped. The server's acceptor reads the
    /// prefix and the cookie, with a deadline and without a thread per connection.
    pub fn hand_over(&self, cookie: &[u8], stream: TcpStream) {
        let tx = match self.waiting.lock() {
            Ok(w) => w.get(cookie).cloned(),
            Err(_) => None,
        };
        if let Some(tx) = tx {
            let _ = tx.send(stream);
        }
    }
}
