//! The physics guard: each figure against what the run itself knows of the physics of its
//! path, before it is printed, saved, fitted, searched, compared or called an anomaly. Every
//! function here is pure (no I/O): it takes a figure and the facts it must agree with, and
//! gives a [`Validity`] with the reason when the figure breaks them. Where the run crossed a
//! lab link the link's rate, delay, jitter, MTU and the delay line's own counters are those
//! facts; without one, the figures of the two ends, the sweep's own points and the sample
//! counts still are.
//!
//! Every tolerance is derived where it is defined, from the same error sources as the floors
//! of [`super::validity`]: a phase's ends (one call's bytes, a wake-up), the clock, and the
//! delay line's own release schedule (it counts a frame as late past 100 us).
//!
//! `src/plan/guard.rs` applies these to a point's result and to a sweep's metrics.

use super::validity::Validity;
use crate::units::{format_mbit_s as mbit, format_seconds, format_us};

/// How late the delay line may release a frame without counting it late (its `LATE`, 100 us).
///
/// A frame released up to this late is not a fault of the emulation, but the frames behind it
/// leave in a burst: a receiver's phase that starts or ends in such a burst sees up to this
/// long of the link's bytes early or late, at each end.
pub const RELEASE_SLACK_S: f64 = 100e-6;

/// The clock's error on one measured round trip: 2 us.
///
/// A round trip is two reads of `Instant` (CLOCK_MONOTONIC) on one host. With the TSC each is
/// exact to the nanosecond; the slowest clocksources (hpet, acpi_pm) resolve about 1 us, so
/// each read is off by at most 1 us. The delay line releases a frame at its kernel arrival
/// stamp plus the wire and hold times and never before (it sleeps, then spins to the time),
/// so the physics has no error of its own to add.
pub const ROUND_TRIP_CLOCK_S: f64 = 2e-6;

/// The largest unit of bytes that reaches a receiver at once: a GSO or GRO frame, 64 KiB (or
/// one message, when messages are larger). The bytes of the frame whose wire time began before
/// a receiver's clock started are counted in its phase (the TCP stream's row of TRUTH.md: "never
/// above the goodput but for one GSO frame").
pub const EDGE_UNIT_BYTES: u64 = 65_536;

/// How far apart each end of the two sides' timed phases of one stream may fall, beyond what
/// the buffers between them explain: 10 ms.
///
/// A blocked write or read gives up after 5 ms so that a phase ends on time (the stream
/// pattern's stall timeout), and a timer set for that wakes within the kernel's tick (4 ms at
/// HZ=250) after it; with a wake-up's 50 us, each phase end is off by under 10 ms.
pub const PHASE_END_SLACK_S: f64 = 0.010;

/// A Linux TCP socket buffer left to autotuning grows up to `tcp_wmem[2]` (4 MiB) for sending
/// and `tcp_rmem[2]` (6 MiB) for receiving, the kernel's defaults; what `getsockopt` reported
/// when the connection opened is where it started, not where it ended.
pub const AUTOTUNED_SNDBUF_MAX: u64 = 4 << 20;
pub const AUTOTUNED_RCVBUF_MAX: u64 = 6 << 20;

/// The largest relative standard error a fitted r_inf may have: 10%.
///
/// Ordinary least squares gives the slope b of k points a relative standard error of
/// se(b)/b = sqrt((1 - R^2) / (R^2 (k - 2))) (the t statistic of the slope is
/// sqrt(R^2 (k - 2) / (1 - R^2))). r_inf = 1/b has the same relative error to first order. A
/// fit whose r_inf is uncertain by more than a tenth is not a figure to print beside
/// measurements made to a few percent; this puts the floor of R^2 at 1 / (1 + 0.01 (k - 2)):
/// 0.990 for 3 sizes, 0.926 for 10, 0.826 for 23 (the README's 1 B..4 MiB sweep). The fits of
/// R^2 = 0.48 and 0.0004 once printed under load have r_inf uncertain by 40% and more than 100%.
pub const MAX_FIT_REL_SE: f64 = 0.10;

/// How far a fitted r_inf may sit above the link's goodput: 5%, and no more, whatever the
/// fit's standard error (an r_inf printed above what the link can carry is a wrong figure, not
/// an uncertain one). The slope of the physics' own staircase (the header bytes of every
/// segment, fitted over the sweep's sizes) is within 1% of the goodput, and the truth test of
/// lab sweeps finds measured fits within 3% of that (the means' noise over wire times of 10 ms
/// and more, which R^2 alone does not see when the noise is alike at every size): 1.01 x 1.03
/// is under 1.05.
pub const FIT_GOODPUT_SLACK: f64 = 0.05;

/// The most a delay line may have fallen behind over a point: 1% of the frames it forwarded
/// released more than 100 us late.
///
/// Past that, more than one frame in a hundred left at another time than the link's, so a
/// rate or a time computed from them differs from the link's by the lateness of one frame in
/// a hundred, the error the other floors keep a figure within (1%); the emulation was not the
/// link it was asked to be.
pub const MAX_LATE_SHARE: f64 = 0.01;

