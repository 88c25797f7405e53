//! Interface discovery: the interface, MAC and MTU an endpoint uses, and the control peer's MAC.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use anyhow::{bail, Context, Result};

use super::wire::{parse_mac, HEADER};
use crate::sys::packet;
use crate::transport::TransportConfig;

/// One interface as the raw transport uses it.
#[derive(Clone)]
pub(super) struct Iface {
    pub(super) name: String,
    pub(super) index: u32,
    pub(super) mac: [u8; 6],
    pub(super) mtu: usize,
}

impl Iface {
    pub(super) fn named(name: &str) -> Result<Iface> {
        let index = packet::ifindex(name).with_context(|| format!("no interface '{name}'"))?;
        // The link-layer entry of getifaddrs carries the MAC address, in this namespace.
        let mac = nix::ifaddrs::getifaddrs()
            .context("listing the interfaces")?
            .filter(|a| a.interface_name == name)
            .find_map(|a| a.address.as_ref()?.as_link_addr()?.addr())
            .with_context(|| format!("interface {name} has no Ethernet address"))?;
        let mtu = packet::interface_mtu(name)
            .with_context(|| format!("reading the MTU of interface {name}"))?;
        if mtu < HEADER + 64 {
            bail!("interface {name} has an MTU of {mtu} bytes: too small for raw frames");
        }
        Ok(Iface {
            name: name.to_owned(),
            index,
            mac,
            mtu,
        })
    }

    /// The interface that holds `addr`.
    pub(super) fn holding(addr: IpAddr) -> Result<Iface> {
        let addrs = nix::ifaddrs::getifaddrs().context("listing the interfaces")?;
        for a in addrs {
            let ip = a.address.as_ref().and_then(|s| {
                s.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            });
            if ip == Some(addr) {
                return Iface::named(&a.interface_name);
            }
        }
        bail!("no interface holds {addr}: give the raw transport one with --iface")
    }

    /// The interface given, or the one this host would use to reach `peer`.
    pub(super) fn for_peer(config: &TransportConfig, peer: IpAddr) -> Result<Iface> {
        if let Some(name) = &config.iface {
            return Iface::named(name);
        }
        // connect() on a UDP socket only picks a route and a local address: nothing is sent.
        let any: SocketAddr = match peer {
            IpAddr::V4(_) => "0.0.0.0:0".parse()?,
            IpAddr::V6(_) => "[::]:0".parse()?,
        };
        let probe = UdpSocket::bind(any)?;
        probe.connect(SocketAddr::new(peer, 9))?;
        Iface::holding(probe.local_addr()?.ip())
    }
}

/// The MAC address a raw test may send to: the one the control peer's IP address resolves to
/// on `iface`. A HELLO's source MAC proves nothing (any host on the segment can forge it);
/// the control peer proved its IP address with the control connection's TCP handshake, and
/// the kernel's neighbour table says which MAC that address has on this link. A peer that
/// is this host itself (loopback, or one of its addresses) sends from `iface`'s own MAC.
pub(super) fn peer_mac(iface: &Iface, peer: IpAddr) -> Result<[u8; 6]> {
    let peer = peer.to_canonical();
    if peer.is_loopback() || host_holds(peer)? {
        return Ok(iface.mac);
    }
    let IpAddr::V4(v4) = peer else {
        bail!(
            "raw: the control peer {peer} is IPv6, whose link-layer address this server cannot look up; connect the control connection over IPv4"
        );
    };
    // thread-self: a lab's server thread has entered its host's network namespace, which
    // /proc/net (the process's first thread's) does not show.
    let table = std::fs::read_to_string("/proc/thread-self/net/arp")
        .context("reading /proc/thread-self/net/arp")?;
    arp_lookup(&table, v4, &iface.name).with_context(|| {
        format!(
            "raw: the control peer {peer} has no link-layer address on {} (raw frames go only to the MAC of the control peer's address, on the same Ethernet segment)",
            iface.name
        )
    })
}

/// Whether an interface of this host holds `addr`.
fn host_holds(addr: IpAddr) -> Result<bool> {
    Ok(nix::ifaddrs::getifaddrs()
        .context("listing the interfaces")?
        .filter_map(|a| {
            let s = a.address?;
            s.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .any(|ip| ip == addr))
}

/// The MAC of `ip` on interface `dev` in the kernel's ARP table (/proc/net/arp's text): only
/// a complete entry (flag ATF_COM), never an incomplete or all-zero one.
fn arp_lookup(table: &str, ip: std::net::Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x2;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[0].parse().ok() != Some(ip) || f[5] != dev {
            return None;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        let mac = parse_mac(f[3])?;
        (flags & ATF_COM != 0 && mac != [0; 6]).then_some(mac)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reflection: the MAC a raw test may send to is the control peer's entry in the ARP table
    /// on the listener's interface, complete, and nothing else; a peer on this host is the
    /// interface's own MAC.
    #[test]
    fn the_peer_mac_is_the_complete_arp_entry_of_the_control_peer_on_the_interface() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device
10.77.0.2        0x1         0x2         02:00:0a:4d:00:02     *        veth-a
10.77.0.3        0x1         0x0         00:00:00:00:00:00     *        veth-a
10.77.0.4        0x1         0x2         02:00:0a:4d:00:04     *        eth9
";
        let ip = |d| std::net::Ipv4Addr::new(10, 77, 0, d);
        assert_eq!(
            arp_lookup(table, ip(2), "veth-a"),
            Some([2, 0, 0x0a, 0x4d, 0, 2])
        );
        assert_eq!(arp_lookup(table, ip(3), "veth-a"), None, "incomplete entry");
        assert_eq!(arp_lookup(table, ip(4), "veth-a"), None, "other interface");
        assert_eq!(arp_lookup(table, ip(5), "veth-a"), None, "unknown address");
        let lo = Iface {
            name: "lo".into(),
            index: 1,
            mac: [0; 6],
            mtu: 65536,
        };
        let local: IpAddr = std::net::Ipv4Addr::LOCALHOST.into();
        assert_eq!(peer_mac(&lo, local).unwrap(), [0; 6]);
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(peer_mac(&lo, mapped).unwrap(), [0; 6]);
        // A documentation address no host here holds and no neighbour has: refused.
        let far: IpAddr = "192.0.2.77".parse().unwrap();
        let e = peer_mac(&lo, far).unwrap_err();
        assert!(format!("{e:#}").contains("no link-layer address"), "{e:#}");
    }
}
