//! Windows of MPI non-blocking sends and receives, as osu_bw keeps them: up to W messages in
//! flight, each in a buffer of its own that MPI may use until the request completes
//! (feature `mpi`).
//!
//! A socket copies what the application writes into the kernel's send buffer and returns;
//! this does the same for MPI: [`SendWindow::post`] copies the message into a free slot,
//! starts `MPI_Isend` from it and returns. Only when every slot is in flight does it wait for
//! the oldest send to complete. Without a window every message above the MPI library's eager
//! limit would wait for its rendezvous round trip before the next could start.
//!
//! The receiving side needs the same: a rendezvous message moves only once a receive for it
//! is posted, so [`RecvWindow`] keeps W receives posted (osu_bw's `MPI_Irecv` window) and
//! hands the messages out in order, copying each out as a socket's read does.
//!
//! Why this is here, with `unsafe`: rsmpi only lets a request outlive the call that started
//! it when its buffer is `'static` (a `StaticScope` request), and such a buffer can never be
//! used again through safe code. The slots are heap buffers owned by the window, lent to MPI
//! as `'static` slices while their request runs and touched only when it has completed. The
//! requests never leave this module, so that rule is kept here alone.

use std::io;
use std::ptr::NonNull;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use mpi::datatype::Equivalence;
use mpi::point_to_point::{Destination, Source, Status};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Rank, SimpleCommunicator};
use mpi::traits::Communicator;
use mpi::Tag;

/// Completion tests between two clock reads while waiting for a slot.
const TESTS_PER_CLOCK_READ: u32 = 64;

/// One buffer and the request (send or receive) that may be using it.
struct Slot {
    /// Start of a `Box<[u8]>` of `cap` bytes, owned by this slot (freed in Drop).
    ptr: NonNull<u8>,
    cap: usize,
    /// Bytes of the message last sent from it.
    len: usize,
    /// The send reading `ptr[..len]` or the receive writing `ptr[..cap]`; while it is Some,
    /// nothing else touches the buffer.
    req: Option<Request<'static, [u8], StaticScope>>,
}

impl Slot {
    fn new(cap: usize) -> Slot {
        let boxed: Box<[u8]> = vec![0u8; cap.max(1)].into_boxed_slice();
        let cap = boxed.len();
        let ptr = NonNull::from(Box::leak(boxed)).cast::<u8>();
        Slot {
            ptr,
            cap,
            len: 0,
            req: None,
        }
    }

    /// Tests the request once: Some when the slot is free, with the status of the request
    /// that just completed (None when there was none).
    fn test(&mut self) -> Option<Option<Status>> {
        match self.req.take() {
            None => Some(None),
            Some(r) => match r.test() {
                Ok(status) => Some(Some(status)),
                Err(r) => {
                    self.req = Some(r);
                    None
                }
            },
        }
    }

    /// Cancels a pending request and waits (up to a second) until MPI lets go of the buffer.
    fn cancel(&mut self) {
        if let Some(r) = &self.req {
            r.cancel();
        }
        let until = Instant::now() + Duration::from_secs(1);
        while self.test().is_none() && Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(r) = self.req.take() {
            // MPI may still read the buffer: leak it rather than free memory under a send, and
            // forget the request (rsmpi panics on dropping an incomplete one). The owner ends
            // the job when a send cannot complete, so this happens only on the way out.
            std::mem::forget(r);
            return;
        }
        // SAFETY: `ptr` came from `Box::<[u8]>::leak` of exactly `cap` bytes in `new` and
        // is freed only here, once; no send is reading it (req is None).
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.cap,
            )));
        }
    }
}

/// Why a window could not take or finish a message.
#[derive(Debug)]
pub enum Stuck {
    /// A send of this many bytes did not complete within the time allowed.
    Timeout { bytes: usize },
    /// Called from another thread than the one that made the window (MPI is initialised for
    /// one thread).
    WrongThread,
}

/// Up to `slots` non-blocking sends in flight to one rank on one tag.
pub struct SendWindow {
    world: SimpleCommunicator,
    peer: Rank,
    tag: Tag,
    slots: Vec<Slot>,
    /// The slot the next message goes into: the oldest one in flight once all are used.
    next: usize,
    /// The thread that made the window, the only one that calls MPI through it.
    thread: ThreadId,
}

