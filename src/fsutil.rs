//! File-system helpers: atomic file replacement, private directories (DESIGN §6), lock files
//! that name their holder, and path resolution shared by every command.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::holder::{Holder, this_host};

mod open;
pub(crate) use open::{
    open_beneath, open_beneath_no_links, open_plain_file, open_plain_file_with_meta,
};

/// Replace `path` with `bytes` atomically: write a temp file in the same folder, fsync it,
/// rename it over `path`, fsync the folder. A reader sees the old or the new file, never a
/// mix; on any error the old file is untouched and the temp file is removed.
///
/// Errors: [`Error::Io`] (exit 3) naming the path (permission denied, disk full, ...).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, true, None, |w| w.write_all(bytes))
}

/// Replace `path` atomically with `bytes`, without waiting for the disk: readers still see
/// the old or the new file, never a mix, but a power loss may keep the old one. For live
/// snapshots (`team.json`) rewritten every half second, where durability is the journal's job.
///
/// Errors: [`Error::Io`] (exit 3) naming the path.
pub(crate) fn write_atomic_fast(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, false, None, |w| w.write_all(bytes))
}

/// Like [`write_atomic`], streaming: `fill` writes the new content into a buffered writer on
/// the temp file. Used for outputs too large to build in memory.
///
/// Errors: [`Error::Io`] (exit 3) naming the path; the old file is untouched.
pub(crate) fn replace_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    replace(path, true, None, fill)
}

/// Like [`replace_with`], mode 0600 and without waiting for the disk: for caches that are
/// checked when read (`ledger.bin`), where a power loss may keep the old file.
///
/// Errors: [`Error::Io`] (exit 3) naming the path; the old file is untouched.
pub(crate) fn replace_cache(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    replace(path, false, Some(0o600), fill)
}

/// Like [`write_atomic`], the file private to its owner (mode 0600) from its first byte on:
/// for records that may quote what agents and their CLIs said (a team's archive).
///
/// Errors: [`Error::Io`] (exit 3) naming the path; the old file is untouched.
pub(crate) fn write_atomic_private(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, true, Some(0o600), |w| w.write_all(bytes))
}

/// The name prefix of the runner's temporary files beside the files it replaces; the
/// writer's pid follows it (`.runner-tmp-<pid>-<random>`).
pub(crate) const TEMP_PREFIX: &str = ".runner-tmp-";

/// A temporary file younger than this is never swept (between its creation and its lock)
/// while its writer may be alive.
const TEMP_SWEEP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the temporary file named `name` was made by a process that no longer exists:
/// its name carries the writer's pid ([`TEMP_PREFIX`]) and `/proc` has no such process.
/// False for a name without a pid (older runners') and for this process's own.
fn writer_gone(name: &str) -> bool {
    let pid = name
        .strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.split_once('-'))
        .and_then(|(pid, _)| pid.parse::<u32>().ok());
    pid.is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists())
}

/// Remove the runner's temporary files in `dir` that an atomic replace killed half-way left
/// behind ([`TEMP_PREFIX`]: those whose writer is dead at once, others once older than a
/// minute; in both cases locked by no writer — a runner writing one holds its lock).
/// Entries are looked at without following links, and a link or anything but a plain file
/// is left alone. Returns how many were removed; best effort.
pub(crate) fn sweep_temporaries(dir: &Path) -> usize {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut removed = 0;
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(TEMP_PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > TEMP_SWEEP_AGE);
        if !meta.file_type().is_file() || !(old || writer_gone(&name)) {
            continue;
        }
        let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc_nofollow())
            .open(&path)
        else {
            continue;
        };
        let same = file
            .metadata()
            .is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev());
        if same && file.try_lock().is_ok() && fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(
            "removed {removed} temporary file(s) left in {}",
            dir.display()
        );
    }
    removed
}

/// `O_NOFOLLOW | O_NONBLOCK` for `OpenOptionsExt::custom_flags`.
fn libc_nofollow() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

