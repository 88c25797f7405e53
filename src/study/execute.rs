//! Runs a study: every run of its schedule in a child process of its own (`wirebench
//! __measure`), so that a run that hangs is ended at its timeout and one that crashes takes
//! nothing else with it; each result saved as it arrives, so that an interrupted study resumes
//! where it stopped. In the lab, one lab per link (the schedule groups runs by link) with the
//! server on host b and every run's client started on host a.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::apply;
use super::file::{OnFailure, StudyFile};
use super::schedule::{self, Slot};
use super::search::{self, Delivery};
use super::store::{self, Kind, Status, StudyRun};
use super::summary;
use crate::lab::config::LinkSpec;
use crate::lab::Lab;
use crate::model::RunDocument;
use crate::request::{Format, Request};
use crate::store::db::{self, Db, Source};
use crate::units::Rate;

/// How `wirebench study FILE` was asked to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub file: PathBuf,
    pub resume: bool,
    pub db: Option<PathBuf>,
    /// Tiny durations, one repetition, short searches: checks that a study file runs end to
    /// end (CI), not a measurement.
    pub smoke: bool,
}

/// The duration of each run with `--smoke`.
const SMOKE_DURATION: Duration = Duration::from_millis(150);

/// The study with `--smoke`'s reductions.
pub fn smoke(mut file: StudyFile) -> StudyFile {
    file.repetitions = 1;
    file.warmup_runs = file.warmup_runs.min(1);
    file.anomaly.rerun = file.anomaly.rerun.min(1);
    if let Some(s) = &mut file.search {
        s.steps = s.steps.min(1);
    }
    let stop = &mut file.run.stop;
    if stop.bytes.is_none() && stop.iterations.is_none() {
        stop.duration = Some(SMOKE_DURATION);
    }
    // Byte- and iteration-bound runs shrink too (not below what a figure needs at all).
    stop.iterations = stop.iterations.map(|n| n.min(3));
    stop.bytes = stop.bytes.map(|n| n.min(1 << 20));
    stop.warmup = stop.warmup.min(3);
    file
}

/// One point's settings, link and the time a run of it may take.
struct PointPlan {
    request: Request,
    link: Option<LinkSpec>,
    labels: String,
    timeout: Duration,
}

fn plan_points(file: &StudyFile, coords: &[Vec<usize>]) -> Result<Vec<PointPlan>> {
    let mut out = Vec::new();
    for (i, c) in coords.iter().enumerate() {
        let labels = file
            .axes
            .iter()
            .zip(c)
            .map(|(a, &k)| format!("{}={}", a.name, apply::value_label(a, k)))
            .collect::<Vec<_>>()
            .join(", ");
        let at = || {
            if labels.is_empty() {
                format!("point {}", i + 1)
            } else {
                format!("point {} ({labels})", i + 1)
            }
        };
        let mut request = apply::request_for(file, c).with_context(at)?;
        let link = apply::link_for(file, c).with_context(at)?;
        if link.is_some() && request.server.to.is_some() {
            bail!(
                "{}: a study in the lab places the server on host b itself; drop run.server.to",
                at()
            );
        }
        if let Some(search) = &file.search {
            rate(&search.low).with_context(|| "search.low".to_string())?;
            rate(&search.high).with_context(|| "search.high".to_string())?;
            // The search sets the rate of every probe.
            request.traffic.rate = Some(Rate::BitsPerSecond(rate(&search.high)?));
        }
        let plan = crate::plan::build(&request).with_context(at)?;
        if plan.points.len() != 1 {
            bail!(
                "{}: its settings make {} points (a list of sizes or buffers in [run]); a study point is one run: make that setting an axis",
                at(),
                plan.points.len()
            );
        }
        // Results go to the study, not to a terminal or a file of the run's own.
        request.output.format = Format::Json;
        request.output.save = false;
        request.output.file = None;
        let duration = plan.points[0]
            .spec
            .duration_ms
            .map_or(Duration::from_secs(10), Duration::from_millis);
        let runs = plan.repeat.max(plan.max_repeat) as u32;
        let timeout = file
            .timeout
            .unwrap_or(duration * 3 * runs + Duration::from_secs(30));
        out.push(PointPlan {
            request,
            link,
            labels,
            timeout,
        });
    }
    Ok(out)
}

