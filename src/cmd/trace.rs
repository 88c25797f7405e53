//! `wirebench trace show|plot FILE.pcap`: the summary and the figures of a segment-flow
//! trace written by `run --trace` (or any pcap of TCP over IP).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

use crate::figures::probe_figures::{self, ProbeFigure};
use crate::figures::trace_figures::{figure, TraceFigure};
use crate::figures::{plots, png};
use crate::trace::probe::{self, ProbeSample};
use crate::trace::segment::Segment;
use crate::trace::{analyse, read_file, ProbeSummary, TraceSummary};

#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Per TCP connection: data segments and bytes, segments per ACK, sub-MSS share, delayed
    /// ACKs, stop-and-go periods and retransmissions; with the tcp_probe sidecar `run
    /// --trace` writes beside the pcap (X.tcp_probe.csv), each socket's congestion window,
    /// slow-start threshold, smoothed RTT and windows.
    Show {
        /// A pcap file (`run --trace` writes one).
        file: PathBuf,
        /// As JSON (the `trace` object of a point in a run's JSON, without capture figures).
        #[arg(long)]
        json: bool,
    },
    /// Segment size, bytes outstanding and the advertised window against time, as SVG
    /// files DIR/STEM-segment-size.svg, -outstanding.svg and -window.svg; with the tcp_probe
    /// sidecar also -cwnd.svg (snd_cwnd and ssthresh), -srtt.svg, -probe-windows.svg (snd_wnd,
    /// rcv_wnd) and -snd-una.svg, and the congestion window in bytes in -outstanding.svg.
    Plot {
        /// A pcap file (`run --trace` writes one).
        file: PathBuf,
        /// Directory to write the figures into (created if missing). A figure's file that
        /// exists there is refused before any is written, unless --force.
        #[arg(long, default_value = ".", value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        force: super::ForceArg,
        /// Start of the time window drawn, after the capture's first segment (e.g. 1.5s).
        #[arg(long, value_parser = super::run::parse_duration)]
        from: Option<Duration>,
        /// End of the time window drawn, after the capture's first segment.
        #[arg(long, value_parser = super::run::parse_duration)]
        to: Option<Duration>,
        /// Also write each figure as PNG (rasterised, needs a system font).
        #[arg(long)]
        png: bool,
    },
}

pub fn run(a: TraceArgs) -> Result<i32> {
    match a.command {
        TraceCommand::Show { file, json } => {
            let (packets, segments) = read_file(&file)?;
            let mut s = TraceSummary::of_segments(&file, packets, &segments);
            s.tcp_probe = sidecar(&file, &segments)?.map(|(path, samples, stale)| match stale {
                Some(why) => ProbeSummary::unavailable(why),
                None => probe::summarise(&path, &samples, &s.flows),
            });
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", s.text());
            }
            Ok(0)
        }
        TraceCommand::Plot {
            file,
            out,
            from,
            to,
            png: with_png,
            force,
        } => {
            let ns = |d: Option<Duration>| d.map(crate::pattern::duration_ns);
            if let (Some(f), Some(t)) = (from, to) {
                if f >= t {
                    bail!("--from must come before --to");
                }
            }
            let (_, segments) = read_file(&file)?;
            let probed = sidecar(&file, &segments)?;
            if let Some((_, _, Some(stale))) = &probed {
                eprintln!("trace plot: {stale}");
            }
            let samples: &[ProbeSample] = match &probed {
                Some((_, v, None)) => v,
                _ => &[],
            };
            let origin = segments.iter().map(|g| g.t_ns).min().unwrap_or(0);
            let flows = analyse(&segments);
            if flows.is_empty() {
                bail!("{}: no TCP segments", file.display());
            }
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
            // Every figure drawn, then all checked, then written: a refusal writes none.
            let mut files = Vec::new();
            let mut add = |name: &str, fig: &plots::Figure| -> Result<()> {
                let svg = plots::render_svg(fig)?;
                let name = format!("{stem}-{name}");
                let png = with_png.then(|| png::svg_to_png(&svg)).transpose()?;
                files.push((format!("{name}.svg"), svg.into_bytes()));
                if let Some(png) = png {
                    files.push((format!("{name}.png"), png));
                }
                Ok(())
            };
            for kind in TraceFigure::ALL {
                let Some(mut fig) = figure(&flows, kind, ns(from), ns(to)) else {
                    continue;
                };
                if kind == TraceFigure::Outstanding {
                    probe_figures::add_cwnd_bytes(
                        &mut fig,
                        &flows,
                        samples,
                        origin,
                        ns(from),
                        ns(to),
                    );
                }
                add(kind.name(), &fig)?;
            }
            for kind in ProbeFigure::ALL {
                if let Some(fig) =
                    probe_figures::figure(&flows, samples, origin, kind, ns(from), ns(to))
                {
                    add(kind.name(), &fig)?;
                }
            }
            if files.is_empty() {
                bail!("no segments between --from and --to");
            }
            for path in crate::outfile::OutDir::open(&out, force.force)?.write_files(&files)? {
                println!("{}", path.display());
            }
            Ok(0)
        }
    }
}

/// A pcap's tcp_probe sidecar: its path, its samples, and a note when they do not overlap
/// the capture (a sidecar left from another run: not joined).
type Sidecar = (PathBuf, Vec<ProbeSample>, Option<String>);

/// The tcp_probe sidecar of `file`, if there is one.
fn sidecar(file: &std::path::Path, segments: &[Segment]) -> Result<Option<Sidecar>> {
    let Some((path, samples)) = probe::read_sidecar(file)? else {
        return Ok(None);
    };
    let first = segments.iter().map(|g| g.t_ns).min().unwrap_or(0);
    let last = segments.iter().map(|g| g.t_ns).max().unwrap_or(0);
    let stale = (!samples.is_empty() && !probe::overlaps(&samples, first, last)).then(|| {
        format!(
            "{}: its samples lie outside the capture's time span (a sidecar of another run?): not joined",
            path.display()
        )
    });
    Ok(Some((path, samples, stale)))
}
