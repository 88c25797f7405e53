//! The layout of an N-host lab, as data: which namespaces, veth pairs, bridges, addresses and
//! routes it needs and where each emulated link sits. Worked out here without touching the
//! system, so that it can be checked exactly by unit tests; `hosts.rs` builds it.
//!
//! Every link is the same two-sided thing inside the lab's network namespace `wb-NAME-net`:
//! an interface `A` (the veth peer of the "a" end) and an interface `B` (the peer of the "b"
//! end). The delay line forwards A -> B (the link's forward direction) and B -> A (back); a
//! link with nothing to emulate joins A and B with a bridge of its own instead.
//!
//! ```text
//! star:          h_i wb0 == h{i} [link i] s{i} == p{i} on the switch bridge br1
//! two-switches:  hosts 0..K-1 on br1, K..N-1 on br2;  br1 t1p == t1 [trunk] t2 == t2p br2
//! chain:         h_k wbr == c{k}a [link k] c{k}b == wbl h_{k+1}   (routed by the hosts)
//! ```

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::config::LinkConfig;

/// Most hosts a lab has (every one a namespace, every link a delay-line thread per direction).
pub const MAX_HOSTS: usize = 8;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Every host has its own link to one emulated switch.
    Star,
    /// h0 - h1 - ... - h{N-1}: one link per neighbour pair, interior hosts route.
    Chain,
    /// Hosts 0..K-1 on one switch, K..N-1 on another, the switches joined by a trunk link.
    TwoSwitches,
}

/// The suffix of the namespace that holds the switches and the links' middle ends.
pub const NET: &str = "net";

/// Host `i`'s name (its namespace is `wb-NAME-h{i}`: a contract with `--netns-from-rank`).
pub fn host_name(i: usize) -> String {
    format!("h{i}")
}

/// An interface of a host namespace and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub host: usize,
    pub dev: String,
    /// With its prefix length, e.g. 10.77.0.1/24.
    pub cidr: String,
}

/// A static route on a host: `dest` via `via`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub host: usize,
    pub dest: String,
    pub via: String,
}

/// One side of a veth pair: in host `Some(i)`'s namespace or in the lab's net namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub host: Option<usize>,
    pub dev: String,
}

/// One emulated link. Its middle interfaces `a_dev`, `b_dev` are in the net namespace;
/// `a_peer`/`b_peer` are where frames leaving the link arrive (back and forward directions).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedLink {
    /// "h3" (host 3's link to its switch), "h0-h1" (a chain link), "trunk".
    pub name: String,
    /// What the two ends are, for people: ["h3", "switch"], ["switch1", "switch2"].
    pub ends: [String; 2],
    pub a_dev: String,
    pub b_dev: String,
    pub a_peer: End,
    pub b_peer: End,
    pub config: LinkConfig,
}

/// Everything an N-host lab is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub hosts: usize,
    /// Veth pairs (both ends).
    pub veths: Vec<(End, End)>,
    /// Bridges in the net namespace and their ports.
    pub bridges: Vec<(String, Vec<String>)>,
    pub addresses: Vec<Address>,
    pub routes: Vec<Route>,
    /// Hosts that forward (interior hosts of a chain).
    pub forwarding: Vec<usize>,
    pub links: Vec<PlannedLink>,
    /// Host i's address (without prefix), as other code reaches it.
    pub host_addresses: Vec<String>,
}

fn host_end(host: usize, dev: &str) -> End {
    End {
        host: Some(host),
        dev: dev.into(),
    }
}

fn net_end(dev: &str) -> End {
    End {
        host: None,
        dev: dev.into(),
    }
}

/// What an N-host lab is asked to be.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub hosts: usize,
    pub topology: Topology,
    /// Hosts on the first switch (two-switches).
    pub split: Option<usize>,
    /// Per link, by index: star and two-switches, host i's link to its switch; chain, the
    /// link from h_k to h_{k+1} (one fewer than hosts).
    pub links: Vec<LinkConfig>,
    pub trunk: Option<LinkConfig>,
}

impl Shape {
    /// How many links (besides a trunk) `hosts` hosts in `topology` have.
    pub fn link_count(topology: Topology, hosts: usize) -> usize {
        match topology {
            Topology::Chain => hosts.saturating_sub(1),
            Topology::Star | Topology::TwoSwitches => hosts,
        }
    }
}

