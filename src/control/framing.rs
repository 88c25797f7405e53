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