/// A percentile's tail: the observations beyond the p-th percentile must number at least 10,
/// so p needs 10 / (1 - p) samples (p90 100, p99 1000, p99.9 10 000, p99.99 100 000).
///
/// The count beyond the p-quantile is binomial with mean n(1 - p); below 10 expected
/// observations the estimate is one of a handful of extreme values (at n(1 - p) < 1, the
/// maximum itself), and the usual rule for a binomial proportion's normal approximation,
/// n p (1 - p) >= 10 (or the "rule of 10" for tail estimates), is not met.
pub const PERCENTILE_TAIL: f64 = 10.0;

/// Within floating-point rounding of a bound: the figure and the bound come from different
/// sums of the same quantities.
const ROUNDING: f64 = 1e-9;

/// One direction of an emulated link, as the guard needs it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Link {
    /// Bits per second; None = no rate limit (then no wire time and no goodput).
    pub rate_bits_per_s: Option<f64>,
    pub delay_s: f64,
    /// Uniform +/- jitter of the delay.
    pub jitter_s: f64,
}

impl Link {
    /// The least time the link holds a frame after its wire time: the delay minus the jitter,
    /// and never below 0 (the delay line clamps a negative hold to none; jitter above the delay
    /// is refused when a lab is configured, but a lab state written before may hold it).
    pub fn hold_floor_s(&self) -> f64 {
        (self.delay_s - self.jitter_s).max(0.0)
    }

    /// The least one-way time of a message of `wire_bytes` on the link: hold + wire time.
    pub fn one_way_floor_s(&self, wire_bytes: u64) -> f64 {
        self.hold_floor_s()
            + self
                .rate_bits_per_s
                .map_or(0.0, |r| wire_bytes as f64 * 8.0 / r)
    }
}

/// What bounds a rate from above over one timed phase (a), (d).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateBound {
    /// Payload bits per second the link can carry for this transport and size.
    pub goodput_bits_per_s: f64,
    /// The timed phase the rate is over (the shortest, for a sum).
    pub seconds: f64,
    /// How many flows or streams the rate sums: each has its own phase edges.
    pub flows: u64,
    /// Their messages' size; the edge unit is the larger of it and [`EDGE_UNIT_BYTES`].
    pub message_bytes: u64,
}

impl RateBound {
    /// The highest rate a true measurement over this phase can show:
    /// goodput x (1 + 2 x release slack / T) + flows x 8 x edge unit / T.
    ///
    /// Bytes counted in a phase crossed the wire in it, except (i) at each phase edge of each
    /// flow the one unit (frame or message) whose wire time began before the clock started,
    /// and (ii) what the delay line released up to [`RELEASE_SLACK_S`] late at each end and
    /// then in a burst. A later wake-up of the reader only lengthens the phase.
    pub fn allowed(&self) -> f64 {
        let t = self.seconds.max(1e-9);
        let unit = self.message_bytes.max(EDGE_UNIT_BYTES) as f64;
        let edges = self.flows.max(1) as f64 * 8.0 * unit / t;
        (self.goodput_bits_per_s * (1.0 + 2.0 * RELEASE_SLACK_S / t) + edges) * (1.0 + ROUNDING)
    }
}

/// (a) A receiver rate, a ping-pong's 2n/RTT or a sum of them at or below what the link can
/// deliver over the phase. `what` names the figure ("receiver").
pub fn within_goodput(what: &str, rate: f64, bound: RateBound) -> Validity {
    let allowed = bound.allowed();
    Validity::from_reason((rate > allowed && bound.goodput_bits_per_s > 0.0).then(|| {
        format!(
            "{what} {} is {:.1}% of the link's goodput {}: above what the link can carry (at most {} over a {} phase)",
            mbit(rate),
            rate / bound.goodput_bits_per_s * 100.0,
            mbit(bound.goodput_bits_per_s),
            mbit(allowed),
            format_seconds(bound.seconds)
        )
    }))
}

/// (d) Flows sharing one direction of the link: measured streams, `--compete` flows, `--load`.
/// `flows` are (label, rate); the bound's `flows` is taken from their number.
pub fn flows_within_goodput(flows: &[(String, f64)], bound: RateBound) -> Validity {
    let sum: f64 = flows.iter().map(|f| f.1).sum();
    let bound = RateBound {
        flows: flows.len() as u64,
        ..bound
    };
    let allowed = bound.allowed();
    Validity::from_reason((sum > allowed && bound.goodput_bits_per_s > 0.0).then(|| {
        let parts: Vec<String> = flows
            .iter()
            .map(|(l, r)| format!("{l} {:.2}", r / 1e6))
            .collect();
        format!(
            "the flows add up to {} ({}) over a link whose goodput is {} (at most {} over a {} phase): they cannot all be true",
            mbit(sum),
            parts.join(" + "),
            mbit(bound.goodput_bits_per_s),
            mbit(allowed),
            format_seconds(bound.seconds)
        )
    }))
}

/// The least a receiver's read may hold back into the next interval: one read of the
/// stream pattern's default size, 128 KiB.
pub const READ_UNIT_BYTES: u64 = 128 << 10;

