//! `--trace` around each run of a point: where the capture runs, which file it writes, and
//! its summary with what it cost.

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::RunPlan;
use crate::control::client::{PointOutcome, Session};
use crate::model::vocab::{PatternKind, Role};
use crate::model::RunDocument;
use crate::pattern::Direction;
use crate::request::Request;
use crate::trace::capture::{self, Capture, PortFilter};
use crate::trace::complete::{self, OnHost, Sender};
use crate::trace::probe::{self, ProbeSockets, Reader};
use crate::trace::{file_for, ProbeMode, ProbeSummary, TraceRequest, TraceSide, TraceSummary};

/// `--trace` for one run: captures each run of each point into the file named for it.
pub struct Tracer {
    request: TraceRequest,
    side: TraceSide,
    /// The network namespace to capture in (the lab's host b for the server side); None:
    /// this thread's.
    netns: Option<String>,
    filter: PortFilter,
    /// Whose outgoing frames the capture sees: the ends on its host.
    on_host: OnHost,
    points: usize,
    runs: u32,
    file: PathBuf,
    /// `--force`: files that exist may be replaced.
    force: bool,
    /// The files this run has created: a point measured twice for one run (idle, then under
    /// --load) captures into the same file again, which is this run's own to replace.
    created: HashSet<PathBuf>,
    probe: ProbeState,
    /// Whose sockets tcp_probe reads: the data's senders.
    probe_sockets: ProbeSockets,
}

/// Whether tcp_probe is read beside the capture.
enum ProbeState {
    /// --no-trace-probe.
    Off,
    /// Not readable here, and why (the summary says so).
    Unavailable(String),
    /// Read; with the notes every summary carries (tracefs mounted, namespaces).
    On(Vec<String>),
}

/// A capture running, with the tcp_probe reader beside it.
pub struct Running {
    capture: Capture,
    /// The reader, or why it did not start for this run.
    probe: Option<std::result::Result<(Reader, PathBuf), String>>,
}

/// Every file a trace of `plan` may write, one per point and run (see [`file_for`]): what
/// the run checks before its first point.
pub fn files(t: &TraceRequest, plan: &RunPlan) -> Vec<PathBuf> {
    let (points, runs) = (plan.points.len(), runs(plan));
    (0..points)
        .flat_map(|p| (0..runs).map(move |r| (p, r)))
        .map(|(p, r)| file_for(&t.file, p, points, r, runs))
        .flat_map(|f| {
            let side = (t.probe != ProbeMode::Off).then(|| probe::sidecar(&f));
            std::iter::once(f).chain(side)
        })
        .collect()
}

/// Runs per point: as many as --until-ci may take.
fn runs(plan: &RunPlan) -> u32 {
    if plan.until_ci.is_some() {
        plan.max_repeat
    } else {
        plan.repeat
    }
}

