//! Rank 0's output of a mesh: the matrices as text (or the document as JSON), the document
//! in the results database and in `--output`, and a heatmap of each matrix (`--report DIR`).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::MeshRequest;
use crate::error::{one_line, EXIT_FAILURE};
use crate::figures::mesh_figures::heatmaps;
use crate::figures::plots::{self, Figure};
use crate::model::mesh::{cell_of, in_pair_order, MeshResult};
use crate::model::RunDocument;
use crate::request::Format;
use crate::text::table::{units_line, Column, Style, Table};
use crate::units::{format_seconds, format_us, RateUnit};

/// Prints, writes and saves the mesh's document; the exit code: a failure when a pair failed
/// or any of the outputs could not be written.
pub fn finish(mesh: &MeshRequest, report: RunDocument) -> i32 {
    let mut failures: Vec<anyhow::Error> = Vec::new();
    let out = &mesh.request.output;
    let shown = match out.format {
        Format::Json => crate::output::json::to_string(&report)
            .context("encoding the result")
            .map(|s| println!("{s}")),
        _ => {
            let style = if mesh.markdown {
                Style::Markdown
            } else {
                Style::Plain
            };
            print!("{}", render(&report, style));
            Ok(())
        }
    };
    failures.extend(shown.err());
    if out.save {
        match crate::store::db::resolve(out.db.as_deref()) {
            Ok(path) => {
                let saved = crate::store::db::Db::open_or_create(&path)
                    .and_then(|db| db.insert(&report, crate::store::db::Source::Mesh));
                match saved {
                    Ok(id) => eprintln!("# saved as run {id} in {}", path.display()),
                    Err(e) => {
                        // A mesh is saved only once it is over: all its pairs would be lost
                        // with it (a full disk, a read-only database).
                        crate::store::save::recover_document(&report, &path, &one_line(&e));
                        failures.push(e.context("saving the mesh"));
                    }
                }
            }
            Err(e) => failures.push(e.context("saving the mesh")),
        }
    }
    if let Some(path) = &out.file {
        let written = crate::output::json::to_string(&report)
            .context("encoding the result")
            .and_then(|s| crate::outfile::write(path, (s + "\n").as_bytes(), out.force));
        failures.extend(written.err());
    }
    if let (Some(dir), Some(m)) = (&mesh.report_dir, &report.mesh) {
        match write_heatmaps(m, dir, out.force) {
            Ok(files) => {
                for f in files {
                    eprintln!("# wrote {}", f.display());
                }
            }
            Err(e) => failures.push(e),
        }
    }
    for e in &failures {
        eprintln!("wirebench: error: {}", one_line(e));
    }
    if let Some(e) = &report.error {
        eprintln!("wirebench: error: {e}");
    }
    if failures.is_empty() && report.complete {
        0
    } else {
        EXIT_FAILURE
    }
}

/// A grid of `value(from, to)` (blank where not measured, "!" after a figure that is not a
/// valid measurement), each number already in the grid's unit.
fn grid(
    out: &mut String,
    style: Style,
    n: usize,
    value: &dyn Fn(usize, usize) -> Option<(f64, bool)>,
    number: &dyn Fn(f64) -> String,
) {
    let mut columns = vec![Column::right("from\\to")];
    columns.extend((0..n).map(|c| Column::right(c.to_string())));
    let mut t = Table::new(columns);
    for from in 0..n {
        let mut row = vec![from.to_string()];
        row.extend((0..n).map(|to| match value(from, to) {
            Some((v, true)) => number(v),
            Some((v, false)) => format!("{}!", number(v)),
            None if from == to => "-".to_owned(),
            None => String::new(),
        }));
        t.row(row);
    }
    out.push_str(&t.render(style));
    if style == Style::Markdown {
        out.push('\n');
    }
}

/// The one rate unit of a mesh's view: its bandwidth cells, their means over runs and its
/// pairs' sweeps' r_max.
fn rate_unit(mesh: &MeshResult) -> RateUnit {
    let cells = mesh
        .matrices
        .iter()
        .filter_map(|m| m.bandwidth.as_ref())
        .flat_map(|b| b.cells.iter())
        .flat_map(|c| {
            [
                Some(c.sender_bits_per_s),
                Some(c.receiver_bits_per_s),
                c.over_runs.as_ref().map(|m| m.mean),
            ]
            .into_iter()
            .flatten()
        });
    let sweeps = mesh
        .pairs
        .iter()
        .flat_map(|p| p.sweep_metrics.iter().map(|g| g.metrics.r_max_bits_per_s));
    RateUnit::for_rates(cells.chain(sweeps))
}

/// The matrices as plain text.
pub fn render_text(report: &RunDocument) -> String {
    render(report, Style::Plain)
}

