//! Every sink rendered into a buffer from hand-built results (no sockets): the exact text a
//! user gets, so a change to it is a decision and not an accident.

use super::csv::CsvSink;
use super::handle::Capture;
use super::json::{JsonSink, JsonStreamSink};
use super::table::TableSink;
use crate::model::stream::StreamStats;
use crate::model::{DirectionTotal, RunDocument, StreamPair, StreamResult};
use crate::plan::sink::Sink;
use crate::stats::sweep::{derive, SweepPoint};
use crate::store::db::tests::report;

/// Feeds `r` through `sink` as the runner does: begin with no points, then each point, then
/// the whole run.
fn render(sink: &mut dyn Sink, r: &RunDocument) {
    let mut so_far = r.clone();
    so_far.points.clear();
    sink.begin(&so_far).unwrap();
    for p in &r.points {
        sink.point(&so_far, p).unwrap();
        so_far.points.push(p.clone());
    }
    sink.finish(r).unwrap();
}

/// A ping-pong sweep of three sizes, each slower than the one before, with its derived
/// metrics.
fn pingpong_sweep() -> RunDocument {
    let mut r = report("pingpong", 3, 20_000.0);
    for i in 0..3 {
        r.points[i] = report("pingpong", 3, 20_000.0 + 3000.0 * i as f64).points[i].clone();
    }
    let pts: Vec<SweepPoint> = r
        .points
        .iter()
        .map(|p| {
            let l = p.latency.as_ref().unwrap();
            SweepPoint {
                size: p.key.size,
                one_way_ns: l.one_way_mean_ns.unwrap(),
                one_way_ci_ns: l.one_way_ci_ns,
            }
        })
        .collect();
    r.sweep_metrics = vec![crate::model::SweepGroup {
        sndbuf: 0,
        rcvbuf: 0,
        server_sndbuf: 0,
        server_rcvbuf: 0,
        cc: None,
        metrics: derive(&pts).unwrap(),
    }];
    r.fill_validity();
    r
}

/// One side of a stream that moved `bytes` in its timed second.
fn side(bytes: u64, io_path: &str) -> StreamStats {
    StreamStats {
        bytes_total: bytes + 1000,
        bytes_timed: bytes,
        messages_timed: 100,
        elapsed_ns: 1_000_000_000,
        bits_per_s: bytes as f64 * 8.0,
        io_path: io_path.into(),
        ..StreamStats::default()
    }
}

/// A TCP stream of two streams (`-P 2`), 1 and 2 MB each in one second.
fn stream_p2() -> RunDocument {
    let mut r = report("stream", 1, 1.0);
    r.settings.streams = 2;
    let p = &mut r.points[0];
    p.key.size = 131072;
    p.latency = None;
    p.headline.name = "receiver throughput, all streams".into();
    p.headline.unit = "bit/s".into();
    p.headline.values = vec![24e6];
    p.headline.over_runs = crate::stats::MeanCi::from_samples(&[24e6], 0.95);
    p.headline.validity = Default::default();
    let pairs: Vec<StreamPair> = [1_000_000u64, 2_000_000]
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let mut pair = StreamPair::judged(
                i as u32,
                "client_to_server".into(),
                side(b, "write"),
                side(b, "read"),
                crate::model::vocab::TransportKind::Tcp,
            );
            pair.sender.tcp_info = None;
            pair
        })
        .collect();
    let mut total = DirectionTotal {
        direction: "client_to_server".into(),
        streams: 2,
        sender_bits_per_s: 24e6,
        receiver_bits_per_s: 24e6,
        bytes_sent: 3_002_000,
        bytes_received: 3_002_000,
        retransmits: Some(7),
        ..DirectionTotal::default()
    };
    total.judge_from(&pairs.iter().collect::<Vec<_>>());
    p.stream = Some(StreamResult {
        streams: pairs,
        totals: vec![total],
    });
    r.fill_validity();
    r
}

/// A UDP stream both ways with two streams each (`--bidir -P 2`), datagrams lost in one.
fn udp_bidir_p2() -> RunDocument {
    let mut r = stream_p2();
    r.transport = crate::model::vocab::TransportKind::Udp;
    r.settings.direction = crate::pattern::Direction::Bidir;
    let mut pairs = Vec::new();
    for (i, dir) in [
        "client_to_server",
        "client_to_server",
        "server_to_client",
        "server_to_client",
    ]
    .iter()
    .enumerate()
    {
        let b = 500_000 * (i as u64 + 1);
        let mut receiver = side(b, "read");
        let lost = if i == 3 { 25 } else { 0 };
        receiver.loss = Some(crate::pattern::stream::LossStats {
            sent: 1000,
            received: 1000 - lost,
            lost,
            loss_ratio: lost as f64 / 1000.0,
            jitter_ns: 125_000.0 * (i as f64 + 1.0),
            ..Default::default()
        });
        pairs.push(StreamPair::judged(
            (i % 2) as u32,
            dir.to_string(),
            side(b, "write"),
            receiver,
            crate::model::vocab::TransportKind::Udp,
        ));
    }
    let totals = crate::plan::point_result::totals(&pairs);
    r.points[0].stream = Some(StreamResult {
        streams: pairs,
        totals,
    });
    r.fill_validity();
    r
}

fn table(r: &RunDocument) -> String {
    let c = Capture::default();
    render(&mut TableSink::to(c.output()), r);
    c.text()
}

#[test]
fn a_pingpong_sweep_table() {
    let text = table(&pingpong_sweep());
    assert_eq!(text, PINGPONG_TABLE);
}

#[test]
fn a_stream_table_with_two_streams() {
    let text = table(&stream_p2());
    assert_eq!(text, STREAM_TABLE);
}

#[test]
fn a_udp_bidir_table_with_two_streams_each_way() {
    assert_eq!(table(&udp_bidir_p2()), UDP_BIDIR_TABLE);
}

#[test]
fn a_crr_table() {
    let mut r = report("crr", 2, 30_000.0);
    r.points[1].latency.as_mut().unwrap().setup = Some(crate::stats::LatencySummary {
        mean_ns: 12_345.0,
        ..r.points[1].latency.as_ref().unwrap().rtt.clone()
    });
    assert_eq!(table(&r), CRR_TABLE);
}

