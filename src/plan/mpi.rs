//! Measuring a [`Request`] between the two ranks of an MPI job, over MPI point-to-point calls
//! (IMB PingPong, osu_latency, osu_bw): what `wirebench mpi PATTERN` runs.
//!
//! Both ranks run this command with the same arguments. Rank 0 is the client: it builds the
//! plan with [`crate::plan::build`], runs it with the usual runner (repeats, summaries, table,
//! JSON, CSV, the results database) and prints; its [`MpiRunner`] stands where the control
//! connection to a server stands in `wirebench run`. Rank 1 plays the server: it does what
//! rank 0 tells it over MPI control messages and reports its own side of every point.
//!
//! The exchange, as JSON on [`mpi::CONTROL_TAG`]:
//!
//! ```text
//! rank 0                              rank 1
//!                    <-  Hello (rank 1's environment)
//! Open(TestSpec)     ->                                   or Bye (nothing to run)
//! for each run of each point:
//!   Run(PointSpec, run number) ->
//!   (both run their role of the pattern on the run's data tag; the end of data is the
//!    connection's zero-length end message, as a TCP FIN is)
//!                    <-  Report(rank 1's statistics, or its error)
//! Bye                ->
//! ```
//!
//! A mesh (`crate::mesh`) runs the same exchange between the two ranks of each of its pairs,
//! client and server given by an [`MpiPair`] instead of ranks 0 and 1.
//!
//! Rank 1 waits for each Run message only as long as a server waits between points, and
//! rank 0 for each Report as long as the control client waits for a point's result, so a
//! lost rank shows as an error, never as a hang (and when a process dies, mpirun ends the
//! other).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::control::client::{ClientSide, PointOutcome};
use crate::control::protocol::{PointSpec, ServerMeasurement, TestSpec};
use crate::control::worker::{run_worker, WorkerPlan, WorkerResult};
use crate::env::Environment;
use crate::error::one_line;
use crate::model::RunDocument;
use crate::pattern::stream::{EndSignal, IntervalEvent};
use crate::pattern::{self, CpuTime, DataChannel, Role, Side};
use crate::plan::runner::{PointRunner, RunOutcome};
use crate::plan::{PlannedPoint, RunPlan};
use crate::request::Request;
use crate::transport::mpi::{self, MpiConnection, Rank, Tag};
use crate::transport::{Connection, EffectiveOptions};

/// The two ranks of one measurement and the tags their messages travel on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiPair {
    /// Plans, measures the client's side and prints (or hands back the report).
    pub client: Rank,
    /// Plays the server: does what the client tells it and reports its own side.
    pub server: Rank,
    /// The tag of the pair's control messages.
    pub control_tag: Tag,
    /// The client numbers its runs `first_run`, `first_run + run_step`, ...: each number
    /// is a run's data tag (see [`mpi::run_tag`]).
    pub first_run: u64,
    pub run_step: u64,
}

impl MpiPair {
    /// `wirebench mpi`: rank 0 against rank 1, on the job's control tag.
    pub const JOB: MpiPair = MpiPair {
        client: 0,
        server: 1,
        control_tag: mpi::CONTROL_TAG,
        first_run: 0,
        run_step: 1,
    };

    /// One ordered pair of a mesh. The two orders of the same two ranks (measured in
    /// different rounds) use different control tags and data tags (even runs one way, odd
    /// the other), so that a message a failed run left behind is never taken by the other
    /// order; pairs of one round share no rank, so MPI's matching on the source keeps them
    /// apart. Each ordered pair is measured once per mesh.
    pub fn in_mesh(client: Rank, server: Rank) -> MpiPair {
        let way = usize::from(client > server);
        MpiPair {
            client,
            server,
            control_tag: mpi::PAIR_CONTROL_TAGS[way],
            first_run: way as u64,
            run_step: 2,
        }
    }
}

/// How long rank 1 waits for its next instruction (a wirebench server's idle limit between
/// points), and how long either rank waits for the other to start.
const IDLE: Duration = Duration::from_secs(60);

