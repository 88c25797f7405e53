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
use crate::control::protocol::{PointSpec, ServerReport, TestSpec};
use crate::control::worker::{run_worker, WorkerPlan, WorkerResult};
use crate::env::Environment;
use crate::error::{one_line, EXIT_FAILURE};
use crate::pattern::stream::{EndSignal, IntervalEvent};
use crate::pattern::{self, CpuTime, DataChannel, Role, Side};
use crate::plan::runner::PointRunner;
use crate::plan::{PlannedPoint, RunPlan};
use crate::report::model::RunReport;
use crate::request::Request;
use crate::transport::mpi::{self, Job, MpiConnection};
use crate::transport::{Connection, EffectiveOptions};

const CLIENT: mpi::Rank = 0;
const SERVER: mpi::Rank = 1;

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
    report: ServerReport,
    socket: Vec<EffectiveOptions>,
}

/// Runs `request` on this rank, `window` messages in flight for a stream; the exit code of
/// this process.
pub fn run(request: &Request, window: u32) -> i32 {
    let job = match Job::init() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    };
    if job.size() != 2 {
        if job.rank() == 0 {
            eprintln!(
                "wirebench: error: wirebench mpi needs an MPI job of exactly 2 ranks, this one has {}: run it as `mpirun -np 2 wirebench mpi {} ...` (as root add --allow-run-as-root; see README)",
                job.size(),
                request.pattern.name()
            );
        }
        return EXIT_FAILURE;
    }
    if job.rank() == SERVER {
        return match serve() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("wirebench: error: MPI rank 1: {}", one_line(&e));
                EXIT_FAILURE
            }
        };
    }
    let mut runner = MpiRunner {
        library: job.library(),
        window,
        test: None,
        io_timeout: request.timeouts.io,
        runs: 0,
        closed: false,
    };
    let code = super::measure::run_with(request, None, &mut runner);
    // The plan or the database may have failed before the runner was opened: rank 1 still
    // waits for its first instruction.
    runner.close();
    code
}

fn encode<T: Serialize>(m: &T) -> Vec<u8> {
    serde_json::to_vec(m).unwrap_or_default()
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(bytes).with_context(|| format!("malformed {what} from the other rank"))
}

/// Rank 0's runner: each point's run is one Run instruction, the client's role on this rank,
/// and rank 1's Report.
struct MpiRunner {
    library: String,
    /// A stream's window of messages in flight at either end.
    window: u32,
    test: Option<TestSpec>,
    io_timeout: Duration,
    /// Runs so far: numbers each run's data tag.
    runs: u64,
    closed: bool,
}

impl MpiRunner {
    /// Tells rank 1 that nothing more comes: after Hello it waits for Open or Bye.
    fn release() {
        mpi::send_control(SERVER, &encode(&Instruction::Bye), IDLE);
    }
}

impl PointRunner for MpiRunner {
    fn open(&mut self, plan: &RunPlan, report: &mut RunReport) -> Result<()> {
        let test = &plan.test;
        if test.streams != 1 {
            bail!("wirebench mpi runs one stream between its two ranks; drop --parallel");
        }
        if test.direction == pattern::Direction::Bidir {
            bail!("wirebench mpi runs one direction at a time; drop --bidir");
        }
        let hello = mpi::recv_control(SERVER, IDLE).context("waiting for MPI rank 1")?;
        let environment = match decode::<Answer>(&hello, "greeting")? {
            Answer::Hello { environment } => environment,
            other => bail!("unexpected first message from MPI rank 1: {other:?}"),
        };
        let btl = std::env::var("OMPI_MCA_btl").unwrap_or_else(|_| "MPI's choice".into());
        report.server.address = Some(format!(
            "MPI rank 1 on {} ({}, btl {btl})",
            environment.hostname, self.library
        ));
        report.server.self_hosted = false;
        report.server_environment = Some(environment);
        mpi::send_control(
            SERVER,
            &encode(&Instruction::Open {
                test: test.clone(),
                io_timeout_ms: plan.client.io_timeout.as_millis() as u64,
                loss_timeout_ms: plan.client.loss_timeout.as_millis() as u64,
                window: self.window,
            }),
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
    ) -> Result<PointOutcome> {
        let test = self.test.as_ref().ok_or_else(|| anyhow!("not opened"))?;
        let point = &planned.spec;
        let run = self.runs;
        self.runs += 1;
        mpi::send_control(
            SERVER,
            &encode(&Instruction::Run {
                point: point.clone(),
                run,
            }),
            client.io_timeout,
        );
        let role = pattern::role(Side::Client, test.pattern, test.direction, test.streams, 0);
        let conn = connection(role, SERVER, run, point, self.window);
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
        // Rank 1's report comes whatever happened here, so that both ranks stay in step.
        let wait =
            Duration::from_millis(point.duration_ms.unwrap_or(3_600_000)) + 3 * client.io_timeout;
        let theirs = mpi::recv_control(SERVER, wait)
            .context("waiting for MPI rank 1's statistics")
            .and_then(|b| decode::<Answer>(&b, "report"));
        let mine = mine.context("data connection 1")?;
        let theirs = match theirs? {
            Answer::Report { result: Ok(r) } => r,
            Answer::Report { result: Err(e) } => bail!("MPI rank 1: {e}"),
            other => bail!("unexpected message from MPI rank 1: {other:?}"),
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
            WorkerResult::Responder(_) => bail!("rank 0 never responds"),
        }
        Ok(out)
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            MpiRunner::release();
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

/// Rank 1: greets rank 0, then runs what it is told until Bye.
fn serve() -> Result<()> {
    mpi::send_control(
        CLIENT,
        &encode(&Answer::Hello {
            environment: Environment::capture(),
        }),
        IDLE,
    );
    let first = mpi::recv_control(CLIENT, IDLE).context("waiting for MPI rank 0's plan")?;
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
        other => bail!("unexpected first instruction from MPI rank 0: {other:?}"),
    };
    loop {
        let next = mpi::recv_control(CLIENT, IDLE).context("waiting for MPI rank 0")?;
        let (point, run) = match decode::<Instruction>(&next, "instruction")? {
            Instruction::Run { point, run } => (point, run),
            Instruction::Bye => return Ok(()),
            other => bail!("unexpected instruction from MPI rank 0: {other:?}"),
        };
        let result = serve_point(&test, &point, run, io_timeout, loss_timeout, window)
            .map_err(|e| one_line(&e));
        mpi::send_control(CLIENT, &encode(&Answer::Report { result }), io_timeout);
    }
}

/// Rank 1's role in one run of a point.
fn serve_point(
    test: &TestSpec,
    point: &PointSpec,
    run: u64,
    io_timeout: Duration,
    loss_timeout: Duration,
    window: u32,
) -> Result<RankReport> {
    let role = pattern::role(Side::Server, test.pattern, test.direction, test.streams, 0);
    let conn = connection(role, CLIENT, run, point, window);
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
    let mut report = ServerReport::default();
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
        WorkerResult::Exchange(_) => bail!("rank 1 never requests"),
    }
    Ok(RankReport { report, socket })
}
