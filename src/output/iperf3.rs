//! `export --format iperf3`: one point of a stream run as the JSON document iperf3's client
//! writes with `-J` (`start`, `intervals`, `end`), for tools that read iperf3's results.
//!
//! Units are iperf3's: seconds as floats, `bits_per_second` as floats, bytes as integers,
//! jitter in milliseconds, CPU in percent of one CPU. The document is the client's view, as
//! iperf3's is: `intervals` are the client side's reports (the senders' in a forward run, the
//! receivers' in a reverse one, both in a bidirectional one, the server's direction then summed
//! in `sum_bidir_reverse`), and `sender` says whether the client sent the bytes. The figures
//! are wirebench's own, not recomputed: `end.sum_received.bits_per_second` is the point's
//! receiver rate (`receiver_bits_per_s` of its direction) and `end.sum_sent` the sender's,
//! each with the bytes and seconds they stand on. What wirebench does not know is left out
//! rather than filled in: the local address and port, the data connections' remote port (unless
//! they went to the control port), a UDP sender's jitter and loss. `socket` is the stream's
//! index, not a descriptor. Without interval reports (`-i`), each stream has one interval, its
//! timed phase. A point measured several times (`--repeat`) is its last run, as `stream` is.

use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::model::socket::CpuTime;
use crate::model::stream::{Interval, StreamStats};
use crate::model::vocab::{Direction, PatternKind, TransportKind};
use crate::model::{DirectionTotal, PointResult, RunDocument, StreamPair};

/// The direction in which the client sends.
const CLIENT_TO_SERVER: &str = "client_to_server";

/// An iperf3 document, its three parts in iperf3's order (the keys inside each are sorted).
#[derive(Debug, Serialize)]
pub struct Document {
    pub start: Value,
    pub intervals: Value,
    pub end: Value,
}

/// Point `point` of `report` (the only one when None) as iperf3 `-J` JSON text.
pub fn to_string(report: &RunDocument, point: Option<usize>) -> Result<String> {
    Ok(serde_json::to_string_pretty(&document(report, point)?)? + "\n")
}