/// Rank 0 to rank 1.
#[derive(Debug, Serialize, Deserialize)]
enum Instruction {
    Open {
        test: TestSpec,
        io_timeout_ms: u64,
        loss_timeout_ms: u64,
        /// A stream's window of messages in flight at either end (osu_bw's window).
        window: u32,
    },
    Run {
        point: PointSpec,
        run: u64,
    },
    Bye,
}

/// Rank 1 to rank 0.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    Hello {
        environment: Environment,
    },
    Report {
        result: std::result::Result<RankReport, String>,
    },
}

/// Rank 1's side of one run of a point.
#[derive(Debug, Serialize, Deserialize)]
struct RankReport {
    report: ServerMeasurement,
    socket: Vec<EffectiveOptions>,
}

fn encode<T: Serialize>(m: &T) -> Vec<u8> {
    serde_json::to_vec(m).unwrap_or_default()
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(bytes).with_context(|| format!("malformed {what} from the other rank"))
}

/// Checks that the plan is one MPI can run between two ranks, before either rank starts.
pub fn check(test: &TestSpec) -> Result<()> {
    if test.pattern == pattern::PatternKind::Crr {
        bail!("over MPI there is no connection to set up: crr does not apply (use rr)");
    }
    if test.streams != 1 {
        bail!("over MPI one stream runs between two ranks; drop --parallel");
    }
    if test.direction == pattern::Direction::Bidir {
        bail!("over MPI one direction runs at a time; drop --bidir");
    }
    Ok(())
}

/// The client rank's runner: each point's run is one Run instruction, the client's role on
/// this rank, and the server rank's Report.
pub struct MpiRunner {
    pair: MpiPair,
    library: String,
    /// A stream's window of messages in flight at either end.
    window: u32,
    test: Option<TestSpec>,
    io_timeout: Duration,
    /// The next run's number: numbers its data tag.
    next_run: u64,
    closed: bool,
}

impl MpiRunner {
    /// The runner of `request` on `pair`'s client rank; `library` names the MPI library in the
    /// report, `window` is a stream's messages in flight.
    pub fn new(request: &Request, library: String, window: u32, pair: MpiPair) -> MpiRunner {
        MpiRunner {
            pair,
            library,
            window,
            test: None,
            io_timeout: request.timeouts.io,
            next_run: pair.first_run,
            closed: false,
        }
    }

    /// Tells the server rank that nothing more comes: after Hello it waits for Open or Bye.
    fn release(&self) {
        send(self.pair, self.pair.server, &Instruction::Bye, IDLE);
    }
}

/// Sends `m` to `to` on the pair's control tag.
fn send<T: Serialize>(pair: MpiPair, to: Rank, m: &T, timeout: Duration) {
    mpi::send_control_on(to, pair.control_tag, &encode(m), timeout);
}

/// The next control message from `from` on the pair's control tag.
fn recv(pair: MpiPair, from: Rank, timeout: Duration) -> std::io::Result<Vec<u8>> {
    mpi::recv_control_on(from, pair.control_tag, timeout)
}

