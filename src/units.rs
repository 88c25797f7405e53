//! Command-line parsers for sizes, durations, rates and percentages.
//!
//! Every error is a single line that quotes the offending input (with Rust
//! string escapes, so even control characters cannot break the line) and says
//! what would have been accepted.

use std::collections::HashSet;
use std::time::Duration;

/// Most values a size specification may expand to; a sweep longer than this
/// is almost certainly a typo, and it bounds the memory a spec can demand.
pub const MAX_SIZE_SPEC_VALUES: usize = 10_000;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

const BYTES_ACCEPTED: &str =
    "expected a whole number of bytes with optional binary suffix K, M or G (also k, KiB, MiB, GiB; 64K = 65536)";

/// A decimal number split into its digits: `int` is non-empty, `frac` may be
/// empty, and `rest` is whatever follows.
struct Decimal<'a> {
    int: &'a str,
    frac: &'a str,
    rest: &'a str,
}

/// Splits a leading unsigned decimal (`12`, `1.5`) off `s`.
///
/// Hand-rolled rather than `f64::from_str`, which would also accept `inf`,
/// `NaN`, exponents and signs, none of which belong on these command lines.
fn split_decimal(s: &str) -> Option<Decimal<'_>> {
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 {
        return None;
    }
    let (int, after) = s.split_at(int_len);
    let Some(frac_and_rest) = after.strip_prefix('.') else {
        return Some(Decimal {
            int,
            frac: "",
            rest: after,
        });
    };
    let frac_len = frac_and_rest.bytes().take_while(u8::is_ascii_digit).count();
    if frac_len == 0 {
        return None;
    }
    let (frac, rest) = frac_and_rest.split_at(frac_len);
    Some(Decimal { int, frac, rest })
}

impl Decimal<'_> {
    /// Exact value times `unit`, if that is a whole number fitting `u128`.
    fn times_exact(&self, unit: u128) -> Result<u128, NotExact> {
        let int = parse_digits_u128(self.int).ok_or(NotExact::Overflow)?;
        let whole = int.checked_mul(unit).ok_or(NotExact::Overflow)?;
        let frac = self.frac.trim_end_matches('0');
        if frac.is_empty() {
            return Ok(whole);
        }
        // Past 38 digits 10^d overflows u128. Such a fraction cannot give a
        // whole number anyway for the units used here (at most 2^30): after
        // trimming zeros, d digits times 2^k is whole only if d <= k.
        if frac.len() > 38 {
            return Err(NotExact::Fraction);
        }
        let f = parse_digits_u128(frac).ok_or(NotExact::Fraction)?;
        let scale = 10u128.pow(frac.len() as u32);
        // Cancelling the common factor first keeps f * unit from
        // overflowing: the result f * unit / scale is below `unit`.
        let g = gcd(unit, scale);
        let (unit_r, scale_r) = (unit / g, scale / g);
        if f % scale_r != 0 {
            return Err(NotExact::Fraction);
        }
        let part = (f / scale_r)
            .checked_mul(unit_r)
            .ok_or(NotExact::Overflow)?;
        whole.checked_add(part).ok_or(NotExact::Overflow)
    }

    /// The value as `f64`; infinite when the digits exceed `f64`'s range.
    fn to_f64(&self) -> f64 {
        self.to_f64_times_pow10(0)
    }

    /// The value times 10^exp, rounded once: "99.9" with exp -2 gives the
    /// double nearest 0.999, where 99.9 / 100.0 would round twice and miss.
    fn to_f64_times_pow10(&self, exp: i32) -> f64 {
        let frac = if self.frac.is_empty() { "0" } else { self.frac };
        // Only ASCII digits, one dot and an exponent reach the parser, which
        // always accepts them.
        format!("{}.{}e{}", self.int, frac, exp)
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    }
}

enum NotExact {
    Overflow,
    Fraction,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn parse_digits_u128(digits: &str) -> Option<u128> {
    digits.parse::<u128>().ok()
}

/// Parses a byte count such as `0`, `1500`, `64K` (65536) or `1.5K` (1536).
///
/// Suffixes are binary and case-insensitive: `K`/`KiB`, `M`/`MiB`,
/// `G`/`GiB`. A fraction is accepted only when it yields a whole number of
/// bytes (`1.5K` = 1536, `0.5` is rejected).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    bytes_value(s).map_err(|why| format!("invalid byte count {s:?}: {why}; {BYTES_ACCEPTED}"))
}

/// `parse_bytes` without the error context, so that size-list errors can
/// give their own.
fn bytes_value(s: &str) -> Result<u64, &'static str> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty");
    }
    if t.starts_with('-') {
        return Err("negative");
    }
    let d = split_decimal(t).ok_or("not a number")?;
    let unit = match d.rest.trim_start().to_ascii_lowercase().as_str() {
        "" => 1,
        "k" | "kib" => KIB,
        "m" | "mib" => MIB,
        "g" | "gib" => GIB,
        _ => return Err("unknown suffix"),
    };
    match d.times_exact(u128::from(unit)) {
        Ok(v) => u64::try_from(v).map_err(|_| "too large for 64 bits"),
        Err(NotExact::Overflow) => Err("too large for 64 bits"),
        Err(NotExact::Fraction) => Err("not a whole number of bytes"),
    }
}

const SPEC_ACCEPTED: &str = "expected comma-separated sizes (64K), linear ranges A..B:+STEP or geometric ranges A..B:*FACTOR (1..4M:*2)";

/// Expands a message-size specification such as `1..4M:*2,64K,100..1000:+100`.
///
/// Items keep the user's order; a value already produced by an earlier item
/// is dropped. A linear range `A..B:+S` gives A, A+S, ... up to B (B only if
/// hit). A geometric range `A..B:*F` (F > 1, may be fractional) gives
/// round(A * F^k) without repeats, up to B, and always ends with B. At most
/// [`MAX_SIZE_SPEC_VALUES`] values in total.
pub fn parse_size_spec(s: &str) -> Result<Vec<u64>, String> {
    if s.trim().is_empty() {
        return Err(format!("invalid size list {s:?}: empty; {SPEC_ACCEPTED}"));
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for item in s.split(',') {
        let item = item.trim();
        let err =
            |why: &str| format!("invalid size list {s:?} at {item:?}: {why}; {SPEC_ACCEPTED}");
        if item.is_empty() {
            return Err(err("empty item"));
        }
        let values = expand_item(item).map_err(|why| err(&why))?;
        for v in values {
            if seen.insert(v) {
                out.push(v);
            }
        }
        if out.len() > MAX_SIZE_SPEC_VALUES {
            return Err(err(&format!(
                "expands to more than {MAX_SIZE_SPEC_VALUES} sizes"
            )));
        }
    }
    Ok(out)
}

/// Expands one item; the error is the reason only, the caller adds context.
fn expand_item(item: &str) -> Result<Vec<u64>, String> {
    let bytes = |what: &str, text: &str| {
        bytes_value(text).map_err(|why| format!("{what}{text:?} is {why}"))
    };
    let Some((a, rest)) = item.split_once("..") else {
        return bytes("size ", item).map(|v| vec![v]);
    };
    let Some((b, step)) = rest.split_once(':') else {
        return Err("a range needs a step, :+STEP or :*FACTOR".to_string());
    };
    let a = bytes("range start ", a)?;
    let b = bytes("range end ", b)?;
    if a > b {
        return Err(format!("range start {a} is above range end {b}"));
    }
    let step = step.trim();
    if let Some(inc) = step.strip_prefix('+') {
        linear(a, b, bytes("range step ", inc)?)
    } else if let Some(factor) = step.strip_prefix('*') {
        let f = split_decimal(factor.trim())
            .filter(|d| d.rest.is_empty())
            .map(|d| d.to_f64())
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("range factor {factor:?} is not a number"))?;
        geometric(a, b, f)
    } else {
        Err(format!("range step {step:?} must start with + or *"))
    }
}

