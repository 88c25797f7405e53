//! Files wirebench writes for the user (`run --output`, `--trace`, `--plot`, `export -o`,
//! `report -o`, `plot -o`, `study report --out DIR`, `trace plot --out DIR`, `man --dir`,
//! `mesh --output` and `--report DIR`, `app --plot`): one set of rules, because wirebench
//! often runs as root, and a directory such as /tmp lets anyone plant a link at the path an
//! output will take.
//!
//! - A symbolic link at the path is never written through, even a dangling one, even with
//!   `--force` (O_NOFOLLOW; O_EXCL refuses a link as it refuses a file).
//! - A file that exists is not replaced unless `--force` asks; then only a regular file with
//!   no other hard link (a hard link is the same trap as a symbolic one).
//! - A directory output is opened once, not through a link, and each file in it is created
//!   relative to that open directory (openat), so that a link swapped in for the directory
//!   after the check is not followed; every file is checked before the first is written, so
//!   that a refusal leaves the directory as it was.
//!
//! Every refusal is one line naming the path. Only the last component is guarded: the
//! directories above it are the user's to choose, as for any program.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag, AT_FDCWD};
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};

/// Refuses, in one line, what [`create`] would refuse at `path` now, without creating
/// anything: for a command to call before its work (a run before it measures), so that a
/// refused output does not cost the measurement.
pub fn check(path: &Path, force: bool) -> Result<()> {
    let path = plain(path);
    match existing(AT_FDCWD, &path, &path)? {
        Some(st) => match refusal(&st, &path, force) {
            Some(e) => Err(e),
            // A regular file --force may replace: not one of the kernel's.
            None => match nix::sys::statfs::statfs(&path) {
                Ok(fs) if kernel_interface(&fs) => Err(not_a_data_file(&path)),
                _ => Ok(()),
            },
        },
        None => Ok(()),
    }
}

/// File systems whose files are the kernel's interfaces (procfs, sysfs, cgroups, debugfs,
/// tracefs, securityfs, bpffs): their "regular files" change the running system when written
/// (`/proc/self/comm` renames the process), so an output is never written there, --force or not.
fn kernel_interface(fs: &nix::sys::statfs::Statfs) -> bool {
    use nix::sys::statfs::{
        BPF_FS_MAGIC, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC, DEBUGFS_MAGIC, PROC_SUPER_MAGIC,
        SECURITYFS_MAGIC, SYSFS_MAGIC, TRACEFS_MAGIC,
    };
    [
        PROC_SUPER_MAGIC,
        SYSFS_MAGIC,
        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC,
        DEBUGFS_MAGIC,
        TRACEFS_MAGIC,
        SECURITYFS_MAGIC,
        BPF_FS_MAGIC,
    ]
    .contains(&fs.filesystem_type())
}

/// Creates `path` for writing by the rules above: a new file, or with `force` an existing
/// regular file emptied.
pub fn create(path: &Path, force: bool) -> Result<File> {
    let path = plain(path);
    open_in(AT_FDCWD, &path, &path, force)
}

/// Writes `bytes` to a file created by [`create`].
pub fn write(path: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let mut f = create(path, force)?;
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes several files, each as [`write`] does, after checking all of them: one refused
/// leaves every one as it was.
pub fn write_files(files: &[(PathBuf, Vec<u8>)], force: bool) -> Result<()> {
    for (path, _) in files {
        check(path, force)?;
    }
    for (path, bytes) in files {
        write(path, bytes, force)?;
    }
    Ok(())
}

/// Refuses, in one line, what [`OutDir::open`] and [`OutDir::write_files`] would refuse for
/// files `names` in `dir` now, creating nothing: a check before the work, as [`check`].
pub fn check_dir<'a>(
    dir: &Path,
    names: impl IntoIterator<Item = &'a str>,
    force: bool,
) -> Result<()> {
    let dir = plain(dir);
    match existing(AT_FDCWD, &dir, &dir)? {
        None => Ok(()),
        Some(st) if kind(&st) == SFlag::S_IFLNK => Err(link(&dir)),
        Some(st) if kind(&st) != SFlag::S_IFDIR => Err(not_a_directory(&dir)),
        Some(_) => {
            for name in names {
                check(&dir.join(name), force)?;
            }
            Ok(())
        }
    }
}

