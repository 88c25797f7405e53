//! A mesh: every rank of a group runs a wirebench server and a client, and the ranks measure
//! ordered pairs of each other in rounds (`wirebench mesh` under mpirun). What one pair
//! measures is exactly what `wirebench run --to SERVER` measures: the same request, plan,
//! runner and control protocol; the group only agrees on the schedule, starts the rounds
//! together and gathers the results, with a few control messages per round outside every
//! timed phase.
//!
//! ```text
//! rank 0                                   every rank
//! rounds (or the reason there are none) -> broadcast
//!                                          start a server (in its namespace), allgather
//!                                          addresses and environments
//! for each round:                          the client of a pair measures it; barrier
//! gather every pair's result <-            (its own pairs' reports)
//! matrices, print, save, heatmaps
//! ```
//!
//! Over `-t mpi` ([`over_mpi`]) no rank starts a server: the client rank of each pair measures
//! it over MPI point-to-point while the pair's server rank serves it, as in `wirebench mpi`.

pub mod matrix;
pub mod output;
pub mod over_mpi;
pub mod schedule;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::env::Environment;
use crate::error::{one_line, EXIT_FAILURE};
use crate::group::{placement, Group, ROOT};
use crate::model::mesh::{MeshPair, MeshPairId, MeshRank, MeshResult};
use crate::model::RunDocument;
use crate::plan::runner;
use crate::request::Request;

pub use schedule::Selection;

/// How long a rank waits for the others to start, answer between rounds, or hand in results.
const CONTROL: Duration = Duration::from_secs(60);

/// A run's allowance for connecting and ending, on top of its timed phase.
const RUN_SLACK: Duration = Duration::from_secs(30);

/// A run whose end is not a duration (--bytes, --iterations): how long it may take at most.
const UNTIMED_RUN: Duration = Duration::from_secs(3600);

/// What a mesh measures and where.
#[derive(Debug, Clone)]
pub struct MeshRequest {
    /// What each pair measures, as `run` would; its server target is each pair's server.
    pub request: Request,
    pub selection: Selection,
    /// One pair at a time.
    pub serial: bool,
    /// `--netns-from-rank PREFIX`: rank r's data threads run in namespace PREFIX<r>.
    pub netns_prefix: Option<String>,
    /// The address each rank's server listens on and advertises; None: the first up
    /// non-loopback IPv4 address (of its namespace).
    pub bind: Option<IpAddr>,
    /// Where rank 0 writes the matrices' heatmaps (SVG and PNG).
    pub report_dir: Option<PathBuf>,
    /// Rank 0 prints the matrices' grids as Markdown tables.
    pub markdown: bool,
}

/// Rank 0's decision, broadcast: the rounds, or why there are none.
#[derive(Debug, Serialize, Deserialize)]
struct Decision {
    rounds: Vec<Vec<MeshPairId>>,
    /// How long a rank waits at the end of a round for the slowest pair of it.
    round_timeout_ms: u64,
}

/// What each rank tells the others before the first round.
#[derive(Debug, Serialize, Deserialize)]
struct RankInfo {
    address: String,
    netns: Option<String>,
    environment: Environment,
}

/// One pair's outcome, from its client rank.
#[derive(Debug, Serialize, Deserialize)]
struct Measured {
    pair: MeshPairId,
    round: usize,
    /// The pair's run, or why it could not start (its namespace, its plan).
    report: std::result::Result<RunDocument, String>,
}

fn encode<T: Serialize>(m: &T) -> Vec<u8> {
    serde_json::to_vec(m).unwrap_or_default()
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(bytes).with_context(|| format!("malformed {what} from another rank"))
}

/// Runs this rank's part of the mesh; the exit code of this process. Rank 0 prints and saves.
pub fn run(group: &dyn Group, mesh: &MeshRequest) -> i32 {
    match run_rank(group, mesh) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wirebench: error: rank {}: {}", group.rank(), one_line(&e));
            EXIT_FAILURE
        }
    }
}

