//! Where a rank's data goes: with `--netns-from-rank PREFIX` every rank's data threads enter
//! network namespace PREFIX<rank> (a lab host), so that one machine holds a cluster of hosts
//! joined by links of known rate and delay. The control plane (MPI, the group's messages)
//! stays where the process started.

use std::net::IpAddr;

use anyhow::{anyhow, Context, Result};

/// The namespace of `rank` under `prefix`: `wb-m-h` and rank 3 give `wb-m-h3`.
pub fn netns_for_rank(prefix: &str, rank: usize) -> String {
    format!("{prefix}{rank}")
}

/// The first IPv4 address of an interface that is up and not loopback, in the namespace of
/// the calling thread: the address other ranks reach this one at.
pub fn own_address() -> Result<IpAddr> {
    let addrs = nix::ifaddrs::getifaddrs().context("listing interfaces")?;
    for a in addrs {
        let up = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP);
        let looped = a
            .flags
            .contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK);
        if !up || looped {
            continue;
        }
        if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            return Ok(IpAddr::V4(sin.ip()));
        }
    }
    Err(anyhow!(
        "no interface with an IPv4 address is up in this network namespace"
    ))
}

/// [`own_address`] of namespace `ns` (read from a thread that enters it).
pub fn address_in(ns: &str) -> Result<IpAddr> {
    crate::lab::in_netns(ns, own_address)
}
