//! The process's own stdout and stderr for `println!`, `print!`, `eprintln!` and `eprint!`,
//! which the crate's macros of the same names (defined at the crate root, in front of every
//! module) send here instead of to std's.
//!
//! Why: std's macros panic when a write fails ("failed printing to stdout: Broken pipe", exit
//! 101), and a reader that stops early (`wirebench history --json | head -c1`, or `run ...
//! 2>&1 | head -2`, which closes stderr too) makes every later write fail. Rust ignores
//! SIGPIPE, so the write returns EPIPE instead of killing the process; restoring the default
//! SIGPIPE action would kill `run` before it saved what it measured, and any write to a peer's
//! closed socket with it. So the text a reader no longer wants is dropped here and the command
//! goes on to its end and its exit code: what was measured is still saved. A closed stream
//! stays closed: nothing more is tried on it.

use std::fmt::Arguments;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout; a failed write (a closed pipe, a full disk) closes it for the process.
pub fn out(args: Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    if std::io::stdout().lock().write_fmt(args).is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes to stderr; a failed write closes it for the process (there is nowhere to say so).
pub fn err(args: Arguments<'_>) {
    if STDERR_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    if std::io::stderr().lock().write_fmt(args).is_err() {
        STDERR_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Whether a write to stdout failed: the reader is gone.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}