fn run_rank(g: &dyn Group, mesh: &MeshRequest) -> Result<i32> {
    let root = g.rank() == ROOT;
    let started_at = crate::env::now_rfc3339();
    // Rank 0 alone checks the request, so that a bad one is said once.
    let decided = root.then(|| decide(g.size(), mesh).map_err(|e| one_line(&e)));
    let bytes = g.broadcast(decided.as_ref().map(encode).as_deref(), CONTROL)?;
    let decision = match decode::<std::result::Result<Decision, String>>(&bytes, "schedule")? {
        Ok(d) => d,
        Err(e) => {
            if root {
                eprintln!("wirebench: error: {e}");
            }
            return Ok(EXIT_FAILURE);
        }
    };

    let over_mpi = over_mpi::wanted(mesh);
    let mine = if over_mpi {
        Ok(RankInfo {
            address: over_mpi::address(g.rank()),
            netns: None,
            environment: Environment::capture(),
        })
    } else {
        start_rank(g.rank(), mesh).map_err(|e| one_line(&e))
    };
    let infos = g.allgather(&encode(&mine), CONTROL)?;
    let mut ranks = Vec::with_capacity(infos.len());
    let mut failed = Vec::new();
    for (r, bytes) in infos.iter().enumerate() {
        match decode::<std::result::Result<RankInfo, String>>(bytes, "address")? {
            Ok(info) => ranks.push(info),
            Err(e) => failed.push(format!("rank {r}: {e}")),
        }
    }
    if let Some(first) = failed.first() {
        // One line, however many ranks failed alike (a missing namespace fails them all).
        if root {
            let more = match failed.len() {
                1 => String::new(),
                n => format!(" (and {} more ranks)", n - 1),
            };
            eprintln!("wirebench: error: {first}{more}");
        }
        return Ok(EXIT_FAILURE);
    }

    let addresses: Vec<String> = ranks.iter().map(|r| r.address.clone()).collect();
    let mut measure = |pair: MeshPairId, server: &str| {
        if over_mpi {
            over_mpi::measure(mesh, pair)
        } else {
            measure_pair(mesh, g.rank(), server)
        }
    };
    // A socket transport's server serves on threads of its own; over MPI the server rank
    // serves on its main thread. Its failure is the client's too, which the pair's cell
    // records: here it is only said.
    let mut serve = |pair: MeshPairId| {
        if over_mpi {
            if let Err(e) = over_mpi::serve(pair) {
                eprintln!(
                    "wirebench: warning: rank {} serving rank {}: {}",
                    pair.server,
                    pair.client,
                    one_line(&e)
                );
            }
        }
    };
    let measured = measure_rounds(g, &decision, &addresses, &mut measure, &mut serve)?;
    let Some(by_pair) = measured else {
        return Ok(0);
    };
    // The document's settings are the request's, as a run of it would have them.
    let plan = crate::plan::build(&mesh.request)?;
    let mut base = runner::new_report(&plan, &mesh.request);
    base.started_at = started_at;
    // A mesh's points are in its pairs, which it counts itself.
    base.planned_points = None;
    let result = assemble(base, &decision.rounds, mesh.serial, ranks, by_pair);
    Ok(output::finish(mesh, result))
}

/// Runs the rounds on this rank, `measure` measuring each pair it is the client of (given
/// the server's address) and `serve` serving each pair it is the server of, and gathers every
/// pair's outcome on rank 0 (the others get None).
fn measure_rounds(
    g: &dyn Group,
    decision: &Decision,
    addresses: &[String],
    measure: &mut dyn FnMut(MeshPairId, &str) -> Result<RunDocument>,
    serve: &mut dyn FnMut(MeshPairId),
) -> Result<Option<Vec<Measured>>> {
    let round_timeout = Duration::from_millis(decision.round_timeout_ms);
    let mut measured = Vec::new();
    // Rank 0 says which round is under way (on a terminal only); rounds take about as long
    // as each other, each pair measuring the same plan.
    let rounds = decision.rounds.len() as u64;
    let mut progress = crate::progress::Progress::new(
        "mesh",
        rounds,
        rounds as f64,
        g.rank() == crate::group::ROOT,
    );
    for (i, round) in decision.rounds.iter().enumerate() {
        progress.step(i as u64 + 1, &round_text(round));
        if let Some(pair) = round.iter().find(|p| p.client == g.rank()) {
            let report = match addresses.get(pair.server) {
                Some(a) => measure(*pair, a).map_err(|e| one_line(&e)),
                None => Err(format!("rank {} has no address", pair.server)),
            };
            measured.push(Measured {
                pair: *pair,
                round: i,
                report,
            });
        } else if let Some(pair) = round.iter().find(|p| p.server == g.rank()) {
            serve(*pair);
        }
        // Nobody starts the next round before every pair of this one is done.
        g.barrier(round_timeout)
            .with_context(|| format!("at the end of round {}", i + 1))?;
        progress.done(1.0);
    }
    progress.finish();
    let Some(all) = g.gather(&encode(&measured), CONTROL)? else {
        return Ok(None);
    };
    let mut by_pair = Vec::new();
    for bytes in &all {
        by_pair.extend(decode::<Vec<Measured>>(bytes, "results")?);
    }
    Ok(Some(by_pair))
}

