//! The messages of `wirebench.v1.Echo`, as proto/wirebench_echo.proto declares them, written
//! with prost's derive (no protoc), and how a pattern's message of n application bytes
//! becomes one of them and back.
//!
//! A message of n bytes carries n / unit values of its encoding (1 byte for `bytes`, 8 for
//! `doubles`, 32 for `records`); the n mod unit bytes left over travel as raw bytes in
//! `tail`, so that every byte a pattern counts was sent and none was invented.

use bytes::{BufMut, Bytes, BytesMut};

use crate::model::vocab::Encoding;

/// The methods' paths (`/package.Service/Method`).
pub(super) const CALL: &str = "/wirebench.v1.Echo/Call";
pub(super) const UPLOAD: &str = "/wirebench.v1.Echo/Upload";
pub(super) const DOWNLOAD: &str = "/wirebench.v1.Echo/Download";

/// Bytes of a record's `tag`: a record is 4 + 8 + 8 + 12 = 32 application bytes.
const TAG_LEN: usize = 12;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// Call: the size of the answer asked for, application bytes; 0 (or absent): an echo.
    #[prost(int64, tag = "1")]
    pub response_size: i64,
    #[prost(oneof = "Body", tags = "2, 3, 4")]
    pub body: Option<Body>,
    /// The bytes of the message that make no whole value of its encoding.
    #[prost(bytes = "bytes", tag = "5")]
    pub tail: Bytes,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Body {
    #[prost(bytes = "bytes", tag = "2")]
    Data(Bytes),
    #[prost(message, tag = "3")]
    Doubles(Doubles),
    #[prost(message, tag = "4")]
    Records(Records),
}

/// XDR's array of doubles: one length-delimited field of 8-byte values (packed).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Doubles {
    #[prost(double, repeated, tag = "1")]
    pub v: Vec<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Records {
    #[prost(message, repeated, tag = "1")]
    pub r: Vec<Record>,
}

/// Many small fields: a varint, a double, a fixed64 and a short string.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Record {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(double, tag = "2")]
    pub value: f64,
    #[prost(fixed64, tag = "3")]
    pub stamp: u64,
    #[prost(string, tag = "4")]
    pub tag: String,
}

/// Upload's answer: what the server received in the stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UploadSummary {
    #[prost(int64, tag = "1")]
    pub messages: i64,
    /// Application bytes (as [`app_len`] counts them).
    #[prost(int64, tag = "2")]
    pub bytes: i64,
}

/// Bytes `start..start + len` of a fixed non-zero pattern (the patterns' own payload), for
/// an answer of a size asked for, made a piece at a time.
pub fn filler_at(start: usize, len: usize) -> Vec<u8> {
    (start..start + len)
        .map(|i| (i % 251) as u8 ^ 0x5a)
        .collect()
}

/// The pattern's first `n` bytes.
#[cfg(test)]
pub fn filler(n: usize) -> Vec<u8> {
    filler_at(0, n)
}

/// The message that carries `app` in `encoding`, asking for `response_size` bytes back.
pub fn to_payload(app: &[u8], encoding: Encoding, response_size: i64) -> Payload {
    let unit = encoding.unit();
    let whole = app.len() / unit * unit;
    let (values, tail) = app.split_at(whole);
    let body = match encoding {
        Encoding::Bytes => Body::Data(Bytes::copy_from_slice(values)),
        Encoding::Doubles => Body::Doubles(Doubles {
            v: values
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(eight(c)))
                .collect(),
        }),
        Encoding::Records => Body::Records(Records {
            r: values.chunks_exact(32).map(record_of).collect(),
        }),
    };
    Payload {
        response_size,
        body: Some(body),
        tail: Bytes::copy_from_slice(tail),
    }
}

fn eight(c: &[u8]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b.copy_from_slice(&c[..8]);
    b
}

/// A record from 32 application bytes. A protobuf string must be UTF-8: the tag's bytes are
/// made printable ASCII (their low 6 bits above '0'), so a record's tag is not bit-exact.
fn record_of(c: &[u8]) -> Record {
    let mut id = [0u8; 4];
    id.copy_from_slice(&c[..4]);
    Record {
        id: u32::from_le_bytes(id),
        value: f64::from_le_bytes(eight(&c[4..12])),
        stamp: u64::from_le_bytes(eight(&c[12..20])),
        tag: c[20..32]
            .iter()
            .map(|b| char::from(b'0' + (b & 0x3f)))
            .collect(),
    }
}

