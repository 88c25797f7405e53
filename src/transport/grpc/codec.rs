//! prost's encoding and decoding inside tonic, each message timed: a [`tonic::codec::Codec`]
//! like tonic-prost's, whose encoder and decoder read the clock around prost's work alone.
//!
//! tonic calls the decoder once a whole message is buffered and the encoder with a buffer to
//! grow, so the time is the serialisation's, not the network's. The times go into a
//! histogram of atomic counters made once per connection: recording takes no lock and
//! allocates nothing, whichever task of the runtime encodes.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use crate::model::rpc::CodecTime;

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: the values below SUB exactly, then SUB per power of two up to 2^64.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// A histogram of nanoseconds that threads record into without a lock.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The middle of bucket `i`'s values.
fn value(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let sub = i % SUB;
    let width = 1u64 << (e - u64::from(SUB_BITS));
    ((SUB + sub) << (e - u64::from(SUB_BITS))).saturating_add(width / 2)
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets everything recorded (between a point's warm-up and its timed phase).
    pub(crate) fn clear(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.sum.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }

    /// Count, mean and percentiles of what was recorded; None when nothing was.
    pub(crate) fn summary(&self) -> Option<CodecTime> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return None;
        }
        let at = |q: f64| {
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return value(i);
                }
            }
            value(BUCKETS - 1)
        };
        Some(CodecTime {
            count,
            mean_ns: self.sum.load(Ordering::Relaxed) as f64 / count as f64,
            p50_ns: at(0.5),
            p99_ns: at(0.99),
        })
    }
}

/// One connection's encode and decode times.
pub(crate) struct Times {
    pub(crate) encode: Histogram,
    pub(crate) decode: Histogram,
}

impl Times {
    pub(crate) fn new() -> Arc<Times> {
        Arc::new(Times {
            encode: Histogram::new(),
            decode: Histogram::new(),
        })
    }
}

/// prost's codec, timed into `times`. `E` is what this end sends, `D` what it receives.
pub(crate) struct TimedCodec<E, D> {
    times: Arc<Times>,
    _pd: PhantomData<fn(E) -> D>,
}

impl<E, D> TimedCodec<E, D> {
    pub(crate) fn new(times: &Arc<Times>) -> Self {
        TimedCodec {
            times: times.clone(),
            _pd: PhantomData,
        }
    }
}

impl<E, D> Clone for TimedCodec<E, D> {
    fn clone(&self) -> Self {
        TimedCodec::new(&self.times)
    }
}

impl<E, D> Codec for TimedCodec<E, D>
where
    E: prost::Message + Send + 'static,
    D: prost::Message + Default + Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = TimedEncoder<E>;
    type Decoder = TimedDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        TimedEncoder {
            times: self.times.clone(),
            _pd: PhantomData,
        }
    }
    fn decoder(&mut self) -> Self::Decoder {
        TimedDecoder {
            times: self.times.clone(),
            _pd: PhantomData,
        }
    }
}

pub(crate) struct TimedEncoder<E> {
    times: Arc<Times>,
    _pd: PhantomData<fn(E)>,
}

impl<E: prost::Message> Encoder for TimedEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let t0 = Instant::now();
        let done = item.encode(dst);
        self.times
            .encode
            .record(crate::units::whole_ns(t0.elapsed()));
        done.map_err(|e| Status::internal(format!("encoding a message: {e}")))
    }
}

pub(crate) struct TimedDecoder<D> {
    times: Arc<Times>,
    _pd: PhantomData<fn() -> D>,
}

impl<D: prost::Message + Default> Decoder for TimedDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        let t0 = Instant::now();
        let item = D::decode(src);
        self.times
            .decode
            .record(crate::units::whole_ns(t0.elapsed()));
        item.map(Some)
            .map_err(|e| Status::internal(format!("decoding a message: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_middle_is_within_one_32nd() {
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 3, u64::MAX]) {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v}");
            let m = value(i);
            let err = m.abs_diff(v) as f64;
            assert!(
                err <= (v as f64 / 32.0).max(0.5),
                "{v}: bucket {i} middle {m}"
            );
        }
    }

    #[test]
    fn summary_counts_exactly_and_orders_percentiles() {
        let h = Histogram::new();
        assert_eq!(h.summary(), None);
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        let s = h.summary().unwrap();
        assert_eq!(s.count, 100);
        assert_eq!(s.mean_ns, 50_500.0);
        assert!(s.p50_ns.abs_diff(50_000) <= 50_000 / 32, "{}", s.p50_ns);
        assert!(s.p99_ns.abs_diff(99_000) <= 99_000 / 32, "{}", s.p99_ns);
        h.clear();
        assert_eq!(h.summary(), None);
    }
}
