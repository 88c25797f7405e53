//! Output: the renderings of the result document as a run goes (table, CSV, JSON, the
//! `compare-transports` table), of a stored stream run as iperf3's JSON (`export --format
//! iperf3`) and of two stored runs compared (`compare A B`). Every sink here implements
//! [`crate::plan::sink::Sink`] and reads the document alone.

pub mod columns;
pub mod compare_runs;
pub mod compare_transports;
pub mod csv;
pub mod handle;
pub mod iperf3;
pub mod json;
#[cfg(test)]
mod rendering_tests;
pub mod table;

pub use handle::Output;

/// Says once on stderr that stdout is gone (a closed pipe): the streaming outputs go on with
/// the run and its saving instead of failing it.
pub(crate) fn stdout_closed() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| eprintln!("wirebench: error: stdout closed; the run goes on"));
}
