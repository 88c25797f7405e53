//! The runner without sockets: a scripted [`PointRunner`] hands it known round-trip times, so
//! that its repeats, its stopping rule, what it keeps after a failure and what it hands the
//! output are checked against exact numbers.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;

use anyhow::{bail, Result};

use super::runner::{new_report, run_with, PointRunner, RunOutcome};
use super::{build, PlannedPoint, RunPlan};
use crate::control::client::{ClientSide, PointOutcome};
use crate::control::protocol::ServerMeasurement;
use crate::model::stream::IntervalEvent;
use crate::model::{PointResult, RunDocument};
use crate::pattern::exchange::ExchangeStats;
use crate::pattern::{CpuTime, PatternKind};
use crate::plan::sink::Sink;
use crate::request::Request;
use crate::stats::LatencyRecorder;
use crate::transport::TransportKind;

/// Answers each run of each point with the round-trip times `rtts(point, run)` gives, or
/// fails on the run named in `fail_at`; records every call.
struct Scripted {
    rtts: fn(usize, u32) -> Vec<u64>,
    fail_at: Option<(usize, u32)>,
    calls: Vec<(u64, u32)>,
    opened: u32,
    closed: u32,
    runs_of: std::collections::HashMap<u64, u32>,
    /// The lab link the run is said to cross (set on the report when the session opens).
    lab: Option<crate::lab::LabState>,
}

impl Scripted {
    fn new(rtts: fn(usize, u32) -> Vec<u64>) -> Scripted {
        Scripted {
            rtts,
            fail_at: None,
            calls: Vec::new(),
            opened: 0,
            closed: 0,
            runs_of: Default::default(),
            lab: None,
        }
    }
}

impl PointRunner for Scripted {
    fn open(&mut self, _: &RunPlan, report: &mut RunDocument) -> Result<()> {
        self.opened += 1;
        report.lab = self.lab.clone();
        Ok(())
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        _: &ClientSide,
        _: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let size = planned.key.size;
        let run = *self
            .runs_of
            .entry(size)
            .and_modify(|r| *r += 1)
            .or_insert(0);
        self.calls.push((size, run));
        let point = self
            .calls
            .iter()
            .map(|c| c.0)
            .collect::<std::collections::BTreeSet<_>>();
        let index = point.iter().position(|&s| s == size).unwrap();
        if self.fail_at == Some((index, run)) {
            bail!("the scripted server went away");
        }
        let samples = (self.rtts)(index, run);
        let mut rtt = LatencyRecorder::new();
        for &ns in &samples {
            rtt.record(ns);
        }
        Ok(RunOutcome::of(PointOutcome {
            client_streams: Vec::new(),
            exchanges: vec![ExchangeStats {
                rtt,
                transactions: samples.len() as u64,
                lost: 0,
                stale: 0,
                first_ns: Some(50_000),
                elapsed_ns: samples.iter().sum::<u64>(),
                thinks: 0,
                think_ns: 0,
                cpu: CpuTime::default(),
                series: Vec::new(),
                serialisation: None,
                open_loop: None,
                path: None,
            }],
            crr: None,
            server: ServerMeasurement::default(),
            client_socket: Vec::new(),
            server_socket: Vec::new(),
            client_cpu: CpuTime::default(),
            client_instruments: None,
        }))
    }

    fn close(&mut self) {
        self.closed += 1;
    }
}

/// A decorator around [`Scripted`], as `--trace` wraps a run: a trace beside each run that
/// `traced(point, run)` picks, named after that run.
struct Traced<'a> {
    inner: &'a mut Scripted,
    traced: fn(usize, u32) -> bool,
    at: (usize, u32),
}

impl PointRunner for Traced<'_> {
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()> {
        self.inner.open(plan, report)
    }

    fn next_run(&mut self, point: usize, run: u32) {
        self.at = (point, run);
        self.inner.next_run(point, run);
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let outcome = self.inner.run_point(planned, client, live)?;
        let (point, run) = self.at;
        let file = format!("p{point}r{run}.pcap");
        let trace = (self.traced)(point, run)
            .then(|| crate::trace::TraceSummary::of_segments(file.as_ref(), 0, &[]));
        Ok(RunOutcome { trace, ..outcome })
    }

    fn close(&mut self) {
        self.inner.close();
    }
}