fn rate(s: &str) -> Result<f64> {
    match crate::units::parse_rate(s).map_err(|e| anyhow!("{e}"))? {
        Rate::BitsPerSecond(b) => Ok(b),
        Rate::PacketsPerSecond(_) => bail!("a search rate is in bits per second"),
    }
}

/// A lab for the links of a study, brought up for one link at a time.
struct LabRun {
    lab: Lab,
    spec: LinkSpec,
    server: SocketAddr,
}

fn lab_up(name: &str, spec: &LinkSpec) -> Result<LabRun> {
    // "none" (or "") on a host_cpu axis: the point without a budget.
    let budgets = match spec
        .host_cpu
        .as_deref()
        .filter(|h| !matches!(*h, "" | "none"))
    {
        Some(h) => crate::lab::cpu::parse(h)?,
        None => Vec::new(),
    };
    let lab = Lab::up_with(name, spec.to_config()?, &budgets)?;
    let mut server = crate::plan::lab_server::start(
        &lab.state,
        crate::request::Timeouts::default().io,
        Default::default(),
        None,
    )?;
    if let Some(datagram) = spec.relay_datagram()? {
        // PVM's default route: task -> pvmd (host a) -> UDP -> pvmd (host b) -> task. The
        // client reaches the server through relay A; relay B forwards to the server.
        let (ns_a, ns_b) = (
            lab.state.host_a.netns.clone(),
            lab.state.host_b.netns.clone(),
        );
        let addr = |s: &str| -> Result<std::net::IpAddr> { Ok(s.parse()?) };
        server = crate::relay::spawn_udp_pair(
            SocketAddr::new(addr(crate::lab::ADDR_A)?, 0),
            SocketAddr::new(addr(crate::lab::ADDR_B)?, 0),
            server,
            datagram,
            &|f| crate::lab::in_netns(&ns_b, f),
            &|f| crate::lab::in_netns(&ns_a, f),
        )
        .context("starting the route's relays")?;
    }
    Ok(LabRun {
        lab,
        spec: spec.clone(),
        server,
    })
}

/// Labs that studies killed with SIGKILL (or lost with the machine) left behind: named
/// "study-" + the pid of a study that no longer runs.
fn remove_stale_labs() {
    for name in crate::lab::list() {
        let Some(pid) = name
            .strip_prefix("study-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !crate::lab::alive(pid) {
            eprintln!(
                "study: removing lab {name}, left behind by study process {pid}, which is gone"
            );
            if let Err(e) = crate::lab::down(&name) {
                eprintln!(
                    "study: could not remove lab {name}: {}",
                    crate::error::one_line(&e)
                );
            }
        }
    }
}