// SAFETY: the slots' pointers are owned by the window alone, and every MPI call through it
// (post, drain) first checks that it runs on the thread that made it; moving the window to
// another thread and dropping it there frees or leaks buffers without calling MPI.
unsafe impl Send for SendWindow {}

impl SendWindow {
    /// A window of `slots` buffers of `message` bytes each (a buffer grows if a longer message
    /// comes).
    pub fn new(peer: Rank, tag: Tag, slots: usize, message: usize) -> SendWindow {
        SendWindow {
            world: SimpleCommunicator::world(),
            peer,
            tag,
            slots: (0..slots.max(1)).map(|_| Slot::new(message)).collect(),
            next: 0,
            thread: std::thread::current().id(),
        }
    }

    fn check_thread(&self) -> Result<(), Stuck> {
        if std::thread::current().id() == self.thread {
            Ok(())
        } else {
            Err(Stuck::WrongThread)
        }
    }

    /// Messages that may be in flight at once.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Copies `data` into the next slot and starts sending it, first waiting (polling, as
    /// MPI's blocking calls do) for that slot's previous send; Err after `timeout` of waiting
    /// for it (None: no limit).
    pub fn post(&mut self, data: &[u8], timeout: Option<Duration>) -> Result<(), Stuck> {
        self.check_thread()?;
        let i = self.next;
        wait_free(&mut self.slots[i], timeout)?;
        let slot = &mut self.slots[i];
        if slot.cap < data.len() {
            *slot = Slot::new(data.len());
        }
        // SAFETY: `ptr` is valid for `cap` >= data.len() bytes (allocated in Slot::new and
        // alive until the slot is dropped) and no send is reading it (req is None after
        // wait_free), so this is the only access to those bytes.
        let dst = unsafe { std::slice::from_raw_parts_mut(slot.ptr.as_ptr(), data.len()) };
        dst.copy_from_slice(data);
        // SAFETY: the same bytes, now lent to MPI. The slice is handed only to the request
        // kept in this slot; nothing writes or frees the buffer until that request has
        // completed (wait_free, Drop), so for as long as MPI may read it, it is immutable and
        // alive, which is what `'static` promises the request.
        let lent: &'static [u8] =
            unsafe { std::slice::from_raw_parts(slot.ptr.as_ptr(), data.len()) };
        let dest = self.world.process_at_rank(self.peer);
        slot.len = data.len();
        slot.req = Some(dest.immediate_send_with_tag(StaticScope, lent, self.tag));
        self.next = (i + 1) % self.slots.len();
        Ok(())
    }

    /// Waits until every send has completed; Err after `timeout` (None: no limit).
    pub fn drain(&mut self, timeout: Option<Duration>) -> Result<(), Stuck> {
        self.check_thread()?;
        // Oldest first, so the clock starts on the send that should finish first.
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            wait_free(&mut self.slots[i], timeout)?;
        }
        Ok(())
    }
}

/// Polls the slot's request until it completes, or until `timeout` has passed; the status
/// of the request that completed.
fn wait_free(slot: &mut Slot, timeout: Option<Duration>) -> Result<Option<Status>, Stuck> {
    let mut status = None;
    if spin_until(timeout, || slot.test().map(|s| status = s).is_some()) {
        Ok(status)
    } else {
        Err(Stuck::Timeout { bytes: slot.len })
    }
}

/// Calls `done` until it returns true, spinning as MPI's blocking calls do; false once
/// `timeout` has passed first (None: no limit). The clock is read only every
/// [`TESTS_PER_CLOCK_READ`] calls, and not at all while the first ones succeed.
pub fn spin_until(timeout: Option<Duration>, mut done: impl FnMut() -> bool) -> bool {
    let mut deadline: Option<Instant> = None;
    let mut tests = 0u32;
    while !done() {
        tests = tests.wrapping_add(1);
        if tests.is_multiple_of(TESTS_PER_CLOCK_READ) {
            if let Some(t) = timeout {
                let now = Instant::now();
                if now >= *deadline.get_or_insert(now + t) {
                    return false;
                }
            }
        }
        std::hint::spin_loop();
    }
    true
}