/// What the output was handed, in order.
#[derive(Default)]
struct Recorded {
    events: Vec<String>,
}

struct RecordingSink(Rc<RefCell<Recorded>>);

impl Sink for RecordingSink {
    fn begin(&mut self, r: &RunDocument) -> Result<()> {
        let n = r.planned_points.unwrap_or(0);
        self.0.borrow_mut().events.push(format!("begin {n}"));
        Ok(())
    }
    fn point(&mut self, _: &RunDocument, p: &PointResult) -> Result<()> {
        let e = format!("point {} size {}", p.index, p.key.size);
        self.0.borrow_mut().events.push(e);
        Ok(())
    }
    fn finish(&mut self, _: &RunDocument) -> Result<()> {
        self.0.borrow_mut().events.push("finish".into());
        Ok(())
    }
}

fn pingpong(sizes: &[u64]) -> Request {
    let mut r = Request::new(PatternKind::Pingpong, TransportKind::Tcp);
    r.sizes.size = Some(sizes.to_vec());
    r.output.save = false;
    r
}

fn run(
    request: &Request,
    runner: &mut Scripted,
) -> (RunDocument, Result<()>, Rc<RefCell<Recorded>>) {
    let plan = build(request).unwrap();
    let mut report = new_report(&plan, request);
    let recorded = Rc::new(RefCell::new(Recorded::default()));
    let mut sink = RecordingSink(recorded.clone());
    let result = run_with(&plan, &mut report, &mut sink, runner);
    (report, result, recorded)
}

/// 1..=100 us, each once: mean 50.5 us, min 1 us, max 100 us; one-way = RTT / 2.
fn hundred(_: usize, _: u32) -> Vec<u64> {
    (1..=100).map(|i| i * 1000).collect()
}

#[test]
fn each_point_is_summarised_from_exactly_the_samples_it_was_given() {
    let mut runner = Scripted::new(hundred);
    let (report, result, recorded) = run(&pingpong(&[1, 64, 1024]), &mut runner);
    result.unwrap();
    assert_eq!(runner.calls, vec![(1, 0), (64, 0), (1024, 0)]);
    assert_eq!((runner.opened, runner.closed), (1, 1));
    assert_eq!(report.points.len(), 3);
    for (i, p) in report.points.iter().enumerate() {
        assert_eq!(p.index, i);
        assert_eq!(p.runs, 1);
        let l = p.latency.as_ref().unwrap();
        assert_eq!(l.rtt.samples, 100);
        assert_eq!(l.rtt.min_ns, 1000);
        assert_eq!(l.rtt.max_ns, 100_000);
        assert_eq!(l.rtt.mean_ns, 50_500.0);
        assert_eq!(l.one_way_mean_ns, Some(25_250.0));
        assert_eq!(p.headline.values, vec![25_250.0]);
        assert_eq!(
            p.headline.validity.valid,
            Some(true),
            "{:?}",
            p.headline.validity
        );
    }
    assert_eq!(
        recorded.borrow().events,
        vec![
            "begin 3",
            "point 0 size 1",
            "point 1 size 64",
            "point 2 size 1024"
        ],
        "run_with begins the output once the session is open and hands each point over as it finishes (finish is the caller's)"
    );
}

