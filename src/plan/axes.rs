//! The sweep's axes: the values of each option a run may sweep (message sizes, the four
//! socket buffers, congestion control), each checked, and how many points they make.

use anyhow::{bail, Result};

use crate::model::Swept;
use crate::pattern::stream::DATAGRAM_HEADER;
use crate::pattern::PatternKind;
use crate::request::{Buffers, Request};
use crate::transport::sockopt::CcName;
use crate::transport::{self, Capabilities};
use crate::units;

/// Most points one run may have.
pub const MAX_POINTS: usize = 100_000;

/// Points of a sweep over options with these numbers of values each: their product, exact
/// (u128 holds a product of five counts of at most 10 000 each).
pub fn sweep_points(dims: &[usize]) -> u128 {
    dims.iter().fold(1u128, |n, &d| n.saturating_mul(d as u128))
}

/// Default message sizes when --size is not given.
pub(super) fn default_size(pattern: PatternKind, reliable: bool) -> u64 {
    match pattern {
        // 128 KiB writes, iperf3's and iperf2's default. Once the receiver wakes per read
        // rather than per segment (RcvLowat::Auto), fewer, larger writes move more on the
        // machines measured; with a wake-up per segment they had moved less (bench/RESULTS.md).
        PatternKind::Stream if reliable => 128 * 1024,
        PatternKind::Stream => 1400,
        _ => 1,
    }
}

/// A sweep's values, or the one value "not set" (0: kernel autotuning).
fn sweep(values: Option<&Vec<u64>>) -> Vec<u64> {
    values.cloned().unwrap_or_else(|| vec![0])
}

/// `--cc`'s algorithms, each checked against the kernel, as the values of the sweep axis:
/// `[None]` when none is named.
pub(super) fn congestion_controls(names: &[String]) -> Result<Vec<Option<CcName>>> {
    if names.is_empty() {
        return Ok(vec![None]);
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            bail!("--cc names an empty algorithm");
        }
        if names[..i].contains(name) {
            bail!("--cc names '{}' twice", crate::text::printable(name));
        }
        transport::sockopt::validate_cc(name)?;
        let Some(cc) = CcName::new(name) else {
            bail!(
                "--cc '{}': congestion control names have at most {} bytes",
                crate::text::printable(name),
                transport::sockopt::CC_NAME_MAX
            );
        };
        out.push(Some(cc));
    }
    Ok(out)
}

/// The message sizes of the run (a stream's --write-size or an exchange's --request-size
/// stands for --size), perturbed as asked, each checked against what one message of the
/// transport carries; --response-size and --read-size with them.
pub(super) fn sizes(r: &Request, caps: &Capabilities) -> Result<Vec<u64>> {
    let (sizes_req, pattern) = (&r.sizes, r.pattern);
    let mut sizes = match (
        &sizes_req.size,
        pattern,
        sizes_req.write_size,
        sizes_req.request_size,
    ) {
        (_, PatternKind::Stream, Some(w), _) => vec![w],
        (_, PatternKind::Rr | PatternKind::Crr, _, Some(q)) => vec![q],
        (Some(s), ..) => s.clone(),
        (None, ..) => vec![default_size(pattern, caps.reliable)],
    };
    if sizes.is_empty() {
        bail!("--size names no size");
    }
    if sizes.len() > units::MAX_SIZE_SPEC_VALUES {
        bail!(
            "--size has {} sizes; at most {} are allowed",
            sizes.len(),
            units::MAX_SIZE_SPEC_VALUES
        );
    }
    sizes = units::perturb(&sizes, sizes_req.perturb);
    // A 0-byte message is an exchange's (PVM's timings start at 0 bytes): a datagram of 0
    // bytes, or a framed message on a byte stream. A stream or crr of 0-byte writes moves
    // nothing.
    let exchange = matches!(pattern, PatternKind::Pingpong | PatternKind::Rr);
    if !exchange && sizes.contains(&0) {
        bail!("message size 0: {pattern} sizes must be at least 1 byte (only pingpong and rr exchange 0-byte messages)");
    }
    // A reliable message transport (grpc) reads an empty message as the end of the peer's
    // messages: a 0-byte message would end the exchange.
    let zero = sizes.contains(&0) || sizes_req.response_size == Some(0);
    if zero && caps.reliable && caps.message_boundaries {
        bail!(
            "message size 0: over {} an empty message marks the end of the call stream; sizes start at 1 byte there",
            r.transport
        );
    }
    let floor = if pattern == PatternKind::Stream && !caps.reliable {
        DATAGRAM_HEADER as u64
    } else if exchange {
        0
    } else {
        1
    };
    if let Some(&small) = sizes.iter().find(|&&s| s < floor) {
        bail!(
            "datagram size {small} is too small: a {} stream datagram carries a {floor}-byte sequence header",
            r.transport
        );
    }
    let response = sizes_req.response_size;
    let largest = sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(1)
        .max(response.unwrap_or(1));
    if largest > caps.max_message {
        bail!(
            "message size {largest} bytes exceeds what one {} message can carry ({} bytes)",
            r.transport,
            caps.max_message
        );
    }
    if response == Some(0) && !exchange {
        bail!("--response-size must be at least 1 byte for {pattern} (only pingpong and rr exchange 0-byte messages)");
    }
    // A datagram read holds one datagram: a larger read buffer only costs memory (times
    // --batch, on both ends), and a server refuses it.
    if let Some(read) = sizes_req.read_size {
        let most = caps.max_message.max(crate::pattern::DATAGRAM_READ);
        if caps.message_boundaries && read > most {
            bail!(
                "--read-size of {read} bytes: one {} message holds at most {} bytes (reads up to {most} are accepted)",
                r.transport,
                caps.max_message
            );
        }
    }
    Ok(sizes)
}