/// Up to `slots` receives posted for messages from one rank on one tag, handed out in the
/// order they arrive (MPI matches posted receives in order).
pub struct RecvWindow {
    world: SimpleCommunicator,
    peer: Rank,
    tag: Tag,
    slots: Vec<Slot>,
    /// The slot of the next message.
    next: usize,
    /// The end-of-data message (zero bytes) arrived: nothing is reposted any more.
    ended: bool,
    thread: ThreadId,
}

// SAFETY: as for SendWindow: every MPI call through it (recv, and Drop's cancel, which is
// skipped on a foreign thread) runs on the thread that made it.
unsafe impl Send for RecvWindow {}

impl RecvWindow {
    /// Posts `slots` receives of up to `message` bytes each (a longer message is an MPI
    /// truncation error, which ends the job).
    pub fn new(peer: Rank, tag: Tag, slots: usize, message: usize) -> RecvWindow {
        let mut w = RecvWindow {
            world: SimpleCommunicator::world(),
            peer,
            tag,
            slots: (0..slots.max(1)).map(|_| Slot::new(message)).collect(),
            next: 0,
            ended: false,
            thread: std::thread::current().id(),
        };
        for i in 0..w.slots.len() {
            w.post(i);
        }
        w
    }

    /// Messages that may be on their way at once.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Bytes the posted receives can hold together.
    pub fn capacity_bytes(&self) -> u64 {
        self.slots.iter().map(|s| s.cap as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn post(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        // SAFETY: `ptr` is valid for `cap` bytes and alive until the slot is dropped, and no
        // request uses it (this is called on free slots only). The mutable slice goes to the
        // request alone; nothing reads, writes or frees the buffer until that request has
        // completed (recv waits for it, Drop cancels and waits), which is what `'static`
        // promises the request.
        let lent: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(slot.ptr.as_ptr(), slot.cap) };
        slot.len = slot.cap;
        let source = self.world.process_at_rank(self.peer);
        slot.req = Some(source.immediate_receive_into_with_tag(StaticScope, lent, self.tag));
    }

    /// The next message: copies its first bytes into `out` and the rest, if `out` is too
    /// short, to the end of `rest`; returns its length (0: the peer's end-of-data message,
    /// and every call after it). `timeout` None with `block`: no limit; `block` false: a
    /// WouldBlock error when the next message has not arrived.
    pub fn recv(
        &mut self,
        out: &mut [u8],
        rest: &mut Vec<u8>,
        block: bool,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if std::thread::current().id() != self.thread {
            return Err(io::Error::other(
                "an MPI receive window is used only on the thread that made it",
            ));
        }
        if self.ended {
            return Ok(0);
        }
        let i = self.next;
        let status = if block {
            wait_free(&mut self.slots[i], timeout).map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, "no MPI message within the timeout")
            })?
        } else {
            self.slots[i]
                .test()
                .ok_or_else(|| io::Error::from(io::ErrorKind::WouldBlock))?
        };
        let len = status
            .map(|s| s.count(u8::equivalent_datatype()).max(0) as usize)
            .unwrap_or(0);
        let slot = &self.slots[i];
        // SAFETY: the slot's receive has completed (wait_free or test returned it), so MPI
        // no longer writes the buffer; `len` <= `cap` bytes of it were written.
        let got = unsafe { std::slice::from_raw_parts(slot.ptr.as_ptr(), len.min(slot.cap)) };
        let k = got.len().min(out.len());
        out[..k].copy_from_slice(&got[..k]);
        rest.extend_from_slice(&got[k..]);
        if len == 0 {
            self.ended = true;
            for s in &mut self.slots {
                s.cancel();
            }
            return Ok(0);
        }
        self.post(i);
        self.next = (i + 1) % self.slots.len();
        Ok(len)
    }
}

impl Drop for RecvWindow {
    /// Receives still posted would match messages of nobody: cancel them, so that MPI lets go
    /// of the buffers before they are freed (a slot still in use is leaked, see Slot's Drop).
    fn drop(&mut self) {
        if std::thread::current().id() == self.thread {
            for s in &mut self.slots {
                s.cancel();
            }
        }
    }
}