/// Temp file in the same folder, `fill`, then (when `durable`) fsync, rename, fsync the
/// folder. The new file gets `mode`, else the replaced file's permissions, else 0666 less
/// the umask.
fn replace(
    path: &Path,
    durable: bool,
    mode: Option<u32>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create a temporary file in", dir, e))?;
    // Held while it is written: [`sweep_temporaries`] leaves a locked one alone.
    let _ = tmp.as_file().try_lock();
    use std::os::unix::fs::PermissionsExt;
    match fs::metadata(path) {
        _ if let Some(mode) = mode => {
            let _ = tmp
                .as_file()
                .set_permissions(fs::Permissions::from_mode(mode));
        }
        // Keep the permissions of the file we replace.
        Ok(meta) => {
            let _ = tmp.as_file().set_permissions(meta.permissions());
        }
        // A new file gets the mode any program would give it (0666 less the umask), not the
        // temporary file's private 0600: outputs are for sharing.
        Err(_) => {
            let mode = 0o666 & !umask();
            let _ = tmp
                .as_file()
                .set_permissions(fs::Permissions::from_mode(mode));
        }
    }
    {
        let mut w = std::io::BufWriter::new(tmp.as_file());
        fill(&mut w).map_err(|e| Error::io("write", path, e))?;
        w.flush().map_err(|e| Error::io("write", path, e))?;
    }
    if durable {
        tmp.as_file()
            .sync_all()
            .map_err(|e| Error::io("sync", path, e))?;
    }
    tmp.persist(path)
        .map_err(|e| Error::io("replace", path, e.error))?;
    if durable && let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An exclusive `flock` on a lock file that names its holder (its pid is written inside);
/// released when dropped, and by the OS when the holder dies, so a lock left by a dead
/// process is taken over without ceremony. The run lock and the store lock are both one.
#[derive(Debug)]
pub(crate) struct PidLock {
    file: File,
}

impl Drop for PidLock {
    /// Empty the file before the lock goes (the OS releases the `flock` as the file closes):
    /// between holders it names no one, so a command that only took the lock leaves the
    /// file as it found it.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// Try once to take the lock on `path` (created with mode 0600 if missing). `Ok(Err(pid))`
/// when another process holds it: its pid, when it wrote one.
///
/// Errors: [`Error::Io`] (exit 3) when the file cannot be opened or locked.
pub(crate) fn try_pid_lock(path: &Path) -> Result<std::result::Result<PidLock, Holder>> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("open the lock", path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Ok(Err(Holder::read(&text)));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", path, e)),
    }
    let _ = file.set_len(0);
    let _ = file.seek(SeekFrom::Start(0));
    let _ = write!(file, "{} {}", std::process::id(), this_host());
    let _ = file.flush();
    Ok(Ok(PidLock { file }))
}

/// The process's umask, read from `/proc/self/status` (setting it to read it would race with
/// other threads creating files); `0o022` when it cannot be read.
fn umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Set a team workspace `dir` back to private, as it was made: the folder and its
/// `teammates/` folder 0700, the runner's own files in it (journal, team.json, batch.json,
/// lock) 0600. Landlock confines a teammate's writes but not `chmod`, so a teammate may have
/// opened them to other users. Best effort: a mode that cannot be set stays.
pub(crate) fn restore_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        let _ = fs::set_permissions(p, fs::Permissions::from_mode(mode));
    };
    set(dir, 0o700);
    set(&dir.join("teammates"), 0o700);
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            set(&e.path(), 0o600);
        }
    }
}