/// An incomplete run says how much of it is missing; a document from before wirebench
/// recorded the planned total says it is not known, rather than guessing.
#[test]
fn an_incomplete_table_says_how_many_of_the_planned_points_it_holds() {
    let mut r = report("pingpong", 3, 20_000.0);
    r.complete = false;
    r.planned_points = Some(7);
    let text = table(&r);
    assert!(
        text.ends_with("# incomplete: 3 of 7 planned points measured\n"),
        "{text}"
    );
    r.planned_points = None;
    let text = table(&r);
    assert!(
        text.ends_with("# incomplete: 3 points measured (the planned total is not recorded)\n"),
        "{text}"
    );
    r.points.truncate(1);
    r.planned_points = Some(1);
    assert!(table(&r).ends_with("# incomplete: 1 of 1 planned point measured\n"));
    r.complete = true;
    assert!(!table(&r).contains("# incomplete"));
}

#[test]
fn an_rr_table_with_think_time_and_split_writes() {
    let mut r = report("rr", 1, 30_000.0);
    r.settings.write_size = Some(300);
    r.settings.think_ns = Some(80_000_000);
    let l = r.points[0].latency.as_mut().unwrap();
    l.think = Some(crate::model::ThinkResult {
        asked_ns: 80_000_000,
        waits: 1000,
        waited_ns: 80_100_000_000,
        corrected_elapsed_ns: 30_000_000,
        corrected_transactions_per_s: 12_345.6,
    });
    assert_eq!(table(&r), RR_THINK_TABLE);
}

const RR_THINK_TABLE: &str = r#"# wirebench 0.1.0 rr over tcp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 1 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# every request and response written in pieces of at most 300 bytes, on both ends (Nagle's algorithm on: --nodelay turns it off)
# think time 80ms before each timed transaction: txn/s over the raw time, txn/s-think over the time without the waits; RTTs exclude them
# units: times in us (round trips), rates in Mbit/s (10^6 bit/s), txn/s in transactions per second, sizes in bytes
# transaction = request + response, times are round trips; throughput counts request+response payload
   req(B)   resp(B)      txns       txn/s   mean(us)   ±CI(us)   p50(us)   p99(us)   max(us)    Mbit/s  txn/s-think
        1         1      1000     33333.3      30.00      0.10     30.00     60.00     90.00      0.53      12345.6
# first (warm-up) transaction of the last point: 5.00 us round trip, not in the statistics
"#;

/// An open-loop rr sweep: the QPS-against-latency table, the schedule's settings in a line
/// above it, and a point whose achieved rate fell short flagged under its row with the reason.
#[test]
fn an_open_loop_rr_table_with_an_overloaded_point() {
    use crate::model::vocab::Arrivals;
    let mut r = report("rr", 2, 30_000.0);
    r.settings.arrivals = Some(Arrivals::Poisson);
    r.settings.open_loop = Some(crate::model::OpenLoopSettings {
        arrivals: Arrivals::Poisson,
        seed: 7,
        max_in_flight: 1024,
    });
    r.swept.rate = true;
    for (p, (offered, achieved, overload)) in r.points.iter_mut().zip([
        (20_000.0, 19_990.0, None),
        (
            50_000.0,
            31_000.0,
            Some("achieved 31000/s is below the 49980/s scheduled: the last reply came 600.0 ms after the last request was due, the replies fell behind the schedule and the latency holds the queue that built".to_owned()),
        ),
    ]) {
        p.key.rate_per_s = Some(offered as u64);
        let l = p.latency.as_mut().unwrap();
        let service = l.rtt.clone();
        l.open_loop = Some(crate::model::OpenLoopResult {
            arrivals: Arrivals::Poisson,
            offered_per_s: offered,
            scheduled_per_s: offered,
            achieved_per_s: achieved,
            scheduled: offered as u64,
            sent: offered as u64,
            received: l.transactions,
            outstanding: 0,
            unsent: 0,
            bound_waits: 3,
            service: Some(service),
            overload,
        });
    }
    let text = table(&r);
    assert!(text.contains("# open loop: poisson arrivals (seed 7), at most 1024 requests in flight per connection"), "{text}");
    assert!(
        text.contains("offered/s   achieved/s   replies   outst   p50(us)   p99(us)  p99.9(us)"),
        "{text}"
    );
    assert!(
        text.contains("! offered 50000/s, achieved 31000/s: achieved 31000/s is below"),
        "{text}"
    );
    assert!(!text.contains("# closed loop"), "{text}");
    assert!(
        text.contains("# Nagle's algorithm on: a request written while others are unacknowledged"),
        "{text}"
    );
    let c = Capture::default();
    render(&mut CsvSink::new(c.output()), &r);
    let csv = c.text();
    let mut rows = csv::Reader::from_reader(csv.as_bytes());
    let header = rows.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rows.records().map(|r| r.unwrap()).collect();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(&rows[0][at("arrivals")], "poisson");
    assert_eq!(&rows[1][at("offered_per_s")], "50000");
    assert_eq!(&rows[1][at("achieved_per_s")], "31000");
    assert_eq!(&rows[1][at("in_flight_bound_waits")], "3");
    assert!(rows[1][at("overload")].starts_with("achieved 31000/s"));
    assert_eq!(&rows[0][at("overload")], "");
    // A closed-loop exchange says it is one.
    let mut closed = report("rr", 1, 30_000.0);
    closed.settings.arrivals = Some(Arrivals::Closed);
    assert!(table(&closed).contains("# closed loop: each request leaves once the reply"));
}

