//! Which columns each table (ping-pong, request/response, stream) lays out, and how wide at
//! least: with the renderer's two spaces between columns, the widths the table had when it
//! padded its cells by hand, so that it reads as it did.

use super::{
    Column, Judged, Show, TableColumn, ACHIEVED_PER_S, ACKED_BITS, BOUND_WAITS, BYTES_RECEIVED,
    BYTES_SENT, CLIENT_US_PER_KIB, DATAGRAMS_LOST, DIRECTION, JITTER, LOSS_RATIO,
    LOST_TRANSACTIONS, OFFERED_PER_S, RECEIVER_BITS, REQUESTS_OUTSTANDING, REQUEST_SIZE,
    RESPONSE_SIZE, RETRANSMITS, RTT_CI, RTT_MAX, RTT_MEAN, RTT_MIN, RTT_P50, RTT_P99, RTT_P999,
    RTT_SAMPLES, SENDER_BITS, SERVER_US_PER_KIB, SERVICE_P50, SERVICE_P99, SETUP_MEAN, SIZE,
    STREAM, THINK_CORRECTED_TPS, THROUGHPUT, TRANSACTIONS, TRANSACTIONS_PER_S,
};

const fn col(
    header: &'static str,
    min_width: usize,
    column: Column,
    show: Show,
    judged: Judged,
) -> TableColumn {
    TableColumn {
        header,
        min_width,
        column,
        show,
        judged,
    }
}

/// Ping-pong's table, the swept buffer columns after the first.
pub const PINGPONG: &[TableColumn] = &[
    col("size(B)", 9, SIZE, Show::Plain, Judged::No),
    col("samples", 8, RTT_SAMPLES, Show::Plain, Judged::No),
    col("mean(us)", 10, RTT_MEAN, Show::HalfUs, Judged::Latency),
    col("±CI(us)", 8, RTT_CI, Show::HalfUs, Judged::Latency),
    col("min(us)", 8, RTT_MIN, Show::HalfUs, Judged::No),
    col("p50(us)", 8, RTT_P50, Show::HalfUs, Judged::No),
    col("p99(us)", 8, RTT_P99, Show::HalfUs, Judged::P99),
    col("max(us)", 8, RTT_MAX, Show::HalfUs, Judged::No),
    col("Mbit/s", 10, THROUGHPUT, Show::Mbit, Judged::Latency),
];

/// rr's and crr's table, the swept buffer columns after the first two.
pub const RR: &[TableColumn] = &[
    col("req(B)", 9, REQUEST_SIZE, Show::Plain, Judged::No),
    col("resp(B)", 8, RESPONSE_SIZE, Show::Plain, Judged::No),
    col("txns", 8, TRANSACTIONS, Show::Plain, Judged::No),
    col(
        "txn/s",
        10,
        TRANSACTIONS_PER_S,
        Show::OneDecimal,
        Judged::Latency,
    ),
    col("mean(us)", 9, RTT_MEAN, Show::Us, Judged::Latency),
    col("±CI(us)", 8, RTT_CI, Show::Us, Judged::Latency),
    col("p50(us)", 8, RTT_P50, Show::Us, Judged::No),
    col("p99(us)", 8, RTT_P99, Show::Us, Judged::P99),
    col("max(us)", 8, RTT_MAX, Show::Us, Judged::No),
    col("Mbit/s", 8, THROUGHPUT, Show::Mbit, Judged::Latency),
];