/// One run of `request` in a child process (on host a of `lab` if given), ended at `timeout`.
fn measure(request: &Request, lab: Option<&LabRun>, timeout: Duration) -> Result<RunDocument> {
    // This very binary, even if its file was replaced or removed while the study runs (a
    // rebuild): the kernel keeps the running image reachable through /proc/self/exe.
    let exe = PathBuf::from("/proc/self/exe");
    let mut request = request.clone();
    let lab_name = lab.map(|l| l.lab.state.name.clone());
    if let Some(l) = lab {
        request.server.to = Some(l.server.to_string());
    }
    let spawn = move || -> Result<Child> {
        let mut cmd = Command::new(exe);
        std::os::unix::process::CommandExt::arg0(&mut cmd, "wirebench");
        cmd.arg("__measure");
        if let Some(n) = lab_name {
            cmd.arg("--lab").arg(n);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a run")
    };
    let mut child = match lab {
        // A process started from a thread in host a's namespace is in it.
        Some(l) => crate::lab::in_netns(&l.lab.state.host_a.netns, spawn)?,
        None => spawn()?,
    };
    let input = serde_json::to_vec(&request)?;
    let mut stdin = child
        .stdin
        .take()
        .context("the run's stdin is not a pipe")?;
    let mut stdout = child
        .stdout
        .take()
        .context("the run's stdout is not a pipe")?;
    let mut stderr = child
        .stderr
        .take()
        .context("the run's stderr is not a pipe")?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let _ = stdin.write_all(&input);
    drop(stdin);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "timed out after {} (the study's timeout)",
                crate::units::format_duration(timeout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let why = err
            .lines()
            .rev()
            .find(|l| l.starts_with("wirebench: error: "))
            .or_else(|| err.lines().rev().find(|l| !l.trim().is_empty()))
            .map(|l| l.trim_start_matches("wirebench: error: ").to_string())
            .unwrap_or_else(|| format!("the run ended with {status}"));
        bail!("{why}");
    }
    db::parse_report(&out).context("reading the run's result")
}

/// What the study's loop needs beside the slots.
struct Study<'a> {
    file: &'a StudyFile,
    points: Vec<PointPlan>,
    db: Db,
    id: i64,
    lab: Option<LabRun>,
    lab_name: String,
    /// Seconds each finished slot took, for the time left.
    took: Vec<f64>,
    /// Where the segment traces of the study's runs go.
    trace_dir: PathBuf,
}