/// `r` as version 1 of the document held it: seconds where version 2 has nanoseconds, bytes
/// per second where it has bits per second (the sweep metrics). Written here by name, apart
/// from `report::upgrade`, so that the one checks the other.
fn as_version_1(r: &RunDocument) -> serde_json::Value {
    const SECONDS: [&str; 14] = [
        "duration",
        "interval",
        "io_timeout",
        "loss_timeout",
        "elapsed",
        "sender_elapsed",
        "receiver_elapsed",
        "start",
        "end",
        "jitter",
        "user",
        "system",
        "t0",
        "t0_ci",
    ];
    const BYTES: [&str; 3] = ["r_max", "r_max_ci", "r_inf"];
    fn scaled(v: serde_json::Value, by: f64) -> serde_json::Value {
        match v {
            serde_json::Value::Array(a) => a.into_iter().map(|x| scaled(x, by)).collect(),
            serde_json::Value::Number(n) => serde_json::json!(n.as_f64().unwrap() * by),
            other => other,
        }
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                let keys: Vec<String> = o.keys().cloned().collect();
                for k in keys {
                    let seconds = k.strip_suffix("_ns").filter(|s| SECONDS.contains(s));
                    let bytes = k.strip_suffix("_bits_per_s").filter(|s| BYTES.contains(s));
                    if let Some(stem) = seconds {
                        let x = o.remove(&k).unwrap();
                        o.insert(format!("{stem}_s"), scaled(x, 1e-9));
                    } else if let Some(stem) = bytes {
                        let x = o.remove(&k).unwrap();
                        o.insert(format!("{stem}_bytes_per_s"), scaled(x, 1.0 / 8.0));
                    } else {
                        walk(o.get_mut(&k).unwrap());
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(r).unwrap();
    walk(&mut v);
    v["schema_version"] = 1.into();
    v
}

#[test]
fn a_version_1_document_shows_the_same_figures() {
    for (r, text) in [
        (pingpong_sweep(), PINGPONG_TABLE),
        (stream_p2(), STREAM_TABLE),
        (udp_bidir_p2(), UDP_BIDIR_TABLE),
    ] {
        let v1 = as_version_1(&r);
        assert!(v1["settings"]["io_timeout_s"].is_number(), "{v1}");
        let old = crate::store::db::parse_report(&v1.to_string()).unwrap();
        assert_eq!(table(&old), text);
    }
    let r = pingpong_sweep();
    let old = crate::store::db::parse_report(&as_version_1(&r).to_string()).unwrap();
    let c = Capture::default();
    render(&mut CsvSink::new(c.output()), &old);
    assert_eq!(c.text(), PINGPONG_CSV);
    // Whole nanoseconds come back exactly: the stream's document is the same.
    let r = stream_p2();
    let old = crate::store::db::parse_report(&as_version_1(&r).to_string()).unwrap();
    assert_eq!(old, r);
}

#[test]
fn csv_of_a_sweep() {
    let c = Capture::default();
    render(&mut CsvSink::new(c.output()), &pingpong_sweep());
    assert_eq!(c.text(), PINGPONG_CSV);
}

/// A saved run's rows carry its id; a point with two streams has its total row and one row
/// for each stream, with that stream's own figures.
#[test]
fn csv_of_a_saved_stream_with_two_streams() {
    let c = Capture::default();
    let mut sink = CsvSink::new(c.output());
    sink.saved_as(42);
    render(&mut sink, &stream_p2());
    let text = c.text();
    assert_eq!(text, STREAM_CSV);
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rows.records().map(|r| r.unwrap()).collect();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let streams: Vec<&str> = rows.iter().map(|r| &r[at("stream")]).collect();
    assert_eq!(streams, ["total", "0", "1"]);
    assert!(rows.iter().all(|r| &r[at("run_id")] == "42"));
    let received: Vec<&str> = rows.iter().map(|r| &r[at("bytes_received")]).collect();
    assert_eq!(received, ["3002000", "1001000", "2001000"]);
}

/// Each percentile against its sample floor, 10 / (1 - p). The CSV says whether all stand and
/// names those that do not; a point without the notes (an older run) leaves both empty.
#[test]
fn csv_says_which_percentiles_stand_below_their_floor() {
    let mut r = pingpong_sweep();
    for (k, samples) in [(0, 500u64), (1, 1000)] {
        let l = r.points[k].latency.as_mut().unwrap();
        l.rtt.samples = samples;
        l.percentiles = crate::plan::guard::percentiles(l);
    }
    let text = super::csv::to_string(&r, None, None).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rows.records().map(|r| r.unwrap()).collect();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let col = |name: &str| -> Vec<String> { rows.iter().map(|r| r[at(name)].to_owned()).collect() };
    assert_eq!(at("rtt_percentiles_valid"), at("rtt_p9999_ns") + 1);
    assert_eq!(col("rtt_percentiles_valid"), ["false", "false", ""]);
    assert_eq!(
        col("rtt_percentiles_invalid"),
        [
            "p99 (needs 1000) p99.9 (needs 10000) p99.99 (needs 100000)",
            "p99.9 (needs 10000) p99.99 (needs 100000)",
            ""
        ]
    );
    // Every sample floor met: valid, nothing named.
    let l = r.points[2].latency.as_mut().unwrap();
    l.rtt.samples = 100_000;
    l.percentiles = crate::plan::guard::percentiles(l);
    let text = super::csv::to_string(&r, None, None).unwrap();
    let last: Vec<&str> = text.lines().last().unwrap().split(',').collect();
    assert_eq!(
        &last[at("rtt_percentiles_valid")..=at("rtt_percentiles_invalid")],
        ["true", ""]
    );
}

/// A sweep with --path-timing: one line under each point's row, and after the table one
/// matrix of the stages' medians, a row a point; a merged stage is marked and said.
#[test]
fn a_path_timed_sweep_gives_its_stages_in_one_matrix() {
    use crate::figures::series::path::tests::timing;
    use crate::model::path::StageName;
    let mut r = pingpong_sweep();
    for (i, p) in r.points.iter_mut().enumerate() {
        p.path_timing = Some(timing(1000 * (i as u64 + 1)));
    }
    let t = r.points[2].path_timing.as_mut().unwrap();
    t.stages.remove(1);
    t.stages[1].merged = vec![StageName::ClientQueueToDriver];
    t.notes = vec!["no TX_SOFTWARE stamp: client queue→driver is in wire out".into()];
    assert_eq!(table(&r), PATH_SWEEP_TABLE);
    let c = Capture::default();
    render(
        &mut TableSink::to(c.output()).with_style(crate::text::table::Style::Markdown),
        &r,
    );
    let md = c.text();
    assert!(
        md.contains("\n| size(B) | c.send | c.qdisc | wire.out | s.read | s.turn | s.send | s.qdisc | wire.back | c.read | rtt p50 | residual | n |\n"),
        "{md}"
    );
}

/// A run of one point: its stages under its row, each on a line, and no matrix after it.
#[test]
fn a_single_path_timed_point_has_its_stages_under_its_row() {
    use crate::figures::series::path::tests::timing;
    let mut r = report("pingpong", 1, 20_000.0);
    r.points[0].path_timing = Some(timing(1000));
    let text = table(&r);
    for line in [
        "\n            path timing over 1000 round trips, each stage in us (share: its mean over the mean round trip):\n",
        "\n              stage                  p50    p99    min  share\n",
        "\n              client send→queue     1.00   3.00   0.50   2.2%\n",
        "\n              round trip           45.00  90.00  40.00         (mean 45.50 us, the application's clock)\n",
        "\n            residual (each round trip less its stages' sum): mean 0.50 us, largest absolute 2.00 us\n",
        "\n            clock: one clock (both ends' stamps read one kernel clock)\n",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    assert!(!text.contains("# size(B)"), "{text}");
}

/// Every stage's median and mean in its own columns, empty where the stage is not (merged
/// into its neighbour); the clock, the residual and the stamping cost; all empty without
/// --path-timing.
#[test]
fn csv_gives_each_stage_of_path_timing() {
    use crate::figures::series::path::tests::timing;
    use crate::model::path::{PathClock, StageName, StampCost};
    let mut r = pingpong_sweep();
    r.points[0].path_timing = Some(timing(1000));
    let mut t = timing(2000);
    t.stages.remove(1);
    t.stages[1].merged = vec![StageName::ClientQueueToDriver];
    t.clock = PathClock::Separate {
        offset_ns: -1500,
        error_ns: 250,
    };
    t.cost = Some(StampCost {
        unstamped: 2000,
        unstamped_p50_ns: 44_000,
        stamped_p50_ns: 45_000,
        ratio: 1.0227,
        ratio_low: 1.01,
        ratio_high: 1.04,
        method: "distribution-free".into(),
        read_ns: 700.0,
    });
    r.points[1].path_timing = Some(t);
    let text = super::csv::to_string(&r, None, None).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rows.records().map(|r| r.unwrap()).collect();
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let col = |name: &str| -> Vec<String> { rows.iter().map(|r| r[at(name)].to_owned()).collect() };
    // The stages in order, wire_both last.
    let keys: Vec<&str> = StageName::ALL
        .iter()
        .chain([StageName::WireBoth].iter())
        .map(|s| s.key())
        .collect();
    for (k, key) in keys.iter().enumerate() {
        let p50 = at(&format!("path_{key}_p50_ns"));
        assert_eq!(at(&format!("path_{key}_mean_ns")), p50 + 1);
        assert_eq!(p50, at("path_client_send_to_queue_p50_ns") + 2 * k);
    }
    assert_eq!(col("path_messages"), ["1000", "2000", ""]);
    assert_eq!(col("path_clock"), ["shared", "separate", ""]);
    assert_eq!(col("path_clock_offset_ns"), ["", "-1500", ""]);
    assert_eq!(col("path_clock_error_ns"), ["", "250", ""]);
    assert_eq!(
        col("path_merged"),
        ["", "wire_out=client_queue_to_driver", ""]
    );
    assert_eq!(col("path_wire_out_p50_ns"), ["3000", "3000", ""]);
    assert_eq!(col("path_wire_out_mean_ns"), ["3000", "3000", ""]);
    assert_eq!(col("path_client_queue_to_driver_p50_ns"), ["2000", "", ""]);
    assert_eq!(col("path_wire_both_p50_ns"), ["", "", ""]);
    assert_eq!(col("path_rtt_mean_ns"), ["45500", "45500", ""]);
    assert_eq!(col("path_residual_mean_ns"), ["500", "500", ""]);
    assert_eq!(col("path_residual_max_abs_ns"), ["2000", "2000", ""]);
    assert_eq!(col("path_stamp_cost_ratio"), ["", "1.0227", ""]);
    assert_eq!(col("path_stamp_cost_ratio_low"), ["", "1.01", ""]);
    assert_eq!(col("path_stamp_cost_ratio_high"), ["", "1.04", ""]);
    assert_eq!(col("path_stamp_read_ns"), ["", "700", ""]);
}

/// Several streams of a direction on one clock: the total's row says which window its rates
/// are over.
#[test]
fn table_says_the_window_of_a_sum_over_streams() {
    let mut r = stream_p2();
    let t = &mut r.points[0].stream.as_mut().unwrap().totals[0];
    t.receiver_span = Some(crate::model::span::TotalSpan {
        method: crate::model::span::SpanMethod::Common,
        start_ns: 2_500_000,
        end_ns: 998_000_000,
        bytes: 2_990_000,
    });
    let text = table(&r);
    assert!(
        text.contains("sum of 2 streams on one clock: receivers over their common span (all streams running, between interval edges) 995.5 ms, from 2.50 ms after the first start"),
        "{text}"
    );
}

#[test]
fn json_is_the_whole_document_once() {
    let r = pingpong_sweep();
    let c = Capture::default();
    render(&mut JsonSink::new(c.output()), &r);
    assert_eq!(c.text(), super::json::to_string(&r).unwrap() + "\n");
    let back: RunDocument = serde_json::from_str(&c.text()).unwrap();
    assert_eq!(back, r);
}

#[test]
fn json_stream_is_one_object_a_line() {
    let r = pingpong_sweep();
    let c = Capture::default();
    render(&mut JsonStreamSink::new(c.output()), &r);
    let text = c.text();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["begin", "point", "point", "point", "end"]);
    assert_eq!(lines[0]["schema"], "wirebench.run.stream");
    assert_eq!(lines[0]["run"]["points"], serde_json::json!([]));
    for (i, l) in lines[1..4].iter().enumerate() {
        assert_eq!(l["point"], serde_json::to_value(&r.points[i]).unwrap());
    }
    assert_eq!(lines[4]["run"], serde_json::to_value(&r).unwrap());
    assert_eq!(text.lines().count(), 5);
    assert!(text.ends_with("}\n"));
}

/// The plain table's blocks: each column header with the rows under it, up to the next
/// header (a row that widened a column prints it again); the lines around the table ("#"),
/// the interval lines ("  [") and the notes under rows (each says "WHAT: ..." or "! WHY")
/// left out.
fn blocks(text: &str, first_header: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    for line in text.lines() {
        let note = line.contains(": ") || line.trim_start().starts_with('!');
        if line.starts_with('#') || note || line.starts_with("  [") {
            continue;
        }
        if line.trim_start().starts_with(first_header) {
            blocks.push(String::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    blocks
}

/// Every row of `text`'s table lines up with the header right above it.
fn assert_aligned(text: &str, first_header: &str) {
    use crate::text::table::{check_aligned, Align};
    let blocks = blocks(text, first_header);
    assert!(!blocks.is_empty(), "no table in\n{text}");
    let rows: usize = blocks.iter().map(|b| b.lines().count() - 1).sum();
    assert!(rows > 0, "no rows in\n{text}");
    for b in &blocks {
        let columns = b.lines().next().unwrap_or("").split_whitespace().count();
        let aligns = vec![Align::Right; columns];
        if let Err(e) = check_aligned(b, &aligns, "") {
            panic!("{e}\n{text}");
        }
    }
}

fn cc(name: &str) -> Option<crate::model::vocab::CcName> {
    crate::model::vocab::CcName::new(name)
}

/// Every kind of run table with content wider than its columns were made for: the largest
/// byte count, tiny and huge rates, long algorithm names, swept buffers.
fn awkward_runs() -> Vec<(&'static str, RunDocument, &'static str)> {
    let mut runs = Vec::new();

    // Ping-pong swept over sndbuf and cc, one size the largest there is.
    let mut r = pingpong_sweep();
    r.swept.sndbuf = true;
    r.swept.cc = true;
    for (i, (buf, name)) in [
        (0u64, "cubic"),
        (65536, "a-long-cc-name1"),
        (u64::MAX, "bbr"),
    ]
    .into_iter()
    .enumerate()
    {
        let p = &mut r.points[i];
        p.key.sndbuf = buf;
        p.key.cc = cc(name);
        let l = p.latency.as_mut().unwrap();
        l.throughput_bits_per_s = [1e-9, 1.8e19, 3.0][i];
        l.rtt.max_ns = [90_000, u64::MAX, 1][i];
    }
    r.points[2].key.size = u64::MAX;
    r.points[1].latency.as_mut().unwrap().validity =
        crate::stats::Validity::invalid("a made-up reason");
    runs.push(("pingpong", r, "size(B)"));

    // rr with think time: rates without the waits far above the raw ones.
    let mut r = report("rr", 2, 30_000.0);
    r.settings.think_ns = Some(80_000_000);
    for (i, p) in r.points.iter_mut().enumerate() {
        let l = p.latency.as_mut().unwrap();
        l.think = Some(crate::model::ThinkResult {
            asked_ns: 80_000_000,
            waits: 1000,
            waited_ns: 80_100_000_000,
            corrected_elapsed_ns: 30_000_000,
            corrected_transactions_per_s: [0.001, 1.8e19][i],
        });
        l.transactions = [1, u64::MAX][i];
    }
    r.points[1].request_size = u64::MAX;
    runs.push(("rr with think", r, "req(B)"));

    // crr: setup times tiny and huge.
    let mut r = report("crr", 2, 30_000.0);
    for (i, p) in r.points.iter_mut().enumerate() {
        let l = p.latency.as_mut().unwrap();
        l.setup = Some(crate::stats::LatencySummary {
            mean_ns: [0.001, 1.8e19][i],
            ..l.rtt.clone()
        });
    }
    runs.push(("crr", r, "req(B)"));

    // rr over UDP: the lost column.
    let mut r = report("rr", 2, 30_000.0);
    r.transport = crate::model::vocab::TransportKind::Udp;
    r.points[1].latency.as_mut().unwrap().lost = u64::MAX;
    runs.push(("rr over udp", r, "req(B)"));

    // A TCP stream of two streams, the sum's byte counts the largest there are.
    let mut r = stream_p2();
    r.swept.rcvbuf = true;
    r.points[0].key.rcvbuf = 3 * 1024 * 1024 + 1;
    let s = r.points[0].stream.as_mut().unwrap();
    s.streams[0].sender.bits_per_s = 1e-9;
    let t = &mut s.totals[0];
    t.bytes_sent = u64::MAX;
    t.bytes_received = u64::MAX;
    t.receiver_bits_per_s = 1.8e19 * 8.0;
    t.retransmits = Some(u64::MAX);
    runs.push(("stream -P 2", r, "size(B)"));

    // UDP both ways, two streams each: loss columns with huge counts.
    let mut r = udp_bidir_p2();
    let s = r.points[0].stream.as_mut().unwrap();
    for t in &mut s.totals {
        if let Some(l) = t.loss.as_mut() {
            l.lost = u64::MAX;
            l.jitter_ns = 1.8e19;
        }
    }
    runs.push(("udp --bidir -P 2", r, "size(B)"));
    runs
}

#[test]
fn every_run_table_lines_up_whatever_its_content() {
    for (what, r, first) in awkward_runs() {
        let text = table(&r);
        assert!(text.contains(first), "{what}:\n{text}");
        assert_aligned(&text, first);
    }
    // The widest content widened its columns: the header came again above it.
    let (_, r, first) = awkward_runs().remove(0);
    let text = table(&r);
    assert!(blocks(&text, first).len() > 1, "{text}");
    assert!(text.contains("18446744073709551615"), "{text}");
    assert!(text.contains("a-long-cc-name1"), "{text}");
}

/// The Markdown table: the lines before it and after it as lists, every row of the table as
/// many cells as its header, the notes after it.
#[test]
fn a_markdown_run_table_parses_as_a_table() {
    use crate::text::table::Style;
    for (what, r, first) in awkward_runs() {
        let c = Capture::default();
        render(
            &mut TableSink::to(c.output()).with_style(Style::Markdown),
            &r,
        );
        let text = c.text();
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert!(rows.len() >= 3, "{what}:\n{text}");
        assert!(
            rows[0].starts_with(&format!("| {first} |")),
            "{what}:\n{text}"
        );
        let cells = |l: &str| l.replace("\\|", "").matches('|').count() - 1;
        let n = cells(rows[0]);
        for l in &rows {
            assert_eq!(cells(l), n, "{what}: {l}\n{text}");
        }
        // One table: its lines stand together.
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(table.len(), rows.len(), "{what}:\n{text}");
        assert!(!text.contains("\n# "), "{what}: a heading\n{text}");
        assert!(text.starts_with("- wirebench 0.1.0"), "{what}:\n{text}");
    }
    let (_, r, _) = awkward_runs().remove(0);
    let c = Capture::default();
    render(
        &mut TableSink::to(c.output()).with_style(Style::Markdown),
        &r,
    );
    assert!(c.text().contains("- 2: ! a made-up reason"), "{}", c.text());
}

/// `--columns` in a table: the columns that show the named CSV columns, in the table's
/// order, whatever order they were named in.
#[test]
fn a_table_keeps_the_columns_asked_for_in_its_order() {
    let mut r = pingpong_sweep();
    r.swept.sndbuf = true;
    let names = [
        "throughput_bits_per_s",
        "rtt_p99_ns",
        "size_bytes",
        "sndbuf_bytes",
    ];
    let c = Capture::default();
    let mut sink = TableSink::to(c.output()).with_columns(Some(names.map(String::from).to_vec()));
    render(&mut sink, &r);
    let text = c.text();
    let header = text.lines().find(|l| l.contains("size(B)")).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["size(B)", "sndbuf(B)", "p99(us)", "Mbit/s"],
        "{text}"
    );
    assert_aligned(&text, "size(B)");
    assert!(
        text.contains("        1          0     20.00        0.80\n"),
        "{text}"
    );
    // None of them a column of this table: said before any row.
    let c = Capture::default();
    let mut sink = TableSink::to(c.output()).with_columns(Some(vec!["jitter_s".into()]));
    let e = sink.begin(&r).unwrap_err().to_string();
    assert!(
        e.contains("--columns: none of jitter_s") && e.contains("size_bytes"),
        "{e}"
    );
}

/// `--columns` in the CSV: the named columns in the order given; an unknown name is refused
/// with the list of names.
#[test]
fn a_csv_has_the_columns_asked_for_in_their_order() {
    let names: Vec<String> = ["rtt_p99_ns", "size_bytes"].map(String::from).to_vec();
    let c = Capture::default();
    let mut sink = CsvSink::new(c.output()).with_columns(Some(&names)).unwrap();
    render(&mut sink, &pingpong_sweep());
    assert_eq!(
        c.text(),
        "rtt_p99_ns,size_bytes\n40000,1\n46000,2\n52000,3\n"
    );
    assert_eq!(
        super::csv::to_string(&pingpong_sweep(), None, Some(&names)).unwrap(),
        c.text()
    );
    let bad: Vec<String> = vec!["size_bytes".into(), "p99".into()];
    let e = super::csv::to_string(&pingpong_sweep(), None, Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown column 'p99'") && e.contains("rtt_p99_ns"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

/// Interval lines printed while a point runs stand above its column header, not between the
/// header and the point's rows.
#[test]
fn interval_lines_stand_apart_from_the_table() {
    let mut r = stream_p2();
    r.settings.interval_ns = Some(500_000_000);
    let c = Capture::default();
    let mut sink = TableSink::to(c.output());
    let mut so_far = r.clone();
    so_far.points.clear();
    sink.begin(&so_far).unwrap();
    let mut print = sink.interval_printer();
    print(&crate::model::stream::IntervalEvent {
        stream: 0,
        role: crate::model::vocab::Role::Receiver,
        interval: crate::model::stream::Interval {
            start_ns: 0,
            end_ns: 500_000_000,
            bytes: 500_000,
            messages: 4,
            bits_per_s: 8e6,
            tcp_info: None,
            retransmits: None,
            acked_bytes: None,
        },
    })
    .unwrap();
    sink.point(&so_far, &r.points[0]).unwrap();
    sink.finish(&r).unwrap();
    let text = c.text();
    let lines: Vec<&str> = text.lines().collect();
    let at = |p: &dyn Fn(&str) -> bool| lines.iter().position(|l| p(l)).unwrap();
    let interval = at(&|l| l.starts_with("  [  0]"));
    let header = at(&|l| l.contains("size(B)"));
    assert!(interval < header, "{text}");
    assert!(lines[header + 1].starts_with("   131072"), "{text}");
    assert_aligned(&text, "size(B)");
}

const PINGPONG_TABLE: &str = r#"# wirebench 0.1.0 pingpong over tcp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 1 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# units: times in us (one-way = RTT/2), rates in Mbit/s (10^6 bit/s), sizes in bytes
# latency = RTT/2 (one-way); throughput = 2n/RTT; CI = confidence interval half-width of the mean
  size(B)   samples    mean(us)   ±CI(us)   min(us)   p50(us)   p99(us)   max(us)      Mbit/s
        1      1000       10.00      0.05      0.50     10.00     20.00     45.00        0.80
        2      1000       11.50      0.05      0.50     11.50     23.00     45.00        1.39
        3      1000       13.00      0.05      0.50     13.00     26.00     45.00        1.85
# t0 = RTT/2 of the smallest message (1 B) = 10.00 us ±0.05
# r_max = 1.85 Mbit/s at 3 B [1.84 .. 1.85]
#   r_max at the largest size (3 B): the curve had not flattened, r_max is a lower bound
# n_1/2 = 1 B (size reaching r_max/2, linear interpolation); an estimate against r_max, which is a lower bound: the true n_1/2 is likely larger
# fit t(n) = t0 + n/r_inf over 3 sizes: t0 = 8.50 us, r_inf = 5.33 Mbit/s, n_1/2 = r_inf*t0 = 6 B, R^2 = 1.00000
# first (warm-up) transaction of the last point: 5.00 us round trip, not in the statistics
"#;
const STREAM_TABLE: &str = r#"# wirebench 0.1.0 stream over tcp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 2 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# units: rates in Mbit/s (10^6 bit/s), sizes in bytes, cpu in us per KiB
# rates of payload, each side over its own clock; cpu = service demand, CPU time per KiB moved
# sender = bytes written to the transport over the sender's timed phase (bytes still in its socket buffer at the end count); receiver = bytes read over the receiver's timed phase
# acked = bytes the peer acknowledged over the sender's timed phase (TCP_INFO): what reached the receiver's kernel
  size(B)  stream         direction       sender        acked     receiver        sent(B)    received(B)    retr   cpu_cli   cpu_srv
   131072       0  client_to_server         8.00            -         8.00        1001000        1001000       -
   131072       1  client_to_server        16.00            -        16.00        2001000        2001000       -
   131072     sum  client_to_server        24.00            -        24.00        3002000        3002000       7         -         -
"#;
const CRR_TABLE: &str = r#"# wirebench 0.1.0 crr over tcp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 1 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# units: times in us (round trips, setup: connect and handshake), rates in Mbit/s (10^6 bit/s), txn/s in transactions per second, sizes in bytes
# transaction = request + response, times are round trips; throughput counts request+response payload
   req(B)   resp(B)      txns       txn/s   mean(us)   ±CI(us)   p50(us)   p99(us)   max(us)    Mbit/s   setup(us)
        1         1      1000     33333.3      30.00      0.10     30.00     60.00     90.00      0.53           -
        2         2      1000     33333.3      30.00      0.10     30.00     60.00     90.00      1.07       12.35
# first (warm-up) transaction of the last point: 5.00 us round trip, not in the statistics
"#;
const STREAM_CSV: &str = r#"index,stream,direction,pattern,transport,run_started_at,run_id,client_host,server_host,size_bytes,request_size_bytes,response_size_bytes,length_prefix_bytes,sndbuf_bytes,rcvbuf_bytes,server_sndbuf_bytes,server_rcvbuf_bytes,cc,runs,headline_mean,headline_ci_half_width,headline_unit,rtt_samples,rtt_mean_ns,rtt_stddev_ns,rtt_ci_half_width_ns,rtt_min_ns,rtt_p50_ns,rtt_p90_ns,rtt_p99_ns,rtt_p999_ns,rtt_p9999_ns,rtt_percentiles_valid,rtt_percentiles_invalid,rtt_max_ns,one_way_mean_ns,throughput_bits_per_s,transactions_per_s,transactions,lost_transactions,think_corrected_transactions_per_s,think_waited_ns,arrivals,offered_per_s,achieved_per_s,requests_scheduled,requests_sent,requests_outstanding,requests_unsent,in_flight_bound_waits,service_p50_ns,service_p99_ns,overload,setup_mean_ns,sender_bits_per_s,acked_bits_per_s,receiver_bits_per_s,bytes_sent,bytes_received,datagrams_sent,datagrams_lost,loss_ratio,jitter_s,send_failures,retransmits,client_cpu_s,server_cpu_s,client_us_per_kib,server_us_per_kib,client_host_user_share,client_host_system_share,client_host_softirq_share,server_host_user_share,server_host_system_share,server_host_softirq_share,valid,invalid_reason,encoding,client_encode_mean_ns,client_decode_mean_ns,server_decode_mean_ns,server_encode_mean_ns,serialisation_share_of_rtt,client_encode_p99_ns,client_decode_p99_ns,server_decode_p99_ns,server_encode_p99_ns,path_messages,path_incomplete,path_clock,path_clock_offset_ns,path_clock_error_ns,path_valid,path_invalid_reason,path_merged,path_client_send_to_queue_p50_ns,path_client_send_to_queue_mean_ns,path_client_queue_to_driver_p50_ns,path_client_queue_to_driver_mean_ns,path_wire_out_p50_ns,path_wire_out_mean_ns,path_server_arrival_to_read_p50_ns,path_server_arrival_to_read_mean_ns,path_server_turnaround_p50_ns,path_server_turnaround_mean_ns,path_server_send_to_queue_p50_ns,path_server_send_to_queue_mean_ns,path_server_queue_to_driver_p50_ns,path_server_queue_to_driver_mean_ns,path_wire_back_p50_ns,path_wire_back_mean_ns,path_client_arrival_to_read_p50_ns,path_client_arrival_to_read_mean_ns,path_wire_both_p50_ns,path_wire_both_mean_ns,path_rtt_mean_ns,path_residual_mean_ns,path_residual_max_abs_ns,path_stamp_cost_ratio,path_stamp_cost_ratio_low,path_stamp_cost_ratio_high,path_stamp_read_ns
0,total,client_to_server,stream,tcp,2025-03-01T10:00:00.000Z,42,alpha,,131072,1,1,0,0,0,0,0,,1,24000000,,bit/s,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,24000000,,24000000,3002000,3002000,,,,,0,7,0,0,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
0,0,client_to_server,stream,tcp,2025-03-01T10:00:00.000Z,42,alpha,,131072,1,1,0,0,0,0,0,,1,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,8000000,,8000000,1001000,1001000,,,,,0,,,,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
0,1,client_to_server,stream,tcp,2025-03-01T10:00:00.000Z,42,alpha,,131072,1,1,0,0,0,0,0,,1,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,16000000,,16000000,2001000,2001000,,,,,0,,,,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
"#;
const UDP_BIDIR_TABLE: &str = r#"# wirebench 0.1.0 stream over udp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 2 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# units: rates in Mbit/s (10^6 bit/s), sizes in bytes, cpu in us per KiB, loss in % of datagrams sent, jitter in ms
# rates of payload, each side over its own clock; cpu = service demand, CPU time per KiB moved
# sender = bytes written to the transport over the sender's timed phase (bytes still in its socket buffer at the end count); receiver = bytes read over the receiver's timed phase
  size(B)  stream         direction       sender     receiver        sent(B)    received(B)  lost(dgr)  loss(%)  jitter(ms)   cpu_cli   cpu_srv
   131072       0  client_to_server         4.00         4.00         501000         501000          0    0.000      0.1250
   131072       1  client_to_server         8.00         8.00        1001000        1001000          0    0.000      0.2500
   131072       0  server_to_client        12.00        12.00        1501000        1501000          0    0.000      0.3750
   131072       1  server_to_client        16.00        16.00        2001000        2001000         25    2.500      0.5000
   131072     sum  client_to_server        12.00        12.00        1502000        1502000          0    0.000      0.2500         -         -
   131072     sum  server_to_client        28.00        28.00        3502000        3502000         25    1.250      0.5000         -         -
"#;
const PINGPONG_CSV: &str = r#"index,stream,direction,pattern,transport,run_started_at,run_id,client_host,server_host,size_bytes,request_size_bytes,response_size_bytes,length_prefix_bytes,sndbuf_bytes,rcvbuf_bytes,server_sndbuf_bytes,server_rcvbuf_bytes,cc,runs,headline_mean,headline_ci_half_width,headline_unit,rtt_samples,rtt_mean_ns,rtt_stddev_ns,rtt_ci_half_width_ns,rtt_min_ns,rtt_p50_ns,rtt_p90_ns,rtt_p99_ns,rtt_p999_ns,rtt_p9999_ns,rtt_percentiles_valid,rtt_percentiles_invalid,rtt_max_ns,one_way_mean_ns,throughput_bits_per_s,transactions_per_s,transactions,lost_transactions,think_corrected_transactions_per_s,think_waited_ns,arrivals,offered_per_s,achieved_per_s,requests_scheduled,requests_sent,requests_outstanding,requests_unsent,in_flight_bound_waits,service_p50_ns,service_p99_ns,overload,setup_mean_ns,sender_bits_per_s,acked_bits_per_s,receiver_bits_per_s,bytes_sent,bytes_received,datagrams_sent,datagrams_lost,loss_ratio,jitter_s,send_failures,retransmits,client_cpu_s,server_cpu_s,client_us_per_kib,server_us_per_kib,client_host_user_share,client_host_system_share,client_host_softirq_share,server_host_user_share,server_host_system_share,server_host_softirq_share,valid,invalid_reason,encoding,client_encode_mean_ns,client_decode_mean_ns,server_decode_mean_ns,server_encode_mean_ns,serialisation_share_of_rtt,client_encode_p99_ns,client_decode_p99_ns,server_decode_p99_ns,server_encode_p99_ns,path_messages,path_incomplete,path_clock,path_clock_offset_ns,path_clock_error_ns,path_valid,path_invalid_reason,path_merged,path_client_send_to_queue_p50_ns,path_client_send_to_queue_mean_ns,path_client_queue_to_driver_p50_ns,path_client_queue_to_driver_mean_ns,path_wire_out_p50_ns,path_wire_out_mean_ns,path_server_arrival_to_read_p50_ns,path_server_arrival_to_read_mean_ns,path_server_turnaround_p50_ns,path_server_turnaround_mean_ns,path_server_send_to_queue_p50_ns,path_server_send_to_queue_mean_ns,path_server_queue_to_driver_p50_ns,path_server_queue_to_driver_mean_ns,path_wire_back_p50_ns,path_wire_back_mean_ns,path_client_arrival_to_read_p50_ns,path_client_arrival_to_read_mean_ns,path_wire_both_p50_ns,path_wire_both_mean_ns,path_rtt_mean_ns,path_residual_mean_ns,path_residual_max_abs_ns,path_stamp_cost_ratio,path_stamp_cost_ratio_low,path_stamp_cost_ratio_high,path_stamp_read_ns
0,,,pingpong,tcp,2025-03-01T10:00:00.000Z,,alpha,,1,1,1,0,0,0,0,0,,1,10000,,ns,1000,20000,2000,100,1000,20000,20000,40000,80000,90000,,,90000,10000,799999.9999999999,50000,1000,0,,,,,,,,,,,,,,,,,,,,,,,,,,0,0,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
1,,,pingpong,tcp,2025-03-01T10:00:00.000Z,,alpha,,2,2,2,0,0,0,0,0,,1,11500,,ns,1000,23000,2300,100,1000,23000,23000,46000,80000,90000,,,90000,11500,1391304.347826087,43478.260869565216,1000,0,,,,,,,,,,,,,,,,,,,,,,,,,,0,0,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
2,,,pingpong,tcp,2025-03-01T10:00:00.000Z,,alpha,,3,3,3,0,0,0,0,0,,1,13000,,ns,1000,26000,2600,100,1000,26000,26000,52000,80000,90000,,,90000,13000,1846153.8461538462,38461.53846153846,1000,0,,,,,,,,,,,,,,,,,,,,,,,,,,0,0,,,,,,,,,true,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,
"#;
const PATH_SWEEP_TABLE: &str = r#"# wirebench 0.1.0 pingpong over tcp, server 192.0.2.7:5320
# client: alpha (Linux 6.1, 2 CPUs, cpu)
# 1 stream(s), warm-up 10 iterations, stop after 1.000 s, 95% confidence, 1 run(s) per point
# units: times in us (one-way = RTT/2), rates in Mbit/s (10^6 bit/s), sizes in bytes
# latency = RTT/2 (one-way); throughput = 2n/RTT; CI = confidence interval half-width of the mean
  size(B)   samples    mean(us)   ±CI(us)   min(us)   p50(us)   p99(us)   max(us)      Mbit/s
        1      1000       10.00      0.05      0.50     10.00     20.00     45.00        0.80
            path timing over 1000 round trips, one clock; residual mean 0.50 us, largest absolute 2.00 us; stages after the table
        2      1000       11.50      0.05      0.50     11.50     23.00     45.00        1.39
            path timing over 2000 round trips, one clock; residual mean 0.50 us, largest absolute 2.00 us; stages after the table
        3      1000       13.00      0.05      0.50     13.00     26.00     45.00        1.85
            path timing over 3000 round trips, one clock; residual mean 0.50 us, largest absolute 2.00 us; stages after the table
            note: no TX_SOFTWARE stamp: client queue→driver is in wire out
# t0 = RTT/2 of the smallest message (1 B) = 10.00 us ±0.05
# r_max = 1.85 Mbit/s at 3 B [1.84 .. 1.85]
#   r_max at the largest size (3 B): the curve had not flattened, r_max is a lower bound
# n_1/2 = 1 B (size reaching r_max/2, linear interpolation); an estimate against r_max, which is a lower bound: the true n_1/2 is likely larger
# fit t(n) = t0 + n/r_inf over 3 sizes: t0 = 8.50 us, r_inf = 5.33 Mbit/s, n_1/2 = r_inf*t0 = 6 B, R^2 = 1.00000
# path timing, each stage's p50 in us, a row a point (residual: the mean of each round trip less its stages' sum; n: round trips):
#   c.send = client send→queue, c.qdisc = client queue→driver, wire.out = wire out, s.read = server arrival→read, s.turn = server turnaround
#   s.send = server send→queue, s.qdisc = server queue→driver, wire.back = wire back, c.read = client arrival→read
# +: the stage stands for a neighbour too, a device giving no stamp between them (the point's note says which)
# size(B)  c.send  c.qdisc  wire.out  s.read  s.turn  s.send  s.qdisc  wire.back  c.read  rtt p50  residual     n
#       1    1.00     2.00      3.00    4.00    5.00    6.00     7.00       8.00    9.00    45.00      0.50  1000
#       2    1.00     2.00      3.00    4.00    5.00    6.00     7.00       8.00    9.00    45.00      0.50  2000
#       3    1.00        -     3.00+    4.00    5.00    6.00     7.00       8.00    9.00    45.00      0.50  3000
# first (warm-up) transaction of the last point: 5.00 us round trip, not in the statistics
"#;
