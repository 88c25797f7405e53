//! Length-prefixed JSON frames on the control connection.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The
//! length is checked before anything is allocated, so garbage cannot make a peer allocate.

use std::io::{self, Read, Write};

use anyhow::{bail, Context, Result};
use serde::{de::DeserializeOwned, Serialize};

/// The largest control frame either side accepts, bytes.
pub const MAX_FRAME: u32 = 1 << 20;

pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<()> {
    let body = serde_json::to_vec(msg).context("encoding a control message")?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .context("control message too large")?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).context("sending a control message")?;
    w.flush().context("sending a control message")?;
    Ok(())
}

/// Reads one frame. Timeouts surface as errors that say so.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).map_err(describe)?;
    let len = u32::from_be_bytes(len);
    if len == 0 || len > MAX_FRAME {
        bail!("malformed control frame (length {len}, limit {MAX_FRAME}): not a wirebench peer?");
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).map_err(describe)?;
    serde_json::from_slice(&body).map_err(|e| anyhow::anyhow!("malformed control message: {e}"))
}

fn describe(e: io::Error) -> anyhow::Error {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => anyhow::anyhow!("control connection closed by peer"),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            anyhow::anyhow!("control connection timed out")
        }
        _ => anyhow::Error::new(e).context("control connection failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::protocol::ClientMessage;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &ClientMessage::EndPoint).unwrap();
        let back: ClientMessage = read_frame(&mut buf.as_slice()).unwrap();
        assert_eq!(back, ClientMessage::EndPoint);
    }

    #[test]
    fn oversized_and_empty_frames_are_refused_before_allocating() {
        for len in [0u32, MAX_FRAME + 1, u32::MAX] {
            let bytes = len.to_be_bytes();
            let e = read_frame::<ClientMessage>(&mut bytes.as_slice()).unwrap_err();
            assert!(e.to_string().contains("malformed control frame"), "{e}");
        }
    }

    #[test]
    fn truncated_and_invalid_frames_are_errors() {
        let e = read_frame::<ClientMessage>(&mut [0u8, 0, 0, 9, b'{'].as_slice()).unwrap_err();
        assert!(e.to_string().contains("closed"), "{e}");
        let mut buf = 4u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"nope");
        let e = read_frame::<ClientMessage>(&mut buf.as_slice()).unwrap_err();
        assert!(e.to_string().contains("malformed control message"), "{e}");
    }
}
