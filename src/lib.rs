//! wirebench: a protocol-independent benchmark for networks and communication stacks.
//!
//! Layers, top to bottom: [`cmd`] (what the user types, and each command's handler) →
//! [`request`] (what one run asks for, typed) → [`plan`] (points and sweeps) →
//! [`pattern`] (ping-pong, stream, request/response) → [`transport`] (TCP, UDP, Unix) →
//! [`sys`] (the OS calls std does not cover). [`control`] negotiates tests between client and
//! server apart from the data plane; [`stats`] and [`report`] turn samples into results, and
//! [`results`] keeps them: a history database, HTML reports with plots, comparisons. With the
//! `mpi` feature, `plan::mpi` runs the same patterns between the two ranks of an MPI job, and
//! [`mesh`] every ordered pair of a job's ranks (over a [`group`]), each as `run` measures it.
//! [`app`] runs application kernels over P ranks (local processes or an MPI job), each
//! written once against connections of any reliable transport.
//! [`error`] is a leaf: how every layer reports a failure; so is [`outfile`]: how every file
//! written for the user is created (no link followed, nothing replaced without --force).

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

pub mod app;
pub mod cmd;
pub mod console;
pub mod control;
pub mod env;
pub mod error;
pub mod group;
pub mod instruments;
pub mod lab;
pub mod mesh;
pub mod outfile;
pub mod pattern;
pub mod plan;
pub mod relay;
pub mod report;
pub mod request;
pub mod results;
pub mod stats;
pub mod study;
pub mod sys;
#[cfg(test)]
mod test_support;
pub mod text;
pub mod trace;
pub mod transport;
pub mod units;
