//! Why a server refuses a request or ends a test: a kind a client can act on, and one line.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What kind of refusal it is: what a client can do about it. On the wire in snake case
/// (`busy`, `policy`, `invalid`, `not_authorised`, `limit`, `internal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The server is at a shared limit now (its sessions, its memory, its data connections or
    /// its bit rate in all, or this client's share of them): the same request may be taken
    /// once running tests end.
    Busy,
    /// The server's operator does not allow it: the access list, or a feature not permitted
    /// (`--permit`).
    Policy,
    /// Not a request the protocol allows: malformed, out of order, not in time, of another
    /// protocol version, or one this server cannot run.
    Invalid,
    /// The pre-shared key is missing or does not match.
    NotAuthorised,
    /// Beyond one of this server's limits for a test: refused whenever it is asked; a smaller
    /// request may be taken.
    Limit,
    /// The server failed on its own (a socket, its data plane, a bug).
    Internal,
}

impl RefusalKind {
    /// Every kind, in a fixed order (the server's counters keep one each).
    pub const ALL: [RefusalKind; 6] = [
        RefusalKind::Busy,
        RefusalKind::Policy,
        RefusalKind::Invalid,
        RefusalKind::NotAuthorised,
        RefusalKind::Limit,
        RefusalKind::Internal,
    ];

    /// Its name on the wire (snake case), as a metric's `kind` label gives it.
    pub fn label(self) -> &'static str {
        match self {
            RefusalKind::Busy => "busy",
            RefusalKind::Policy => "policy",
            RefusalKind::Invalid => "invalid",
            RefusalKind::NotAuthorised => "not_authorised",
            RefusalKind::Limit => "limit",
            RefusalKind::Internal => "internal",
        }
    }

    /// As a client's error line names it.
    pub fn name(self) -> &'static str {
        match self {
            RefusalKind::Busy => "busy",
            RefusalKind::Policy => "refused by policy",
            RefusalKind::Invalid => "invalid request",
            RefusalKind::NotAuthorised => "not authorised",
            RefusalKind::Limit => "over a limit",
            RefusalKind::Internal => "internal error",
        }
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A server's refusal: its kind, its one line, and (busy only) how long until the server
/// expects to have room, when it can tell. Displayed as its line alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl Refusal {
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn busy(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Busy, message)
    }

    pub fn policy(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Policy, message)
    }

    pub fn invalid(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Invalid, message)
    }

    pub fn not_authorised(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::NotAuthorised, message)
    }

    pub fn limit(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Limit, message)
    }

    pub fn internal(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Internal, message)
    }

    /// With the server's estimate of when to try again.
    pub fn retry_after(mut self, wait: Option<Duration>) -> Refusal {
        self.retry_after = wait;
        self
    }

    /// The refusal an error of a server's session stands for: the one it carries, or the
    /// server's own failure with the error's text.
    pub fn of(e: &anyhow::Error) -> Refusal {
        let text = format!("{e:#}");
        match e.chain().find_map(|c| c.downcast_ref::<Refusal>()) {
            Some(r) => Refusal {
                message: text,
                ..r.clone()
            },
            None => Refusal::internal(text),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// A refusal as a client received it. `kind` is None from a server before protocol 3, which
/// sent no kind (and for a kind this side does not know).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRefusal {
    pub kind: Option<RefusalKind>,
    /// The server's words, escaped for a terminal.
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl ServerRefusal {
    pub fn is(&self, kind: RefusalKind) -> bool {
        self.kind == Some(kind)
    }

    /// The server's refusal in an error of a client's session, if that is what ended it.
    pub fn of(e: &anyhow::Error) -> Option<&ServerRefusal> {
        e.chain().find_map(|c| c.downcast_ref::<ServerRefusal>())
    }
}

/// One line naming the kind, and for busy when to try again: `server (busy, try again in
/// 1.500 s): server busy: ...` (the server's estimate) or `server (busy, try again later):
/// ...`, `server (over a limit): duration of 7200 s; ...`; `server: ...` when the server
/// gave no kind.
impl fmt::Display for ServerRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.retry_after) {
            (None, _) => write!(f, "server: {}", self.message),
            (Some(RefusalKind::Busy), Some(wait)) => write!(
                f,
                "server (busy, try again in {}): {}",
                crate::units::format_seconds(wait.as_secs_f64()),
                self.message
            ),
            (Some(RefusalKind::Busy), None) => {
                write!(f, "server (busy, try again later): {}", self.message)
            }
            (Some(kind), _) => write!(f, "server ({kind}): {}", self.message),
        }
    }
}

impl std::error::Error for ServerRefusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_names_the_kind_and_for_busy_when_to_try_again() {
        let busy = ServerRefusal {
            kind: Some(RefusalKind::Busy),
            message: "server busy: 3 tests running, the limit is 3".into(),
            retry_after: Some(Duration::from_millis(1500)),
        };
        assert_eq!(
            busy.to_string(),
            "server (busy, try again in 1.500 s): server busy: 3 tests running, the limit is 3"
        );
        let later = ServerRefusal {
            retry_after: None,
            ..busy.clone()
        };
        assert_eq!(
            later.to_string(),
            "server (busy, try again later): server busy: 3 tests running, the limit is 3"
        );
        let limit = ServerRefusal {
            kind: Some(RefusalKind::Limit),
            message: "duration of 7200 s; this server allows at most 3600 s".into(),
            retry_after: None,
        };
        assert_eq!(
            limit.to_string(),
            "server (over a limit): duration of 7200 s; this server allows at most 3600 s"
        );
        let old = ServerRefusal {
            kind: None,
            ..limit
        };
        assert_eq!(
            old.to_string(),
            "server: duration of 7200 s; this server allows at most 3600 s"
        );
    }

    #[test]
    fn a_sessions_error_keeps_the_refusal_it_carries_and_is_internal_otherwise() {
        let e = anyhow::Error::new(
            Refusal::busy("server busy: x").retry_after(Some(Duration::from_secs(1))),
        );
        let r = Refusal::of(&e);
        assert_eq!(r.kind, RefusalKind::Busy);
        assert_eq!(r.retry_after, Some(Duration::from_secs(1)));
        assert_eq!(r.message, "server busy: x");
        let e = anyhow::anyhow!("data connection 1: reset");
        assert_eq!(
            Refusal::of(&e),
            Refusal::internal("data connection 1: reset")
        );
    }
}
