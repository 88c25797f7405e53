//! The endpoint a TLS server announces over the control connection: `PORT/sha256=HEX`, its
//! data port and the SHA-256 of its certificate, which a client without `--tls-ca` pins.

use anyhow::{anyhow, Result};

use super::hex;

/// What the server announces: its data port and its certificate's fingerprint.
pub(in crate::transport) fn format_endpoint(port: u16, fingerprint: &[u8; 32]) -> String {
    format!("{port}/sha256={}", hex(fingerprint))
}

/// Parses `PORT/sha256=HEX` (64 hex digits) that a `transport` server announced.
pub(in crate::transport) fn parse_endpoint(transport: &str, s: &str) -> Result<(u16, [u8; 32])> {
    let bad = || {
        let shown: String = s.chars().take(100).collect();
        anyhow!(
            "the server announced a bad {transport} endpoint '{}' (expected PORT/sha256=HEX, 64 hex digits)",
            shown.escape_debug()
        )
    };
    let (port, rest) = s.split_once('/').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if port == 0 {
        return Err(bad());
    }
    let digits = rest.strip_prefix("sha256=").ok_or_else(bad)?;
    if digits.len() != 64 || !digits.is_ascii() {
        return Err(bad());
    }
    let mut fp = [0u8; 32];
    for (i, b) in fp.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok((port, fp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_round_trips() {
        let fp: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        let s = format_endpoint(4433, &fp);
        assert_eq!(parse_endpoint("QUIC", &s).unwrap(), (4433, fp));
        // Upper-case hex digits are fine too.
        assert_eq!(
            parse_endpoint("QUIC", &s.to_uppercase().replace("SHA", "sha"))
                .unwrap()
                .1,
            fp
        );
    }

    #[test]
    fn bad_endpoints_are_one_line_errors() {
        let good_hex = "ab".repeat(32);
        for bad in [
            String::new(),
            "4433".to_owned(),
            format!("4433/{good_hex}"),
            format!("4433/sha1={good_hex}"),
            format!("0/sha256={good_hex}"),
            format!("70000/sha256={good_hex}"),
            format!("port/sha256={good_hex}"),
            "4433/sha256=abcd".to_owned(),
            format!("4433/sha256={}", "zz".repeat(32)),
            format!("4433/sha256={good_hex}00"),
            format!("4433/sha256={}é", "ab".repeat(31)),
            "4433/sha256=\nab".to_owned(),
        ] {
            let e = parse_endpoint("QUIC", &bad).expect_err(&bad);
            let msg = format!("{e:#}");
            assert!(!msg.contains('\n'), "{msg}");
            assert!(msg.contains("PORT/sha256=HEX"), "{msg}");
        }
    }
}
