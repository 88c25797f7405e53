//! The echo service's answers as HTTP/2 bodies made while they are sent: a Call asking for
//! n bytes gets exactly the message `wire::to_payload(&wire::filler(n), encoding, 0)` encodes
//! to, but made [`CHUNK`] application bytes at a time, each when hyper asks for the next (it
//! asks only once the stream has send capacity, that is, once the client's window takes it).
//! So an answer costs no allocation of its size, and a client that reads nothing makes the
//! server hold one chunk and what its window took, not the answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use prost::encoding::{encode_varint, encoded_len_varint};
use prost::Message;
use tonic::Status;

use super::wire::{self, filler_at, Payload};
use crate::model::vocab::Encoding;

/// Application bytes made per chunk: a whole number of every encoding's values.
const CHUNK: usize = 16 << 10;

/// Protobuf keys (field number << 3 | wire type 2, length-delimited) of what the answer uses.
const KEY_DATA: u8 = (2 << 3) | 2;
const KEY_DOUBLES: u8 = (3 << 3) | 2;
const KEY_RECORDS: u8 = (4 << 3) | 2;
const KEY_TAIL: u8 = (5 << 3) | 2;
/// `Doubles.v`, packed.
const KEY_PACKED: u8 = (1 << 3) | 2;

/// The encoded `Records.r` entries of the records in application bytes `start..start + len`
/// (a whole number of records), as prost encodes them inside the answer.
fn records_at(start: usize, len: usize) -> Bytes {
    match wire::to_payload(&filler_at(start, len), Encoding::Records, 0).body {
        Some(wire::Body::Records(r)) => Bytes::from(r.encode_to_vec()),
        _ => Bytes::new(),
    }
}

fn length_delimited(key: u8, len: usize, out: &mut BytesMut) {
    out.put_u8(key);
    encode_varint(len as u64, out);
}

fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// An answer's body: its fixed head, its values made chunk by chunk, its tail, then the gRPC
/// trailers.
pub(super) struct Answer {
    head: Option<Bytes>,
    encoding: Encoding,
    /// Application bytes of whole values, and how many of them are made.
    whole: usize,
    made: usize,
    tail: Option<Bytes>,
    done: bool,
}

impl Answer {
    /// The answer of `n` filler bytes in `encoding` (n > 0).
    pub(super) fn filler(encoding: Encoding, n: usize) -> Answer {
        let unit = encoding.unit();
        let whole = n / unit * unit;
        let rest = n - whole;
        // The length of the body's field (Data, Doubles or Records).
        let inner = match encoding {
            Encoding::Bytes => whole,
            Encoding::Doubles if whole > 0 => field_len(whole),
            Encoding::Doubles => 0,
            // The records' encoded length, made once to be counted (one chunk at a time).
            Encoding::Records => (0..whole)
                .step_by(CHUNK)
                .map(|at| records_at(at, CHUNK.min(whole - at)).len())
                .sum(),
        };
        let tail_len = if rest > 0 { field_len(rest) } else { 0 };
        let mut head = BytesMut::with_capacity(32);
        head.put_u8(0); // not compressed
        head.put_u32((field_len(inner) + tail_len) as u32);
        match encoding {
            Encoding::Bytes => length_delimited(KEY_DATA, inner, &mut head),
            Encoding::Doubles => {
                length_delimited(KEY_DOUBLES, inner, &mut head);
                if whole > 0 {
                    length_delimited(KEY_PACKED, whole, &mut head);
                }
            }
            Encoding::Records => length_delimited(KEY_RECORDS, inner, &mut head),
        }
        let tail = (rest > 0).then(|| {
            let mut t = BytesMut::with_capacity(rest + 8);
            length_delimited(KEY_TAIL, rest, &mut t);
            t.put_slice(&filler_at(whole, rest));
            t.freeze()
        });
        Answer {
            head: Some(head.freeze()),
            encoding,
            whole,
            made: 0,
            tail,
            done: false,
        }
    }

    /// The answer that is `p` itself, encoded.
    pub(super) fn message(p: &Payload) -> Answer {
        let len = p.encoded_len();
        let mut b = BytesMut::with_capacity(5 + len);
        b.put_u8(0);
        b.put_u32(len as u32);
        // Cannot fail: the buffer has room for the whole message.
        let _ = p.encode(&mut b);
        Answer {
            head: Some(b.freeze()),
            encoding: Encoding::Bytes,
            whole: 0,
            made: 0,
            tail: None,
            done: false,
        }
    }

    fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(h) = self.head.take() {
            return Some(h);
        }
        if self.made < self.whole {
            let (at, len) = (self.made, CHUNK.min(self.whole - self.made));
            self.made += len;
            return Some(match self.encoding {
                Encoding::Records => records_at(at, len),
                Encoding::Bytes | Encoding::Doubles => Bytes::from(filler_at(at, len)),
            });
        }
        self.tail.take()
    }
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let me = self.get_mut();
        if let Some(chunk) = me.next_chunk() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if me.done {
            return Poll::Ready(None);
        }
        me.done = true;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(mut a: Answer) -> (Vec<u8>, usize) {
        let (mut out, mut chunks) = (Vec::new(), 0);
        while let Some(c) = a.next_chunk() {
            assert!(c.len() <= 2 * CHUNK, "a chunk of {}", c.len());
            out.extend_from_slice(&c);
            chunks += 1;
        }
        (out, chunks)
    }

    fn framed(p: &Payload) -> Vec<u8> {
        let m = p.encode_to_vec();
        let mut f = vec![0];
        f.extend_from_slice(&(m.len() as u32).to_be_bytes());
        f.extend_from_slice(&m);
        f
    }

    /// Every size around the chunks and the encodings' units: the body made chunk by chunk
    /// is byte for byte the message prost encodes for the whole answer.
    #[test]
    fn an_answer_made_chunk_by_chunk_is_the_message_prost_encodes() {
        for enc in [Encoding::Bytes, Encoding::Doubles, Encoding::Records] {
            for n in [
                1usize,
                7,
                8,
                31,
                32,
                33,
                1000,
                CHUNK - 1,
                CHUNK,
                CHUNK + 1,
                3 * CHUNK + 17,
                300_001,
            ] {
                let want = framed(&wire::to_payload(&wire::filler(n), enc, 0));
                let (got, chunks) = body_of(Answer::filler(enc, n));
                assert_eq!(got.len(), want.len(), "{enc} {n}");
                assert!(got == want, "{enc} {n}: the bytes differ");
                assert!(chunks <= n / CHUNK + 3, "{enc} {n}: {chunks} chunks");
            }
        }
    }

    #[test]
    fn an_echo_is_the_request_itself() {
        let p = wire::to_payload(&wire::filler(100), Encoding::Doubles, 0);
        assert_eq!(body_of(Answer::message(&p)).0, framed(&p));
    }
}
