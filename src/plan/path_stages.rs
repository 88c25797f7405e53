//! Path timing's stages (`run --path-timing`): the requester's and the responder's records of
//! the stamped round trips, paired by sequence number, split into the stages of
//! `model::path` at ten instants: the client's send call, its request entering the queueing
//! layer and handed to the driver, the request's arrival at the server, the server's read
//! returning and its send call, the response entering the server's queueing layer and its
//! driver, the response's arrival at the client, and the client's read returning. Consecutive
//! instants bound one stage, so that the stages of a round trip add up to its span by the
//! CLOCK_REALTIME readings exactly; the residual is what the monotonic round trip differs by.
//! Pure: no sockets, no clocks.

use crate::model::path::{PathClock, PathTiming, Stage, StageName, StampCost};
use crate::pattern::path::{ClientPath, ServerPath, ServerRecord, MAX_STAMPED};

/// Instants of a round trip, in order.
const INSTANTS: usize = 10;
/// The instants read on the server (request arrival to response handed to its driver).
const SERVER: std::ops::RangeInclusive<usize> = 3..=7;
const INSTANT_NAMES: [&str; INSTANTS] = [
    "client send call",
    "client TX_SCHED",
    "client TX_SOFTWARE",
    "server RX_SOFTWARE",
    "server read return",
    "server send call",
    "server TX_SCHED",
    "server TX_SOFTWARE",
    "client RX_SOFTWARE",
    "client read return",
];

/// One stamped round trip: its monotonic time and its instants (CLOCK_REALTIME ns of the end
/// that read them; None where no stamp came), and TCP's ACK stamp of the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundTrip {
    pub rtt_ns: u64,
    pub at: [Option<i64>; INSTANTS],
    pub ack: Option<i64>,
}

/// The round trips of a point with what pairing them learnt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paired {
    pub trips: Vec<RoundTrip>,
    /// Stamped round trips without a server record, or lost.
    pub unmatched: u64,
    /// Both ends read one kernel clock (the same boot id).
    pub shared_clock: bool,
    /// The server sent records (it knows path timing).
    pub server_records: bool,
    pub notes: Vec<String>,
}

fn some(t: i64) -> Option<i64> {
    (t != 0).then_some(t)
}

/// Pairs the requester's records with the responder's by sequence number. `server` None: the
/// server sent none (a wirebench server older than path timing): the client's instants alone.
pub fn pair(client: &ClientPath, server: Option<&ServerPath>, client_boot: Option<&str>) -> Paired {
    let mut out = Paired::default();
    let records: Option<Vec<ServerRecord>> = server.and_then(|s| {
        let r = s.decode();
        if r.is_none() {
            out.notes
                .push("the server's stamp records could not be read: client stages only".into());
        }
        r
    });
    out.server_records = records.is_some();
    if server.is_none() {
        out.notes.push(
            "the server sent no stamps (a wirebench server older than path timing?): its stages are inside the wire stage".into(),
        );
    }
    let mut by_seq = std::collections::HashMap::new();
    for r in records.iter().flatten() {
        by_seq.insert(r.seq, *r);
    }
    out.shared_clock = match (server.and_then(|s| s.boot_id.as_deref()), client_boot) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    for c in &client.records {
        if c.rtt_ns == 0 {
            out.unmatched += 1;
            continue;
        }
        let s = by_seq.get(&c.seq);
        if out.server_records && s.is_none() {
            out.unmatched += 1;
            continue;
        }
        let s = s.copied().unwrap_or_default();
        out.trips.push(RoundTrip {
            rtt_ns: c.rtt_ns,
            at: [
                some(c.send_call),
                some(c.tx.tx[0]),
                some(c.tx.tx[1]),
                some(s.arrival),
                some(s.read_return),
                some(s.send_call),
                some(s.tx.tx[0]),
                some(s.tx.tx[1]),
                some(c.arrival),
                some(c.read_return),
            ],
            ack: some(c.tx.tx[2]),
        });
    }
    if client.cut || server.is_some_and(|s| s.cut) {
        out.notes.push(format!(
            "path timing covers the first {} timed round trips of the point ({} stamped, every other one); the rest ran unstamped",
            2 * MAX_STAMPED,
            MAX_STAMPED
        ));
    }
    let stray = client.unmatched_stamps + server.map_or(0, |s| s.unmatched_stamps);
    if stray > 0 {
        out.notes.push(format!(
            "{stray} transmit stamps fitted no stamped message and were left out"
        ));
    }
    out
}

