//! Where a run goes when the results database cannot take it (a full disk, a read-only file,
//! an I/O error): its whole result document, in a new file that `wirebench import` reads. The
//! database's own directory is tried first (where its user looks for results), then the
//! temporary directory, then the current one, since the database's disk is likely the full
//! one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The directories a recovery file is tried in, in order and each once: the database's,
/// `tmp` ($TMPDIR, else /tmp), then `cwd`. Relative ones are made absolute against `cwd`, so
/// that the name printed can be used from anywhere.
pub fn places(db_path: &Path, tmp: Option<PathBuf>, cwd: Option<PathBuf>) -> Vec<PathBuf> {
    let db_dir = match db_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in [Some(db_dir), tmp, cwd.clone()].into_iter().flatten() {
        if dir.as_os_str().is_empty() {
            continue;
        }
        let dir = match &cwd {
            Some(c) if dir.is_relative() => c.join(dir),
            _ => dir,
        };
        // "/tmp/./" and "/tmp" are one place: compared by their components.
        let dir: PathBuf = dir.components().collect();
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// [`places`] for this process: $TMPDIR (or /tmp) and the current directory.
pub fn places_here(db_path: &Path) -> Vec<PathBuf> {
    let tmp = std::env::var_os("TMPDIR")
        .filter(|t| !t.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    places(db_path, Some(tmp), std::env::current_dir().ok())
}

/// "wirebench-recovery-20260101T120000123Z-4242": the time the file is written (UTC, to
/// the millisecond) and the process, so that two runs never pick the same name.
pub fn stem() -> String {
    let time: String = crate::env::now_rfc3339()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("wirebench-recovery-{time}-{}", std::process::id())
}

/// Names tried in one directory before moving on: `stem.json`, then `stem-2.json` and on,
/// should a file of that name be there already.
const NAMES_PER_PLACE: u32 = 20;

/// Why no place took the document: each place with its error.
#[derive(Debug)]
pub struct NowhereWritable(pub Vec<(PathBuf, io::Error)>);

impl std::fmt::Display for NowhereWritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self
            .0
            .iter()
            .map(|(p, e)| format!("{}: {e}", p.display()))
            .collect();
        write!(f, "{}", each.join("; "))
    }
}

/// Writes `doc` whole into a new file `stem[-k].json` in the first of `dirs` that takes it,
/// and returns its path. A file is only ever created, never replaced, and a link in its place
/// is not followed; a file that could not be written whole (the disk filled under it) is
/// removed before the next place is tried.
pub fn write_first(dirs: &[PathBuf], stem: &str, doc: &[u8]) -> Result<PathBuf, NowhereWritable> {
    let mut failed = Vec::new();
    for dir in dirs {
        match write_in(dir, stem, doc) {
            Ok(path) => return Ok(path),
            Err(e) => failed.push((dir.clone(), e)),
        }
    }
    Err(NowhereWritable(failed))
}

fn write_in(dir: &Path, stem: &str, doc: &[u8]) -> io::Result<PathBuf> {
    let mut last = None;
    for k in 1..=NAMES_PER_PLACE {
        let name = if k == 1 {
            format!("{stem}.json")
        } else {
            format!("{stem}-{k}.json")
        };
        let path = dir.join(name);
        match write_new(&path, doc) {
            Ok(()) => return Ok(path),
            // Taken (by a file or a link of that name): another name, same place.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free file name")))
}

/// Creates `path` (never an existing file, never through a link), writes `doc`, and syncs the
/// file and its directory, so that the name printed is there and whole after a crash too.
/// Readable by its owner only: a file in a shared /tmp should not show others the hosts and
/// command lines a result names.
fn write_new(path: &Path, doc: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let written = f
        .write_all(doc)
        .and_then(|()| f.flush())
        .and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        // Half a document imports as nothing: it must not be taken for the recovery file.
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_go_from_the_database_to_tmp_to_here_each_once() {
        let cwd = Some(PathBuf::from("/home/u"));
        assert_eq!(
            places(Path::new("/data/r.db"), Some("/tmp".into()), cwd.clone()),
            vec![
                PathBuf::from("/data"),
                PathBuf::from("/tmp"),
                PathBuf::from("/home/u")
            ]
        );
        // A bare file name lives in the current directory; an empty $TMPDIR is none.
        assert_eq!(
            places(Path::new("r.db"), Some("".into()), cwd.clone()),
            vec![PathBuf::from("/home/u")]
        );
        assert_eq!(
            places(Path::new("sub/r.db"), Some("/tmp/./".into()), cwd.clone()),
            vec![
                PathBuf::from("/home/u/sub"),
                PathBuf::from("/tmp"),
                PathBuf::from("/home/u")
            ]
        );
        assert_eq!(
            places(Path::new("/tmp/r.db"), Some("/tmp".into()), None),
            vec![PathBuf::from("/tmp")]
        );
    }

    #[test]
    fn the_document_lands_whole_in_the_first_place_that_takes_it() {
        let d = tempfile::tempdir().unwrap();
        // Not a directory, and a directory that does not exist: both passed over.
        let file = d.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let missing = d.path().join("missing");
        let good = d.path().join("good");
        std::fs::create_dir(&good).unwrap();
        let dirs = vec![file.join("below"), missing.clone(), good.clone()];
        let path = write_first(&dirs, "wirebench-recovery-t-1", b"{\"doc\": 1}\n").unwrap();
        assert_eq!(path, good.join("wirebench-recovery-t-1.json"));
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"doc\": 1}\n");
        assert!(!missing.exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn no_file_or_link_of_that_name_is_overwritten_or_followed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_owned();
        std::fs::write(dir.join("s.json"), "earlier").unwrap();
        let target = dir.join("target");
        std::fs::write(&target, "not yours").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("s-2.json")).unwrap();
        // A dangling link too: create_new must not create its target.
        let dangling = dir.join("nowhere");
        std::os::unix::fs::symlink(&dangling, dir.join("s-3.json")).unwrap();
        let path = write_first(std::slice::from_ref(&dir), "s", b"{}").unwrap();
        assert_eq!(path, dir.join("s-4.json"));
        assert_eq!(
            std::fs::read_to_string(dir.join("s.json")).unwrap(),
            "earlier"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "not yours");
        assert!(!dangling.exists());
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    }

    #[test]
    fn nowhere_writable_names_every_place_it_tried() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        let e = write_first(&[a.clone(), b.clone()], "s", b"{}").unwrap_err();
        assert_eq!(e.0.len(), 2);
        let text = e.to_string();
        assert!(
            text.contains(&a.display().to_string()) && text.contains(&b.display().to_string()),
            "{text}"
        );
        assert!(write_first(&[], "s", b"{}").is_err());
    }

    #[test]
    fn stems_are_file_names_of_the_time_and_the_process() {
        let s = stem();
        assert!(s.starts_with("wirebench-recovery-"), "{s}");
        assert!(s.ends_with(&format!("-{}", std::process::id())), "{s}");
        assert!(
            s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{s}"
        );
    }
}
