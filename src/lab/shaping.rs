//! The kernel's part of the emulated link: rate with tbf, random loss with nftables, delay and
//! jitter with netem where the kernel has it.

use anyhow::Result;

use super::config::DirectionConfig;
use super::host::{sh, sh_in};

/// tbf's bucket: at least one frame of the MTU and 1 ms worth of the rate, so that the shaper
/// neither starves full frames nor lets bursts run far ahead of the rate.
pub fn tbf_burst(rate_bits_per_s: f64, mtu: u64) -> u64 {
    ((rate_bits_per_s / 8.0 / 1000.0) as u64)
        .max(mtu + 14)
        .max(4096)
}

/// tbf's queue: 50 ms at the link rate (at least 64 KiB), a router buffer of common size.
pub fn tbf_limit(rate_bits_per_s: f64) -> u64 {
    ((rate_bits_per_s / 8.0 * 0.050) as u64).max(65_536)
}

/// Shapes what leaves interface `dev` of namespace `ns`; with `netem`, a netem child adds
/// delay and jitter behind the rate limit.
pub fn shape(ns: &str, dev: &str, d: &DirectionConfig, mtu: u64, netem: bool) -> Result<()> {
    let delay_args = |parent: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["qdisc", "add", "dev", dev]
            .iter()
            .chain(parent.iter())
            .map(|s| s.to_string())
            .collect();
        a.extend([
            "netem".into(),
            "delay".into(),
            format!("{}us", d.delay.as_micros()),
        ]);
        if !d.jitter.is_zero() {
            a.push(format!("{}us", d.jitter.as_micros()));
        }
        a.extend(["limit".into(), "100000".into()]);
        a
    };
    match d.rate_bits_per_s {
        Some(rate) => {
            let rate_s = format!("{}bit", rate as u64);
            let burst = tbf_burst(rate, mtu).to_string();
            let limit = tbf_limit(rate).to_string();
            sh_in(
                ns,
                "tc",
                &[
                    "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", &rate_s,
                    "burst", &burst, "limit", &limit,
                ],
            )?;
            if netem {
                let a = delay_args(&["parent", "1:1", "handle", "10:"]);
                let refs: Vec<&str> = a.iter().map(String::as_str).collect();
                sh_in(ns, "tc", &refs)?;
            }
        }
        None if netem => {
            let a = delay_args(&["root", "handle", "10:"]);
            let refs: Vec<&str> = a.iter().map(String::as_str).collect();
            sh_in(ns, "tc", &refs)?;
        }
        None => {}
    }
    Ok(())
}

/// Drops frames arriving on `dev` in namespace `ns` with probability `p` (nftables numgen on
/// the netdev ingress hook, so the frame has crossed the link, as a real loss would have).
pub fn random_loss(ns: &str, dev: &str, p: f64) -> Result<()> {
    const SCALE: u64 = 1_000_000;
    let threshold = (p * SCALE as f64).round() as u64;
    let chain = format!("{{ type filter hook ingress device {dev} priority 0; }}");
    sh_in(ns, "nft", &["add", "table", "netdev", "wblab"])?;
    sh_in(
        ns,
        "nft",
        &["add", "chain", "netdev", "wblab", "loss", &chain],
    )?;
    sh_in(
        ns,
        "nft",
        &[
            "add",
            "rule",
            "netdev",
            "wblab",
            "loss",
            "numgen",
            "random",
            "mod",
            &SCALE.to_string(),
            "<",
            &threshold.to_string(),
            "drop",
        ],
    )
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