/// What a round measures, for the progress line: "2 pairs: 0->1, 2->3".
fn round_text(round: &[MeshPairId]) -> String {
    let pairs: Vec<String> = round
        .iter()
        .map(|p| format!("{}->{}", p.client, p.server))
        .collect();
    let shown = pairs.len().min(4);
    let more = if pairs.len() > shown { ", ..." } else { "" };
    format!(
        "round of {} pair{}: {}{more}",
        pairs.len(),
        if pairs.len() == 1 { "" } else { "s" },
        pairs[..shown].join(", ")
    )
}

/// Rank 0: the rounds and how long one may take.
fn decide(size: usize, mesh: &MeshRequest) -> Result<Decision> {
    let plan = crate::plan::build(&mesh.request)?;
    if over_mpi::wanted(mesh) {
        over_mpi::check(mesh, &plan)?;
    }
    let rounds = schedule::rounds(size, &mesh.selection, mesh.serial)?;
    // Rank 0 writes the outputs: refused here, before any pair is measured.
    output::check_outputs(mesh, plan.points.len())?;
    let runs = if plan.until_ci.is_some() {
        plan.max_repeat
    } else {
        plan.repeat
    };
    // Saturating: a sweep of many long points is a long wait, never an overflow.
    let per_run = |ms: Option<u64>| {
        ms.map_or(UNTIMED_RUN, Duration::from_millis)
            .saturating_add(RUN_SLACK)
            .saturating_add(mesh.request.timeouts.io.saturating_mul(2))
    };
    let pair = plan.points.iter().fold(Duration::ZERO, |sum, p| {
        sum.saturating_add(per_run(p.spec.duration_ms).saturating_mul(runs))
    });
    Ok(Decision {
        rounds,
        round_timeout_ms: u64::try_from(pair.saturating_add(CONTROL).as_millis())
            .unwrap_or(u64::MAX),
    })
}

/// This rank's server, in its namespace: every feature, no budgets (the mesh is the user's
/// own job), listening on the address the others will reach.
fn start_rank(rank: usize, mesh: &MeshRequest) -> Result<RankInfo> {
    let netns = mesh
        .netns_prefix
        .as_ref()
        .map(|p| placement::netns_for_rank(p, rank));
    let request = mesh.request.clone();
    let bind = mesh.bind;
    let start = move || start_server(&request, bind);
    let addr = match &netns {
        Some(ns) => {
            crate::lab::in_netns(ns, start).with_context(|| format!("in namespace {ns}"))?
        }
        None => start()?,
    };
    Ok(RankInfo {
        address: addr.to_string(),
        netns,
        environment: Environment::capture(),
    })
}

fn start_server(request: &Request, bind: Option<IpAddr>) -> Result<SocketAddr> {
    let ip = match bind {
        Some(ip) => ip,
        None => placement::own_address()?,
    };
    let psk = crate::control::auth::Psk::load(request.server.psk_file.as_deref())?.map(Arc::new);
    let config = crate::control::server::ServerConfig {
        limits: crate::control::limits::Limits::local(),
        io_timeout: request.timeouts.io,
        transport: request.local.clone(),
        access: crate::control::admission::AccessConfig {
            psk,
            ..Default::default()
        },
        ..Default::default()
    };
    crate::control::server::Server::bind(SocketAddr::new(ip, 0), config)?.spawn()
}

