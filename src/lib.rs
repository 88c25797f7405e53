//! wirebench: a protocol-independent benchmark for networks and communication stacks.
//!
//! Layers, top to bottom (tests/layers.rs holds the imports to these edges and rejects any
//! cycle): [`cmd`] (what the user types, and each command's handler) → [`glue`] (from a
//! typed request to its plan, sinks, store, figures and exit code; [`study`] and [`mesh`]
//! are glue of their own for many runs) → [`request`] (what one run asks for, typed) →
//! [`plan`] (points and sweeps, the runner, and the [`plan::sink::Sink`] it writes to) →
//! [`pattern`] (ping-pong, stream, request/response) → [`transport`] (TCP, UDP, Unix, QUIC,
//! raw, MPI) → [`sys`] (the OS calls std does not cover). [`control`] negotiates tests
//! between client and server apart from the data plane. The measurements become the result
//! document of [`model`], which only [`output`] (table, CSV, JSON as the run goes, and
//! `compare A B`), [`store`] (the SQLite history) and [`figures`] (SVG, PNG and the HTML
//! report) read. [`app`] runs application kernels over P ranks (local processes or an MPI
//! job) over a [`group`]. [`units`] and [`text`] are leaves, [`stats`] and [`error`] stand on them; so is
//! [`outfile`]: how every file written for the user is created (no link followed, nothing
//! replaced without --force). [`progress`] is a leaf too: the progress line the long commands
//! (app, compare-transports, mesh) draw on a terminal's stderr.

// `println!`, `print!`, `eprintln!` and `eprint!` of every module below write through
// [`console`], which drops what a closed stdout or stderr no longer takes instead of
// panicking (std's do): these textual-scope macros shadow std's in all the modules declared
// after them. Unit tests keep std's, whose output the test harness captures.
#[cfg(not(test))]
macro_rules! println {
    () => {
        $crate::console::out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::console::out(format_args!("{}\n", format_args!($($arg)*)))
    };
}
#[cfg(not(test))]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::console::out(format_args!($($arg)*))
    };
}
#[cfg(not(test))]
macro_rules! eprintln {
    () => {
        $crate::console::err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::console::err(format_args!("{}\n", format_args!($($arg)*)))
    };
}
#[cfg(not(test))]
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::console::err(format_args!($($arg)*))
    };
}

pub mod agent;
pub mod app;
pub mod cmd;
pub mod console;
pub mod control;
pub mod env;
pub mod error;
pub mod figures;
pub mod glue;
pub mod group;
pub mod instruments;
pub mod lab;
pub mod mesh;
pub mod metrics;
pub mod model;
pub mod outfile;
pub mod output;
pub mod pattern;
pub mod plan;
pub mod progress;
pub mod relay;
pub mod request;
pub mod stats;
pub mod store;
pub mod study;
pub mod sys;
#[cfg(test)]
mod test_support;
pub mod text;
pub mod trace;
pub mod transport;
pub mod units;