impl Study<'_> {
    fn ensure_lab(&mut self, link: &Option<LinkSpec>) -> Result<()> {
        let Some(spec) = link else {
            self.lab = None;
            return Ok(());
        };
        if self.lab.as_ref().is_some_and(|l| &l.spec == spec) {
            return Ok(());
        }
        // The old lab goes down before the new one takes its name.
        self.lab = None;
        self.lab = Some(lab_up(&self.lab_name, spec).context("bringing up the lab")?);
        Ok(())
    }

    fn label(&self, slot: &Slot, kind: Kind) -> String {
        let p = &self.points[slot.point];
        let what = match kind {
            Kind::Rerun => format!("re-run {}", slot.repetition),
            Kind::Probe | Kind::Search => format!("search {}", slot.repetition),
            Kind::Measure => format!("run {} of {}", slot.repetition, self.file.repetitions),
        };
        if p.labels.is_empty() {
            format!("study {} #{}: {what}", self.file.name, self.id)
        } else {
            format!(
                "study {} #{}: {}, {what}",
                self.file.name, self.id, p.labels
            )
        }
    }

    /// One run with the study's retry policy; Ok(None) when every attempt failed.
    fn run_once(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> (Result<(i64, RunDocument)>, u32) {
        let attempts = match self.file.on_timeout {
            OnFailure::Retry => 1 + self.file.retries,
            OnFailure::Skip => 1,
        };
        let mut last = Err(anyhow!("not run"));
        for attempt in 1..=attempts {
            last = measure(request, self.lab.as_ref(), timeout).and_then(|r| {
                let id = self.db.insert(&r, Source::Study)?;
                Ok((id, r))
            });
            match &last {
                Ok(_) => return (last, attempt),
                Err(e) if attempt < attempts => {
                    eprintln!(
                        "  attempt {attempt} failed: {}; trying again",
                        crate::error::one_line(e)
                    );
                }
                Err(_) => {}
            }
            if crate::plan::runner::interrupted() {
                return (last, attempt);
            }
        }
        (last, attempts)
    }

    fn slot(
        &mut self,
        index: usize,
        slot: Slot,
        kind: Kind,
        total: usize,
        done: usize,
    ) -> Result<()> {
        let started = Instant::now();
        let left = match self.took.len() {
            0 => String::new(),
            n => {
                let mean = self.took.iter().sum::<f64>() / n as f64;
                format!(
                    ", about {} left",
                    crate::units::format_clock(mean * (total - done) as f64)
                )
            }
        };
        let point = &self.points[slot.point];
        let mut request = point.request.clone();
        request.output.label = Some(self.label(&slot, kind));
        let timeout = point.timeout;
        let traced = self.file.trace || (kind == Kind::Rerun && self.file.anomaly.trace);
        if traced && request.transport == crate::transport::TransportKind::Tcp {
            // Created if missing, and not through a link (see crate::outfile).
            crate::outfile::OutDir::open(&self.trace_dir, true)?;
            request.trace = Some(crate::trace::TraceRequest {
                file: self.trace_dir.join(format!("run-{index}.pcap")),
                side: None,
                snaplen: crate::trace::DEFAULT_SNAPLEN,
                probe: crate::trace::ProbeMode::Off,
            });
            // The study's own numbered files in its own directory: a retried or resumed slot
            // replaces what its failed attempt left (still never through a link).
            request.output.force = true;
        }
        eprintln!(
            "study: [{}/{}] {}{}",
            done + 1,
            total,
            request.output.label.as_deref().unwrap_or_default(),
            left
        );
        self.ensure_lab(&self.points[slot.point].link.clone())?;
        if let (Some(search), Kind::Measure) = (&self.file.search, kind) {
            self.search(index, slot, &request, search.clone(), timeout)?;
        } else {
            let (result, attempts) = self.run_once(&request, timeout);
            let row = StudyRun {
                slot: index,
                probe: 0,
                point: slot.point,
                repetition: slot.repetition,
                kind,
                status: if result.is_ok() {
                    Status::Done
                } else {
                    Status::Failed
                },
                run_id: result.as_ref().ok().map(|(id, _)| *id),
                attempts,
                error: result.as_ref().err().map(crate::error::one_line),
                rate_bits_per_s: None,
            };
            match &result {
                Ok((id, r)) => {
                    let figures = summary::run_figures(r);
                    let shown: Vec<String> = figures
                        .iter()
                        .take(2)
                        .map(|f| {
                            format!(
                                "{}{} {}{}",
                                f.side.map(|s| format!("{s} ")).unwrap_or_default(),
                                f.name,
                                summary::format_value(f.value, f.unit),
                                if f.valid { "" } else { " (not valid)" }
                            )
                        })
                        .collect();
                    eprintln!("  run {id}: {}", shown.join(", "));
                    if let Some(t) = r.points.first().and_then(|p| p.trace.as_ref()) {
                        eprintln!("  {}", t.line());
                    }
                }
                Err(e) => eprintln!("  failed: {}", crate::error::one_line(e)),
            }
            if !crate::plan::runner::interrupted() || result.is_ok() {
                store::record(&self.db, self.id, &row)?;
            }
        }
        self.took.push(started.elapsed().as_secs_f64());
        Ok(())
    }

    fn search(
        &mut self,
        index: usize,
        slot: Slot,
        request: &Request,
        target: super::file::SearchSpec,
        timeout: Duration,
    ) -> Result<()> {
        let (low, high) = (rate(&target.low)?, rate(&target.high)?);
        let mut probe_no = 0u32;
        let outcome = search::bisect(&target, low, high, |r| {
            probe_no += 1;
            let mut req = request.clone();
            req.traffic.rate = Some(Rate::BitsPerSecond(r));
            req.output.label = req.output.label.as_ref().map(|l| {
                format!(
                    "{l}, probe {probe_no} at {}",
                    crate::units::format_mbit_s(r)
                )
            });
            let (result, attempts) = self.run_once(&req, timeout);
            let row = |status, run_id, error| StudyRun {
                slot: index,
                probe: probe_no,
                point: slot.point,
                repetition: slot.repetition,
                kind: Kind::Probe,
                status,
                run_id,
                attempts,
                error,
                rate_bits_per_s: Some(r),
            };
            let (id, report) = match result {
                Ok(x) => x,
                Err(e) => {
                    let why = crate::error::one_line(&e);
                    store::record(&self.db, self.id, &row(Status::Failed, None, Some(why)))?;
                    return Err(e);
                }
            };
            let delivery = delivery(&report, r)
                .ok_or_else(|| anyhow!("run {id} has no stream totals to judge delivery by"))?;
            store::record(&self.db, self.id, &row(Status::Done, Some(id), None))?;
            let misses = delivery.misses(&target);
            eprintln!(
                "  probe {probe_no} at {}: {:.2}% delivered, sender {:.2}% short of the rate: {}",
                crate::units::format_mbit_s(r),
                delivery.delivered * 100.0,
                delivery.sender_shortfall * 100.0,
                if misses.is_empty() {
                    "meets the target".to_owned()
                } else {
                    format!("misses the target ({})", misses.join("; "))
                }
            );
            Ok((delivery, id))
        });
        let row = |status, run_id, rate, error| StudyRun {
            slot: index,
            probe: 0,
            point: slot.point,
            repetition: slot.repetition,
            kind: Kind::Search,
            status,
            run_id,
            attempts: 1,
            error,
            rate_bits_per_s: rate,
        };
        match outcome {
            Ok(o) => {
                let best = o.best.as_ref();
                match best {
                    Some(b) => eprintln!(
                        "  search: {} meets the target ({:.2}% delivered){}",
                        crate::units::format_mbit_s(b.rate_bits_per_s),
                        b.delivery.delivered * 100.0,
                        if o.first_failing.is_none() {
                            "; so does the upper end: the answer is at least that"
                        } else {
                            ""
                        }
                    ),
                    None => eprintln!("  search: not even the lowest rate meets the target"),
                }
                store::record(
                    &self.db,
                    self.id,
                    &row(
                        Status::Done,
                        best.map(|b| b.run),
                        best.map(|b| b.rate_bits_per_s),
                        None,
                    ),
                )
            }
            Err(e) => {
                eprintln!("  search failed: {}", crate::error::one_line(&e));
                if crate::plan::runner::interrupted() {
                    return Ok(());
                }
                store::record(
                    &self.db,
                    self.id,
                    &row(Status::Failed, None, None, Some(crate::error::one_line(&e))),
                )
            }
        }
    }
}

