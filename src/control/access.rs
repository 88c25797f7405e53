//! Who may use a server: `--allow`/`--deny` address ranges, and the key under which one
//! client's connections and tests are counted.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address range, `ADDR/BITS` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let s = s.trim();
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| {
            format!("'{s}' is not an address range (e.g. 10.0.0.0/8, 2001:db8::/32)")
        })?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|&b| b <= max)
                .ok_or_else(|| format!("'{s}': the prefix length must be 0 to {max}"))?,
        };
        // A range inside ::ffff:0:0/96 is written for IPv4 peers of a dual-stack socket, and
        // peers are matched as the IPv4 addresses they are (see `contains`): so is the rule,
        // or ::ffff:127.0.0.1 would never match the client it names.
        let (net, bits) = match net {
            IpAddr::V6(v6) if bits >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => (IpAddr::V4(v4), bits - 96),
                None => (net, bits),
            },
            _ => (net, bits),
        };
        // Stored canonical (host bits cleared) so that 10.1.2.3/8 means 10.0.0.0/8.
        Ok(Cidr {
            net: mask(net, bits),
            bits,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.bits)
    }
}

impl Cidr {
    /// Whether `ip` is in the range. An IPv4 peer reaching a dual-stack listener shows up as
    /// ::ffff:a.b.c.d: it is matched as the IPv4 address it is.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && mask(ip, self.bits) == self.net
    }
}

fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// The `--allow` and `--deny` lists: deny wins; an empty allow list allows everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessList {
    pub allow: Vec<Cidr>,
    pub deny: Vec<Cidr>,
}

impl AccessList {
    pub fn permits(&self, ip: IpAddr) -> bool {
        !self.deny.iter().any(|c| c.contains(ip))
            && (self.allow.is_empty() || self.allow.iter().any(|c| c.contains(ip)))
    }
}

/// One client, for per-client limits: an IPv4 address, or an IPv6 /64 (one host commonly
/// holds a whole /64, so counting single IPv6 addresses would let it multiply its share).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    pub fn of(ip: IpAddr) -> ClientKey {
        match ip.to_canonical() {
            v4 @ IpAddr::V4(_) => ClientKey(v4),
            v6 @ IpAddr::V6(_) => ClientKey(mask(v6, 64)),
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/64"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_match_what_they_cover() {
        let c = cidr("10.1.2.3/8");
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert!(c.contains(ip("10.255.0.1")));
        assert!(!c.contains(ip("11.0.0.1")));
        assert!(cidr("0.0.0.0/0").contains(ip("203.0.113.9")));
        assert!(cidr("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(!cidr("127.0.0.1").contains(ip("127.0.0.2")));
        assert!(cidr("192.168.1.0/31").contains(ip("192.168.1.1")));
        assert!(!cidr("192.168.1.0/31").contains(ip("192.168.1.2")));
        let v6 = cidr("2001:db8::/32");
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(cidr("::/0").contains(ip("::1")));
        // Families never match each other, except an IPv4 peer on a dual-stack socket.
        assert!(!cidr("::/0").contains(ip("10.0.0.1")));
        assert!(!cidr("0.0.0.0/0").contains(ip("2001:db8::1")));
        assert!(cidr("10.0.0.0/8").contains(ip("::ffff:10.0.0.1")));
    }

    /// `--deny ::ffff:127.0.0.1` (or `::ffff:127.0.0.0/104`) once let a client
    /// from 127.0.0.1 in, and `--allow ::ffff:127.0.0.1` shut it out.
    #[test]
    fn ranges_written_as_ipv4_mapped_ipv6_match_the_ipv4_peers_they_name() {
        let one = cidr("::ffff:127.0.0.1");
        assert_eq!(one.to_string(), "127.0.0.1/32");
        assert!(one.contains(ip("127.0.0.1")));
        assert!(one.contains(ip("::ffff:127.0.0.1")));
        assert!(!one.contains(ip("127.0.0.2")));
        let block = cidr("::ffff:127.0.0.0/104");
        assert_eq!(block.to_string(), "127.0.0.0/8");
        assert!(block.contains(ip("127.0.0.5")));
        assert!(!block.contains(ip("10.0.0.1")));
        let deny = AccessList {
            allow: vec![],
            deny: vec![one],
        };
        assert!(!deny.permits(ip("127.0.0.1")));
        assert!(deny.permits(ip("127.0.0.2")));
        let allow = AccessList {
            allow: vec![one],
            deny: vec![],
        };
        assert!(allow.permits(ip("127.0.0.1")));
        assert!(allow.permits(ip("::ffff:127.0.0.1")));
        assert!(!allow.permits(ip("::1")));
        // A wider range is an IPv6 range as written, and native IPv6 peers are in it.
        let wide = cidr("::ffff:0:0/95");
        assert!(wide.contains(ip("::fffe:0:1")));
        assert!(!cidr("::/0").contains(ip("10.0.0.1")));
    }

    #[test]
    fn malformed_ranges_are_refused_with_the_reason() {
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "host",
            "10.0.0.0/x",
            "/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert!("10.0.0.0/33"
            .parse::<Cidr>()
            .unwrap_err()
            .contains("0 to 32"));
    }

    #[test]
    fn deny_wins_and_no_allow_list_allows_everyone() {
        let open = AccessList::default();
        assert!(open.permits(ip("198.51.100.1")));
        let l = AccessList {
            allow: vec![cidr("10.0.0.0/8")],
            deny: vec![cidr("10.9.0.0/16")],
        };
        assert!(l.permits(ip("10.1.0.1")));
        assert!(!l.permits(ip("10.9.0.1")));
        assert!(!l.permits(ip("192.0.2.1")));
        let deny_only = AccessList {
            allow: vec![],
            deny: vec![cidr("127.0.0.0/8")],
        };
        assert!(!deny_only.permits(ip("127.0.0.1")));
        assert!(deny_only.permits(ip("::1")));
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a = ClientKey::of(ip("2001:db8:1:2:aaaa::1"));
        let b = ClientKey::of(ip("2001:db8:1:2:bbbb::9"));
        assert_eq!(a, b);
        assert_ne!(a, ClientKey::of(ip("2001:db8:1:3::1")));
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(
            ClientKey::of(ip("::ffff:127.0.0.1")).to_string(),
            "127.0.0.1"
        );
        assert_ne!(
            ClientKey::of(ip("127.0.0.1")),
            ClientKey::of(ip("127.0.0.2"))
        );
    }
}