/// The iperf3 document of point `point` (the only one when None), or why the run has none:
/// not a stream run, over a transport iperf3 does not speak, or a sweep with no point chosen.
pub fn document(report: &RunDocument, point: Option<usize>) -> Result<Document> {
    if report.pattern != PatternKind::Stream {
        bail!(
            "the iperf3 format holds stream runs (this one is {}); use --format json",
            report.pattern.name()
        );
    }
    let protocol = match report.transport {
        TransportKind::Tcp | TransportKind::Mptcp => "TCP",
        TransportKind::Udp => "UDP",
        other => bail!(
            "the iperf3 format holds stream runs over tcp, mptcp or udp (this one is over {}); use --format json",
            other.name()
        ),
    };
    let n = report.points.len();
    let p = match (point, n) {
        (_, 0) => bail!("the run has no measured point to export"),
        (Some(i), _) if i >= n => bail!("--point {i}: the run has {n} points (0 to {})", n - 1),
        (Some(i), _) => &report.points[i],
        (None, 1) => &report.points[0],
        (None, _) => bail!(
            "the run is a sweep of {n} points and an iperf3 document holds one: choose it with --point (0 to {})",
            n - 1
        ),
    };
    let Some(stream) = &p.stream else {
        bail!("point {} has no stream figures; use --format json", p.index);
    };
    // iperf3's document has no place for a verdict, and its readers print every rate as a
    // measurement: a figure the run judged not valid would leave here unmarked.
    let verdict = crate::model::point_validity(p);
    if verdict.is_invalid() {
        bail!(
            "point {} is not a valid measurement ({}), and an iperf3 document cannot mark it; use --format json",
            p.index,
            verdict.reason()
        );
    }
    let tcp = protocol == "TCP";
    let mut totals: Vec<&DirectionTotal> = stream.totals.iter().collect();
    // The client's own direction first, as iperf3 sums it in `sum` and `sum_sent`.
    totals.sort_by_key(|t| t.direction != CLIENT_TO_SERVER);
    let Some(main) = totals.first() else {
        bail!("point {} has no stream totals; use --format json", p.index);
    };
    let pairs = |dir: &str| -> Vec<&StreamPair> {
        stream
            .streams
            .iter()
            .filter(|s| s.direction == dir)
            .collect()
    };
    let main_pairs = pairs(&main.direction);
    let reverse = totals.get(1);
    let reverse_pairs = reverse.map(|t| pairs(&t.direction)).unwrap_or_default();

    let mut end = Map::new();
    let all: Vec<&StreamPair> = main_pairs.iter().chain(&reverse_pairs).copied().collect();
    end.insert(
        "streams".into(),
        Value::Array(all.iter().map(|s| end_stream(s, tcp)).collect()),
    );
    let mut sums = |suffix: &str, t: &DirectionTotal| {
        let client_sent = t.direction == CLIENT_TO_SERVER;
        if !tcp {
            end.insert(format!("sum{suffix}"), udp_sum(t, client_sent));
        }
        end.insert(format!("sum_sent{suffix}"), sum_sent(t, client_sent, tcp));
        end.insert(
            format!("sum_received{suffix}"),
            sum_received(t, client_sent, tcp),
        );
    };
    sums("", main);
    if let Some(t) = reverse {
        sums("_bidir_reverse", t);
    }
    if let Some(cpu) = cpu_utilization(p, &all) {
        end.insert("cpu_utilization_percent".into(), cpu);
    }
    if tcp {
        let cc = |side: &[crate::model::socket::EffectiveOptions]| {
            side.iter().find_map(|o| o.cc.clone())
        };
        let (client_cc, server_cc) = (cc(&p.socket.client), cc(&p.socket.server));
        let (snd, rcv) = if main.direction == CLIENT_TO_SERVER {
            (client_cc, server_cc)
        } else {
            (server_cc, client_cc)
        };
        if let Some(c) = snd {
            end.insert("sender_tcp_congestion".into(), Value::String(c));
        }
        if let Some(c) = rcv {
            end.insert("receiver_tcp_congestion".into(), Value::String(c));
        }
    }
    Ok(Document {
        start: start(report, p, protocol),
        intervals: intervals(&main_pairs, &reverse_pairs, tcp),
        end: Value::Object(end),
    })
}

/// Nanoseconds as iperf3's seconds.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// `start`: the connection, the host, when, and what was asked for.
fn start(report: &RunDocument, p: &PointResult, protocol: &str) -> Value {
    let (host, port) = split_address(report.server.address.as_deref().unwrap_or(""));
    let streams = p.stream.as_ref().map_or(&[][..], |s| &s.streams[..]);
    let connected: Vec<Value> = streams
        .iter()
        .map(|s| {
            let mut c = Map::new();
            c.insert("socket".into(), json!(s.index));
            c.insert("remote_host".into(), json!(host));
            if report.server.one_port {
                if let Some(port) = port {
                    c.insert("remote_port".into(), json!(port));
                }
            }
            Value::Object(c)
        })
        .collect();
    let env = &report.client_environment;
    let (sysname, release) = env
        .kernel
        .split_once(' ')
        .unwrap_or((env.kernel.as_str(), ""));
    let mut start = Map::new();
    start.insert("connected".into(), Value::Array(connected));
    start.insert(
        "version".into(),
        json!(format!("wirebench {}", report.wirebench_version)),
    );
    start.insert(
        "system_info".into(),
        json!(format!("{sysname} {} {release}", env.hostname)
            .trim()
            .to_owned()),
    );
    if let Some(t) = timesecs(&report.started_at) {
        start.insert(
            "timestamp".into(),
            json!({"time": rfc1123(t), "timesecs": t}),
        );
    }
    let mut connecting = Map::new();
    connecting.insert("host".into(), json!(host));
    if let Some(port) = port {
        connecting.insert("port".into(), json!(port));
    }
    start.insert("connecting_to".into(), Value::Object(connecting));
    let s = &report.settings;
    let target = match s.rate {
        Some(crate::units::Rate::BitsPerSecond(b)) => b as u64,
        _ => 0,
    };
    let mut test = json!({
        "protocol": protocol,
        "num_streams": s.streams,
        "blksize": p.key.size,
        "omit": 0,
        "duration": s.duration_ns.map_or(0, |d| d / 1_000_000_000),
        "bytes": s.bytes.unwrap_or(0),
        "blocks": 0,
        "reverse": u8::from(s.direction == Direction::Reverse),
        "target_bitrate": target,
    });
    if s.direction == Direction::Bidir {
        test["bidir"] = json!(1);
    }
    start.insert("test_start".into(), test);
    Value::Object(start)
}

