//! The one place where wirebench talks to the OS below what std, socket2 and nix offer.
//!
//! Everything `unsafe` lives here, each with a safety note. Callers get safe functions.

// Cargo.toml denies `unsafe_code` in the whole crate; this module and its children are where
// the system calls that std, socket2 and nix do not wrap are made, each block with its SAFETY.
#![allow(unsafe_code)]

pub mod fastpath;
pub mod filter;
#[cfg(feature = "mpi")]
pub mod mpi_window;
pub mod packet;
pub mod perf;
pub mod ring;
pub mod timestamping;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Linux's `struct tcp_info` (include/uapi/linux/tcp.h) up to `tcpi_snd_wnd`. libc's copy stops
/// at `tcpi_total_retrans`, so the extended fields (delivery rate, bytes sent) are declared here.
#[repr(C)]
#[derive(Default)]
pub struct KernelTcpInfo {
    pub state: [u8; 8],
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
}

/// Reads TCP_INFO from a TCP socket, as the kernel lays it out. `None` if the socket is not TCP
/// or the call fails.
pub fn tcp_info(fd: BorrowedFd<'_>) -> Option<KernelTcpInfo> {
    let mut raw = KernelTcpInfo::default();
    let mut len = std::mem::size_of::<KernelTcpInfo>() as libc::socklen_t;
    // SAFETY: `fd` is a live descriptor borrowed for the call; `raw` is a writable, initialised
    // #[repr(C)] buffer of exactly `len` bytes; the kernel writes at most `len` bytes and sets
    // `len` to what it wrote. Older kernels write less; the rest stays zero.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut KernelTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 || len == 0 {
        return None;
    }
    Some(raw)
}

/// CPU time used by the calling thread so far: (user, system).
pub fn thread_cpu_time() -> (Duration, Duration) {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => (tv(u.user_time()), tv(u.system_time())),
        Err(_) => (Duration::ZERO, Duration::ZERO),
    }
}

fn tv(t: nix::sys::time::TimeVal) -> Duration {
    Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    set.set(cpu).map_err(io::Error::from)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(io::Error::from)
}

