//! How a table shows a column's value: in a reader's unit, marked "!" when not valid.

use crate::stats::validity::Validity;
use crate::units::{mbit, us};

use super::{Cell, Column, Row};

/// How a table shows a column's value.
#[derive(Clone, Copy)]
pub enum Show {
    /// As the CSV does (counts, sizes).
    Plain,
    /// Nanoseconds as microseconds, 2 decimals.
    Us,
    /// Half of a round trip, in microseconds: ping-pong's one-way time.
    HalfUs,
    /// Bit/s as Mbit/s, 2 decimals.
    Mbit,
    /// One decimal (transactions per second).
    OneDecimal,
    /// Rounded to a whole number (requests per second).
    NoDecimals,
    /// Three decimals (CPU service demand).
    ThreeDecimals,
    /// A ratio as a percentage, 3 decimals.
    Percent,
    /// Seconds as milliseconds, 4 decimals (jitter).
    Ms,
    /// A stream's number, or "sum" for a sum over several.
    Stream,
}

/// Which verdict marks a table cell with "!" when its figure is not a valid measurement.
#[derive(Clone, Copy, PartialEq)]
pub enum Judged {
    No,
    /// The point's latency figures.
    Latency,
    /// The row's sender rate (stream tables).
    Sender,
    /// The row's receiver rate (stream tables).
    Receiver,
    /// The point's p99, against its sample floor (10 / (1 - p): 1000 samples).
    P99,
    /// The point's p99.9, against its sample floor (10 000 samples).
    P999,
}

/// A column of the run tables: a [`Column`] shown in a unit for reading, right-aligned and at
/// least `min_width` wide (as wide as its usual cells, so that a live table seldom has to
/// widen it and print its header again).
pub struct TableColumn {
    pub header: &'static str,
    pub min_width: usize,
    pub column: Column,
    pub show: Show,
    pub judged: Judged,
}

impl TableColumn {
    /// The cell's text, not yet aligned; "-" where the value is unknown. `latency` is the
    /// verdict on the point's latency figures.
    pub fn text(&self, row: &Row, latency: &Validity) -> String {
        let cell = (self.column.get)(row);
        let Some(x) = cell.number() else {
            return match (cell, self.show) {
                (Cell::Empty, _) => "-".into(),
                (Cell::Text(t), Show::Stream) if t == "total" => "sum".into(),
                (other, _) => other.csv(),
            };
        };
        let shown = match self.show {
            Show::Plain | Show::Stream => cell.csv(),
            Show::Us => us(x),
            Show::HalfUs => us(x / 2.0),
            Show::Mbit => mbit(x),
            Show::OneDecimal => format!("{x:.1}"),
            Show::NoDecimals => format!("{x:.0}"),
            Show::ThreeDecimals => format!("{x:.3}"),
            Show::Percent => format!("{:.3}", x * 100.0),
            Show::Ms => format!("{:.4}", x * 1e3),
        };
        let mark = match self.judged {
            Judged::No => "",
            Judged::Latency => latency.mark(),
            Judged::Sender => row.sender_validity().mark(),
            Judged::Receiver => row.receiver_validity().mark(),
            Judged::P99 => row
                .point
                .latency
                .as_ref()
                .map_or("", |l| l.percentile_validity("p99").mark()),
            Judged::P999 => row
                .point
                .latency
                .as_ref()
                .map_or("", |l| l.percentile_validity("p99.9").mark()),
        };
        format!("{shown}{mark}")
    }
}
