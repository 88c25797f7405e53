//! Application kernels over P ranks (`wirebench app`): the matrix multiply and Jacobi relaxation of
//! [Local ATM computing n.d.], the chunk server of [Petri and Eickermann 2007] (see REFERENCES.md).
//! Each is written once against [`Peers`], a connection from every rank to every other over
//! whatever transport carries them; the ranks start and gather through a [`Group`] (the control
//! plane), never through the connections they time.
//!
//! Every repetition of a point measures, in the same run, the sequential baseline (the same
//! computation on rank 0 alone, no communication) and the parallel run (started together
//! after a barrier; the parallel time is the longest of the ranks' times, each from its own
//! release, so clocks of different hosts are never compared), and checks the parallel answer
//! against the sequential one: a wrong answer ends the run with an error, never a figure.
//! Connection setup is outside every timing, as in [Local ATM computing n.d.].

pub mod chunks;
pub mod grid;
pub mod jacobi;
pub mod matmul;
pub mod peers;
pub mod speedup;
pub mod wiring;

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::group::Group;
pub use crate::group::ROOT;
pub use peers::Peers;
pub use speedup::{AppPoint, RankFigures};

/// Which kernel, with its own settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Kernel {
    /// C = A x B for each n.
    Matmul {
        sizes: Vec<usize>,
    },
    /// Relaxation of an n x n grid for each n.
    Jacobi {
        sizes: Vec<usize>,
        stop: jacobi::StopRule,
    },
    Chunks(chunks::Plan),
}

impl Kernel {
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Matmul { .. } => "matmul",
            Kernel::Jacobi { .. } => "jacobi",
            Kernel::Chunks(_) => "chunks",
        }
    }

    /// The work of one repetition at size `n`, relative to the other sizes, for the time
    /// left: n³ multiply-adds for matmul; n² cells times about n² sweeps to converge for
    /// Jacobi; one unit for the one chunk plan.
    fn work(&self, n: Option<usize>) -> f64 {
        let n = n.unwrap_or(1) as f64;
        match self {
            Kernel::Matmul { .. } => n.powi(3),
            Kernel::Jacobi { .. } => n.powi(4),
            Kernel::Chunks(_) => 1.0,
        }
    }

    /// The points of the sweep: the sizes, or the one chunk plan.
    fn points(&self) -> Vec<Option<usize>> {
        match self {
            Kernel::Matmul { sizes } | Kernel::Jacobi { sizes, .. } => {
                sizes.iter().map(|&n| Some(n)).collect()
            }
            Kernel::Chunks(_) => vec![None],
        }
    }
}

/// A sweep of one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub kernel: Kernel,
    /// Timed repetitions per point.
    pub repetitions: u64,
    /// Repetitions before them, run and checked but not counted (the first exchange over a
    /// fresh connection is slower, [Local ATM computing n.d.]).
    pub warmup: u64,
    /// Confidence level of the intervals, e.g. 0.95.
    pub confidence: f64,
    /// How long a rank waits for the others at a barrier (rank 0's baseline included).
    pub control_timeout: Duration,
}

/// What the sequential baseline computed, to check the parallel answer against.
enum Answer {
    Matrix(Vec<f64>),
    Relaxed(jacobi::Converged),
    Served,
}

/// One rank's figures of one repetition, sent to rank 0.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RankSample {
    pub total_ns: u64,
    pub comm_ns: u64,
    /// Payload bytes received (chunks: the chunks' bytes).
    pub received: u64,
}

/// One repetition on rank 0: its baseline, the parallel time, every rank's sample.
#[derive(Debug, Clone)]
pub struct Repetition {
    pub sequential: Duration,
    pub ranks: Vec<RankSample>,
}

/// Runs `job` on this rank. Rank 0 returns the points; the others return an empty list.
pub fn run(group: &dyn Group, peers: &mut Peers, job: &Job) -> Result<Vec<AppPoint>> {
    if group.size() != peers.size() || group.rank() != peers.rank() {
        bail!("the group and the data connections disagree on the ranks");
    }
    let mut points = Vec::new();
    let per_point = job.warmup + job.repetitions;
    let sizes = job.kernel.points();
    // Rank 0 says where the sweep stands (on a terminal only).
    let mut progress = crate::progress::Progress::new(
        &format!("app {}", job.kernel.name()),
        sizes.len() as u64 * per_point,
        sizes.iter().map(|&n| job.kernel.work(n)).sum::<f64>() * per_point as f64,
        group.rank() == ROOT,
    );
    let mut step = 0;
    for n in sizes {
        let mut reps = Vec::new();
        let mut relaxed = None;
        for rep in 0..per_point {
            step += 1;
            progress.step(step, &step_text(n, rep, job));
            let (r, converged) = repetition(group, peers, job, n)?;
            progress.done(job.kernel.work(n));
            if rep >= job.warmup {
                reps.extend(r);
                relaxed = converged.or(relaxed);
            }
        }
        if group.rank() == ROOT {
            points.push(speedup::point(
                &job.kernel,
                n,
                &reps,
                relaxed,
                job.confidence,
            )?);
        }
    }
    Ok(points)
}

