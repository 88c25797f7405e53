//! Running commands and threads inside the lab's network namespaces.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Runs a command to completion; a failure becomes one line naming the command and its stderr.
pub fn sh(program: &str, args: &[&str]) -> Result<()> {
    output(program, args).map(drop)
}

/// Runs a command to completion and gives what it printed; failures as [`sh`].
pub fn output(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!("cannot run '{program}' (wirebench lab needs iproute2 and, for loss, nftables)")
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "'{program} {}' failed: {}",
            args.join(" "),
            err.trim().replace('\n', "; ")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command inside network namespace `ns` and gives what it printed.
pub fn output_in(ns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    output("ip", &all)
}

/// Runs a command inside network namespace `ns`.
pub fn sh_in(ns: &str, program: &str, args: &[&str]) -> Result<()> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    sh("ip", &all)
}

/// Where `ip netns` keeps a namespace's handle.
pub fn netns_path(ns: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(ns)
}

/// Runs `f` on a new thread that has entered namespace `ns`; threads it spawns stay there.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let path = netns_path(ns);
    let handle =
        std::thread::Builder::new()
            .name(format!("wb-{ns}"))
            .spawn(move || -> Result<T> {
                crate::sys::enter_netns(&path)
                    .with_context(|| format!("entering network namespace {}", path.display()))?;
                f()
            })?;
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in namespace {ns} panicked"))?
}
