//! `wirebench trace show|plot FILE.pcap`: the summary and the figures of a segment-flow
//! trace written by `run --trace` (or any pcap of TCP over IP).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use crate::results::trace_figures::{figure, TraceFigure};
use crate::results::{plots, png};
use crate::trace::{analyse, read_file, TraceSummary};

#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Per TCP connection: data segments and bytes, segments per ACK, sub-MSS share, delayed
    /// ACKs, stop-and-go periods and retransmissions.
    Show {
        /// A pcap file (`run --trace` writes one).
        file: PathBuf,
        /// As JSON (the `trace` object of a point in a run's JSON, without capture figures).
        #[arg(long)]
        json: bool,
    },
    /// Segment size, bytes outstanding and the advertised window against time, as SVG
    /// files DIR/STEM-segment-size.svg, -outstanding.svg and -window.svg.
    Plot {
        /// A pcap file (`run --trace` writes one).
        file: PathBuf,
        /// Directory to write the figures into (created if missing).
        #[arg(long, default_value = ".", value_name = "DIR")]
        out: PathBuf,
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
            let s = TraceSummary::of_segments(&file, packets, &segments);
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
        } => {
            let ns = |d: Option<Duration>| d.map(crate::pattern::duration_ns);
            if let (Some(f), Some(t)) = (from, to) {
                if f >= t {
                    bail!("--from must come before --to");
                }
            }
            let (_, segments) = read_file(&file)?;
            let flows = analyse(&segments);
            if flows.is_empty() {
                bail!("{}: no TCP segments", file.display());
            }
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
            let mut written = 0;
            for kind in TraceFigure::ALL {
                let Some(fig) = figure(&flows, kind, ns(from), ns(to)) else {
                    continue;
                };
                let svg = plots::render_svg(&fig)?;
                let path = out.join(format!("{stem}-{}.svg", kind.name()));
                std::fs::write(&path, &svg)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("{}", path.display());
                if with_png {
                    let path = path.with_extension("png");
                    std::fs::write(&path, png::svg_to_png(&svg)?)
                        .with_context(|| format!("writing {}", path.display()))?;
                    println!("{}", path.display());
                }
                written += 1;
            }
            if written == 0 {
                bail!("no segments between --from and --to");
            }
            Ok(0)
        }
    }
}
