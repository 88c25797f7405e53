//! The commands on saved results, and what each one does.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use crate::figures::series::{self, DistributionKind, IntervalKind, Run};
use crate::figures::{agent_history, html_report as report, plots, png};
use crate::model::RunDocument;
use crate::output::compare_runs as compare;
use crate::pattern::PatternKind;
use crate::store::db::{self, Db, Filter};
use crate::store::history;
use crate::text::table::{comment, Column, Style, Table};

/// Exit code of `compare --fail-if-worse` when a figure got worse (1 is an error, 2 bad
/// command-line syntax).
pub const EXIT_WORSE: i32 = 3;

#[derive(Debug, Subcommand)]
pub enum ResultsCommand {
    /// List saved runs, newest first.
    History(HistoryArgs),
    /// Print a saved run as `run` printed it, or its table as Markdown.
    Show(ShowArgs),
    /// Write a saved run as JSON (the `run --json` document), CSV, a Markdown table or
    /// iperf3's JSON.
    Export(ExportArgs),
    /// Save a run's JSON document (e.g. measured on another machine) in the database.
    Import(ImportArgs),
    /// Give a saved run a label (as `run --label`), or clear it.
    Label(LabelArgs),
    /// Remove saved runs from the database for good.
    Delete(DeleteArgs),
    /// Write one self-contained HTML report with plots and tables of one or more runs.
    Report(ReportArgs),
    /// Write a single figure as SVG or PNG.
    Plot(PlotArgs),
    /// Compare run B against run A, point by point, with Welch's t-test.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
pub struct DbArg {
    /// Results database (default: $XDG_DATA_HOME/wirebench/results.sqlite, else
    /// ~/.local/share/wirebench/results.sqlite).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Only runs of this pattern.
    #[arg(long, value_enum)]
    pub pattern: Option<PatternKind>,
    /// Only runs over this transport (tcp, udp, unix, mptcp, quic, raw or mpi).
    #[arg(long, short = 't')]
    pub transport: Option<String>,
    /// Only runs whose server address contains this text.
    #[arg(long)]
    pub peer: Option<String>,
    /// Only runs measured from this client host name.
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs started at or after this time: a UTC date 2025-01-31 or an RFC 3339 time
    /// 2025-01-31T12:00:00Z (or with an offset, +02:00).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only runs started before this time: a UTC date 2025-02-01 or an RFC 3339 time
    /// 2025-02-01T08:30:00Z.
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// Only runs saved by this: run, import, study (its runs one by one), mesh,
    /// compare-transports, agent, or app (the application runs alone).
    #[arg(long, value_enum)]
    pub source: Option<HistorySource>,
    /// Only runs whose label contains this text (in any case).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Only runs that did not complete.
    #[arg(long)]
    pub incomplete: bool,
    /// List every run of a study on its own line (by default a study's runs are one line).
    #[arg(long)]
    pub all: bool,
    /// Most runs listed (newest first).
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: u32,
    /// As one JSON document (schema "wirebench.history"): the database and its runs, each
    /// with its headline figures in ns and bit/s.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// How the listing is printed: table (aligned columns) or markdown.
    #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
    pub format: super::TableFormat,
}

/// What saved a run, for `history --source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistorySource {
    /// `wirebench run` (and `lab run`).
    Run,
    /// `wirebench import`.
    Import,
    /// The runs of `wirebench study`.
    Study,
    /// `wirebench mesh`.
    Mesh,
    /// The sweeps of `wirebench compare-transports`.
    CompareTransports,
    /// `wirebench app` (listed apart: its runs are not run documents).
    App,
    /// `wirebench agent`'s scheduled runs.
    Agent,
}

impl HistorySource {
    /// The value of the `source` column; None for application runs, which have their table.
    fn stored(self) -> Option<db::Source> {
        match self {
            HistorySource::Run => Some(db::Source::Run),
            HistorySource::Import => Some(db::Source::Import),
            HistorySource::Study => Some(db::Source::Study),
            HistorySource::Mesh => Some(db::Source::Mesh),
            HistorySource::CompareTransports => Some(db::Source::CompareTransports),
            HistorySource::App => None,
            HistorySource::Agent => Some(db::Source::Agent),
        }
    }
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Run id, 'last' or 'last-N'.
    pub id: String,
    /// table (as `run` printed it) or markdown (the table as a GitHub-flavoured Markdown
    /// table, its notes listed after it).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "table")]
    pub format: ShowFormat,
    /// Only the table's columns that show these CSV columns (e.g. size_bytes,rtt_p99_ns),
    /// in the table's order; an unknown name is refused with the list. As `run --columns`.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::run::parse_column)]
    pub columns: Vec<String>,
}

