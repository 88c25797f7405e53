//! Which implementation each [`TransportKind`] opens. The kind, its name and its layer are
//! the result model's (`model::vocab`); everything holds a kind and asks it, or the
//! [`Transport`] it opens, instead of comparing names.

#[cfg(not(feature = "mpi"))]
use anyhow::bail;
use anyhow::Result;

use super::{Capabilities, Transport, TransportConfig};
pub use crate::model::vocab::{names, Layer, TransportKind};

// The kind itself is a name of the result model's (`model::vocab`); what it opens is the
// transport layer's, so the mapping from kind to implementation stays here.

impl TransportKind {
    /// The implementation, with this side's own settings (interface, certificates).
    pub fn open(self, config: &TransportConfig) -> Result<Box<dyn Transport>> {
        Ok(match self {
            TransportKind::Tcp => Box::new(super::tcp::TCP),
            TransportKind::Mptcp => Box::new(super::mptcp::MPTCP),
            TransportKind::Udp => Box::new(super::udp::Udp),
            TransportKind::Unix => Box::new(super::unix::Unix),
            TransportKind::Raw => Box::new(super::raw::Raw::new(config)),
            TransportKind::Quic => Box::new(super::quic::Quic::new(config)?),
            TransportKind::Grpc => Box::new(super::grpc::Grpc::new(config)?),
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
            .contains("available: tcp, udp, unix, mptcp, quic, raw, grpc"));
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
