//! The two text formats a scrape may ask for: OpenMetrics 1.0 when its Accept header names
//! it (Prometheus's own scrapes do), and otherwise the Prometheus text format 0.0.4, which
//! every scraper reads. Both are the client crate's encoders: the 0.0.4 one writes no
//! `# UNIT` and no `# EOF`, names counters with their `_total` in `# HELP`/`# TYPE`, and
//! types an info metric as a gauge named with its `_info`.

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The format a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// From the scrape's Accept header: OpenMetrics when it lists
    /// `application/openmetrics-text` with a non-zero quality, else the text format.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let wants = accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        });
        if wants {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT,
            Format::OpenMetrics => OPENMETRICS,
        }
    }
}

/// The registry's families in `format`.
pub fn encode(registry: &Registry, format: Format) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    match format {
        Format::Text => prometheus_text::encode(&mut out, registry)?,
        Format::OpenMetrics => text::encode(&mut out, registry)?,
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::info::Info;
    use prometheus_client::registry::Unit;

    use super::*;

    /// A counter with a unit, a gauge and an info metric.
    fn small() -> Registry {
        let mut r = Registry::default();
        let c: Counter = Counter::default();
        c.inc_by(3);
        r.register_with_unit("wb_moved", "Bytes moved", Unit::Bytes, c);
        let g: Gauge = Gauge::default();
        g.set(2);
        r.register("wb_open", "Open now", g);
        r.register("wb_build", "The build", Info::new(vec![("version", "1.2")]));
        r
    }

    #[test]
    fn the_text_format_has_no_unit_no_eof_and_names_counters_and_info_in_full() {
        assert_eq!(
            encode(&small(), Format::Text).unwrap(),
            "# HELP wb_moved_bytes_total Bytes moved.\n\
             # TYPE wb_moved_bytes_total counter\n\
             wb_moved_bytes_total 3\n\
             # HELP wb_open Open now.\n\
             # TYPE wb_open gauge\n\
             wb_open 2\n\
             # HELP wb_build_info The build.\n\
             # TYPE wb_build_info gauge\n\
             wb_build_info{version=\"1.2\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_has_units_family_names_and_eof() {
        assert_eq!(
            encode(&small(), Format::OpenMetrics).unwrap(),
            "# HELP wb_moved_bytes Bytes moved.\n\
             # TYPE wb_moved_bytes counter\n\
             # UNIT wb_moved_bytes bytes\n\
             wb_moved_bytes_total 3\n\
             # HELP wb_open Open now.\n\
             # TYPE wb_open gauge\n\
             wb_open 2\n\
             # HELP wb_build The build.\n\
             # TYPE wb_build info\n\
             wb_build_info{version=\"1.2\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn openmetrics_only_when_the_accept_header_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("Application/OpenMetrics-Text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Format::Text
        );
    }

    /// promtool (Debian's `prometheus` package) parses and lints every family in the text
    /// format (`check metrics` reads only that format; the OpenMetrics encoder is pinned by
    /// the exact test above).
    #[test]
    fn promtool_accepts_every_family_in_the_text_format() {
        let Some(promtool) = crate::test_support::require_program(
            "/usr/bin/promtool",
            "needs promtool (apt-get install prometheus)",
        ) else {
            return;
        };
        let registry = crate::metrics::families::tests::sample().registry();
        let format = Format::Text;
        let body = encode(&registry, format).unwrap();
        let mut child = std::process::Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool on {format:?}: {}{}\n{body}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