/// What repetition `rep` (from 0, warm-ups first) at size `n` is, for the progress line.
fn step_text(n: Option<usize>, rep: u64, job: &Job) -> String {
    let which = if rep < job.warmup {
        format!("warm-up {} of {}", rep + 1, job.warmup)
    } else {
        format!("repetition {} of {}", rep - job.warmup + 1, job.repetitions)
    };
    match n {
        Some(n) => format!("n={n}, {which}"),
        None => which,
    }
}

/// One checked repetition at size `n`: Some on rank 0.
fn repetition(
    group: &dyn Group,
    peers: &mut Peers,
    job: &Job,
    n: Option<usize>,
) -> Result<(Option<Repetition>, Option<jacobi::Converged>)> {
    let root = group.rank() == ROOT;
    let size_of = || n.ok_or_else(|| anyhow!("{} needs a size", job.kernel.name()));
    // The baseline, on rank 0 alone while the others wait at the barrier.
    let mut inputs = None;
    let (sequential, want) = if root {
        let started = Instant::now();
        let want = match &job.kernel {
            Kernel::Matmul { .. } => {
                let n = size_of()?;
                let (a, b) = matmul::inputs(n);
                // The inputs are made before the clock starts, for both runs alike.
                let started = Instant::now();
                let c = matmul::sequential(&a, &b, n);
                let t = started.elapsed();
                inputs = Some((a, b));
                (t, Answer::Matrix(c))
            }
            Kernel::Jacobi { stop, .. } => {
                let c = jacobi::sequential(size_of()?, *stop)?;
                (started.elapsed(), Answer::Relaxed(c))
            }
            Kernel::Chunks(plan) => {
                chunks::sequential(plan);
                (started.elapsed(), Answer::Served)
            }
        };
        (Some(want.0), Some(want.1))
    } else {
        (None, None)
    };

    group.barrier(job.control_timeout)?;
    peers.take_comm();
    let started = Instant::now();
    let got = match &job.kernel {
        Kernel::Matmul { .. } => {
            let ab = inputs.as_ref().map(|(a, b)| (&a[..], &b[..]));
            matmul::parallel(peers, size_of()?, ab)?.map(Answer::Matrix)
        }
        Kernel::Jacobi { stop, .. } => {
            Some(Answer::Relaxed(jacobi::parallel(peers, size_of()?, *stop)?))
        }
        Kernel::Chunks(plan) => {
            chunks::parallel(peers, plan)?;
            Some(Answer::Served)
        }
    };
    let total = started.elapsed();
    let (comm, received) = peers.take_comm();
    let mine = RankSample {
        total_ns: total.as_nanos() as u64,
        comm_ns: comm.as_nanos() as u64,
        received,
    };
    let gathered = group.gather(&serde_json::to_vec(&mine)?, job.control_timeout)?;

    // Rank 0 judges the answer and tells every rank, so that all stop on a wrong one.
    let verdict = match (&gathered, want, got) {
        (Some(all), Some(want), Some(got)) => {
            let ranks: Vec<RankSample> = all
                .iter()
                .map(|b| serde_json::from_slice(b))
                .collect::<Result<_, _>>()?;
            let judged = judge(&job.kernel, n, &want, &got, &ranks);
            let relaxed = match got {
                Answer::Relaxed(c) => Some(c),
                _ => None,
            };
            Some((judged, ranks, relaxed))
        }
        _ => None,
    };
    let word = verdict.as_ref().map(|(j, _, _)| match j {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    });
    let word = group.broadcast(word.as_deref().map(str::as_bytes), job.control_timeout)?;
    if !word.is_empty() {
        bail!("{}", String::from_utf8_lossy(&word));
    }
    Ok(match verdict {
        Some((_, ranks, relaxed)) => (
            Some(Repetition {
                sequential: sequential.unwrap_or_default(),
                ranks,
            }),
            relaxed,
        ),
        None => (None, None),
    })
}