impl PointRunner for MpiRunner {
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()> {
        let test = &plan.test;
        let server = self.pair.server;
        check(test)?;
        let hello = recv(self.pair, server, IDLE)
            .with_context(|| format!("waiting for MPI rank {server}"))?;
        let environment = match decode::<Answer>(&hello, "greeting")? {
            Answer::Hello { environment } => environment,
            other => bail!("unexpected first message from MPI rank {server}: {other:?}"),
        };
        let btl = std::env::var("OMPI_MCA_btl").unwrap_or_else(|_| "MPI's choice".into());
        report.server.address = Some(format!(
            "MPI rank {server} on {} ({}, btl {btl})",
            environment.hostname, self.library
        ));
        report.server.self_hosted = false;
        report.server_environment = Some(environment);
        send(
            self.pair,
            server,
            &Instruction::Open {
                test: test.clone(),
                io_timeout_ms: plan.client.io_timeout.as_millis() as u64,
                loss_timeout_ms: plan.client.loss_timeout.as_millis() as u64,
                window: self.window,
            },
            self.io_timeout,
        );
        self.test = Some(test.clone());
        Ok(())
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let test = self.test.as_ref().ok_or_else(|| anyhow!("not opened"))?;
        let point = &planned.spec;
        let server = self.pair.server;
        let run = self.next_run;
        self.next_run = self.next_run.wrapping_add(self.pair.run_step);
        send(
            self.pair,
            server,
            &Instruction::Run {
                point: point.clone(),
                run,
            },
            client.io_timeout,
        );
        let role = pattern::role(Side::Client, test.pattern, test.direction, test.streams, 0);
        let conn = connection(role, server, run, point, self.window);
        let io_path = conn.io_path();
        let client_socket = vec![conn.effective_options(&client.socket)];
        let end = EndSignal::default();
        let stop = AtomicBool::new(false);
        let mine = DataChannel::new(Box::new(conn), mpi::CAPABILITIES, false, client.io_timeout)
            .and_then(|ch| {
                run_worker(
                    ch,
                    WorkerPlan {
                        role,
                        index: 0,
                        test,
                        point,
                        io_timeout: client.io_timeout,
                        loss_timeout: client.loss_timeout,
                        cpu: None,
                        end: &end,
                        stop: &stop,
                        live,
                        rtt_series: false,
                    },
                )
            });
        // The server rank's report comes whatever happened here, so that both ranks stay in
        // step.
        let wait =
            Duration::from_millis(point.duration_ms.unwrap_or(3_600_000)) + 3 * client.io_timeout;
        let theirs = recv(self.pair, server, wait)
            .with_context(|| format!("waiting for MPI rank {server}'s statistics"))
            .and_then(|b| decode::<Answer>(&b, "report"));
        let mine = mine.context("data connection 1")?;
        let theirs = match theirs? {
            Answer::Report { result: Ok(r) } => r,
            Answer::Report { result: Err(e) } => bail!("MPI rank {server}: {e}"),
            other => bail!("unexpected message from MPI rank {server}: {other:?}"),
        };
        let mut out = PointOutcome {
            client_streams: Vec::new(),
            exchanges: Vec::new(),
            crr: None,
            server: theirs.report,
            client_socket,
            server_socket: theirs.socket,
            client_cpu: CpuTime::default(),
            client_instruments: None,
        };
        match mine {
            WorkerResult::Stream(mut s) => {
                s.io_path = io_path;
                out.client_cpu = s.cpu;
                out.client_streams.push((0, s));
            }
            WorkerResult::Exchange(x) => {
                out.client_cpu = x.cpu;
                out.exchanges.push(x);
            }
            WorkerResult::Responder(_) => bail!("the client rank never responds"),
        }
        Ok(RunOutcome::of(out))
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.release();
        }
    }
}

/// This rank's connection for one run: both ends of a stream keep a window of messages in
/// flight (osu_bw); ping-pong and request/response move each message straight from the
/// pattern's buffer (IMB PingPong, osu_latency).
fn connection(
    role: Role,
    peer: mpi::Rank,
    run: u64,
    point: &PointSpec,
    window: u32,
) -> MpiConnection {
    let tag = mpi::run_tag(run);
    let streaming = matches!(role, Role::Sender | Role::Receiver);
    if streaming && window > 1 {
        let slots = mpi::window_for(window, point.request_size);
        let sends = role == Role::Sender;
        MpiConnection::streaming(peer, tag, sends, slots, point.request_size as usize)
    } else {
        MpiConnection::new(peer, tag)
    }
}

