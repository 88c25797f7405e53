//! Tests that every legend entry of a drawn line chart shows the stroke (colour, width, dash
//! pattern, marker) of a series drawn in the chart, read back from the SVG.

use super::figure::{
    Axis, Band, Chart, ErrorBars, Figure, HLine, LegendAt, Line, Scale, StyleKey, Ticks,
};
use super::svg::render_svg;

/// An SVG element's attribute, if it has it.
fn attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let from = element.find(&key)? + key.len();
    let len = element[from..].find('"')?;
    Some(&element[from..from + len])
}

/// What a line's look is made of: stroke colour, width and dash pattern.
type LineLook = (String, String, String);

fn line_look(element: &str) -> LineLook {
    (
        attr(element, "stroke").unwrap_or("").to_owned(),
        attr(element, "stroke-width").unwrap_or("").to_owned(),
        attr(element, "stroke-dasharray")
            .unwrap_or("solid")
            .to_owned(),
    )
}

/// The vertical middle of a swatch element, in pixels.
fn middle(element: &str) -> f64 {
    let num = |n: &str| attr(element, n).and_then(|v| v.parse::<f64>().ok());
    if element.starts_with("<polyline") {
        let points = attr(element, "points").unwrap_or("");
        let ys: Vec<f64> = points
            .split_whitespace()
            .filter_map(|p| p.split(',').nth(1)?.parse().ok())
            .collect();
        ys.iter().sum::<f64>() / ys.len() as f64
    } else if element.starts_with("<line") {
        (num("y1").unwrap_or(f64::NAN) + num("y2").unwrap_or(f64::NAN)) / 2.0
    } else if element.starts_with("<circle") {
        num("cy").unwrap_or(f64::NAN)
    } else {
        num("y").unwrap_or(f64::NAN) + num("height").unwrap_or(0.0) / 2.0
    }
}

/// One legend entry: its text and the elements its swatch is drawn with.
#[derive(Debug)]
struct Entry {
    label: String,
    swatch: Vec<String>,
}

/// The SVG's elements before the legend (the plot) and its legend entries. plotters draws
/// the legend last: its box, all texts, then every swatch, each at its text's height.
fn split(svg: &str) -> (Vec<String>, Vec<Entry>) {
    let lines: Vec<&str> = svg.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.starts_with("<rect") && l.contains("opacity=\"0.9\" fill=\"#FFFFFF\""))
    else {
        return (lines.iter().map(|l| l.to_string()).collect(), Vec::new());
    };
    let plot = lines[..start].iter().map(|l| l.to_string()).collect();
    let mut texts: Vec<(f64, String)> = Vec::new();
    let mut swatches = Vec::new();
    let mut i = start + 2;
    while i < lines.len() {
        let l = lines[i];
        if l.starts_with("<text") {
            let y: f64 = attr(l, "y")
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN);
            texts.push((y, lines.get(i + 1).unwrap_or(&"").to_string()));
            i += 3;
            continue;
        }
        if l.starts_with('<') && !l.starts_with("</") {
            swatches.push(l.to_string());
        }
        i += 1;
    }
    let mut entries: Vec<Entry> = texts
        .iter()
        .map(|(_, t)| Entry {
            label: t.clone(),
            swatch: Vec::new(),
        })
        .collect();
    for s in swatches {
        let m = middle(&s);
        // The entry whose text (its top, 0.76em above the middle of the line) is nearest.
        let nearest = texts
            .iter()
            .enumerate()
            .min_by(|a, b| {
                let d = |t: &(f64, String)| (t.0 + 7.0 - m).abs();
                d(a.1).total_cmp(&d(b.1))
            })
            .map(|(k, _)| k)
            .unwrap();
        entries[nearest].swatch.push(s);
    }
    (plot, entries)
}

/// The grey of a style key: it explains a dash pattern, whatever the series' colour.
const KEY_INK: &str = "#5A5A5A";

