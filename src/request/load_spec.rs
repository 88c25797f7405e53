//! `--load SPEC`: what background load runs beside a measured test, parsed once where the
//! request is made and written back as the same text in request documents.

use crate::units::Rate;

/// Most TCP load streams one `--load tcp:N` may ask for: far above what a bottleneck needs
/// to be full, low enough that a typo (`tcp:1000`) is caught.
pub const MAX_LOAD_STREAMS: u32 = 128;

/// The background load of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadSpec {
    /// `udp:RATE`: UDP datagrams held at this payload rate (bit/s) by closed-loop pacing.
    Udp(f64),
    /// `tcp:N`: N TCP streams, as fast as the path lets them.
    Tcp(u32),
    /// `UTIL%`: UDP at this share (0 to 1) of the lab link's rate a->b; resolved into
    /// [`LoadSpec::Udp`] once the link is known.
    Utilisation(f64),
}

const ACCEPTED: &str =
    "expected udp:RATE (udp:30M), tcp:N (tcp:4) or a share of the lab link's rate (30%)";

impl std::str::FromStr for LoadSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<LoadSpec, String> {
        let t = s.trim();
        let err = |why: String| format!("invalid load {s:?}: {why}; {ACCEPTED}");
        if let Some(rate) = t.strip_prefix("udp:") {
            return match crate::units::parse_rate(rate).map_err(err)? {
                Rate::BitsPerSecond(b) => Ok(LoadSpec::Udp(b)),
                Rate::PacketsPerSecond(_) => {
                    Err(err("give the UDP load in bits per second".into()))
                }
            };
        }
        if let Some(n) = t.strip_prefix("tcp:") {
            let n: u32 = n
                .parse()
                .map_err(|_| err(format!("{n:?} is not a number of streams")))?;
            if n == 0 || n > MAX_LOAD_STREAMS {
                return Err(err(format!("1 to {MAX_LOAD_STREAMS} TCP streams")));
            }
            return Ok(LoadSpec::Tcp(n));
        }
        if t.ends_with('%') {
            let share = crate::units::parse_percent(t).map_err(err)?;
            if !(share > 0.0 && share < 1.0) {
                return Err(err("a share above 0% and below 100%".into()));
            }
            return Ok(LoadSpec::Utilisation(share));
        }
        Err(err("unknown form".into()))
    }
}

impl std::fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LoadSpec::Udp(b) => write!(f, "udp:{}", Rate::BitsPerSecond(b)),
            LoadSpec::Tcp(n) => write!(f, "tcp:{n}"),
            // Shares are written with enough digits to read back exactly.
            LoadSpec::Utilisation(s) => write!(f, "{}%", s * 100.0),
        }
    }
}

impl serde::Serialize for LoadSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for LoadSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LoadSpec, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_parse_and_print_back() {
        for (text, spec) in [
            ("udp:30M", LoadSpec::Udp(30e6)),
            ("tcp:4", LoadSpec::Tcp(4)),
            ("30%", LoadSpec::Utilisation(0.3)),
        ] {
            let parsed: LoadSpec = text.parse().unwrap();
            assert_eq!(parsed, spec, "{text}");
            assert_eq!(parsed.to_string(), text);
            let json = serde_json::to_string(&parsed).unwrap();
            assert_eq!(serde_json::from_str::<LoadSpec>(&json).unwrap(), spec);
        }
    }

    #[test]
    fn bad_loads_are_one_line_errors() {
        for bad in [
            "udp:",
            "udp:10kpps",
            "udp:10MB",
            "tcp:0",
            "tcp:x",
            "tcp:1000",
            "0%",
            "100%",
            "150%",
            "30",
            "quic:1",
        ] {
            let e = bad.parse::<LoadSpec>().unwrap_err();
            assert!(e.starts_with("invalid load"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }
}