/// Remove folder `dir` and everything in it, never following a link (std's `remove_dir_all`
/// works on descriptors). A folder inside that its owner made unreadable (`chmod 000`, a
/// teammate's doing) is made 0700 again and the removal tried once more.
///
/// Errors: it still cannot be removed.
pub(crate) fn remove_tree(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match fs::remove_dir_all(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    fn open_up(dir: &Path) {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            // symlink_metadata: a link to a folder is not a folder here.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
    open_up(dir);
    fs::remove_dir_all(dir)
}

/// Create `dir` and its parents; the leaf is made private (mode 0700) since team workspaces
/// hold logs that can contain secrets. Returns whether this call made `dir` (`false`: it
/// was there already), so a caller knows a new folder is empty.
pub(crate) fn create_private_dir(dir: &Path) -> Result<bool> {
    use std::os::unix::fs::DirBuilderExt;
    let create = || fs::DirBuilder::new().mode(0o700).create(dir);
    // One mkdir in the common case (the parent exists); the parents only when it is missing.
    let made = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match dir.parent() {
            Some(parent) => {
                fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
                create()
            }
            None => Err(e),
        },
        other => other,
    };
    match made {
        Ok(()) => Ok(true),
        Err(e)
            if e.kind() == std::io::ErrorKind::AlreadyExists
                && fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            // Never through a link a teammate may have planted (its chmod would land on
            // whatever the link names).
            Err(Error::io(
                "use",
                dir,
                std::io::Error::other(
                    "it is a link; the runner does not follow links in the folders it keeps",
                ),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {
            // A folder made earlier (by hand, by an older runner, with another umask) is made
            // as private as a new one.
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::metadata(dir).map_err(|e| Error::io("read", dir, e))?;
            if meta.permissions().mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| Error::io("make private", dir, e))?;
            }
            Ok(false)
        }
        Err(e) => Err(Error::io("create", dir, e)),
    }
}

/// Create a private file (mode 0600) for writing, replacing whatever `path` named: a new
/// file every time, never one opened through a link (issue 25: a teammate that planted its
/// log as a link to a sibling's report made the runner write that report). An entry at
/// `path` is removed (a link itself, not what it points at; a hard link only loses this
/// name) and the file made again: it is always made with `O_CREAT | O_EXCL | O_NOFOLLOW`.
///
/// Errors: the entry cannot be removed, or something was made at `path` in between.
pub(crate) fn create_private_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .mode(0o600)
            .open(path)
    };
    // Most files are new: one syscall, not an `unlink` that finds nothing first.
    match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    create()
}

/// [`create_private_file`] holding `bytes`: how the runner writes its own records in a
/// teammate's folder (a prompt, a held log, an `[env] files` file).
///
/// Errors: as [`create_private_file`], or the write failed.
pub(crate) fn write_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    create_private_file(path)?.write_all(bytes)
}

/// Resolve `p` against `base` unless it is absolute.
pub(crate) fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

/// The absolute form of `p` (relative to the current directory) with no `.` or `..` left in
/// it: the part up to its last `..` is taken as the real folder it names ([`real_path`]: a
/// `..` after a symlink goes where the system goes), the rest joined as written — so
/// `-o ../x/out.csv` is `/…/x/out.csv` and every path handed to agents (`{workspace}`,
/// `RUNNER_REPORT`, the prompt) is one they match their own normalised paths against (issue
/// 56: OpenCode's permission rule for `{workspace}/*` never matched a path with `..`). A
/// path without `..` is not looked up on disk (no symlink resolved).
pub(crate) fn absolute(p: &Path) -> PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let parts: Vec<Component<'_>> = abs.components().collect();
    let Some(last_up) = parts.iter().rposition(|c| *c == Component::ParentDir) else {
        return abs;
    };
    let head: PathBuf = parts[..=last_up].iter().collect();
    let mut out = real_path(&head);
    for part in &parts[last_up + 1..] {
        out.push(part);
    }
    out
}

