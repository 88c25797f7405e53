//! `/probe?target=T&module=M`, as Prometheus's blackbox exporter answers it: the parameters
//! checked (a bad request is a 400), then one run through the source, timed; a failed run is
//! still an answer (`wirebench_probe_success 0`), so that the scrape itself succeeds and the
//! failure is a value Prometheus keeps.

use std::time::Instant;

use super::families::{Exposed, ProbeOutcome};
use super::MetricsSource;

/// The longest target or module name taken (a target's name or HOST:PORT; a test's name).
const MAX_PARAMETER: usize = 256;

/// The (target, module) of a probe's query string, or one line saying what is wrong with it.
pub fn parameters(query: &str) -> Result<(String, String), String> {
    let (mut target, mut module) = (None, None);
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        let value = decode(value).ok_or_else(|| format!("{key}: not a valid URL-encoded value"))?;
        match key {
            "target" => target = Some(value),
            "module" => module = Some(value),
            // Scrapers add their own parameters; they are not ours to refuse.
            _ => {}
        }
    }
    let check = |name: &str, v: Option<String>| -> Result<String, String> {
        match v {
            None => Err(format!("missing parameter: {name}")),
            Some(v) if v.is_empty() => Err(format!("empty parameter: {name}")),
            Some(v) if v.len() > MAX_PARAMETER => {
                Err(format!("{name}: longer than {MAX_PARAMETER} bytes"))
            }
            Some(v) if v.chars().any(char::is_control) => {
                Err(format!("{name}: contains a control character"))
            }
            Some(v) => Ok(v),
        }
    };
    Ok((check("target", target)?, check("module", module)?))
}

/// Percent-decoding of a query value (`+` is a space); None when it is malformed or not
/// UTF-8.
fn decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            _ => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

/// Runs the probe: its test's families and the outcome, success or not. A failure's reason
/// goes to stderr (the metrics carry only that it failed).
pub fn run(source: &dyn MetricsSource, target: &str, module: &str) -> Exposed {
    let start = Instant::now();
    let result = source.probe(target, module);
    let duration_s = start.elapsed().as_secs_f64();
    let success = result.is_ok();
    let tests = match result {
        Ok(state) => vec![state],
        Err(why) => {
            eprintln!(
                "wirebench metrics: probe of {} with {} failed: {}",
                target.escape_debug(),
                module.escape_debug(),
                why.escape_debug()
            );
            Vec::new()
        }
    };
    Exposed {
        tests,
        probe: Some(ProbeOutcome {
            success,
            duration_s,
        }),
        ..Exposed::default()
    }
}
