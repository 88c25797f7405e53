//! How failures reach the user: one line on stderr and an exit code. A leaf module, so that
//! every layer can report the same way without importing the command layer.

/// Exit code for a failed measurement or bad input found after parsing.
pub const EXIT_FAILURE: i32 = 1;

/// Exit code for a command line clap (or the command layer's own checks of its syntax)
/// refuses, as clap itself exits.
pub const EXIT_USAGE: i32 = 2;

/// One line: the error and its causes, joined.
pub fn one_line(e: &anyhow::Error) -> String {
    // An error may quote a peer (a server's refusal) or a file: no escape sequence of theirs
    // reaches the terminal.
    crate::text::printable(&format!("{e:#}").replace('\n', " ")).into_owned()
}

/// Prints `e` as wirebench's one error line and returns [`EXIT_FAILURE`].
pub fn fail(e: &anyhow::Error) -> i32 {
    eprintln!("wirebench: error: {}", one_line(e));
    EXIT_FAILURE
}
