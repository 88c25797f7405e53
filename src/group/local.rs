//! A group whose ranks are processes on one host, joined by Unix-domain sockets in a private
//! directory: one stream per pair of ranks. Paths are not namespaced, so ranks whose data
//! threads live in different lab namespaces still share this control plane.
//!
//! A rank that exits closes its streams, so the others see "left the group" at once instead
//! of waiting out a timeout.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::Group;
use crate::units::format_seconds;

/// How long one control message may take to be written.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);
/// Between two tries while a rank's socket is not there yet.
const RETRY: Duration = Duration::from_millis(10);

pub struct SocketGroup {
    rank: usize,
    links: Vec<Option<Mutex<UnixStream>>>,
}

/// The socket of `rank` in `dir`.
fn socket_of(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank}.sock"))
}

impl SocketGroup {
    /// Joins the group of `size` ranks meeting in `dir` (a directory only this user can
    /// enter), waiting up to `timeout` for the others.
    pub fn join(dir: &Path, rank: usize, size: usize, timeout: Duration) -> Result<SocketGroup> {
        if rank >= size {
            bail!("rank {rank} is not in a group of {size}");
        }
        let deadline = Instant::now() + timeout;
        let path = socket_of(dir, rank);
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("binding the control socket {}", path.display()))?;
        listener.set_nonblocking(true)?;
        let mut links: Vec<Option<Mutex<UnixStream>>> = (0..size).map(|_| None).collect();

        for (lower, link) in links.iter_mut().enumerate().take(rank) {
            let mut s = loop {
                match UnixStream::connect(socket_of(dir, lower)) {
                    Ok(s) => break s,
                    Err(_) if Instant::now() < deadline => std::thread::sleep(RETRY),
                    Err(e) => {
                        return Err(anyhow!(e).context(format!(
                            "rank {rank} reaching rank {lower} within {}",
                            format_seconds(timeout.as_secs_f64())
                        )))
                    }
                }
            };
            s.set_write_timeout(Some(SEND_TIMEOUT))?;
            s.write_all(&(rank as u32).to_le_bytes())?;
            *link = Some(Mutex::new(s));
        }
        let mut waiting = size - 1 - rank;
        while waiting > 0 {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false)?;
                    s.set_read_timeout(Some(timeout))?;
                    let mut hello = [0u8; 4];
                    s.read_exact(&mut hello)
                        .context("reading a rank's hello on the control socket")?;
                    let from = u32::from_le_bytes(hello) as usize;
                    if from <= rank || from >= size || links[from].is_some() {
                        bail!("rank {rank}: a control connection claims to be rank {from}");
                    }
                    links[from] = Some(Mutex::new(s));
                    waiting -= 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        bail!(
                            "rank {rank}: {waiting} higher ranks did not join within {}",
                            format_seconds(timeout.as_secs_f64())
                        );
                    }
                    std::thread::sleep(RETRY);
                }
                Err(e) => return Err(e).context("accepting a control connection"),
            }
        }
        drop(listener);
        let _ = std::fs::remove_file(&path);
        Ok(SocketGroup { rank, links })
    }

    fn link(&self, r: usize) -> Result<std::sync::MutexGuard<'_, UnixStream>> {
        let Some(Some(link)) = self.links.get(r) else {
            bail!("rank {} has no control link to rank {r}", self.rank);
        };
        link.lock()
            .map_err(|_| anyhow!("a control message to rank {r} panicked"))
    }
}

impl Group for SocketGroup {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.links.len()
    }
    fn send(&self, to: usize, bytes: &[u8]) -> Result<()> {
        let mut s = self.link(to)?;
        s.set_write_timeout(Some(SEND_TIMEOUT))?;
        let mut frame = Vec::with_capacity(4 + bytes.len());
        frame.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        frame.extend_from_slice(bytes);
        s.write_all(&frame)
            .map_err(|e| anyhow!("rank {to} has left the group ({e})"))
    }
    fn recv(&self, from: usize, timeout: Duration) -> Result<Vec<u8>> {
        let mut s = self.link(from)?;
        s.set_read_timeout(Some(timeout))?;
        let rank = self.rank;
        let named = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                anyhow!(
                    "rank {from} sent nothing to rank {rank} within {}",
                    format_seconds(timeout.as_secs_f64())
                )
            }
            _ => anyhow!("rank {from} has left the group"),
        };
        let mut len = [0u8; 4];
        s.read_exact(&mut len).map_err(named)?;
        let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut buf).map_err(named)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_on_unix_sockets_gather_and_see_a_rank_leave() {
        let dir = std::env::temp_dir().join(format!("wb-group-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A hang guard: "rank 2 has left" comes when it leaves, long before.
        let t = crate::test_support::HUNG;
        let handles: Vec<_> = (0..3)
            .map(|r| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let g = SocketGroup::join(&dir, r, 3, t).unwrap();
                    let all = g.allgather(&[r as u8], t).unwrap();
                    if r == 2 {
                        return (all, None);
                    }
                    let left = g.recv(2, t).unwrap_err().to_string();
                    (all, Some(left))
                })
            })
            .collect();
        for h in handles {
            let (all, left) = h.join().unwrap();
            assert_eq!(all, vec![vec![0], vec![1], vec![2]]);
            if let Some(left) = left {
                assert!(left.contains("rank 2 has left"), "{left}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