#[test]
fn repeats_are_runs_of_the_same_point_and_their_mean_is_over_runs() {
    // Run k of every point: 100 samples of (k + 1) x 10 us: one-way 5, 10 and 15 us.
    fn by_run(_: usize, run: u32) -> Vec<u64> {
        vec![u64::from(run + 1) * 10_000; 100]
    }
    let mut request = pingpong(&[8, 16]);
    request.statistics.repeat = 3;
    let mut runner = Scripted::new(by_run);
    let (report, result, _) = run(&request, &mut runner);
    result.unwrap();
    assert_eq!(
        runner.calls,
        vec![(8, 0), (8, 1), (8, 2), (16, 0), (16, 1), (16, 2)]
    );
    for p in &report.points {
        assert_eq!(p.runs, 3);
        assert_eq!(p.headline.values, vec![5_000.0, 10_000.0, 15_000.0]);
        let over = p.headline.over_runs.as_ref().unwrap();
        assert_eq!(over.mean, 10_000.0);
        // The merged histogram holds all 300 samples.
        assert_eq!(p.latency.as_ref().unwrap().rtt.samples, 300);
    }
}

#[test]
fn until_ci_stops_at_the_minimum_runs_when_the_interval_is_met_and_at_the_cap_when_not() {
    // Identical runs: the interval has width 0 after the third.
    let mut request = pingpong(&[1]);
    request.statistics.until_ci = Some(0.01);
    request.statistics.max_repeat = 6;
    let mut steady = Scripted::new(hundred);
    let (report, result, _) = run(&request, &mut steady);
    result.unwrap();
    assert_eq!(steady.calls.len(), 3);
    assert_eq!(report.points[0].headline.target_met, Some(true));

    // Runs that alternate between 1 and 100 us never meet 1%: the cap ends them.
    fn alternating(_: usize, run: u32) -> Vec<u64> {
        vec![
            if run.is_multiple_of(2) {
                2_000
            } else {
                200_000
            };
            100
        ]
    }
    let mut noisy = Scripted::new(alternating);
    let (report, result, _) = run(&request, &mut noisy);
    result.unwrap();
    assert_eq!(noisy.calls.len(), 6);
    assert_eq!(report.points[0].runs, 6);
    assert_eq!(report.points[0].headline.target_met, Some(false));
}

#[test]
fn a_failure_keeps_every_point_before_it_and_names_the_point() {
    let mut runner = Scripted::new(hundred);
    runner.fail_at = Some((1, 0));
    let (report, result, recorded) = run(&pingpong(&[1, 64, 1024]), &mut runner);
    let e = format!("{:#}", result.unwrap_err());
    assert!(e.contains("point 2 (size 64 bytes)"), "{e}");
    assert!(e.contains("the scripted server went away"), "{e}");
    assert_eq!(report.points.len(), 1);
    assert_eq!(report.points[0].key.size, 1);
    assert_eq!(recorded.borrow().events, vec!["begin 3", "point 0 size 1"]);
    assert_eq!(runner.closed, 1, "the runner is closed after a failure too");
}

#[test]
fn too_few_samples_are_flagged_not_printed_as_a_result() {
    fn three(_: usize, _: u32) -> Vec<u64> {
        vec![10_000, 20_000, 30_000]
    }
    let mut runner = Scripted::new(three);
    let (report, result, _) = run(&pingpong(&[1]), &mut runner);
    result.unwrap();
    let h = &report.points[0].headline;
    assert_eq!(h.values, vec![10_000.0]);
    assert_eq!(h.validity.valid, Some(false));
    let why = h.validity.invalid_reason.as_deref().unwrap_or_default();
    assert!(why.contains("3 samples"), "{why}");
}

/// An output that fails to write its `fail_at`th point (a full disk).
struct FailingSink {
    points: usize,
    fail_at: usize,
}

impl Sink for FailingSink {
    fn begin(&mut self, _: &RunDocument) -> Result<()> {
        Ok(())
    }
    fn point(&mut self, _: &RunDocument, _: &PointResult) -> Result<()> {
        self.points += 1;
        if self.points == self.fail_at {
            anyhow::bail!("writing the output: No space left on device");
        }
        Ok(())
    }
    fn finish(&mut self, _: &RunDocument) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_write_ends_the_run_with_the_point_it_could_not_show_kept() {
    let mut runner = Scripted::new(hundred);
    let request = pingpong(&[1, 64, 1024]);
    let plan = build(&request).unwrap();
    let mut report = new_report(&plan, &request);
    let mut sink = FailingSink {
        points: 0,
        fail_at: 2,
    };
    let result = run_with(&plan, &mut report, &mut sink, &mut runner);
    let e = result.unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        "writing the output: No space left on device"
    );
    assert_eq!(runner.calls, vec![(1, 0), (64, 0)], "no point after it");
    assert_eq!((runner.opened, runner.closed), (1, 1));
    let sizes: Vec<u64> = report.points.iter().map(|p| p.key.size).collect();
    assert_eq!(sizes, [1, 64], "the point measured is kept");
}