impl Tracer {
    /// Checks that the trace can be taken where it was asked for, before any point runs.
    pub fn new(
        t: &TraceRequest,
        plan: &RunPlan,
        args: &Request,
        report: &RunDocument,
        session: &Session,
    ) -> Result<Tracer> {
        let Some((data_port, exclude_port)) = session.data_ports() else {
            bail!("--trace captures TCP data connections: use --transport tcp");
        };
        let local_server = args.server.to.is_none();
        let lab_b = report.lab.as_ref().map(|l| l.host_b.netns.clone());
        let reachable = local_server || lab_b.is_some();
        let side = match t.side {
            Some(TraceSide::Server) if !reachable => bail!(
                "--trace-side server needs the server in reach: a self-hosted one (no --to) or the lab's (lab run)"
            ),
            Some(s) => s,
            // The sender's side when it is in reach; the client's otherwise.
            None if plan.test.direction == Direction::Reverse && reachable => TraceSide::Server,
            None => TraceSide::Client,
        };
        let in_lab = lab_b.is_some();
        let netns = match side {
            TraceSide::Server => lab_b,
            TraceSide::Client => None,
        };
        let filter = PortFilter {
            data_port,
            exclude_port,
        };
        let on_host = match (in_lab, side) {
            // The lab's hosts are namespaces of their own.
            (true, TraceSide::Client) => OnHost {
                client: true,
                server: false,
            },
            (true, TraceSide::Server) => OnHost {
                client: false,
                server: true,
            },
            // A self-hosted server shares the client's namespace.
            (false, _) if local_server => OnHost {
                client: true,
                server: true,
            },
            (false, _) => OnHost {
                client: true,
                server: false,
            },
        };
        // A capture socket opened and closed at once: no permission (CAP_NET_RAW) is said
        // before the first point, not after it.
        open_in(netns.as_deref(), filter, t.snaplen)?;
        let probe_sockets =
            ProbeSockets::senders(args.pattern == PatternKind::Stream, plan.test.direction);
        // The tracepoint opened and closed at once too: a --trace-probe that cannot be met
        // stops the run here, in one line.
        let probe = match t.probe {
            ProbeMode::Off => ProbeState::Off,
            mode => match probe::open(filter, probe_sockets) {
                Ok(source) => {
                    let mut notes = source.notes.clone();
                    if report.lab.is_some() {
                        notes.push(format!(
                            "the lab's hosts share this kernel and tracepoints are not per network namespace: the samples are those of every socket with port {data_port} at the end read (the data connections' sockets of both lab hosts, and any other connection on that port)"
                        ));
                    }
                    ProbeState::On(notes)
                }
                Err(why) if mode == ProbeMode::Required => {
                    bail!("--trace-probe: tcp_probe cannot be read: {why}")
                }
                Err(why) => ProbeState::Unavailable(why),
            },
        };
        Ok(Tracer {
            request: t.clone(),
            side,
            netns,
            filter,
            on_host,
            points: plan.points.len(),
            runs: runs(plan),
            file: t.file.clone(),
            force: args.output.force,
            created: HashSet::new(),
            probe,
            probe_sockets,
        })
    }

    pub fn next_run(&mut self, point: usize, run: u32) {
        self.file = file_for(&self.request.file, point, self.points, run, self.runs);
    }

    /// Opens the capture socket (in the server's namespace for the lab's server side) and
    /// starts the capture thread, and the tcp_probe reader when it is on.
    pub fn start(&mut self) -> Result<Running> {
        let (fd, lo) = open_in(self.netns.as_deref(), self.filter, self.request.snaplen)?;
        let replace = self.force || self.created.contains(&self.file);
        let file = crate::outfile::create(&self.file, replace)?;
        self.created.insert(self.file.clone());
        // The sidecar is created before the capture starts, so that a refused file stops
        // nothing half-way.
        // Tracepoints are global: the events are opened in this thread's namespace,
        // whichever side is captured, and before the sidecar is created, so that a run that
        // cannot open them now leaves no empty sidecar (its summary says why). The sidecar
        // is created before the capture starts: a refused file stops nothing half-way.
        let opened = match self.probe {
            ProbeState::On(_) => Some(match probe::open(self.filter, self.probe_sockets) {
                Ok(source) => {
                    let path = probe::sidecar(&self.file);
                    let replace = self.force || self.created.contains(&path);
                    let f = crate::outfile::create(&path, replace)?;
                    self.created.insert(path.clone());
                    Ok((source, f, path))
                }
                Err(why) => Err(why),
            }),
            _ => None,
        };
        let capture = Capture::start(fd, lo, file, &self.file, self.request.snaplen)?;
        let probe = opened.map(|o| {
            o.and_then(|(source, f, path)| {
                Reader::start(source, f, &path)
                    .map(|r| (r, path))
                    .map_err(|e| format!("{e:#}"))
            })
        });
        Ok(Running { capture, probe })
    }

