//! What a row is about (a point, a stream, a direction's sum) and how a figure is read from it.
//!
//! A figure is the stream's own, the direction's, or the sum over the directions.

use crate::model::{DirectionTotal, PointResult, RunDocument, StreamPair};
use crate::stats::validity::Validity;

use super::Cell;

/// What a row is about: a point of a run, or one stream of a stream point.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub report: &'a RunDocument,
    /// The run's id in the results database it was saved in, if it was.
    pub run_id: Option<i64>,
    pub point: &'a PointResult,
    /// One stream's row (after its point's total row, when a point has several streams).
    pub stream: Option<&'a StreamPair>,
    /// One direction's sum over its streams (the stream table's sum rows).
    pub total: Option<&'a DirectionTotal>,
}

impl<'a> Row<'a> {
    /// A point's row.
    pub fn point(report: &'a RunDocument, run_id: Option<i64>, point: &'a PointResult) -> Self {
        Row {
            report,
            run_id,
            point,
            stream: None,
            total: None,
        }
    }

    /// The point's row, then, when it has more than one stream, a row for each stream.
    pub fn all_of(
        report: &'a RunDocument,
        run_id: Option<i64>,
        point: &'a PointResult,
    ) -> Vec<Row<'a>> {
        let total = Row::point(report, run_id, point);
        let mut rows = vec![total];
        if let Some(s) = point.stream.as_ref().filter(|s| s.streams.len() > 1) {
            rows.extend(s.streams.iter().map(|pair| Row {
                stream: Some(pair),
                ..total
            }));
        }
        rows
    }

    fn totals(&self) -> Option<&'a [DirectionTotal]> {
        self.point.stream.as_ref().map(|s| s.totals.as_slice())
    }

    /// A stream's own figure, a direction's, or the sum over the directions; empty for the
    /// latency patterns.
    pub(super) fn sum(
        &self,
        one: fn(&StreamPair) -> f64,
        total: fn(&DirectionTotal) -> f64,
    ) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .map(|t| t.iter().map(total).sum::<f64>())
                .into(),
        }
    }

    pub(super) fn count(
        &self,
        one: fn(&StreamPair) -> u64,
        total: fn(&DirectionTotal) -> u64,
    ) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .map(|t| t.iter().map(total).sum::<u64>())
                .into(),
        }
    }

    /// A figure that may be unknown (in any direction, for the sum over directions).
    pub(super) fn maybe<T: Into<Cell> + std::iter::Sum<T>>(
        &self,
        one: fn(&StreamPair) -> Option<T>,
        total: fn(&DirectionTotal) -> Option<T>,
    ) -> Cell {
        match (self.stream, self.total) {
            (Some(p), _) => one(p).into(),
            (None, Some(t)) => total(t).into(),
            (None, None) => self
                .totals()
                .and_then(|t| t.iter().map(total).sum::<Option<T>>())
                .into(),
        }
    }

    /// Datagrams sent and lost and the largest jitter: the stream's, the direction's, or over
    /// the directions when every direction counted its datagrams.
    pub(super) fn loss(&self) -> Option<(u64, u64, f64)> {
        let loss = match (self.stream, self.total) {
            (Some(p), _) => p.receiver.loss,
            (None, Some(t)) => t.loss,
            (None, None) => {
                return self.totals()?.iter().try_fold((0, 0, 0.0f64), |acc, d| {
                    d.loss
                        .map(|l| (acc.0 + l.sent, acc.1 + l.lost, acc.2.max(l.jitter_ns / 1e9)))
                })
            }
        };
        loss.map(|l| (l.sent, l.lost, l.jitter_ns / 1e9))
    }

    /// The verdict on the row's sender rate (stream rows only).
    pub(super) fn sender_validity(&self) -> Validity {
        match (self.stream, self.total) {
            (Some(p), _) => p.sender.validity.clone(),
            (None, Some(t)) => t.sender_validity(),
            (None, None) => Validity::default(),
        }
    }

    pub(super) fn receiver_validity(&self) -> Validity {
        match (self.stream, self.total) {
            (Some(p), _) => p.receiver.validity.clone(),
            (None, Some(t)) => t.receiver_validity(),
            (None, None) => Validity::default(),
        }
    }

    /// A figure of the whole point, which one stream's row leaves empty.
    pub(super) fn whole<T: Into<Cell>>(&self, f: impl Fn(&PointResult) -> T) -> Cell {
        match self.stream {
            Some(_) => Cell::Empty,
            None => f(self.point).into(),
        }
    }

    /// The verdict on the row's figures.
    pub(super) fn validity(&self) -> Validity {
        match self.stream {
            Some(p) => crate::stats::validity::all([
                ("sender".to_owned(), &p.sender.validity),
                ("receiver".to_owned(), &p.receiver.validity),
            ]),
            None => crate::model::point_validity(self.point),
        }
    }

    pub(super) fn latency<T: Into<Cell>>(&self, f: fn(&crate::model::LatencyResult) -> T) -> Cell {
        self.point.latency.as_ref().map(f).into()
    }
}