/// (d) Flows sharing one direction of the link, summed over one interval of `seconds` (a
/// `--compete` interval row, a `-P` sum's interval; `what` names them): at most the goodput over the interval plus what the flows'
/// receive buffers held when it began, `backlog_bytes` in all.
///
/// An interval's bytes are counted when they are read, not when they arrive: a reader the
/// host held off the CPU reads its socket's backlog in the next interval, and that backlog
/// crossed the wire before the interval began. Each flow can carry over at most its receive
/// buffer (and at least one read's worth, [`READ_UNIT_BYTES`]); the caller sums them. Over
/// the whole span (`flows_within_goodput`) a backlog is counted once, in the bytes, so there
/// it needs no such allowance.
pub fn interval_within_goodput(
    what: &str,
    sum: f64,
    seconds: f64,
    goodput: f64,
    backlog_bytes: u64,
) -> Validity {
    let t = seconds.max(1e-9);
    let allowed = (goodput * (1.0 + 2.0 * RELEASE_SLACK_S / t) + backlog_bytes as f64 * 8.0 / t)
        * (1.0 + ROUNDING);
    Validity::from_reason((sum > allowed && goodput > 0.0).then(|| {
        format!(
            "{what} add up to {} in this {} interval over a link whose goodput is {} (at most {} with what their receive buffers held at its start): they cannot all be true",
            mbit(sum),
            format_seconds(seconds),
            mbit(goodput),
            mbit(allowed)
        )
    }))
}

/// (d) A measured stream beside the background load of `--load` in the same direction. The
/// load's rate is averaged over its own time `load_s` (longer than the stream's phase
/// `phase_s`, which it covers), so outside the stream's phase it may have had the link to
/// itself: over its time it moved at most G x (load_s - phase_s) + its share of G x phase_s,
/// and the two rates may add up to G x (1 + (load_s - phase_s) / load_s), with the edges of
/// [`RateBound::allowed`].
pub fn load_within_goodput(measured: f64, load: f64, load_s: f64, bound: RateBound) -> Validity {
    let alone = if load_s > 0.0 {
        ((load_s - bound.seconds) / load_s).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let allowed = RateBound { flows: 2, ..bound }.allowed() + bound.goodput_bits_per_s * alone;
    let sum = measured + load;
    Validity::from_reason((sum > allowed && bound.goodput_bits_per_s > 0.0).then(|| {
        format!(
            "with the background load it adds up to {} (measured {:.2} + load {:.2}) over a link whose goodput is {} (at most {} with the load's own time): they cannot both be true",
            mbit(sum),
            measured / 1e6,
            load / 1e6,
            mbit(bound.goodput_bits_per_s),
            mbit(allowed)
        )
    }))
}

/// (b) A round trip's fastest time at or above the link's: each direction's hold floor plus
/// its wire time, less [`ROUND_TRIP_CLOCK_S`]. `one_way` words it as RTT/2 (ping-pong).
pub fn round_trip_floor(min_rtt_s: f64, floor_s: f64, one_way: bool) -> Validity {
    let bad = min_rtt_s < floor_s - ROUND_TRIP_CLOCK_S;
    Validity::from_reason(bad.then(|| {
        let (what, got, floor) = if one_way {
            ("one-way time", min_rtt_s / 2.0, floor_s / 2.0)
        } else {
            ("round trip", min_rtt_s, floor_s)
        };
        format!(
            "fastest {what} {} is below the link's delay + wire time {}: faster than the link",
            format_us(got * 1e9),
            format_us(floor * 1e9)
        )
    }))
}

/// (b) for one stage of path timing that crosses the link (`--path-timing`'s wire stages,
/// from one end's driver stamp to the other's arrival stamp on one clock): no faster than
/// the link's delay (less its jitter) and the frame's wire time, less
/// [`ROUND_TRIP_CLOCK_S`].
pub fn stage_floor(stage: &str, min_s: f64, floor_s: f64) -> Validity {
    let bad = min_s < floor_s - ROUND_TRIP_CLOCK_S;
    Validity::from_reason(bad.then(|| {
        format!(
            "path timing: fastest {stage} {} is below the link's delay + wire time {}: faster than the link (a stamp matched to the wrong message, or clocks not one)",
            format_us(min_s * 1e9),
            format_us(floor_s * 1e9)
        )
    }))
}

/// One side of a stream, for (c).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct End {
    pub bits_per_s: f64,
    /// Every byte this end moved, warm-up included.
    pub bytes_total: u64,
    pub seconds: f64,
}

