//! The table of `wirebench compare-transports`: t0, r_max, n_1/2 and overhead per transport.

use crate::model::transports::{Comparison, Estimate};
use crate::text::table::{comment, units_line, Column, Style, Table};
use crate::units::{format_seconds, format_us, RateUnit};

/// A mean with its interval, after `prefix` (">=" for a lower bound, "~" for an estimate).
fn with_ci(e: &Option<Estimate>, scale: f64, decimals: usize, prefix: &str) -> String {
    match e {
        None => "-".into(),
        Some(e) => match e.ci_half_width {
            Some(h) => format!(
                "{prefix}{:.*} ±{:.*}",
                decimals,
                e.mean * scale,
                decimals,
                h * scale
            ),
            None => format!("{prefix}{:.*}", decimals, e.mean * scale),
        },
    }
}

/// The one rate unit of the whole view: the table's r_max and the fits' r_inf under it.
fn rate_unit(c: &Comparison) -> RateUnit {
    RateUnit::for_rates(c.transports.iter().flat_map(|r| {
        [
            r.r_max_bits_per_s.as_ref().map(|e| e.mean),
            r.fit_r_inf_bits_per_s.filter(|_| r.fit_valid),
        ]
        .into_iter()
        .flatten()
    }))
}

/// The row's layer, and the server or relay it went through when not the comparison's.
fn layer_text(r: &crate::model::transports::TransportRow) -> String {
    match &r.via {
        Some(v) => format!("{} via {v}", r.layer),
        None => r.layer.clone(),
    }
}

/// The others of the t0 group `entry` belongs to, when it shares it.
fn group_of<'a>(order: &'a [Vec<String>], entry: &str) -> Option<Vec<&'a str>> {
    let g = order.iter().find(|g| g.iter().any(|e| e == entry))?;
    (g.len() > 1).then(|| {
        g.iter()
            .filter(|e| *e != entry)
            .map(String::as_str)
            .collect()
    })
}

