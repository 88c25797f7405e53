//! What a user asks of one run, typed: the centre that the command line, `compare-transports`,
//! `mpi`, `lab run` and (later) study files all build, and that [`crate::plan::build`] turns
//! into the points to measure.
//!
//! Every size, rate and duration is parsed once, where the request is made; nothing here holds
//! the text it came from. The defaults are those of `wirebench run` (a test checks that the
//! command line with nothing but a pattern gives [`Request::default`]), and serde round-trips a
//! request: durations as text ("10s"), rates as text ("100M"), sweeps as lists of values.

pub mod flow_spec;
pub mod load_spec;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pattern::{Arrivals, Direction, PatternKind, RcvLowat};
use crate::transport::{TransportConfig, TransportKind};
use crate::units::Rate;

/// One run: a pattern over a transport, at every point of its sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Request {
    pub pattern: PatternKind,
    pub transport: TransportKind,
    pub server: ServerTarget,
    /// This side's own transport settings (interface, certificates): never sent to the server.
    pub local: TransportConfig,
    pub sizes: Sizes,
    pub buffers: Buffers,
    pub stop: Stop,
    pub traffic: Traffic,
    pub socket: SocketSettings,
    pub fast: FastRequest,
    pub statistics: Statistics,
    pub timeouts: Timeouts,
    pub output: Output,
    /// `--trace`: capture the data connections' segments into a pcap file.
    pub trace: Option<crate::trace::TraceRequest>,
    /// `--load`: background load beside the measured test. Absent from requests without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadRequest>,
    /// `--compete`: flows sharing the path with a measured stream. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compete: Vec<flow_spec::FlowSpec>,
    /// `--plot`: with --load, the round trips over time idle and loaded; with --compete, each
    /// flow's rate and Jain's index over time; to this .svg or .png.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plot: Option<PathBuf>,
    /// Read the client host's network counters and CPU time around each point (where a lost
    /// message was lost, the client's CPU share). The agent turns it off: its runs share one
    /// host at the same time, so a host-wide counter would count the other runs' traffic as
    /// this one's (and reading them cost more than its 64-byte ping-pongs).
    pub host_counters: bool,
}

/// Background load beside the measured test, to the same server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    pub spec: load_spec::LoadSpec,
    /// pingpong, rr: measure under load only, not idle first.
    #[serde(default)]
    pub only: bool,
}

/// Where the server is and how to reach it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerTarget {
    /// HOST[:PORT]; None: a server started on loopback inside this process.
    pub to: Option<String>,
    /// The pre-shared key's file (None: WIREBENCH_PSK if set, else no key).
    pub psk_file: Option<PathBuf>,
    /// Data connections go to the control port too (TCP only: through a relay or proxy).
    pub one_port: bool,
}

/// Message sizes, bytes. `size` is the sweep's list (None: the pattern's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sizes {
    pub size: Option<Vec<u64>>,
    /// NetPIPE's perturbation: n-P and n+P are measured too.
    pub perturb: u64,
    pub request_size: Option<u64>,
    pub response_size: Option<u64>,
    pub write_size: Option<u64>,
    pub read_size: Option<u64>,
}

/// Socket buffers, bytes, each a sweep (None: not set; 0 in a list: kernel autotuning).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Buffers {
    /// Both buffers at once, swept together (one point per value); `sndbuf` and `rcvbuf`
    /// override it each.
    pub window: Option<Vec<u64>>,
    pub sndbuf: Option<Vec<u64>>,
    pub rcvbuf: Option<Vec<u64>>,
    pub server_sndbuf: Option<Vec<u64>>,
    pub server_rcvbuf: Option<Vec<u64>>,
}

/// When a point ends: whichever comes first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Stop {
    /// None: the pattern's default (1 s, a stream 10 s) unless bytes or iterations are given.
    #[serde(with = "crate::units::opt_duration_text")]
    pub duration: Option<Duration>,
    pub bytes: Option<u64>,
    pub iterations: Option<u64>,
    /// Warm-up iterations before the clocks start.
    pub warmup: u64,
}

impl Default for Stop {
    fn default() -> Stop {
        Stop {
            duration: None,
            bytes: None,
            iterations: None,
            warmup: 10,
        }
    }
}

