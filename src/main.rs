//! The `wirebench` binary: parses the command line, prints a usage error on one line, and
//! hands the typed command to the library's command layer (`wirebench::cmd`).

use clap::Parser;

fn main() {
    let cli = match wirebench::cmd::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        wirebench::error::EXIT_USAGE
                    } else {
                        0
                    },
                );
            }
            let args: Vec<String> = std::env::args().skip(1).collect();
            // Through the crate's stderr, which a closed pipe does not make panic.
            wirebench::console::err(format_args!(
                "wirebench: error: {}\n",
                wirebench::cmd::usage_error_line(&e, &args)
            ));
            std::process::exit(wirebench::error::EXIT_USAGE);
        }
    };
    std::process::exit(wirebench::cmd::main_with(cli));
}