/// "HOST:PORT" or "[V6]:PORT" as host and port; a text without a port is all host.
fn split_address(a: &str) -> (String, Option<u16>) {
    match a.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.starts_with('[')) => {
            match p.parse::<u16>() {
                Ok(port) => (h.trim_matches(['[', ']']).to_owned(), Some(port)),
                Err(_) => (a.to_owned(), None),
            }
        }
        _ => (a.to_owned(), None),
    }
}

/// Seconds since the epoch of an RFC 3339 time.
fn timesecs(rfc3339: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(rfc3339).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// Seconds since the epoch as iperf3 writes `timestamp.time`: "Fri, 27 Nov 2026 05:58:14 GMT".
fn rfc1123(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The side of a stream pair the client holds.
fn client_side(p: &StreamPair) -> &StreamStats {
    if p.direction == CLIENT_TO_SERVER {
        &p.sender
    } else {
        &p.receiver
    }
}

/// A side's interval reports, or without them its timed phase as one.
fn reports(s: &StreamStats) -> Vec<Interval> {
    if s.intervals.is_empty() {
        vec![Interval {
            start_ns: 0,
            end_ns: s.elapsed_ns,
            bytes: s.bytes_timed,
            messages: s.messages_timed,
            bits_per_s: s.bits_per_s,
            tcp_info: s.tcp_info,
            retransmits: None,
            acked_bytes: None,
        }]
    } else {
        s.intervals.clone()
    }
}

/// `intervals`: the client side's reports, the k-th of every stream in the k-th entry, summed
/// in `sum` (and the server's direction of a bidirectional run in `sum_bidir_reverse`).
fn intervals(main: &[&StreamPair], reverse: &[&StreamPair], tcp: bool) -> Value {
    let of = |pairs: &[&StreamPair]| -> Vec<(u32, bool, Vec<Interval>)> {
        pairs
            .iter()
            .map(|p| {
                (
                    p.index,
                    p.direction == CLIENT_TO_SERVER,
                    reports(client_side(p)),
                )
            })
            .collect()
    };
    let (main, reverse) = (of(main), of(reverse));
    let count = main
        .iter()
        .chain(&reverse)
        .map(|(_, _, i)| i.len())
        .max()
        .unwrap_or(0);
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let at = |side: &[(u32, bool, Vec<Interval>)]| -> Vec<(u32, bool, Interval)> {
            side.iter()
                .filter_map(|(index, sent, i)| i.get(k).map(|i| (*index, *sent, *i)))
                .collect()
        };
        let (m, r) = (at(&main), at(&reverse));
        let streams: Vec<Value> = m
            .iter()
            .chain(&r)
            .map(|(index, sent, i)| interval_stream(*index, *sent, i, tcp))
            .collect();
        let mut entry = Map::new();
        entry.insert("streams".into(), Value::Array(streams));
        if let Some(sum) = interval_sum(&m, tcp) {
            entry.insert("sum".into(), sum);
        }
        if let Some(sum) = interval_sum(&r, tcp) {
            entry.insert("sum_bidir_reverse".into(), sum);
        }
        out.push(Value::Object(entry));
    }
    Value::Array(out)
}

/// start, end, seconds, bytes, bits_per_second of an interval.
fn timing(i: &Interval, bytes: u64, bits_per_s: f64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("start".into(), json!(secs(i.start_ns)));
    m.insert("end".into(), json!(secs(i.end_ns)));
    m.insert(
        "seconds".into(),
        json!(secs(i.end_ns.saturating_sub(i.start_ns))),
    );
    m.insert("bytes".into(), json!(bytes));
    m.insert("bits_per_second".into(), json!(bits_per_s));
    m
}

/// One stream's entry in an interval.
fn interval_stream(index: u32, sent: bool, i: &Interval, tcp: bool) -> Value {
    let mut m = Map::new();
    m.insert("socket".into(), json!(index));
    m.extend(timing(i, i.bytes, i.bits_per_s));
    if tcp && sent {
        if let Some(r) = i.retransmits {
            m.insert("retransmits".into(), json!(r));
        }
        if let Some(t) = &i.tcp_info {
            m.insert(
                "snd_cwnd".into(),
                json!(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)),
            );
            m.insert("snd_wnd".into(), json!(t.snd_wnd));
            m.insert("rtt".into(), json!(t.rtt_us));
            m.insert("rttvar".into(), json!(t.rttvar_us));
            m.insert("pmtu".into(), json!(t.pmtu));
        }
    }
    if !tcp {
        m.insert("packets".into(), json!(i.messages));
    }
    m.insert("omitted".into(), json!(false));
    m.insert("sender".into(), json!(sent));
    Value::Object(m)
}