/// The stage a span of consecutive stages stands for, and the others it holds.
fn span_stage(from: usize, to: usize) -> (StageName, Vec<StageName>) {
    let names = &StageName::ALL[from..to];
    let has = |n: StageName| names.contains(&n);
    let name = if has(StageName::WireOut) && has(StageName::WireBack) {
        StageName::WireBoth
    } else if has(StageName::WireOut) {
        StageName::WireOut
    } else if has(StageName::WireBack) {
        StageName::WireBack
    } else {
        names[0]
    };
    let merged = names
        .iter()
        .copied()
        .filter(|n| {
            *n != name
                && !(name == StageName::WireBoth
                    && matches!(n, StageName::WireOut | StageName::WireBack))
        })
        .collect();
    (name, merged)
}

/// min, p50, p99 (nearest rank) and mean of `v`, sorted here; negative times read as 0 in the
/// order statistics (the mean keeps their sign, so that the means still add up).
fn stage(name: StageName, merged: Vec<StageName>, v: &mut [i64]) -> Stage {
    v.sort_unstable();
    let n = v.len();
    let rank = |q: f64| -> u64 {
        if n == 0 {
            return 0;
        }
        let k = ((q * n as f64).ceil() as usize).clamp(1, n);
        u64::try_from(v[k - 1]).unwrap_or(0)
    };
    let mean = if n == 0 {
        0.0
    } else {
        v.iter().map(|&x| x as f64).sum::<f64>() / n as f64
    };
    Stage {
        name,
        merged,
        samples: n as u64,
        min_ns: v.first().map_or(0, |&x| u64::try_from(x).unwrap_or(0)),
        p50_ns: rank(0.5),
        p99_ns: rank(0.99),
        mean_ns: mean,
    }
}

/// The stages of the paired round trips, with the stamping's cost; None without a complete
/// round trip.
pub fn path_timing(p: &Paired, cost: Option<StampCost>) -> Option<PathTiming> {
    let mut notes = p.notes.clone();
    // The point's own figures leave the stamped round trips out (stamping lengthens them).
    notes.push(
        "the point's latency and rate figures are the unstamped round trips' (every other timed one); the stamped ones are these, and `cost` compares the two".into(),
    );
    // An instant missing from most round trips is missing for good (a device that does not
    // stamp): its two stages are given together. One missing now and then makes its round
    // trip incomplete.
    let total = p.trips.len();
    let mut kept = [true; INSTANTS];
    for (k, keep) in kept.iter_mut().enumerate().take(INSTANTS - 1).skip(1) {
        let have = p.trips.iter().filter(|t| t.at[k].is_some()).count();
        if have * 2 < total || have == 0 {
            *keep = false;
            let server_absent = SERVER.contains(&k) && !p.server_records;
            if !server_absent {
                notes.push(format!(
                    "no {} stamp on {} of {} round trips: the stages on either side of it are given together",
                    INSTANT_NAMES[k],
                    total - have,
                    total
                ));
            }
        }
    }
    let points: Vec<usize> = (0..INSTANTS).filter(|&k| kept[k]).collect();
    let complete: Vec<&RoundTrip> = p
        .trips
        .iter()
        .filter(|t| points.iter().all(|&k| t.at[k].is_some()))
        .collect();
    let incomplete = p.unmatched + (p.trips.len() - complete.len()) as u64;
    if complete.is_empty() {
        return None;
    }
    // The server's instants in the client's clock: shared, as they are; separate, moved by
    // the NTP-style offset estimate of the round trip with the shortest time on the wires.
    let first_server = points.iter().copied().find(|k| SERVER.contains(k));
    let last_server = points.iter().copied().rfind(|k| SERVER.contains(k));
    let wires = first_server.zip(last_server).map(|(si, so)| {
        let co = points.iter().copied().rfind(|&k| k < si).unwrap_or(0);
        let ci = points
            .iter()
            .copied()
            .find(|&k| k > so)
            .unwrap_or(INSTANTS - 1);
        (co, si, so, ci)
    });
    let at = |t: &RoundTrip, k: usize| t.at[k].unwrap_or(0);
    let mut offset = 0i64;
    let clock = if p.shared_clock || wires.is_none() {
        PathClock::Shared
    } else {
        let (co, si, so, ci) = wires.unwrap_or_default();
        let best = complete
            .iter()
            .map(|t| {
                let out = at(t, si) - at(t, co);
                let back = at(t, ci) - at(t, so);
                (out + back, out, back)
            })
            .min_by_key(|w| w.0)
            .unwrap_or_default();
        offset = (best.1 - best.2) / 2;
        let error = u64::try_from(best.0 / 2).unwrap_or(0);
        notes.push(format!(
            "the two hosts read different clocks: wire_out and wire_back rest on the estimate that the server's clock is {offset} ns ahead, within {error} ns (the fastest round trip's wire time, halved)"
        ));
        PathClock::Separate {
            offset_ns: offset,
            error_ns: error,
        }
    };
    let local = |t: &RoundTrip, k: usize| -> i64 {
        if SERVER.contains(&k) {
            at(t, k) - offset
        } else {
            at(t, k)
        }
    };
    let mut stages = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (name, merged) = span_stage(a, b);
        let mut v: Vec<i64> = complete.iter().map(|t| local(t, b) - local(t, a)).collect();
        let negative = v.iter().filter(|&&x| x < 0).count();
        if negative > 0 {
            notes.push(format!(
                "{} of {} round trips had a negative {} (the clocks' disagreement or a stamp out of order); order statistics read it as 0",
                negative,
                v.len(),
                name.key()
            ));
        }
        stages.push(stage(name, merged, &mut v));
    }
    let wire_both = wires.map(|(co, si, so, ci)| {
        let mut v: Vec<i64> = complete
            .iter()
            .map(|t| (at(t, si) - at(t, co)) + (at(t, ci) - at(t, so)))
            .collect();
        let mut merged = Vec::new();
        for (x, y) in [(co, si), (so, ci)] {
            merged.extend(span_stage(x, y).1);
        }
        stage(StageName::WireBoth, merged, &mut v)
    });
    let mut rtts: Vec<i64> = complete
        .iter()
        .map(|t| i64::try_from(t.rtt_ns).unwrap_or(i64::MAX))
        .collect();
    let rtt = stage(StageName::WireBoth, Vec::new(), &mut rtts);
    let residuals: Vec<i64> = complete
        .iter()
        .map(|t| i64::try_from(t.rtt_ns).unwrap_or(i64::MAX) - (at(t, 9) - at(t, 0)))
        .collect();
    let residual_mean = residuals.iter().map(|&r| r as f64).sum::<f64>() / residuals.len() as f64;
    let residual_max_abs = residuals
        .iter()
        .map(|r| r.unsigned_abs())
        .max()
        .unwrap_or(0);
    let mut acks: Vec<i64> = complete
        .iter()
        .filter_map(|t| Some(t.ack? - t.at[2]?))
        .collect();
    let client_driver_to_ack =
        (!acks.is_empty()).then(|| stage(StageName::ClientDriverToAck, Vec::new(), &mut acks));
    Some(PathTiming {
        messages: complete.len() as u64,
        incomplete,
        clock,
        stages,
        rtt_min_ns: rtt.min_ns,
        rtt_p50_ns: rtt.p50_ns,
        rtt_p99_ns: rtt.p99_ns,
        rtt_mean_ns: rtt.mean_ns,
        residual_mean_ns: residual_mean,
        residual_max_abs_ns: residual_max_abs,
        client_driver_to_ack,
        cost,
        notes,
        wire_both,
        validity: crate::stats::Validity::default(),
    })
}

