//! Runs one side's role on one data connection: the same code for client and server, so
//! both ends of a test measure the same way (the two ranks of `wirebench mpi` run it too).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::protocol::{PointSpec, TestSpec};
use crate::pattern::exchange::{self, ExchangePlan, ExchangeStats, ResponderStats};
use crate::pattern::openloop::OpenLoopPlan;
use crate::pattern::stream::{self, EndSignal, IntervalEvent, RecvPlan, SendPlan, StreamStats};
use crate::pattern::{DataChannel, Role, StopAt};

/// How often a datagram responder looks at its stop flag.
pub const RESPONDER_POLL: Duration = Duration::from_millis(100);

// One per data connection at its end, never in a loop: boxing the stream's statistics would
// buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum WorkerResult {
    Stream(StreamStats),
    Exchange(ExchangeStats),
    Responder(ResponderStats),
}

/// Everything a worker needs besides its connection.
pub struct WorkerPlan<'a> {
    pub role: Role,
    pub index: u32,
    pub test: &'a TestSpec,
    pub point: &'a PointSpec,
    pub io_timeout: Duration,
    pub loss_timeout: Duration,
    pub cpu: Option<usize>,
    pub end: &'a EndSignal,
    pub stop: &'a AtomicBool,
    pub live: Option<mpsc::Sender<IntervalEvent>>,
    /// Requester: keep each round trip with its time (client side, `--load`).
    pub rtt_series: bool,
}

pub fn stop_at(p: &PointSpec) -> StopAt {
    StopAt {
        duration: p.duration_ms.map(Duration::from_millis),
        bytes: p.bytes,
        iterations: p.iterations,
    }
}

/// The plan of a stream sender of point `p` of test `t`; `abort` stops it early.
pub fn send_plan<'a>(t: &TestSpec, p: &PointSpec, abort: Option<&'a AtomicBool>) -> SendPlan<'a> {
    SendPlan {
        write_size: p.request_size as usize,
        stop: stop_at(p),
        warmup: p.warmup,
        pace: p.pace,
        interval: t.interval_ms.map(Duration::from_millis),
        fast: t.fast.clone(),
        abort,
        align_intervals: t.streams > 1,
    }
}

/// The plan of a stream receiver of point `p` of test `t`.
pub fn recv_plan(t: &TestSpec, p: &PointSpec) -> RecvPlan {
    RecvPlan {
        read_size: p.read_size as usize,
        warmup_bytes: p.warmup.saturating_mul(p.request_size),
        warmup_datagrams: p.warmup,
        interval: t.interval_ms.map(Duration::from_millis),
        expected: p.duration_ms.map(Duration::from_millis),
        fast: t.fast.clone(),
        buffers_fixed: p.buffers_fixed,
        align_intervals: t.streams > 1,
    }
}

/// The most bytes an exchange writes per call; 0: a whole message per call.
fn exchange_write_size(test: &TestSpec) -> usize {
    test.write_size
        .map_or(0, |w| usize::try_from(w).unwrap_or(usize::MAX))
}

/// Connection `index`'s share of an open-loop point: the offered rate split evenly over the
/// connections, each with a seed of its own so that their Poisson schedules differ.
fn open_loop(test: &TestSpec, p: &PointSpec, index: u32) -> Option<OpenLoopPlan> {
    let settings = test.open_loop?;
    let rate = p.rate_per_s?;
    Some(OpenLoopPlan {
        arrivals: settings.arrivals,
        rate_per_s: rate as f64 / f64::from(test.streams.max(1)),
        seed: settings.seed.wrapping_add(u64::from(index)),
        max_in_flight: settings.max_in_flight,
    })
}

pub fn run_worker(mut ch: DataChannel, plan: WorkerPlan<'_>) -> io::Result<WorkerResult> {
    if let Some(cpu) = plan.cpu {
        crate::sys::pin_current_thread(cpu)?;
    }
    let mut result = run_role(&mut ch, plan)?;
    // After the pattern: the serialisation of every message the connection carried.
    let times = ch.connection().serialisation(false);
    match &mut result {
        WorkerResult::Stream(s) => s.serialisation = times,
        WorkerResult::Exchange(x) => x.serialisation = times,
        WorkerResult::Responder(r) => r.serialisation = times,
    }
    Ok(result)
}

