//! Which transport: the one place that maps a transport's name to its implementation and
//! to the facts about it that are not a property of a connection (its layer). Everything
//! else holds a [`TransportKind`] and asks it, or the [`Transport`] it opens, instead of
//! comparing names.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::{Capabilities, Transport, TransportConfig};

/// A transport, as `--transport` names it and as run documents and the control protocol
/// carry it (lowercase: "tcp", "udp", ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum TransportKind {
    /// TCP byte streams.
    Tcp,
    /// UDP datagrams.
    Udp,
    /// Unix-domain stream sockets (client and server on one host).
    Unix,
    /// Multipath TCP.
    Mptcp,
    /// QUIC streams (quinn), over UDP.
    Quic,
    /// Raw Ethernet frames of wirebench's own EtherType (needs root or CAP_NET_RAW).
    Raw,
    /// MPI point-to-point calls between two ranks (`wirebench mpi` only).
    Mpi,
}

/// Where a transport sits in the stack, for comparisons across layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer {
    /// Lower numbers are lower layers.
    pub rank: u32,
    pub what: &'static str,
}

impl TransportKind {
    /// Every transport a wirebench server carries (`mpi` runs between MPI ranks instead).
    pub const SERVED: [TransportKind; 6] = [
        TransportKind::Tcp,
        TransportKind::Udp,
        TransportKind::Unix,
        TransportKind::Mptcp,
        TransportKind::Quic,
        TransportKind::Raw,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Udp => "udp",
            TransportKind::Unix => "unix",
            TransportKind::Mptcp => "mptcp",
            TransportKind::Quic => "quic",
            TransportKind::Raw => "raw",
            TransportKind::Mpi => "mpi",
        }
    }

    /// The implementation, with this side's own settings (interface, certificates).
    pub fn open(self, config: &TransportConfig) -> Result<Box<dyn Transport>> {
        Ok(match self {
            TransportKind::Tcp => Box::new(super::tcp::TCP),
            TransportKind::Mptcp => Box::new(super::mptcp::MPTCP),
            TransportKind::Udp => Box::new(super::udp::Udp),
            TransportKind::Unix => Box::new(super::unix::Unix),
            TransportKind::Raw => Box::new(super::raw::Raw::new(config)),
            TransportKind::Quic => Box::new(super::quic::Quic::new(config)?),
            #[cfg(feature = "mpi")]
            TransportKind::Mpi => Box::new(super::mpi::Mpi),
            #[cfg(not(feature = "mpi"))]
            TransportKind::Mpi => bail!("{}", super::NO_MPI),
        })
    }

    /// What the transport guarantees (see [`Capabilities`]), without this side's settings.
    pub fn capabilities(self) -> Result<Capabilities> {
        Ok(self.open(&TransportConfig::default())?.capabilities())
    }

    pub fn layer(self) -> Layer {
        let (rank, what) = match self {
            TransportKind::Raw => (0, "link: Ethernet frames"),
            TransportKind::Unix => (1, "local IPC, no network stack"),
            TransportKind::Udp => (2, "IP datagrams"),
            TransportKind::Tcp => (3, "IP byte stream"),
            TransportKind::Mptcp => (3, "IP byte stream, multipath"),
            TransportKind::Quic => (4, "user-space stream over UDP"),
            TransportKind::Mpi => (5, "message passing library"),
        };
        Layer { rank, what }
    }

    /// The name of a stream side's calls: datagrams on UDP, messages on raw links, else
    /// writes (sender) and reads (receiver).
    pub fn call_noun(self, sender: bool) -> &'static str {
        match (self, sender) {
            (TransportKind::Udp, _) => "datagram",
            (TransportKind::Raw, _) => "message",
            (_, true) => "write",
            (_, false) => "read",
        }
    }

    /// Looks a transport up by name; an unknown one is an error listing the known ones.
    pub fn from_name(name: &str) -> Result<TransportKind> {
        match TransportKind::SERVED
            .iter()
            .chain([TransportKind::Mpi].iter())
            .find(|k| k.name() == name)
        {
            Some(&k) => Ok(k),
            None => bail!("unknown transport '{name}' (available: {})", names()),
        }
    }
}

/// The names of the transports a server carries, for messages: "tcp, udp, ...".
pub fn names() -> String {
    TransportKind::SERVED
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TransportKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<TransportKind> {
        TransportKind::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name a transport answers to is the one serde, clap and `name()` use alike, so a
    /// run document, the control protocol and the command line never disagree.
    #[test]
    fn one_name_everywhere() {
        use clap::ValueEnum;
        for k in TransportKind::value_variants() {
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(
                k.to_possible_value().unwrap().get_name(),
                k.name(),
                "clap's name of {k:?}"
            );
            assert_eq!(TransportKind::from_name(k.name()).unwrap(), *k);
        }
        assert!(TransportKind::from_name("sctp")
            .unwrap_err()
            .to_string()
            .contains("available: tcp, udp, unix, mptcp, quic, raw"));
    }

    /// Each served transport's implementation answers to its own kind's name.
    #[test]
    fn every_served_kind_opens_its_own_transport() {
        for k in TransportKind::SERVED {
            let t = k.open(&TransportConfig::default()).unwrap();
            assert_eq!(t.name(), k.name());
        }
    }
}