/// One pair, measured from its client rank as `wirebench run --to SERVER` measures (in the
/// rank's namespace): the report, complete or with the error that stopped it.
fn measure_pair(mesh: &MeshRequest, rank: usize, server: &str) -> Result<RunDocument> {
    let mut request = mesh.request.clone();
    request.server.to = Some(server.to_owned());
    // The mesh is saved once, by rank 0.
    request.output.save = false;
    let over_control =
        |request: &Request| measure(request, &mut runner::ControlRunner::new(request));
    match &mesh.netns_prefix {
        Some(p) => crate::lab::in_netns(&placement::netns_for_rank(p, rank), move || {
            over_control(&request)
        }),
        None => over_control(&request),
    }
}

/// One pair's run of `request`, `point_runner` measuring each point, printing nothing.
fn measure(request: &Request, point_runner: &mut dyn runner::PointRunner) -> Result<RunDocument> {
    let plan = crate::plan::build(request)?;
    let mut report = runner::new_report(&plan, request);
    let result = runner::run_with(&plan, &mut report, &mut Silent, point_runner);
    report.finished_at = Some(crate::env::now_rfc3339());
    report.complete = result.is_ok();
    report.error = result.as_ref().err().map(one_line);
    Ok(report)
}

/// The pairs' runs print nothing: rank 0 prints the mesh.
struct Silent;

impl crate::plan::sink::Sink for Silent {
    fn begin(&mut self, _: &RunDocument) -> Result<()> {
        Ok(())
    }
    fn point(&mut self, _: &RunDocument, _: &crate::model::PointResult) -> Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &RunDocument) -> Result<()> {
        Ok(())
    }
    fn progress(&self, _: u64, _: Option<f64>) -> indicatif::ProgressBar {
        indicatif::ProgressBar::hidden()
    }
}

