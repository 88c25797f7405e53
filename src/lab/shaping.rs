//! The kernel's part of the emulated link: random loss with nftables, and netem where it is
//! asked for instead of the delay line.

use anyhow::Result;

use super::config::DirectionConfig;
use super::host::{output_in, sh, sh_in};

/// netem on what leaves interface `dev` of namespace `ns`: delay, jitter, and with a rate
/// netem's own serialisation (`rate`, which meters each packet's length as the kernel holds
/// it, Ethernet header included) behind a queue of `limit` packets. Used only with
/// `--mechanism netem`; the delay line is the emulation wirebench's tests check.
pub fn netem(ns: &str, dev: &str, d: &DirectionConfig, mtu: u64) -> Result<()> {
    let mut a: Vec<String> = ["qdisc", "add", "dev", dev, "root", "handle", "10:", "netem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["delay".into(), format!("{}us", d.delay.as_micros())]);
    if !d.jitter.is_zero() {
        a.push(format!("{}us", d.jitter.as_micros()));
    }
    if let Some(rate) = d.rate_bits_per_s {
        a.extend(["rate".into(), format!("{}bit", rate as u64)]);
    }
    let limit = d.effective_queue(mtu).map_or(100_000, |q| q.packets(mtu));
    a.extend(["limit".into(), limit.to_string()]);
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    sh_in(ns, "tc", &refs)
}

/// Drops frames arriving on `dev` in namespace `ns` with probability `p` (nftables numgen on
/// the netdev ingress hook, so the frame has crossed the link, as a real loss would have).
/// UDP frames and all others meet the same probability in rules of their own, each with its
/// counter, so that a UDP test's losses are read apart from its control connection's.
pub fn random_loss(ns: &str, dev: &str, p: f64) -> Result<()> {
    random_loss_in_chain(ns, dev, p, "loss")
}

/// [`random_loss`] in a chain of its own name, for a namespace with more than one lossy
/// interface (an N-host lab's routers and switch).
pub fn random_loss_in_chain(ns: &str, dev: &str, p: f64, chain_name: &str) -> Result<()> {
    const SCALE: u64 = 1_000_000;
    let threshold = (p * SCALE as f64).round() as u64;
    let chain = format!("{{ type filter hook ingress device {dev} priority 0; }}");
    sh_in(ns, "nft", &["add", "table", "netdev", "wblab"])?;
    sh_in(
        ns,
        "nft",
        &["add", "chain", "netdev", "wblab", chain_name, &chain],
    )?;
    let (scale, threshold) = (SCALE.to_string(), threshold.to_string());
    let lose = [
        "numgen", "random", "mod", &scale, "<", &threshold, "counter", "drop",
    ];
    let rule = |head: &[&str], tail: &[&str]| {
        let mut r = vec!["add", "rule", "netdev", "wblab", chain_name];
        r.extend_from_slice(head);
        r.extend_from_slice(tail);
        sh_in(ns, "nft", &r)
    };
    // UDP frames meet the first rule and leave at the second; every other frame (TCP, ARP,
    // raw Ethernet: "meta l4proto" matches nothing that is not IP) meets the third.
    rule(&["meta", "l4proto", "udp"], &lose)?;
    rule(&["meta", "l4proto", "udp"], &["accept"])?;
    rule(&[], &lose)?;
    Ok(())
}

/// The random loss rules' counters in namespace `ns`: frames dropped so far, (UDP, others).
/// None when the namespace has no loss rules.
pub fn random_loss_drops(ns: &str) -> Option<(u64, u64)> {
    random_loss_drops_in_chain(ns, "loss")
}

/// [`random_loss_drops`] of the rules in chain `chain_name`.
pub fn random_loss_drops_in_chain(ns: &str, chain_name: &str) -> Option<(u64, u64)> {
    let text = output_in(ns, "nft", &["list", "chain", "netdev", "wblab", chain_name]).ok()?;
    parse_loss_counters(&text)
}

/// The (UDP, others) packet counts of `nft list chain netdev wblab loss`'s text.
pub fn parse_loss_counters(text: &str) -> Option<(u64, u64)> {
    let (mut udp, mut other, mut seen) = (0, 0, false);
    for line in text.lines() {
        let Some((rule, counted)) = line.split_once("counter packets ") else {
            continue;
        };
        let Some(n) = counted
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        seen = true;
        if rule.contains("l4proto udp") {
            udp += n;
        } else {
            other += n;
        }
    }
    seen.then_some((udp, other))
}

/// Whether this kernel has netem, tried on a throw-away interface in namespace `ns`.
pub fn netem_available(ns: &str, dev: &str) -> bool {
    let ok = sh_in(
        ns,
        "tc",
        &["qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms"],
    )
    .is_ok();
    if ok {
        let _ = sh_in(ns, "tc", &["qdisc", "del", "dev", dev, "root"]);
    }
    ok
}

/// One frame per GSO packet on the sender's interface, so that a dropped frame is one
/// segment and the configured loss is a per-segment probability.
pub fn segment_per_frame(ns: &str, dev: &str) -> Result<()> {
    sh(
        "ip",
        &["-n", ns, "link", "set", "dev", dev, "gso_max_segs", "1"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_rules_counters_are_read_per_protocol() {
        let text = "table netdev wblab {
\tchain loss {
\t\ttype filter hook ingress device \"wb0\" priority filter; policy accept;
\t\tmeta l4proto udp numgen random mod 1000000 < 50000 counter packets 31 bytes 4500 drop
\t\tmeta l4proto udp accept
\t\tnumgen random mod 1000000 < 50000 counter packets 2 bytes 100 drop
\t}
}
";
        assert_eq!(parse_loss_counters(text), Some((31, 2)));
        assert_eq!(parse_loss_counters("table netdev wblab {\n}\n"), None);
    }
}
