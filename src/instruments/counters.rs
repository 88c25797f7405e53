//! The kernel's network counters of one host (one network namespace): the SNMP and netstat
//! tables of /proc/net and every interface's statistics (those of /sys/class/net/IF/statistics,
//! read from /proc/net/dev), read before and after a point, and their difference.
//!
//! The parsers are pure functions of the files' text, so that they are tested on fixed text;
//! only [`Snapshot::read`] touches the file system.

use std::collections::BTreeMap;

use crate::model::host::HostCounters;

/// Counters kept in a delta even when they did not change: the ones that say where a message
/// or a segment was lost or recovered, so that a 0 reads as "none were", not "not looked at".
pub const ALWAYS_KEPT: &[&str] = &[
    "Ip.InDiscards",
    "Ip.OutDiscards",
    "Ip.ReasmFails",
    "Tcp.RetransSegs",
    "Tcp.InErrs",
    "Tcp.OutRsts",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.InCsumErrors",
    "Udp.MemErrors",
    "TcpExt.TCPFastRetrans",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPLossProbes",
    "TcpExt.TCPSackRecovery",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.ListenDrops",
    "TcpExt.ListenOverflows",
    "TcpExt.TCPOFOQueue",
    "TcpExt.DelayedACKs",
];

/// Interface statistics whose delta is kept even when 0.
const INTERFACE_ALWAYS_KEPT: &[&str] = &["rx_dropped", "tx_dropped", "rx_errors", "tx_errors"];

/// Entries of the tables that are settings or gauges, not counters: their difference means
/// nothing.
const NOT_COUNTERS: &[&str] = &[
    "Ip.Forwarding",
    "Ip.DefaultTTL",
    "Tcp.RtoAlgorithm",
    "Tcp.RtoMin",
    "Tcp.RtoMax",
    "Tcp.MaxConn",
    "Tcp.CurrEstab",
];

/// The counters of one host at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// "Table.Name" (`Udp.RcvbufErrors`, `TcpExt.TCPTimeouts`) -> value.
    pub kernel: BTreeMap<String, i64>,
    /// Interface name -> statistic (`rx_dropped`) -> value.
    pub interfaces: BTreeMap<String, BTreeMap<String, i64>>,
}

/// Adds the pairs of lines of a /proc/net/snmp or /proc/net/netstat text ("Udp: names..."
/// followed by "Udp: values...") to `into` as "Udp.Name". Lines that do not pair up, and
/// values that are not integers, are skipped: a kernel's odd line must not lose the rest.
pub fn parse_table(text: &str, into: &mut BTreeMap<String, i64>) {
    let mut lines = text.lines();
    while let Some(names) = lines.next() {
        let Some((table, names)) = names.split_once(':') else {
            continue;
        };
        let Some(values) = lines.next() else {
            break;
        };
        let Some((table2, values)) = values.split_once(':') else {
            continue;
        };
        if table != table2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            let key = format!("{table}.{n}");
            if NOT_COUNTERS.contains(&key.as_str()) {
                continue;
            }
            if let Ok(v) = v.parse::<i64>() {
                into.insert(key, v);
            }
        }
    }
}

/// The columns of /proc/net/dev, in order after "IFACE:", that are kept (by their names in
/// /sys/class/net/IF/statistics).
const NET_DEV_COLUMNS: [(usize, &str); 8] = [
    (0, "rx_bytes"),
    (1, "rx_packets"),
    (2, "rx_errors"),
    (3, "rx_dropped"),
    (8, "tx_bytes"),
    (9, "tx_packets"),
    (10, "tx_errors"),
    (11, "tx_dropped"),
];

