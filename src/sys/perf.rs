//! Tracepoints read through perf_event_open(2): one event per CPU for a tracepoint id, its
//! samples (raw record, time, CPU) written by the kernel into a memory-mapped ring that this
//! side reads from `data_tail` to `data_head`. No eBPF and no compiler: what `perf record -e
//! tcp:tcp_probe` does, for one tracepoint, with a kernel-side filter.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// `PERF_TYPE_TRACEPOINT` (linux/perf_event.h).
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `sample_type` bits.
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_CPU: u64 = 1 << 7;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// What each sample carries, in this order in the record: time (u64), cpu (u32) and a
/// reserved u32, then the raw record's size (u32) and its bytes.
pub const SAMPLE_TYPE: u64 = PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW;
/// `attr.flags` bits: `disabled` (bit 0) and `use_clockid` (bit 25).
const FLAG_DISABLED: u64 = 1;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// ioctls: `_IO('$', 0)`, `_IO('$', 1)`, `_IOW('$', 6, char *)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
/// Record types: `PERF_RECORD_LOST` and `PERF_RECORD_SAMPLE`.
pub const RECORD_LOST: u32 = 2;
pub const RECORD_SAMPLE: u32 = 9;
/// Offsets in `struct perf_event_mmap_page` of data_head, data_tail, data_offset, data_size.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// `struct perf_event_attr` as of PERF_ATTR_SIZE_VER8 (136 bytes); the bit field is one u64.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    aux_action: u32,
    sig_data: u64,
    config3: u64,
}

/// The clock a ring's samples are stamped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleClock {
    /// CLOCK_REALTIME: the clock of the packet sockets' time stamps.
    Realtime,
    /// CLOCK_MONOTONIC, for kernels that refuse CLOCK_REALTIME for the event.
    Monotonic,
}

impl SampleClock {
    fn id(self) -> i32 {
        match self {
            SampleClock::Realtime => libc::CLOCK_REALTIME,
            SampleClock::Monotonic => libc::CLOCK_MONOTONIC,
        }
    }
}