/// What stamping cost the requester: its stamped round trips' median against the unstamped
/// ones' (interleaved), with a distribution-free interval of the ratio.
pub fn cost(client: &ClientPath) -> Option<StampCost> {
    let mut on: Vec<u64> = client
        .records
        .iter()
        .map(|r| r.rtt_ns)
        .filter(|&r| r > 0)
        .collect();
    let mut off = client.unstamped_rtt.clone();
    on.sort_unstable();
    off.sort_unstable();
    let (on_lo, on_p50, on_hi) = crate::stats::median_interval(&on)?;
    let (off_lo, off_p50, off_hi) = crate::stats::median_interval(&off)?;
    if off_p50 == 0 || off_lo == 0 {
        return None;
    }
    Some(StampCost {
        unstamped: off.len() as u64,
        unstamped_p50_ns: off_p50,
        stamped_p50_ns: on_p50,
        ratio: on_p50 as f64 / off_p50 as f64,
        ratio_low: on_lo as f64 / off_hi as f64,
        ratio_high: on_hi as f64 / off_lo as f64,
        method: "medians' distribution-free 95% intervals (order statistics), combined conservatively: [stamped low / unstamped high, stamped high / unstamped low]".into(),
        read_ns: if client.reads == 0 {
            0.0
        } else {
            client.read_ns as f64 / client.reads as f64
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::path::{ClientRecord, TxPart};

    const T0: i64 = 1_700_000_000_000_000_000;

    /// A round trip with instants `gaps` apart from T0 + 1000 * seq (0 in `gaps`: no stamp,
    /// the instant absent), the monotonic round trip `extra` longer than their span.
    fn records(seq: u64, gaps: [i64; 9], extra: i64) -> (ClientRecord, ServerRecord) {
        let mut t = [0i64; 10];
        t[0] = T0 + 1_000_000 * seq as i64;
        for k in 1..10 {
            t[k] = t[k - 1] + gaps[k - 1].abs();
        }
        let keep = |k: usize| {
            if k > 0 && k < 9 && gaps[k - 1] == 0 {
                0
            } else {
                t[k]
            }
        };
        let span = t[9] - t[0];
        let c = ClientRecord {
            seq,
            rtt_ns: (span + extra) as u64,
            send_call: t[0],
            arrival: keep(8),
            read_return: t[9],
            tx: TxPart {
                key: None,
                tx: [keep(1), keep(2), t[2] + 500],
            },
        };
        let s = ServerRecord {
            seq,
            arrival: keep(3),
            read_return: keep(4),
            send_call: keep(5),
            tx: TxPart {
                key: None,
                tx: [keep(6), keep(7), 0],
            },
        };
        (c, s)
    }

    fn server_path(recs: &[ServerRecord], boot: &str) -> ServerPath {
        ServerPath {
            boot_id: Some(boot.into()),
            records: ServerPath::encode(recs),
            cut: false,
            unmatched_stamps: 0,
        }
    }

    fn client_path(recs: Vec<ClientRecord>) -> ClientPath {
        ClientPath {
            records: recs,
            ..ClientPath::default()
        }
    }

    const GAPS: [i64; 9] = [100, 200, 1000, 300, 400, 500, 600, 1100, 700];

    /// The stages of one clock add up to each round trip's span exactly; the residual is the
    /// monotonic time beyond it; TCP's ACK is timed from the driver.
    #[test]
    fn the_stages_of_one_clock_add_up_to_the_round_trip_exactly() {
        let (c, s): (Vec<_>, Vec<_>) = (1..=5).map(|q| records(q, GAPS, 40)).unzip();
        let p = pair(&client_path(c), Some(&server_path(&s, "b")), Some("b"));
        assert!(p.shared_clock);
        let t = path_timing(&p, None).unwrap();
        assert_eq!((t.messages, t.incomplete), (5, 0));
        assert_eq!(t.clock, PathClock::Shared);
        let names: Vec<StageName> = t.stages.iter().map(|s| s.name).collect();
        assert_eq!(names, StageName::ALL.to_vec());
        for (s, g) in t.stages.iter().zip(GAPS) {
            assert_eq!(
                (s.samples, s.min_ns, s.p50_ns, s.p99_ns),
                (5, g as u64, g as u64, g as u64)
            );
            assert!(s.merged.is_empty());
        }
        let sum: f64 = t.stages.iter().map(|s| s.mean_ns).sum();
        assert_eq!(sum + t.residual_mean_ns, t.rtt_mean_ns);
        assert_eq!((t.residual_mean_ns, t.residual_max_abs_ns), (40.0, 40));
        assert_eq!(t.rtt_min_ns, GAPS.iter().sum::<i64>() as u64 + 40);
        assert_eq!(t.client_driver_to_ack.as_ref().unwrap().p50_ns, 500);
        assert_eq!(t.wire_both.as_ref().unwrap().p50_ns, 1000 + 1100);
    }

    /// A driver that never stamps TX_SOFTWARE: queue→driver merges into the wire stage, and
    /// the sum still holds; a stamp missing once makes that round trip incomplete.
    #[test]
    fn a_missing_driver_stamp_merges_queue_to_driver_into_the_wire() {
        let mut gaps = GAPS;
        gaps[1] = 0; // client TX_SOFTWARE never comes
        let (mut c, s): (Vec<_>, Vec<_>) = (1..=4).map(|q| records(q, gaps, 0)).unzip();
        // One round trip also lacks its server arrival stamp... in the server record below.
        let mut s = s;
        s[3].arrival = 0;
        c[0].tx.tx[2] = 0;
        let p = pair(&client_path(c), Some(&server_path(&s, "b")), Some("b"));
        let t = path_timing(&p, None).unwrap();
        assert_eq!((t.messages, t.incomplete), (3, 1));
        let wire = &t.stages[1];
        assert_eq!(wire.name, StageName::WireOut);
        assert_eq!(wire.merged, vec![StageName::ClientQueueToDriver]);
        assert_eq!(wire.p50_ns, 1000); // the 200 of queue→driver read as 0: gaps[1] is 0
        assert_eq!(t.stages.len(), 8);
        assert!(
            t.notes.iter().any(|n| n.contains("client TX_SOFTWARE")),
            "{:?}",
            t.notes
        );
        let sum: f64 = t.stages.iter().map(|s| s.mean_ns).sum();
        assert_eq!(sum, t.rtt_mean_ns);
        // No driver stamp: no ACK time from it.
        assert!(t.client_driver_to_ack.is_none());
    }

    /// Two clocks: the server's runs 5 ms ahead. The offset comes from the fastest round
    /// trip, the one-way stages are as on one clock, and the sum needs no estimate.
    #[test]
    fn separate_clocks_give_the_one_way_stages_with_the_offset_estimate() {
        let skew = 5_000_000;
        let (c, mut s): (Vec<_>, Vec<_>) = (1..=6).map(|q| records(q, GAPS, 10)).unzip();
        for r in &mut s {
            for t in [&mut r.arrival, &mut r.read_return, &mut r.send_call] {
                *t += skew;
            }
            for t in r.tx.tx.iter_mut().take(2) {
                *t += skew;
            }
        }
        let p = pair(&client_path(c), Some(&server_path(&s, "other")), Some("b"));
        assert!(!p.shared_clock);
        let t = path_timing(&p, None).unwrap();
        // Out 1000, back 1100: the estimate is off by half their difference, within its
        // stated error (half the wire time).
        assert_eq!(
            t.clock,
            PathClock::Separate {
                offset_ns: skew - 50,
                error_ns: 1050
            }
        );
        assert_eq!(t.stages[2].name, StageName::WireOut);
        assert_eq!((t.stages[2].p50_ns, t.stages[7].p50_ns), (1050, 1050));
        assert_eq!(t.stages[3].p50_ns, 300);
        let sum: f64 = t.stages.iter().map(|s| s.mean_ns).sum();
        assert_eq!(sum + 10.0, t.rtt_mean_ns);
        assert_eq!(t.wire_both.as_ref().unwrap().p50_ns, 2100);
    }

    /// Round trips without a server record (a lost request) or lost responses are counted
    /// incomplete; a server that sent nothing leaves one wire stage for its whole side.
    #[test]
    fn unmatched_round_trips_are_counted_and_no_server_means_one_wire_stage() {
        let (mut c, mut s): (Vec<_>, Vec<_>) = (1..=5).map(|q| records(q, GAPS, 0)).unzip();
        s.remove(2);
        c[4].rtt_ns = 0; // its response never came
        let p = pair(
            &client_path(c.clone()),
            Some(&server_path(&s, "b")),
            Some("b"),
        );
        let t = path_timing(&p, None).unwrap();
        assert_eq!((t.messages, t.incomplete), (3, 2));
        let old = pair(&client_path(c), None, Some("b"));
        let t = path_timing(&old, None).unwrap();
        assert_eq!(t.messages, 4);
        let names: Vec<StageName> = t.stages.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            vec![
                StageName::ClientSendToQueue,
                StageName::ClientQueueToDriver,
                StageName::WireBoth,
                StageName::ClientArrivalToRead
            ]
        );
        assert_eq!(t.stages[2].p50_ns, 1000 + 300 + 400 + 500 + 600 + 1100);
        assert!(t.notes.iter().any(|n| n.contains("older than path timing")));
    }

    /// A point longer than the cap says so.
    #[test]
    fn a_point_cut_at_the_cap_says_so() {
        let (c, s): (Vec<_>, Vec<_>) = (1..=2).map(|q| records(q, GAPS, 0)).unzip();
        let mut cp = client_path(c);
        cp.cut = true;
        let p = pair(&cp, Some(&server_path(&s, "b")), Some("b"));
        let t = path_timing(&p, None).unwrap();
        assert!(
            t.notes.iter().any(|n| n.contains("first 24000 timed")),
            "{:?}",
            t.notes
        );
    }

    /// The cost: stamped and unstamped medians and an interval that holds the ratio.
    #[test]
    fn the_cost_compares_the_medians_with_an_interval() {
        let recs: Vec<ClientRecord> = (0..101)
            .map(|i| ClientRecord {
                rtt_ns: 11_000 + i,
                ..ClientRecord::default()
            })
            .collect();
        let mut cp = client_path(recs);
        cp.unstamped_rtt = (0..101).map(|i| 10_000 + i).collect();
        cp.read_ns = 3_000;
        cp.reads = 101;
        let c = cost(&cp).unwrap();
        assert_eq!(
            (c.stamped_p50_ns, c.unstamped_p50_ns, c.unstamped),
            (11_050, 10_050, 101)
        );
        assert!(c.ratio_low < c.ratio && c.ratio < c.ratio_high);
        assert!((c.read_ns - 3_000.0 / 101.0).abs() < 1e-9);
        assert!(cost(&client_path(Vec::new())).is_none());
    }
}
