//! `--path-timing`: where a round trip's time went, stage by stage, in the table.
//!
//! A run of one point gets the whole account under its row: a line per stage (p50, p99 and
//! min, and the stage's share of the mean round trip), the round trip itself, the residual,
//! the clock, what stamping cost and the measurement's notes. A sweep would bury its rows
//! under a dozen lines a point, so each point gets one line (how many round trips, the
//! residual, the cost) and the stages' medians stand after the table in one matrix, a row a
//! point and a column a stage: the split of a segment's time per size of [Moldeklev et al. n.d.],
//! read down a column as the size grows. Every figure of every point is in `--json` and
//! `--csv`.

use super::{RunColumn, TableSink};
use crate::model::path::{PathClock, PathTiming, Stage, StageName};
use crate::model::{PointResult, RunDocument};
use crate::output::columns::Row;
use crate::stats::physics;
use crate::stats::Validity;
use crate::text::table::{Column, Style, Table};
use crate::units::{format_us, us};

/// The matrix's column header of a stage: short, so that nine stages fit a terminal's width;
/// the line above the matrix spells each out.
fn short(s: StageName) -> &'static str {
    match s {
        StageName::ClientSendToQueue => "c.send",
        StageName::ClientQueueToDriver => "c.qdisc",
        StageName::WireOut => "wire.out",
        StageName::ServerArrivalToRead => "s.read",
        StageName::ServerTurnaround => "s.turn",
        StageName::ServerSendToQueue => "s.send",
        StageName::ServerQueueToDriver => "s.qdisc",
        StageName::WireBack => "wire.back",
        StageName::ClientArrivalToRead => "c.read",
        StageName::WireBoth => "wire.both",
        StageName::ClientDriverToAck => "c.ack",
    }
}

/// A percentile of a stage, with "!" when it stands on fewer round trips than its floor
/// (10 / (1 - p)).
fn percentile(ns: u64, name: &str, p: f64, samples: u64) -> (String, Validity) {
    let v = physics::percentile(name, p, samples);
    (format!("{}{}", us(ns as f64), v.mark()), v)
}

/// "12.5%" of the mean round trip; "-" without one.
fn share(mean_ns: f64, rtt_mean_ns: f64) -> String {
    if rtt_mean_ns > 0.0 && mean_ns.is_finite() {
        format!("{:.1}%", mean_ns / rtt_mean_ns * 100.0)
    } else {
        "-".into()
    }
}