/// The traffic's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Traffic {
    /// Parallel streams (stream) or connections (pingpong, rr).
    pub parallel: u32,
    pub direction: Direction,
    /// Each direction's total pacing rate.
    pub rate: Option<Rate>,
    /// Writes let out together at each pacing step.
    pub pace_burst: u32,
    /// rr: transactions in flight per connection.
    pub burst: u32,
    /// Stream: an interval report this often.
    #[serde(with = "crate::units::opt_duration_text")]
    pub interval: Option<Duration>,
    /// pingpong, rr: the client waits this long before each timed transaction.
    #[serde(with = "crate::units::opt_duration_text")]
    pub think: Option<Duration>,
    /// rr: open-loop arrivals (`--arrivals`, `--rate N/s`). Absent: closed loop, each request
    /// once the reply to the one before came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopRequest>,
    /// pingpong, rr: split each round trip into stages by the kernels' stamps
    /// (`--path-timing`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_timing: bool,
}

/// rr's requests on a schedule that does not wait for replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLoopRequest {
    /// `fixed` or `poisson` (`closed` is refused: it has no schedule).
    pub arrivals: Arrivals,
    /// The offered rates, requests per second over all connections: one point per rate.
    pub rates: Vec<u64>,
    /// Seed of the Poisson gaps; None: one drawn at random when the run is planned (the run
    /// document records it either way).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Most requests unanswered at once per connection.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
}

fn default_max_in_flight() -> u32 {
    crate::pattern::openloop::DEFAULT_MAX_IN_FLIGHT
}

impl Default for Traffic {
    fn default() -> Traffic {
        Traffic {
            parallel: 1,
            direction: Direction::Forward,
            rate: None,
            pace_burst: 1,
            burst: 1,
            interval: None,
            think: None,
            open_loop: None,
            path_timing: false,
        }
    }
}

/// Socket options and thread placement on both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocketSettings {
    pub nodelay: bool,
    /// `--nagle`: keep Nagle's algorithm on where wirebench would turn it off by itself (a
    /// bulk TCP stream under BBR, see `plan::automatic_nodelay`). A study axis setting `nodelay` to
    /// false sets it too.
    pub nagle: bool,
    /// TCP congestion control (each checked against the kernel's list when planned): none,
    /// one for every point, or several, a sweep axis (one point per algorithm). Written as
    /// null, a name, or a list of names; a request of before the list reads as it did.
    #[serde(with = "cc_list")]
    pub cc: Vec<String>,
    pub mss: Option<u32>,
    /// Busy-poll receives instead of sleeping in the kernel.
    pub spin: bool,
    pub cpu: Vec<usize>,
    pub server_cpu: Vec<usize>,
}

/// `--cc` in JSON: null (none), "name" (one) or ["a", "b"] (a sweep). One name is written as
/// a string, as before the sweep existed, so a request with one algorithm reads the same
/// everywhere.
mod cc_list {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Form {
        One(String),
        Many(Vec<String>),
    }

    pub fn serialize<S: Serializer>(names: &[String], s: S) -> Result<S::Ok, S::Error> {
        match names {
            [] => s.serialize_none(),
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Option::<Form>::deserialize(d)? {
            None => Vec::new(),
            Some(Form::One(name)) => vec![name],
            Some(Form::Many(names)) => names,
        })
    }
}

/// Fast paths as asked (the plan fills in the defaults: batching for UDP streams, SO_RCVLOWAT
/// "auto").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FastRequest {
    pub zerocopy: bool,
    pub sendfile: bool,
    pub skip_rx_copy: bool,
    pub batch: Option<u32>,
    pub gso: bool,
    pub gro: bool,
    pub busy_poll_us: Option<u32>,
    pub rcvlowat: Option<RcvLowat>,
}

/// How results are summarised and how often points are repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Statistics {
    /// Confidence level of intervals, percent: 90, 95 or 99.
    pub confidence: u32,
    pub repeat: u32,
    /// Repeat until the headline's interval half-width is below this share of the mean
    /// (0.02 = 2%).
    pub until_ci: Option<f64>,
    pub max_repeat: u32,
}

impl Default for Statistics {
    fn default() -> Statistics {
        Statistics {
            confidence: 95,
            repeat: 1,
            until_ci: None,
            max_repeat: 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timeouts {
    /// Every data send and receive, and connection setup.
    #[serde(with = "crate::units::duration_text")]
    pub io: Duration,
    /// Unreliable transports: a response not back in this time is lost.
    #[serde(with = "crate::units::duration_text")]
    pub loss: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            io: Duration::from_secs(10),
            loss: Duration::from_secs(1),
        }
    }
}

/// What the run prints on stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    #[default]
    Table,
    Json,
    Csv,
    JsonStream,
    /// The table as GitHub-flavoured Markdown, printed whole at the end of the run.
    Markdown,
}

