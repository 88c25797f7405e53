//! MPTCP: Multipath TCP sockets (IPPROTO_MPTCP), with TCP's interface and options. On a path
//! with one address pair it runs one subflow, so its cost against plain TCP is the protocol's
//! own; the kernel's path manager adds subflows where endpoints are configured.

use socket2::Protocol;

use super::tcp::IpStream;

pub const MPTCP: IpStream = IpStream {
    name: "mptcp",
    protocol: Protocol::MPTCP,
    unsupported:
        "this kernel does not offer MPTCP (it needs CONFIG_MPTCP and sysctl net.mptcp.enabled=1)",
    // An MPTCP reader with SO_RCVLOWAT set was left asleep with data queued until the I/O
    // timeout, in about one stream in fifty on Linux 6.18 (two streams each way on loopback).
    rcvlowat: false,
};
