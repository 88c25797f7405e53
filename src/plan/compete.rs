//! `--compete SPEC`: flows that share the path with a measured stream, each on a control
//! session of its own to the same server, with its own transport and congestion control,
//! started together with the measured stream and as long as it; each flow's receiver bytes
//! interval by interval, its share and Jain's fairness index (stats::fairness).
//!
//! The flows are put on one clock by their receivers' stamps (report::fairness) and judged
//! over the span they share; the competing flows report intervals a tenth of `-i` long, so
//! that the span's bounds cut little of them.

use std::net::SocketAddr;
use std::sync::{mpsc, Barrier};

use anyhow::{bail, Context, Result};

use super::runner::{PointRunner, RunOutcome};
use super::{PlannedPoint, RunPlan};
use crate::control::client::{ClientSide, PointOutcome, Session};
use crate::model::RunDocument;
use crate::pattern::stream::{IntervalEvent, StreamStats};
use crate::pattern::{Direction, PatternKind, Role};
use crate::request::Request;
use crate::transport::TransportKind;

pub use crate::request::flow_spec::FlowSpec;

/// `--compete`'s checks on the request.
pub fn check(r: &Request) -> Result<()> {
    if r.compete.is_empty() {
        return Ok(());
    }
    if r.pattern != PatternKind::Stream || r.traffic.direction != Direction::Forward {
        bail!("--compete shares a path with a stream from client to server: use it with `stream` without -R or --bidir");
    }
    if r.traffic.interval.is_none() {
        bail!(
            "--compete reports each flow's share per interval: give -i/--interval (e.g. -i 500ms)"
        );
    }
    if r.load.is_some() {
        bail!("--compete and --load are two kinds of competing traffic: choose one");
    }
    if r.stop.duration.is_none() && (r.stop.bytes.is_some() || r.stop.iterations.is_some()) {
        bail!("--compete runs its flows for the measured stream's duration: give -d, not --bytes or --iterations");
    }
    if r.server.one_port || r.transport == TransportKind::Mpi {
        bail!("--compete opens sessions and data ports of its own: not with --one-port or -t mpi");
    }
    for f in &r.compete {
        if let Some(cc) = &f.cc {
            crate::transport::sockopt::validate_cc(cc)?;
        }
    }
    Ok(())
}

/// A [`PointRunner`] that runs each of `inner`'s points with the competing flows beside it.
pub struct CompetingRunner<'a> {
    inner: &'a mut dyn PointRunner,
    request: &'a Request,
    flows: Vec<(Session, RunPlan)>,
}

impl<'a> CompetingRunner<'a> {
    pub fn new(inner: &'a mut dyn PointRunner, request: &'a Request) -> CompetingRunner<'a> {
        CompetingRunner {
            inner,
            request,
            flows: Vec::new(),
        }
    }

    fn flow_request(&self, f: &FlowSpec, server: SocketAddr) -> Request {
        let m = self.request;
        let mut r = Request::new(PatternKind::Stream, f.transport);
        r.server.to = Some(server.to_string());
        r.server.psk_file = m.server.psk_file.clone();
        r.local = m.local.clone();
        r.timeouts = m.timeouts.clone();
        r.socket.cc = f.cc.iter().cloned().collect();
        r.stop.duration = m.stop.duration;
        r.stop.warmup = m.stop.warmup;
        // A tenth of the measured stream's intervals (at least 10 ms): the fairness over the
        // common span cuts a competing flow's intervals at its bounds, pro rata, and finer
        // intervals make that cut small (report::fairness).
        r.traffic.interval = m
            .traffic
            .interval
            .map(|i| (i / 10).max(std::time::Duration::from_millis(10)).min(i));
        r.output.save = false;
        r
    }
}

impl PointRunner for CompetingRunner<'_> {
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()> {
        self.inner.open(plan, report)?;
        let server: SocketAddr = report
            .server
            .address
            .as_deref()
            .and_then(|a| a.parse().ok())
            .context("competing flows: the measured test's server address is not known")?;
        let psk = crate::control::auth::Psk::load(self.request.server.psk_file.as_deref())?;
        for f in &self.request.compete {
            let r = self.flow_request(f, server);
            let p = super::build(&r).with_context(|| format!("competing flow {f}"))?;
            let s = Session::open(
                server,
                p.test.clone(),
                &r.local,
                r.timeouts.io,
                psk.as_ref(),
            )
            .with_context(|| format!("competing flow {f}: opening its session"))?;
            self.flows.push((s, p));
        }
        Ok(())
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let start = Barrier::new(self.flows.len() + 1);
        let inner = &mut *self.inner;
        let (measured, others) = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .flows
                .iter_mut()
                .map(|(session, plan)| {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        let point = &plan.points.first().context("no flow point")?.spec;
                        session.run_point(point, &plan.client, None)
                    })
                })
                .collect();
            start.wait();
            let measured = inner.run_point(planned, client, live);
            let others: Vec<Result<PointOutcome>> = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a flow's thread panicked")))
                })
                .collect();
            (measured, others)
        });
        let measured = measured?;
        let mut flows = vec![(
            flow_label(self.request.transport, client.socket.cc.as_deref()),
            receivers(&measured.measured),
        )];
        for ((o, f), (_, plan)) in others
            .into_iter()
            .zip(&self.request.compete)
            .zip(&self.flows)
        {
            let o = o.with_context(|| format!("competing flow {f}"))?;
            flows.push((
                flow_label(f.transport, plan.client.socket.cc.as_deref()),
                receivers(&o),
            ));
        }
        Ok(RunOutcome {
            fairness: Some(crate::model::fairness::FairnessResult::of(&flows)),
            ..measured
        })
    }

    fn close(&mut self) {
        for (s, _) in self.flows.drain(..) {
            s.close();
        }
        self.inner.close();
    }

    fn next_run(&mut self, point: usize, run: u32) {
        self.inner.next_run(point, run);
    }
}

fn flow_label(t: TransportKind, cc: Option<&str>) -> String {
    match cc {
        Some(cc) => format!("{}:{cc}", t.name()),
        None => t.name().to_owned(),
    }
}

/// The server's receiving streams of one flow's point.
fn receivers(o: &PointOutcome) -> Vec<StreamStats> {
    o.server
        .streams
        .iter()
        .filter(|s| s.role == Some(Role::Receiver))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_parse_and_print_back() {
        for text in ["tcp", "tcp:bbr", "quic"] {
            let f: FlowSpec = text.parse().unwrap();
            assert_eq!(f.to_string(), text);
        }
        for bad in ["udp", "quic:bbr", "tcp:", "x:y"] {
            let e = bad.parse::<FlowSpec>().unwrap_err();
            assert!(e.starts_with("invalid flow"), "{bad}: {e}");
        }
    }
}