/// Rank 0: the mesh as one run document: `base` (the request's run, without points) with
/// every pair and the matrices.
fn assemble(
    base: RunDocument,
    rounds: &[Vec<MeshPairId>],
    serial: bool,
    ranks: Vec<RankInfo>,
    mut measured: Vec<Measured>,
) -> RunDocument {
    // In the order of the rounds, and within a round in the schedule's order.
    measured.sort_by_key(|m| {
        let at = rounds
            .get(m.round)
            .and_then(|r| r.iter().position(|p| *p == m.pair));
        (m.round, at)
    });
    let pairs: Vec<MeshPair> = measured
        .into_iter()
        .map(|m| {
            let (client, server, round) = (m.pair.client, m.pair.server, m.round);
            match m.report {
                Ok(r) => MeshPair {
                    client,
                    server,
                    round,
                    started_at: Some(r.started_at),
                    finished_at: r.finished_at,
                    points: r.points,
                    sweep_metrics: r.sweep_metrics,
                    complete: r.complete,
                    error: r.error,
                },
                Err(e) => MeshPair {
                    client,
                    server,
                    round,
                    started_at: None,
                    finished_at: None,
                    points: Vec::new(),
                    sweep_metrics: Vec::new(),
                    complete: false,
                    error: Some(e),
                },
            }
        })
        .collect();
    let mut doc = base;
    let failed: Vec<String> = pairs
        .iter()
        .filter(|p| !p.complete)
        .map(|p| {
            format!(
                "{}->{}: {}",
                p.client,
                p.server,
                p.error.as_deref().unwrap_or("incomplete")
            )
        })
        .collect();
    let scheduled: usize = rounds.iter().map(Vec::len).sum();
    doc.finished_at = Some(crate::env::now_rfc3339());
    if let Some(r) = ranks.first() {
        doc.client_environment = r.environment.clone();
    }
    doc.server = crate::model::ServerInfo {
        address: Some(format!("mesh of {} ranks", ranks.len())),
        self_hosted: false,
        one_port: doc.server.one_port,
        middlebox: None,
    };
    doc.complete = failed.is_empty() && pairs.len() == scheduled;
    doc.error = match (failed.len(), scheduled.saturating_sub(pairs.len())) {
        (0, 0) => None,
        (0, lost) => Some(format!("{lost} scheduled pairs were not reported")),
        (1, _) => Some(failed[0].clone()),
        (n, _) => Some(format!("{n} pairs failed; the first: {}", failed[0])),
    };
    let matrices = matrix::assemble(&pairs, doc.settings.confidence);
    doc.mesh = Some(MeshResult {
        ranks: ranks
            .into_iter()
            .enumerate()
            .map(|(rank, r)| MeshRank {
                rank,
                address: r.address,
                netns: r.netns,
                environment: r.environment,
            })
            .collect(),
        rounds: rounds.to_vec(),
        serial,
        pairs,
        matrices,
    });
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::ThreadGroup;

    /// A pair's stand-in result: one ping-pong point whose mean RTT names the pair.
    fn fake(client: usize, server: usize) -> RunDocument {
        crate::store::db::tests::report("pingpong", 1, 1000.0 * (10 * client + server + 1) as f64)
    }

    /// Four ranks as threads: each measures exactly the pairs it is the client of, round by
    /// round, and rank 0 ends up with all 12 in one document, each cell its pair's figure.
    #[test]
    fn the_ranks_measure_their_pairs_and_rank_0_assembles_every_one_once() {
        let size = 4;
        let rounds = schedule::rounds(size, &Selection::All, false).unwrap();
        let addresses: Vec<String> = (0..size).map(|r| format!("rank{r}")).collect();
        let handles: Vec<_> = ThreadGroup::new(size)
            .into_iter()
            .map(|g| {
                let decision = Decision {
                    rounds: rounds.clone(),
                    round_timeout_ms: 10_000,
                };
                let addresses = addresses.clone();
                std::thread::spawn(move || {
                    let me = g.rank();
                    let mut asked = Vec::new();
                    let mut served = Vec::new();
                    let got = measure_rounds(
                        &g,
                        &decision,
                        &addresses,
                        &mut |pair, server| {
                            let s: usize = server.trim_start_matches("rank").parse()?;
                            assert_eq!((pair.client, pair.server), (me, s));
                            asked.push(s);
                            Ok(fake(me, s))
                        },
                        &mut |pair| {
                            assert_eq!(pair.server, me);
                            served.push(pair.client);
                        },
                    )
                    .unwrap();
                    (me, asked, served, got)
                })
            })
            .collect();
        let mut root = None;
        for h in handles {
            let (me, asked, mut served, got) = h.join().unwrap();
            // Every other rank once, in the order of the rounds, as client and as server.
            let others: Vec<usize> = (0..size).filter(|&r| r != me).collect();
            let mut sorted = asked.clone();
            sorted.sort();
            assert_eq!(sorted, others);
            served.sort();
            assert_eq!(served, others);
            if me == 0 {
                root = got;
            } else {
                assert!(got.is_none());
            }
        }
        let measured = root.expect("rank 0 gathers");
        assert_eq!(measured.len(), 12);
        let infos = (0..size)
            .map(|r| RankInfo {
                address: format!("rank{r}"),
                netns: None,
                environment: Environment::default(),
            })
            .collect();
        let doc = assemble(fake(0, 0), &rounds, false, infos, measured);
        assert!(doc.complete, "{:?}", doc.error);
        let mesh = doc.mesh.unwrap();
        assert_eq!(mesh.pairs.len(), 12);
        for p in &mesh.pairs {
            assert!(mesh.rounds[p.round].contains(&MeshPairId {
                client: p.client,
                server: p.server
            }));
        }
        assert_eq!(mesh.matrices.len(), 1);
        let cells = &mesh.matrices[0].latency.as_ref().unwrap().cells;
        assert_eq!(cells.len(), 12);
        for c in cells {
            assert_eq!(c.mean_ns, 500.0 * (10 * c.from + c.to + 1) as f64);
        }
    }

    fn mesh_of(request: Request) -> MeshRequest {
        MeshRequest {
            request,
            selection: Selection::All,
            serial: false,
            netns_prefix: None,
            bind: None,
            report_dir: None,
            markdown: false,
        }
    }

    /// A round may take as long as its pairs' points and runs (each with its setup allowance),
    /// and a request without an end in time waits long, without overflowing.
    #[test]
    fn a_round_waits_for_every_point_and_run_of_a_pair() {
        let mut r = Request::default();
        r.stop.duration = Some(Duration::from_secs(2));
        r.sizes.size = Some(vec![1, 2, 4, 8, 16]);
        r.statistics.repeat = 3;
        let d = decide(4, &mesh_of(r)).unwrap();
        assert_eq!(d.rounds.len(), 6);
        assert!(
            d.round_timeout_ms >= 5 * 3 * 2_000,
            "{}",
            d.round_timeout_ms
        );
        let mut r = Request::default();
        r.stop.duration = None;
        r.stop.iterations = Some(10);
        r.statistics.until_ci = Some(0.01);
        r.statistics.max_repeat = u32::MAX;
        let d = decide(2, &mesh_of(r)).unwrap();
        assert!(d.round_timeout_ms > 3_600_000);
    }

    #[test]
    fn a_bad_request_is_refused_before_anything_starts() {
        let mut r = Request::default();
        r.sizes.size = Some(vec![]);
        r.statistics.confidence = 42;
        assert!(decide(4, &mesh_of(r)).is_err());
        assert!(decide(1, &mesh_of(Request::default())).is_err());
    }

    /// Over -t mpi what MPI cannot run, or would ignore, is refused by rank 0 before any rank
    /// starts; a plain request is not.
    #[cfg(feature = "mpi")]
    #[test]
    fn over_mpi_what_does_not_apply_is_refused_before_anything_starts() {
        use crate::pattern::PatternKind;
        use crate::transport::TransportKind;
        let over_mpi = |pattern| {
            let mut r = Request::new(pattern, TransportKind::Mpi);
            r.stop.duration = Some(Duration::from_millis(100));
            r
        };
        for pattern in [PatternKind::Pingpong, PatternKind::Rr, PatternKind::Stream] {
            assert!(
                decide(3, &mesh_of(over_mpi(pattern))).is_ok(),
                "{pattern:?}"
            );
        }
        let e = decide(3, &mesh_of(over_mpi(PatternKind::Crr))).unwrap_err();
        assert!(e.to_string().contains("crr"), "{e}");
        let mut r = over_mpi(PatternKind::Pingpong);
        r.buffers.sndbuf = Some(vec![65536]);
        let e = decide(3, &mesh_of(r)).unwrap_err();
        assert!(e.to_string().contains("no socket"), "{e}");
        let mut r = over_mpi(PatternKind::Stream);
        r.traffic.direction = crate::pattern::Direction::Bidir;
        assert!(decide(3, &mesh_of(r)).is_err());
    }

    #[test]
    fn a_failed_pair_makes_the_mesh_incomplete_and_is_named() {
        let rounds = schedule::rounds(2, &Selection::All, true).unwrap();
        let measured = vec![
            Measured {
                pair: rounds[0][0],
                round: 0,
                report: Ok(fake(rounds[0][0].client, rounds[0][0].server)),
            },
            Measured {
                pair: rounds[1][0],
                round: 1,
                report: Err("connection refused".into()),
            },
        ];
        let infos = (0..2)
            .map(|r| RankInfo {
                address: format!("rank{r}"),
                netns: None,
                environment: Environment::default(),
            })
            .collect();
        let doc = assemble(fake(0, 0), &rounds, true, infos, measured);
        assert!(!doc.complete);
        let e = doc.error.unwrap();
        assert!(e.contains("connection refused") && e.contains("->"), "{e}");
        let text = output::render_text(&{
            let mut d = fake(0, 0);
            d.mesh = Some(MeshResult {
                ranks: Vec::new(),
                rounds: Vec::new(),
                serial: true,
                pairs: Vec::new(),
                matrices: Vec::new(),
            });
            d
        });
        assert!(text.starts_with("mesh: pingpong over tcp"), "{text}");
    }

    #[test]
    fn the_progress_line_names_the_pairs_of_a_round() {
        let p = |client, server| MeshPairId { client, server };
        assert_eq!(round_text(&[p(0, 1)]), "round of 1 pair: 0->1");
        assert_eq!(
            round_text(&[p(0, 1), p(2, 3), p(4, 5), p(6, 7), p(8, 9)]),
            "round of 5 pairs: 0->1, 2->3, 4->5, 6->7, ..."
        );
    }
}