/// Number of CPUs the process may run on (for validating `--cpu`).
///
/// Read once per process: `available_parallelism` reads the cgroup's CPU quota from files
/// each time, which every run of a long-running agent paid (4% of its CPU time at 100 targets).
/// It reads the calling thread's affinity: the first call comes before any thread is pinned
/// (the plan's checks, the environment's capture, the agent's start).
pub fn cpu_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// Waits until `fd` is readable or `timeout` passes. Returns false on timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    loop {
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) => return Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits up to `timeout` until any of `fds` is readable (or hung up, or in error: a read
/// then returns at once). Returns, per fd, whether it is; all false when the time passed.
pub fn wait_any_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    loop {
        match poll(
            &mut polled,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(polled
        .iter()
        .map(|p| p.revents().is_some_and(|r| !r.is_empty()))
        .collect())
}

/// Makes timer sleeps of this thread precise to the nanosecond instead of the default 50 us
/// slack, so that a delay line releases frames on time.
pub fn precise_timers() -> io::Result<()> {
    nix::sys::prctl::set_timerslack(1).map_err(io::Error::from)
}

/// Asks the kernel to keep every CPU out of idle states slower to leave than 0 us for as long
/// as the returned file stays open (the PM QoS interface `/dev/cpu_dma_latency`, as cyclictest
/// does): an idle CPU then polls instead of halting. The lab's delay line holds it while it
/// runs. On a VM a halted vCPU woke 10 to 100 us late (the hypervisor's exit), which made a
/// delay line that slept until just before a release leave 7% of a 1 Gbit/s ping-pong's frames
/// 10 to 50 us late and doubled the time a frame's send took (the receiving host's wake-ups
/// are in it); held, the mean lateness fell from 3 to 4 us to under 2 us. An idle CPU that
/// polls costs no process any time, but it does cost the host its power saving while a lab is
/// up. Needs root; an error leaves the idle states as they were.
pub fn hold_fast_wakeups() -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")?;
    // The interface takes the latency in microseconds as a binary native-endian i32.
    f.write_all(&0i32.to_ne_bytes())?;
    Ok(f)
}

/// Puts the calling thread in the real-time FIFO class at priority `priority` (1-99), so that
/// ordinary load on the host does not delay it: the lab's delay line, whose lateness is the
/// link's. The kernel's real-time throttling (by default 5% of every second left to others)
/// keeps a runaway thread from locking the host.
pub fn realtime_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler(2) on the calling thread (pid 0) with a valid, initialised
    // sched_param that outlives the call; the result is checked.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the calling thread in the batch class (SCHED_BATCH): the scheduler takes it for a
/// CPU-bound thread and does not let its wake-ups preempt the thread running on a CPU. For
/// an instrument's own helpers (the trace's readers) that must not cut into the measured
/// threads' time slices, yet must still run within a bounded time (unlike SCHED_IDLE).
pub fn batch_priority() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler(2) on the calling thread (pid 0) with a valid, initialised
    // sched_param that outlives the call; the result is checked.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `fd` is readable or `timeout` passes, with nanosecond timeout resolution.
pub fn wait_readable_precise(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use nix::sys::time::TimeSpec;
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match nix::poll::ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Gives the memory the allocator holds free back to the kernel (glibc's `malloc_trim`): a
/// server's session threads each get an allocator arena, and what a burst of them freed stayed
/// resident (71 MB after a soak of 6 100 clients, 6 MB before it). Called when the server has
/// no session left, so it costs nothing while tests run. Elsewhere than glibc, nothing.
pub fn return_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes a plain integer and only walks the allocator's own free lists
    // under its locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Moves the calling thread into the network namespace at `path` (e.g. /run/netns/NAME).
/// Threads it creates afterwards start in that namespace too.
pub fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    let file = std::fs::File::open(path)?;
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// getsockopt of an int value.
pub fn get_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is a live socket borrowed for the call; `value` is a writable c_int on the
    // stack and `len` holds its exact size, which the kernel does not write past.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// setsockopt with an int value.
pub fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is a live socket borrowed for the call; the value is a c_int on the stack and
    // its exact size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Bytes that have arrived on a stream socket and wait to be read (FIONREAD, i.e. SIOCINQ).
pub fn bytes_queued(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points at `n` on the stack
    // for the duration of the call; `fd` is a live descriptor borrowed for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Asks the kernel to stamp every datagram or frame received on `fd` with the time it arrived
/// (SO_TIMESTAMPNS, for [`recv_stamped`] and the stamped receives of [`fastpath`] and
/// [`packet`]), or stops it (`on` false).
pub fn rx_timestamps(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimestampns, &on)
        .map_err(io::Error::from)
}

/// Receives one datagram or frame with the kernel's arrival time (CLOCK_REALTIME) when it gave
/// one; `cmsg` is the control buffer (`nix::cmsg_space!(nix::sys::time::TimeSpec)`). Returns
/// the full length (MSG_TRUNC), which may exceed `buf`. WouldBlock or TimedOut when nothing
/// came within the socket's timeout.
pub fn recv_stamped(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> io::Result<(usize, Option<Duration>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(cmsg), MsgFlags::MSG_TRUNC)
        .map_err(io::Error::from)?;
    let mut stamp = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                stamp = Some(Duration::from(ts));
            }
        }
    }
    Ok((msg.bytes, stamp))
}

/// How old a kernel arrival stamp may be taken to be: longer than any datagram of ours waits
/// in a socket buffer (4 MiB drain in about 34 s at 1 Mbit/s). A stamp older than this (the
/// wall clock stepped forward since the packet arrived) is taken as this old, one newer than
/// now (it stepped back) as now: the mapped time lies within [now - this, now] either way.
pub const MAX_STAMP_AGE: Duration = Duration::from_secs(60);

