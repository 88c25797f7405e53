//! Socket options that a test asks for, applying them, and reading back what the kernel did.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use socket2::SockRef;

/// Options requested for one side's data sockets. Buffer sizes of 0 leave the kernel's
/// autotuning on; any other value fixes the buffer (and turns autotuning off for it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketOptions {
    /// SO_SNDBUF request, bytes; 0 = autotuning.
    pub sndbuf: u64,
    /// SO_RCVBUF request, bytes; 0 = autotuning.
    pub rcvbuf: u64,
    /// TCP_NODELAY (Nagle's algorithm off).
    pub nodelay: bool,
    /// TCP congestion control algorithm, e.g. "cubic".
    pub cc: Option<String>,
    /// TCP_MAXSEG request, bytes.
    pub mss: Option<u32>,
}

/// What the kernel reports after the options were applied, next to what was requested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EffectiveOptions {
    /// Requested SO_SNDBUF in bytes (0 = autotuning).
    pub sndbuf_requested: u64,
    /// SO_SNDBUF as getsockopt reports it, bytes (Linux doubles a request for its bookkeeping).
    pub sndbuf_bytes: Option<u64>,
    pub rcvbuf_requested: u64,
    pub rcvbuf_bytes: Option<u64>,
    pub nodelay: Option<bool>,
    pub cc: Option<String>,
    pub mss_bytes: Option<u32>,
    /// Client side: wall time from starting to connect until the connection could carry
    /// data (handshakes and the test cookie included), nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_ns: Option<u64>,
}

/// Longest congestion-control name the kernel takes: TCP_CA_NAME_MAX is 16 bytes with the NUL.
pub const CC_NAME_MAX: usize = 15;

/// A congestion-control algorithm's name held in place, so that a sweep point's key that
/// names one stays a plain `Copy` value. Written and read as its text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CcName {
    len: u8,
    bytes: [u8; CC_NAME_MAX],
}

impl CcName {
    /// None when the name is empty or longer than the kernel takes.
    pub fn new(name: &str) -> Option<CcName> {
        let len = name.len();
        if len == 0 || len > CC_NAME_MAX {
            return None;
        }
        let mut bytes = [0u8; CC_NAME_MAX];
        bytes[..len].copy_from_slice(name.as_bytes());
        Some(CcName {
            len: len as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        // Always the bytes of a whole `&str` (see `new`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Display for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl Serialize for CcName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CcName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<CcName, D::Error> {
        let name = String::deserialize(d)?;
        CcName::new(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "congestion control name of {} bytes: names have 1 to {CC_NAME_MAX}",
                name.len()
            ))
        })
    }
}

/// The congestion control this host's new TCP sockets get (net.ipv4.tcp_congestion_control).
pub fn default_congestion_control() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Whether an algorithm has TCP pace the connection itself: BBR (and its later versions) asks
/// for pacing, which the kernel does with a timer per socket unless an fq qdisc does it.
pub fn paces_itself(cc: &str) -> bool {
    cc.starts_with("bbr")
}

/// Congestion control algorithms this kernel offers.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Checks a congestion-control name before any data socket is made, so a typo is one clear
/// error. A name the kernel has not loaded yet may still be one it loads on demand (as root,
/// asking for `bbr` loads tcp_bbr): a throw-away socket asks, as the data sockets would.
pub fn validate_cc(name: &str) -> Result<()> {
    let available = available_congestion_controls();
    if available.iter().any(|a| a == name) {
        return Ok(());
    }
    let probe = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .context("creating a socket to check the congestion control")?;
    let Err(e) = probe.set_tcp_congestion(name.as_bytes()) else {
        return Ok(());
    };
    // TCP_CA_NAME_MAX is 16 bytes with the NUL; a module is named tcp_NAME.
    let plausible = !name.is_empty()
        && name.len() < 16
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let hint = if plausible {
        format!("; if it is built as a module, `modprobe tcp_{name}` loads it")
    } else {
        String::new()
    };
    bail!(
        "congestion control '{}' is not available on {} ({e}; available: {}){hint}",
        crate::text::printable(name),
        crate::env::hostname(),
        available.join(", ")
    );
}

/// Applies buffer sizes (any socket) and, when `tcp`, the TCP options.
pub fn apply(sock: &SockRef<'_>, opts: &SocketOptions, tcp: bool) -> Result<()> {
    if opts.sndbuf > 0 {
        let v = usize::try_from(opts.sndbuf).unwrap_or(usize::MAX);
        sock.set_send_buffer_size(v)
            .with_context(|| format!("setting SO_SNDBUF to {} bytes", opts.sndbuf))?;
    }
    if opts.rcvbuf > 0 {
        let v = usize::try_from(opts.rcvbuf).unwrap_or(usize::MAX);
        sock.set_recv_buffer_size(v)
            .with_context(|| format!("setting SO_RCVBUF to {} bytes", opts.rcvbuf))?;
    }
    if !tcp {
        return Ok(());
    }
    if opts.nodelay {
        sock.set_tcp_nodelay(true).context("setting TCP_NODELAY")?;
    }
    if let Some(cc) = &opts.cc {
        validate_cc(cc)?;
        sock.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("setting congestion control '{cc}'"))?;
    }
    if let Some(mss) = opts.mss {
        sock.set_tcp_mss(mss)
            .with_context(|| format!("setting TCP_MAXSEG to {mss} bytes"))?;
    }
    Ok(())
}

/// Reads the options back from the kernel.
pub fn read_back(sock: &SockRef<'_>, requested: &SocketOptions, tcp: bool) -> EffectiveOptions {
    let mut e = EffectiveOptions {
        sndbuf_requested: requested.sndbuf,
        sndbuf_bytes: sock.send_buffer_size().ok().map(|v| v as u64),
        rcvbuf_requested: requested.rcvbuf,
        rcvbuf_bytes: sock.recv_buffer_size().ok().map(|v| v as u64),
        ..EffectiveOptions::default()
    };
    if tcp {
        e.nodelay = sock.tcp_nodelay().ok();
        e.cc = sock.tcp_congestion().ok().map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .to_owned()
        });
        e.mss_bytes = sock.tcp_mss().ok();
    }
    e
}

#[cfg(test)]
mod cc_tests {
    /// A name the kernel does not know is one line naming what is available and the module
    /// to try; the default algorithm passes. (A socket is created, no traffic: unit tier.)
    #[test]
    fn an_unknown_congestion_control_names_the_module_to_try() {
        let e = super::validate_cc("nosuchcc").unwrap_err().to_string();
        assert!(
            e.contains("congestion control 'nosuchcc' is not available"),
            "{e}"
        );
        assert!(e.contains("available: "), "{e}");
        assert!(e.contains("`modprobe tcp_nosuchcc`"), "{e}");
        assert!(!e.contains('\n'));
        let odd = super::validate_cc("a b;c").unwrap_err().to_string();
        assert!(!odd.contains("modprobe"), "{odd}");
        let default = super::default_congestion_control().unwrap_or_else(|| "cubic".into());
        super::validate_cc(&default).unwrap();
    }
}