/// (c) The two ends of one stream, when both counted the same bytes, agree on its rate within
/// what their phases' ends allow.
///
/// With the same bytes B behind both figures, sender B/Ts and receiver B/Tr differ only by
/// their phases. Each end of the two phases may fall apart by the time the bytes held between
/// the two ends (`held_bytes`: the sender's socket buffer, the receiver's, and what the link
/// holds) take at the slower of the two rates, plus [`PHASE_END_SLACK_S`]; so the faster rate
/// may exceed the slower by the factor 1 + (2 x held x 8 / slower + 2 x slack) / shorter
/// phase, and the timed bytes may differ by the held bytes at each end: + 2 x held / B.
pub fn ends_agree(sender: End, receiver: End, held_bytes: u64) -> Validity {
    if sender.bytes_total != receiver.bytes_total || sender.bytes_total == 0 {
        return Validity::valid();
    }
    let (slow, fast) = if sender.bits_per_s <= receiver.bits_per_s {
        (sender.bits_per_s, receiver.bits_per_s)
    } else {
        (receiver.bits_per_s, sender.bits_per_s)
    };
    let shorter = sender.seconds.min(receiver.seconds);
    if slow <= 0.0 || shorter <= 0.0 {
        return Validity::valid();
    }
    let held = held_bytes as f64;
    let allowed = (1.0
        + (2.0 * held * 8.0 / slow + 2.0 * PHASE_END_SLACK_S) / shorter
        + 2.0 * held / sender.bytes_total as f64)
        * (1.0 + ROUNDING);
    let factor = fast / slow;
    Validity::from_reason((factor > allowed).then(|| {
        format!(
            "sender {} and receiver {} are {factor:.2}x apart for the same {} B (phases {} and {}); the phases' ends allow {allowed:.2}x ({held_bytes} B held between the ends): the two ends timed different parts of the transfer",
            mbit(sender.bits_per_s),
            mbit(receiver.bits_per_s),
            sender.bytes_total,
            format_seconds(sender.seconds),
            format_seconds(receiver.seconds),
        )
    }))
}

/// (g) A sender's rate above the link's line rate, beyond what its socket buffer may hold at
/// the end of its phase (`buffer_bytes` x 8 / T): what it counts was handed to its socket and
/// dropped on its own host or left in the buffer, not carried by the link. The figure is
/// true of what it counts (a paced sender above the link sends its pace), so this is a note
/// beside it, not a verdict: the guard puts the reason in the side's `note`.
pub fn sender_within_line(rate: f64, line_rate: f64, seconds: f64, buffer_bytes: u64) -> Validity {
    let t = seconds.max(1e-9);
    let allowed = (line_rate * (1.0 + 2.0 * RELEASE_SLACK_S / t) + buffer_bytes as f64 * 8.0 / t)
        * (1.0 + ROUNDING);
    Validity::from_reason((rate > allowed && line_rate > 0.0).then(|| {
        format!(
            "sender {} is {:.1}x the link's line rate {}: it counts what was handed to the sender's socket (dropped on its host or still in its {buffer_bytes} B buffer), not what crossed the link",
            mbit(rate),
            rate / line_rate,
            mbit(line_rate)
        )
    }))
}

/// The slope's relative standard error of a least-squares line of `k` points with `r2`.
pub fn fit_rel_se(r2: f64, k: usize) -> f64 {
    if k <= 2 || r2.is_nan() || r2 <= 0.0 {
        return f64::INFINITY;
    }
    ((1.0 - r2).max(0.0) / (r2 * (k - 2) as f64)).sqrt()
}

/// The floor of R^2 for a fit of `k` sizes (see [`MAX_FIT_REL_SE`]).
pub fn fit_r2_floor(k: usize) -> f64 {
    1.0 / (1.0 + MAX_FIT_REL_SE * MAX_FIT_REL_SE * k.saturating_sub(2) as f64)
}

/// (e) A Hockney fit one_way(n) = t0 + n / r_inf against its own data and the link: R^2 at or
/// above [`fit_r2_floor`]; r_inf at most twice the largest rate measured (by Hockney's own
/// definition the sweep reaches r_inf / 2 at n_1/2: a sweep whose largest rate is below half
/// of r_inf never reached n_1/2, and its r_inf is an extrapolation the data do not hold),
/// allowing two standard errors; and r_inf at most the link's goodput by
/// [`FIT_GOODPUT_SLACK`].
pub fn hockney(
    r_inf: f64,
    r2: f64,
    k: usize,
    r_max_measured: f64,
    goodput: Option<f64>,
) -> Validity {
    let se = fit_rel_se(r2, k);
    let mut reasons = Vec::new();
    let floor = fit_r2_floor(k);
    if r2.is_nan() || r2 < floor {
        reasons.push(format!(
            "R^2 {r2:.4} of {k} sizes is below the floor of {floor:.3}: r_inf is uncertain by {:.0}% (at most {:.0}%)",
            (se * 100.0).min(9999.0),
            MAX_FIT_REL_SE * 100.0
        ));
    } else {
        if r_max_measured > 0.0 && r_inf > 2.0 * r_max_measured * (1.0 + 2.0 * se) {
            reasons.push(format!(
                "r_inf {} is {:.1}x the largest rate measured ({}): the sweep never reached half of it, r_inf is an extrapolation",
                mbit(r_inf),
                r_inf / r_max_measured,
                mbit(r_max_measured)
            ));
        }
        if let Some(g) = goodput.filter(|g| *g > 0.0) {
            if r_inf > g * (1.0 + FIT_GOODPUT_SLACK) {
                reasons.push(format!(
                    "r_inf {} is {:.1}% of the link's goodput {}: above what the link can carry",
                    mbit(r_inf),
                    r_inf / g * 100.0,
                    mbit(g)
                ));
            }
        }
    }
    Validity::from_reason((!reasons.is_empty()).then(|| reasons.join("; ")))
}