#[test]
fn a_peak_along_the_sweep_is_flagged_with_its_exact_differences() {
    // One-way 5.0, 5.5, 15.0, 6.5, 7.0 us: the middle size stands out from both neighbours.
    fn peaked(point: usize, _: u32) -> Vec<u64> {
        let rtt = if point == 2 {
            30_000
        } else {
            10_000 + 1_000 * point as u64
        };
        vec![rtt; 100]
    }
    let mut runner = Scripted::new(peaked);
    let (report, result, _) = run(&pingpong(&[1, 2, 4, 8, 16]), &mut runner);
    result.unwrap();
    assert_eq!(report.anomalies.len(), 1, "{:?}", report.anomalies);
    let a = &report.anomalies[0];
    assert_eq!((a.axis.as_str(), a.point), ("size", 2));
    assert_eq!(a.value, 15_000.0);
    assert!((a.vs_previous.unwrap() - 9_500.0 / 5_500.0).abs() < 1e-12);
    assert!((a.vs_next.unwrap() - 8_500.0 / 6_500.0).abs() < 1e-12);
    // A smooth sweep has none.
    let mut smooth = Scripted::new(hundred);
    let (report, _, _) = run(&pingpong(&[1, 2, 4, 8]), &mut smooth);
    assert!(report.anomalies.is_empty());
}

/// A lab of `rate` bit/s and `delay` each way, with no delay line to ask for counters.
fn lab_of(rate: f64, delay: std::time::Duration) -> crate::lab::LabState {
    use crate::lab::config::{DirectionConfig, LinkConfig, Mechanism};
    let d = DirectionConfig {
        rate_bits_per_s: Some(rate),
        delay,
        ..DirectionConfig::default()
    };
    let host = |n: &str| crate::lab::HostInfo {
        netns: format!("wb-guard-{n}"),
        address: String::new(),
    };
    crate::lab::LabState {
        name: "guard".into(),
        config: LinkConfig {
            forward: d,
            back: d,
            mtu: 1500,
            mechanism: Mechanism::Auto,
            framing: Default::default(),
        },
        mechanism: "delay-line".into(),
        delay_line_pid: None,
        created_at: String::new(),
        host_a: host("a"),
        host_b: host("b"),
        tcp_goodput_forward: None,
        tcp_goodput_back: None,
        host_cpu: Vec::new(),
    }
}