fn judge(
    kernel: &Kernel,
    n: Option<usize>,
    want: &Answer,
    got: &Answer,
    ranks: &[RankSample],
) -> Result<()> {
    match (kernel, want, got) {
        (Kernel::Matmul { .. }, Answer::Matrix(w), Answer::Matrix(g)) => {
            matmul::check(w, g, n.unwrap_or_default())
        }
        (Kernel::Jacobi { .. }, Answer::Relaxed(w), Answer::Relaxed(g)) => {
            jacobi::check(w, g, n.unwrap_or_default())
        }
        (Kernel::Chunks(plan), Answer::Served, Answer::Served) => {
            chunks::check(plan, ranks[1..].iter().map(|r| r.received).sum())
        }
        _ => bail!("{}: the answer is of another kind", kernel.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::ThreadGroup;

    fn on_threads(p: usize, job: Job) -> Vec<Result<Vec<AppPoint>>> {
        let handles: Vec<_> = ThreadGroup::new(p)
            .into_iter()
            .zip(peers::testing::mesh(p))
            .map(|(g, mut peers)| {
                let job = job.clone();
                std::thread::spawn(move || {
                    let points = run(&g, &mut peers, &job)?;
                    peers.close()?;
                    Ok(points)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    fn job(kernel: Kernel) -> Job {
        Job {
            kernel,
            repetitions: 3,
            warmup: 1,
            confidence: 0.95,
            control_timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn matmul_reports_every_size_with_every_rank_checked() {
        let got = on_threads(4, job(Kernel::Matmul { sizes: vec![8, 13] }));
        let points = got[0].as_ref().unwrap();
        assert!(got[1..].iter().all(|r| r.as_ref().unwrap().is_empty()));
        assert_eq!(points.len(), 2);
        let p = &points[1];
        assert_eq!(p.n, Some(13));
        assert_eq!(p.parallel_s.n, 3);
        assert_eq!(p.sequential_s.n, 3);
        assert_eq!(p.ranks.len(), 4);
        assert_eq!(
            p.check,
            "C equals the sequential product exactly (all 169 entries)"
        );
        // Rank (1,1) of the 2x2 grid receives its A stripe (6 x 13) and B stripe (13 x 6).
        assert_eq!(p.ranks[3].received_bytes, 2 * 6 * 13 * 8);
        assert!(p.comm_share >= 0.0 && p.comm_share <= 1.0);
    }

    #[test]
    fn a_sweep_of_sizes_draws_speedup_and_prints_a_row_per_size() {
        let points = on_threads(2, job(Kernel::Matmul { sizes: vec![4, 8] }))
            .swap_remove(0)
            .unwrap();
        let mut r = speedup::AppReport {
            schema: speedup::SCHEMA.into(),
            kernel: "matmul".into(),
            transport: "tcp".into(),
            ranks: 2,
            grid: "1x2".into(),
            launch: "threads".into(),
            netns_prefix: None,
            started_at: String::new(),
            finished_at: String::new(),
            host: String::new(),
            settings: Vec::new(),
            repetitions: 3,
            warmup: 1,
            points,
            load: None,
        };
        let fig = speedup::speedup_figure(&r).expect("two sizes draw");
        assert!(crate::figures::plots::render_svg(&fig)
            .unwrap()
            .contains("speedup"));
        let table = speedup::table(&r);
        // What ran, the units, the header, a row per size, and a check line per size: each
        // names its own entry count.
        assert_eq!(table.lines().count(), 3 + 2 + 2, "{table}");
        assert!(table.contains("at n=4: C equals the sequential product exactly (all 16 entries)"));
        assert!(table.contains("at n=8: C equals the sequential product exactly (all 64 entries)"));
        r.points.truncate(1);
        assert!(speedup::speedup_figure(&r).is_none());
        let one = speedup::table(&r);
        assert!(
            one.contains("checked in every repetition: C equals"),
            "{one}"
        );
    }

    #[test]
    fn jacobi_reports_the_sweeps_of_the_sequential_run() {
        let stop = jacobi::StopRule {
            tolerance: 1e-2,
            max_iterations: 1000,
        };
        let got = on_threads(
            2,
            job(Kernel::Jacobi {
                sizes: vec![10],
                stop,
            }),
        );
        let p = &got[0].as_ref().unwrap()[0];
        let want = jacobi::sequential(10, stop).unwrap();
        assert_eq!(p.relaxation, Some(want));
    }

    #[test]
    fn chunks_count_the_volume_at_the_clients() {
        let got = on_threads(
            3,
            job(Kernel::Chunks(chunks::Plan {
                chunk: 100,
                volume: 1000,
                think: Duration::ZERO,
            })),
        );
        let p = &got[0].as_ref().unwrap()[0];
        assert_eq!(p.ranks[1].received_bytes + p.ranks[2].received_bytes, 1000);
        assert_eq!(
            p.check,
            "the clients received the whole volume (1000 bytes)"
        );
    }

    #[test]
    fn the_progress_line_names_the_size_and_repetition_and_weighs_them() {
        let j = job(Kernel::Matmul { sizes: vec![8, 16] });
        assert_eq!(step_text(Some(8), 0, &j), "n=8, warm-up 1 of 1");
        assert_eq!(step_text(Some(16), 1, &j), "n=16, repetition 1 of 3");
        assert_eq!(step_text(Some(16), 3, &j), "n=16, repetition 3 of 3");
        let c = job(Kernel::Chunks(chunks::Plan {
            chunk: 8,
            volume: 64,
            think: Duration::ZERO,
        }));
        assert_eq!(step_text(None, 2, &c), "repetition 2 of 3");
        // Twice the size: 8 times the multiply's work, 16 times the relaxation's.
        assert_eq!(j.kernel.work(Some(16)) / j.kernel.work(Some(8)), 8.0);
        let jacobi = Kernel::Jacobi {
            sizes: vec![8],
            stop: jacobi::StopRule {
                tolerance: 1e-6,
                max_iterations: 10,
            },
        };
        assert_eq!(jacobi.work(Some(16)) / jacobi.work(Some(8)), 16.0);
        assert_eq!(c.kernel.work(None), 1.0);
    }
}