/// What a run at `asked` bit/s delivered: messages received of messages sent (datagram
/// streams), and how far the sender fell short of the rate.
pub fn delivery(r: &RunDocument, asked: f64) -> Option<Delivery> {
    let s = r.points.first()?.stream.as_ref()?;
    let sent_bits: f64 = s.totals.iter().map(|t| t.sender_bits_per_s).sum();
    let (sent, received) = s.totals.iter().fold((0, 0), |(a, b), t| match &t.loss {
        Some(l) => (a + l.sent, b + l.received),
        // A byte stream delivers what it accepted.
        None => (a + t.sender_bytes_timed, b + t.sender_bytes_timed),
    });
    let d = Delivery::new(sent, received, sent_bits, asked);
    // Figures the physics guard or a floor marked invalid meet no target (see
    // search::Delivery::misses): the probe is a miss with their reason.
    let several = s.totals.len() > 1;
    let sides: Vec<(String, crate::stats::Validity)> = s
        .totals
        .iter()
        .flat_map(|t| {
            let dir = if several {
                format!("{} ", t.direction)
            } else {
                String::new()
            };
            [
                (format!("{dir}sender"), t.sender_validity()),
                (format!("{dir}receiver"), t.receiver_validity()),
            ]
        })
        .collect();
    let figures = crate::stats::validity::all(sides.iter().map(|(l, v)| (l.clone(), v)));
    Some(if figures.is_invalid() {
        d.invalid(figures.reason())
    } else {
        d
    })
}

