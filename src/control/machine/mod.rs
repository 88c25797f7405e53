//! The control protocol's two sides as state machines without I/O, in the manner of
//! quinn-proto: every rule of the conversation (which message may come now, what is answered,
//! what is refused and why, the deadlines, the limits, the key exchange's order, a point's
//! start and end handshake) lives here, and the blocking drivers in client.rs and server.rs
//! only move frames and run the data plane.
//!
//! A machine never reads a clock, a socket or a random source: time comes in as the `now` of
//! each input, randomness as values drawn by the driver. A driver
//!
//! 1. feeds what happened: a decoded frame (`handle`), an undecodable one (`handle_garbage`),
//!    the peer's close (`handle_closed`), time passing (`handle_timeout`), or one of its own
//!    events (the data connections are up, the senders are done, ...);
//! 2. drains `poll_action` and performs each action (send a frame, start the data plane, ...);
//! 3. waits for the next input no longer than `next_deadline`.
//!
//! A machine that has ended the session answers every later input with nothing: its last
//! action was `Close` (the driver tells the peer why) or `Finished`.

pub mod client;
pub mod server;

#[cfg(test)]
mod tests;

use super::protocol::ClientMessage;
use super::refusal::Refusal;

pub use client::{ClientAction, ClientMachine, ClientSetup, Opened};
pub use server::{PointWatch, ServerAction, ServerMachine, ServerSetup};

/// The message's wire name, for errors about messages out of order.
pub fn client_message_name(m: &ClientMessage) -> &'static str {
    match m {
        ClientMessage::Hello { .. } => "hello",
        ClientMessage::Auth { .. } => "auth",
        ClientMessage::Open { .. } => "open",
        ClientMessage::Point { .. } => "point",
        ClientMessage::Connected => "connected",
        ClientMessage::SendDone { .. } => "send_done",
        ClientMessage::EndPoint => "end_point",
        ClientMessage::Bye => "bye",
    }
}

/// What a side of a point does on its data connections, as far as the control protocol cares:
/// whether it has senders (it says when they are done) and how many receivers (the peer's
/// SendDone must count exactly that many senders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PointRoles {
    senders: bool,
    receivers: usize,
}

impl PointRoles {
    fn of(side: crate::pattern::Side, t: &super::protocol::TestSpec) -> PointRoles {
        use crate::pattern::{self, Role};
        let n = pattern::connection_count(t.pattern, t.direction, t.streams);
        let roles: Vec<Role> = (0..n)
            .map(|i| pattern::role(side, t.pattern, t.direction, t.streams, i))
            .collect();
        PointRoles {
            senders: roles.contains(&Role::Sender),
            receivers: roles.iter().filter(|r| **r == Role::Receiver).count(),
        }
    }

    /// The error `worker::senders_done` has always given for a SendDone of the wrong size.
    fn check_peer_senders(&self, sent: &[u64]) -> Result<(), Refusal> {
        if sent.len() != self.receivers {
            return Err(Refusal::invalid(format!(
                "peer reported {} sending streams, expected {}",
                sent.len(),
                self.receivers
            )));
        }
        Ok(())
    }
}

/// A side's queue of actions and the terminal flag every machine needs.
#[derive(Debug)]
struct Outbox<A> {
    actions: std::collections::VecDeque<A>,
    ended: bool,
}

impl<A> Default for Outbox<A> {
    fn default() -> Self {
        Outbox {
            actions: Default::default(),
            ended: false,
        }
    }
}

impl<A> Outbox<A> {
    fn push(&mut self, a: A) {
        if !self.ended {
            self.actions.push_back(a);
        }
    }

    /// Queues the last action of the session: nothing is queued after it.
    fn end(&mut self, a: A) {
        self.push(a);
        self.ended = true;
    }
}
