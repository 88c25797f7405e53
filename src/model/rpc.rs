//! An RPC's serialisation, timed apart from its calls: how long encoding a message into its
//! wire form and decoding one from it took, on each end.

use serde::{Deserialize, Serialize};

use super::vocab::Encoding;

/// The times of one kind of codec work (encode or decode) on one end, per message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodecTime {
    /// Messages timed.
    pub count: u64,
    pub mean_ns: f64,
    /// Median and 99th percentile, from a histogram of 16 buckets per power of two: each
    /// within 1/32 of the true value.
    pub p50_ns: u64,
    pub p99_ns: u64,
}

/// One end's serialisation over a point: every message it encoded (requests on the client,
/// responses on the server) and every one it decoded, HTTP/2 framing and the call's own
/// bookkeeping excluded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Serialisation {
    pub encoding: Encoding,
    /// Null when this end encoded no message.
    pub encode: Option<CodecTime>,
    /// Null when this end decoded no message.
    pub decode: Option<CodecTime>,
}

/// A point's serialisation (grpc): each end's times per data connection, and the share of a
/// call's round trip they took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RpcResult {
    pub encoding: Encoding,
    /// The client's, per data connection in connection order (last run). Counts include the
    /// warm-up's messages.
    pub client: Vec<Serialisation>,
    /// The server's, per data connection (last run); empty when no wirebench server answered
    /// (`--grpc-endpoint`).
    pub server: Vec<Serialisation>,
    /// pingpong, rr: the mean times of a call's four codec steps (client encode, server
    /// decode, server encode, client decode), each averaged over all connections' messages,
    /// summed, over the mean round trip: the share of a call spent serialising. Null without
    /// the server's times or a round trip.
    pub share_of_rtt: Option<f64>,
}

/// Count and count-weighted mean of one codec step over connections.
pub fn merged<'a>(
    sides: impl IntoIterator<Item = &'a Serialisation>,
    step: fn(&Serialisation) -> Option<CodecTime>,
) -> Option<(u64, f64)> {
    let (mut count, mut sum) = (0u64, 0.0);
    for t in sides.into_iter().filter_map(step) {
        count += t.count;
        sum += t.mean_ns * t.count as f64;
    }
    (count > 0).then(|| (count, sum / count as f64))
}

impl RpcResult {
    pub fn new(
        client: Vec<Serialisation>,
        server: Vec<Serialisation>,
        mean_rtt_ns: Option<f64>,
    ) -> Option<RpcResult> {
        let encoding = client.first().or(server.first())?.encoding;
        let share_of_rtt = match mean_rtt_ns {
            Some(rtt) if rtt > 0.0 && !server.is_empty() => {
                let steps = [
                    merged(&client, |s| s.encode),
                    merged(&server, |s| s.decode),
                    merged(&server, |s| s.encode),
                    merged(&client, |s| s.decode),
                ];
                steps
                    .iter()
                    .map(|s| s.map(|(_, mean)| mean))
                    .sum::<Option<f64>>()
                    .map(|ns| ns / rtt)
            }
            _ => None,
        };
        Some(RpcResult {
            encoding,
            client,
            server,
            share_of_rtt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(encode: (u64, f64), decode: (u64, f64)) -> Serialisation {
        let t = |(count, mean_ns): (u64, f64)| CodecTime {
            count,
            mean_ns,
            p50_ns: mean_ns as u64,
            p99_ns: mean_ns as u64,
        };
        Serialisation {
            encoding: Encoding::Doubles,
            encode: Some(t(encode)),
            decode: Some(t(decode)),
        }
    }

    #[test]
    fn the_share_sums_the_four_steps_weighted_by_messages_over_the_round_trip() {
        let client = vec![
            side((10, 100.0), (10, 200.0)),
            side((30, 300.0), (30, 400.0)),
        ];
        let server = vec![side((40, 50.0), (40, 150.0))];
        let r = RpcResult::new(client, server, Some(10_000.0)).unwrap();
        assert_eq!(r.encoding, Encoding::Doubles);
        // client encode (100*10+300*30)/40 = 250, decode (200*10+400*30)/40 = 350; server 50+150.
        assert_eq!(
            r.share_of_rtt,
            Some((250.0 + 350.0 + 50.0 + 150.0) / 10_000.0)
        );
        let alone = RpcResult::new(vec![side((1, 1.0), (1, 1.0))], Vec::new(), Some(10.0));
        assert_eq!(alone.unwrap().share_of_rtt, None);
        assert_eq!(RpcResult::new(Vec::new(), Vec::new(), None), None);
    }
}