/// `wirebench study FILE`: the exit code.
pub fn run(opts: &Options) -> Result<i32> {
    let (file, text) = StudyFile::read(&opts.file)?;
    let file = if opts.smoke { smoke(file) } else { file };
    let coords = schedule::points(&file)?;
    let points = plan_points(&file, &coords)?;
    let path = db::resolve(opts.db.as_deref())?;
    let db = Db::open_or_create(&path)?;
    let measured_slots = coords.len() * file.repetitions as usize;
    let (id, seed, mut order, finished) = if opts.resume {
        let s = store::resumable(&db, &file.name, &text)?;
        let rows = store::runs(&db, s.id)?;
        store::set_status(&db, s.id, "running")?;
        (s.id, s.seed, s.schedule, store::finished_slots(&rows))
    } else {
        let seed = file.seed.unwrap_or_else(|| {
            let mut b = [0u8; 8];
            let _ = getrandom::fill(&mut b);
            u64::from_le_bytes(b) >> 11
        });
        let mut order = schedule::slots(coords.len(), file.repetitions, file.order, seed);
        if points.iter().any(|p| p.link.is_some()) {
            order = schedule::group_by(&order, |s| {
                serde_json::to_string(&points[s.point].link).unwrap_or_default()
            });
        }
        let id = store::create(
            &db,
            &file.name,
            Some(&opts.file.display().to_string()),
            &text,
            seed,
            &order,
        )?;
        (id, seed, order, Default::default())
    };
    crate::plan::runner::stop_on_ctrl_c(crate::store::save::recover_before_exit);
    if points.iter().any(|p| p.link.is_some()) {
        remove_stale_labs();
    }
    eprintln!(
        "study {} (#{id}): {} points x {} repetitions = {} runs, {} order{}{}; saved in {}{}",
        file.name,
        coords.len(),
        file.repetitions,
        measured_slots,
        match file.order {
            super::file::Order::Random => "random",
            super::file::Order::Sequential => "file",
        },
        if file.order == super::file::Order::Random {
            format!(" (seed {seed})")
        } else {
            String::new()
        },
        if points.iter().any(|p| p.link.is_some()) {
            ", in the lab"
        } else {
            ""
        },
        path.display(),
        if opts.resume {
            format!("; resuming: {} of {} done", finished.len(), order.len())
        } else {
            String::new()
        }
    );
    let mut study = Study {
        file: &file,
        points,
        db,
        id,
        lab: None,
        lab_name: format!("study-{}", std::process::id()),
        took: Vec::new(),
        trace_dir: path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("traces")
            .join(format!("study-{id}")),
    };
    let code = (|| -> Result<Option<i32>> {
        if !opts.resume {
            for k in 0..file.warmup_runs {
                let first = order[0];
                study.ensure_lab(&study.points[first.point].link.clone())?;
                eprintln!(
                    "study: warm-up run {} of {} (not recorded)",
                    k + 1,
                    file.warmup_runs
                );
                let p = &study.points[first.point];
                let _ = measure(&p.request, study.lab.as_ref(), p.timeout);
            }
        }
        let mut done = finished.len();
        for (index, slot) in order.clone().into_iter().enumerate() {
            if finished.contains(&index) {
                continue;
            }
            let kind = if index < measured_slots {
                Kind::Measure
            } else {
                Kind::Rerun
            };
            study.slot(index, slot, kind, order.len(), done)?;
            done += 1;
            if crate::plan::runner::interrupted() {
                return Ok(Some(130));
            }
        }
        // Anomalies: flagged, then re-run once with more repetitions when asked.
        let rows = store::runs(&study.db, id)?;
        let confidence = f64::from(study.points[0].request.statistics.confidence) / 100.0;
        let sums = summary::points(&file, &coords, &rows, confidence, |r| study.db.load(r).ok());
        let flagged = summary::anomalies(&file, &sums, file.anomaly.threshold);
        let has_reruns = order.len() > measured_slots;
        if !flagged.is_empty() && file.anomaly.rerun > 0 && !has_reruns && file.search.is_none() {
            let mut extra = Vec::new();
            for a in &flagged {
                if extra.iter().any(|s: &Slot| s.point == a.point) {
                    continue;
                }
                eprintln!(
                    "study: {}: re-running it {} more times",
                    a.describe(),
                    file.anomaly.rerun
                );
                extra.extend((1..=file.anomaly.rerun).map(|r| Slot {
                    point: a.point,
                    repetition: r,
                }));
            }
            let start = order.len();
            order.extend(extra);
            store::extend_schedule(&study.db, id, &order)?;
            for index in start..order.len() {
                study.slot(index, order[index], Kind::Rerun, order.len(), index)?;
                if crate::plan::runner::interrupted() {
                    return Ok(Some(130));
                }
            }
        }
        Ok(None)
    })();
    drop(study.lab.take());
    match code {
        Ok(Some(c)) => {
            store::set_status(&study.db, id, "interrupted")?;
            eprintln!(
                "study: interrupted; what was measured is saved: go on with `wirebench study {} --resume`",
                opts.file.display()
            );
            return Ok(c);
        }
        Err(e) => {
            let _ = store::set_status(&study.db, id, "failed");
            return Err(e.context(format!(
                "study #{id} stopped (resume with `wirebench study {} --resume`)",
                opts.file.display()
            )));
        }
        Ok(None) => {}
    }
    let failed = store::runs(&study.db, id)?
        .iter()
        .any(|r| r.kind != Kind::Probe && r.status == Status::Failed);
    store::set_status(
        &study.db,
        id,
        if failed { "incomplete" } else { "complete" },
    )?;
    if failed {
        eprintln!(
            "study: some runs failed; `wirebench study {} --resume` tries them again",
            opts.file.display()
        );
    }
    let shown = super::show::Shown::load(&study.db, id)?;
    store::set_anomalies(&study.db, id, &serde_json::to_string(&shown.anomalies)?)?;
    print!("{}", shown.table());
    Ok(
        if shown
            .points
            .iter()
            .all(|p| p.run_ids.is_empty() && p.search.is_none())
        {
            crate::error::EXIT_FAILURE
        } else {
            0
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DirectionTotal, StreamResult};

    /// A probe whose receiver the physics guard marked invalid is a miss with the guard's
    /// reason, though every byte arrived at the asked rate.
    #[test]
    fn a_probe_with_invalid_figures_meets_no_target() {
        let mut r = crate::store::db::tests::report("stream", 1, 1.0);
        let why = "receiver 136.6 Mbit/s is 109.1% of the link's goodput 125.2 Mbit/s";
        let total = DirectionTotal {
            direction: "client_to_server".into(),
            streams: 1,
            sender_bits_per_s: 5e6,
            receiver_bits_per_s: 5e6,
            sender_bytes_timed: 625_000,
            sender_valid: Some(true),
            receiver_valid: Some(true),
            ..DirectionTotal::default()
        };
        r.points[0].stream = Some(StreamResult {
            streams: Vec::new(),
            totals: vec![total],
        });
        let target = crate::study::file::SearchSpec {
            low: "1M".into(),
            high: "1G".into(),
            steps: 4,
            min_delivered: Some(0.95),
            max_receiver_loss: None,
            max_sender_loss: Some(0.0),
        };
        let d = delivery(&r, 5e6).unwrap();
        assert!(d.meets(&target), "{:?}", d.misses(&target));
        let t = &mut r.points[0].stream.as_mut().unwrap().totals[0];
        (t.receiver_valid, t.receiver_invalid_reason) = (Some(false), Some(why.into()));
        let d = delivery(&r, 5e6).unwrap();
        assert_eq!(d.delivered, 1.0);
        assert_eq!(
            d.misses(&target),
            vec![format!("figures invalid: receiver: {why}")]
        );
    }
}