/// The path a file `p` is reached by once `.`, `..` and symlinks are resolved: the file's own
/// canonical path when it exists, else the canonical path of its nearest existing ancestor
/// with the rest of `p` joined to it (`..` and `.` in the rest taken lexically): a file or
/// folder about to be made — a store's `teams/…` reached through a symlink resolves through
/// it, and `work/../s3/teams/x` is not inside `work` (issue 25). Else its absolute form.
pub(crate) fn real_path(p: &Path) -> PathBuf {
    use std::path::Component;
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let parts: Vec<Component<'_>> = abs.components().collect();
    for known in (1..parts.len()).rev() {
        let ancestor: PathBuf = parts[..known].iter().collect();
        let Ok(mut out) = ancestor.canonicalize() else {
            continue;
        };
        for part in &parts[known..] {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(name) => out.push(name),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        return out;
    }
    abs
}

/// Whether `a` and `b` name the same file: the same path after resolving `.`, `..` and
/// symlinks (see [`real_path`]), or two names (hard links) of one existing file.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if real_path(a) == real_path(b) {
        return true;
    }
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.is_file() && x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// How text (a prompt, which is UTF-8) can name the file `path` exactly for a process working
/// in `from` (both absolute): the absolute path when it is UTF-8, else the relative path from
/// `from` when that is UTF-8 (`../../teammates/1-a/report.json`). `None` when neither is:
/// the text cannot name it.
pub(crate) fn name_in_text(path: &Path, from: &Path) -> Option<String> {
    use std::path::Component;
    if let Some(s) = path.to_str() {
        return Some(s.to_owned());
    }
    let p: Vec<Component<'_>> = path.components().collect();
    let f: Vec<Component<'_>> = from.components().collect();
    let common = p.iter().zip(&f).take_while(|(a, b)| a == b).count();
    // `..` out of a folder that is itself reached through `..` would not be exact.
    if common == 0
        || f[common..]
            .iter()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let mut rel = PathBuf::new();
    for _ in common..f.len() {
        rel.push("..");
    }
    for c in &p[common..] {
        rel.push(c.as_os_str());
    }
    rel.to_str().map(str::to_owned)
}

/// What [`check_replaceable`] reads of a file to tell whose it is: its first
/// [`REPLACEABLE_FIRST`] bytes, and on to the end of its first line, at most this many.
pub(crate) const REPLACEABLE_HEAD: u64 = 64 << 20;
/// See [`REPLACEABLE_HEAD`].
pub(crate) const REPLACEABLE_FIRST: u64 = 64 << 10;

/// Check, before anything runs, that the file a flag names may be replaced: it does not
/// exist, is empty, or `ours` recognises its bytes as an earlier file of the same kind (an
/// earlier output, report, trace). A slip of the flag onto someone's notes or an input
/// must not destroy it.
///
/// Errors: exit 2 naming the flag, the file and `kind` (`an output CSV of the runner`).
/// `ours` sees the file's first bytes ([`REPLACEABLE_HEAD`]).
pub(crate) fn check_replaceable(
    path: &Path,
    flag: &str,
    kind: &str,
    ours: impl Fn(&[u8]) -> bool,
) -> Result<()> {
    if path.is_dir() {
        return Err(Error::output_refused(
            Some(flag),
            path,
            "that is a folder; give the path of a file (in it, or elsewhere)",
        ));
    }
    // Whose file it is shows in its first bytes (a header line, a root element): a
    // million-row output is not read whole for that.
    let head = fs::File::open(path).and_then(|f| {
        let mut bytes = Vec::new();
        let mut r = std::io::BufReader::new(std::io::Read::take(f, REPLACEABLE_HEAD));
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut r, REPLACEABLE_FIRST),
            &mut bytes,
        )?;
        if !bytes.contains(&b'\n') {
            std::io::BufRead::read_until(&mut r, b'\n', &mut bytes)?;
        }
        Ok(bytes)
    });
    match head {
        Ok(bytes) if !bytes.is_empty() && !ours(&bytes) => Err(Error::output_refused(
            Some(flag),
            path,
            format!("the file exists and is not {kind}; choose another file or remove it first"),
        )),
        _ => Ok(()),
    }
}

/// Why this process cannot make files in folder `dir` (`Permission denied`, `Read-only file
/// system`), or `None` when it can — asked without writing anything (a refused run changes
/// nothing on disk, not even a folder's modification time): `access(2)` for write and search
/// permission, the mount's read-only flag (`statvfs`), and the file system's type, since
/// root passes `access` on the kernel's `/proc`, `/sys` and cgroup folders, where no file
/// can be made.
pub(crate) fn cannot_write_in(dir: &Path) -> Option<String> {
    use nix::sys::statfs::{
        CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, PROC_SUPER_MAGIC, SYSFS_MAGIC,
    };
    use nix::sys::statvfs::FsFlags;
    use nix::unistd::AccessFlags;
    if let Err(e) = nix::unistd::access(dir, AccessFlags::W_OK | AccessFlags::X_OK) {
        return Some(e.desc().to_string());
    }
    if nix::sys::statvfs::statvfs(dir).is_ok_and(|v| v.flags().contains(FsFlags::ST_RDONLY)) {
        return Some(nix::errno::Errno::EROFS.desc().to_string());
    }
    let kernel = [
        PROC_SUPER_MAGIC,
        SYSFS_MAGIC,
        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC,
    ];
    match nix::sys::statfs::statfs(dir) {
        Ok(fs) if kernel.contains(&fs.filesystem_type()) => {
            Some("a kernel file system (like /proc or /sys): no files can be made there".into())
        }
        _ => None,
    }
}