/// The encoding a message was sent in (`bytes` for one without a body).
pub fn encoding_of(p: &Payload) -> Encoding {
    match &p.body {
        None | Some(Body::Data(_)) => Encoding::Bytes,
        Some(Body::Doubles(_)) => Encoding::Doubles,
        Some(Body::Records(_)) => Encoding::Records,
    }
}

/// Values of its encoding a message carries (bytes, doubles or records).
pub fn values(p: &Payload) -> usize {
    match &p.body {
        None => 0,
        Some(Body::Data(d)) => d.len(),
        Some(Body::Doubles(d)) => d.v.len(),
        Some(Body::Records(r)) => r.r.len(),
    }
}

/// Application bytes of a message: its values times their unit, and its tail.
pub fn app_len(p: &Payload) -> usize {
    values(p) * encoding_of(p).unit() + p.tail.len()
}

/// The application bytes of a message, as [`to_payload`] took them (a record's tag as sent,
/// cut or padded with zeros to its 12 bytes).
pub fn app_bytes(p: Payload) -> Bytes {
    let tail = p.tail;
    match p.body {
        None => tail,
        Some(Body::Data(d)) if tail.is_empty() => d,
        Some(body) => {
            let mut out = BytesMut::with_capacity(app_len_of(&body) + tail.len());
            match body {
                Body::Data(d) => out.put_slice(&d),
                Body::Doubles(d) => {
                    for v in d.v {
                        out.put_slice(&v.to_le_bytes());
                    }
                }
                Body::Records(r) => {
                    for rec in r.r {
                        out.put_slice(&rec.id.to_le_bytes());
                        out.put_slice(&rec.value.to_le_bytes());
                        out.put_slice(&rec.stamp.to_le_bytes());
                        let tag = rec.tag.as_bytes();
                        let n = tag.len().min(TAG_LEN);
                        out.put_slice(&tag[..n]);
                        out.put_bytes(0, TAG_LEN - n);
                    }
                }
            }
            out.put_slice(&tail);
            out.freeze()
        }
    }
}

fn app_len_of(body: &Body) -> usize {
    match body {
        Body::Data(d) => d.len(),
        Body::Doubles(d) => d.v.len() * 8,
        Body::Records(r) => r.r.len() * 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Every size, divisible or not: the values and the tail carry exactly the bytes given,
    /// and decoding the encoded message gives them back (a record's tag made printable).
    #[test]
    fn a_message_carries_exactly_its_application_bytes_in_every_encoding() {
        let app = filler(1000);
        for enc in [Encoding::Bytes, Encoding::Doubles, Encoding::Records] {
            for n in [0usize, 1, 7, 8, 9, 31, 32, 33, 64, 100, 1000] {
                let p = to_payload(&app[..n], enc, 5);
                assert_eq!(values(&p), n / enc.unit(), "{enc} {n}");
                assert_eq!(p.tail.len(), n % enc.unit(), "{enc} {n}");
                assert_eq!(app_len(&p), n, "{enc} {n}");
                let wire = p.encode_to_vec();
                let back = Payload::decode(wire.as_slice()).unwrap();
                assert_eq!(back, p, "{enc} {n}");
                assert_eq!(encoding_of(&back), enc);
                assert_eq!(back.response_size, 5);
                let bytes = app_bytes(back);
                assert_eq!(bytes.len(), n, "{enc} {n}");
                if enc != Encoding::Records {
                    assert_eq!(&bytes[..], &app[..n], "{enc} {n}");
                }
            }
        }
    }

    /// Doubles are packed: 8 bytes each plus one key and length, as XDR's array costs 4.
    #[test]
    fn doubles_are_packed() {
        let p = to_payload(&[0u8; 800], Encoding::Doubles, 0);
        let wire = p.encode_to_vec();
        // body key + length (2 bytes for 802), Doubles key + length (2 for 800), 800 bytes.
        assert_eq!(wire.len(), 1 + 2 + 1 + 2 + 800);
    }
}
