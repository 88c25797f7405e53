//! Puts a point's instrument readings into its result: both ends' counters and CPU shares,
//! the lab link's drops, and from them where each direction's losses happened.

use crate::control::client::PointOutcome;
use crate::instruments::{attribute, LabCounters, LossPath, Protocol};
use crate::model::{HostCpu, PointCounters, PointResult};
use crate::transport::TransportKind;

/// Whether client and server read the same host's counters: a server this run started itself,
/// or one reached on a loopback address (the same network namespace).
pub fn same_host(self_hosted: bool, server_address: Option<&str>) -> bool {
    self_hosted
        || server_address
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
            .is_some_and(|a| a.ip().is_loopback())
}

/// Fills `result`'s counters, host CPU shares and loss attribution from the point's last run
/// (`last`) and the lab's drops over it. Nothing when neither end read any. `mtu` is the
/// link's when known (a lab): a UDP datagram's frames on it turn frame drops into datagrams.
pub fn fill(
    result: &mut PointResult,
    last: &PointOutcome,
    same_host: bool,
    lab: Option<LabCounters>,
    transport: TransportKind,
    mtu: Option<u64>,
) {
    let client = last.client_instruments.as_ref();
    let server = last.server.instruments.as_ref().filter(|_| !same_host);
    if client.is_none() && server.is_none() && lab.is_none() {
        return;
    }
    let counters = PointCounters {
        client: client.map(|c| c.counters.clone()),
        server: server.map(|s| s.counters.clone()),
        same_host,
        lab,
    };
    result.host_cpu = Some(HostCpu {
        client: client.and_then(|c| c.cpu.clone()),
        server: server.and_then(|s| s.cpu.clone()),
        same_host,
    });
    let protocol = match transport {
        TransportKind::Udp => Some(Protocol::Udp),
        TransportKind::Tcp | TransportKind::Mptcp => Some(Protocol::Tcp),
        _ => None,
    };
    if let (Some(protocol), Some(stream)) = (protocol, result.stream.as_ref()) {
        let c = counters.client.as_ref();
        // On one host the client's counters are both ends'.
        let s = if same_host {
            c
        } else {
            counters.server.as_ref()
        };
        for t in &stream.totals {
            let forward = t.direction == "client_to_server";
            let (sender, receiver) = if forward { (c, s) } else { (s, c) };
            let lab_direction =
                counters
                    .lab
                    .as_ref()
                    .map(|l| if forward { &l.forward } else { &l.back });
            let loss = match protocol {
                Protocol::Udp => t.loss.as_ref().map(|l| (l.sent, l.received)),
                Protocol::Tcp => None,
            };
            let frames = mtu.map(|m| crate::lab::goodput::udp_frames(result.key.size, m));
            result.loss_attribution.push(attribute(
                &t.direction,
                protocol,
                loss,
                frames,
                LossPath {
                    sender,
                    receiver,
                    lab: lab_direction,
                },
            ));
        }
    }
    result.counters = Some(counters);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_servers_share_the_clients_host() {
        assert!(same_host(true, Some("10.0.0.1:5201")));
        assert!(same_host(false, Some("127.0.0.1:5201")));
        assert!(same_host(false, Some("[::1]:5201")));
        assert!(!same_host(false, Some("10.77.0.2:5201")));
        assert!(!same_host(false, None));
    }
}
