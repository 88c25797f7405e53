//! When each (target, test) runs: a pure scheduler, fed the time and what is running, so that
//! its rules are tested on virtual time. No clock is read and nothing is started here.
//!
//! Rules, after pScheduler's and Pingmesh's practice: each pair is due every period and starts
//! at a uniformly random slip after its due time (so that many agents, or many tests of one,
//! do not all fire on the same second); two throughput tests to one target never run at once
//! (they would measure each other); a run that comes late is not made up for: the periods it
//! missed are skipped and counted; over the CPU budget nothing new starts, over the traffic
//! budget no throughput test starts (latency tests move little and keep running).

use std::time::Duration;

/// One (target, test) pair as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub target: usize,
    pub test: usize,
    pub period: Duration,
    pub slip: Duration,
    pub throughput: bool,
}

/// What holds runs back now, measured by the caller.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    /// The agent's CPU share is above its budget: nothing starts.
    pub cpu_exceeded: bool,
    /// The traffic of its runs is above its budget: throughput tests wait.
    pub traffic_exceeded: bool,
    /// Runs that may still start now (the pool's free places).
    pub free_slots: usize,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Jobs (indexes into the scheduler's jobs) to start now, in job order.
    pub start: Vec<usize>,
    /// When to decide again at the latest (also decide when a run ends).
    pub next: Duration,
}

/// A job held back by a budget is looked at again this often (and whenever a run ends).
pub const RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct State {
    job: Job,
    /// The due time of the period it runs for next.
    due: Duration,
    /// When that run starts: `due` plus its slip.
    start_at: Duration,
    skipped: u64,
}

pub struct Scheduler {
    states: Vec<State>,
    rng: fastrand::Rng,
}

impl Scheduler {
    /// Every job is first due at time 0 (and starts at its slip after it).
    pub fn new(jobs: Vec<Job>, seed: u64) -> Scheduler {
        let mut rng = fastrand::Rng::with_seed(seed);
        let states = jobs
            .into_iter()
            .map(|job| {
                let start_at = slip(&mut rng, job.slip);
                State {
                    job,
                    due: Duration::ZERO,
                    start_at,
                    skipped: 0,
                }
            })
            .collect();
        Scheduler { states, rng }
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.states.iter().map(|s| &s.job)
    }

    /// Periods of job `j` skipped because its run came too late.
    pub fn skipped(&self, j: usize) -> u64 {
        self.states.get(j).map_or(0, |s| s.skipped)
    }

    /// When job `j` is next to start, if nothing holds it.
    pub fn start_at(&self, j: usize) -> Option<Duration> {
        self.states.get(j).map(|s| s.start_at)
    }

    /// Decides at `now`; `running[j]` says whether job j's run is going (a job runs once at a
    /// time: its next period waits for it).
    pub fn decide(&mut self, now: Duration, running: &[bool], budgets: Budgets) -> Decision {
        let mut busy_targets: Vec<usize> = self
            .states
            .iter()
            .enumerate()
            .filter(|(j, s)| s.job.throughput && running.get(*j).copied().unwrap_or(false))
            .map(|(_, s)| s.job.target)
            .collect();
        let mut free = budgets.free_slots;
        let mut start = Vec::new();
        let mut next = Duration::MAX;
        let mut held = false;
        for j in 0..self.states.len() {
            if running.get(j).copied().unwrap_or(false) {
                continue;
            }
            let s = &self.states[j];
            if now < s.start_at {
                next = next.min(s.start_at);
                continue;
            }
            let blocked = free == 0
                || budgets.cpu_exceeded
                || (s.job.throughput
                    && (budgets.traffic_exceeded || busy_targets.contains(&s.job.target)));
            if blocked {
                // Another run's end, or the next look at the budgets, lets it go.
                held = true;
                continue;
            }
            free -= 1;
            start.push(j);
            if s.job.throughput {
                busy_targets.push(s.job.target);
            }
            self.advance(j, now);
            next = next.min(self.states[j].start_at);
        }
        if held {
            next = next.min(now + RECHECK);
        }
        Decision { start, next }
    }