/// Every axis of the sweep, each with at least one value.
pub(super) struct Axes {
    pub sizes: Vec<u64>,
    /// Client buffers; 0: the kernel's autotuning.
    pub sndbufs: Vec<u64>,
    pub rcvbufs: Vec<u64>,
    /// `-w` alone: the two client buffers are swept together, one point per value.
    pub paired: bool,
    /// Server buffers; `u64::MAX`: the server follows the client's.
    pub server_sndbufs: Vec<u64>,
    pub server_rcvbufs: Vec<u64>,
    /// `[None]`: the host's default algorithm.
    pub ccs: Vec<Option<CcName>>,
    /// rr's open-loop request rates, requests per second; `[None]`: a closed loop.
    pub rates: Vec<Option<u64>>,
}

/// The open-loop request rates of the run (`--rate` of rr), or `[None]` for a closed loop.
pub(super) fn rates(r: &Request) -> Vec<Option<u64>> {
    match &r.traffic.open_loop {
        Some(o) if !o.rates.is_empty() => o.rates.iter().map(|&v| Some(v)).collect(),
        _ => vec![None],
    }
}

impl Axes {
    /// The buffer axes of `bufs` beside `sizes` and `ccs`; refuses an option that names no
    /// buffer size.
    pub(super) fn new(sizes: Vec<u64>, ccs: Vec<Option<CcName>>, bufs: &Buffers) -> Result<Axes> {
        // -w (--window) sets both; --sndbuf and --rcvbuf override it each.
        let sndbufs = sweep(bufs.sndbuf.as_ref().or(bufs.window.as_ref()));
        let rcvbufs = sweep(bufs.rcvbuf.as_ref().or(bufs.window.as_ref()));
        let paired = bufs.window.is_some() && bufs.sndbuf.is_none() && bufs.rcvbuf.is_none();
        let server_sndbufs = bufs.server_sndbuf.clone().unwrap_or_else(|| vec![u64::MAX]);
        let server_rcvbufs = bufs.server_rcvbuf.clone().unwrap_or_else(|| vec![u64::MAX]);
        for (name, values) in [
            ("--sndbuf", &sndbufs),
            ("--rcvbuf", &rcvbufs),
            ("--server-sndbuf", &server_sndbufs),
            ("--server-rcvbuf", &server_rcvbufs),
        ] {
            if values.is_empty() {
                bail!("{name} names no size");
            }
        }
        Ok(Axes {
            sizes,
            sndbufs,
            rcvbufs,
            paired,
            server_sndbufs,
            server_rcvbufs,
            ccs,
            rates: vec![None],
        })
    }

    /// Which axes have more than one value.
    pub(super) fn swept(&self) -> Swept {
        Swept {
            size: self.sizes.len() > 1,
            sndbuf: self.sndbufs.len() > 1,
            rcvbuf: self.rcvbufs.len() > 1,
            server_sndbuf: self.server_sndbufs.len() > 1,
            server_rcvbuf: self.server_rcvbufs.len() > 1,
            cc: self.ccs.len() > 1,
            rate: self.rates.len() > 1,
        }
    }

    /// Refuses a sweep of more than [`MAX_POINTS`] points. Counted before one point is
    /// built: five swept options multiply, and 10^8 points were built (6.8 GB) before this
    /// limit was ever looked at.
    pub(super) fn check_count(&self) -> Result<()> {
        let dims = [
            self.sizes.len(),
            self.sndbufs.len(),
            if self.paired { 1 } else { self.rcvbufs.len() },
            self.server_sndbufs.len(),
            self.server_rcvbufs.len(),
            self.ccs.len(),
            self.rates.len(),
        ];
        let count = sweep_points(&dims);
        if count > MAX_POINTS as u128 {
            bail!(
                "the sweep has {count} points ({} sizes x {} sndbuf x {} rcvbuf x {} server-sndbuf x {} server-rcvbuf x {} cc x {} rates); at most {MAX_POINTS} are allowed",
                dims[0],
                dims[1],
                dims[2],
                dims[3],
                dims[4],
                dims[5],
                dims[6]
            );
        }
        Ok(())
    }
}