/// Checks every legend entry against the plot; returns the entries' line looks.
fn check_legend(c: &Chart) -> Vec<(String, LineLook)> {
    let svg = render_svg(&Figure::Chart(c.clone())).unwrap();
    let (plot, entries) = split(&svg);
    assert!(!entries.is_empty(), "{}: no legend", c.title);
    let plot_lines: Vec<LineLook> = plot
        .iter()
        .filter(|e| e.starts_with("<polyline"))
        .map(|e| line_look(e))
        .collect();
    let plot_fills: Vec<(&str, &str)> = plot
        .iter()
        .filter(|e| e.starts_with("<circle") || e.starts_with("<polygon"))
        .map(|e| {
            (
                attr(e, "fill").unwrap_or(""),
                attr(e, "opacity").unwrap_or(""),
            )
        })
        .collect();
    let mut looks = Vec::new();
    for e in &entries {
        assert!(
            !e.swatch.is_empty(),
            "{}: '{}' has no swatch",
            c.title,
            e.label
        );
        for s in &e.swatch {
            if s.starts_with("<polyline") {
                let look = line_look(s);
                let drawn = plot_lines.iter().any(|p| {
                    if look.0 == KEY_INK {
                        (&p.1, &p.2) == (&look.1, &look.2)
                    } else {
                        *p == look
                    }
                });
                assert!(
                    drawn,
                    "{}: legend '{}' shows {look:?}, no series is drawn so: {plot_lines:?}",
                    c.title, e.label
                );
                looks.push((e.label.clone(), look));
            } else if s.starts_with("<line") {
                let look = line_look(s);
                assert!(
                    plot.iter()
                        .any(|p| p.starts_with("<line") && line_look(p) == look),
                    "{}: legend '{}' shows a cross {look:?} that no series has",
                    c.title,
                    e.label
                );
            } else if s.starts_with("<circle") || s.starts_with("<rect") {
                let fill = (
                    attr(s, "fill").unwrap_or(""),
                    attr(s, "opacity").unwrap_or(""),
                );
                assert!(
                    plot_fills.contains(&fill),
                    "{}: legend '{}' shows a mark filled {fill:?} that no series has",
                    c.title,
                    e.label
                );
            }
        }
    }
    looks
}

fn axis(label: &str, scale: Scale, ticks: Ticks) -> Axis {
    Axis {
        label: label.into(),
        scale,
        ticks,
        from_zero: true,
    }
}

fn line(label: &str, colour: usize, dashed: bool, markers: bool, pts: &[(f64, f64)]) -> Line {
    Line {
        label: label.into(),
        colour,
        dashed,
        markers,
        points: pts.to_vec(),
    }
}

fn chart(title: &str, lines: Vec<Line>) -> Chart {
    Chart {
        title: title.into(),
        x: axis("send buffer (bytes)", Scale::Log, Ticks::Bytes),
        y: axis("throughput (Mbit/s)", Scale::Linear, Ticks::Number),
        bands: vec![],
        lines,
        hlines: vec![],
        legend: LegendAt::Best,
        error_bars: vec![],
        invalid: vec![],
        regressions: vec![],
        style_keys: vec![],
        sequential_colours: None,
    }
}

/// As series' buffer sweep draws it: sender dashed and receiver solid, both with markers, and
/// the autotuned buffer's rate as a dotted reference line.
fn buffer_sweep() -> Chart {
    let pts = [(16384.0, 40.0), (65536.0, 900.0), (262144.0, 2000.0)];
    let lower: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1 * 0.97)).collect();
    let mut c = chart(
        "Throughput against send buffer",
        vec![
            line("sender", 0, true, true, &pts),
            line("receiver", 0, false, true, &lower),
        ],
    );
    c.hlines.push(HLine {
        label: "receiver, autotuned buffer".into(),
        colour: 0,
        y: 1500.0,
    });
    c
}

