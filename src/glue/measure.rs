//! The one path from a request to its output: plan, run, print, save. `run`, `lab run`,
//! `mpi` and anything else that measures a [`Request`] end here, whatever carries the data.

use anyhow::Context;

use crate::error::{fail, one_line, EXIT_FAILURE};
use crate::output::json::{JsonSink, JsonStreamSink};
use crate::output::{csv::CsvSink, table::TableSink};
use crate::plan::runner::{self, PointRunner};
use crate::plan::sink::Sink;
use crate::request::{Format, Request};

/// Measures `request` against a wirebench server (started on loopback when it names none),
/// prints it and saves it; `lab` describes the emulated link it runs over, if any. The exit
/// code of the run.
pub fn run(request: &Request, lab: Option<crate::lab::LabState>) -> i32 {
    let mut point_runner = runner::ControlRunner::new(request);
    run_with(request, lab, &mut point_runner)
}

/// As [`run`], with `point_runner` measuring each point.
pub fn run_with(
    request: &Request,
    lab: Option<crate::lab::LabState>,
    point_runner: &mut dyn PointRunner,
) -> i32 {
    let plan = match crate::plan::build(request) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if let Err(e) = check_outputs(request, &plan) {
        return fail(&e);
    }
    // A load that cannot be resolved fails before anything is attached or measured.
    if let Some(load) = &request.load {
        if let Err(e) = crate::plan::load::resolve(load.spec, lab.as_ref()) {
            return fail(&e);
        }
    }
    let sink: Box<dyn Sink> = match request.output.format {
        Format::JsonStream => Box::new(JsonStreamSink::default()),
        Format::Json => Box::new(JsonSink::default()),
        Format::Csv => match CsvSink::default().with_columns(request.output.columns.as_deref()) {
            Ok(s) => Box::new(s),
            Err(e) => return fail(&e),
        },
        Format::Table | Format::Markdown => Box::new(
            TableSink::new()
                .with_host_cpu(request.output.host_cpu)
                .with_columns(request.output.columns.clone())
                .with_style(if request.output.format == Format::Markdown {
                    crate::text::table::Style::Markdown
                } else {
                    crate::text::table::Style::Plain
                }),
        ),
    };
    let (mut sink, saved) = match crate::store::save::attach(&request.output, sink) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    runner::stop_on_ctrl_c(crate::store::save::recover_before_exit);
    let mut run_report = runner::new_report(&plan, request);
    run_report.lab = lab.clone();
    let result = with_load_and_competition(request, lab.as_ref(), point_runner, |r| {
        runner::run_with(&plan, &mut run_report, sink.as_mut(), r)
    })
    .and_then(|r| r);
    run_report.finished_at = Some(crate::env::now_rfc3339());
    run_report.complete = result.is_ok();
    run_report.error = result.as_ref().err().map(one_line);
    let shown = sink.finish(&run_report);
    if let Err(e) = &shown {
        // A write that failed during the run fails again here: said once.
        if result.as_ref().err().map(one_line) != Some(one_line(e)) {
            fail(e);
        }
    }
    if let Err(e) = saved.outcome() {
        fail(&e);
        if result.is_ok() {
            return EXIT_FAILURE;
        }
    }
    let force = request.output.force;
    // Each file is written even when the other could not be: the document is the run's.
    let mut unwritten = false;
    if let Some(path) = &request.plot {
        if let Err(e) = crate::figures::load_figures::write(&run_report, path, force) {
            fail(&e);
            unwritten = true;
        }
    }
    if let Some(path) = &request.output.file {
        let written = crate::output::json::to_string(&run_report)
            .context("encoding the result")
            .and_then(|s| crate::outfile::write(path, (s + "\n").as_bytes(), force));
        if let Err(e) = written {
            fail(&e);
            unwritten = true;
        }
    }
    if unwritten {
        return EXIT_FAILURE;
    }
    match result {
        Ok(()) if shown.is_ok() => 0,
        Ok(()) => EXIT_FAILURE,
        Err(e) => fail(&e),
    }
}

/// Runs `f` with `point_runner` wrapped as the request asks: `--load` (the same points, each
/// with background load beside it) and `--compete` (the measured stream with competing flows
/// beside it). Err when the load cannot be resolved.
fn with_load_and_competition<R>(
    request: &Request,
    lab: Option<&crate::lab::LabState>,
    point_runner: &mut dyn PointRunner,
    f: impl FnOnce(&mut dyn PointRunner) -> R,
) -> anyhow::Result<R> {
    let mut loaded;
    let point_runner: &mut dyn PointRunner = match &request.load {
        Some(load) => {
            let spec = crate::plan::load::resolve(load.spec, lab)?;
            loaded = crate::plan::load::LoadedRunner::new(
                point_runner,
                request,
                load.spec,
                spec,
                load.only,
            );
            &mut loaded
        }
        None => point_runner,
    };
    let mut competing;
    let point_runner: &mut dyn PointRunner = if request.compete.is_empty() {
        point_runner
    } else {
        competing = crate::plan::compete::CompetingRunner::new(point_runner, request);
        &mut competing
    };
    Ok(f(point_runner))
}

/// Measures `request` in this process with nothing printed and nothing saved (the caller
/// saves the document): the result document, complete or not, and how the run ended. For
/// callers that measure many runs over time (`wirebench agent`), where a process per run
/// would cost more than the run.
pub fn measure_quietly(
    request: &Request,
) -> (Option<crate::model::RunDocument>, anyhow::Result<()>) {
    let plan = match crate::plan::build(request) {
        Ok(p) => p,
        Err(e) => return (None, Err(e)),
    };
    let mut point_runner = runner::ControlRunner::new(request);
    let mut run_report = runner::new_report(&plan, request);
    let mut sink = QuietSink;
    let result = with_load_and_competition(request, None, &mut point_runner, |r| {
        runner::run_with(&plan, &mut run_report, &mut sink, r)
    })
    .and_then(|r| r);
    run_report.finished_at = Some(crate::env::now_rfc3339());
    run_report.complete = result.is_ok();
    run_report.error = result.as_ref().err().map(one_line);
    (Some(run_report), result)
}

/// A sink that shows nothing, not even a progress bar.
struct QuietSink;

impl Sink for QuietSink {
    fn begin(&mut self, _: &crate::model::RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
    fn point(
        &mut self,
        _: &crate::model::RunDocument,
        _: &crate::model::PointResult,
    ) -> anyhow::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &crate::model::RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
    fn progress(&self, _: u64, _: Option<f64>) -> indicatif::ProgressBar {
        indicatif::ProgressBar::hidden()
    }
}

/// Refuses, before anything is measured, the files the run would write at its end or per
/// point and could not (see [`crate::outfile`]): a minute of measurement is not spent to
/// find `--output` taken.
fn check_outputs(request: &Request, plan: &crate::plan::RunPlan) -> anyhow::Result<()> {
    let force = request.output.force;
    if let Some(path) = &request.output.file {
        crate::outfile::check(path, force)?;
    }
    if let Some(t) = &request.trace {
        for f in crate::plan::trace::files(t, plan) {
            crate::outfile::check(&f, force)?;
        }
    }
    if let Some(path) = &request.plot {
        crate::figures::load_figures::check(path, plan.points.len(), force)?;
    }
    Ok(())
}
