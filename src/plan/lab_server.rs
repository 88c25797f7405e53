//! The server of a measurement in the lab: a wirebench server on host b with every feature and
//! no budgets (the lab is the user's own), for `lab run` and for studies.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::control::auth::Psk;
use crate::lab::LabState;
use crate::transport::TransportConfig;

/// Starts the server in host b's namespace, in this process; its address.
pub fn start(
    lab: &LabState,
    io_timeout: Duration,
    transport: TransportConfig,
    psk: Option<Arc<Psk>>,
) -> Result<SocketAddr> {
    let budget = lab.host_cpu.iter().find(|b| b.host == "b").cloned();
    crate::lab::in_netns(&lab.host_b.netns, move || {
        // Host b's CPU budget holds this thread and the server threads it starts.
        if let Some(b) = &budget {
            crate::lab::cpu::join_this_thread(b)?;
        }
        let config = crate::control::server::ServerConfig {
            limits: crate::control::limits::Limits::local(),
            io_timeout,
            transport,
            access: crate::control::admission::AccessConfig {
                psk,
                ..Default::default()
            },
            ..Default::default()
        };
        let server = crate::control::server::Server::bind(
            SocketAddr::new(crate::lab::ADDR_B.parse()?, 0),
            config,
        )?;
        server.spawn()
    })
}
