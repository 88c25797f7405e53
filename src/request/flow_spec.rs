//! `--compete SPEC`: one competing flow as the user names it (`tcp`, `tcp:CC`, `quic`),
//! parsed once where the request is made and written back as the same text in documents.

use serde::{Deserialize, Serialize};

use crate::transport::TransportKind;

/// A competing flow: `tcp`, `tcp:CC` (a congestion control the kernel has) or `quic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    pub transport: TransportKind,
    pub cc: Option<String>,
}

impl std::str::FromStr for FlowSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<FlowSpec, String> {
        let (name, cc) = match s.split_once(':') {
            Some((t, cc)) => (t, Some(cc)),
            None => (s, None),
        };
        let transport = match TransportKind::from_name(name) {
            Ok(t @ (TransportKind::Tcp | TransportKind::Quic)) => t,
            _ => {
                return Err(format!(
                    "invalid flow {s:?}: expected tcp, tcp:CC (tcp:bbr) or quic"
                ))
            }
        };
        if let Some(cc) = cc {
            if transport != TransportKind::Tcp || cc.is_empty() {
                return Err(format!(
                    "invalid flow {s:?}: a congestion control is named for tcp only (tcp:bbr)"
                ));
            }
        }
        Ok(FlowSpec {
            transport,
            cc: cc.map(str::to_owned),
        })
    }
}

impl std::fmt::Display for FlowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.transport.name())?;
        if let Some(cc) = &self.cc {
            write!(f, ":{cc}")?;
        }
        Ok(())
    }
}

impl Serialize for FlowSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FlowSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FlowSpec, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