/// How `show` prints a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// As `run` printed it.
    Table,
    /// The table as a GitHub-flavoured Markdown table.
    Markdown,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Run id, 'last' or 'last-N'.
    pub id: String,
    /// The JSON result document (schema "wirebench.run"); as --format json.
    #[arg(long, conflicts_with_all = ["csv", "format"])]
    pub json: bool,
    /// CSV: a header and one row per point, as `run --csv`; as --format csv.
    #[arg(long, conflicts_with = "format")]
    pub csv: bool,
    /// What to write: json (as --json), csv (as --csv), markdown (the run's table as a
    /// GitHub-flavoured Markdown table, as `run --format markdown`), or iperf3: one point of
    /// a stream run over tcp, mptcp or udp as the document `iperf3 -c ... -J` writes (start,
    /// intervals, end; seconds, bits_per_second, bytes, jitter_ms as iperf3 has them), for
    /// tools that read iperf3's JSON. One document per export: a sweep's point is chosen with
    /// --point.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<ExportFormat>,
    /// csv and markdown: only these columns, named as in the CSV header (e.g.
    /// size_bytes,rtt_p99_ns); the CSV has them in the order given, the table keeps the
    /// columns that show them in its own order. An unknown name is refused with the list.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::run::parse_column)]
    pub columns: Vec<String>,
    /// --format iperf3: the point to write (0 = the first, as in the JSON); needed when the
    /// run has several points, which are refused otherwise.
    #[arg(long, value_name = "INDEX")]
    pub point: Option<usize>,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub force: super::ForceArg,
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The JSON result document (schema "wirebench.run").
    Json,
    /// A header and one row per point, as `run --csv`.
    Csv,
    /// The run's table as Markdown, as `run --format markdown`.
    Markdown,
    /// One point of a stream run as iperf3's `-J` document.
    Iperf3,
}