fn linear(a: u64, b: u64, inc: u64) -> Result<Vec<u64>, String> {
    if inc == 0 {
        return Err("linear step must not be 0".to_string());
    }
    // Counted before generating so that `0..1G:+1` fails at once instead of
    // allocating a billion values.
    let count = ((b - a) / inc).saturating_add(1);
    if count > MAX_SIZE_SPEC_VALUES as u64 {
        return Err(format!(
            "range has {count} sizes, more than {MAX_SIZE_SPEC_VALUES}"
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut v = a;
    loop {
        out.push(v);
        match v.checked_add(inc) {
            Some(next) if next <= b => v = next,
            _ => break,
        }
    }
    Ok(out)
}

fn geometric(a: u64, b: u64, factor: f64) -> Result<Vec<u64>, String> {
    if factor.is_nan() || factor <= 1.0 {
        return Err(format!("geometric factor {factor} must be greater than 1"));
    }
    if a == 0 {
        return Err("a geometric range must start at 1 or more".to_string());
    }
    let too_many = || format!("range has more than {MAX_SIZE_SPEC_VALUES} sizes");
    let af = a as f64;
    let ln_f = factor.ln();
    let mut out: Vec<u64> = Vec::new();
    let mut k: u64 = 0;
    let mut finished = false;
    // Every pass either emits a new value or jumps k past the run of
    // exponents that round to the last one, so passes stay proportional to
    // the output; the cap is a backstop against float surprises.
    for _ in 0..4 * MAX_SIZE_SPEC_VALUES + 16 {
        let x = (af * factor.powf(k as f64)).round();
        // `as` saturates, so 2^64 and beyond compare as u64::MAX.
        if x.is_nan() || x > b as f64 || x as u64 > b {
            finished = true;
            break;
        }
        let v = x as u64;
        if out.last() != Some(&v) {
            out.push(v);
            if out.len() > MAX_SIZE_SPEC_VALUES {
                return Err(too_many());
            }
        }
        // With a factor barely above 1, consecutive exponents round to the
        // same integer for a long stretch: skip to the first exponent whose
        // value can round above v. Flooring keeps float error from skipping
        // a value; the worst case is one extra pass that repeats v.
        let next = ((v as f64 + 0.5) / af).ln() / ln_f;
        let jump = if next.is_finite() && next < u64::MAX as f64 {
            next.floor() as u64
        } else {
            u64::MAX
        };
        k = k.saturating_add(1).max(jump);
        if k == u64::MAX {
            finished = true;
            break;
        }
    }
    if !finished {
        return Err(too_many());
    }
    if out.last() != Some(&b) {
        out.push(b);
        if out.len() > MAX_SIZE_SPEC_VALUES {
            return Err(too_many());
        }
    }
    Ok(out)
}

/// NetPIPE-style perturbation: each size n becomes n-p (when at least 1),
/// n and n+p (when it fits), sorted ascending without duplicates. With p = 0
/// the input is returned unchanged (order and duplicates included).
pub fn perturb(sizes: &[u64], p: u64) -> Vec<u64> {
    if p == 0 {
        return sizes.to_vec();
    }
    let mut out = Vec::with_capacity(sizes.len() * 3);
    for &n in sizes {
        if n > p {
            out.push(n - p);
        }
        out.push(n);
        if let Some(up) = n.checked_add(p) {
            out.push(up);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

const DURATION_ACCEPTED: &str =
    "expected a non-negative number with optional unit ns, us, ms, s, m or h (bare numbers are seconds: 10, 1.5s, 500ms)";

/// Parses a duration: a bare number is seconds (`10`), or use a unit: `ns`,
/// `us` (or `µs`), `ms`, `s`, `m` (or `min`), `h`; case-insensitive.
/// Fractions are exact down to the nanosecond, rounded to nearest below it.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let err = |why: &str| format!("invalid duration {s:?}: {why}; {DURATION_ACCEPTED}");
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    if t.starts_with('-') {
        return Err(err("negative"));
    }
    let d = split_decimal(t).ok_or_else(|| err("not a number"))?;
    let unit_ns: u128 = match d.rest.trim_start().to_lowercase().as_str() {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(err("unknown unit")),
    };
    let too_long = || err("too long");
    let int = parse_digits_u128(d.int).ok_or_else(too_long)?;
    let mut total_ns = int.checked_mul(unit_ns).ok_or_else(too_long)?;
    // Digits beyond 24 decimals are worth under 1e-11 ns even in hours;
    // dropping them keeps the arithmetic inside u128.
    let frac = d.frac.get(..d.frac.len().min(24)).unwrap_or("");
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        let scale = 10u128.pow(frac.len() as u32);
        let f = parse_digits_u128(frac).ok_or_else(too_long)?;
        let scaled = f * unit_ns;
        let frac_ns = (scaled + scale / 2) / scale;
        total_ns = total_ns.checked_add(frac_ns).ok_or_else(too_long)?;
    }
    let secs = u64::try_from(total_ns / 1_000_000_000).map_err(|_| too_long())?;
    // The remainder is below 1e9, so it fits u32.
    let nanos = (total_ns % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// The shortest exact text of a duration that [`parse_duration`] reads back: the largest unit
/// that divides it ("10s", "200ms", "1500us", "90s" for 90 s, "1h").
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit_ns, unit) in [
        (3_600_000_000_000u128, "h"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ] {
        if ns >= unit_ns && ns.is_multiple_of(unit_ns) {
            return format!("{}{unit}", ns / unit_ns);
        }
    }
    format!("{ns}ns")
}

/// Serde for a [`Duration`] as its text ("10s", "200ms"), for documents people read and write.
pub mod duration_text {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = <std::borrow::Cow<str> as serde::Deserialize>::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// A duration in whole nanoseconds, saturating (after 584 years): how run documents hold times.
#[inline]
pub fn whole_ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Serde for a [`Duration`] as whole nanoseconds, the unit of every time in a run document.
/// Reads also the `{"secs": .., "nanos": ..}` object of serde's own form for `Duration`, which
/// lab state files and run documents of schema version 1 hold.
pub mod duration_ns {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(super::whole_ns(*d))
    }

    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Written {
        Nanos(u64),
        Parts { secs: u64, nanos: u32 },
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match <Written as serde::Deserialize>::deserialize(d)? {
            Written::Nanos(ns) => Ok(Duration::from_nanos(ns)),
            Written::Parts { secs, nanos } => Duration::from_secs(secs)
                .checked_add(Duration::from_nanos(u64::from(nanos)))
                .ok_or_else(|| serde::de::Error::custom("duration out of range")),
        }
    }
}

/// As [`duration_text`], for an optional duration.
pub mod opt_duration_text {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&super::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = <Option<std::borrow::Cow<str>> as serde::Deserialize>::deserialize(d)?;
        text.map(|t| super::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// A target sending rate. Written and read as text ("100M", "1.5G", "10kpps"), so that a run
/// document or a study file shows it as a person would type it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Bits per second, always positive and finite.
    BitsPerSecond(f64),
    /// Packets per second, always positive and finite.
    PacketsPerSecond(f64),
}

impl std::fmt::Display for Rate {
    /// The shortest text [`parse_rate`] reads back as exactly this rate: the largest decimal
    /// prefix whose quotient prints exactly ("100M", "1.5G", "2500", "10kpps").
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (value, unit) = match *self {
            Rate::BitsPerSecond(v) => (v, ""),
            Rate::PacketsPerSecond(v) => (v, "pps"),
        };
        for (scale, prefix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
            let q = value / scale;
            if q >= 1.0 && q * scale == value {
                let text = format!("{q}{prefix}{unit}");
                if parse_rate(&text).ok() == Some(*self) {
                    return f.write_str(&text);
                }
            }
        }
        write!(f, "{value}{unit}")
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        parse_rate(s)
    }
}

impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        parse_rate(&text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Rate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Rate".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A bit rate with a decimal prefix (\"100M\" = 10^8 bit/s) or a packet rate (\"10kpps\")."
        })
    }
}

const RATE_ACCEPTED: &str = "expected a positive bit rate with optional decimal prefix k, M, G or T and optional unit bit or bps (100M, 1.5G, 100mbit, 100Mbps), a network's name (oc3, oc12, taxi, fddi, 10base-t, 100base-tx, 1000base-t), or a packet rate ending in pps (10kpps)";

/// Rates by the name of the network, bits per second: what each carries for its frames or
/// cells. SONET's OC-3c line rate is 155.52 Mbit/s; its section, line and path overhead
/// leave 149.76 Mbit/s of payload for 53-byte ATM cells (OC-12c: 622.08 and 599.04).
pub const NAMED_RATES: [(&str, f64); 7] = [
    ("oc3", 149.76e6),
    ("oc12", 599.04e6),
    ("taxi", 100e6),
    ("fddi", 100e6),
    ("10base-t", 10e6),
    ("100base-tx", 100e6),
    ("1000base-t", 1000e6),
];

/// The rate of a network named `s` (any case), bits per second.
pub fn named_rate(s: &str) -> Option<f64> {
    let t = s.trim().to_ascii_lowercase();
    NAMED_RATES.iter().find(|(n, _)| *n == t).map(|&(_, b)| b)
}

/// Parses a rate. Prefixes are decimal as in network tools (`100M` =
/// 100e6 bit/s) and case-insensitive. A bare or `bit`/`bps` rate is in bits
/// per second; `pps` makes it packets per second. Byte rates (`MB/s`,
/// `MBps`, `B`) are rejected rather than guessed at, since mistaking one for
/// the other is an eightfold error.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let err = |why: &str| format!("invalid rate {s:?}: {why}; {RATE_ACCEPTED}");
    let t = s.trim();
    if let Some(bits) = named_rate(t) {
        return Ok(Rate::BitsPerSecond(bits));
    }
    if t.is_empty() {
        return Err(err("empty"));
    }
    if t.starts_with('-') {
        return Err(err("negative"));
    }
    let d = split_decimal(t).ok_or_else(|| err("not a number"))?;
    let value = d.to_f64();
    let suffix = d.rest.trim_start();

    let (multiplier, unit) = match suffix.chars().next() {
        Some('k' | 'K') => (1e3, &suffix[1..]),
        Some('m' | 'M') => (1e6, &suffix[1..]),
        Some('g' | 'G') => (1e9, &suffix[1..]),
        Some('t' | 'T') => (1e12, &suffix[1..]),
        _ => (1.0, suffix),
    };
    let lower = unit.to_ascii_lowercase();
    // "b" is a bit only in lower case: "MB", "MBps" and "MB/s" mean bytes.
    let packets = match unit {
        "" | "b" | "bps" | "b/s" => false,
        _ if matches!(lower.as_str(), "bit" | "bits" | "bit/s" | "bits/s") => false,
        _ if lower == "pps" => true,
        _ if unit.starts_with('B') || lower.starts_with("byte") => {
            return Err(err(
                "byte rates are not accepted, give bits (8 bit = 1 byte)",
            ));
        }
        _ => return Err(err("unknown unit")),
    };
    let rate = value * multiplier;
    if rate == 0.0 {
        return Err(err(
            "a rate of zero is meaningless (leave the option out to send unpaced)",
        ));
    }
    if !rate.is_finite() {
        return Err(err("too large"));
    }
    Ok(if packets {
        Rate::PacketsPerSecond(rate)
    } else {
        Rate::BitsPerSecond(rate)
    })
}

/// A rate typed on a command line: as [`parse_rate`], but a bare number (no prefix, no unit)
/// is refused. `-b 100` is far likelier a slip for 100M than a wish for 100 bit/s, which
/// iperf3 would send without a word; documents keep reading bare numbers as bit/s.
pub fn parse_rate_typed(s: &str) -> Result<Rate, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "invalid rate {s:?}: no unit; did you mean {t}M ({t} Mbit/s)? {t} bit/s is written {t}bit; {RATE_ACCEPTED}"
        ));
    }
    parse_rate(s)
}