/// The monotonic time of a kernel arrival stamp (CLOCK_REALTIME since the epoch): now, moved
/// back by how long ago the stamp was, that age clamped to [0, [`MAX_STAMP_AGE`]] at both
/// ends; now without a stamp.
pub fn arrival_instant(stamp: Option<Duration>) -> std::time::Instant {
    let Some(stamp) = stamp else {
        return std::time::Instant::now();
    };
    let (now, wall) = monotonic_and_wall();
    let age = wall.saturating_sub(stamp).min(MAX_STAMP_AGE);
    now.checked_sub(age).unwrap_or(now)
}

/// A bracket of the two clocks this wide or narrower is taken at once: a few vDSO reads.
const CLOCK_PAIR_WIDTH: Duration = Duration::from_micros(2);

/// CLOCK_MONOTONIC and CLOCK_REALTIME (since the epoch) at one moment: the wall clock read
/// between two monotonic reads, the monotonic time taken at the bracket's middle, the narrowest
/// of up to four brackets. Read one after the other, a thread preempted between the two reads
/// puts the whole preemption into every age computed from the pair: the delay line then
/// released a frame that much early, and a 1 ms link's round trip read 94 us below its delay
/// beside a CPU hog. The error of the pair is at most half its bracket's width.
pub fn monotonic_and_wall() -> (std::time::Instant, Duration) {
    let read = || {
        let a = std::time::Instant::now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let b = std::time::Instant::now();
        let width = b.saturating_duration_since(a);
        (width, a + width / 2, wall)
    };
    let best = narrowest(read);
    (best.1, best.2)
}

/// The narrowest of up to four brackets (width, monotonic, wall) that `read` gives, stopping at
/// the first no wider than [`CLOCK_PAIR_WIDTH`].
fn narrowest<T>(mut read: impl FnMut() -> (Duration, T, Duration)) -> (Duration, T, Duration) {
    let mut best = read();
    for _ in 0..3 {
        if best.0 <= CLOCK_PAIR_WIDTH {
            break;
        }
        let next = read();
        if next.0 < best.0 {
            best = next;
        }
    }
    best
}

/// The SCM_TIMESTAMPNS stamp among the control messages of a received `msg`, if any.
///
/// # Safety
/// `msg.msg_control` must point at a live buffer of at least `msg.msg_controllen` bytes that
/// the kernel filled in the receive that returned `msg` (or that holds no message).
pub(crate) unsafe fn scm_timestampns(msg: &libc::msghdr) -> Option<Duration> {
    let mut stamp = None;
    // SAFETY: by the caller's promise the control buffer is live and kernel-written;
    // CMSG_FIRSTHDR/NXTHDR stay within msg_controllen, and an SCM_TIMESTAMPNS message's data
    // is one struct timespec, read unaligned as CMSG_DATA does not promise alignment.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(Duration::new(
                    u64::try_from(ts.tv_sec).unwrap_or(0),
                    u32::try_from(ts.tv_nsec).unwrap_or(0),
                ));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    stamp
}

#[cfg(test)]
mod clock_pair_tests {
    use super::*;

    fn reads(widths_us: &[u64]) -> impl FnMut() -> (Duration, usize, Duration) + '_ {
        let mut k = 0;
        move || {
            k += 1;
            (Duration::from_micros(widths_us[k - 1]), k, Duration::ZERO)
        }
    }

    /// A bracket widened by a preemption is replaced by a narrower one; a narrow first
    /// bracket is taken at once; four wide ones give the narrowest of them.
    #[test]
    fn the_narrowest_bracket_of_the_two_clocks_is_taken() {
        assert_eq!(narrowest(reads(&[94, 1, 500])).1, 2);
        assert_eq!(narrowest(reads(&[1, 500])).1, 1);
        assert_eq!(narrowest(reads(&[50, 40, 30, 20, 1])).1, 4);
        assert_eq!(narrowest(reads(&[50, 60, 30, 70])).1, 3);
    }
}