    /// Ends the capture and gives its summary; `outcome` (when the point succeeded) gives
    /// the data threads' CPU time the capture's is set against.
    pub fn finish(&self, r: Running, outcome: Option<&PointOutcome>) -> Result<TraceSummary> {
        // The capture first (it waits for the last segments), then the reader, which reads
        // their samples; both are ended whatever either returns.
        let captured = r.capture.finish();
        let probed = r
            .probe
            .map(|p| p.map(|(reader, path)| (reader.finish(), path)));
        let got = captured.with_context(|| format!("--trace {}", self.file.display()))?;
        let mut s = TraceSummary::of_segments(&self.file, got.packets, &got.segments);
        s.side = Some(self.side);
        s.dropped = Some(got.drops);
        s.capture_cpu_ns = Some(got.cpu_ns);
        s.capture_elapsed_ns = Some(got.elapsed_ns);
        s.capture_cpu_share =
            (got.elapsed_ns > 0).then(|| got.cpu_ns as f64 / got.elapsed_ns as f64);
        let data_cpu = outcome.map(|o| match self.side {
            TraceSide::Client => o.client_cpu.total_ns(),
            TraceSide::Server => o.server.cpu.total_ns(),
        });
        s.capture_cpu_vs_data_threads = data_cpu
            .filter(|&d| d > 0)
            .map(|d| got.cpu_ns as f64 / d as f64);
        let c = match outcome {
            Some(o) => {
                let senders: Vec<Sender> = o
                    .client_streams
                    .iter()
                    .map(|(_, st)| (false, st))
                    .chain(o.server.streams.iter().map(|st| (true, st)))
                    .filter(|(_, st)| st.role == Some(Role::Sender))
                    .map(|(server, st)| Sender {
                        server,
                        sent: st.sent_segments,
                    })
                    .collect();
                let gso = got.gso_known.then_some(&got.gso_sizes[..]);
                complete::check(
                    &got.segments,
                    gso,
                    self.filter.data_port,
                    self.on_host,
                    &senders,
                )
            }
            None => complete::Completeness {
                note: Some("the point failed: no sender's count to check against".into()),
                ..Default::default()
            },
        };
        s.sender_data_segments = c.sender_data_segments;
        s.captured_data_segments = c.captured_data_segments;
        s.missing_data_segments = c.missing_data_segments;
        s.completeness_note = c.note;
        if got.malformed_blocks > 0 {
            let m = format!(
                "{} ring blocks could not be read whole",
                got.malformed_blocks
            );
            s.completeness_note = Some(match s.completeness_note.take() {
                Some(n) => format!("{n}; {m}"),
                None => m,
            });
        }
        s.tcp_probe = match (&self.probe, probed) {
            (ProbeState::Off, _) => None,
            (ProbeState::Unavailable(why), _) => Some(ProbeSummary::unavailable(why.clone())),
            (ProbeState::On(_), None) => None,
            (ProbeState::On(_), Some(Err(why))) => Some(ProbeSummary::unavailable(why)),
            (ProbeState::On(notes), Some(Ok((got, path)))) => {
                let got = got.with_context(|| format!("--trace {}", path.display()))?;
                let mut p = probe::summarise(&path, &got.samples, &s.flows);
                p.lost = Some(got.lost);
                p.reader_cpu_ns = Some(got.cpu_ns);
                p.reader_elapsed_ns = Some(got.elapsed_ns);
                p.reader_cpu_share =
                    (got.elapsed_ns > 0).then(|| got.cpu_ns as f64 / got.elapsed_ns as f64);
                for n in got.notes.iter().chain(notes) {
                    if !p.notes.contains(n) {
                        p.notes.push(n.clone());
                    }
                }
                Some(p)
            }
        };
        Ok(s)
    }
}

/// A capture socket in namespace `netns` (None: this thread's).
fn open_in(
    netns: Option<&str>,
    filter: PortFilter,
    snaplen: u32,
) -> Result<(crate::sys::ring::RxRing, Option<u32>)> {
    match netns {
        Some(ns) => crate::lab::in_netns(ns, move || capture::open(filter, snaplen)),
        None => capture::open(filter, snaplen),
    }
}