/// The sum of one direction's streams in an interval: the first stream's bounds, the bytes
/// summed, and the streams' rates summed (each over its own bounds, as wirebench took it).
fn interval_sum(streams: &[(u32, bool, Interval)], tcp: bool) -> Option<Value> {
    let (_, sent, first) = streams.first()?;
    let bytes = streams.iter().map(|(_, _, i)| i.bytes).sum();
    let rate = streams.iter().map(|(_, _, i)| i.bits_per_s).sum();
    let mut m = timing(first, bytes, rate);
    if tcp && *sent {
        let r: Option<u64> = streams
            .iter()
            .map(|(_, _, i)| i.retransmits.map(u64::from))
            .sum();
        if let Some(r) = r {
            m.insert("retransmits".into(), json!(r));
        }
    }
    if !tcp {
        let packets: u64 = streams.iter().map(|(_, _, i)| i.messages).sum();
        m.insert("packets".into(), json!(packets));
    }
    m.insert("omitted".into(), json!(false));
    m.insert("sender".into(), json!(sent));
    Some(Value::Object(m))
}

/// A side's whole timed phase: start 0, its end, seconds, bytes and rate.
fn phase(s: &StreamStats) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("start".into(), json!(0.0));
    m.insert("end".into(), json!(secs(s.elapsed_ns)));
    m.insert("seconds".into(), json!(secs(s.elapsed_ns)));
    m.insert("bytes".into(), json!(s.bytes_timed));
    m.insert("bits_per_second".into(), json!(s.bits_per_s));
    m
}

/// iperf3's UDP figures from wirebench's datagram accounting.
fn loss_fields(m: &mut Map<String, Value>, l: &crate::model::stream::LossStats) {
    m.insert("jitter_ms".into(), json!(l.jitter_ns / 1e6));
    m.insert("lost_packets".into(), json!(l.lost));
    m.insert("packets".into(), json!(l.sent));
    m.insert("lost_percent".into(), json!(l.loss_ratio * 100.0));
}