    /// After job `j` starts at `now`: its next period, skipping (and counting) those whose
    /// due time has passed already.
    fn advance(&mut self, j: usize, now: Duration) {
        let s = &mut self.states[j];
        let mut due = s.due + s.job.period;
        while due <= now {
            due += s.job.period;
            s.skipped += 1;
        }
        s.due = due;
        let d = slip(&mut self.rng, s.job.slip);
        s.start_at = due + d;
    }
}

/// A uniformly random delay in [0, slip).
fn slip(rng: &mut fastrand::Rng, slip: Duration) -> Duration {
    let ns = u64::try_from(slip.as_nanos()).unwrap_or(u64::MAX);
    if ns == 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos(rng.u64(0..ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    fn job(target: usize, test: usize, period: f64, slip: f64, throughput: bool) -> Job {
        Job {
            target,
            test,
            period: s(period),
            slip: s(slip),
            throughput,
        }
    }

    fn open() -> Budgets {
        Budgets {
            cpu_exceeded: false,
            traffic_exceeded: false,
            free_slots: usize::MAX,
        }
    }

    /// Runs jobs of the given run lengths on virtual time until `end`; each start as
    /// (job, start, end).
    fn simulate(
        sched: &mut Scheduler,
        lengths: &[Duration],
        end: Duration,
        slots: usize,
    ) -> Vec<(usize, Duration, Duration)> {
        let n = lengths.len();
        let mut running: Vec<Option<Duration>> = vec![None; n];
        let mut runs = Vec::new();
        let mut now = Duration::ZERO;
        while now < end {
            for r in running.iter_mut() {
                if r.is_some_and(|e| e <= now) {
                    *r = None;
                }
            }
            let busy: Vec<bool> = running.iter().map(Option::is_some).collect();
            let budgets = Budgets {
                free_slots: slots - busy.iter().filter(|b| **b).count(),
                ..open()
            };
            let d = sched.decide(now, &busy, budgets);
            for j in d.start {
                let e = now + lengths[j];
                running[j] = Some(e);
                runs.push((j, now, e));
            }
            let first_end = running.iter().flatten().min().copied();
            let next = first_end.map_or(d.next, |e| e.min(d.next));
            assert!(next > now, "the scheduler must move time on");
            now = next;
        }
        runs
    }

    #[test]
    fn slips_stay_within_bounds_and_repeat_from_the_seed() {
        let jobs: Vec<Job> = (0..20).map(|i| job(i, 0, 10.0, 2.0, false)).collect();
        let lengths = vec![s(0.01); 20];
        let mut a = Scheduler::new(jobs.clone(), 7);
        let mut b = Scheduler::new(jobs.clone(), 7);
        let runs_a = simulate(&mut a, &lengths, s(600.0), usize::MAX);
        let runs_b = simulate(&mut b, &lengths, s(600.0), usize::MAX);
        assert_eq!(runs_a, runs_b, "one seed, one schedule");
        let mut c = Scheduler::new(jobs, 8);
        assert_ne!(runs_a, simulate(&mut c, &lengths, s(600.0), usize::MAX));
        // Every run k of a job starts in [10k, 10k + 2): its period's due time plus a slip.
        let mut count = vec![0u32; 20];
        for (j, start, _) in &runs_a {
            let k = f64::from(count[*j]);
            let at = start.as_secs_f64();
            assert!(
                at >= 10.0 * k && at < 10.0 * k + 2.0,
                "job {j} run {k} at {at}"
            );
            count[*j] += 1;
        }
        assert!(count.iter().all(|&c| c == 60), "{count:?}");
        // Not all on the same instant: the slip spreads them.
        let firsts: std::collections::BTreeSet<Duration> = runs_a
            .iter()
            .filter(|r| r.1 < s(2.0))
            .map(|r| r.1)
            .collect();
        assert!(firsts.len() > 10, "{firsts:?}");
    }

    #[test]
    fn throughput_tests_to_one_target_never_overlap_over_an_hour() {
        // 3 targets; per target 3 throughput tests and 2 latency tests, runs long against
        // their periods so that they collide often.
        let mut jobs = Vec::new();
        let mut lengths = Vec::new();
        for t in 0..3 {
            for (k, (period, len, thr)) in [
                (5.0, 3.0, true),
                (7.0, 2.5, true),
                (11.0, 4.0, true),
                (1.0, 0.2, false),
                (2.0, 0.5, false),
            ]
            .into_iter()
            .enumerate()
            {
                jobs.push(job(t, k, period, period / 2.0, thr));
                lengths.push(s(len));
            }
        }
        let mut sched = Scheduler::new(jobs.clone(), 42);
        let runs = simulate(&mut sched, &lengths, s(3600.0), 4);
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                let (ja, jb) = (&jobs[a.0], &jobs[b.0]);
                if ja.throughput && jb.throughput && ja.target == jb.target {
                    assert!(a.2 <= b.1 || b.2 <= a.1, "overlap: {a:?} {b:?}");
                }
            }
        }
        // At most 4 at once, and a job never overlaps itself.
        for a in &runs {
            let at_once = runs.iter().filter(|b| b.1 <= a.1 && a.1 < b.2).count();
            assert!(at_once <= 4, "{at_once} at {:?}", a.1);
        }
        // The crowded throughput tests came late and skipped periods; every job ran.
        let skipped: u64 = (0..jobs.len()).map(|j| sched.skipped(j)).sum();
        assert!(skipped > 0);
        for j in 0..jobs.len() {
            assert!(runs.iter().any(|r| r.0 == j), "job {j} never ran");
        }
    }

    #[test]
    fn a_late_run_is_not_run_twice_and_its_missed_periods_are_counted() {
        let mut sched = Scheduler::new(vec![job(0, 0, 1.0, 0.0, true)], 1);
        let d = sched.decide(s(0.0), &[false], open());
        assert_eq!(d.start, vec![0]);
        assert_eq!(d.next, s(1.0));
        // The run takes 3.5 s: due times 1, 2 and 3 pass while it runs.
        let d = sched.decide(s(2.0), &[true], open());
        assert!(d.start.is_empty());
        let d = sched.decide(s(3.5), &[false], open());
        assert_eq!(d.start, vec![0], "one run for the late period");
        assert_eq!(sched.skipped(0), 2, "due times 2 and 3 skipped");
        assert_eq!(d.next, s(4.0));
        let d = sched.decide(s(3.6), &[false], open());
        assert!(d.start.is_empty(), "not run twice");
    }

    #[test]
    fn a_second_throughput_test_waits_for_the_first_then_runs() {
        let jobs = vec![
            job(0, 0, 10.0, 0.0, true),
            job(0, 1, 10.0, 0.0, true),
            job(1, 0, 10.0, 0.0, true),
        ];
        let mut sched = Scheduler::new(jobs, 1);
        let d = sched.decide(s(0.0), &[false, false, false], open());
        assert_eq!(d.start, vec![0, 2], "the other target's runs at once");
        let d = sched.decide(s(0.5), &[true, false, true], open());
        assert!(d.start.is_empty(), "held while the first runs");
        let d = sched.decide(s(0.7), &[false, false, true], open());
        assert_eq!(d.start, vec![1], "runs when it ends");
    }

    #[test]
    fn budgets_hold_runs() {
        let jobs = vec![job(0, 0, 1.0, 0.0, false), job(0, 1, 1.0, 0.0, true)];
        let mut sched = Scheduler::new(jobs, 1);
        let cpu = Budgets {
            cpu_exceeded: true,
            ..open()
        };
        let d = sched.decide(s(0.0), &[false, false], cpu);
        assert!(d.start.is_empty(), "over the CPU budget nothing starts");
        assert_eq!(d.next, RECHECK, "and it looks again");
        let traffic = Budgets {
            traffic_exceeded: true,
            ..open()
        };
        let d = sched.decide(s(0.1), &[false, false], traffic);
        assert_eq!(d.start, vec![0], "latency tests are not held by traffic");
        let d = sched.decide(s(0.2), &[false, false], traffic);
        assert!(d.start.is_empty());
        let full = Budgets {
            free_slots: 0,
            ..open()
        };
        let d = sched.decide(s(0.3), &[false, false], full);
        assert!(d.start.is_empty(), "no free place in the pool");
        let d = sched.decide(s(0.4), &[false, false], open());
        assert_eq!(d.start, vec![1], "runs once the budget allows");
        assert_eq!(sched.skipped(1), 0);
    }
}