/// The physics guard in the runner (once a minimum one-way time of 39 us on a
/// 1 ms link): round trips of 1-100 us over a link of 1 ms each way are faster than the
/// link. Each point is invalid with the reason before it is kept, its headline too, so the
/// sweep's metrics and the anomaly detector leave it out; its percentiles carry their floor.
#[test]
fn a_point_faster_than_its_lab_link_is_invalid_before_it_is_kept() {
    let mut runner = Scripted::new(hundred);
    runner.lab = Some(lab_of(10e6, std::time::Duration::from_millis(1)));
    let (report, result, _) = run(&pingpong(&[1, 64, 1024]), &mut runner);
    result.unwrap();
    assert_eq!(report.points.len(), 3);
    for p in &report.points {
        let l = p.latency.as_ref().unwrap();
        // One TCP segment of n + 66 bytes each way at 10 Mbit/s, after 1 ms.
        let floor_us = 1000.0 + (p.key.size + 66) as f64 * 8.0 / 10.0;
        let reason = format!(
            "fastest one-way time 0.50 us is below the link's delay + wire time {}: faster than the link",
            crate::units::format_us(floor_us * 1e3)
        );
        assert!(l.validity.reason().starts_with(&reason), "{:?}", l.validity);
        assert_eq!(p.headline.validity, l.validity);
        // 2n over a mean round trip of 50.5 us: 1024 B would cross at 324 Mbit/s, 34 times
        // the goodput; 1 B at 0.3 Mbit/s, within it.
        assert_eq!(
            l.validity
                .reason()
                .contains("2n/RTT 324.44 Mbit/s is 3392.2% of the link's goodput 9.56 Mbit/s"),
            p.key.size == 1024
        );
        let p90 = l.percentile_validity("p90");
        let p99 = l.percentile_validity("p99");
        assert_eq!((p90.valid, p99.valid), (Some(true), Some(false)));
    }
    assert!(
        report.sweep_metrics.is_empty(),
        "{:?}",
        report.sweep_metrics
    );
    assert!(report.anomalies.is_empty());
    // Without a lab the same times are valid: nothing says they are faster than anything.
    let mut runner = Scripted::new(hundred);
    let (report, result, _) = run(&pingpong(&[1, 64, 1024]), &mut runner);
    result.unwrap();
    assert!(report
        .points
        .iter()
        .all(|p| p.headline.validity.valid == Some(true)));
}

/// The guard counts the wire bytes the link's framing charges: 1024-byte ping-pongs of 25 us
/// (2n/RTT 655.36 Mbit/s) over 0.5 s fit a 720 Mbit/s link of kernel frames (TCP goodput
/// 688.61 Mbit/s) but not one of AAL5 cells (1448 payload bytes in 1696 wire bytes: 614.72
/// Mbit/s).
#[test]
fn a_figure_above_the_atm_goodput_is_flagged_where_ethernet_frames_would_carry_it() {
    fn steady(_: usize, _: u32) -> Vec<u64> {
        vec![25_000; 20_000]
    }
    let goodput_reason = |framing| {
        let mut lab = lab_of(720e6, std::time::Duration::ZERO);
        lab.config.framing = framing;
        let mut runner = Scripted::new(steady);
        runner.lab = Some(lab);
        let (report, result, _) = run(&pingpong(&[1024]), &mut runner);
        result.unwrap();
        let l = report.points[0].latency.clone().unwrap();
        l.validity.reason().to_owned()
    };
    let frame = goodput_reason(crate::lab::framing::Framing::Frame);
    assert!(!frame.contains("2n/RTT"), "{frame}");
    let atm = goodput_reason(crate::lab::framing::Framing::AtmAal5);
    assert!(
        atm.contains("2n/RTT 655.36 Mbit/s is 106.6% of the link's goodput 614.72 Mbit/s"),
        "{atm}"
    );
}

/// What a run measured beside a point comes back with that run: the point keeps the last
/// run's that had any, and a point none of whose runs had any keeps none of another point's.
#[test]
fn a_point_keeps_the_side_results_of_its_last_run_that_had_them() {
    fn first_two_of_point_0(point: usize, run: u32) -> bool {
        point == 0 && run < 2
    }
    let mut request = pingpong(&[1, 64]);
    request.statistics.repeat = 3;
    let plan = build(&request).unwrap();
    let mut report = new_report(&plan, &request);
    let mut scripted = Scripted::new(hundred);
    let mut runner = Traced {
        inner: &mut scripted,
        traced: first_two_of_point_0,
        at: (0, 0),
    };
    let recorded = Rc::new(RefCell::new(Recorded::default()));
    let result = run_with(
        &plan,
        &mut report,
        &mut RecordingSink(recorded),
        &mut runner,
    );
    result.unwrap();
    assert_eq!(scripted.calls.len(), 6);
    let files: Vec<Option<&str>> = report
        .points
        .iter()
        .map(|p| p.trace.as_ref().map(|t| t.file.as_str()))
        .collect();
    assert_eq!(files, [Some("p0r1.pcap"), None]);
    assert!(report
        .points
        .iter()
        .all(|p| p.fairness.is_none() && p.load.is_none()));
}