/// Interface -> statistic -> value, from a /proc/net/dev text (two header lines, then
/// "  IFACE: rx bytes packets errs drop fifo frame compressed multicast tx bytes packets
/// errs drop fifo colls carrier compressed"). Lines without 16 numbers are skipped.
pub fn parse_net_dev(text: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let values: Vec<i64> = rest
            .split_whitespace()
            .map_while(|v| v.parse().ok())
            .collect();
        if values.len() < 16 {
            continue;
        }
        let fields = NET_DEV_COLUMNS
            .iter()
            .map(|(i, f)| ((*f).to_owned(), values[*i]))
            .collect();
        out.insert(name.trim().to_owned(), fields);
    }
    out
}

/// A file of this thread's /proc/.../net (before Linux 3.17, without thread-self: the
/// process's).
fn read_net(file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))
        .or_else(|_| std::fs::read_to_string(format!("/proc/net/{file}")))
        .ok()
}

impl Snapshot {
    /// Reads this thread's network namespace: snmp, netstat and dev of /proc/thread-self/net
    /// (the lab's hosts are threads that entered their namespaces; /proc/net is the process
    /// leader's, /sys/class/net whoever mounted /sys's). A file that cannot be read leaves
    /// its counters out.
    pub fn read() -> Snapshot {
        let mut s = Snapshot::default();
        for file in ["snmp", "netstat"] {
            if let Some(text) = read_net(file) {
                parse_table(&text, &mut s.kernel);
            }
        }
        // /proc/net/dev holds the counters of /sys/class/net/IF/statistics (dev_get_stats).
        if let Some(text) = read_net("dev") {
            s.interfaces = parse_net_dev(&text);
        }
        s
    }

    /// after - before (`self` is after): counters that changed, and the loss-relevant ones
    /// always. A counter present on one side only (an interface that came or went) is left out.
    pub fn delta(&self, before: &Snapshot) -> HostCounters {
        let mut kernel = BTreeMap::new();
        for (k, after) in &self.kernel {
            if let Some(b) = before.kernel.get(k) {
                let d = after.wrapping_sub(*b);
                if d != 0 || ALWAYS_KEPT.contains(&k.as_str()) {
                    kernel.insert(k.clone(), d);
                }
            }
        }
        let mut interfaces = BTreeMap::new();
        for (name, fields) in &self.interfaces {
            let Some(b) = before.interfaces.get(name) else {
                continue;
            };
            let mut out = BTreeMap::new();
            for (f, after) in fields {
                if let Some(bv) = b.get(f) {
                    let d = after.wrapping_sub(*bv);
                    if d != 0 || INTERFACE_ALWAYS_KEPT.contains(&f.as_str()) {
                        out.insert(f.clone(), d);
                    }
                }
            }
            interfaces.insert(name.clone(), out);
        }
        HostCounters { kernel, interfaces }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 479005287 0 0 0 0 0 479005287 465778571 1706985 0 0 0 0 0 0 0 0 465778571
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 456531 454253 2197 37282 3 359163627 385755868 169312 0 38048 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 114024912 1707392 2606211 118134540 2606211 0 0 0 0
";

    const NETSTAT: &str = "\
TcpExt: SyncookiesSent DelayedACKs TCPTimeouts TCPFastRetrans TCPRcvQDrop
TcpExt: 0 53737 41 6452 7
IpExt: InNoRoutes InOctets
IpExt: 0 8705216269548
";

    fn parsed(texts: &[&str]) -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for t in texts {
            parse_table(t, &mut m);
        }
        m
    }

    #[test]
    fn tables_are_read_as_table_dot_name() {
        let m = parsed(&[SNMP, NETSTAT]);
        assert_eq!(m["Udp.RcvbufErrors"], 2_606_211);
        assert_eq!(m["Udp.InErrors"], 2_606_211);
        assert_eq!(m["Tcp.RetransSegs"], 169_312);
        assert_eq!(m["Ip.OutDiscards"], 1_706_985);
        assert_eq!(m["TcpExt.TCPTimeouts"], 41);
        assert_eq!(m["TcpExt.TCPRcvQDrop"], 7);
        assert_eq!(m["IpExt.InOctets"], 8_705_216_269_548);
        // Settings and gauges are not counters.
        assert!(!m.contains_key("Tcp.MaxConn") && !m.contains_key("Tcp.CurrEstab"));
        assert!(!m.contains_key("Ip.Forwarding"));
    }

