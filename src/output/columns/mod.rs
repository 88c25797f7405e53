//! A point's figures, each described once: its CSV name (with its unit) and how to read it.
//!
//! The CSV is these columns in order; the ping-pong and request/response tables lay out some
//! of them ([`TableColumn`]) in the units a reader scans, so the table and the CSV read every
//! figure through the same function and can not disagree on which number it is.
//!
//! A file per job: the value of a cell (`cell`), what a row is about and how a figure is read
//! from it (`row`), the figures the CSV and the tables share (`column`), the CSV's columns in
//! order (`csv_columns`), how a table shows a cell (`table_column`) and which columns each
//! table lays out (`tables`).

mod cell;
mod column;
mod csv_columns;
mod row;
mod table_column;
mod tables;

pub use cell::Cell;
pub use column::{
    Column, ACHIEVED_PER_S, ACKED_BITS, ARRIVALS, BOUND_WAITS, BYTES_RECEIVED, BYTES_SENT,
    CLIENT_US_PER_KIB, DATAGRAMS_LOST, DIRECTION, JITTER, LOSS_RATIO, LOST_TRANSACTIONS,
    OFFERED_PER_S, OVERLOAD, RECEIVER_BITS, REQUESTS_OUTSTANDING, REQUESTS_SCHEDULED,
    REQUESTS_SENT, REQUESTS_UNSENT, REQUEST_SIZE, RESPONSE_SIZE, RETRANSMITS, RTT_CI, RTT_MAX,
    RTT_MEAN, RTT_MIN, RTT_P50, RTT_P99, RTT_P999, RTT_SAMPLES, SENDER_BITS, SERVER_US_PER_KIB,
    SERVICE_P50, SERVICE_P99, SETUP_MEAN, SIZE, STREAM, THINK_CORRECTED_TPS, THINK_WAITED,
    THROUGHPUT, TRANSACTIONS, TRANSACTIONS_PER_S,
};
pub use csv_columns::{known, CSV};
pub use row::Row;
pub use table_column::{Judged, Show, TableColumn};
pub use tables::{
    LOST, OPEN_LOOP, PINGPONG, RR, SETUP, STREAM_ACKED, STREAM_CPU, STREAM_LOSS, STREAM_RATES,
    STREAM_RETRANSMITS, STREAM_TABLE, THINK_TPS,
};