pub fn plan(shape: &Shape) -> Result<Plan> {
    let n = shape.hosts;
    if !(2..=MAX_HOSTS).contains(&n) {
        bail!("--hosts {n}: a lab has 2 to {MAX_HOSTS} hosts");
    }
    if shape.links.len() != Shape::link_count(shape.topology, n) {
        bail!(
            "{} link settings for {n} hosts in a {:?} lab",
            shape.links.len(),
            shape.topology
        );
    }
    match (shape.topology, shape.split, &shape.trunk) {
        (Topology::TwoSwitches, Some(k), Some(_)) if k >= 1 && k < n => {}
        (Topology::TwoSwitches, Some(k), Some(_)) => {
            bail!(
                "--split {k}: each switch needs at least one host (1 to {})",
                n - 1
            )
        }
        (Topology::TwoSwitches, _, _) => {
            bail!("--topology two-switches needs --split K (hosts 0..K-1 on the first switch) and --trunk SPEC")
        }
        (_, Some(_), _) | (_, _, Some(_)) => {
            bail!("--split and --trunk belong to --topology two-switches")
        }
        _ => {}
    }
    let mut p = Plan {
        hosts: n,
        veths: Vec::new(),
        bridges: Vec::new(),
        addresses: Vec::new(),
        routes: Vec::new(),
        forwarding: Vec::new(),
        links: Vec::new(),
        host_addresses: Vec::new(),
    };
    match shape.topology {
        Topology::Star | Topology::TwoSwitches => switched(shape, &mut p),
        Topology::Chain => chain(shape, &mut p),
    }
    Ok(p)
}

fn switched(shape: &Shape, p: &mut Plan) {
    let n = shape.hosts;
    let split = shape.split.unwrap_or(n);
    let mut ports = [Vec::new(), Vec::new()];
    for i in 0..n {
        let (a, b, port) = (format!("h{i}"), format!("s{i}"), format!("p{i}"));
        let sw = usize::from(i >= split);
        p.veths.push((host_end(i, "wb0"), net_end(&a)));
        p.veths.push((net_end(&b), net_end(&port)));
        ports[sw].push(port.clone());
        p.addresses.push(Address {
            host: i,
            dev: "wb0".into(),
            cidr: format!("10.77.0.{}/24", i + 1),
        });
        p.host_addresses.push(format!("10.77.0.{}", i + 1));
        let switch = match shape.topology {
            Topology::TwoSwitches => format!("switch{}", sw + 1),
            _ => "switch".into(),
        };
        p.links.push(PlannedLink {
            name: host_name(i),
            ends: [host_name(i), switch],
            a_dev: a,
            b_dev: b,
            a_peer: host_end(i, "wb0"),
            b_peer: net_end(&port),
            config: shape.links[i].clone(),
        });
    }
    if let Some(trunk) = &shape.trunk {
        p.veths.push((net_end("t1"), net_end("t1p")));
        p.veths.push((net_end("t2"), net_end("t2p")));
        ports[0].push("t1p".into());
        ports[1].push("t2p".into());
        p.links.push(PlannedLink {
            name: "trunk".into(),
            ends: ["switch1".into(), "switch2".into()],
            a_dev: "t1".into(),
            b_dev: "t2".into(),
            a_peer: net_end("t1p"),
            b_peer: net_end("t2p"),
            config: trunk.clone(),
        });
    }
    for (i, ports) in ports.into_iter().enumerate() {
        if !ports.is_empty() {
            p.bridges.push((format!("br{}", i + 1), ports));
        }
    }
}