#[test]
fn every_legend_entry_shows_its_series_stroke() {
    // Throughput against a swept buffer.
    let looks = check_legend(&buffer_sweep());
    let of = |label: &str| {
        looks
            .iter()
            .find(|l| l.0 == label)
            .map(|l| l.1 .2.clone())
            .unwrap()
    };
    assert_eq!(of("sender"), "8 5");
    assert_eq!(of("receiver"), "solid");
    assert_eq!(of("receiver, autotuned buffer"), "3 4");

    // Interval reports of two streams, with and without markers.
    let t: Vec<f64> = (1..=80).map(f64::from).collect();
    let many: Vec<(f64, f64)> = t.iter().map(|t| (*t, 900.0 + t)).collect();
    let few: Vec<(f64, f64)> = t[..10].iter().map(|t| (*t, 800.0 - t)).collect();
    let mut c = chart(
        "Run #1: throughput over time",
        vec![
            line("stream 0 sender", 0, true, false, &many),
            line("stream 0 receiver", 0, false, false, &many),
            line("stream 1 sender", 1, true, true, &few),
            line("stream 1 receiver", 1, false, true, &few),
        ],
    );
    c.x = axis("time (s)", Scale::Linear, Ticks::Number);
    c.legend = LegendAt::LowerRight;
    let looks = check_legend(&c);
    assert_eq!(looks.len(), 4);
    let distinct: std::collections::BTreeSet<_> = looks.iter().map(|l| &l.1).collect();
    assert_eq!(distinct.len(), 4, "{looks:?}");

    // Latency: a band, the mean with markers, the median dashed without.
    let mut c = chart(
        "Latency against message size",
        vec![
            line("mean", 0, false, true, &[(1.0, 20.0), (1024.0, 30.0)]),
            line("median", 0, true, false, &[(1.0, 18.0), (1024.0, 26.0)]),
        ],
    );
    c.bands.push(Band {
        label: "p50 to p99".into(),
        colour: 0,
        points: vec![(1.0, 18.0, 40.0), (1024.0, 26.0, 60.0)],
    });
    check_legend(&c);

    // A study's curves: sequential colours, unnamed dashed curves, style keys, error bars and
    // invalid points.
    let mut c = chart(
        "Throughput against streams",
        vec![
            line("reno", 0, false, true, &[(1.0, 10.0), (8.0, 80.0)]),
            line("", 0, true, true, &[(1.0, 11.0), (8.0, 81.0)]),
            line("cubic", 1, false, true, &[(1.0, 12.0), (8.0, 90.0)]),
            line("", 1, true, true, &[(1.0, 13.0), (8.0, 91.0)]),
        ],
    );
    c.sequential_colours = Some(2);
    c.style_keys = vec![
        StyleKey {
            label: "sender (dashed)".into(),
            dashed: true,
        },
        StyleKey {
            label: "receiver (solid)".into(),
            dashed: false,
        },
    ];
    c.error_bars.push(ErrorBars {
        colour: 0,
        points: vec![(1.0, 9.0, 11.0)],
    });
    c.invalid.push((4.0, 50.0));
    let looks = check_legend(&c);
    assert_eq!(looks.len(), 4, "{looks:?}");
}

#[test]
fn a_legend_that_differs_from_its_series_is_caught() {
    let svg = render_svg(&Figure::Chart(buffer_sweep())).unwrap();
    let (plot, entries) = split(&svg);
    assert_eq!(entries.len(), 3, "{entries:?}");
    // Were the autotuned line's swatch dashed, no drawn series would match it.
    let dotted = entries
        .iter()
        .find(|e| e.label.contains("autotuned"))
        .unwrap();
    let look = line_look(&dotted.swatch[0].replace("3 4", "8 4"));
    assert!(!plot
        .iter()
        .filter(|e| e.starts_with("<polyline"))
        .any(|e| line_look(e) == look));
}