/// What the delay line did in one direction over a point, for (f).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Lateness {
    pub frames: u64,
    pub late_frames: u64,
    /// Summed lateness of every frame released (late or not), as the delay line counts it.
    pub late_sum_ns: u64,
    pub late_max_ns: u64,
    /// The largest lateness in each window of the link's round-trip hold, summed: the most
    /// one chain of cause and effect through this direction was held back (the delay line's
    /// `CausalWindows`); None from an older delay line, when every frame's lateness counts.
    pub late_window_sum_ns: Option<u64>,
    /// A stream point's shortest timed phase that a rate is taken over (any stream's sender
    /// or receiver), nanoseconds; None for a latency point. The shortest: a lateness is
    /// the larger share of it (the oracle's seed 1795726634186776341, scenario 70: frames
    /// 3.9 ms late against receivers' phases of 136 ms, senders' of 568).
    pub rate_phase_ns: Option<u64>,
    /// A latency point's timed phase of round trips, nanoseconds (None: not known, or a
    /// stream point).
    pub round_trip_phase_ns: Option<u64>,
}

/// (f) The lab was the link it was asked to be over the point: at most [`MAX_LATE_SHARE`] of
/// the frames it forwarded in `direction` released more than 100 us late.
pub fn lab_faithful(direction: &str, l: Lateness) -> Validity {
    // A rate over a phase T moves by at most the bytes of frames whose release moved across
    // one of its ends, at most rate x (the largest lateness): a relative error of L_max / T.
    // Below 1% of the phase a lab that released a share of its frames late still gave every
    // rate within the floors' 1%, so a stream point needs both. In a latency point the
    // round trips end later by at most what a chain of cause and effect through the link
    // was held back, in this direction at most the largest lateness of each window of the
    // round-trip hold, summed (plus, for the window a point's start cuts, its largest
    // lateness once); that sum over the round trips' timed phase bounds the mean's excess.
    // Under half of 1% in each direction, the mean is within the floors' 1% whatever the
    // share of frames late. Summing every frame's lateness instead (what an older delay line
    // gives) flagged quiet-host 1 Gbit/s ping-pongs whose frames left 1 to 5 us late each.
    let round_trip_excess_ns = l
        .late_window_sum_ns
        .map(|w| w.saturating_add(l.late_max_ns))
        .unwrap_or(l.late_sum_ns)
        .min(l.late_sum_ns);
    let matters = match (l.rate_phase_ns, l.round_trip_phase_ns) {
        (Some(t), _) => l.late_max_ns as f64 > MAX_LATE_SHARE * t as f64,
        (None, Some(t)) => round_trip_excess_ns as f64 > MAX_LATE_SHARE / 2.0 * t as f64,
        (None, None) => true,
    };
    let bad =
        matters && l.late_frames > 0 && l.late_frames as f64 > MAX_LATE_SHARE * l.frames as f64;
    Validity::from_reason(bad.then(|| {
        let excess = match (l.rate_phase_ns, l.round_trip_phase_ns) {
            (None, Some(t)) if t > 0 => format!(
                ", which can lengthen the round trips by {:.1}%",
                round_trip_excess_ns as f64 / t as f64 * 100.0
            ),
            _ => String::new(),
        };
        format!(
            "lab unfaithful: {} of {} frames {direction} released more than 100 us late (mean lateness {}, max {}), more than {:.0}%{excess}: the delay line fell behind the link's schedule",
            l.late_frames,
            l.frames,
            format_us(l.late_sum_ns as f64 / l.frames.max(1) as f64),
            format_us(l.late_max_ns as f64),
            MAX_LATE_SHARE * 100.0
        )
    }))
}

/// The fewest samples the p-th percentile (a fraction, 0.99) stands on: 10 / (1 - p), rounded
/// up (see [`PERCENTILE_TAIL`]).
pub fn percentile_floor(p: f64) -> u64 {
    if p >= 1.0 {
        return u64::MAX;
    }
    // Rounded first: 10 / (1 - 0.99) is 1000.0000000000009 in floating point.
    let need = PERCENTILE_TAIL / (1.0 - p.max(0.0));
    ((need * 1e6).round() / 1e6).ceil().max(1.0) as u64
}

/// How many of `samples` observations lie beyond the p-th percentile: n - ceil(p n), the
/// nearest-rank definition the histogram uses.
pub fn beyond(p: f64, samples: u64) -> u64 {
    let rank = ((p * samples as f64) * 1e9).round() / 1e9;
    samples.saturating_sub(rank.ceil() as u64)
}