    #[test]
    fn odd_lines_are_skipped_without_losing_the_rest() {
        let text = "garbage\nUdp: InErrors RcvbufErrors\nUdp: 5 x\nTcp: RetransSegs\nTcp: 9\n";
        let m = parsed(&[text]);
        assert_eq!(m.get("Udp.InErrors"), Some(&5));
        assert_eq!(m.get("Udp.RcvbufErrors"), None);
        assert_eq!(m.get("Tcp.RetransSegs"), Some(&9));
    }

    #[test]
    fn net_dev_gives_each_interface_its_statistics() {
        let text = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 8705216 470000 1 2 0 0 0 0 8703864 469990 3 4 0 0 0 0
  eth0:  100 5 0 0 0 0 0 0 200 6 0 7 0 0 0 0
 short: 1 2 3
";
        let m = parse_net_dev(text);
        assert_eq!(m.len(), 2);
        let lo = &m["lo"];
        assert_eq!(lo["rx_bytes"], 8_705_216);
        assert_eq!(lo["rx_packets"], 470_000);
        assert_eq!(lo["rx_errors"], 1);
        assert_eq!(lo["rx_dropped"], 2);
        assert_eq!(lo["tx_bytes"], 8_703_864);
        assert_eq!(lo["tx_packets"], 469_990);
        assert_eq!(lo["tx_errors"], 3);
        assert_eq!(lo["tx_dropped"], 4);
        assert_eq!(m["eth0"]["tx_dropped"], 7);
    }

    #[test]
    fn a_delta_keeps_what_changed_and_the_loss_counters_always() {
        let before = Snapshot {
            kernel: parsed(&[SNMP, NETSTAT]),
            interfaces: BTreeMap::from([(
                "lo".to_owned(),
                BTreeMap::from([
                    ("rx_packets".to_owned(), 10),
                    ("rx_dropped".to_owned(), 0),
                    ("tx_bytes".to_owned(), 500),
                ]),
            )]),
        };
        let mut after = before.clone();
        *after.kernel.get_mut("Udp.RcvbufErrors").unwrap() += 300;
        *after.kernel.get_mut("Udp.InErrors").unwrap() += 300;
        *after.kernel.get_mut("Udp.InDatagrams").unwrap() += 1201;
        after.kernel.insert("Udp.NewThing".into(), 4);
        *after
            .interfaces
            .get_mut("lo")
            .unwrap()
            .get_mut("rx_packets")
            .unwrap() += 1501;
        after.interfaces.insert(
            "eth9".into(),
            BTreeMap::from([("rx_dropped".to_owned(), 3)]),
        );
        let d = after.delta(&before);
        assert_eq!(d.get("Udp.RcvbufErrors"), 300);
        assert_eq!(d.get("Udp.InErrors"), 300);
        assert_eq!(d.get("Udp.InDatagrams"), 1201);
        // Unchanged but loss-relevant: kept as 0.
        assert_eq!(d.kernel.get("Tcp.RetransSegs"), Some(&0));
        assert_eq!(d.kernel.get("TcpExt.TCPTimeouts"), Some(&0));
        // Unchanged and not loss-relevant: left out; present after only: left out.
        assert!(!d.kernel.contains_key("Tcp.InSegs"));
        assert!(!d.kernel.contains_key("Udp.NewThing"));
        let lo = &d.interfaces["lo"];
        assert_eq!(lo.get("rx_packets"), Some(&1501));
        assert_eq!(lo.get("rx_dropped"), Some(&0));
        assert!(!lo.contains_key("tx_bytes"));
        assert!(!d.interfaces.contains_key("eth9"));
        assert_eq!(d.interfaces_sum("rx_packets"), 1501);
    }
}
