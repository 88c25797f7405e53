//! What the instruments read around each point cost: the time to take one host's readings
//! (network counters and CPU time) and to take them again and subtract, and with a lab the
//! time to read its link's drops. Run by bench/instrument-cost; nothing here is timed inside
//! a point, since the readings are taken before its clocks start and after they stop.
//!
//! Usage: instrument_cost [ROUNDS] [LAB_NAME]

use std::time::Instant;

use anyhow::Context;
use wirebench::instruments::{CpuSnapshot, HostBefore, Snapshot};

fn median_us(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2], xs[xs.len() * 99 / 100])
}

fn time(rounds: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    f(); // warm the page cache and the allocator
    let xs = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / 1e3
        })
        .collect();
    median_us(xs)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(1000);
    let lab = args.next();
    let show = |what: &str, (min, med, p99): (f64, f64, f64)| {
        println!("| {what} | {min:.0} | {med:.0} | {p99:.0} |");
    };
    let interfaces = Snapshot::read().interfaces.len();
    println!("# {rounds} rounds; {interfaces} interfaces in this namespace");
    println!("| reading | min (us) | median (us) | p99 (us) |");
    println!("|---|---|---|---|");
    show(
        "network counters (snmp, netstat, dev)",
        time(rounds, || {
            std::hint::black_box(Snapshot::read());
        }),
    );
    show(
        "CPU time (/proc/stat)",
        time(rounds, || {
            std::hint::black_box(CpuSnapshot::read());
        }),
    );
    show(
        "one host, before (both)",
        time(rounds, || {
            std::hint::black_box(HostBefore::take());
        }),
    );
    let before = HostBefore::take();
    show(
        "one host, after (both, and the delta)",
        time(rounds, || {
            std::hint::black_box(before.finish());
        }),
    );
    if let Some(name) = lab {
        let state = wirebench::lab::load(&name)
            .with_context(|| format!("no running lab named '{name}'"))?;
        show(
            "lab delay line alone (asked, answered)",
            time(rounds.min(200), || {
                std::hint::black_box(wirebench::lab::delay_line_stats_now(&name));
            }),
        );
        show(
            "lab link (delay line asked, nft read)",
            time(rounds.min(50), || {
                std::hint::black_box(wirebench::lab::link_counters(&state));
            }),
        );
    }
    Ok(())
}