/// Check that the folder a flag's file goes into can be written, or made and written,
/// before anything runs (a JUnit file refused after a paid batch has run would waste the
/// batch). A folder that is not there yet is made when the file is written
/// ([`make_parent`]), as most tools do.
///
/// Errors: exit 2 naming the flag and the folder.
pub(crate) fn check_parent(path: Option<&Path>, flag: &str) -> Result<()> {
    let Some(p) = path else { return Ok(()) };
    if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') {
        return Err(Error::output_refused(
            Some(flag),
            p,
            "that is a folder; give the path of a file (in it, or elsewhere)",
        ));
    }
    let parent = absolute(p).parent().map(Path::to_owned).unwrap_or_default();
    match cannot_make_or_write(&parent) {
        None => Ok(()),
        Some(why) => Err(Error::output_refused(
            Some(flag),
            p,
            format!("{why}; choose another path"),
        )),
    }
}

/// [`check_parent`] for each `(path, flag)`; every problem in one error (one per line).
///
/// Errors: exit 2 naming each flag and folder at fault.
pub(crate) fn check_parents(outputs: &[(Option<&Path>, &str)]) -> Result<()> {
    let mut problems: Vec<Error> = outputs
        .iter()
        .filter_map(|(p, flag)| check_parent(*p, flag).err())
        .collect();
    match problems.len() {
        0 => Ok(()),
        1 => Err(problems.remove(0)),
        _ => Err(Error::Usage(
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\nerror: "),
        )),
    }
}

/// Why folder `dir` cannot hold new files, or `None` when it can: it is a folder this
/// process can write, or it is not there yet and the nearest folder above it that is can be
/// written (so that it can be made). The text names the folder at fault.
pub(crate) fn cannot_make_or_write(dir: &Path) -> Option<String> {
    let mut at = dir;
    loop {
        match fs::metadata(at) {
            Ok(m) if m.is_dir() => {
                return cannot_write_in(at)
                    .map(|why| format!("cannot write in the folder {} ({why})", at.display()));
            }
            Ok(_) => return Some(format!("{} is a file, not a folder", at.display())),
            // Not there, or something above it is a file: look further up.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent() {
                    Some(up) if !up.as_os_str().is_empty() => at = up,
                    _ => return Some(format!("the folder {} cannot be made", dir.display())),
                }
            }
            Err(e) => return Some(format!("cannot look at {}: {e}", at.display())),
        }
    }
}