/// The view `compare-transports` prints: what was measured and the units, the table, then the
/// overhead's definition, the notes and each transport's fit.
pub fn format(c: &Comparison, style: Style) -> String {
    let unit = rate_unit(c);
    let rate_scale = match unit {
        RateUnit::Mbit => 1e-6,
        RateUnit::Gbit => 1e-9,
    };
    let mut out = comment(
        style,
        &format!(
            "wirebench compare-transports: ping-pong size sweep per transport, {} per size, {} run(s) interleaved; server {}",
            format_seconds(c.duration_per_size_ns as f64 / 1e9),
            c.runs,
            c.server.as_deref().unwrap_or("self-hosted on loopback")
        ),
    );
    out.push_str(&units_line(
        style,
        &format!(
            "times in us, rates in {} (10^{} bit/s), sizes in bytes",
            unit.name(),
            if unit == RateUnit::Gbit { 9 } else { 6 }
        ),
    ));
    out.push_str(&comment(
        style,
        "t0 = one-way time (RTT/2) of the smallest message; r_max = highest throughput, size / one-way time; n_1/2 = size reaching r_max/2",
    ));
    out.push_str(&comment(
        style,
        &format!(
            "± = {:.0}% confidence interval {}",
            c.confidence * 100.0,
            if c.runs > 1 {
                "of the mean over runs"
            } else {
                "within the single run (n_1/2 has none)"
            }
        ),
    ));
    let mut t = Table::new(vec![
        Column::left("transport"),
        Column::left("layer"),
        Column::right("t0(us)"),
        Column::right(format!("r_max({})", unit.name())),
        Column::right("at(B)"),
        Column::right("n_1/2(B)"),
        Column::right("t0 extra(us)"),
        Column::right("t0 x"),
        Column::right("r_max x"),
    ]);
    for r in &c.transports {
        if let Some(e) = &r.error {
            t.row([r.entry.clone(), r.layer.clone()]);
            t.note(format!("error: {e}"));
            continue;
        }
        let (extra, t0x, rx) = match &r.overhead {
            Some(o) if Some(&r.entry) == c.baseline.as_ref() => (
                "baseline".to_string(),
                format!("{:.2}", o.t0_ratio),
                format!("{:.2}", o.r_max_ratio),
            ),
            Some(o) => (
                // A sign on every difference: `{:+}` does not give one to text. The column is
                // in us: the number alone.
                format!(
                    "{}{}",
                    if o.t0_extra_ns > 0.0 { "+" } else { "" },
                    crate::units::us(o.t0_extra_ns)
                ),
                format!("{:.2}", o.t0_ratio),
                format!("{:.2}", o.r_max_ratio),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (bound, estimate) = if r.r_max_at_largest {
            (">=", "~")
        } else {
            ("", "")
        };
        t.row([
            r.entry.clone(),
            layer_text(r),
            with_ci(&r.t0_ns, 1e-3, 2, ""),
            with_ci(&r.r_max_bits_per_s, rate_scale, unit.decimals(), bound),
            r.r_max_size
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
            with_ci(&r.n_half_bytes, 1.0, 0, estimate),
            extra,
            t0x,
            rx,
        ]);
        if let Some(g) = group_of(&c.t0_order, &r.entry) {
            t.note(format!(
                "t0 within noise of {} (intervals overlap): not ranked",
                g.join(", ")
            ));
        }
    }
    out.push_str(&t.render(style));
    if style == Style::Markdown {
        out.push('\n');
    }
    if let Some(b) = &c.baseline {
        out.push_str(&comment(
            style,
            &format!(
                "overhead against {b}: t0 extra = t0 - t0({b}); t0 x and r_max x = ratios to {b}'s figures"
            ),
        ));
    }
    for (what, order, sep) in [
        ("t0, lowest first", &c.t0_order, " < "),
        ("r_max, highest first", &c.r_max_order, " > "),
    ] {
        if order.len() + order.iter().map(|g| g.len() - 1).sum::<usize>() > 1 {
            out.push_str(&comment(
                style,
                &format!(
                    "order by {what}: {} (= within noise: {:.0}% intervals overlap; entries without an interval left out)",
                    order.iter().map(|g| g.join(" = ")).collect::<Vec<_>>().join(sep),
                    c.confidence * 100.0
                ),
            ));
        }
    }
    for r in &c.transports {
        let Some(ser) = &r.serialisation else {
            continue;
        };
        let pct = |e: &Option<Estimate>| match e {
            Some(e) => with_ci(&Some(e.clone()), 100.0, 1, "") + "%",
            None => "-".into(),
        };
        out.push_str(&comment(
            style,
            &format!(
                "{} serialisation ({}): {} of the round trip at {} B, {} at {} B (client encode + server decode + server encode + client decode over the mean round trip, warm-up included)",
                r.entry,
                ser.encoding.name(),
                pct(&ser.at_smallest),
                ser.smallest_size,
                pct(&ser.at_largest),
                ser.largest_size
            ),
        ));
    }
    for r in &c.transports {
        if let Some(note) = &r.r_max_note {
            out.push_str(&comment(style, &format!("{} >= and ~: {note}", r.entry)));
        }
    }
    for r in &c.transports {
        if r.error.is_some() {
            continue;
        }
        let sizes = format!(
            "sizes {}..{} B",
            r.sizes.first().copied().unwrap_or(0),
            r.sizes.last().copied().unwrap_or(0)
        );
        let line = match (r.fit_valid, r.fit_t0_ns, r.fit_r_inf_bits_per_s) {
            (true, Some(t0), Some(ri)) => format!(
                "{} fit t(n) = t0 + n/r_inf: t0 = {}, r_inf = {}, {sizes}",
                r.entry,
                format_us(t0),
                unit.with_unit(ri),
            ),
            _ => format!(
                "{} fit t(n) = t0 + n/r_inf, {sizes}: no valid fit: {}",
                r.entry,
                r.fit_invalid_reason.as_deref().unwrap_or("no fit")
            ),
        };
        out.push_str(&comment(style, &line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transports::{Overhead, TransportRow};
    use crate::text::table::{check_aligned, Align};
    use crate::transport::TransportKind;

    fn est(mean: f64, h: Option<f64>) -> Option<Estimate> {
        Some(Estimate {
            mean,
            ci_half_width: h,
            runs: 3,
        })
    }

    fn row(kind: TransportKind, layer: &str, t0: f64, rate: f64) -> TransportRow {
        TransportRow {
            entry: kind.name().to_owned(),
            via: None,
            transport: kind,
            layer: layer.into(),
            saved_runs: vec![],
            sizes: vec![1, 1 << 20],
            t0_ns: est(t0, Some(t0 / 100.0)),
            t0_size: Some(1),
            r_max_bits_per_s: est(rate, Some(rate / 50.0)),
            r_max_size: Some(1 << 20),
            n_half_bytes: est(65536.0, None),
            r_max_at_largest: false,
            r_max_note: None,
            fit_t0_ns: Some(t0),
            fit_r_inf_bits_per_s: Some(rate * 1.1),
            fit_valid: true,
            fit_invalid_reason: None,
            overhead: Some(Overhead {
                t0_extra_ns: 1234.5,
                t0_ratio: 1.5,
                r_max_ratio: 0.25,
                n_half_ratio: None,
            }),
            error: None,
            serialisation: None,
        }
    }

    fn comparison(rows: Vec<TransportRow>) -> Comparison {
        Comparison {
            schema: "wirebench.compare-transports",
            schema_version: 1,
            server: None,
            duration_per_size_ns: 200_000_000,
            runs: 3,
            confidence: 0.95,
            baseline: Some("tcp".into()),
            transports: rows,
            t0_order: Vec::new(),
            r_max_order: Vec::new(),
            client_environment: Default::default(),
        }
    }

    fn awkward() -> Comparison {
        let mut tcp = row(TransportKind::Tcp, "IP byte stream", 12_345.0, 94e9);
        tcp.r_max_at_largest = true;
        tcp.r_max_note = Some("the largest size still gained".into());
        let mptcp = row(
            TransportKind::Mptcp,
            "multipath IP byte stream, a 40-char name",
            0.4,
            1.5e3,
        );
        let mut udp = row(TransportKind::Udp, "IP datagrams", 9.9e12, 123e6);
        udp.overhead = None;
        udp.n_half_bytes = None;
        udp.fit_valid = false;
        udp.fit_invalid_reason = Some("too few sizes".into());
        let mut raw = row(TransportKind::Raw, "Ethernet frames (naïve)", 1.0, 1.0);
        raw.error = Some("needs root (CAP_NET_RAW)".into());
        comparison(vec![tcp, mptcp, udp, raw])
    }

    /// The table's lines: from its header to the first comment after it.
    fn table_lines(text: &str) -> String {
        text.lines()
            .skip_while(|l| l.starts_with('#'))
            .take_while(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn columns_align_whatever_the_names_and_figures() {
        let text = format(&awkward(), Style::Plain);
        let table = table_lines(&text);
        let aligns = [
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ];
        assert_eq!(check_aligned(&table, &aligns, "  error"), Ok(()), "{text}");
        assert_eq!(table.lines().count(), 6, "{text}");
        // One rate unit for the whole view, chosen by its largest rate (94 Gbit/s).
        assert!(
            text.contains("# units: times in us, rates in Gbit/s"),
            "{text}"
        );
        assert!(table
            .lines()
            .next()
            .is_some_and(|h| h.contains("r_max(Gbit/s)")));
        assert!(text.contains("r_inf = 103.400 Gbit/s"), "{text}");
        assert!(!text.contains("MB/s"), "{text}");
        assert!(text.contains("tcp        IP byte stream"), "{text}");
        assert!(text.contains("  error: needs root"), "{text}");
    }

    /// Entries within noise of each other say so beside their row and in the order line; a
    /// routed entry names its relay.
    #[test]
    fn entries_within_noise_are_said_to_be_and_routes_are_named() {
        let mut routed = row(TransportKind::Tcp, "IP byte stream", 40_000.0, 2e9);
        routed.entry = "routed".into();
        routed.via = Some("10.9.0.3:5301".into());
        let mut c = comparison(vec![
            row(TransportKind::Raw, "Ethernet frames", 10_000.0, 1e9),
            row(TransportKind::Udp, "IP datagrams", 10_050.0, 1e9),
            row(TransportKind::Tcp, "IP byte stream", 12_345.0, 3e9),
            routed,
        ]);
        c.t0_order = vec![
            vec!["raw".into(), "udp".into()],
            vec!["tcp".into()],
            vec!["routed".into()],
        ];
        c.r_max_order = vec![
            vec!["tcp".into()],
            vec!["routed".into()],
            vec!["raw".into(), "udp".into()],
        ];
        let text = format(&c, Style::Plain);
        assert!(
            text.contains("  t0 within noise of udp (intervals overlap): not ranked"),
            "{text}"
        );
        assert!(text.contains("  t0 within noise of raw"), "{text}");
        assert!(
            text.contains("# order by t0, lowest first: raw = udp < tcp < routed (= within noise"),
            "{text}"
        );
        assert!(
            text.contains("# order by r_max, highest first: tcp > routed > raw = udp"),
            "{text}"
        );
        assert!(text.contains("IP byte stream via 10.9.0.3:5301"), "{text}");
        assert!(text.contains("routed fit t(n)"), "{text}");
        assert!(!text.contains("serialisation"), "{text}");
        let mut g = row(TransportKind::Grpc, "RPC", 50_000.0, 1e9);
        g.entry = "grpc/doubles".into();
        g.serialisation = Some(crate::model::transports::SerialisationShare {
            encoding: crate::model::vocab::Encoding::Doubles,
            smallest_size: 1,
            at_smallest: est(0.021, Some(0.003)),
            largest_size: 1 << 20,
            at_largest: est(0.35, None),
        });
        let text = format(&comparison(vec![g]), Style::Plain);
        assert!(
            text.contains("# grpc/doubles serialisation (doubles): 2.1 ±0.3% of the round trip at 1 B, 35.0% at 1048576 B"),
            "{text}"
        );
        let table = table_lines(&text);
        let aligns = [
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ];
        assert_eq!(
            check_aligned(&table, &aligns, "  t0 within"),
            Ok(()),
            "{text}"
        );
    }

    #[test]
    fn rates_are_in_mbit_s_below_ten_gbit_s() {
        // The fit's r_inf (9.9 Gbit/s) counts too: still below 10 Gbit/s.
        let c = comparison(vec![row(
            TransportKind::Tcp,
            "IP byte stream",
            20_000.0,
            9e9,
        )]);
        let text = format(&c, Style::Plain);
        assert!(text.contains("r_max(Mbit/s)"), "{text}");
        assert!(text.contains("9000.00 ±180.00"), "{text}");
        assert!(text.contains("r_inf = 9900.00 Mbit/s"), "{text}");
        assert!(
            text.contains("# units: times in us, rates in Mbit/s"),
            "{text}"
        );
    }

    #[test]
    fn markdown_rows_have_as_many_cells_as_the_header() {
        let text = format(&awkward(), Style::Markdown);
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 6, "{text}");
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{text}");
        assert!(!text.lines().any(|l| l.starts_with('#')), "{text}");
        assert!(text.contains("units: times in us"), "{text}");
    }
}