/// Where the results go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Output {
    pub format: Format,
    /// A name kept with the run.
    pub label: Option<String>,
    /// Also write the JSON document here.
    pub file: Option<PathBuf>,
    /// Save the run in the results database.
    pub save: bool,
    /// The database (None: the default path).
    pub db: Option<PathBuf>,
    /// The table shows both hosts' CPU shares under each point.
    pub host_cpu: bool,
    /// `--force`: the files this run writes (`file`, the trace, the plot) may replace regular
    /// files that exist (see [`crate::outfile`]).
    pub force: bool,
    /// `--columns`: CSV column names; the CSV has these in this order, the table the columns
    /// that show them in its own order. None: every column. Absent from requests without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
}

impl Default for Output {
    fn default() -> Output {
        Output {
            format: Format::Table,
            label: None,
            file: None,
            save: true,
            db: None,
            host_cpu: false,
            force: false,
            columns: None,
        }
    }
}

impl Default for Request {
    fn default() -> Request {
        Request {
            pattern: PatternKind::Pingpong,
            transport: TransportKind::Tcp,
            server: ServerTarget::default(),
            local: TransportConfig::default(),
            sizes: Sizes::default(),
            buffers: Buffers::default(),
            stop: Stop::default(),
            traffic: Traffic::default(),
            socket: SocketSettings::default(),
            fast: FastRequest::default(),
            statistics: Statistics::default(),
            timeouts: Timeouts::default(),
            output: Output::default(),
            trace: None,
            load: None,
            compete: Vec::new(),
            plot: None,
            host_counters: true,
        }
    }
}

impl Request {
    /// A request for `pattern` over `transport` with every other setting at its default.
    pub fn new(pattern: PatternKind, transport: TransportKind) -> Request {
        Request {
            pattern,
            transport,
            ..Request::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request survives JSON both ways, typed values and all, and a document that names an
    /// unknown setting is refused rather than ignored.
    #[test]
    fn a_request_round_trips_through_json() {
        let mut r = Request::new(PatternKind::Stream, TransportKind::Udp);
        r.sizes.size = Some(vec![64, 1400]);
        r.buffers.window = Some(vec![0, 65536]);
        r.stop.duration = Some(Duration::from_millis(1500));
        r.traffic.rate = Some(crate::units::parse_rate("1.5G").unwrap());
        r.traffic.direction = Direction::Reverse;
        r.traffic.interval = Some(Duration::from_millis(250));
        r.fast.rcvlowat = Some(RcvLowat::Bytes(4096));
        r.statistics.until_ci = Some(0.02);
        r.output.format = Format::JsonStream;
        r.output.label = Some("after \"the\" update".into());
        r.local.iface = Some("veth0".into());
        r.socket.cc = vec!["cubic".into(), "reno".into()];
        r.load = Some(LoadRequest {
            spec: "udp:30M".parse().unwrap(),
            only: true,
        });
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""cc":["cubic","reno"]"#), "{json}");
        assert!(json.contains("\"duration\":\"1500ms\""), "{json}");
        assert!(json.contains("\"rate\":\"1.5G\""), "{json}");
        assert!(json.contains("\"transport\":\"udp\""), "{json}");
        assert!(
            json.contains(r#""load":{"spec":"udp:30M","only":true}"#),
            "{json}"
        );
        // Without --load the document is what it was before the option existed.
        let plain = serde_json::to_string(&Request::default()).unwrap();
        assert!(!plain.contains("load"), "{plain}");
        let back: Request = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);

        let partial: Request =
            serde_json::from_str(r#"{"pattern": "rr", "stop": {"iterations": 5}}"#).unwrap();
        assert_eq!(partial.pattern, PatternKind::Rr);
        assert_eq!(partial.stop.iterations, Some(5));
        assert_eq!(
            partial.stop.warmup, 10,
            "unnamed settings keep their defaults"
        );
        // --cc as requests held it before it took a list: a name or null; and one name is
        // still written as a name.
        for (old, cc) in [
            (r#"{"socket": {"cc": "reno"}}"#, vec!["reno".to_owned()]),
            (r#"{"socket": {"cc": null}}"#, vec![]),
            (r#"{"socket": {}}"#, vec![]),
        ] {
            let r: Request = serde_json::from_str(old).unwrap();
            assert_eq!(r.socket.cc, cc, "{old}");
        }
        let mut one = Request::default();
        one.socket.cc = vec!["bbr".into()];
        let json = serde_json::to_string(&one).unwrap();
        assert!(json.contains(r#""cc":"bbr""#), "{json}");

        let e = serde_json::from_str::<Request>(r#"{"stop": {"seconds": 5}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `seconds`"), "{e}");
    }
}