/// Make the folder `path` goes into, with its missing parents, for an output the user named
/// (`--junit reports/j.xml`). Its absence was checked by [`check_parent`] before the run.
///
/// Errors: [`Error::Io`] (exit 3) naming the folder.
pub(crate) fn make_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            fs::create_dir_all(dir).map_err(|e| Error::io("create the folder", dir, e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_file_whose_writer_died_is_swept_at_once_others_only_when_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        // No process has a pid above the kernel's limit (4194304 at most).
        let dead = dir.path().join(format!("{TEMP_PREFIX}4294967-abc"));
        let mine = dir.path().join(format!("{TEMP_PREFIX}{me}-abc"));
        let legacy = dir.path().join(format!("{TEMP_PREFIX}abcdef"));
        for p in [&dead, &mine, &legacy] {
            std::fs::write(p, "half").expect("write");
        }
        assert_eq!(sweep_temporaries(dir.path()), 1);
        assert!(!dead.exists(), "its writer is gone");
        assert!(
            mine.exists() && legacy.exists(),
            "young, writer alive or unknown"
        );
    }

    #[test]
    fn a_path_to_be_made_resolves_through_its_nearest_existing_ancestor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().canonicalize().expect("real");
        fs::create_dir(real.join("work")).expect("work");
        fs::create_dir(real.join("work/s")).expect("s");
        std::os::unix::fs::symlink(real.join("work/s"), real.join("link")).expect("link");
        // Two levels that do not exist yet, behind a link: inside `work`.
        assert_eq!(
            real_path(&real.join("link/teams/todo-resolve-1")),
            real.join("work/s/teams/todo-resolve-1")
        );
        // `..` out of `work` is outside it.
        assert_eq!(
            real_path(&real.join("work/../s3/teams/x")),
            real.join("s3/teams/x")
        );
        assert_eq!(real_path(&real.join("work/s")), real.join("work/s"));
    }

    #[test]
    fn files_in_a_teammates_folder_are_never_written_or_read_through_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim.json");
        fs::write(&victim, "the victim's").expect("victim");
        let planted = dir.path().join("attempt-1.stderr.log");
        std::os::unix::fs::symlink(&victim, &planted).expect("link");
        // Written: the link is replaced by a file of the runner's own.
        let mut f = create_private_file(&planted).expect("created");
        f.write_all(b"log").expect("write");
        assert_eq!(fs::read_to_string(&victim).expect("victim"), "the victim's");
        assert!(
            fs::symlink_metadata(&planted)
                .expect("meta")
                .file_type()
                .is_file()
        );
        // Read: a link, a folder or a pipe is refused; nothing there is no error.
        let report = dir.path().join("report.json");
        std::os::unix::fs::symlink(&victim, &report).expect("link");
        assert!(open_plain_file(&report).is_err());
        assert!(open_plain_file(dir.path()).is_err());
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        assert!(
            open_plain_file(&fifo).is_err(),
            "a pipe never blocks the runner"
        );
        assert!(
            open_plain_file(&dir.path().join("none"))
                .expect("no error")
                .is_none()
        );
        assert!(open_plain_file(&victim).expect("plain").is_some());
        // With its metadata: the size a reader sizes its buffer by, the link still refused.
        let (_, meta) = open_plain_file_with_meta(&victim)
            .expect("plain")
            .expect("there");
        assert_eq!(meta.len(), fs::metadata(&victim).expect("meta").len());
        assert!(open_plain_file_with_meta(&report).is_err());
        // A folder the runner keeps is never one reached through a link.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).expect("dir");
        let tmp = dir.path().join("tmp");
        std::os::unix::fs::symlink(&elsewhere, &tmp).expect("link");
        assert!(create_private_dir(&tmp).is_err());
    }

    /// A lock held from another host (a pod sharing the volume) says so, since its pid means
    /// nothing here; one from this host, or an old file with a pid alone, names the pid.
    #[test]
    fn a_lock_held_from_another_host_says_so() {
        let other = Holder::read("17 shard-worker-2\n");
        assert_eq!(other.pid, Some(17));
        assert_eq!(other.host.as_deref(), Some("shard-worker-2"));
        assert!(
            other
                .to_string()
                .starts_with("on host shard-worker-2, pid 17 there: another machine or container"),
            "{other}"
        );
        let here = Holder::read(&format!("17 {}", this_host()));
        assert_eq!(here.to_string(), "pid 17");
        assert_eq!(Holder::read("17").to_string(), "pid 17");
        assert_eq!(Holder::read("").to_string(), "pid unknown");
    }

    #[test]
    fn a_lock_names_its_holder_while_held_and_no_one_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".lock");
        let held = try_pid_lock(&path).expect("open").expect("free");
        let me = format!("{} {}", std::process::id(), this_host());
        assert_eq!(fs::read_to_string(&path).expect("read"), me);
        assert_eq!(
            try_pid_lock(&path).expect("open").expect_err("held"),
            Holder {
                pid: Some(std::process::id()),
                host: None
            }
        );
        drop(held);
        // Emptied: a command that only took the lock leaves the file as it found it.
        assert_eq!(fs::read_to_string(&path).expect("read"), "");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("out.csv");
        write_atomic(&p, b"one").expect("first write");
        write_atomic(&p, b"two").expect("second write");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).expect("ls").flatten().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn atomic_write_into_missing_dir_is_an_environment_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("nope").join("out.csv");
        let err = write_atomic(&p, b"x").expect_err("must fail");
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        assert_eq!(err.exit_code(), crate::error::EXIT_ENVIRONMENT);
    }

    #[test]
    fn a_path_that_is_not_utf8_is_named_relative_to_where_the_reader_works() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let cafe = Path::new("/t").join(OsStr::from_bytes(b"caf\xe9"));
        let ws = cafe.join("out.runner");
        let report = ws.join("teammates/1-a/report.json");
        assert_eq!(
            name_in_text(Path::new("/t/x.json"), Path::new("/elsewhere")).as_deref(),
            Some("/t/x.json")
        );
        assert_eq!(
            name_in_text(&report, &cafe).as_deref(),
            Some("out.runner/teammates/1-a/report.json")
        );
        assert_eq!(
            name_in_text(&report, &ws.join("worktrees/1-a")).as_deref(),
            Some("../../teammates/1-a/report.json")
        );
        assert_eq!(name_in_text(&report, Path::new("/t")), None);
    }

    #[test]
    fn the_same_file_is_found_through_dot_dot_symlinks_and_hard_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        fs::create_dir(d.join("sub")).expect("sub");
        fs::write(d.join("in.csv"), b"x").expect("in");
        std::os::unix::fs::symlink(d.join("in.csv"), d.join("link.csv")).expect("symlink");
        fs::hard_link(d.join("in.csv"), d.join("hard.csv")).expect("hard link");
        std::os::unix::fs::symlink(d.join("sub"), d.join("dirlink")).expect("dir symlink");
        assert!(same_file(&d.join("in.csv"), &d.join("sub/../in.csv")));
        assert!(same_file(&d.join("in.csv"), &d.join("link.csv")));
        assert!(same_file(&d.join("in.csv"), &d.join("hard.csv")));
        // Files not written yet: the same folder reached two ways.
        assert!(same_file(
            &d.join("sub/new.xml"),
            &d.join("dirlink/new.xml")
        ));
        assert!(!same_file(&d.join("in.csv"), &d.join("sub/in.csv")));
    }

    #[test]
    fn private_dirs_are_made_with_their_parents_once_and_refuse_a_file_in_the_way() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let leaf = dir
            .path()
            .join("teams")
            .join("t")
            .join("teammates")
            .join("1-a");
        // Whether it made the folder: a new one holds nothing an earlier attempt left.
        assert!(create_private_dir(&leaf).expect("with missing parents"));
        assert!(!create_private_dir(&leaf).expect("again: already there"));
        let mode = fs::metadata(&leaf).expect("leaf").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let blocked = dir.path().join("file");
        fs::write(&blocked, b"x").expect("file");
        assert!(create_private_dir(&blocked).is_err());
        assert!(create_private_dir(&blocked.join("sub")).is_err());
    }

    #[test]
    fn a_new_output_gets_the_usual_mode_and_a_replaced_one_keeps_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("out.csv");
        write_atomic(&p, b"a").expect("new");
        let mode = fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask(), "new files follow the umask");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomic(&p, b"b").expect("replace");
        let mode = fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn a_folder_that_already_exists_is_made_private_like_a_new_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("out.runner");
        fs::create_dir(&ws).expect("mkdir");
        fs::set_permissions(&ws, fs::Permissions::from_mode(0o755)).expect("chmod");
        create_private_dir(&ws).expect("existing");
        let mode = fs::metadata(&ws).expect("ws").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn remove_tree_removes_a_folder_its_owner_made_unreadable_and_follows_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("tmp");
        let outside = root.path().join("outside");
        fs::create_dir(&outside).expect("outside");
        fs::write(outside.join("keep"), "x").expect("keep");
        let dir = root.path().join("t");
        fs::create_dir_all(dir.join("zz/inner")).expect("dirs");
        std::os::unix::fs::symlink(&outside, dir.join("link")).expect("link");
        fs::set_permissions(dir.join("zz"), fs::Permissions::from_mode(0o000)).expect("chmod");
        remove_tree(&dir).expect("removed");
        assert!(!dir.exists());
        assert!(
            outside.join("keep").is_file(),
            "nothing behind the link is touched"
        );
    }
}