/// The server rank of `pair`: greets the client rank, then runs what it is told until Bye.
pub fn serve(pair: MpiPair) -> Result<()> {
    let client = pair.client;
    send(
        pair,
        client,
        &Answer::Hello {
            environment: Environment::capture(),
        },
        IDLE,
    );
    let first = recv(pair, client, IDLE)
        .with_context(|| format!("waiting for MPI rank {client}'s plan"))?;
    let (test, io_timeout, loss_timeout, window) = match decode::<Instruction>(&first, "plan")? {
        Instruction::Open {
            test,
            io_timeout_ms,
            loss_timeout_ms,
            window,
        } => (
            test,
            Duration::from_millis(io_timeout_ms),
            Duration::from_millis(loss_timeout_ms),
            window,
        ),
        Instruction::Bye => return Ok(()),
        other => bail!("unexpected first instruction from MPI rank {client}: {other:?}"),
    };
    loop {
        let next =
            recv(pair, client, IDLE).with_context(|| format!("waiting for MPI rank {client}"))?;
        let (point, run) = match decode::<Instruction>(&next, "instruction")? {
            Instruction::Run { point, run } => (point, run),
            Instruction::Bye => return Ok(()),
            other => bail!("unexpected instruction from MPI rank {client}: {other:?}"),
        };
        let result = serve_point(client, &test, &point, run, io_timeout, loss_timeout, window)
            .map_err(|e| one_line(&e));
        send(pair, client, &Answer::Report { result }, io_timeout);
    }
}

/// The server rank's role in one run of a point, against `client`.
fn serve_point(
    client: Rank,
    test: &TestSpec,
    point: &PointSpec,
    run: u64,
    io_timeout: Duration,
    loss_timeout: Duration,
    window: u32,
) -> Result<RankReport> {
    let role = pattern::role(Side::Server, test.pattern, test.direction, test.streams, 0);
    let conn = connection(role, client, run, point, window);
    let io_path = conn.io_path();
    let socket = vec![conn.effective_options(&point.server_socket)];
    let ch = DataChannel::new(Box::new(conn), mpi::CAPABILITIES, false, io_timeout)?;
    let end = EndSignal::default();
    let stop = AtomicBool::new(false);
    let result = run_worker(
        ch,
        WorkerPlan {
            role,
            index: 0,
            test,
            point,
            io_timeout,
            loss_timeout,
            cpu: None,
            end: &end,
            stop: &stop,
            live: None,
            rtt_series: false,
        },
    )
    .context("data connection 1")?;
    let mut report = ServerMeasurement::default();
    match result {
        WorkerResult::Stream(mut s) => {
            s.io_path = io_path;
            report.cpu = s.cpu;
            report.streams.push(s);
        }
        WorkerResult::Responder(r) => {
            report.cpu = r.cpu;
            report.responders.push(r);
        }
        WorkerResult::Exchange(_) => bail!("the server rank never requests"),
    }
    Ok(RankReport { report, socket })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs a client numbers, as [`MpiRunner`] does.
    fn runs(pair: MpiPair, n: u64) -> Vec<u64> {
        (0..n).map(|i| pair.first_run + i * pair.run_step).collect()
    }

    #[test]
    fn wirebench_mpi_keeps_ranks_0_and_1_the_job_control_tag_and_runs_from_0() {
        let job = MpiPair::JOB;
        assert_eq!((job.client, job.server), (0, 1));
        assert_eq!(job.control_tag, mpi::CONTROL_TAG);
        assert_eq!(runs(job, 4), [0, 1, 2, 3]);
    }

    /// The two orders of two ranks never share a control tag or a data tag, and neither uses
    /// the job's control tag (the mesh's own messages).
    #[test]
    fn the_two_orders_of_a_mesh_pair_use_tags_of_their_own() {
        let there = MpiPair::in_mesh(2, 5);
        let back = MpiPair::in_mesh(5, 2);
        assert_eq!((back.client, back.server), (5, 2));
        assert_ne!(there.control_tag, back.control_tag);
        for p in [there, back] {
            assert_ne!(p.control_tag, mpi::CONTROL_TAG);
            assert!(p.control_tag < mpi::run_tag(0));
        }
        let tags = |p| -> Vec<Tag> { runs(p, 100).into_iter().map(mpi::run_tag).collect() };
        let (a, b) = (tags(there), tags(back));
        assert!(a.iter().all(|t| !b.contains(t)), "{a:?} {b:?}");
    }
}
