//! Where a sink's text goes: stdout in the binary, a buffer in tests. One handle is shared by
//! a sink and its interval printer (which runs on another thread while the point is measured),
//! so the writer sits behind a mutex.

use std::io::{ErrorKind, Write};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

/// A shared, line-oriented writer. Each write is flushed at once, so a reader of a pipe sees a
/// point as soon as it is measured.
#[derive(Clone)]
pub struct Output {
    inner: Arc<Mutex<Target>>,
}

struct Target {
    writer: Box<dyn Write + Send>,
    /// Stdout: a closed pipe is said once and the run goes on (see [`super::stdout_closed`]).
    is_stdout: bool,
    /// Set once stdout turned out closed: nothing more is written.
    closed: bool,
}

impl Output {
    pub fn stdout() -> Output {
        Output::with(Box::new(std::io::stdout()), true)
    }

    /// Any writer; a closed pipe on it is an error like any other.
    pub fn to(writer: Box<dyn Write + Send>) -> Output {
        Output::with(writer, false)
    }

    fn with(writer: Box<dyn Write + Send>, is_stdout: bool) -> Output {
        Output {
            inner: Arc::new(Mutex::new(Target {
                writer,
                is_stdout,
                closed: false,
            })),
        }
    }

    /// Writes `bytes` and flushes. A closed stdout is said once on stderr and then ignored, as
    /// a reader that stopped reading (`| head`) must not stop the measurement or its saving;
    /// every other failure is returned.
    pub fn write_all(&self, bytes: &[u8]) -> Result<()> {
        // A printer thread that panicked holding the lock left the writer as usable as before.
        let mut t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if t.closed {
            return Ok(());
        }
        let written = t.writer.write_all(bytes).and_then(|()| t.writer.flush());
        match written {
            Ok(()) => Ok(()),
            Err(e) if t.is_stdout && e.kind() == ErrorKind::BrokenPipe => {
                t.closed = true;
                super::stdout_closed();
                Ok(())
            }
            Err(e) => Err(e).context("writing the output"),
        }
    }

    /// Writes `text` and a line end.
    pub fn line(&self, text: &str) -> Result<()> {
        let mut s = String::with_capacity(text.len() + 1);
        s.push_str(text);
        s.push('\n');
        self.write_all(s.as_bytes())
    }
}

/// A growable buffer several handles share: what a test renders a sink into.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// An [`Output`] that appends here.
    pub fn output(&self) -> Output {
        Output::to(Box::new(self.clone()))
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails every write with one kind of error.
    struct Failing(ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(self.0))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_is_not_an_error_but_a_full_disk_is() {
        let pipe = Output::with(Box::new(Failing(ErrorKind::BrokenPipe)), true);
        assert!(pipe.line("a").is_ok());
        assert!(pipe.line("b").is_ok());
        let full = Output::with(Box::new(Failing(ErrorKind::StorageFull)), true);
        let e = full.line("a").unwrap_err();
        assert!(
            format!("{e:#}").starts_with("writing the output: "),
            "{e:#}"
        );
        // A closed pipe on a file or a buffer is no reader that left: it is returned.
        let other = Output::to(Box::new(Failing(ErrorKind::BrokenPipe)));
        assert!(other.line("a").is_err());
    }

    #[test]
    fn lines_reach_the_buffer_in_order() {
        let c = Capture::default();
        let o = c.output();
        o.line("one").unwrap();
        o.clone().line("two").unwrap();
        assert_eq!(c.text(), "one\ntwo\n");
    }
}
