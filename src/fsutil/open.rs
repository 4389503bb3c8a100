//! Opening a file the runner reads from a folder teammates may write in, without following
//! a link out of it: a report in a teammate's folder, a file a row names, a log the live page
//! shows.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

/// Open `path` for reading without following a link, and only if it is a plain file: what
/// the runner reads from a teammate's folder (its report). `Ok(None)` when there is nothing
/// there.
///
/// Errors: it is a link, a folder, a device or a pipe (a teammate's trick, or a mistake), or
/// it cannot be opened.
pub(crate) fn open_plain_file(path: &Path) -> std::io::Result<Option<File>> {
    Ok(open_plain_file_with_meta(path)?.map(|(file, _)| file))
}

/// [`open_plain_file`] with the file's metadata, read once to check its kind: a caller that
/// needs its size asks no second `fstat`.
///
/// Errors: as [`open_plain_file`].
pub(crate) fn open_plain_file_with_meta(
    path: &Path,
) -> std::io::Result<Option<(File, fs::Metadata)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: the last component is a link.
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(std::io::Error::other("it is a link, not a file"));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("it is not a plain file"));
    }
    Ok(Some((file, meta)))
}

/// Open `rel` for reading inside `dir`: links are followed only while they stay inside it
/// (`openat2` with `RESOLVE_BENEATH`, no `/proc` magic links), and only a plain file is
/// opened — what the runner reads from a batch folder its teammates may write in (a file a
/// row names, issue 27): a teammate that replaced `docs/a.md` by a link to `~/.ssh/id_rsa`
/// must not get that key into another item's prompt. Where the kernel has no `openat2`
/// (before Linux 5.6), the real path is checked to lie inside `dir` and the last component
/// is opened without following a link.
///
/// Errors: `EXDEV` when `rel` (or a link on its way) leads outside `dir`, `ELOOP` when the
/// fallback meets a link as the last component, `NotFound`, and "not a plain file" for a
/// folder, pipe or device.
pub(crate) fn open_beneath(dir: &Path, rel: &Path) -> std::io::Result<File> {
    let file = open_beneath_raw(dir, rel, false)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("it is not a plain file"));
    }
    Ok(file)
}

/// [`open_beneath`] following no link at all, not even one that stays inside `dir`
/// (`RESOLVE_NO_SYMLINKS`): what the live page reads from a team workspace (a log), where a
/// link is never the runner's.
///
/// Errors: as [`open_beneath`]; `ELOOP` for any link on the way.
pub(crate) fn open_beneath_no_links(dir: &Path, rel: &Path) -> std::io::Result<File> {
    let file = open_beneath_raw(dir, rel, true)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("it is not a plain file"));
    }
    Ok(file)
}

#[cfg(target_os = "linux")]
fn open_beneath_raw(dir: &Path, rel: &Path, no_links: bool) -> std::io::Result<File> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let root = File::open(dir)?;
    let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
    if no_links {
        resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
    }
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY)
        .resolve(resolve);
    match nix::fcntl::openat2(&root, rel, how) {
        Ok(fd) => Ok(File::from(fd)),
        // No openat2 (an old kernel, or a seccomp filter that refuses it).
        Err(nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) => open_checked(dir, rel),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_beneath_raw(dir: &Path, rel: &Path, _no_links: bool) -> std::io::Result<File> {
    open_checked(dir, rel)
}

/// [`open_beneath`] without `openat2`: the real path must lie inside `dir`, and the last
/// component is not a link.
fn open_checked(dir: &Path, rel: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let root = fs::canonicalize(dir)?;
    let path = dir.join(rel);
    let parent = path.parent().unwrap_or(dir);
    let real_parent = fs::canonicalize(parent)?;
    if !real_parent.starts_with(&root) || rel.is_absolute() {
        return Err(std::io::Error::from_raw_os_error(nix::libc::EXDEV));
    }
    let name = path.file_name().unwrap_or_default();
    OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(real_parent.join(name))
}