/// One CPU's event for a tracepoint and its ring.
pub struct TracepointRing {
    fd: OwnedFd,
    base: NonNull<u8>,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    /// A record that wraps around the ring's end is copied here whole.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone (unmapped in Drop) and is only read or
// written through `&mut self`; the kernel's side of it is synchronised by data_head/data_tail.
unsafe impl Send for TracepointRing {}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects; a failure (-1) is handled below.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl TracepointRing {
    /// Opens tracepoint `id` (tracefs `events/SYSTEM/NAME/id`) on `cpu` for every process
    /// (pid -1), disabled, with a ring of `data_pages` pages (a power of two) after the
    /// control page, every hit sampled, stamped with `clock`.
    pub fn open(id: u64, cpu: u32, data_pages: usize, clock: SampleClock) -> io::Result<Self> {
        if !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "perf ring pages must be a power of two",
            ));
        }
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: SAMPLE_TYPE,
            flags: FLAG_DISABLED | FLAG_USE_CLOCKID,
            clockid: clock.id(),
            ..PerfEventAttr::default()
        };
        // SAFETY: `attr` is a live, initialised perf_event_attr whose `size` is its own size;
        // the kernel only reads it. The other arguments are plain integers.
        let raw = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor we own and hand to OwnedFd exactly once.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as libc::c_int) };
        let page = page_size();
        let map_len = page * (1 + data_pages);
        // SAFETY: a new shared mapping of the perf descriptor, of the length perf requires
        // (one control page and 2^n data pages); the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast::<u8>())
            .ok_or_else(|| io::Error::other("perf mmap returned null"))?;
        let mut ring = TracepointRing {
            fd,
            base,
            map_len,
            data_offset: page,
            data_size: page * data_pages,
            scratch: Vec::new(),
        };
        // Kernels since 4.1 say where the data is; older ones put it right after the page.
        let (off, size) = (ring.word(DATA_OFFSET), ring.word(DATA_SIZE));
        if size > 0 && (off as usize).saturating_add(size as usize) <= map_len {
            ring.data_offset = off as usize;
            ring.data_size = size as usize;
        }
        Ok(ring)
    }

    /// A u64 of the control page, read once.
    fn word(&self, offset: usize) -> u64 {
        // SAFETY: `offset` is one of the 8-aligned fields of the control page, within the
        // mapping, which lives as long as `self`; the kernel may write it concurrently, so it
        // is read as an atomic.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) }
            .load(Ordering::Relaxed)
    }

    /// Sets the kernel-side filter (tracefs filter syntax, e.g. "sport == 5201").
    pub fn set_filter(&self, filter: &str) -> io::Result<()> {
        let c = std::ffi::CString::new(filter)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in filter"))?;
        // SAFETY: `c` is a NUL-terminated string live for the call; the kernel copies it.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER, c.as_ptr()) })
    }

    pub fn enable(&self) -> io::Result<()> {
        // SAFETY: a perf descriptor we own; the ioctl takes no argument.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) })
    }

    pub fn disable(&self) -> io::Result<()> {
        // SAFETY: as in `enable`.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), PERF_EVENT_IOC_DISABLE, 0) })
    }

    /// Hands every record the kernel has written since the last call to `each`, as its type
    /// and its body (the bytes after the 8-byte header), then gives their space back.
    /// Returns how many records there were.
    pub fn drain(&mut self, each: &mut dyn FnMut(u32, &[u8])) -> usize {
        let base = self.base.as_ptr();
        // SAFETY: data_head and data_tail are aligned u64 fields of the control page, live
        // as long as `self`. data_head is written by the kernel: the acquire load orders
        // our reads of the records after it (the smp_rmb perf_event_open(2) asks for);
        // data_tail is ours and released after the reads (the kernel's smp_mb pairs).
        let (head_a, tail_a) = unsafe {
            (
                AtomicU64::from_ptr(base.add(DATA_HEAD).cast::<u64>()),
                AtomicU64::from_ptr(base.add(DATA_TAIL).cast::<u64>()),
            )
        };
        let head = head_a.load(Ordering::Acquire);
        let mut tail = tail_a.load(Ordering::Relaxed);
        let size = self.data_size as u64;
        let mut n = 0;
        while head.wrapping_sub(tail) >= 8 {
            let at = (tail % size) as usize;
            let mut header = [0u8; 8];
            self.copy_out(at, &mut header);
            let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
            let len = usize::from(u16::from_ne_bytes([header[6], header[7]]));
            if len < 8 || len as u64 > head.wrapping_sub(tail) {
                // A torn or impossible record: skip to the head rather than loop on it.
                tail = head;
                break;
            }
            let mut body = std::mem::take(&mut self.scratch);
            body.resize(len - 8, 0);
            self.copy_out((at + 8) % self.data_size, &mut body);
            each(kind, &body);
            self.scratch = body;
            tail = tail.wrapping_add(len as u64);
            n += 1;
        }
        tail_a.store(tail, Ordering::Release);
        n
    }

    /// Copies `out.len()` bytes from ring offset `at`, wrapping at the ring's end.
    fn copy_out(&self, at: usize, out: &mut [u8]) {
        let first = out.len().min(self.data_size - at);
        // SAFETY: [data_offset, data_offset + data_size) lies within the mapping (checked
        // in `open`), `at < data_size` and `first <= data_size - at`, the rest wraps to the
        // ring's start and is no longer than the ring; the bytes between data_tail and
        // data_head are not rewritten by the kernel until data_tail moves past them.
        unsafe {
            let data = self.base.as_ptr().add(self.data_offset);
            std::ptr::copy_nonoverlapping(data.add(at), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
        }
    }
}

impl Drop for TracepointRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, of that length, unmapped once; nothing borrows
        // it past `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

/// The CPUs online now (sysfs `devices/system/cpu/online`, e.g. "0-3,6"); CPUs 0..n-1 of
/// the CPUs this process may use when the file cannot be read.
pub fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(|| (0..super::cpu_count() as u32).collect())
}

/// A kernel CPU list ("0-3,6") as its CPUs.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Mounts tracefs at `at` (an existing directory): for a host where nothing mounted it.
pub fn mount_tracefs(at: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(at.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let fstype = c"tracefs";
    // SAFETY: the three strings are NUL-terminated and live for the call; no data argument.
    check(unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    })
}

/// The time of `clock` now, nanoseconds.
pub fn clock_ns(clock: SampleClock) -> u64 {
    let id = match clock {
        SampleClock::Realtime => nix::time::ClockId::CLOCK_REALTIME,
        SampleClock::Monotonic => nix::time::ClockId::CLOCK_MONOTONIC,
    };
    nix::time::clock_gettime(id)
        .map(|t| (t.tv_sec().max(0) as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn the_attr_is_the_kernels_ver8_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
    }
}
