//! `/probe?target=T&module=M`, as Prometheus's blackbox exporter answers it: the parameters
//! checked (a bad request is a 400), then one run through the source, timed; a failed run is
//! still an answer (`wirebench_probe_success 0`), so that the scrape itself succeeds and the
//! failure is a value Prometheus keeps.

use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// At most one line about failed probes on stderr this often: a scraper that asks for
/// failing probes as fast as it can must not fill a log.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The longest reason a log line carries.
const MAX_REASON: usize = 200;

/// When a failure was last written, and how many were left out since.
static LOGGED: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));

/// The log line for a failed probe now, or None when one was written within [`LOG_EVERY`]
/// (that one is then counted, and the next line says how many were left out).
fn failure_line(now: Instant, target: &str, module: &str, why: &str) -> Option<String> {
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    if logged.0.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
        logged.1 += 1;
        return None;
    }
    let left_out = std::mem::take(&mut logged.1);
    logged.0 = Some(now);
    let short = |s: &str| -> String {
        let s = crate::text::printable(s);
        match s.char_indices().nth(MAX_REASON) {
            Some((i, _)) => format!("{}...", &s[..i]),
            None => s.into_owned(),
        }
    };
    let more = if left_out > 0 {
        format!(" ({left_out} more failed probe(s) since the last line)")
    } else {
        String::new()
    };
    Some(format!(
        "wirebench metrics: probe of {} with {} failed: {}{more}",
        short(target),
        short(module),
        short(why)
    ))
}

/// Runs the probe: its test's families and the outcome, success or not. A failure's reason
/// goes to stderr, at most one line per [`LOG_EVERY`] (the metrics carry only that it
/// failed).
pub fn run(source: &dyn MetricsSource, target: &str, module: &str) -> Exposed {
    let start = Instant::now();
    let result = source.probe(target, module);
    let duration_s = start.elapsed().as_secs_f64();
    let success = result.is_ok();
    let tests = match result {
        Ok(state) => vec![state],
        Err(why) => {
            if let Some(line) = failure_line(Instant::now(), target, module, &why) {
                eprintln!("{line}");
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood of failing probes writes one line per interval, short and printable, and the
    /// next line counts what was left out.
    #[test]
    fn failed_probes_log_one_short_line_per_interval() {
        let t0 = Instant::now();
        let long = "x".repeat(10_000);
        let first = failure_line(t0, "a\u{1b}[2J", "m", &long);
        // Another test may have logged first within the interval; that is the same rule.
        let written = first.iter().count();
        for i in 1..1000u64 {
            assert!(failure_line(t0 + Duration::from_millis(i), "a", "m", "no").is_none());
        }
        let next = failure_line(t0 + LOG_EVERY + Duration::from_secs(1), "a", "m", "no")
            .expect("a line after the interval");
        assert!(
            next.contains("more failed probe(s) since the last line"),
            "{next}"
        );
        if let Some(first) = first {
            assert!(first.len() < 3 * MAX_REASON, "{}", first.len());
            assert!(!first.contains('\u{1b}'), "{first}");
            // 999 left out here, more if another test's probe failed meanwhile.
            let n: u64 = next
                .rsplit_once(" (")
                .and_then(|(_, r)| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            assert!(n >= 999, "{next}");
        }
        assert!(written <= 1);
    }
}
