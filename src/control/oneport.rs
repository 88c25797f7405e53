//! `--one-port` tests: data connections that arrive on the control port are routed, by the
//! cookie they present, to the test that is waiting for them.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Mutex};

use crate::transport::Cookie;

/// Connections a test's route holds beyond its own count before further ones are dropped:
/// room for a crr test's next connection and for a client's retry.
const QUEUE_SLACK: usize = 4;

/// How many handed-over connections a test with `connections` data connections (0 for crr,
/// which opens one per transaction) may have waiting for its accept. Bounded, so that one
/// session cannot pin thousands of descriptors by opening data connections to the control
/// port that its test never takes.
pub fn queue_capacity(connections: u32) -> usize {
    connections as usize + QUEUE_SLACK
}

/// Whether a transport's data can share the control port: the control listener accepts TCP
/// connections, so only plain TCP data can arrive there.
pub fn carries(transport: crate::transport::TransportKind) -> bool {
    transport == crate::transport::TransportKind::Tcp
}

/// The tests of one server that take data connections on its control port.
#[derive(Default)]
pub struct DataRoutes {
    waiting: Mutex<HashMap<[u8; 16], mpsc::SyncSender<TcpStream>>>,
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
    /// Opens a route for `cookie`: connections presenting it arrive on the receiver, at most
    /// `capacity` of them waiting at once (see [`queue_capacity`]); more are closed.
    pub fn open(
        routes: &Arc<DataRoutes>,
        cookie: &Cookie,
        capacity: usize,
    ) -> (Route, mpsc::Receiver<TcpStream>) {
        let (tx, rx) = mpsc::sync_channel(capacity);
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
            // A full queue (or a test gone) drops the connection: closed, not kept.
            let _ = tx.try_send(stream);
        }
    }
}

#[cfg(test)]
mod loopback_tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair(listener: &TcpListener) -> TcpStream {
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // The client end is dropped: the server end is still a descriptor to hold.
        server
    }

    /// A session that opens thousands of data connections to the control port pins no more
    /// descriptors than its queue holds: the rest are closed on arrival.
    #[test]
    fn a_route_holds_at_most_its_capacity_and_closes_the_rest() {
        let routes = Arc::new(DataRoutes::default());
        let cookie = Cookie([3; 16]);
        let capacity = queue_capacity(2);
        let (_route, handed) = DataRoutes::open(&routes, &cookie, capacity);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        for _ in 0..(capacity + 20) {
            routes.hand_over(&cookie.0, pair(&listener));
        }
        let held = handed.try_iter().count();
        assert_eq!(held, capacity);
        // Taken ones make room again.
        routes.hand_over(&cookie.0, pair(&listener));
        assert_eq!(handed.try_iter().count(), 1);
    }
}
