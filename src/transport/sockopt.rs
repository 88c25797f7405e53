//! Socket options that a test asks for, applying them, and reading back what the kernel did.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use socket2::SockRef;

pub use crate::model::socket::EffectiveOptions;
use crate::model::socket::TcpInfo;
pub use crate::model::vocab::{CcName, CC_NAME_MAX};

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

/// The kernel's TCP_INFO of a TCP socket in the units run documents use (see [`TcpInfo`]);
/// `None` if the socket is not TCP or the call fails.
pub fn tcp_info(fd: std::os::fd::BorrowedFd<'_>) -> Option<TcpInfo> {
    let raw = crate::sys::tcp_info(fd)?;
    Some(TcpInfo {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        snd_cwnd: raw.snd_cwnd,
        snd_mss: raw.snd_mss,
        total_retrans: raw.total_retrans,
        unacked: raw.unacked,
        unacked_bytes: u64::from(raw.unacked) * u64::from(raw.snd_mss),
        delivery_rate_bits_per_s: raw.delivery_rate.saturating_mul(8),
        pmtu: raw.pmtu,
        notsent_bytes: raw.notsent_bytes,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        snd_wnd: raw.snd_wnd,
        min_rtt_us: raw.min_rtt,
        // ~0 is the kernel's "no limit".
        pacing_rate_bits_per_s: if raw.pacing_rate == u64::MAX {
            0
        } else {
            raw.pacing_rate.saturating_mul(8)
        },
        busy_time_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
    })
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