/// "(merged: client queue→driver)" after a stage that stands for others too.
fn merged(s: &Stage) -> String {
    if s.merged.is_empty() {
        String::new()
    } else {
        format!(
            "  (merged: {})",
            s.merged
                .iter()
                .map(|m| m.label())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The clock line: whether the one-way stages rest on an estimate.
pub(super) fn clock_line(c: &PathClock) -> String {
    match c {
        PathClock::Shared => "clock: one clock (both ends' stamps read one kernel clock)".into(),
        PathClock::Separate {
            offset_ns,
            error_ns,
        } => format!(
            "clock: separate clocks, offset {} ± {} us: one-way stages rest on it (wire out+back does not)",
            us(*offset_ns as f64),
            us(*error_ns as f64)
        ),
    }
}

/// The stamping cost line; None when the point did not measure it.
pub(super) fn cost_line(t: &PathTiming) -> Option<String> {
    let c = t.cost.as_ref()?;
    Some(format!(
        "stamping cost: stamped/unstamped p50 = {:.2} [{:.2}, {:.2}] ({} unstamped, {}), reading stamps {} per round trip",
        c.ratio,
        c.ratio_low,
        c.ratio_high,
        c.unstamped,
        c.method,
        format_us(c.read_ns)
    ))
}

/// "9998 round trips (2 without every stamp)".
fn messages(t: &PathTiming) -> String {
    let incomplete = if t.incomplete > 0 {
        format!(" ({} without every stamp, left out)", t.incomplete)
    } else {
        String::new()
    };
    format!(
        "{} round trip{}{incomplete}",
        t.messages,
        if t.messages == 1 { "" } else { "s" }
    )
}

fn residual(t: &PathTiming) -> String {
    format!(
        "residual (each round trip less its stages' sum): mean {}, largest absolute {}",
        format_us(t.residual_mean_ns),
        format_us(t.residual_max_abs_ns as f64)
    )
}

/// A line of the stages' account: its name, p50, p99, min, share, and what follows them.
type StageLine = (String, String, String, String, String, String);

/// The whole account of one point, a line each, as said under its row.
pub(super) fn detail_lines(t: &PathTiming) -> Vec<String> {
    let mut rows: Vec<StageLine> = Vec::new();
    let mut floors: Vec<Validity> = Vec::new();
    let mut stage_row = |s: &Stage, label: String, share_text: String, after: Option<&str>| {
        let (p50, v50) = percentile(s.p50_ns, "p50", 0.5, s.samples);
        let (p99, v99) = percentile(s.p99_ns, "p99", 0.99, s.samples);
        floors.extend([v50, v99].into_iter().filter(Validity::is_invalid));
        let tail = after.map_or_else(|| merged(s), str::to_owned);
        rows.push((label, p50, p99, us(s.min_ns as f64), share_text, tail));
    };
    for s in &t.stages {
        stage_row(
            s,
            s.name.label().to_owned(),
            share(s.mean_ns, t.rtt_mean_ns),
            None,
        );
    }
    if let Some(ack) = &t.client_driver_to_ack {
        let after = "  (TCP's acknowledgement, outside the sum)";
        stage_row(ack, ack.name.label().to_owned(), "-".into(), Some(after));
    }
    // Across two clocks, the wires' sum is the one path figure that rests on no offset.
    if let (Some(w), PathClock::Separate { .. }) = (&t.wire_both, &t.clock) {
        let after = "  (each end's stamps against its own clock only, outside the sum)";
        stage_row(w, w.name.label().to_owned(), "-".into(), Some(after));
    }
    let (rtt50, v50) = percentile(t.rtt_p50_ns, "p50", 0.5, t.messages);
    let (rtt99, v99) = percentile(t.rtt_p99_ns, "p99", 0.99, t.messages);
    floors.extend([v50, v99].into_iter().filter(Validity::is_invalid));
    rows.push((
        "round trip".into(),
        rtt50,
        rtt99,
        us(t.rtt_min_ns as f64),
        String::new(),
        format!(
            "  (mean {}, the application's clock)",
            format_us(t.rtt_mean_ns)
        ),
    ));
    let width =
        |f: fn(&StageLine) -> &String| rows.iter().map(|r| f(r).chars().count()).max().unwrap_or(0);
    let w = [
        width(|r| &r.0),
        width(|r| &r.1).max(3),
        width(|r| &r.2).max(3),
        width(|r| &r.3).max(3),
        width(|r| &r.4).max(5),
    ];
    let pad = |s: &str, n: usize, left: bool| {
        let fill = " ".repeat(n.saturating_sub(s.chars().count()));
        if left {
            format!("{s}{fill}")
        } else {
            format!("{fill}{s}")
        }
    };
    let mut out = vec![
        format!(
            "path timing over {}, each stage in us (share: its mean over the mean round trip):",
            messages(t)
        ),
        format!(
            "  {}  {}  {}  {}  {}",
            pad("stage", w[0], true),
            pad("p50", w[1], false),
            pad("p99", w[2], false),
            pad("min", w[3], false),
            pad("share", w[4], false)
        ),
    ];
    for r in &rows {
        out.push(format!(
            "  {}  {}  {}  {}  {}{}",
            pad(&r.0, w[0], true),
            pad(&r.1, w[1], false),
            pad(&r.2, w[2], false),
            pad(&r.3, w[3], false),
            pad(&r.4, w[4], false),
            r.5
        ));
    }
    out.push(residual(t));
    out.push(clock_line(&t.clock));
    out.extend(cost_line(t));
    if t.validity.is_invalid() {
        floors.push(t.validity.clone());
    }
    // Each reason once: the stages of one point share their sample count.
    let mut said: Vec<&str> = Vec::new();
    for v in &floors {
        if !said.contains(&v.reason()) {
            said.push(v.reason());
            out.push(format!("! {}", v.reason()));
        }
    }
    out.extend(t.notes.iter().map(|n| format!("note: {n}")));
    out
}

/// A sweep's one line under a point: what the matrix after the table stands on.
pub(super) fn summary_line(t: &PathTiming) -> String {
    let cost = t
        .cost
        .as_ref()
        .map(|c| {
            format!(
                "; stamped/unstamped p50 = {:.2} [{:.2}, {:.2}]",
                c.ratio, c.ratio_low, c.ratio_high
            )
        })
        .unwrap_or_default();
    let clock = match &t.clock {
        PathClock::Shared => "one clock".to_owned(),
        PathClock::Separate {
            offset_ns,
            error_ns,
        } => format!(
            "separate clocks, offset {} ± {} us",
            us(*offset_ns as f64),
            us(*error_ns as f64)
        ),
    };
    let invalid = if t.validity.is_invalid() {
        format!("; ! {}", t.validity.reason())
    } else {
        String::new()
    };
    format!(
        "path timing over {}, {clock}; residual mean {}, largest absolute {}{cost}; stages after the table{invalid}",
        messages(t),
        format_us(t.residual_mean_ns),
        format_us(t.residual_max_abs_ns as f64),
    )
}

impl TableSink {
    /// Whether the run has several points (a sweep): then each point's stages go into one
    /// matrix after the table.
    fn path_compact(&self) -> bool {
        let s = &self.swept;
        s.size || s.sndbuf || s.rcvbuf || s.server_sndbuf || s.server_rcvbuf || s.cc || s.rate
    }

    /// The lines under a point with path timing.
    pub(super) fn path_notes(&self, p: &PointResult) -> anyhow::Result<()> {
        let Some(t) = &p.path_timing else {
            return Ok(());
        };
        if self.path_compact() {
            self.under(&summary_line(t))?;
            for n in &t.notes {
                self.under(&format!("note: {n}"))?;
            }
            return Ok(());
        }
        for line in detail_lines(t) {
            self.under(&line)?;
        }
        Ok(())
    }

    /// A sweep's matrix of the stages' medians, a row a point, after the table.
    pub(super) fn path_matrix(&self, r: &RunDocument) -> anyhow::Result<()> {
        if !self.path_compact() {
            return Ok(());
        }
        let timed: Vec<&PointResult> = r
            .points
            .iter()
            .filter(|p| p.path_timing.is_some())
            .collect();
        let stages: Vec<StageName> = StageName::SHOWN
            .into_iter()
            .filter(|s| {
                timed.iter().any(|p| {
                    p.path_timing
                        .as_ref()
                        .is_some_and(|t| t.stages.iter().any(|x| x.name == *s))
                })
            })
            .collect();
        if stages.is_empty() {
            return Ok(());
        }
        let swept = self.swept_columns();
        let mut columns = vec![Column::right("size(B)")];
        columns.extend(swept.iter().map(RunColumn::column));
        columns.extend(stages.iter().map(|s| Column::right(short(*s))));
        columns.extend([
            Column::right("rtt p50"),
            Column::right("residual"),
            Column::right("n"),
        ]);
        let mut table = Table::new(columns);
        let mut merged_any = false;
        let mut thin = false;
        let mut faster = false;
        for p in timed {
            let Some(t) = &p.path_timing else { continue };
            let row = Row::point(r, None, p);
            let mut cells = vec![p.key.size.to_string()];
            cells.extend(
                swept
                    .iter()
                    .map(|c| c.cell(&row, &Validity::default(), true)),
            );
            for s in &stages {
                cells.push(match t.stages.iter().find(|x| x.name == *s) {
                    Some(x) => {
                        let (p50, v) = percentile(x.p50_ns, "p50", 0.5, x.samples);
                        thin |= v.is_invalid();
                        let plus = if x.merged.is_empty() { "" } else { "+" };
                        merged_any |= !x.merged.is_empty();
                        // A wire stage faster than the link: the point's line says why.
                        let wire = matches!(x.name, StageName::WireOut | StageName::WireBack);
                        let bad = if wire && t.validity.is_invalid() {
                            faster = true;
                            " !!"
                        } else {
                            ""
                        };
                        format!("{p50}{plus}{bad}")
                    }
                    None => "-".into(),
                });
            }
            let (rtt, v) = percentile(t.rtt_p50_ns, "p50", 0.5, t.messages);
            thin |= v.is_invalid();
            cells.push(rtt);
            cells.push(us(t.residual_mean_ns));
            cells.push(t.messages.to_string());
            table.row(cells);
        }
        self.line("# path timing, each stage's p50 in us, a row a point (residual: the mean of each round trip less its stages' sum; n: round trips):")?;
        // The legend a few stages a line, so that it fits a terminal as the matrix does.
        for part in stages.chunks(5) {
            self.line(&format!(
                "#   {}",
                part.iter()
                    .map(|s| format!("{} = {}", short(*s), s.label()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))?;
        }
        if merged_any {
            self.line("# +: the stage stands for a neighbour too, a device giving no stamp between them (the point's note says which)")?;
        }
        if thin {
            self.line(&format!(
                "# !: a median from fewer than {} round trips (10 / (1 - p))",
                physics::percentile_floor(0.5)
            ))?;
        }
        if faster {
            self.line("# !!: a wire stage faster than the lab link's delay + wire time: not valid (the point's line says by how much)")?;
        }
        self.block(&table)
    }

    /// A table of its own after the run's table: each line a comment of a plain table, a
    /// Markdown table after the run's.
    fn block(&self, table: &Table) -> anyhow::Result<()> {
        match &mut *self.body.borrow_mut() {
            super::Body::Plain { .. } => {
                for l in table.render(Style::Plain).lines() {
                    super::table_line(&self.out, &format!("# {l}"))?;
                }
                Ok(())
            }
            super::Body::Markdown { blocks, .. } => {
                blocks.push(table.render(Style::Markdown));
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::path::StampCost;

    pub(crate) fn stage(name: StageName, base: u64, samples: u64) -> Stage {
        Stage {
            name,
            merged: Vec::new(),
            samples,
            min_ns: base,
            p50_ns: base + 200,
            p99_ns: base * 3,
            mean_ns: (base + 250) as f64,
        }
    }

    /// One clock, nine stages, TCP's ACK stage and the cost.
    pub(crate) fn timing(samples: u64) -> PathTiming {
        let stages: Vec<Stage> = StageName::ALL
            .iter()
            .enumerate()
            .map(|(i, s)| stage(*s, 1000 * (i as u64 + 1), samples))
            .collect();
        let sum: f64 = stages.iter().map(|s| s.mean_ns).sum();
        PathTiming {
            messages: samples,
            incomplete: 2,
            clock: PathClock::Shared,
            stages,
            rtt_min_ns: 40_000,
            rtt_p50_ns: 48_000,
            rtt_p99_ns: 90_000,
            rtt_mean_ns: sum + 100.0,
            residual_mean_ns: 100.0,
            residual_max_abs_ns: 1300,
            client_driver_to_ack: Some(stage(StageName::ClientDriverToAck, 20_000, samples)),
            validity: crate::stats::Validity::default(),
            wire_both: None,
            cost: Some(StampCost {
                unstamped: 5000,
                unstamped_p50_ns: 47_000,
                stamped_p50_ns: 48_000,
                ratio: 1.0213,
                ratio_low: 0.991,
                ratio_high: 1.049,
                method: "distribution-free".into(),
                read_ns: 800.0,
            }),
            notes: vec!["loopback: the wire stages are the kernel's own hand-over".into()],
        }
    }

    /// A wire stage the guard found faster than the link is said under the point and in a
    /// sweep's one line, never printed as a plain figure.
    #[test]
    fn a_wire_stage_faster_than_the_link_is_flagged() {
        let mut t = timing(5000);
        t.validity = Validity::invalid("path timing: fastest wire out 3.00 us is below the link's delay + wire time 1008.53 us: faster than the link".to_owned());
        let lines = detail_lines(&t);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("! path timing: fastest wire out")),
            "{lines:#?}"
        );
        assert!(summary_line(&t).contains("! path timing: fastest wire out"));
        assert!(!detail_lines(&timing(5000))
            .iter()
            .any(|l| l.contains("faster than the link")));
    }

    #[test]
    fn one_point_gets_every_stage_with_its_share_the_residual_clock_and_cost() {
        let lines = detail_lines(&timing(5000));
        assert_eq!(
            lines.join("\n"),
            "\
path timing over 5000 round trips (2 without every stamp, left out), each stage in us (share: its mean over the mean round trip):
  stage                  p50    p99    min  share
  client send→queue     1.20   3.00   1.00   2.6%
  client queue→driver   2.20   6.00   2.00   4.8%
  wire out              3.20   9.00   3.00   6.9%
  server arrival→read   4.20  12.00   4.00   9.0%
  server turnaround     5.20  15.00   5.00  11.1%
  server send→queue     6.20  18.00   6.00  13.2%
  server queue→driver   7.20  21.00   7.00  15.3%
  wire back             8.20  24.00   8.00  17.4%
  client arrival→read   9.20  27.00   9.00  19.5%
  client driver→ack    20.20  60.00  20.00      -  (TCP's acknowledgement, outside the sum)
  round trip           48.00  90.00  40.00         (mean 47.35 us, the application's clock)
residual (each round trip less its stages' sum): mean 0.10 us, largest absolute 1.30 us
clock: one clock (both ends' stamps read one kernel clock)
stamping cost: stamped/unstamped p50 = 1.02 [0.99, 1.05] (5000 unstamped, distribution-free), reading stamps 0.80 us per round trip
note: loopback: the wire stages are the kernel's own hand-over"
        );
    }

    /// A merged stage says which it stands for; separate clocks give the offset; a p99 from
    /// too few round trips is marked and said why; no cost, no cost line.
    #[test]
    fn merged_stages_separate_clocks_and_thin_percentiles_are_said() {
        let mut t = timing(200);
        t.stages.remove(1);
        t.stages[1].merged = vec![StageName::ClientQueueToDriver];
        t.clock = PathClock::Separate {
            offset_ns: -12_340,
            error_ns: 500,
        };
        t.cost = None;
        t.client_driver_to_ack = None;
        let lines = detail_lines(&t);
        assert_eq!(
            lines[3],
            "  wire out              3.20   9.00!   3.00   6.9%  (merged: client queue→driver)"
        );
        assert!(
            lines.contains(
                &"clock: separate clocks, offset -12.34 ± 0.50 us: one-way stages rest on it (wire out+back does not)"
                    .to_owned()
            ),
            "{lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.starts_with("stamping cost")));
        // Said once for all the stages that share the sample count.
        let bang: Vec<&String> = lines.iter().filter(|l| l.starts_with("! ")).collect();
        assert_eq!(bang.len(), 1, "{bang:#?}");
        assert!(bang[0].starts_with("! p99 from 200 samples: below its floor of 1000"));
    }

    #[test]
    fn a_sweep_point_says_one_line() {
        assert_eq!(
            summary_line(&timing(5000)),
            "path timing over 5000 round trips (2 without every stamp, left out), one clock; residual mean 0.10 us, largest absolute 1.30 us; stamped/unstamped p50 = 1.02 [0.99, 1.05]; stages after the table"
        );
    }
}