/// One stream in `end.streams`: its sender and receiver (and for UDP its receiver's loss
/// under `udp`, as iperf3 keeps it).
fn end_stream(p: &StreamPair, tcp: bool) -> Value {
    let sent = p.direction == CLIENT_TO_SERVER;
    let mut sender = Map::new();
    sender.insert("socket".into(), json!(p.index));
    sender.extend(phase(&p.sender));
    if tcp {
        if let Some(t) = &p.sender.tcp_info {
            sender.insert("retransmits".into(), json!(t.total_retrans));
        }
    }
    sender.insert("sender".into(), json!(sent));
    let mut receiver = Map::new();
    receiver.insert("socket".into(), json!(p.index));
    receiver.extend(phase(&p.receiver));
    receiver.insert("sender".into(), json!(sent));
    let mut m = Map::new();
    if !tcp {
        let mut udp = receiver.clone();
        if let Some(l) = &p.receiver.loss {
            loss_fields(&mut udp, l);
            udp.insert("out_of_order".into(), json!(l.reordered));
        }
        m.insert("udp".into(), Value::Object(udp));
    }
    m.insert("sender".into(), Value::Object(sender));
    m.insert("receiver".into(), Value::Object(receiver));
    Value::Object(m)
}

/// A direction total's sum: the window its rate is over (`span`, else the shortest phase),
/// the bytes within it and wirebench's rate itself.
fn total_sum(
    span: Option<&crate::model::span::TotalSpan>,
    elapsed_ns: u64,
    bytes_timed: u64,
    bits_per_s: f64,
) -> Map<String, Value> {
    let (start, end, bytes) = match span {
        Some(s) => (s.start_ns, s.end_ns, s.bytes),
        None => (0, elapsed_ns, bytes_timed),
    };
    let mut m = Map::new();
    m.insert("start".into(), json!(secs(start)));
    m.insert("end".into(), json!(secs(end)));
    m.insert("seconds".into(), json!(secs(end.saturating_sub(start))));
    m.insert("bytes".into(), json!(bytes));
    m.insert("bits_per_second".into(), json!(bits_per_s));
    m
}

/// `end.sum_sent`: the senders' total, with TCP's retransmissions.
fn sum_sent(t: &DirectionTotal, client_sent: bool, tcp: bool) -> Value {
    let mut m = total_sum(
        t.sender_span.as_ref(),
        t.sender_elapsed_ns,
        t.sender_bytes_timed,
        t.sender_bits_per_s,
    );
    if tcp {
        if let Some(r) = t.retransmits {
            m.insert("retransmits".into(), json!(r));
        }
    } else {
        m.insert("packets".into(), json!(t.sender_messages_timed));
    }
    m.insert("sender".into(), json!(client_sent));
    Value::Object(m)
}

/// `end.sum_received`: the receivers' total; its rate is the point's receiver figure.
fn sum_received(t: &DirectionTotal, client_sent: bool, tcp: bool) -> Value {
    let mut m = total_sum(
        t.receiver_span.as_ref(),
        t.receiver_elapsed_ns,
        t.receiver_bytes_timed,
        t.receiver_bits_per_s,
    );
    if !tcp {
        if let Some(l) = &t.loss {
            loss_fields(&mut m, l);
        }
    }
    m.insert("sender".into(), json!(client_sent));
    Value::Object(m)
}

/// `end.sum` of a UDP run: the receivers' total with its loss and jitter.
fn udp_sum(t: &DirectionTotal, client_sent: bool) -> Value {
    sum_received(t, client_sent, false)
}