/// A directory that output files go into, open (not through a link): each file is created
/// in it by name, by the rules above.
pub struct OutDir {
    fd: OwnedFd,
    path: PathBuf,
    force: bool,
}

impl OutDir {
    /// Opens `path`, creating it (and the directories above it) when missing; a symbolic
    /// link or anything but a directory at `path` is refused.
    pub fn open(path: &Path, force: bool) -> Result<OutDir> {
        let path = plain(path);
        match existing(AT_FDCWD, &path, &path)? {
            Some(st) if kind(&st) == SFlag::S_IFLNK => return Err(link(&path)),
            Some(st) if kind(&st) != SFlag::S_IFDIR => return Err(not_a_directory(&path)),
            Some(_) => {}
            None => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
                // mkdir does not follow a link; one planted after the check above fails it
                // (EEXIST) and is refused by the open below.
                match std::fs::create_dir(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("creating {}", path.display()))
                    }
                }
            }
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match openat(AT_FDCWD, &path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) if is_link_at(AT_FDCWD, &path) => return Err(link(&path)),
            Err(Errno::ENOTDIR) => return Err(not_a_directory(&path)),
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("opening {}", path.display()))
            }
        };
        Ok(OutDir { fd, path, force })
    }

    /// The path of file `name` in this directory, as the user named the directory.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes every file (a plain name and its bytes) into the directory after checking all
    /// of them, in order: the first refused is named, and nothing is written. The paths
    /// written, in order.
    pub fn write_files(&self, files: &[(String, Vec<u8>)]) -> Result<Vec<PathBuf>> {
        for (name, _) in files {
            let shown = self.named(name)?;
            if let Some(st) = existing(self.fd.as_fd(), Path::new(name), &shown)? {
                if let Some(e) = refusal(&st, &shown, self.force) {
                    return Err(e);
                }
            }
        }
        let mut written = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            let shown = self.named(name)?;
            let mut f = open_in(self.fd.as_fd(), Path::new(name), &shown, self.force)?;
            f.write_all(bytes)
                .and_then(|()| f.flush())
                .with_context(|| format!("writing {}", shown.display()))?;
            written.push(shown);
        }
        Ok(written)
    }

    /// `name` as shown in messages; a name that would leave the directory is refused (the
    /// names are wirebench's own, so this is a guard, not a rule users meet).
    fn named(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(anyhow!(
                "{}: '{name}' is not a file name",
                self.path.display()
            ));
        }
        Ok(self.path_of(name))
    }
}

/// `path` without a trailing slash, which would make the system follow a link at its last
/// component ("link/" is the directory the link names).
fn plain(path: &Path) -> PathBuf {
    let p: PathBuf = path.components().collect();
    if p.as_os_str().is_empty() {
        path.to_owned()
    } else {
        p
    }
}

/// Opens `name` (relative to `dir`; `shown` in messages) for writing by the rules above.
fn open_in(dir: BorrowedFd<'_>, name: &Path, shown: &Path, force: bool) -> Result<File> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // As File::create: the umask takes its share.
    let mode = Mode::from_bits_truncate(0o666);
    if !force {
        return match openat(dir, name, flags | OFlag::O_EXCL, mode) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::EEXIST) => Err(match existing(dir, name, shown)? {
                Some(st) => refusal(&st, shown, false).unwrap_or_else(|| exists(shown)),
                // Gone again since: still not ours to take.
                None => exists(shown),
            }),
            Err(e) => Err(could_not_create(e, shown)),
        };
    }
    // No O_TRUNC: the file is emptied only once it is known to be a regular file of its own.
    // O_NONBLOCK: a FIFO at the path fails or opens at once instead of waiting for a reader;
    // it changes nothing for a regular file.
    let fd = match openat(dir, name, flags | OFlag::O_NONBLOCK, mode) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) if is_link_at(dir, name) => return Err(link(shown)),
        Err(Errno::EISDIR | Errno::ENXIO) => return Err(not_regular(shown)),
        Err(e) => return Err(could_not_create(e, shown)),
    };
    let file = File::from(fd);
    let meta = file
        .metadata()
        .with_context(|| format!("checking {}", shown.display()))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(shown));
    }
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(hard_linked(shown));
    }
    if nix::sys::statfs::fstatfs(&file).is_ok_and(|fs| kernel_interface(&fs)) {
        return Err(not_a_data_file(shown));
    }
    file.set_len(0)
        .with_context(|| format!("emptying {}", shown.display()))?;
    Ok(file)
}