/// rr's table with open-loop arrivals, a QPS-against-latency curve: offered against achieved
/// rate, the latency from the scheduled send (p50, p99, p99.9, max) and the service time from
/// the actual send; the swept buffer columns after the first two.
pub const OPEN_LOOP: &[TableColumn] = &[
    col("req(B)", 9, REQUEST_SIZE, Show::Plain, Judged::No),
    col("resp(B)", 8, RESPONSE_SIZE, Show::Plain, Judged::No),
    col("offered/s", 10, OFFERED_PER_S, Show::NoDecimals, Judged::No),
    col(
        "achieved/s",
        11,
        ACHIEVED_PER_S,
        Show::NoDecimals,
        Judged::Latency,
    ),
    col("replies", 8, TRANSACTIONS, Show::Plain, Judged::No),
    col("outst", 6, REQUESTS_OUTSTANDING, Show::Plain, Judged::No),
    col("p50(us)", 8, RTT_P50, Show::Us, Judged::No),
    col("p99(us)", 8, RTT_P99, Show::Us, Judged::P99),
    col("p99.9(us)", 9, RTT_P999, Show::Us, Judged::P999),
    col("max(us)", 8, RTT_MAX, Show::Us, Judged::No),
    col("svc50(us)", 9, SERVICE_P50, Show::Us, Judged::No),
    col("svc99(us)", 9, SERVICE_P99, Show::Us, Judged::No),
    col("waits", 6, BOUND_WAITS, Show::Plain, Judged::No),
];

/// The stream table's first columns, the swept buffer columns after the first; then the
/// acknowledged rate where the sender's kernel keeps TCP_INFO, and [`STREAM_RATES`].
pub const STREAM_TABLE: &[TableColumn] = &[
    col("size(B)", 9, SIZE, Show::Plain, Judged::No),
    col("stream", 6, STREAM, Show::Stream, Judged::No),
    col("direction", 16, DIRECTION, Show::Plain, Judged::No),
    col("sender", 11, SENDER_BITS, Show::Mbit, Judged::Sender),
];
pub const STREAM_ACKED: TableColumn = col("acked", 11, ACKED_BITS, Show::Mbit, Judged::No);
pub const STREAM_RATES: &[TableColumn] = &[
    col("receiver", 11, RECEIVER_BITS, Show::Mbit, Judged::Receiver),
    col("sent(B)", 13, BYTES_SENT, Show::Plain, Judged::No),
    col("received(B)", 13, BYTES_RECEIVED, Show::Plain, Judged::No),
];
/// Transports that may lose datagrams.
pub const STREAM_LOSS: &[TableColumn] = &[
    col("lost(dgr)", 9, DATAGRAMS_LOST, Show::Plain, Judged::No),
    col("loss(%)", 7, LOSS_RATIO, Show::Percent, Judged::No),
    col("jitter(ms)", 9, JITTER, Show::Ms, Judged::No),
];
/// Reliable transports.
pub const STREAM_RETRANSMITS: TableColumn = col("retr", 6, RETRANSMITS, Show::Plain, Judged::No);
/// Figures of the whole point, on its sum rows only.
pub const STREAM_CPU: &[TableColumn] = &[
    col(
        "cpu_cli",
        8,
        CLIENT_US_PER_KIB,
        Show::ThreeDecimals,
        Judged::No,
    ),
    col(
        "cpu_srv",
        8,
        SERVER_US_PER_KIB,
        Show::ThreeDecimals,
        Judged::No,
    ),
];

/// crr's last column.
pub const SETUP: TableColumn = col("setup(us)", 10, SETUP_MEAN, Show::Us, Judged::No);
/// The last column of ping-pong and rr over a transport that may lose messages.
pub const LOST: TableColumn = col("lost", 6, LOST_TRANSACTIONS, Show::Plain, Judged::No);
/// With --think: the rate without the waits, beside `txn/s` over the raw time.
pub const THINK_TPS: TableColumn = col(
    "txn/s-think",
    11,
    THINK_CORRECTED_TPS,
    Show::OneDecimal,
    Judged::Latency,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::columns::CSV;

    #[test]
    fn every_table_column_is_a_csv_column() {
        let csv: Vec<&str> = CSV.iter().map(|c| c.name).collect();
        let stream = STREAM_TABLE
            .iter()
            .chain(STREAM_RATES)
            .chain(STREAM_LOSS)
            .chain(STREAM_CPU)
            .chain([&STREAM_ACKED, &STREAM_RETRANSMITS]);
        for t in PINGPONG
            .iter()
            .chain(RR)
            .chain(OPEN_LOOP)
            .chain([&SETUP, &LOST])
            .chain(stream)
        {
            assert!(csv.contains(&t.column.name), "{}", t.column.name);
        }
        let mut names = csv.clone();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), csv.len(), "a column twice");
    }
}