/// `cpu_utilization_percent`: each end's data threads' CPU time (user, system) over the
/// longest timed phase on that end, in percent of one CPU (iperf3's unit). None when the
/// client measured none.
fn cpu_utilization(p: &PointResult, pairs: &[&StreamPair]) -> Option<Value> {
    let longest = |client: bool| {
        pairs
            .iter()
            .flat_map(|s| {
                let client_sends = s.direction == CLIENT_TO_SERVER;
                [
                    (client_sends == client, s.sender.elapsed_ns),
                    (client_sends != client, s.receiver.elapsed_ns),
                ]
            })
            .filter_map(|(here, ns)| here.then_some(ns))
            .max()
            .unwrap_or(0)
    };
    let percent = |cpu: &CpuTime, wall_ns: u64| {
        if wall_ns == 0 {
            (0.0, 0.0, 0.0)
        } else {
            let w = wall_ns as f64;
            (
                cpu.total_ns() as f64 / w * 100.0,
                cpu.user_ns as f64 / w * 100.0,
                cpu.system_ns as f64 / w * 100.0,
            )
        }
    };
    if p.cpu.client.total_ns() == 0 {
        return None;
    }
    let (ht, hu, hs) = percent(&p.cpu.client, longest(true));
    let (rt, ru, rs) = percent(&p.cpu.server, longest(false));
    Some(json!({
        "host_total": ht, "host_user": hu, "host_system": hs,
        "remote_total": rt, "remote_user": ru, "remote_system": rs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::socket::TcpInfo;
    use crate::model::stream::LossStats;
    use crate::model::StreamResult;
    use crate::store::db::tests::report;

    /// One side of a stream: `bytes` timed over `elapsed_ns`, at wirebench's rate.
    fn side(bytes: u64, elapsed_ns: u64, messages: u64) -> StreamStats {
        StreamStats {
            bytes_timed: bytes,
            messages_timed: messages,
            elapsed_ns,
            bits_per_s: bytes as f64 * 8.0 / (elapsed_ns as f64 / 1e9),
            ..StreamStats::default()
        }
    }

    fn interval(start_ns: u64, end_ns: u64, bytes: u64, retransmits: Option<u32>) -> Interval {
        Interval {
            start_ns,
            end_ns,
            bytes,
            messages: bytes / 1000,
            bits_per_s: bytes as f64 * 8.0 / ((end_ns - start_ns) as f64 / 1e9),
            tcp_info: None,
            retransmits,
            acked_bytes: None,
        }
    }

    /// A TCP stream run of one stream: 3 MB sent in 1.5 s, 2.9 MB received in 1.45 s, two
    /// interval reports on the sender, 3 retransmissions.
    fn tcp_run(direction: &str) -> RunDocument {
        let mut r = report("stream", 1, 1.0);
        r.settings.duration_ns = Some(1_500_000_000);
        let p = &mut r.points[0];
        p.key.size = 131_072;
        p.latency = None;
        let mut sender = side(3_000_000, 1_500_000_000, 23);
        sender.tcp_info = Some(TcpInfo {
            total_retrans: 3,
            ..TcpInfo::default()
        });
        let mut receiver = side(2_900_000, 1_450_000_000, 40);
        let reports = vec![
            interval(0, 1_000_000_000, 2_000_000, Some(1)),
            interval(1_000_000_000, 1_500_000_000, 1_000_000, Some(2)),
        ];
        if direction == CLIENT_TO_SERVER {
            sender.intervals = reports;
        } else {
            receiver.intervals = reports;
        }
        let pair = StreamPair::judged(0, direction.into(), sender, receiver, TransportKind::Tcp);
        let mut total = DirectionTotal {
            direction: direction.into(),
            streams: 1,
            sender_bits_per_s: pair.sender.bits_per_s,
            receiver_bits_per_s: pair.receiver.bits_per_s,
            retransmits: Some(3),
            ..DirectionTotal::default()
        };
        total.judge_from(&[&pair]);
        p.stream = Some(StreamResult {
            streams: vec![pair],
            totals: vec![total],
        });
        p.cpu.client = CpuTime {
            user_ns: 150_000_000,
            system_ns: 450_000_000,
        };
        p.cpu.server = CpuTime {
            user_ns: 29_000_000,
            system_ns: 0,
        };
        r
    }

    fn doc(r: &RunDocument, point: Option<usize>) -> Value {
        serde_json::to_value(document(r, point).unwrap()).unwrap()
    }

    /// A figure the run judged not valid has no place to carry its mark in iperf3's
    /// document, so the export refuses it with the reason instead of writing it plain.
    #[test]
    fn a_point_judged_not_valid_is_refused_with_its_reason() {
        let mut r = tcp_run(CLIENT_TO_SERVER);
        let total = &mut r.points[0].stream.as_mut().unwrap().totals[0];
        total.receiver_valid = Some(false);
        total.receiver_invalid_reason = Some("above the link's rate".into());
        let e = document(&r, None).unwrap_err().to_string();
        assert!(e.contains("not a valid measurement"), "{e}");
        assert!(e.contains("above the link's rate"), "{e}");
        assert!(e.contains("--format json"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_tcp_stream_maps_to_iperf3_fields_and_units() {
        let r = tcp_run(CLIENT_TO_SERVER);
        let d = doc(&r, None);
        let start = &d["start"];
        assert_eq!(start["version"], "wirebench 0.1.0");
        assert_eq!(start["system_info"], "Linux alpha 6.1");
        assert_eq!(start["timestamp"]["timesecs"], 1_740_823_200u64);
        assert_eq!(start["timestamp"]["time"], "Sat, 01 Mar 2025 10:00:00 GMT");
        assert_eq!(
            start["connecting_to"],
            json!({"host": "192.0.2.7", "port": 5320})
        );
        // Data connections went to a port of their own: not known, not written.
        assert_eq!(
            start["connected"],
            json!([{"socket": 0, "remote_host": "192.0.2.7"}])
        );
        assert_eq!(
            start["test_start"],
            json!({"protocol": "TCP", "num_streams": 1, "blksize": 131_072, "omit": 0,
                   "duration": 1, "bytes": 0, "blocks": 0, "reverse": 0, "target_bitrate": 0})
        );

        let intervals = d["intervals"].as_array().unwrap();
        assert_eq!(intervals.len(), 2);
        let second = &intervals[1]["sum"];
        assert_eq!(second["start"], 1.0);
        assert_eq!(second["end"], 1.5);
        assert_eq!(second["seconds"], 0.5);
        assert_eq!(second["bytes"], 1_000_000);
        assert_eq!(second["bits_per_second"], 16e6);
        assert_eq!(second["retransmits"], 2);
        assert_eq!(second["omitted"], false);
        assert_eq!(second["sender"], true);
        assert_eq!(intervals[1]["streams"][0]["bytes"], 1_000_000);
        assert_eq!(intervals[0]["streams"][0]["retransmits"], 1);

        let end = &d["end"];
        assert_eq!(
            end["sum_sent"],
            json!({"start": 0.0, "end": 1.5, "seconds": 1.5, "bytes": 3_000_000,
                   "bits_per_second": 16e6, "retransmits": 3, "sender": true})
        );
        let received = &end["sum_received"];
        assert_eq!(received["seconds"], 1.45);
        assert_eq!(received["bytes"], 2_900_000);
        let total = &r.points[0].stream.as_ref().unwrap().totals[0];
        assert_eq!(
            received["bits_per_second"].as_f64().unwrap(),
            total.receiver_bits_per_s
        );
        assert!(received.get("retransmits").is_none());
        assert_eq!(end["streams"][0]["sender"]["retransmits"], 3);
        assert_eq!(end["streams"][0]["receiver"]["bytes"], 2_900_000);
        // 0.6 s of the client's CPU over its 1.5 s phase; 29 ms of the server's over 1.45 s.
        let cpu = &end["cpu_utilization_percent"];
        assert!((cpu["host_total"].as_f64().unwrap() - 40.0).abs() < 1e-9);
        assert!((cpu["host_user"].as_f64().unwrap() - 10.0).abs() < 1e-9);
        assert!((cpu["host_system"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert!((cpu["remote_total"].as_f64().unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(cpu["remote_system"], 0.0);
    }

    #[test]
    fn a_reverse_run_reports_the_client_receivers_intervals() {
        let mut r = tcp_run("server_to_client");
        r.settings.direction = Direction::Reverse;
        let d = doc(&r, None);
        assert_eq!(d["start"]["test_start"]["reverse"], 1);
        let sum = &d["intervals"][0]["sum"];
        assert_eq!(sum["sender"], false);
        assert_eq!(sum["bytes"], 2_000_000);
        // A receiver's interval has no retransmissions, nor TCP_INFO.
        assert!(sum.get("retransmits").is_none());
        assert_eq!(d["end"]["sum_received"]["sender"], false);
        // The client received: its CPU over its receiver's 1.45 s.
        let host = d["end"]["cpu_utilization_percent"]["host_total"]
            .as_f64()
            .unwrap();
        assert!((host - 0.6 / 1.45 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn without_interval_reports_each_stream_has_its_phase_as_one() {
        let mut r = tcp_run(CLIENT_TO_SERVER);
        let s = r.points[0].stream.as_mut().unwrap();
        s.streams[0].sender.intervals.clear();
        let d = doc(&r, None);
        let intervals = d["intervals"].as_array().unwrap();
        assert_eq!(intervals.len(), 1);
        assert_eq!(intervals[0]["sum"]["seconds"], 1.5);
        assert_eq!(intervals[0]["sum"]["bits_per_second"], 16e6);
    }

    #[test]
    fn udp_loss_and_jitter_in_iperf3_units() {
        let mut r = tcp_run(CLIENT_TO_SERVER);
        r.transport = TransportKind::Udp;
        let loss = LossStats {
            sent: 1000,
            received: 975,
            lost: 25,
            loss_ratio: 0.025,
            reordered: 2,
            jitter_ns: 125_000.0,
            ..LossStats::default()
        };
        let s = r.points[0].stream.as_mut().unwrap();
        s.streams[0].receiver.loss = Some(loss);
        s.streams[0].sender.tcp_info = None;
        s.totals[0].loss = Some(loss);
        s.totals[0].retransmits = None;
        let d = doc(&r, None);
        assert_eq!(d["start"]["test_start"]["protocol"], "UDP");
        let end = &d["end"];
        for sum in [&end["sum"], &end["sum_received"], &end["streams"][0]["udp"]] {
            assert_eq!(sum["jitter_ms"], 0.125);
            assert_eq!(sum["lost_packets"], 25);
            assert_eq!(sum["packets"], 1000);
            assert_eq!(sum["lost_percent"], 2.5);
            assert_eq!(sum["bytes"], 2_900_000);
        }
        assert_eq!(end["streams"][0]["udp"]["out_of_order"], 2);
        assert_eq!(end["sum_sent"]["packets"], 23);
        assert!(end["sum_sent"].get("retransmits").is_none());
        assert!(d["intervals"][0]["sum"].get("retransmits").is_none());
        assert_eq!(d["intervals"][0]["sum"]["packets"], 2000);
    }

    #[test]
    fn other_runs_are_refused_in_one_line() {
        let err = |r: &RunDocument, point| document(r, point).unwrap_err().to_string();
        let e = err(&report("pingpong", 1, 1.0), None);
        assert!(e.contains("the iperf3 format holds stream runs"), "{e}");
        assert!(e.contains("use --format json"), "{e}");
        let mut quic = tcp_run(CLIENT_TO_SERVER);
        quic.transport = TransportKind::Quic;
        assert!(err(&quic, None).contains("over quic"));

        let mut sweep = tcp_run(CLIENT_TO_SERVER);
        let mut second = sweep.points[0].clone();
        second.index = 1;
        second.key.size = 65_536;
        sweep.points.push(second);
        let e = err(&sweep, None);
        assert!(e.contains("--point") && e.contains("2 points"), "{e}");
        assert!(!e.contains('\n'));
        assert_eq!(
            doc(&sweep, Some(1))["start"]["test_start"]["blksize"],
            65_536
        );
        assert!(err(&sweep, Some(2)).contains("0 to 1"));
    }

    #[test]
    fn dates_and_addresses() {
        assert_eq!(rfc1123(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(rfc1123(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        // As iperf3 3.12 wrote it for that second.
        assert_eq!(rfc1123(1_795_759_094), "Fri, 27 Nov 2026 05:58:14 GMT");
        assert_eq!(split_address("[::1]:5320"), ("::1".into(), Some(5320)));
        assert_eq!(split_address("host:80"), ("host".into(), Some(80)));
        assert_eq!(split_address("::1"), ("::1".into(), None));
        assert_eq!(split_address("host"), ("host".into(), None));
    }
}