/// (h) A percentile from enough samples. `name` is its label ("p99").
pub fn percentile(name: &str, p: f64, samples: u64) -> Validity {
    let need = percentile_floor(p);
    Validity::from_reason((samples < need).then(|| {
        format!(
            "{name} from {samples} samples: below its floor of {need} (10 / (1 - p), for 10 observations beyond it); {} lie{} beyond it",
            beyond(p, samples),
            if beyond(p, samples) == 1 { "s" } else { "" }
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval row may hold what the receive buffers carried over from the interval
    /// before, never more: two flows with a read of 128 KiB each may show up to 71 Mbit/s over
    /// a 100 ms interval of a 50 Mbit/s link; 60 is within that, 80 is not.
    #[test]
    fn an_interval_sum_gets_the_receivers_backlog_and_no_more() {
        let backlog = 2 * READ_UNIT_BYTES;
        assert_eq!(
            interval_within_goodput("the flows", 60e6, 0.1, 50e6, backlog),
            Validity::valid()
        );
        let v = interval_within_goodput("the flows", 80e6, 0.1, 50e6, backlog);
        assert!(v.is_invalid());
        assert!(
            v.reason().starts_with("the flows add up to 80.00 Mbit/s"),
            "{}",
            v.reason()
        );
        // Without a rate limit there is nothing to hold the sum to.
        assert!(!interval_within_goodput("the flows", 80e6, 0.1, 0.0, 0).is_invalid());
    }

    fn goodput_bound(goodput: f64, seconds: f64) -> RateBound {
        RateBound {
            goodput_bits_per_s: goodput,
            seconds,
            flows: 1,
            message_bytes: 1000,
        }
    }

    /// Issue item 1: raw receiver 136.6 Mbit/s against the run's goodput of 125.2 over 1 s
    /// (130mbit/100us/9000, --size 1000), and 196.9 against 149.2 (155mbit/9180).
    #[test]
    fn a_receiver_above_the_goodput_is_flagged_with_its_share() {
        let v = within_goodput("receiver", 136.6e6, goodput_bound(125.2e6, 1.0));
        assert!(v.is_invalid());
        assert!(
            v.reason().starts_with(
                "receiver 136.60 Mbit/s is 109.1% of the link's goodput 125.20 Mbit/s"
            ),
            "{}",
            v.reason()
        );
        assert!(within_goodput("receiver", 196.9e6, goodput_bound(149.2e6, 1.0)).is_invalid());
        // A true figure just under the goodput, and one a GSO frame above it, are valid.
        assert_eq!(
            within_goodput("receiver", 125.1e6, goodput_bound(125.2e6, 1.0)),
            Validity::valid()
        );
        let one_frame = 125.2e6 + 65_536.0 * 8.0;
        assert!(!within_goodput("receiver", one_frame, goodput_bound(125.2e6, 1.0)).is_invalid());
    }

    /// Issue item 3: 19.35 + 31.30 = 50.65 Mbit/s over a link whose TCP goodput is 47.82,
    /// over 3 s; per-interval sums 52.2 and 55.9 over 1 s.
    #[test]
    fn flows_that_add_up_to_more_than_the_link_are_flagged() {
        let flows = |a: f64, b: f64| {
            vec![
                ("measured".to_owned(), a * 1e6),
                ("tcp:reno".to_owned(), b * 1e6),
            ]
        };
        let bound = RateBound {
            goodput_bits_per_s: 47.82e6,
            seconds: 3.0,
            flows: 1,
            message_bytes: 131_072,
        };
        let v = flows_within_goodput(&flows(19.35, 31.30), bound);
        assert!(v.is_invalid());
        assert!(
            v.reason().starts_with(
                "the flows add up to 50.65 Mbit/s (measured 19.35 + tcp:reno 31.30) over a link whose goodput is 47.82 Mbit/s"
            ),
            "{}",
            v.reason()
        );
        let one_s = RateBound {
            seconds: 1.0,
            ..bound
        };
        assert!(flows_within_goodput(&flows(25.0, 30.9), one_s).is_invalid());
        // Two flows sharing it fairly, just under.
        assert!(!flows_within_goodput(&flows(23.9, 23.9), bound).is_invalid());
    }

    #[test]
    fn a_stream_and_its_load_above_the_link_are_flagged() {
        let bound = RateBound {
            goodput_bits_per_s: 47.82e6,
            seconds: 3.0,
            flows: 1,
            message_bytes: 131_072,
        };
        // Load over exactly the phase: the two share the link.
        assert!(load_within_goodput(30e6, 25e6, 3.0, bound).is_invalid());
        assert!(!load_within_goodput(30e6, 17e6, 3.0, bound).is_invalid());
        // Load over twice the phase may have had the link alone half its time.
        assert!(!load_within_goodput(30e6, 25e6, 6.0, bound).is_invalid());
    }

    /// Issue items 7 and b: a minimum one-way time of 39 us on a 1 ms link, and a true one just
    /// above delay + wire.
    #[test]
    fn a_one_way_time_below_delay_and_wire_is_flagged_and_one_above_is_not() {
        let link = Link {
            rate_bits_per_s: Some(50e6),
            delay_s: 1e-3,
            jitter_s: 0.0,
        };
        // A 1 B TCP message: one 67-byte frame, 10.7 us at 50 Mbit/s, each way.
        let floor = 2.0 * link.one_way_floor_s(67);
        assert!((floor - 2.0 * (1e-3 + 67.0 * 8.0 / 50e6)).abs() < 1e-12);
        let v = round_trip_floor(2.0 * 39e-6, floor, true);
        assert_eq!(
            v.reason(),
            "fastest one-way time 39.00 us is below the link's delay + wire time 1010.72 us: faster than the link"
        );
        assert!(!round_trip_floor(floor + 1e-6, floor, true).is_invalid());
        // Within the clock's 2 us a round trip may read short.
        assert!(!round_trip_floor(floor - 1.5e-6, floor, false).is_invalid());
        assert!(round_trip_floor(floor - 3e-6, floor, false).is_invalid());
        // With jitter above the delay (a lab state of before it was refused) the link may
        // hold a frame no time at all: the floor is the wire time alone.
        let jittery = Link {
            jitter_s: 3e-3,
            ..link
        };
        assert_eq!(jittery.hold_floor_s(), 0.0);
        assert!((jittery.one_way_floor_s(67) - 67.0 * 8.0 / 50e6).abs() < 1e-15);
        // Jitter under the delay lowers the floor by the jitter.
        let some = Link {
            jitter_s: 0.4e-3,
            ..link
        };
        assert!((some.hold_floor_s() - 0.6e-3).abs() < 1e-15);
    }

    /// Issue item 2: sender 11.05, receiver 64.96 Mbit/s, sent = received = 701 440 B, with
    /// 8 KiB windows (16 KiB each as the kernel reports them) on 100 Mbit/s.
    #[test]
    fn two_ends_far_apart_for_the_same_bytes_are_flagged() {
        let bytes = 701_440;
        let sender = End {
            bits_per_s: 11.05e6,
            bytes_total: bytes,
            seconds: 0.5,
        };
        let receiver = End {
            bits_per_s: 64.96e6,
            bytes_total: bytes,
            seconds: 0.074,
        };
        let v = ends_agree(sender, receiver, 32_768);
        assert!(v.is_invalid());
        assert!(
            v.reason()
                .starts_with("sender 11.05 Mbit/s and receiver 64.96 Mbit/s are 5.88x apart for the same 701440 B"),
            "{}",
            v.reason()
        );
        // The same ends within the buffers' and the ends' allowance are valid.
        let close = End {
            bits_per_s: 11.3e6,
            seconds: 0.49,
            ..receiver
        };
        assert!(!ends_agree(sender, close, 32_768).is_invalid());
        // Different bytes (a datagram stream that lost some): not this invariant's to judge.
        let lossy = End {
            bytes_total: bytes - 1000,
            ..receiver
        };
        assert!(!ends_agree(sender, lossy, 32_768).is_invalid());
        // A slow link with big buffers: a 1 s sender phase that filled 10 MiB of buffers
        // against a receiver that drained them for 8 s is what the buffers explain.
        let s = End {
            bits_per_s: 90e6,
            bytes_total: 11_250_000,
            seconds: 1.0,
        };
        let r = End {
            bits_per_s: 10e6,
            bytes_total: 11_250_000,
            seconds: 9.0,
        };
        assert!(!ends_agree(s, r, 10 << 20).is_invalid());
    }

    /// Issue item 8: a raw sender of 8566 Mbit/s on a 130 Mbit/s link.
    #[test]
    fn a_sender_above_the_line_rate_says_what_it_counted() {
        let v = sender_within_line(8566e6, 130e6, 1.0, 212_992);
        assert!(v.is_invalid());
        assert!(
            v.reason().starts_with(
                "sender 8566.00 Mbit/s is 65.9x the link's line rate 130.00 Mbit/s: it counts what was handed to the sender's socket"
            ),
            "{}",
            v.reason()
        );
        // A TCP sender whose 4 MiB buffer was full at the end of a 3 s phase on 50 Mbit/s.
        let full = 50e6 + (4u64 << 20) as f64 * 8.0 / 3.0;
        assert!(!sender_within_line(full * 0.999, 50e6, 3.0, 4 << 20).is_invalid());
    }

    /// Issue item 4: r_inf 119.7 Mbit/s on a 100 Mbit/s raw link; r_inf 400.3 against a
    /// goodput of 382.6 with R^2 0.48; a Nagle sweep's R^2 = 0.0004.
    #[test]
    fn fits_above_the_link_or_fitting_nothing_are_flagged() {
        let raw_goodput = 100e6 * 8976.0 / 9014.0;
        let v = hockney(119.7e6, 0.9995, 12, 99e6, Some(raw_goodput));
        assert!(
            v.reason()
                .starts_with("r_inf 119.70 Mbit/s is 120.2% of the link's goodput 99.58 Mbit/s"),
            "{}",
            v.reason()
        );
        let v = hockney(400.3e6, 0.48, 8, 380e6, Some(382.6e6));
        assert!(
            v.reason().starts_with(
                "R^2 0.4800 of 8 sizes is below the floor of 0.943: r_inf is uncertain by 42%"
            ),
            "{}",
            v.reason()
        );
        assert!(hockney(5e6, 0.0004, 12, 4e6, None).is_invalid());
        // A good fit a little above the goodput (its noise), and one that the sweep reached.
        assert_eq!(
            hockney(385e6, 0.9999, 8, 370e6, Some(382.6e6)),
            Validity::valid()
        );
        // 6% above the goodput is above the link whatever the fit's own uncertainty (4% here).
        assert!(hockney(382.6e6 * 1.06, 0.99, 8, 370e6, Some(382.6e6)).is_invalid());
        // No lab: a fit whose r_inf is 10x the largest rate measured never reached n_1/2.
        let v = hockney(10e9, 0.999, 6, 1e9, None);
        assert!(
            v.reason().contains("the sweep never reached half of it"),
            "{}",
            v.reason()
        );
        assert!(!hockney(1.9e9, 0.999, 6, 1e9, None).is_invalid());
    }

    #[test]
    fn the_r2_floor_follows_the_sizes() {
        assert!((fit_r2_floor(3) - 1.0 / 1.01).abs() < 1e-12);
        assert!((fit_r2_floor(23) - 1.0 / 1.21).abs() < 1e-12);
        // At the floor the relative standard error is the limit.
        for k in [3, 10, 23] {
            assert!((fit_rel_se(fit_r2_floor(k), k) - MAX_FIT_REL_SE).abs() < 1e-9);
        }
        assert_eq!(fit_rel_se(0.9, 2), f64::INFINITY);
    }

    /// Issue item 1's lab line: 3 109 frames released more than 100 us late, mean 5.5 ms.
    #[test]
    fn a_delay_line_that_fell_behind_makes_the_point_unfaithful() {
        let late = Lateness {
            frames: 15_000,
            late_frames: 3109,
            late_sum_ns: 15_000 * 5_500_000,
            late_max_ns: 21_000_000,
            late_window_sum_ns: None,
            rate_phase_ns: Some(1_000_000_000),
            round_trip_phase_ns: None,
        };
        assert_eq!(
            lab_faithful("a->b", late).reason(),
            "lab unfaithful: 3109 of 15000 frames a->b released more than 100 us late (mean lateness 5500.00 us, max 21000.00 us), more than 1%: the delay line fell behind the link's schedule"
        );
        let few = Lateness {
            late_frames: 150,
            ..late
        };
        assert!(!lab_faithful("a->b", few).is_invalid());
        assert!(!lab_faithful("a->b", Lateness::default()).is_invalid());
        // A stream whose latest frame was 1.25 ms late in a 1 s phase: every rate within 1%
        // whatever the share late; a latency point has no such slack.
        let short = Lateness {
            late_max_ns: 1_250_000,
            ..late
        };
        assert!(!lab_faithful("a->b", short).is_invalid());
        assert!(lab_faithful(
            "a->b",
            Lateness {
                rate_phase_ns: None,
                ..short
            }
        )
        .is_invalid());
        // A ping-pong on a quiet host: 5 of 248 frames over 100 us late, 24.3 us on average
        // (6.0 ms in all), in 1 s of round trips: 0.6% of it, above half of 1%.
        let pingpong = Lateness {
            frames: 248,
            late_frames: 5,
            late_sum_ns: 6_026_000,
            late_max_ns: 270_000,
            late_window_sum_ns: None,
            rate_phase_ns: None,
            round_trip_phase_ns: Some(1_000_000_000),
        };
        assert_eq!(
            lab_faithful("a->b", pingpong).reason(),
            "lab unfaithful: 5 of 248 frames a->b released more than 100 us late (mean lateness 24.30 us, max 270.00 us), more than 1%, which can lengthen the round trips by 0.6%: the delay line fell behind the link's schedule"
        );
        // The same frames, of which the latest in each window of the round-trip hold add up
        // to 2.1 ms (with the largest once more for the window the point's start cut): 0.24%.
        assert!(!lab_faithful(
            "a->b",
            Lateness {
                late_window_sum_ns: Some(1_830_000),
                ..pingpong
            }
        )
        .is_invalid());
        // A window sum can never claim more than every frame's lateness.
        assert!(lab_faithful(
            "a->b",
            Lateness {
                late_window_sum_ns: Some(9_000_000),
                ..pingpong
            }
        )
        .is_invalid());
        // 2 of 181, 9.1 us on average (1.6 ms): 0.16%, within it.
        let within = Lateness {
            frames: 181,
            late_frames: 2,
            late_sum_ns: 1_647_100,
            late_max_ns: 290_000,
            ..pingpong
        };
        assert!(!lab_faithful("a->b", within).is_invalid());
        // A loaded run's 3 109 of 15 000 frames, 5.5 ms late each, in a latency point: flagged.
        assert!(lab_faithful(
            "a->b",
            Lateness {
                rate_phase_ns: None,
                round_trip_phase_ns: Some(1_000_000_000),
                ..late
            }
        )
        .is_invalid());
    }

    /// Issue item 12: 51 samples print a p99 equal to their max; p99.99 from 15 000 samples.
    #[test]
    fn percentiles_need_ten_observations_beyond_them() {
        assert_eq!(percentile_floor(0.5), 20);
        assert_eq!(percentile_floor(0.9), 100);
        assert_eq!(percentile_floor(0.99), 1000);
        assert_eq!(percentile_floor(0.999), 10_000);
        assert_eq!(percentile_floor(0.9999), 100_000);
        assert_eq!(percentile_floor(0.3), 15);
        assert_eq!(
            percentile("p99", 0.99, 51).reason(),
            "p99 from 51 samples: below its floor of 1000 (10 / (1 - p), for 10 observations beyond it); 0 lie beyond it"
        );
        assert_eq!(
            percentile("p99.99", 0.9999, 15_000).reason(),
            "p99.99 from 15000 samples: below its floor of 100000 (10 / (1 - p), for 10 observations beyond it); 1 lies beyond it"
        );
        assert_eq!(percentile("p99", 0.99, 1000), Validity::valid());
        assert_eq!(beyond(0.99, 1000), 10);
        assert_eq!(beyond(0.5, 51), 25);
        assert_eq!(beyond(0.99, 0), 0);
    }
}