impl ExportArgs {
    /// The format asked for, by --format, --json or --csv.
    fn chosen(&self) -> Option<ExportFormat> {
        match (self.format, self.json, self.csv) {
            (Some(f), _, _) => Some(f),
            (None, true, _) => Some(ExportFormat::Json),
            (None, false, true) => Some(ExportFormat::Csv),
            (None, false, false) => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// A result document written by `run --json` or `run --output`; '-' reads stdin.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct LabelArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The run (id, 'last' or 'last-N').
    pub id: String,
    /// The label, e.g. "after the NIC firmware update".
    #[arg(required_unless_present = "clear", conflicts_with = "clear")]
    pub text: Option<String>,
    /// Remove the run's label.
    #[arg(long)]
    pub clear: bool,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The runs (ids, 'last' or 'last-N'), all resolved before any is deleted.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Run ids ('last', 'last-N' too); several runs are overlaid in the same figures. Either
    /// ids or --source agent.
    pub ids: Vec<String>,
    /// Report the runs of `wirebench agent` instead of run ids: each TARGET/TEST label's
    /// figures over time, regressions marked. Only `agent` is accepted.
    #[arg(long, value_name = "SOURCE", conflicts_with = "point")]
    pub source: Option<String>,
    /// With --source agent: only runs started at or after this time: a duration back from
    /// now (24h, 7d, 90m) or a UTC date 2025-01-31 or an RFC 3339 time 2025-01-31T12:00:00Z.
    #[arg(long, value_name = "TIME", requires = "source")]
    pub since: Option<String>,
    /// With --source agent: only this target's runs (its config name); repeat for several.
    #[arg(long, value_name = "NAME", requires = "source")]
    pub target: Vec<String>,
    /// The HTML file to write.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    #[command(flatten)]
    pub force: super::ForceArg,
    /// Point index (0 = the first point, as in the JSON) of the latency distribution figures;
    /// default: each run's first point.
    #[arg(long)]
    pub point: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotKind {
    /// Throughput against message size (or the swept buffer), sender and receiver.
    Throughput,
    /// Latency against message size, with a 50th-99th percentile band.
    Latency,
    /// NetPIPE's signature graph: throughput against transfer time (pingpong).
    Signature,
    /// Latency histogram of one point.
    Histogram,
    /// Latency cumulative distribution of one point.
    Cdf,
    /// Latency by percentile of one point, on a log axis of nines (90%, 99%, 99.9%, ...).
    Percentiles,
    /// Heatmap of a run that sweeps two parameters.
    Heatmap,
    /// Throughput over time from interval reports (stream --interval).
    Intervals,
    /// Congestion window over time (TCP_INFO in interval reports).
    Cwnd,
    /// Kernel's smoothed RTT over time (TCP_INFO in interval reports).
    Rtt,
    /// Open-loop rr (--arrivals, --rate swept): latency percentiles from the scheduled send
    /// against the achieved rate, log latency axis.
    Qps,
    /// Path timing (run --path-timing): a stacked bar per point, one part per stage of the
    /// round trip, each the stage's mean (µs).
    Path,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Run ids ('last', 'last-N' too); throughput, latency, signature, histogram and cdf
    /// overlay several runs, the others draw the first.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Which figure.
    #[arg(long, short = 'k', value_enum)]
    pub kind: PlotKind,
    /// The file to write: .svg, or .png (rasterised, needs a system font).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    #[command(flatten)]
    pub force: super::ForceArg,
    /// Point index (as in the JSON) for histogram, cdf, intervals, cwnd and rtt; default: the
    /// first point that has the data.
    #[arg(long)]
    pub point: Option<usize>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The baseline run (id, 'last' or 'last-N').
    pub a: String,
    /// The run compared with it.
    pub b: String,
    /// Exit with code 3 when a figure is judged worse (its whole confidence interval between
    /// the runs beyond the margin) and its interval lies beyond this too (e.g. 5%), or when a
    /// figure that is not valid reads worse by more than this. Needs `run --repeat 3` or more
    /// on both sides to judge anything: with one run on a side the verdict is "cannot tell",
    /// which never fails the gate.
    #[arg(long, value_name = "PERCENT")]
    pub fail_if_worse: Option<String>,
    /// Equivalence margin: a change is called worse or better only when its whole confidence
    /// interval lies beyond ±this (e.g. 5%); a smaller change is no change that matters.
    #[arg(long, value_name = "PERCENT", default_value = "5%")]
    pub margin: String,
    /// Compare runs measured with different settings (another transport, --nodelay against
    /// none, another lab link): refused by default, since their difference is the settings'.
    /// The settings that differ are listed above the table.
    #[arg(long)]
    pub allow_different: bool,
    /// As one JSON document (schema "wirebench.compare"): both runs, every change with its
    /// test and verdict, and the points only one run has.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// How the table is printed: table (aligned columns) or markdown.
    #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
    pub format: super::TableFormat,
}

pub fn run(cmd: ResultsCommand) -> Result<i32> {
    match cmd {
        ResultsCommand::History(a) => {
            let db = open_existing(&a.db)?;
            let filter = Filter {
                pattern: a.pattern.map(|p| p.name().to_owned()),
                transport: a.transport,
                peer: a.peer.clone(),
                host: a.host.clone(),
                since: a
                    .since
                    .as_deref()
                    .map(|s| time_bound(s, "--since"))
                    .transpose()?,
                until: a
                    .until
                    .as_deref()
                    .map(|s| time_bound(s, "--until"))
                    .transpose()?,
                source: a
                    .source
                    .and_then(HistorySource::stored)
                    .map(|s| s.as_str().to_owned()),
                label: a.label.clone(),
                incomplete_only: a.incomplete,
                limit: Some(a.limit),
            };
            let apps_only = a.source == Some(HistorySource::App);
            // Application runs have a kernel, a transport and a start time, nothing else the
            // filters ask for.
            let apps_too = a.source.is_none()
                && a.pattern.is_none()
                && a.peer.is_none()
                && a.host.is_none()
                && a.label.is_none()
                && !a.incomplete;
            if a.json {
                let runs = if apps_only {
                    Vec::new()
                } else {
                    db.list(&filter)?
                };
                let doc = serde_json::json!({
                    "schema": "wirebench.history",
                    "schema_version": 1,
                    "database": db.path(),
                    "runs": runs,
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else if apps_only {
                let apps = app_history(&db, &filter, a.format.style())?;
                if apps.is_empty() {
                    print!(
                        "{}",
                        comment(
                            a.format.style(),
                            &format!("no saved application runs match in {}", db.path().display())
                        )
                    );
                }
                print!("{apps}");
            } else {
                // A study's runs are one line unless asked for one by one.
                let fold = !a.all && a.source.is_none();
                print!(
                    "{}",
                    history::history(&db, &filter, fold, a.format.style())?
                );
                if apps_too {
                    print!("{}", app_history(&db, &filter, a.format.style())?);
                }
            }
        }
        ResultsCommand::Show(a) if app_id(&a.id).is_some() => {
            if !a.columns.is_empty() {
                bail!("an application run is shown as its own table: drop --columns");
            }
            let style = match a.format {
                ShowFormat::Table => crate::text::table::Style::Plain,
                ShowFormat::Markdown => crate::text::table::Style::Markdown,
            };
            let db = open_existing(&a.db)?;
            print!(
                "{}",
                crate::app::speedup::render(&load_app(&db, &a.id)?, style)
            );
        }
        ResultsCommand::Export(a) if app_id(&a.id).is_some() => {
            if a.chosen() != Some(ExportFormat::Json) {
                bail!("an application run exports as JSON only (--json)");
            }
            if !a.columns.is_empty() {
                bail!("--columns chooses a run's table or CSV columns; an application run exports whole, as JSON");
            }
            if a.point.is_some() {
                bail!("--point chooses the point of --format iperf3; an application run exports whole");
            }
            let db = open_existing(&a.db)?;
            let text = serde_json::to_string_pretty(&load_app(&db, &a.id)?)? + "\n";
            match &a.output {
                Some(path) => {
                    crate::outfile::write(path, text.as_bytes(), a.force.force)?;
                    eprintln!(
                        "{}",
                        wrote(path, &format!("application run {}, JSON", a.id))
                    );
                }
                None => print!("{text}"),
            }
        }
        ResultsCommand::Show(a) => {
            let db = open_existing(&a.db)?;
            let (_, report) = load(&db, &a.id)?;
            // A mesh keeps its points in its pairs: shown as its matrices, as it printed.
            let style = match a.format {
                ShowFormat::Table => crate::text::table::Style::Plain,
                ShowFormat::Markdown => crate::text::table::Style::Markdown,
            };
            if report.mesh.is_some() {
                if !a.columns.is_empty() {
                    bail!("a mesh is shown as its matrices: drop --columns");
                }
                print!("{}", crate::mesh::output::render(&report, style));
            } else {
                let columns = (!a.columns.is_empty()).then_some(a.columns.as_slice());
                crate::glue::stored::show(&report, style, columns)?;
            }
        }
        ResultsCommand::Export(a) => {
            let Some(format) = a.chosen() else {
                bail!("export needs --json or --csv (or --format json, csv, markdown or iperf3)");
            };
            if a.point.is_some() && format != ExportFormat::Iperf3 {
                bail!(
                    "--point chooses the point of --format iperf3; json, csv and markdown hold every point"
                );
            }
            if !a.columns.is_empty()
                && !matches!(format, ExportFormat::Csv | ExportFormat::Markdown)
            {
                bail!("--columns chooses the columns of --format csv or markdown; json and iperf3 hold every figure");
            }
            let columns = (!a.columns.is_empty()).then_some(a.columns.as_slice());
            let db = open_existing(&a.db)?;
            let (id, report) = load(&db, &a.id)?;
            let text = match format {
                ExportFormat::Csv => crate::glue::stored::export_csv(&report, id, columns)?,
                ExportFormat::Markdown => crate::glue::stored::export_markdown(&report, columns)?,
                ExportFormat::Json => crate::glue::stored::export_json(&report)?,
                ExportFormat::Iperf3 => crate::glue::stored::export_iperf3(&report, a.point)?,
            };
            match &a.output {
                Some(path) => {
                    crate::outfile::write(path, text.as_bytes(), a.force.force)?;
                    let format = match format {
                        ExportFormat::Csv => "CSV",
                        ExportFormat::Markdown => "Markdown",
                        ExportFormat::Json | ExportFormat::Iperf3 => "JSON",
                    };
                    eprintln!("{}", wrote(path, &format!("run {id}, {format}")));
                }
                None => print!("{text}"),
            }
        }
        ResultsCommand::Import(a) => {
            let path = db::resolve(a.db.db.as_deref())?;
            let db = Db::open_or_create(&path)?;
            let id = history::import(&db, &a.file)?;
            println!("imported {} as run {id}", a.file.display());
        }
        ResultsCommand::Report(a) => {
            match (&a.source, a.ids.is_empty()) {
                (Some(_), false) => {
                    bail!("report: give run ids or --source agent, not both")
                }
                (None, true) => {
                    bail!("report: give run ids (e.g. 'report last -o F') or --source agent")
                }
                _ => {}
            }
            let db = open_existing(&a.db)?;
            let html = match &a.source {
                Some(source) => agent_report(&db, source, &a)?,
                None => report::build(&as_runs(&load_all(&db, &a.ids)?), a.point)?,
            };
            crate::outfile::write(&a.output, html.as_bytes(), a.force.force)?;
            // Each figure of the page has its numbered caption.
            let figures = html.matches("<figcaption>Figure ").count();
            eprintln!(
                "{}",
                wrote(
                    &a.output,
                    &format!("{figures} figure{}", if figures == 1 { "" } else { "s" })
                )
            );
        }
        ResultsCommand::Plot(a) => plot(a)?,
        ResultsCommand::Label(a) => {
            let db = open_existing(&a.db)?;
            let (id, mut report) = load(&db, &a.id)?;
            report.label = a.text.clone();
            db.update(id, &report)?;
            match &report.label {
                Some(l) => println!("run {id}: label {}", crate::text::printable(l)),
                None => println!("run {id}: no label"),
            }
        }
        ResultsCommand::Delete(a) => {
            let db = open_existing(&a.db)?;
            // Every id must name a stored run before any is deleted: one typo deletes nothing.
            let ids = a
                .ids
                .iter()
                .map(|spec| load(&db, spec).map(|(id, _)| id))
                .collect::<Result<Vec<i64>>>()?;
            for id in ids {
                db.delete(id)?;
                println!("deleted run {id}");
            }
        }
        ResultsCommand::Compare(a) => {
            let threshold = a
                .fail_if_worse
                .as_deref()
                .map(parse_percent)
                .transpose()
                .context("--fail-if-worse")?;
            let margin = parse_percent(&a.margin).context("--margin")?;
            let db = open_existing(&a.db)?;
            let (a_id, ra) = load(&db, &a.a)?;
            let (b_id, rb) = load(&db, &a.b)?;
            let c = compare::compare(&ra, &rb, a.allow_different, margin)?;
            if a.json {
                let run = |id: i64, r: &crate::model::RunDocument| {
                    serde_json::json!({
                        "id": id,
                        "started_at": r.started_at,
                        "pattern": r.pattern,
                        "transport": r.transport,
                        "label": r.label,
                        "complete": r.complete,
                    })
                };
                let doc = serde_json::json!({
                    "schema": "wirebench.compare",
                    // 2: tested between runs, with an interval and a margin.
                    "schema_version": 2,
                    "a": run(a_id, &ra),
                    "b": run(b_id, &rb),
                    "comparison": c,
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                let text = compare::render(&c, a_id, b_id, &ra, &rb, a.format.style());
                print!("{}", crate::text::printable_lines(&text));
            }
            if let Some(t) = threshold {
                let failed = compare::failures(&c, t);
                let untold = compare::cannot_tell(&c);
                if untold > 0 {
                    eprintln!(
                        "wirebench: --fail-if-worse: {untold} figure(s) measured once on a side: cannot tell, not failed; measure both runs with --repeat 3 or more"
                    );
                }
                if !failed.is_empty() {
                    let list: Vec<String> = failed
                        .iter()
                        .map(|ch| match ch.worse_interval() {
                            Some((low, high)) => format!(
                                "{} {} {:+.2}% (worse by {low:.2}..{high:.2}%)",
                                ch.point, ch.figure, ch.percent
                            ),
                            None => format!(
                                "{} {} {:+.2}% (not valid)",
                                ch.point, ch.figure, ch.percent
                            ),
                        })
                        .collect();
                    eprintln!(
                        "wirebench: {} figure(s) worse by more than {t}%: {}",
                        failed.len(),
                        list.join("; ")
                    );
                    return Ok(EXIT_WORSE);
                }
            }
        }
    }
    Ok(0)
}

fn open_existing(a: &DbArg) -> Result<Db> {
    Db::open_existing(&db::resolve(a.db.as_deref())?)
}

/// `report --source agent`: the agent's runs the options select, as figures over time.
fn agent_report(db: &Db, source: &str, a: &ReportArgs) -> Result<String> {
    if source != db::Source::Agent.as_str() {
        bail!(
            "report --source: '{}' is not reported over time; only 'agent' is",
            crate::text::printable(source)
        );
    }
    let since = a.since.as_deref().map(since_bound).transpose()?;
    let filter = Filter {
        since: since.clone(),
        source: Some(source.to_owned()),
        ..Filter::default()
    };
    // A target's runs are labelled TARGET/TEST: its name is the label's part before the
    // first '/' (a target name has none).
    let rows: Vec<_> = db
        .list(&filter)?
        .into_iter()
        .filter(|r| {
            a.target.is_empty()
                || r.label.as_deref().is_some_and(|l| {
                    a.target
                        .iter()
                        .any(|t| l.split('/').next() == Some(t.as_str()))
                })
        })
        .collect();
    if rows.is_empty() {
        let mut what = String::new();
        if let Some(s) = &since {
            what.push_str(&format!(" started since {s}"));
        }
        if !a.target.is_empty() {
            what.push_str(&format!(
                " of target {}",
                crate::text::printable(&a.target.join(", "))
            ));
        }
        bail!(
            "no agent runs{what} in {}",
            crate::text::printable(&db.path().display().to_string())
        );
    }
    // A run whose stored document cannot be read (a damaged row) is left out, named on
    // stderr and on the page; the others are still reported.
    let mut unreadable = Vec::new();
    let mut loaded = Vec::new();
    for r in &rows {
        match db.load(r.id) {
            Ok(d) => loaded.push((r, d)),
            Err(e) => {
                let why = crate::error::one_line(&e);
                eprintln!(
                    "wirebench report: run {} left out: {}",
                    r.id,
                    crate::text::printable(&why)
                );
                unreadable.push((r.id, why));
            }
        }
    }
    if loaded.is_empty() {
        bail!(
            "none of the {} agent run(s) selected could be read from {}",
            rows.len(),
            crate::text::printable(&db.path().display().to_string())
        );
    }
    let runs: Vec<agent_history::HistoryRun> = loaded
        .iter()
        .map(|(r, d)| agent_history::HistoryRun {
            id: r.id,
            label: r.label.as_deref().unwrap_or("(no label)"),
            regression: r.regression.as_deref(),
            report: d,
        })
        .collect();
    let db_name = db.path().display().to_string();
    agent_history::build(
        &runs,
        &agent_history::Selection {
            db: &db_name,
            since: since.as_deref(),
            targets: &a.target,
            unreadable: &unreadable,
        },
    )
}

/// `--since` of `report --source agent`: a duration back from now (24h, 7d), or a time as
/// `history --since` reads it.
fn since_bound(s: &str) -> Result<String> {
    match humantime::parse_duration(s.trim()) {
        Ok(d) => {
            let t = std::time::SystemTime::now()
                .checked_sub(d)
                .ok_or_else(|| anyhow!("--since: {s} reaches before the epoch"))?;
            Ok(humantime::format_rfc3339_millis(t).to_string())
        }
        Err(_) => time_bound(s, "--since").map_err(|_| {
            anyhow!("--since: invalid time \"{s}\": expected a duration back from now (24h, 7d) or a UTC date 2025-01-31 or an RFC 3339 time 2025-01-31T12:00:00Z")
        }),
    }
}

fn load(db: &Db, spec: &str) -> Result<(i64, RunDocument)> {
    let id = db.resolve_id(spec)?;
    Ok((id, db.load(id)?))
}

/// `app:ID` names a run of `wirebench app` (its own table: its figures are not a run's points).
fn app_id(spec: &str) -> Option<&str> {
    spec.strip_prefix("app:")
}

fn load_app(db: &Db, spec: &str) -> Result<crate::app::speedup::AppReport> {
    let raw = app_id(spec).unwrap_or(spec);
    let id: i64 = raw
        .parse()
        .map_err(|_| anyhow::anyhow!("'{spec}': an application run is app:ID, ID a number"))?;
    let json = db.load_app(id)?;
    serde_json::from_str(&json).with_context(|| format!("reading application run {id}"))
}

/// The application runs below the history, when there are any.
fn app_history(db: &Db, filter: &Filter, style: Style) -> Result<String> {
    let apps = db.list_app_runs(filter)?;
    if apps.is_empty() {
        return Ok(String::new());
    }
    let mut t = Table::new(vec![
        Column::right("id"),
        Column::left("started (UTC)"),
        Column::left("kernel"),
        Column::left("transport"),
        Column::right("ranks"),
    ]);
    for a in apps {
        t.row([
            a.id.to_string(),
            a.started_at,
            a.kernel,
            a.transport,
            a.ranks.to_string(),
        ]);
    }
    Ok(format!(
        "\n{}{}",
        comment(
            style,
            "application runs (wirebench app; show with `wirebench show app:ID`):"
        ),
        t.render(style)
    ))
}

fn load_all(db: &Db, specs: &[String]) -> Result<Vec<(i64, RunDocument)>> {
    specs.iter().map(|s| load(db, s)).collect()
}

/// The loaded reports as the figures and the HTML report take them.
fn as_runs(loaded: &[(i64, RunDocument)]) -> Vec<Run<'_>> {
    loaded
        .iter()
        .map(|(id, r)| Run { id: *id, report: r })
        .collect()
}

/// "5%" or "5": a percentage, at least 0.
pub fn parse_percent(s: &str) -> Result<f64> {
    let t = s.trim();
    let v: f64 = t
        .strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| anyhow!("invalid percentage \"{s}\": expected e.g. 5% or 2.5%"))?;
    if !v.is_finite() || v < 0.0 {
        bail!("invalid percentage \"{s}\": expected a non-negative number such as 5%");
    }
    Ok(v)
}

/// A time bound as stored times are written (RFC 3339, UTC, milliseconds), so that text
/// order is time order: from a UTC date (2025-01-31) or an RFC 3339 date-time, in UTC (Z, or
/// no zone) or with an offset (+02:00, -05:30).
pub fn time_bound(s: &str, what: &str) -> Result<String> {
    let bad = || {
        anyhow!("{what}: invalid time \"{s}\": expected a UTC date 2025-01-31 or an RFC 3339 time 2025-01-31T12:00:00Z")
    };
    let t = s.trim();
    if t.len() == 10 {
        let time = humantime::parse_rfc3339_weak(&format!("{t}T00:00:00Z")).map_err(|_| bad())?;
        return Ok(humantime::format_rfc3339_millis(time).to_string());
    }
    // An offset east of UTC is subtracted, one west of it added.
    let (local, offset_s) = match t.len().checked_sub(6).and_then(|i| t.split_at_checked(i)) {
        Some((head, zone))
            if head.len() >= 19 && matches!(zone.as_bytes(), [b'+' | b'-', _, _, b':', _, _]) =>
        {
            let h: i64 = zone[1..3].parse().map_err(|_| bad())?;
            let m: i64 = zone[4..6].parse().map_err(|_| bad())?;
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            (head, sign * (h * 3600 + m * 60))
        }
        _ => (t, 0),
    };
    let time = humantime::parse_rfc3339_weak(local).map_err(|_| bad())?;
    let utc = if offset_s >= 0 {
        time.checked_sub(std::time::Duration::from_secs(offset_s.unsigned_abs()))
    } else {
        time.checked_add(std::time::Duration::from_secs(offset_s.unsigned_abs()))
    }
    .ok_or_else(bad)?;
    Ok(humantime::format_rfc3339_millis(utc).to_string())
}

fn plot(a: PlotArgs) -> Result<()> {
    let ext = a
        .output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let png_out = match ext.as_deref() {
        Some("svg") => false,
        Some("png") => true,
        _ => bail!(
            "-o {}: the file name must end in .svg or .png",
            a.output.display()
        ),
    };
    let db = open_existing(&a.db)?;
    let loaded = load_all(&db, &a.ids)?;
    let runs = as_runs(&loaded);
    let pattern = &runs[0].report.pattern;
    if let Some(other) = runs.iter().find(|r| &r.report.pattern != pattern) {
        bail!(
            "run #{} measured {} and run #{} {}: one figure shows runs of one pattern",
            runs[0].id,
            pattern,
            other.id,
            other.report.pattern
        );
    }
    let first = &runs[0];
    let interval_point = || {
        let pts = series::points_with_intervals(first.report);
        match a.point {
            Some(i) => pts.into_iter().find(|p| p.index == i),
            None => pts.into_iter().next(),
        }
    };
    let figure = match a.kind {
        PlotKind::Throughput => series::throughput(&runs),
        PlotKind::Latency => series::latency(&runs),
        PlotKind::Signature => series::signature(&runs),
        PlotKind::Histogram => series::distribution(&runs, a.point, DistributionKind::Histogram),
        PlotKind::Cdf => series::distribution(&runs, a.point, DistributionKind::Cdf),
        PlotKind::Percentiles => {
            series::distribution(&runs, a.point, DistributionKind::Percentiles)
        }
        PlotKind::Heatmap => series::heatmaps(first).into_iter().next(),
        PlotKind::Intervals => {
            interval_point().and_then(|p| series::intervals(first, p, IntervalKind::Throughput))
        }
        PlotKind::Cwnd => {
            interval_point().and_then(|p| series::intervals(first, p, IntervalKind::Cwnd))
        }
        PlotKind::Rtt => {
            interval_point().and_then(|p| series::intervals(first, p, IntervalKind::Rtt))
        }
        PlotKind::Qps => series::qps(&runs),
        PlotKind::Path => series::path(&runs),
    };
    let Some(figure) = figure else {
        // A distribution whose every point was left out as not valid says which and why.
        let left_out = match a.kind {
            PlotKind::Histogram | PlotKind::Cdf | PlotKind::Percentiles => {
                series::distribution_left_out(&runs, a.point)
            }
            _ => Vec::new(),
        };
        if !left_out.is_empty() {
            bail!(
                "no valid latency distribution to draw: {} left out, its latency not valid ({})",
                left_out.len(),
                left_out.join("; ")
            );
        }
        bail!("{}", missing(a.kind, pattern.name(), a.point));
    };
    let svg = plots::render_svg(&figure)?;
    let bytes = if png_out {
        png::svg_to_png(&svg)?
    } else {
        svg.into_bytes()
    };
    crate::outfile::write(&a.output, &bytes, a.force.force)?;
    let kind = a.kind.to_possible_value();
    let kind = kind.as_ref().map_or("figure", |v| v.get_name());
    eprintln!("{}", wrote(&a.output, kind));
    Ok(())
}

/// The line on stderr that says which file a command wrote: "wrote report.html (3 figures)".
pub fn wrote(path: &std::path::Path, what: &str) -> String {
    format!(
        "wrote {} ({what})",
        crate::text::printable(&path.display().to_string())
    )
}

/// Why a figure cannot be drawn from these runs.
fn missing(kind: PlotKind, pattern: &str, point: Option<usize>) -> String {
    let at = point.map(|p| format!(" at point {p}")).unwrap_or_default();
    match kind {
        PlotKind::Latency | PlotKind::Histogram | PlotKind::Cdf | PlotKind::Percentiles
            if pattern == "stream" =>
        {
            format!("a {pattern} run has no latency samples: try --kind throughput")
        }
        PlotKind::Signature => "the signature graph needs a pingpong run with measured points".into(),
        PlotKind::Qps => "the QPS curve needs an open-loop rr run (--arrivals poisson --rate 5k,20k,50k) with valid points".into(),
        PlotKind::Path => "the path timing figure needs a pingpong or rr run with --path-timing".into(),
        PlotKind::Heatmap => "a heatmap needs a run that sweeps two parameters (e.g. --sndbuf and --rcvbuf)".into(),
        PlotKind::Intervals | PlotKind::Cwnd | PlotKind::Rtt => format!(
            "no interval reports{at}: they come from stream runs with --interval (cwnd and rtt over TCP)"
        ),
        PlotKind::Histogram | PlotKind::Cdf | PlotKind::Percentiles => {
            format!("no latency distribution{at} in these runs")
        }
        _ => "the runs have no measured point to plot".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds_read_dates_utc_times_and_offsets() {
        let b = |s| time_bound(s, "--since").unwrap();
        assert_eq!(b("2025-01-31"), "2025-01-31T00:00:00.000Z");
        assert_eq!(b("2025-01-31T12:00:00Z"), "2025-01-31T12:00:00.000Z");
        assert_eq!(b("2025-01-31T12:00:00"), "2025-01-31T12:00:00.000Z");
        assert_eq!(b("2025-01-31T12:00:00.250Z"), "2025-01-31T12:00:00.250Z");
        assert_eq!(b("2025-01-31T12:00:00+02:00"), "2025-01-31T10:00:00.000Z");
        assert_eq!(b("2025-01-31T23:30:00-05:30"), "2025-02-01T05:00:00.000Z");
        for bad in [
            "yesterday",
            "2025-13-01",
            "2025-01-31T25:00:00Z",
            "2025-01-31T12:00:00+24:00",
            "",
        ] {
            let e = time_bound(bad, "--until").unwrap_err().to_string();
            assert!(e.starts_with("--until: invalid time"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