fn run_role(ch: &mut DataChannel, plan: WorkerPlan<'_>) -> io::Result<WorkerResult> {
    let p = plan.point;
    if matches!(plan.role, Role::Requester | Role::Responder) {
        ch.set_framed(plan.test.length_prefix != 0);
    }
    match plan.role {
        Role::Sender => {
            let send = send_plan(plan.test, p, Some(&plan.end.abort));
            stream::run_sender(ch, &send, plan.index, plan.live.as_ref()).map(WorkerResult::Stream)
        }
        Role::Receiver => {
            let recv = recv_plan(plan.test, p);
            stream::run_receiver(
                ch,
                &recv,
                plan.end,
                plan.io_timeout,
                plan.index,
                plan.live.as_ref(),
            )
            .map(WorkerResult::Stream)
        }
        Role::Requester => {
            let ex = ExchangePlan {
                request_size: p.request_size as usize,
                response_size: p.response_size as usize,
                burst: plan.test.burst,
                stop: stop_at(p),
                warmup: p.warmup,
                loss_timeout: plan.loss_timeout,
                write_size: exchange_write_size(plan.test),
                think: plan.test.think_ns.map(Duration::from_nanos),
                rtt_series: plan.rtt_series,
                open_loop: open_loop(plan.test, p, plan.index),
                path_timing: plan.test.path_timing,
            };
            exchange::run_requester(ch, &ex).map(WorkerResult::Exchange)
        }
        Role::Responder if plan.test.path_timing => exchange::run_path_responder(
            ch,
            p.request_size as usize,
            p.response_size as usize,
            exchange_write_size(plan.test),
            p.warmup,
            plan.stop,
            plan.io_timeout,
            RESPONDER_POLL,
            Some(&plan.end.received),
        )
        .map(WorkerResult::Responder),
        Role::Responder => exchange::run_responder(
            ch,
            p.request_size as usize,
            p.response_size as usize,
            exchange_write_size(plan.test),
            plan.stop,
            plan.io_timeout,
            RESPONDER_POLL,
            Some(&plan.end.received),
        )
        .map(WorkerResult::Responder),
    }
}

pub type Joined = std::thread::Result<io::Result<WorkerResult>>;
pub type Handle<'s> = std::thread::ScopedJoinHandle<'s, io::Result<WorkerResult>>;

/// Joins the workers that have `role` (or all, with `None`), keeping their results by index.
pub fn join_workers(
    roles: &[Role],
    only: Option<Role>,
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
) {
    for (i, role) in roles.iter().enumerate() {
        if only.is_some_and(|r| r != *role) {
            continue;
        }
        if let Some(h) = handles[i].take() {
            results[i] = Some(h.join());
        }
    }
}

/// Joins this side's senders and returns what each sent in its timed phase (messages, which
/// for a datagram transport are the datagrams the peer's loss accounting needs).
pub fn join_senders(
    roles: &[Role],
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
) -> Vec<u64> {
    join_workers(roles, Some(Role::Sender), handles, results);
    roles
        .iter()
        .zip(results.iter())
        .filter(|(role, _)| **role == Role::Sender)
        .map(|(_, r)| match r {
            Some(Ok(Ok(WorkerResult::Stream(s)))) => s.messages_timed,
            _ => 0,
        })
        .collect()
}

/// Tells this side's receivers that the peer's senders are done and how much they sent.
pub fn senders_done(roles: &[Role], ends: &[EndSignal], sent: &[u64]) -> anyhow::Result<()> {
    let receivers: Vec<usize> = (0..roles.len())
        .filter(|&i| roles[i] == Role::Receiver)
        .collect();
    if sent.len() != receivers.len() {
        anyhow::bail!(
            "peer reported {} sending streams, expected {}",
            sent.len(),
            receivers.len()
        );
    }
    for (k, &i) in receivers.iter().enumerate() {
        ends[i].sent_datagrams.store(sent[k], Ordering::Release);
        ends[i].done.store(true, Ordering::Release);
    }
    Ok(())
}
