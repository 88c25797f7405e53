//! `wirebench study`: whole experiments from one file; and `wirebench __measure`, the hidden
//! command a study runs each of its points with.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::request::{Format, Request};
use crate::store::db::{self, Db};
use crate::study::{execute, show, store};

#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  wirebench study studies/tcp-window-by-write-size.toml\n  wirebench study studies/tcp-window-by-write-size.toml --resume   # after an interruption\n  wirebench study show last\n  wirebench study report last --out fig/\n\nThe study file format is described in studies/README.md."
)]
pub struct StudyArgs {
    /// The study file (TOML): fixed settings, axes, repetitions, order, policies.
    pub file: Option<PathBuf>,
    /// Go on with the latest unfinished study of this file's name, skipping finished runs
    /// (the file must not have changed).
    #[arg(long)]
    pub resume: bool,
    /// Tiny durations, one repetition, short searches: checks that the file runs end to end.
    #[arg(long)]
    pub smoke: bool,
    /// The results database (default: as for `run`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<StudyCommand>,
}

#[derive(Debug, Subcommand)]
pub enum StudyCommand {
    /// A study's points: each figure's mean and interval over the runs, anomalies, searches.
    Show {
        /// The study's number, or `last`.
        id: String,
        /// As JSON (schema wirebench.study).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// How the table is printed: table (aligned columns) or markdown.
        #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
        format: super::TableFormat,
        /// The results database (default: as for `run`).
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
    /// A study's HTML page (index.html) and every figure as SVG and PNG, written into DIR:
    /// heatmaps of two axes, curves per axis value, bars per category, counter deltas.
    Report {
        /// The study's number, or `last`.
        id: String,
        /// Directory to write into (created if missing). A file of the report that exists
        /// there is refused before any is written, unless --force.
        #[arg(long, short, value_name = "DIR", default_value = "study-report")]
        out: PathBuf,
        #[command(flatten)]
        force: super::ForceArg,
        /// The results database (default: as for `run`).
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
    /// The studies saved in the database.
    List {
        /// As JSON (schema wirebench.study).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// How the table is printed: table (aligned columns) or markdown.
        #[arg(long, value_enum, default_value_t = super::TableFormat::Table)]
        format: super::TableFormat,
        /// The results database (default: as for `run`).
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
}

pub fn run(args: StudyArgs) -> Result<i32> {
    match args.command {
        Some(StudyCommand::Show {
            id,
            json,
            format,
            db,
        }) => {
            let db = Db::open_existing(&db::resolve(db.as_deref())?)?;
            let id = store::resolve(&db, &id)?;
            let shown = show::Shown::load(&db, id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&shown)?);
            } else {
                print!("{}", shown.render(format.style()));
            }
            Ok(0)
        }
        Some(StudyCommand::Report { id, out, force, db }) => {
            let db = Db::open_existing(&db::resolve(db.as_deref())?)?;
            let id = store::resolve(&db, &id)?;
            let shown = show::Shown::load(&db, id)?;
            for f in crate::study::grid::write_report(&shown, &out, force.force)? {
                println!("{}", f.display());
            }
            Ok(0)
        }
        Some(StudyCommand::List { json, format, db }) => {
            let db = Db::open_existing(&db::resolve(db.as_deref())?)?;
            let rows = store::list(&db)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "schema": "wirebench.studies", "schema_version": 1, "studies": rows }))?
                );
            } else {
                print!("{}", show::list_table(&rows, format.style()));
            }
            Ok(0)
        }
        None => {
            let Some(file) = args.file else {
                anyhow::bail!(
                    "give a study file (wirebench study FILE.toml), or show, report or list"
                );
            };
            execute::run(&execute::Options {
                file,
                resume: args.resume,
                db: args.db,
                smoke: args.smoke,
            })
        }
    }
}

/// `__measure`: one run from a request on stdin, its result document on stdout.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// The lab this run is in (recorded with the result, for its physics checks).
    #[arg(long)]
    pub lab: Option<String>,
}

pub fn measure(args: MeasureArgs) -> Result<i32> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the request")?;
    let mut request: Request = serde_json::from_str(&input).context("reading the request")?;
    request.output.format = Format::Json;
    request.output.save = false;
    let lab = args.lab.as_deref().map(crate::lab::load).transpose()?;
    Ok(crate::glue::measure::run(&request, lab))
}