/// The matrices as text: a grid of each headline figure (rows: client or sending rank), then
/// every cell's figures with units and sample counts, then each pair's sweep metrics. The
/// grids as Markdown tables with `Style::Markdown`.
pub fn render(report: &RunDocument, style: Style) -> String {
    let mut out = String::new();
    let Some(mesh) = &report.mesh else {
        return out;
    };
    let n = mesh.ranks.len();
    let rates = rate_unit(mesh);
    let _ = writeln!(
        out,
        "mesh: {} over {}, {} ranks, {} pairs in {} rounds{}",
        report.pattern.name(),
        report.transport.name(),
        n,
        mesh.pairs.len(),
        mesh.rounds.len(),
        if mesh.serial {
            " (one pair at a time)"
        } else {
            ""
        }
    );
    out.push_str(&units_line(
        style,
        &format!("times in us, rates in {}, sizes in bytes", rates.name()),
    ));
    let st = &report.settings;
    let _ = writeln!(
        out,
        "  each pair: {}warm-up {} iterations, {}% confidence, {} run(s) per point",
        st.duration_ns
            .map(|ns| format!("timed phase {}, ", format_seconds(ns as f64 / 1e9)))
            .unwrap_or_default(),
        st.warmup,
        (st.confidence * 100.0).round(),
        st.repeat
    );
    for r in &mesh.ranks {
        let _ = writeln!(
            out,
            "  rank {}: {} on {}{}",
            r.rank,
            r.address,
            r.environment.hostname,
            r.netns
                .as_ref()
                .map(|ns| format!(" (namespace {ns})"))
                .unwrap_or_default()
        );
    }
    for m in &mesh.matrices {
        if let Some(l) = &m.latency {
            let what = if l.kind == "one_way" {
                "one-way latency (RTT/2)"
            } else {
                "round-trip (transaction) time"
            };
            let level = (l.confidence * 100.0).round();
            let _ = writeln!(
                out,
                "\n{what}, {}: mean, us (rows: client rank)",
                m.size_name()
            );
            grid(
                &mut out,
                style,
                n,
                &|f, t| cell_of(&l.cells, f, t).map(|c| (c.mean_ns, !c.validity.is_invalid())),
                &crate::units::us,
            );
            for c in in_pair_order(&l.cells) {
                let _ =
                    writeln!(
                    out,
                    "  {}->{}: mean {} +- {} ({level}% CI), p50 {}, p99 {}{}, n={} samples{}{}{}",
                    c.from,
                    c.to,
                    format_us(c.mean_ns),
                    c.ci_ns.map_or("-".to_owned(), crate::units::us),
                    format_us(c.p50_ns),
                    format_us(c.p99_ns),
                    c.p99_validity().mark(),
                    c.samples,
                    if c.runs > 1 { format!(" over {} runs", c.runs) } else { String::new() },
                    c.validity
                        .invalid_reason
                        .as_ref()
                        .map(|r| format!("  ! not valid: {r}"))
                        .unwrap_or_default(),
                    c.p99_invalid_reason
                        .as_ref()
                        .map(|r| format!("  ! p99: {r}"))
                        .unwrap_or_default()
                );
            }
        }
        if let Some(b) = &m.bandwidth {
            let _ = writeln!(
                out,
                "\nbandwidth, {}: receiver, {} (rows: sending rank)",
                m.size_name(),
                rates.name()
            );
            grid(
                &mut out,
                style,
                n,
                &|f, t| {
                    cell_of(&b.cells, f, t)
                        .map(|c| (c.receiver_bits_per_s, c.receiver_valid != Some(false)))
                },
                &|v| rates.format(v),
            );
            for c in in_pair_order(&b.cells) {
                let _ = writeln!(
                    out,
                    "  {}->{}: sender {} ({} bytes in {}), receiver {} ({} bytes in {}), {} stream{}{}{}",
                    c.from,
                    c.to,
                    rates.with_unit(c.sender_bits_per_s),
                    c.sender_bytes_timed,
                    format_seconds(c.sender_elapsed_ns as f64 / 1e9),
                    rates.with_unit(c.receiver_bits_per_s),
                    c.receiver_bytes_timed,
                    format_seconds(c.receiver_elapsed_ns as f64 / 1e9),
                    c.streams,
                    if c.streams == 1 { "" } else { "s" },
                    c.over_runs
                        .as_ref()
                        .map(|m| format!(
                            ", over {} runs {} {} +- {}",
                            m.n,
                            rates.format(m.mean),
                            rates.name(),
                            m.half_width.map_or("-".to_owned(), |h| rates.format(h))
                        ))
                        .unwrap_or_default(),
                    c.receiver_invalid_reason
                        .as_ref()
                        .or(c.sender_invalid_reason.as_ref())
                        .map(|r| format!("  ! not valid: {r}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    let swept: Vec<_> = mesh
        .pairs
        .iter()
        .flat_map(|p| p.sweep_metrics.iter().map(move |g| (p, g)))
        .collect();
    if !swept.is_empty() {
        out.push_str("\nsize sweep per pair (one-way times):\n");
        for (p, g) in swept {
            let m = &g.metrics;
            let _ = writeln!(
                out,
                "  {}->{}: t0 {} +- {} (at {} B), r_max {} (at {} B), n_1/2 {}, over {} sizes{}",
                p.client,
                p.server,
                format_us(m.t0_ns),
                m.t0_ci_ns.map_or("-".to_owned(), crate::units::us),
                m.t0_size,
                rates.with_unit(m.r_max_bits_per_s),
                m.r_max_size,
                m.n_half_bytes
                    .map_or("-".to_owned(), |b| format!("{b:.0} B")),
                m.points,
                if m.r_max_at_largest == Some(true) {
                    " (r_max at the largest size: a lower bound)"
                } else {
                    ""
                }
            );
        }
    }
    let failed: Vec<_> = mesh.pairs.iter().filter(|p| !p.complete).collect();
    if !failed.is_empty() {
        out.push_str("\nfailed pairs:\n");
        for p in failed {
            let _ = writeln!(
                out,
                "  {}->{}: {}",
                p.client,
                p.server,
                p.error.as_deref().unwrap_or("incomplete")
            );
        }
    }
    out
}

/// Refuses, before the mesh measures, the files rank 0 would write at its end and could not
/// (see [`crate::outfile`]): `--output`, and in `--report DIR` every heatmap a plan of
/// `points` points may draw.
pub fn check_outputs(mesh: &MeshRequest, points: usize) -> Result<()> {
    let out = &mesh.request.output;
    if let Some(path) = &out.file {
        crate::outfile::check(path, out.force)?;
    }
    if let Some(dir) = &mesh.report_dir {
        let names: Vec<String> = (1..=points)
            .flat_map(|i| {
                ["latency", "bandwidth-receiver", "bandwidth-sender"]
                    .into_iter()
                    .flat_map(move |m| ["svg", "png"].map(|ext| format!("mesh-{i}-{m}.{ext}")))
            })
            .collect();
        crate::outfile::check_dir(dir, names.iter().map(String::as_str), out.force)?;
    }
    Ok(())
}

/// Writes NAME.svg and NAME.png of every heatmap into `dir`, all drawn and checked before
/// the first is written, by the rules of [`crate::outfile`]; the files written.
pub fn write_heatmaps(
    mesh: &MeshResult,
    dir: &Path,
    force: bool,
) -> Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for (name, h) in heatmaps(mesh) {
        let svg = plots::render_svg(&Figure::Heatmap(h))?;
        let png = crate::figures::png::svg_to_png(&svg)?;
        files.push((format!("{name}.svg"), svg.into_bytes()));
        files.push((format!("{name}.png"), png));
    }
    crate::outfile::OutDir::open(dir, force)?.write_files(&files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mesh::{MeshPair, MeshRank};

    fn two_rank_mesh() -> RunDocument {
        let mut doc = crate::store::db::tests::report("pingpong", 1, 4000.0);
        let mut bad = doc.points.clone();
        bad[0].latency.as_mut().unwrap().validity =
            crate::stats::Validity::invalid("12 samples: below the floor");
        let pairs = vec![
            MeshPair {
                client: 0,
                server: 1,
                round: 0,
                started_at: None,
                finished_at: None,
                points: doc.points.clone(),
                sweep_metrics: Vec::new(),
                complete: true,
                error: None,
            },
            MeshPair {
                client: 1,
                server: 0,
                round: 1,
                started_at: None,
                finished_at: None,
                points: bad,
                sweep_metrics: Vec::new(),
                complete: true,
                error: None,
            },
        ];
        let matrices = super::super::matrix::assemble(&pairs, 0.95);
        doc.points.clear();
        doc.mesh = Some(MeshResult {
            ranks: (0..2)
                .map(|rank| MeshRank {
                    rank,
                    address: format!("192.0.2.{}:5320", rank + 1),
                    netns: None,
                    environment: Default::default(),
                })
                .collect(),
            rounds: Vec::new(),
            serial: false,
            pairs,
            matrices,
        });
        doc
    }

    #[test]
    fn the_text_gives_every_cell_with_units_and_counts_and_marks_invalid_ones() {
        let text = render_text(&two_rank_mesh());
        assert!(
            text.contains("one-way latency (RTT/2), 1 B: mean, us"),
            "{text}"
        );
        // RTT 4 us: 2 us one way; p99 of the RTT (8 us) halved.
        assert!(
            text.contains(
                "0->1: mean 2.00 us +- 0.05 (95% CI), p50 2.00 us, p99 4.00 us, n=1000 samples"
            ),
            "{text}"
        );
        assert!(text.contains("2.00!"), "{text}");
        assert!(text.contains("! not valid: 12 samples"), "{text}");
    }

    /// The grid's lines: from its header ("from\\to") to the first line of the cells' details.
    fn grid_lines(text: &str) -> String {
        text.lines()
            .skip_while(|l| !l.contains("from\\to"))
            .take_while(|l| !l.contains("->") && !l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn the_grid_aligns_with_invalid_marks_and_as_markdown_has_every_cell() {
        use crate::text::table::{check_aligned, Align};
        let doc = two_rank_mesh();
        let text = render_text(&doc);
        let grid = grid_lines(&text);
        assert_eq!(grid.lines().count(), 3, "{text}");
        assert_eq!(
            check_aligned(&grid, &[Align::Right; 3], ""),
            Ok(()),
            "{text}"
        );
        assert!(
            text.contains("\n# units: times in us, rates in Mbit/s"),
            "{text}"
        );
        let md = render(&doc, Style::Markdown);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 4, "{md}");
        assert!(rows.iter().all(|l| l.matches('|').count() == 4), "{md}");
    }

    /// A mesh the database cannot take goes whole to a recovery file beside it, counted by its
    /// pairs (its points are in them), and imports as it was.
    #[test]
    fn a_mesh_the_database_cannot_take_is_left_in_a_recovery_file() {
        let dir = tempfile::tempdir().unwrap();
        let doc = two_rank_mesh();
        crate::store::save::recover_document(
            &doc,
            &dir.path().join("r.sqlite"),
            "database or disk is full",
        );
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("wirebench-recovery-"), "{name}");
        let back =
            crate::store::db::parse_report(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
        assert_eq!(back.mesh.unwrap().pairs, doc.mesh.unwrap().pairs);
    }

    #[test]
    fn a_heatmap_per_matrix_with_invalid_cells_left_uncoloured() {
        let doc = two_rank_mesh();
        let maps = heatmaps(doc.mesh.as_ref().unwrap());
        assert_eq!(maps.len(), 1);
        let (name, h) = &maps[0];
        assert_eq!(name, "mesh-1-latency");
        assert_eq!(h.cells.len(), 2);
        let valid: Vec<_> = h.cells.iter().filter(|c| c.value.is_some()).collect();
        assert_eq!(valid.len(), 1);
        // Row: the client (0), column: the server (1).
        assert_eq!((valid[0].row, valid[0].column), (0, 1));
        assert_eq!(valid[0].value, Some(2.0));
    }

    /// `--report DIR` and `--output`: what rank 0 checks before the mesh measures covers
    /// every heatmap it writes at the end; a link planted at one is refused then, even with
    /// --force, and a second report into DIR only with --force.
    #[test]
    fn mesh_outputs_are_checked_before_measuring_and_never_written_through_a_link() {
        let doc = two_rank_mesh();
        let m = doc.mesh.as_ref().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mesh");
        let mut mesh = MeshRequest {
            request: crate::request::Request::default(),
            selection: crate::mesh::Selection::All,
            serial: false,
            netns_prefix: None,
            bind: None,
            report_dir: Some(dir.clone()),
            markdown: false,
        };
        mesh.request.output.file = Some(tmp.path().join("mesh.json"));
        check_outputs(&mesh, 1).unwrap();
        let written = write_heatmaps(m, &dir, false).unwrap();
        assert_eq!(written.len(), 2);
        for f in &written {
            let e = check_outputs(&mesh, 1).unwrap_err().to_string();
            assert!(
                e.contains("exists; wirebench does not replace files"),
                "{e}"
            );
            std::fs::remove_file(f).unwrap();
        }
        check_outputs(&mesh, 1).unwrap();

        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, &written[0]).unwrap();
        for force in [false, true] {
            mesh.request.output.force = force;
            let e = check_outputs(&mesh, 1).unwrap_err().to_string();
            assert!(e.contains("is a symbolic link"), "{e}");
            let e = write_heatmaps(m, &dir, force).unwrap_err().to_string();
            assert!(e.contains("is a symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_file(&written[0]).unwrap();
        write_heatmaps(m, &dir, false).unwrap();
        assert!(write_heatmaps(m, &dir, false).is_err());
        write_heatmaps(m, &dir, true).unwrap();
    }
}