/// What is at `name` (relative to `dir`), the link itself if it is one; None when nothing.
fn existing(dir: BorrowedFd<'_>, name: &Path, shown: &Path) -> Result<Option<FileStat>> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => {
            Err(std::io::Error::from(e)).with_context(|| format!("checking {}", shown.display()))
        }
    }
}

fn is_link_at(dir: BorrowedFd<'_>, name: &Path) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| kind(&st) == SFlag::S_IFLNK)
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// Why what exists (`st`) at `shown` may not be written, if it may not.
fn refusal(st: &FileStat, shown: &Path, force: bool) -> Option<anyhow::Error> {
    if kind(st) == SFlag::S_IFLNK {
        Some(link(shown))
    } else if !force {
        Some(exists(shown))
    } else if kind(st) != SFlag::S_IFREG {
        Some(not_regular(shown))
    } else if st.st_nlink > 1 {
        Some(hard_linked(shown))
    } else {
        None
    }
}

fn link(p: &Path) -> anyhow::Error {
    anyhow!(
        "{} is a symbolic link; wirebench does not write through links, not even with --force",
        p.display()
    )
}

fn exists(p: &Path) -> anyhow::Error {
    anyhow!(
        "{} exists; wirebench does not replace files (use --force to replace it)",
        p.display()
    )
}

fn not_regular(p: &Path) -> anyhow::Error {
    anyhow!(
        "{} exists and is not a regular file; --force replaces regular files only",
        p.display()
    )
}

fn not_a_data_file(p: &Path) -> anyhow::Error {
    anyhow!(
        "{} is a file of the kernel's (procfs, sysfs, cgroups): wirebench does not write outputs there, not even with --force",
        p.display()
    )
}

fn hard_linked(p: &Path) -> anyhow::Error {
    anyhow!(
        "{} has other hard links; wirebench does not write through links, not even with --force",
        p.display()
    )
}

fn not_a_directory(p: &Path) -> anyhow::Error {
    anyhow!("{} exists and is not a directory", p.display())
}

fn could_not_create(e: Errno, shown: &Path) -> anyhow::Error {
    anyhow::Error::new(std::io::Error::from(e)).context(format!("creating {}", shown.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn msg(e: anyhow::Error) -> String {
        crate::error::one_line(&e)
    }

    #[test]
    fn a_new_file_is_written() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("new.json");
        check(&p, false).unwrap();
        write(&p, b"doc", false).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"doc");
    }

    /// `--output /proc/self/comm --force` once renamed the process: a file of the kernel's
    /// is refused before and when it is opened, and is left as it was.
    #[test]
    fn a_kernel_interface_file_is_never_written() {
        let comm = Path::new("/proc/self/comm");
        let before = std::fs::read(comm).unwrap();
        for p in [comm, Path::new("/proc/self/oom_score_adj")] {
            let e = msg(check(p, true).unwrap_err());
            assert!(e.contains("is a file of the kernel's"), "{e}");
            let e = msg(write(p, b"owned", true).unwrap_err());
            assert!(e.contains("is a file of the kernel's"), "{e}");
        }
        assert_eq!(std::fs::read(comm).unwrap(), before);
    }

    /// A link, to a file or to nothing, is refused with and without force, and what it
    /// points at is left alone.
    #[test]
    fn a_symbolic_link_is_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let l = d.path().join("out.json");
        symlink(&victim, &l).unwrap();
        let dangling = d.path().join("dangling.json");
        symlink(d.path().join("nothing"), &dangling).unwrap();
        for force in [false, true] {
            for p in [&l, &dangling] {
                let e = msg(check(p, force).unwrap_err());
                assert!(e.contains("is a symbolic link"), "{e}");
                let e = msg(write(p, b"x", force).unwrap_err());
                assert_eq!(
                    e,
                    format!("{} is a symbolic link; wirebench does not write through links, not even with --force", p.display())
                );
            }
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!d.path().join("nothing").exists());
        // "link/" would name the link's target: the slash is dropped first.
        let slashed = PathBuf::from(format!("{}/", l.display()));
        assert!(msg(write(&slashed, b"x", true).unwrap_err()).contains("symbolic link"));
    }

    #[test]
    fn an_existing_file_is_replaced_only_with_force() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        std::fs::write(&p, b"an older and longer document").unwrap();
        let e = msg(write(&p, b"x", false).unwrap_err());
        assert_eq!(
            e,
            format!(
                "{} exists; wirebench does not replace files (use --force to replace it)",
                p.display()
            )
        );
        assert!(msg(check(&p, false).unwrap_err()).contains("exists"));
        assert_eq!(std::fs::read(&p).unwrap(), b"an older and longer document");
        check(&p, true).unwrap();
        write(&p, b"new", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    /// Force replaces a regular file of its own only: not a second name of another file,
    /// a directory or a FIFO (opened without waiting for a reader).
    #[test]
    fn force_replaces_regular_files_only() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let hard = d.path().join("hard.json");
        std::fs::hard_link(&victim, &hard).unwrap();
        let e = msg(write(&hard, b"x", true).unwrap_err());
        assert!(e.contains("has other hard links"), "{e}");
        assert!(msg(check(&hard, true).unwrap_err()).contains("hard links"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(msg(write(&sub, b"x", true).unwrap_err()).contains("not a regular file"));
        assert!(msg(write(&sub, b"x", false).unwrap_err()).contains("exists"));

        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        assert!(msg(write(&fifo, b"x", true).unwrap_err()).contains("not a regular file"));
        assert!(msg(check(&fifo, true).unwrap_err()).contains("not a regular file"));
    }

    #[test]
    fn a_directory_output_is_checked_before_anything_is_written() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("a").join("report");
        let files = vec![
            ("index.html".to_owned(), b"page".to_vec()),
            ("fig.svg".to_owned(), b"<svg/>".to_vec()),
        ];
        check_dir(&out, ["index.html", "fig.svg"], false).unwrap();
        let written = OutDir::open(&out, false)
            .unwrap()
            .write_files(&files)
            .unwrap();
        assert_eq!(written, [out.join("index.html"), out.join("fig.svg")]);

        // Again without force: the first file that exists is named, nothing is written.
        let again = vec![
            ("new.svg".to_owned(), b"x".to_vec()),
            ("index.html".to_owned(), b"x".to_vec()),
        ];
        let e = msg(OutDir::open(&out, false)
            .unwrap()
            .write_files(&again)
            .unwrap_err());
        assert!(
            e.starts_with(&format!("{} exists;", out.join("index.html").display())),
            "{e}"
        );
        assert!(!out.join("new.svg").exists());
        assert!(msg(check_dir(&out, ["fig.svg"], false).unwrap_err()).contains("exists"));
        // With force: replaced.
        OutDir::open(&out, true)
            .unwrap()
            .write_files(&again)
            .unwrap();
        assert_eq!(std::fs::read(out.join("index.html")).unwrap(), b"x");

        // A link planted inside: refused even with force, and the file before it, which
        // force would replace, is left as it was too.
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::fs::remove_file(out.join("fig.svg")).unwrap();
        symlink(&victim, out.join("fig.svg")).unwrap();
        let e = msg(OutDir::open(&out, true)
            .unwrap()
            .write_files(&files)
            .unwrap_err());
        assert!(e.contains("fig.svg is a symbolic link"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(out.join("index.html")).unwrap(), b"x");
    }

    #[test]
    fn a_directory_output_is_not_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let l = d.path().join("report");
        symlink(&target, &l).unwrap();
        for p in [l.clone(), PathBuf::from(format!("{}/", l.display()))] {
            for force in [false, true] {
                let e = msg(OutDir::open(&p, force).err().unwrap());
                assert_eq!(
                    e,
                    format!("{} is a symbolic link; wirebench does not write through links, not even with --force", l.display())
                );
                assert!(msg(check_dir(&p, ["x"], force).unwrap_err()).contains("symbolic link"));
            }
        }
        let file = d.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(msg(OutDir::open(&file, true).err().unwrap()).contains("is not a directory"));
        assert!(std::fs::read_dir(&target).unwrap().next().is_none());
    }
}