/// Chain link k joins h_k (.1) and h_{k+1} (.2) on 10.77.{k+1}.0/24. A host is reached at
/// the address of its link towards h0 (h0 at its only one), and routes every other link's
/// subnet to the neighbour on that side.
fn chain(shape: &Shape, p: &mut Plan) {
    let n = shape.hosts;
    let subnet = |k: usize| format!("10.77.{}", k + 1);
    for k in 0..n - 1 {
        let (a, b) = (format!("c{k}a"), format!("c{k}b"));
        p.veths.push((host_end(k, "wbr"), net_end(&a)));
        p.veths.push((host_end(k + 1, "wbl"), net_end(&b)));
        p.addresses.push(Address {
            host: k,
            dev: "wbr".into(),
            cidr: format!("{}.1/24", subnet(k)),
        });
        p.addresses.push(Address {
            host: k + 1,
            dev: "wbl".into(),
            cidr: format!("{}.2/24", subnet(k)),
        });
        p.links.push(PlannedLink {
            name: format!("h{k}-h{}", k + 1),
            ends: [host_name(k), host_name(k + 1)],
            a_dev: a,
            b_dev: b,
            a_peer: host_end(k, "wbr"),
            b_peer: host_end(k + 1, "wbl"),
            config: shape.links[k].clone(),
        });
    }
    for i in 0..n {
        p.host_addresses.push(if i == 0 {
            format!("{}.1", subnet(0))
        } else {
            format!("{}.2", subnet(i - 1))
        });
        if i > 0 && i < n - 1 {
            p.forwarding.push(i);
        }
        for k in 0..n - 1 {
            // Links i-1 and i are attached to host i.
            let via = if k > i {
                format!("{}.2", subnet(i))
            } else if k + 1 < i {
                format!("{}.1", subnet(i - 1))
            } else {
                continue;
            };
            p.routes.push(Route {
                host: i,
                dest: format!("{}.0/24", subnet(k)),
                via,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::config::LinkSpec;

    fn cfg(delay_ms: u64) -> LinkConfig {
        LinkSpec {
            delay: Some(std::time::Duration::from_millis(delay_ms)),
            ..LinkSpec::default()
        }
        .to_config()
        .unwrap()
    }

    fn shape(n: usize, topology: Topology, link: impl Fn(usize) -> LinkConfig) -> Shape {
        Shape {
            hosts: n,
            topology,
            split: None,
            links: (0..Shape::link_count(topology, n)).map(link).collect(),
            trunk: None,
        }
    }

    #[test]
    fn a_star_gives_each_host_its_own_link_and_address() {
        let p = plan(&shape(4, Topology::Star, |i| cfg(i as u64))).unwrap();
        assert_eq!(
            p.host_addresses,
            ["10.77.0.1", "10.77.0.2", "10.77.0.3", "10.77.0.4"]
        );
        assert_eq!(p.links.len(), 4);
        assert_eq!(p.links[3].name, "h3");
        assert_eq!(p.links[3].config, cfg(3));
        assert_eq!(p.links[3].ends, ["h3", "switch"]);
        assert_eq!(
            p.bridges,
            [(
                "br1".into(),
                vec!["p0", "p1", "p2", "p3"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )]
        );
        assert!(p.routes.is_empty() && p.forwarding.is_empty());
        // Every middle interface is unique and a valid interface name.
        let mut devs: Vec<&str> = p
            .links
            .iter()
            .flat_map(|l| [&*l.a_dev, &*l.b_dev])
            .collect();
        devs.sort();
        devs.dedup();
        assert_eq!(devs.len(), 8);
    }

    #[test]
    fn two_switches_split_the_hosts_and_join_the_switches_by_the_trunk() {
        let mut s = shape(5, Topology::TwoSwitches, |_| cfg(0));
        s.split = Some(2);
        s.trunk = Some(cfg(20));
        let p = plan(&s).unwrap();
        assert_eq!(p.links.len(), 6);
        let trunk = p.links.last().unwrap();
        assert_eq!((trunk.name.as_str(), &trunk.config), ("trunk", &cfg(20)));
        assert_eq!(p.bridges[0].1, ["p0", "p1", "t1p"]);
        assert_eq!(p.bridges[1].1, ["p2", "p3", "p4", "t2p"]);
        assert_eq!(p.links[4].ends, ["h4", "switch2"]);
        s.split = Some(5);
        assert!(plan(&s).is_err());
        s.split = None;
        assert!(plan(&s).is_err());
    }

    #[test]
    fn a_chain_routes_every_subnet_through_the_neighbour_on_its_side() {
        let p = plan(&shape(4, Topology::Chain, |_| cfg(1))).unwrap();
        assert_eq!(p.links.len(), 3);
        assert_eq!(
            p.host_addresses,
            ["10.77.1.1", "10.77.1.2", "10.77.2.2", "10.77.3.2"]
        );
        assert_eq!(p.forwarding, [1, 2]);
        let routes = |h: usize| -> Vec<(String, String)> {
            p.routes
                .iter()
                .filter(|r| r.host == h)
                .map(|r| (r.dest.clone(), r.via.clone()))
                .collect()
        };
        assert_eq!(
            routes(0),
            [
                ("10.77.2.0/24".into(), "10.77.1.2".into()),
                ("10.77.3.0/24".into(), "10.77.1.2".into())
            ]
        );
        assert_eq!(
            routes(2),
            [("10.77.1.0/24".to_string(), "10.77.2.1".to_string())]
        );
        assert_eq!(
            routes(3),
            [
                ("10.77.1.0/24".into(), "10.77.3.1".into()),
                ("10.77.2.0/24".into(), "10.77.3.1".into())
            ]
        );
        assert_eq!(p.links[1].name, "h1-h2");
        assert_eq!(p.links[1].ends, ["h1", "h2"]);
    }

    #[test]
    fn host_counts_and_topology_options_are_checked() {
        let link = |_| cfg(0);
        assert!(plan(&shape(1, Topology::Star, link)).is_err());
        assert!(plan(&shape(9, Topology::Star, link)).is_err());
        assert!(plan(&shape(8, Topology::Chain, link)).is_ok());
        let mut s = shape(4, Topology::Star, link);
        s.split = Some(2);
        assert!(plan(&s).unwrap_err().to_string().contains("two-switches"));
    }
}