const REQUEST_RATES_ACCEPTED: &str = "expected whole requests per second with optional decimal prefix k or M, one, a comma-separated list or a range A..B:+STEP or A..B:*FACTOR, optionally ending in /s (5000/s, 5k,20k,50k, 1k..20k:+1k)";

/// Most request rates one `--rate` sweep may name.
pub const MAX_REQUEST_RATES: usize = 1_000;

/// One request rate: whole requests per second, with decimal prefixes (`5k` = 5000).
fn request_rate_value(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let d = split_decimal(t).ok_or_else(|| format!("{t:?} is not a number"))?;
    let unit: u128 = match d.rest.trim() {
        "" => 1,
        "k" | "K" => 1_000,
        "m" | "M" => 1_000_000,
        _ => return Err(format!("{t:?} has an unknown suffix")),
    };
    match d.times_exact(unit) {
        Ok(0) => Err("a rate of 0 requests per second offers no load".into()),
        Ok(v) => u64::try_from(v).map_err(|_| format!("{t:?} is too large")),
        Err(NotExact::Overflow) => Err(format!("{t:?} is too large")),
        Err(NotExact::Fraction) => Err(format!(
            "{t:?} is not a whole number of requests per second"
        )),
    }
}

/// Parses open-loop request rates (`--rate` of rr): `5000/s`, `5k,20k,50k/s`, `1k..20k:+1k`
/// or `1k..64k:*2`, in requests per second, decimal prefixes (`5k` = 5000). Items keep their
/// order; a value already named is dropped. Each rate is a whole number of requests per second.
pub fn parse_request_rates(s: &str) -> Result<Vec<u64>, String> {
    let err = |why: &str| format!("invalid request rate {s:?}: {why}; {REQUEST_RATES_ACCEPTED}");
    let t = s.trim();
    let t = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("rps"))
        .unwrap_or(t);
    if t.trim().is_empty() {
        return Err(err("empty"));
    }
    let mut out: Vec<u64> = Vec::new();
    for item in t.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(err("empty item"));
        }
        let values = match item.split_once("..") {
            None => vec![request_rate_value(item).map_err(|e| err(&e))?],
            Some((a, rest)) => {
                let Some((b, step)) = rest.split_once(':') else {
                    return Err(err("a range needs a step, :+STEP or :*FACTOR"));
                };
                let (a, b) = (
                    request_rate_value(a).map_err(|e| err(&e))?,
                    request_rate_value(b).map_err(|e| err(&e))?,
                );
                if a > b {
                    return Err(err(&format!("range start {a} is above range end {b}")));
                }
                let step = step.trim();
                if let Some(inc) = step.strip_prefix('+') {
                    linear(a, b, request_rate_value(inc).map_err(|e| err(&e))?)
                } else if let Some(f) = step.strip_prefix('*') {
                    let f = split_decimal(f.trim())
                        .filter(|d| d.rest.is_empty())
                        .map(|d| d.to_f64())
                        .filter(|f| f.is_finite())
                        .ok_or_else(|| err(&format!("range factor {f:?} is not a number")))?;
                    geometric(a, b, f)
                } else {
                    return Err(err(&format!("range step {step:?} must start with + or *")));
                }
                .map_err(|e| err(&e))?
            }
        };
        for v in values {
            if !out.contains(&v) {
                out.push(v);
            }
            if out.len() > MAX_REQUEST_RATES {
                return Err(err(&format!("more than {MAX_REQUEST_RATES} rates")));
            }
        }
    }
    Ok(out)
}

