//! A group whose ranks are threads of one process, joined by channels.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::Group;

type Inbox = Mutex<Receiver<Vec<u8>>>;

/// One rank of a group of threads. `ThreadGroup::new(p)` makes all p ranks; move each to its
/// own thread.
pub struct ThreadGroup {
    rank: usize,
    /// To every rank (None for this one).
    to: Vec<Option<Sender<Vec<u8>>>>,
    /// From every rank (None for this one); a Mutex so that the group is Sync.
    from: Vec<Option<Inbox>>,
}

impl ThreadGroup {
    pub fn new(size: usize) -> Vec<ThreadGroup> {
        let mut to: Vec<Vec<Option<Sender<Vec<u8>>>>> = (0..size).map(|_| Vec::new()).collect();
        let mut from: Vec<Vec<Option<Inbox>>> = (0..size).map(|_| Vec::new()).collect();
        for (src, to_row) in to.iter_mut().enumerate() {
            for (dst, from_row) in from.iter_mut().enumerate() {
                if src == dst {
                    to_row.push(None);
                    from_row.push(None);
                    continue;
                }
                let (tx, rx) = channel();
                to_row.push(Some(tx));
                from_row.push(Some(Mutex::new(rx)));
            }
        }
        // from[dst] was filled in src order, so from[dst][src] is the channel src -> dst.
        to.into_iter()
            .zip(from)
            .enumerate()
            .map(|(rank, (to, from))| ThreadGroup { rank, to, from })
            .collect()
    }
}

impl Group for ThreadGroup {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.to.len()
    }
    fn send(&self, to: usize, bytes: &[u8]) -> Result<()> {
        let Some(Some(tx)) = self.to.get(to) else {
            bail!("rank {} cannot send to rank {to}", self.rank);
        };
        tx.send(bytes.to_vec())
            .map_err(|_| anyhow!("rank {to} has left the group"))
    }
    fn recv(&self, from: usize, timeout: Duration) -> Result<Vec<u8>> {
        let Some(Some(rx)) = self.from.get(from) else {
            bail!("rank {} cannot receive from rank {from}", self.rank);
        };
        let rx = rx
            .lock()
            .map_err(|_| anyhow!("a receive from rank {from} panicked"))?;
        rx.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => {
                anyhow!(
                    "rank {from} sent nothing to rank {} within {}",
                    self.rank,
                    crate::units::format_seconds(timeout.as_secs_f64())
                )
            }
            RecvTimeoutError::Disconnected => anyhow!("rank {from} has left the group"),
        })
    }
}