/// Parses a percentage (`2%` or `2`) into a fraction (0.02). The value must
/// lie strictly between 0 and 100.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let err = |why: &str| {
        format!("invalid percentage {s:?}: {why}; expected a number strictly between 0 and 100, optionally followed by % (2% = 0.02)")
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    if t.starts_with('-') {
        return Err(err("negative"));
    }
    let d = split_decimal(t).ok_or_else(|| err("not a number"))?;
    if !matches!(d.rest.trim_start(), "" | "%") {
        return Err(err("unexpected text after the number"));
    }
    let v = d.to_f64_times_pow10(-2);
    if !(v > 0.0 && v < 1.0) {
        return Err(err("out of range"));
    }
    Ok(v)
}

/// Formats a byte count compactly with a binary suffix when it is exact:
/// 1024 -> "1K", 4194304 -> "4M", 1536 -> "1536". The output parses back
/// with [`parse_bytes`].
pub fn format_bytes(n: u64) -> String {
    if n == 0 {
        return "0".to_string();
    }
    for (unit, suffix) in [(GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if n.is_multiple_of(unit) {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

/// The unit a set of measured values is shown in: a decimal prefix of bit/s, the time unit of
/// nanoseconds, or the unit as given. One choice for a whole figure (its largest magnitude),
/// so that a colour bar, its cells and a table share one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct DisplayUnit {
    /// A value in the base unit divided by this is the shown number.
    pub divisor: f64,
    /// "Gbit/s", "µs", or the base unit unchanged.
    pub name: String,
}

impl DisplayUnit {
    /// Chooses the unit for values of `base` unit ("bit/s", "ns", anything else unchanged) up
    /// to `magnitude` in size: the largest prefix that keeps the magnitude at 1 or above.
    pub fn for_values(base: &str, magnitude: f64) -> DisplayUnit {
        let m = if magnitude.is_finite() {
            magnitude.abs()
        } else {
            0.0
        };
        let steps: &[(f64, &str)] = match base {
            "bit/s" => &[
                (1e12, "Tbit/s"),
                (1e9, "Gbit/s"),
                (1e6, "Mbit/s"),
                (1e3, "kbit/s"),
            ],
            "ns" => &[(1e9, "s"), (1e6, "ms"), (1e3, "µs")],
            _ => &[],
        };
        steps
            .iter()
            .find(|(d, _)| m >= *d)
            .map(|(d, n)| DisplayUnit {
                divisor: *d,
                name: (*n).to_owned(),
            })
            .unwrap_or_else(|| DisplayUnit {
                divisor: 1.0,
                name: base.to_owned(),
            })
    }

    /// The shown number of a value in the base unit, to `digits` significant digits.
    pub fn number(&self, v: f64, digits: u32) -> String {
        format_significant(v / self.divisor, digits)
    }
}

/// A number to `digits` significant digits (at least 1), without trailing zeros and without
/// an exponent between 10^-4 and 10^9: 9.412, 941, 1200000, 0.0012.
pub fn format_significant(v: f64, digits: u32) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = digits.max(1) as i32;
    let a = v.abs();
    if !(1e-4..1e9).contains(&a) {
        return format!("{:.*e}", (digits - 1) as usize, v);
    }
    let magnitude = a.log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    // Rounding to the digits may carry into the next decade (9.996 -> 10.00): round first.
    let scale = 10f64.powi(digits - 1 - magnitude);
    let rounded = (v * scale).round() / scale;
    let s = format!("{rounded:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// Formats bits/s as Mbit/s (decimal) for tables (two decimals, no unit: the column header carries it).
pub fn mbit(bits_per_s: f64) -> String {
    format!("{:.2}", bits_per_s / 1e6)
}

/// A bit rate as text with its unit, the one form every message, note and summary gives a
/// rate in: [`mbit`]'s number and " Mbit/s" ("95.64 Mbit/s").
pub fn format_mbit_s(bits_per_s: f64) -> String {
    format!("{} Mbit/s", mbit(bits_per_s))
}

/// The one unit a whole table's rates are shown in: Mbit/s, or Gbit/s when the table's largest
/// rate is 10 Gbit/s or more (so that a 100 Gbit/s link does not print six-digit Mbit/s, and a
/// table never mixes the two: a reader compares a column at a glance). Chosen once per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    Mbit,
    Gbit,
}

impl RateUnit {
    /// From this rate on a table is in Gbit/s.
    pub const GBIT_FROM: f64 = 10e9;

    /// The unit for a table whose largest rate is `max_bits_per_s` (not finite: Mbit/s).
    pub fn for_max(max_bits_per_s: f64) -> RateUnit {
        if max_bits_per_s.is_finite() && max_bits_per_s.abs() >= Self::GBIT_FROM {
            RateUnit::Gbit
        } else {
            RateUnit::Mbit
        }
    }

    /// The unit for a table of these rates (the non-finite ones left out).
    pub fn for_rates(rates: impl IntoIterator<Item = f64>) -> RateUnit {
        let max = rates
            .into_iter()
            .filter(|r| r.is_finite())
            .fold(0.0_f64, |m, r| m.max(r.abs()));
        RateUnit::for_max(max)
    }

    /// "Mbit/s" or "Gbit/s", for a header or a units line.
    pub fn name(self) -> &'static str {
        match self {
            RateUnit::Mbit => "Mbit/s",
            RateUnit::Gbit => "Gbit/s",
        }
    }

    /// Bit/s per unit.
    pub fn divisor(self) -> f64 {
        match self {
            RateUnit::Mbit => 1e6,
            RateUnit::Gbit => 1e9,
        }
    }

    /// A rate's number in this unit, without the unit (the header carries it): two decimals
    /// in Mbit/s as [`mbit`] gives, three in Gbit/s (so that 1 Mbit/s still shows). "-" when
    /// the rate is not finite.
    pub fn format(self, bits_per_s: f64) -> String {
        self.format_to(bits_per_s, self.decimals())
    }

    /// [`Self::format`] with `decimals` decimals.
    pub fn format_to(self, bits_per_s: f64, decimals: usize) -> String {
        if !bits_per_s.is_finite() {
            return "-".into();
        }
        format!("{:.*}", decimals, bits_per_s / self.divisor())
    }

    /// The decimals [`Self::format`] gives.
    pub fn decimals(self) -> usize {
        match self {
            RateUnit::Mbit => 2,
            RateUnit::Gbit => 3,
        }
    }

    /// A rate in this unit, with it ("9.412 Gbit/s").
    pub fn with_unit(self, bits_per_s: f64) -> String {
        format!("{} {}", self.format(bits_per_s), self.name())
    }
}

/// A latency figure (a one-way time, a round trip, a fitted t0, their intervals and
/// percentiles) as the number of a table column headed in us: microseconds, two decimals, no
/// unit (the column header carries it). A value that is not finite prints as Rust prints it.
pub fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

/// A latency figure as text with its unit, the one form every message, note and summary line
/// gives a measured latency, round trip or one-way time in: [`us`]'s number and " us"
/// ("43.47 us"), whatever its size, so that figures side by side compare at a glance. "-"
/// when the value is not finite.
pub fn format_us(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".into();
    }
    format!("{} us", us(ns))
}

/// A span of time as text, from seconds: a timed phase, a configured delay, jitter or timeout,
/// an interval, a stop, a limit. In the unit that suits its size: one decimal of us below 0.1
/// ms ("4.2 us"), two of ms below 10 ms ("0.30 ms"), one of ms below 1 s ("312.4 ms"), three
/// of s from 1 s on ("2.003 s"), whole seconds from 100 s ("7200 s"); the unit is chosen by the magnitude, so a negative span reads
/// as its positive one with a minus. "-" when the value is not finite. For a duration that
/// must read back as a setting (a command line, a study file), [`format_duration`].
pub fn format_seconds(s: f64) -> String {
    if !s.is_finite() {
        return "-".into();
    }
    let a = s.abs();
    if a < 1e-4 {
        format!("{:.1} us", s * 1e6)
    } else if a < 0.01 {
        format!("{:.2} ms", s * 1e3)
    } else if a < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else if a < 100.0 {
        format!("{s:.3} s")
    } else {
        format!("{s:.0} s")
    }
}

/// Time elapsed or left in a long command, to the second, as people read a clock: "42 s",
/// "3 min 5 s", "1 h 2 min" (the progress line of app, compare-transports and mesh, and a
/// study's "about ... left"). Not a measured figure: those are [`format_us`] and
/// [`format_seconds`].
pub fn format_clock(secs: f64) -> String {
    let s = if secs.is_finite() && secs > 0.0 {
        secs.round() as u64
    } else {
        0
    };
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_rates_are_whole_requests_per_second_with_decimal_prefixes() {
        assert_eq!(parse_request_rates("5000/s").unwrap(), vec![5000]);
        assert_eq!(
            parse_request_rates("5k,20k,50k,100k").unwrap(),
            vec![5000, 20_000, 50_000, 100_000]
        );
        assert_eq!(parse_request_rates("1.5k/s").unwrap(), vec![1500]);
        assert_eq!(
            parse_request_rates("1k..4k:+1k,2k").unwrap(),
            vec![1000, 2000, 3000, 4000]
        );
        assert_eq!(
            parse_request_rates("1k..8k:*2").unwrap(),
            vec![1000, 2000, 4000, 8000]
        );
        for bad in [
            "",
            "0",
            "1.5",
            "5x",
            "-1",
            "4k..1k:+1k",
            "1k..2k",
            "1..2000:+1",
        ] {
            let e = parse_request_rates(bad).unwrap_err();
            assert!(e.starts_with("invalid request rate"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    use super::*;

    #[test]
    fn one_rate_unit_per_table_chosen_by_its_largest_rate() {
        assert_eq!(RateUnit::for_max(9.99e9), RateUnit::Mbit);
        assert_eq!(RateUnit::for_max(10e9), RateUnit::Gbit);
        assert_eq!(RateUnit::for_max(f64::NAN), RateUnit::Mbit);
        assert_eq!(RateUnit::for_max(f64::INFINITY), RateUnit::Mbit);
        assert_eq!(
            RateUnit::for_rates([1e6, f64::NAN, 40e9, 2e3]),
            RateUnit::Gbit
        );
        assert_eq!(RateUnit::for_rates([]), RateUnit::Mbit);
        assert_eq!(RateUnit::Mbit.name(), "Mbit/s");
        assert_eq!(RateUnit::Gbit.name(), "Gbit/s");
        // Every rate of a Gbit/s table is in Gbit/s, the small ones too.
        assert_eq!(RateUnit::Gbit.format(94.12e9), "94.120");
        assert_eq!(RateUnit::Gbit.format(1e6), "0.001");
        assert_eq!(RateUnit::Mbit.format(95.644e6), "95.64");
        assert_eq!(RateUnit::Mbit.format(95.644e6), mbit(95.644e6));
        assert_eq!(RateUnit::Mbit.format(f64::NAN), "-");
        assert_eq!(RateUnit::Gbit.format_to(12.5e9, 1), "12.5");
        assert_eq!(RateUnit::Gbit.with_unit(9.412e9), "9.412 Gbit/s");
    }

    #[test]
    fn a_clock_reads_to_the_second() {
        assert_eq!(format_clock(0.0), "0 s");
        assert_eq!(format_clock(59.4), "59 s");
        assert_eq!(format_clock(65.0), "1 min 5 s");
        assert_eq!(format_clock(650.0), "10 min 50 s");
        assert_eq!(format_clock(3727.0), "1 h 2 min");
        assert_eq!(format_clock(f64::NAN), "0 s");
    }

    /// Every error must be one line, quote the input and say what is
    /// accepted (recognised by "expected").
    fn assert_err<T: std::fmt::Debug>(r: Result<T, String>, input: &str, reason: &str) {
        let e = r.expect_err(input);
        assert!(!e.contains('\n'), "multi-line error: {e}");
        assert!(e.contains(&format!("{input:?}")), "input not quoted: {e}");
        assert!(e.contains("expected"), "accepted forms missing: {e}");
        assert!(e.contains(reason), "reason {reason:?} missing: {e}");
    }

    #[test]
    fn bytes_plain_and_binary_suffixes() {
        let cases = [
            ("0", 0),
            ("1", 1),
            ("1500", 1500),
            ("64K", 65_536),
            ("64k", 65_536),
            ("64KiB", 65_536),
            ("64kib", 65_536),
            ("1M", 1_048_576),
            ("1m", 1_048_576),
            ("1MiB", 1_048_576),
            ("2G", 2_147_483_648),
            ("2GiB", 2_147_483_648),
            ("2gib", 2_147_483_648),
            (" 8K ", 8192),
            ("8 K", 8192),
            ("007", 7),
            ("18446744073709551615", u64::MAX),
            ("17179869183G", 17_179_869_183 * GIB),
        ];
        for (s, v) in cases {
            assert_eq!(parse_bytes(s), Ok(v), "{s}");
        }
    }

    #[test]
    fn bytes_fractions_only_when_whole() {
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert_eq!(parse_bytes("0.5K"), Ok(512));
        assert_eq!(parse_bytes("1.25M"), Ok(1_310_720));
        assert_eq!(parse_bytes("1.0"), Ok(1));
        assert_eq!(parse_bytes("2.000K"), Ok(2048));
        assert_eq!(parse_bytes("0.0009765625K"), Ok(1)); // 2^-10 K
                                                         // 2^-30 G: 30 fractional digits, one byte.
        assert_eq!(parse_bytes("0.000000000931322574615478515625G"), Ok(1));
        assert_err(parse_bytes("1.3K"), "1.3K", "not a whole number");
        assert_err(parse_bytes("0.5"), "0.5", "not a whole number");
        assert_err(
            parse_bytes("0.0000000009313225746154785156251G"),
            "0.0000000009313225746154785156251G",
            "not a whole number",
        );
        let long = format!("1.{}1K", "0".repeat(60));
        assert_err(parse_bytes(&long), &long, "not a whole number");
    }

    #[test]
    fn bytes_errors() {
        assert_err(parse_bytes(""), "", "empty");
        assert_err(parse_bytes("   "), "   ", "empty");
        assert_err(parse_bytes("-1"), "-1", "negative");
        assert_err(parse_bytes("-64K"), "-64K", "negative");
        assert_err(parse_bytes("K"), "K", "not a number");
        assert_err(parse_bytes(".5K"), ".5K", "not a number");
        assert_err(parse_bytes("1.K"), "1.K", "not a number");
        assert_err(parse_bytes("+1"), "+1", "not a number");
        assert_err(parse_bytes("abc"), "abc", "not a number");
        assert_err(parse_bytes("64KB"), "64KB", "unknown suffix");
        assert_err(parse_bytes("64T"), "64T", "unknown suffix");
        assert_err(parse_bytes("1e3"), "1e3", "unknown suffix");
        assert_err(parse_bytes("1_000"), "1_000", "unknown suffix");
        assert_err(
            parse_bytes("18446744073709551616"),
            "18446744073709551616",
            "too large",
        );
        assert_err(parse_bytes("17179869184G"), "17179869184G", "too large");
        let huge = "9".repeat(50);
        assert_err(parse_bytes(&huge), &huge, "too large");
        assert_err(parse_bytes("1\n2"), "1\n2", "unknown suffix");
    }

    #[test]
    fn size_spec_geometric_powers_of_two() {
        let v = parse_size_spec("1..4M:*2").unwrap();
        assert_eq!(v.len(), 23);
        let expected: Vec<u64> = (0..23).map(|k| 1u64 << k).collect();
        assert_eq!(v, expected);
    }

    #[test]
    fn size_spec_geometric_rounding_and_end() {
        // 1, 1.5, 2.25, 3.375, 5.0625, 7.59375, 11.39 -> 1 2 2 3 5 8 11,
        // then 17.09 > 12 stops; 12 is appended as the last value.
        assert_eq!(
            parse_size_spec("1..12:*1.5"),
            Ok(vec![1, 2, 3, 5, 8, 11, 12])
        );
        // B hit exactly is not repeated.
        assert_eq!(parse_size_spec("3..24:*2"), Ok(vec![3, 6, 12, 24]));
        assert_eq!(parse_size_spec("5..5:*2"), Ok(vec![5]));
        assert_eq!(parse_size_spec("100..150:*2"), Ok(vec![100, 150]));
        // A factor barely above 1 must neither stall nor repeat values.
        assert_eq!(
            parse_size_spec("1..10:*1.000000001"),
            Ok((1..=10).collect::<Vec<u64>>())
        );
        let v = parse_size_spec("1..10M:*1.2").unwrap();
        assert_eq!(v.first(), Some(&1));
        assert_eq!(v.last(), Some(&10_485_760));
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        // 1.2^k rounds to 1 1 2 3 4 5 6 7 9 11 13 15 18 ...; the last power
        // below 10M is 1.2^88 = 9_288_586.98; 84 distinct values plus 10M.
        assert_eq!(v[..12], [1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 15, 18]);
        assert_eq!(v.len(), 85);
        assert_eq!(v[83], 9_288_587);
        // Every value is the rounding of some power, except the appended end.
        for &x in &v[..v.len() - 1] {
            let k = (x as f64).ln() / 1.2f64.ln();
            let near = [k.floor(), k.ceil()]
                .iter()
                .any(|&k| 1.2f64.powf(k).round() as u64 == x);
            assert!(near, "{x} is not a rounded power of 1.2");
        }
        // The whole u64 range with a tiny factor stays bounded.
        assert!(parse_size_spec("1..16777216G:*1.0001").is_err());
        assert_eq!(
            parse_size_spec("1..18446744073709551615:*4294967296"),
            Ok(vec![1, 4_294_967_296, u64::MAX])
        );
    }

    #[test]
    fn size_spec_linear() {
        assert_eq!(
            parse_size_spec("100..400:+100"),
            Ok(vec![100, 200, 300, 400])
        );
        // 350 is not hit, so it is not added.
        assert_eq!(parse_size_spec("100..350:+100"), Ok(vec![100, 200, 300]));
        assert_eq!(parse_size_spec("0..2K:+1K"), Ok(vec![0, 1024, 2048]));
        assert_eq!(parse_size_spec("7..7:+1"), Ok(vec![7]));
        assert_eq!(
            parse_size_spec("18446744073709551614..18446744073709551615:+1"),
            Ok(vec![u64::MAX - 1, u64::MAX])
        );
        assert_eq!(
            parse_size_spec("18446744073709551614..18446744073709551615:+5"),
            Ok(vec![u64::MAX - 1])
        );
    }

    #[test]
    fn size_spec_lists_keep_order_and_drop_duplicates() {
        assert_eq!(
            parse_size_spec("64K, 1..4:*2,2, 1K ,64K,3..5:+1"),
            Ok(vec![65_536, 1, 2, 4, 1024, 3, 5])
        );
        assert_eq!(parse_size_spec("0"), Ok(vec![0]));
    }

    #[test]
    fn size_spec_limit() {
        assert_eq!(parse_size_spec("1..10000:+1").map(|v| v.len()), Ok(10_000));
        assert_err(
            parse_size_spec("1..10001:+1"),
            "1..10001:+1",
            "more than 10000",
        );
        assert_err(parse_size_spec("0..1G:+1"), "0..1G:+1", "more than 10000");
        assert_err(
            parse_size_spec("0..18446744073709551615:+1"),
            "0..18446744073709551615:+1",
            "more than 10000",
        );
        // Two items that fit alone but not together.
        assert_err(
            parse_size_spec("1..6000:+1,10001..16000:+1"),
            "1..6000:+1,10001..16000:+1",
            "more than 10000",
        );
        // Overlapping items count once.
        assert_eq!(
            parse_size_spec("1..6000:+1,1..6000:+1").map(|v| v.len()),
            Ok(6000)
        );
    }

    #[test]
    fn size_spec_errors() {
        let cases = [
            ("", "empty"),
            ("  ", "empty"),
            ("64K,", "empty item"),
            (",64K", "empty item"),
            ("1,,2", "empty item"),
            ("10..1:+1", "range start 10 is above range end 1"),
            ("10..1:*2", "range start 10 is above range end 1"),
            ("1..10:+0", "step must not be 0"),
            ("1..10:*1", "must be greater than 1"),
            ("1..10:*0.5", "must be greater than 1"),
            ("1..10:*1.0", "must be greater than 1"),
            ("0..10:*2", "start at 1"),
            ("1..10:*x", "not a number"),
            ("1..10:*-2", "not a number"),
            ("1..10:*inf", "not a number"),
            ("1..10:*NaN", "not a number"),
            ("1..10:*2x", "not a number"),
            ("1..10", "needs a step"),
            ("1..10:2", "must start with + or *"),
            ("1..10:", "must start with + or *"),
            ("..10:+1", "range start \"\" is empty"),
            ("1..:+1", "range end \"\" is empty"),
            ("1..10:+", "range step \"\" is empty"),
            ("x..10:+1", "not a number"),
            ("1..10:+-1", "negative"),
            ("garbage", "size \"garbage\" is not a number"),
            ("-5", "negative"),
            ("1.3K", "not a whole number"),
        ];
        for (s, reason) in cases {
            assert_err(parse_size_spec(s), s, reason);
        }
    }

    #[test]
    fn perturbation() {
        assert_eq!(perturb(&[1, 8, 16], 3), vec![1, 4, 5, 8, 11, 13, 16, 19]);
        // n - p below 1 is dropped; overlaps merge.
        assert_eq!(perturb(&[2, 4], 2), vec![2, 4, 6]);
        assert_eq!(perturb(&[3], 3), vec![3, 6]);
        assert_eq!(perturb(&[0], 1), vec![0, 1]);
        assert_eq!(perturb(&[u64::MAX], 1), vec![u64::MAX - 1, u64::MAX]);
        assert_eq!(perturb(&[16, 1, 16], 1), vec![1, 2, 15, 16, 17]);
        assert_eq!(perturb(&[16, 1, 16], 0), vec![16, 1, 16]);
        assert_eq!(perturb(&[], 5), Vec::<u64>::new());
    }

    #[test]
    fn durations() {
        let cases = [
            ("10", Duration::from_secs(10)),
            ("0", Duration::ZERO),
            ("1.5s", Duration::from_millis(1500)),
            ("1.5", Duration::from_millis(1500)),
            ("500ms", Duration::from_millis(500)),
            ("200us", Duration::from_micros(200)),
            ("200µs", Duration::from_micros(200)),
            ("7ns", Duration::from_nanos(7)),
            ("2m", Duration::from_secs(120)),
            ("2min", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("0.1s", Duration::from_millis(100)),
            ("0.1", Duration::from_millis(100)),
            ("2.5m", Duration::from_secs(150)),
            ("500 MS", Duration::from_millis(500)),
            (" 3s ", Duration::from_secs(3)),
            ("1.0000000004s", Duration::from_secs(1)),
            ("1.0000000005s", Duration::new(1, 1)),
            ("0.123456789123s", Duration::new(0, 123_456_789)),
            ("1.5ns", Duration::from_nanos(2)),
            ("18446744073709551615", Duration::from_secs(u64::MAX)),
        ];
        for (s, d) in cases {
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
    }

    #[test]
    fn duration_errors() {
        let cases = [
            ("", "empty"),
            ("-1", "negative"),
            ("-0.5s", "negative"),
            ("s", "not a number"),
            ("abc", "not a number"),
            ("inf", "not a number"),
            ("NaN", "not a number"),
            (".5s", "not a number"),
            ("1.s", "not a number"),
            ("1e3", "unknown unit"),
            ("10 days", "unknown unit"),
            ("5x", "unknown unit"),
            ("18446744073709551616", "too long"),
            ("307445734561825861m", "too long"),
        ];
        for (s, reason) in cases {
            assert_err(parse_duration(s), s, reason);
        }
        let huge = "9".repeat(60);
        assert_err(parse_duration(&huge), &huge, "too long");
    }

    #[test]
    fn rates() {
        use Rate::{BitsPerSecond as Bits, PacketsPerSecond as Pps};
        let cases = [
            ("100M", Bits(100e6)),
            ("100m", Bits(100e6)),
            ("1.5G", Bits(1.5e9)),
            ("64k", Bits(64e3)),
            ("64K", Bits(64e3)),
            ("100mbit", Bits(100e6)),
            ("100Mbit", Bits(100e6)),
            ("100Mbps", Bits(100e6)),
            ("100Mb/s", Bits(100e6)),
            ("100 Mbit/s", Bits(100e6)),
            ("1gbit", Bits(1e9)),
            ("2T", Bits(2e12)),
            ("9600", Bits(9600.0)),
            ("9600bps", Bits(9600.0)),
            ("9600bit", Bits(9600.0)),
            ("10000pps", Pps(10_000.0)),
            ("10kpps", Pps(10_000.0)),
            ("10KPPS", Pps(10_000.0)),
            ("1.5Mpps", Pps(1.5e6)),
            ("0.5pps", Pps(0.5)),
        ];
        for (s, r) in cases {
            assert_eq!(parse_rate(s), Ok(r), "{s}");
        }
    }

    #[test]
    fn rate_errors() {
        let cases = [
            ("", "empty"),
            ("0", "zero is meaningless"),
            ("0M", "zero is meaningless"),
            ("0.0pps", "zero is meaningless"),
            ("-5M", "negative"),
            ("M", "not a number"),
            ("fast", "not a number"),
            ("inf", "not a number"),
            ("1e9", "unknown unit"),
            ("100MB", "byte rates"),
            ("100MBps", "byte rates"),
            ("100MB/s", "byte rates"),
            ("100Mbytes", "byte rates"),
            ("100B", "byte rates"),
            ("100Xbit", "unknown unit"),
            ("100Mbitz", "unknown unit"),
            ("100pp", "unknown unit"),
        ];
        for (s, reason) in cases {
            assert_err(parse_rate(s), s, reason);
        }
        let huge = format!("{}T", "9".repeat(400));
        assert_err(parse_rate(&huge), &huge, "too large");
    }

    /// A bare number typed as a rate is refused with the likely meaning, and documents that
    /// hold one still read.
    #[test]
    fn a_typed_rate_needs_a_unit() {
        let e = parse_rate_typed("100").unwrap_err();
        assert!(e.contains("did you mean 100M (100 Mbit/s)?"), "{e}");
        assert!(e.contains("100bit"), "{e}");
        assert!(!e.contains('\n'));
        assert_eq!(parse_rate_typed("100bit"), Ok(Rate::BitsPerSecond(100.0)));
        assert_eq!(parse_rate_typed("100M"), Ok(Rate::BitsPerSecond(100e6)));
        assert_eq!(parse_rate_typed("2.5k"), Ok(Rate::BitsPerSecond(2500.0)));
        assert_eq!(parse_rate("100"), Ok(Rate::BitsPerSecond(100.0)));
    }

    #[test]
    fn percents() {
        assert_eq!(parse_percent("2%"), Ok(0.02));
        assert_eq!(parse_percent("2"), Ok(0.02));
        assert_eq!(parse_percent(" 2 % "), Ok(0.02));
        assert_eq!(parse_percent("0.5%"), Ok(0.005));
        assert_eq!(parse_percent("99.9"), Ok(0.999));
        let cases = [
            ("", "empty"),
            ("0", "out of range"),
            ("0%", "out of range"),
            ("100", "out of range"),
            ("100%", "out of range"),
            ("150%", "out of range"),
            // Below 100, but the fraction rounds to exactly 1.0.
            ("99.99999999999999999999", "out of range"),
            ("-2%", "negative"),
            ("%", "not a number"),
            ("two", "not a number"),
            ("nan", "not a number"),
            ("2%%", "unexpected text"),
            ("2x", "unexpected text"),
        ];
        for (s, reason) in cases {
            assert_err(parse_percent(s), s, reason);
        }
    }

    #[test]
    fn formatting() {
        let cases = [
            (0, "0"),
            (1, "1"),
            (1000, "1000"),
            (1024, "1K"),
            (1536, "1536"),
            (65_536, "64K"),
            (1_048_576, "1M"),
            (1_049_600, "1025K"),
            (4_194_304, "4M"),
            (GIB, "1G"),
            (3 * GIB + MIB, "3073M"),
            (1 << 40, "1024G"),
            (u64::MAX, "18446744073709551615"),
        ];
        for (n, s) in cases {
            assert_eq!(format_bytes(n), s);
            assert_eq!(parse_bytes(s), Ok(n), "round trip of {s}");
        }
    }

    /// A rate prints as the shortest text that reads back as exactly the same rate, and JSON
    /// carries that text.
    #[test]
    fn rates_print_as_they_are_typed_and_read_back_exactly() {
        for (text, shown) in [
            ("100M", "100M"),
            ("100mbit", "100M"),
            ("1.5G", "1.5G"),
            ("2500", "2.5k"),
            ("10kpps", "10kpps"),
            ("1", "1"),
            ("0.5", "0.5"),
            ("123456789", "123.456789M"),
            ("1T", "1T"),
        ] {
            let r = parse_rate(text).unwrap();
            assert_eq!(r.to_string(), shown, "{text}");
            assert_eq!(parse_rate(shown).unwrap(), r);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{shown}\""));
            assert_eq!(serde_json::from_str::<Rate>(&json).unwrap(), r);
        }
        assert!(serde_json::from_str::<Rate>("\"10MB/s\"").is_err());
    }

    #[test]
    fn durations_print_in_their_largest_exact_unit_and_read_back() {
        for (d, text) in [
            (Duration::from_secs(10), "10s"),
            (Duration::from_millis(200), "200ms"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_micros(3), "3us"),
            (Duration::ZERO, "0ns"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }

    /// A latency as text is the table's number and " us" at every size; a span takes the
    /// unit that suits its size; neither prints NaN or inf.
    #[test]
    fn time_formatters_give_their_unit_at_every_size() {
        for (ns, text) in [
            (0.0, "0.00 us"),
            (0.4, "0.00 us"),
            (5.0, "0.01 us"),
            (999.0, "1.00 us"),
            (43_471.0, "43.47 us"),
            (1_500_000.0, "1500.00 us"),
            (2.5e12, "2500000000.00 us"),
            (-1_234.0, "-1.23 us"),
        ] {
            assert_eq!(format_us(ns), text, "{ns}");
            assert_eq!(format!("{} us", us(ns)), text, "{ns}");
        }
        for (s, text) in [
            (0.0, "0.0 us"),
            (4.2e-9, "0.0 us"),
            (4.2e-6, "4.2 us"),
            (99.9e-6, "99.9 us"),
            (1e-4, "0.10 ms"),
            (3e-4, "0.30 ms"),
            (9.9e-3, "9.90 ms"),
            (0.01, "10.0 ms"),
            (0.3124, "312.4 ms"),
            (0.996, "996.0 ms"),
            (1.0, "1.000 s"),
            (2.003, "2.003 s"),
            (99.9994, "99.999 s"),
            (100.0, "100 s"),
            (7200.0, "7200 s"),
            (3.0e9, "3000000000 s"),
            (-0.25, "-250.0 ms"),
            (-2.0, "-2.000 s"),
        ] {
            assert_eq!(format_seconds(s), text, "{s}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(format_us(v), "-");
            assert_eq!(format_seconds(v), "-");
        }
    }

    #[test]
    fn display_units_pick_one_prefix_for_a_figure() {
        let u = DisplayUnit::for_values("bit/s", 9.41e9);
        assert_eq!((u.divisor, u.name.as_str()), (1e9, "Gbit/s"));
        assert_eq!(u.number(9.4123e9, 3), "9.41");
        assert_eq!(u.number(0.5e9, 3), "0.5");
        assert_eq!(DisplayUnit::for_values("bit/s", 999.0).name, "bit/s");
        assert_eq!(DisplayUnit::for_values("ns", 25_300.0).name, "µs");
        assert_eq!(DisplayUnit::for_values("ns", 2.5e6).name, "ms");
        assert_eq!(DisplayUnit::for_values("ns", f64::NAN).name, "ns");
        assert_eq!(DisplayUnit::for_values("1/s", 2e6).name, "1/s");
        for (v, d, s) in [
            (9.996, 3, "10"),
            (1234.5, 3, "1230"),
            (0.012345, 2, "0.012"),
            (-42.0, 3, "-42"),
            (0.0, 3, "0"),
            (2e9, 3, "2.00e9"),
            (f64::INFINITY, 3, "-"),
        ] {
            assert_eq!(format_significant(v, d), s, "{v}");
        }
    }
}
