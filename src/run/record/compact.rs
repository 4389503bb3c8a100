//! Compacting a completed item (DESIGN §6b): its teammate folder — prompt, attempt logs,
//! report, working context, private `TMPDIR` — becomes one JSON line in the workspace's
//! `completed.jsonl` (the prompt, the tail of the log that explains the last attempt, the
//! working context the agent left) and the folder is removed. A 100,000-row audit then leaves
//! one file and a few KB per completed row instead of six entries each; failed, blocked and
//! timed-out items keep their folder, where a person looks. `--keep-logs` keeps every folder.
//!
//! The report and hand-off fields are not copied: the journal's `item_finished` outcome holds
//! them. The record is written before the folder goes, in one `write` on a file opened with
//! `O_APPEND` (so lines of concurrent teammates never interleave), and a reader takes the last
//! line of an id (a crash between the two leaves the folder, which readers prefer).
//!
//! Everything read from the folder is opened without following links and only as plain files
//! ([`crate::fsutil::open_plain_file`]): the folder is the teammate's to write.
//!
//! The part of a prompt every item shares (the default template's contract and instruction,
//! before `## Your item`: [`crate::prompt::split_at_item`]) is kept once per run, as a
//! [`SharedPart`] line, the second time it is met ([`SharedPrompts`]); records then keep the
//! item's own part and the shared part's key, and [`find`] puts the two together again.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::run::record::folder::TeammateFolder;

/// The record file, in the team workspace.
pub(crate) const FILE_NAME: &str = "completed.jsonl";

/// Bytes of the telling log kept: its end, cut to whole lines (`runner show` prints the last
/// 20 lines of it; `runner logs` all of it).
pub(crate) const LOG_TAIL_BYTES: u64 = 4 * 1024;

/// Bytes of the prompt kept (its beginning); a longer one is cut, `prompt_bytes` says by how
/// much. Prompts are the template and the row's values, a few KB as a rule.
pub(crate) const PROMPT_KEPT_BYTES: u64 = 64 * 1024;

/// Bytes of the working context kept (its beginning).
pub(crate) const WORKING_CONTEXT_KEPT_BYTES: u64 = 16 * 1024;

/// The kept end of one log of the last attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tail {
    /// The log's full size, bytes.
    pub bytes: u64,
    /// How many of its bytes `text` holds (before bytes that are not UTF-8 were replaced).
    #[serde(default)]
    pub kept: u64,
    /// Its last [`LOG_TAIL_BYTES`] at most (lossy UTF-8).
    pub text: String,
}

impl Tail {
    /// Whether `text` is the whole log.
    pub(crate) fn whole(&self) -> bool {
        self.kept >= self.bytes
    }
}

/// One completed item, as `completed.jsonl` keeps it (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Format version (1).
    pub v: u32,
    /// The item's id.
    pub id: String,
    /// The teammate's name (its removed folder's name).
    pub teammate: String,
    /// The last attempt's number: the one the prompt and logs are of.
    pub attempt: u32,
    /// The key (16 hex digits) of the [`SharedPart`] line that begins the prompt, when the
    /// line keeps only the item's own part; [`find`] joins the two and clears this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_shared: Option<String>,
    /// The last attempt's prompt, its first [`PROMPT_KEPT_BYTES`] (lossy UTF-8).
    pub prompt: String,
    /// The prompt's full size, bytes.
    pub prompt_bytes: u64,
    /// Which log explained the attempt (the one outputs named): `stdout` or `stderr`.
    pub log: String,
    /// The kept ends of the logs of each attempt the folder held, by attempt number.
    pub logs: Vec<AttemptLogs>,
    /// The working context the agent left, when it wrote one (not the runner's skeleton).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_context: Option<String>,
}

/// The part of many items' prompts kept once (a line of `completed.jsonl` of its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SharedPart {
    /// Format version (1).
    pub v: u32,
    /// Its key: the FNV-1a of `text`, 16 hex digits.
    pub shared: String,
    /// The text every record naming it begins with.
    pub text: String,
}

/// Most distinct shared parts a run keeps (and tracks before it keeps one): a template of
/// the user's own whose "shared" part differs per item costs no line and little memory.
const SHARED_MAX: usize = 1024;

/// The shared prompt parts of one run: which it met once, which it wrote. A part is written
/// the second time it is met, so a part no two items share is never written on its own.
#[derive(Debug, Default)]
pub(crate) struct SharedPrompts(std::sync::Mutex<SharedState>);

#[derive(Debug, Default)]
struct SharedState {
    met: std::collections::HashSet<u64>,
    written: std::collections::HashSet<u64>,
}

/// How a shared line and the records that use it name a part: its FNV-1a hash, 16 hex
/// digits ([`SharedPart::shared`], [`Record::prompt_shared`]).
fn shared_key(part: &str) -> String {
    format!("{:016x}", crate::hash::fnv(part.as_bytes()))
}

impl SharedPrompts {
    /// The key of `part` ([`shared_key`]) when it is (now) in `file`, written before any
    /// record names it; `None` when it is kept in the record itself (met for the first
    /// time, or too many).
    ///
    /// Errors: the line cannot be written.
    fn share(&self, file: &Path, part: &str) -> std::io::Result<Option<String>> {
        let key = crate::hash::fnv(part.as_bytes());
        // Held while the line is written: no record names a part not yet on disk.
        let mut state = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.written.contains(&key) {
            return Ok(Some(shared_key(part)));
        }
        if !state.met.contains(&key) {
            if state.met.len() < SHARED_MAX {
                state.met.insert(key);
            }
            return Ok(None);
        }
        if state.written.len() >= SHARED_MAX {
            return Ok(None);
        }
        let line = SharedPart {
            v: 1,
            shared: shared_key(part),
            text: part.to_owned(),
        };
        append(file, &line)?;
        state.written.insert(key);
        Ok(Some(line.shared))
    }
}

/// The kept ends of one attempt's two logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptLogs {
    /// The attempt's number.
    pub attempt: u32,
    /// The end of its stdout log; `None` when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Tail>,
    /// The end of its stderr log; `None` when the agent wrote nothing to stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Tail>,
}

impl AttemptLogs {
    /// The kept end of log `stream` (`stdout` or `stderr`).
    pub(crate) fn tail(&self, stream: &str) -> Option<&Tail> {
        match stream {
            "stderr" => self.stderr.as_ref(),
            _ => self.stdout.as_ref(),
        }
    }
}

impl Record {
    /// The kept logs of attempt `n`.
    pub(crate) fn logs_of(&self, n: u32) -> Option<&AttemptLogs> {
        self.logs.iter().find(|l| l.attempt == n)
    }

    /// The kept end of the last attempt's log `stream` (`stdout` or `stderr`).
    pub(crate) fn tail(&self, stream: &str) -> Option<&Tail> {
        self.logs_of(self.attempt)?.tail(stream)
    }
}

/// The numbers of the attempts whose `attempt-N.stdout.log` or `attempt-N.stderr.log` is in
/// teammate folder `dir`, in order (none when there is no folder).
pub(crate) fn logged_attempts(dir: &Path) -> Vec<u32> {
    let mut numbers: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let rest = name.to_str()?.strip_prefix("attempt-")?;
            let n = rest
                .strip_suffix(".stdout.log")
                .or_else(|| rest.strip_suffix(".stderr.log"))?;
            n.parse().ok()
        })
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

/// The ends of the `attempt-N.{stdout,stderr}.log` of teammate folder `dir`, by attempt:
/// attempt `last`'s, and with `fresh.earlier` those of the attempts before it (files the
/// teammate named otherwise are not the runner's). `fresh.stdout` stands for attempt
/// `last`'s stdout log when the runner held it in memory.
fn kept_logs(dir: &Path, last: u32, fresh: &Fresh<'_>) -> Vec<AttemptLogs> {
    let mut numbers = match fresh.earlier {
        true => logged_attempts(dir),
        false => Vec::new(),
    };
    numbers.retain(|n| (1..last).contains(n));
    numbers.push(last);
    numbers
        .into_iter()
        .filter_map(|n| {
            let log = |s: &str| tail(&dir.join(format!("attempt-{n}.{s}.log")), LOG_TAIL_BYTES);
            let stdout = match fresh.stdout {
                Some(bytes) if n == last => Some(tail_of(bytes, LOG_TAIL_BYTES)),
                _ => log("stdout"),
            };
            let stderr = match fresh.no_stderr && n == last {
                true => None,
                false => log("stderr"),
            };
            let logs = AttemptLogs {
                attempt: n,
                stdout,
                stderr,
            };
            (logs.stdout.is_some() || logs.stderr.is_some()).then_some(logs)
        })
        .collect()
}

/// How a [`SharedPart`] line begins (serde writes the fields in their order).
const SHARED_LINE_START: &str = "{\"v\":1,\"shared\":";

/// The record file of workspace `workspace`.
pub(crate) fn path(workspace: &Path) -> PathBuf {
    workspace.join(FILE_NAME)
}

/// Plain file `path` of the teammate's folder, opened for reading, and its size: `None` when
/// there is none, or it is a link, not a plain file, or has another name too (a hard link the
/// teammate made to a file it could read, which would land in the record).
fn open_own(path: &Path) -> Option<(std::fs::File, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (file, meta) = crate::fsutil::open_plain_file_with_meta(path).ok()??;
    (meta.nlink() == 1).then_some((file, meta.len()))
}

/// The first `cap` bytes of plain file `path` and its size ([`open_own`]).
fn head(path: &Path, cap: u64) -> Option<(String, u64)> {
    let (mut file, size) = open_own(path)?;
    // Room for all of it up front: one read, not a dozen growing ones (`Take` gives
    // `read_to_end` no size hint).
    let mut bytes = Vec::with_capacity(size.min(cap) as usize + 1);
    Read::by_ref(&mut file)
        .take(cap)
        .read_to_end(&mut bytes)
        .ok()?;
    Some((String::from_utf8_lossy(&bytes).into_owned(), size))
}

/// The last `cap` bytes of plain file `path` ([`open_own`]) and its size ([`tail_of`]).
fn tail(path: &Path, cap: u64) -> Option<Tail> {
    let (mut file, size) = open_own(path)?;
    let from = size.saturating_sub(cap);
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::with_capacity((size - from) as usize + 1);
    file.take(cap).read_to_end(&mut bytes).ok()?;
    Some(cut_tail(bytes, size, from > 0))
}

/// The last `cap` bytes of a log held in memory ([`cut_tail`]).
fn tail_of(log: &[u8], cap: u64) -> Tail {
    let from = log.len().saturating_sub(cap as usize);
    cut_tail(log[from..].to_vec(), log.len() as u64, from > 0)
}

/// The kept end of a log of `size` bytes whose last bytes are `bytes` (`cut`: not all of
/// them): from a line start when that keeps at least half of them, else from the middle of
/// a line (an agent whose last line is one long JSON result keeps its end).
fn cut_tail(mut bytes: Vec<u8>, size: u64, cut: bool) -> Tail {
    if cut
        && let Some(nl) = bytes.iter().position(|b| *b == b'\n')
        && nl < bytes.len() / 2
    {
        bytes.drain(..=nl);
    }
    Tail {
        bytes: size,
        kept: bytes.len() as u64,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// What a completed item's last attempt has in memory rather than in its folder (the
/// runner hands the prompt over as a descriptor and holds a quick agent's stdout): the
/// record takes these instead of reading files that were never written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fresh<'a> {
    /// The last attempt's prompt; `None`: read `prompt.md`.
    pub prompt: Option<&'a str>,
    /// The last attempt's whole stdout, when its log was not written; `None`: read the log.
    pub stdout: Option<&'a [u8]>,
    /// The last attempt wrote no stderr log: none is looked for.
    pub no_stderr: bool,
    /// The folder may hold logs of attempts before the last (an earlier attempt of this run
    /// or of an earlier run): look for them. Else only the last attempt's are read.
    pub earlier: bool,
}

impl Fresh<'_> {
    /// Nothing in memory: everything is read from the folder (an item whose last attempt
    /// ran in an earlier run, such as one resumed for its verify).
    #[cfg(test)]
    pub(crate) fn from_folder() -> Fresh<'static> {
        Fresh {
            prompt: None,
            stdout: None,
            no_stderr: false,
            earlier: true,
        }
    }
}

/// Compact completed item `id` of teammate folder `folder` in `workspace`: append its
/// [`Record`] (attempt `attempt`, whose telling log is `log`; what the runner still holds of
/// it in `fresh`) to `completed.jsonl`, then remove the folder. Returns the record file,
/// which outputs then name as the item's log.
///
/// Errors: the record cannot be written (the folder is then left as it was).
pub(crate) fn compact(
    workspace: &Path,
    folder: &TeammateFolder,
    id: &str,
    attempt: u32,
    log: &Path,
    fresh: Fresh<'_>,
    shared: &SharedPrompts,
) -> Result<PathBuf> {
    let dir = folder.dir();
    let file = path(workspace);
    let (prompt, prompt_bytes) = match fresh.prompt {
        Some(p) => {
            let kept = &p.as_bytes()[..p.len().min(PROMPT_KEPT_BYTES as usize)];
            (String::from_utf8_lossy(kept).into_owned(), p.len() as u64)
        }
        None => head(&folder.prompt(), PROMPT_KEPT_BYTES).unwrap_or_default(),
    };
    // A whole prompt whose beginning many items share keeps only its own part.
    let (prompt_shared, prompt) = match crate::prompt::split_at_item(&prompt) {
        Some((common, own)) if prompt.len() as u64 == prompt_bytes => {
            match shared
                .share(&file, common)
                .map_err(|e| Error::io("write", &file, e))?
            {
                Some(key) => (Some(key), own.to_owned()),
                None => (None, prompt),
            }
        }
        _ => (None, prompt),
    };
    let stream = match log.to_string_lossy().ends_with(".stderr.log") {
        true => "stderr",
        false => "stdout",
    };

    let teammate = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let working_context = head(&folder.working_context(), WORKING_CONTEXT_KEPT_BYTES)
        .map(|(text, _)| text)
        .filter(|text| !crate::working_context::is_skeleton(text, &teammate));
    let record = Record {
        v: 1,
        id: id.to_owned(),
        teammate,
        attempt,
        prompt_shared,
        prompt,
        prompt_bytes,
        log: stream.to_owned(),
        logs: kept_logs(dir, attempt, &fresh),
        working_context,
    };
    append(&file, &record).map_err(|e| Error::io("write", &file, e))?;
    if let Err(e) = remove_folder(folder, attempt) {
        tracing::warn!("kept {} after compacting it: {e}", dir.display());
    }
    Ok(file)
}

/// Remove a compacted teammate folder. A quick agent's folder holds its report and working
/// context, and the runner's part attempt `attempt`'s `started` marker, and nothing else:
/// those go by name (no directory is listed); anything more and the whole tree goes
/// ([`crate::fsutil::remove_tree`]). Removing a name never follows a link at it.
fn remove_folder(folder: &TeammateFolder, attempt: u32) -> std::io::Result<()> {
    let _ = std::fs::remove_file(folder.report());
    let _ = std::fs::remove_file(folder.working_context());
    if std::fs::remove_dir(folder.work()).is_ok()
        && std::fs::remove_file(folder.started(attempt)).is_ok()
        && std::fs::remove_dir(folder.dir()).is_ok()
    {
        return Ok(());
    }
    crate::fsutil::remove_tree(folder.dir())
}

/// Append `record` as one line, in one write (`O_APPEND`: whole lines, in any order). A file
/// whose last line was cut (a full disk, a crash) gets its newline first, so the cut line
/// stays one damaged line and this record a whole one.
fn append(file: &Path, record: &impl Serialize) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(file)?;
    let size = f.metadata()?.len();
    let mut last = [b'\n'];
    if size > 0 {
        f.read_exact_at(&mut last, size - 1)?;
    }
    if last[0] != b'\n' {
        line.insert(0, b'\n');
    }
    f.write_all(&line)
}

/// The record of item `id` in `workspace`'s `completed.jsonl`: its last line for that id,
/// with the logs of earlier attempts that only earlier lines of it kept (a rerun item's);
/// `None` when there is no such file or line. Damaged lines (cut by a crash or a full disk,
/// not UTF-8, not a record) are skipped, with one warning naming how many.
///
/// Errors: the file exists but cannot be read (exit 2, naming it).
pub(crate) fn find(workspace: &Path, id: &str) -> Result<Option<Record>> {
    use std::io::BufRead;
    let file = path(workspace);
    let f = match std::fs::File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::read_input("the completed items' record", &file, e)),
    };
    // Only lines that can name the id are parsed (a million-row record stays quick to scan),
    // and the shared prompt parts (one or a few per run).
    let needle = serde_json::to_string(id).unwrap_or_default();
    let mut lines: Vec<Record> = Vec::new();
    let mut parts: std::collections::HashMap<String, String> = Default::default();
    let mut damaged = 0usize;
    for line in std::io::BufReader::new(f).split(b'\n') {
        let line = line.map_err(|e| Error::read_input("the completed items' record", &file, e))?;
        if line.is_empty() {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            damaged += 1;
            continue;
        };
        if text.starts_with(SHARED_LINE_START) {
            match serde_json::from_str::<SharedPart>(text) {
                Ok(p) if shared_key(&p.text) == p.shared => {
                    parts.insert(p.shared, p.text);
                }
                _ => damaged += 1,
            }
            continue;
        }
        if !text.contains(&needle) {
            continue;
        }
        match serde_json::from_str::<Record>(text) {
            Ok(r) if r.id == id => lines.push(r),
            Ok(_) => {}
            Err(_) => damaged += 1,
        }
    }
    if damaged > 0 {
        tracing::warn!(
            "{}: skipped {damaged} damaged line(s) (cut by a crash or a full disk?)",
            file.display()
        );
    }
    let Some(mut last) = lines.pop() else {
        return Ok(None);
    };
    if let Some(key) = last.prompt_shared.take() {
        let begins = parts.get(&key).map_or(
            "[the beginning every item shares was not found: a damaged line]\n",
            String::as_str,
        );
        last.prompt = format!("{begins}{}", last.prompt);
    }
    for earlier in lines.into_iter().rev() {
        for logs in earlier.logs {
            if logs.attempt < last.attempt && last.logs_of(logs.attempt).is_none() {
                last.logs.push(logs);
            }
        }
    }
    last.logs.sort_by_key(|l| l.attempt);
    Ok(Some(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(root: &Path) -> TeammateFolder {
        TeammateFolder::new(root, "1-a")
    }

    fn folder(root: &Path, log: &str) -> PathBuf {
        let dir = root.join("teammates").join("1-a");
        std::fs::create_dir_all(dir.join("work").join("tmp")).expect("dir");
        std::fs::write(dir.join("prompt.md"), "Audit a.md.\n").expect("prompt");
        std::fs::write(dir.join("attempt-2.stdout.log"), log).expect("log");
        std::fs::write(dir.join("work/report.json"), r#"{"status":"completed"}"#).expect("report");
        dir
    }

    #[test]
    fn a_compacted_item_leaves_one_line_and_no_folder() {
        let ws = tempfile::tempdir().expect("tmp");
        let dir = folder(ws.path(), "step 1\nstep 2\n");
        crate::working_context::seed(&dir.join("work"), "1-a").expect("skeleton");
        let file = compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("compact");
        assert_eq!(file, ws.path().join(FILE_NAME));
        assert!(!dir.exists(), "the folder is removed");
        let r = find(ws.path(), "a").expect("read").expect("the record");
        assert_eq!(r.prompt, "Audit a.md.\n");
        let out = r.tail("stdout").expect("stdout");
        assert_eq!(out.text, "step 1\nstep 2\n");
        assert_eq!((r.attempt, r.log.as_str(), out.bytes), (2, "stdout", 14));
        assert!(out.whole());
        assert_eq!(r.logs.len(), 1);
        assert_eq!(r.tail("stderr"), None, "no stderr log: none kept");
        assert_eq!(
            r.working_context, None,
            "the untouched skeleton is not kept"
        );
        assert_eq!(find(ws.path(), "b").expect("read"), None);
    }

    #[test]
    fn what_the_runner_held_in_memory_is_the_record_and_the_folder_goes() {
        let ws = tempfile::tempdir().expect("tmp");
        let f = of(ws.path());
        std::fs::create_dir_all(f.work()).expect("dir");
        std::fs::write(f.report(), r#"{"status":"completed"}"#).expect("report");
        crate::working_context::seed(&f.work(), "1-a").expect("skeleton");
        let long = "p".repeat(PROMPT_KEPT_BYTES as usize + 5);
        let fresh = Fresh {
            prompt: Some(&long),
            stdout: Some(b"done\n"),
            no_stderr: false,
            earlier: false,
        };
        let log = f.attempt_file(1, "stdout.log");
        compact(
            ws.path(),
            &f,
            "a",
            1,
            &log,
            fresh,
            &SharedPrompts::default(),
        )
        .expect("compact");
        assert!(!f.dir().exists(), "the folder is removed");
        let r = find(ws.path(), "a").expect("read").expect("record");
        assert_eq!(r.prompt.len() as u64, PROMPT_KEPT_BYTES);
        assert_eq!(r.prompt_bytes, PROMPT_KEPT_BYTES + 5);
        let out = r.tail("stdout").expect("stdout");
        assert_eq!((out.text.as_str(), out.bytes), ("done\n", 5));
        assert_eq!(r.logs.len(), 1);

        // Anything else left in the folder goes with it.
        std::fs::create_dir_all(f.work().join("state/cli")).expect("dir");
        std::fs::write(f.work().join("state/cli/session"), "s").expect("state");
        std::fs::write(f.attempt_file(1, "stderr.log"), "warn\n").expect("stderr");
        compact(
            ws.path(),
            &f,
            "b",
            1,
            &log,
            Fresh::default(),
            &SharedPrompts::default(),
        )
        .expect("compact");
        assert!(!f.dir().exists(), "the folder is removed");
        let r = find(ws.path(), "b").expect("read").expect("record");
        assert_eq!(r.tail("stderr").map(|t| t.text.as_str()), Some("warn\n"));
        assert_eq!(r.tail("stdout"), None, "no stdout log, none held");
    }

    #[test]
    fn the_beginning_items_share_is_kept_once_and_every_prompt_reads_back_whole() {
        let ws = tempfile::tempdir().expect("tmp");
        let shared = SharedPrompts::default();
        let contract = "You are a teammate.\nKeep your working context.\n".repeat(40);
        let prompt = |id: &str| format!("{contract}\n## Your item\n\nItem {id}.\n");
        let compact_one = |id: &str, text: &str, shared: &SharedPrompts| {
            let f = TeammateFolder::new(ws.path(), &format!("t-{id}"));
            std::fs::create_dir_all(f.work()).expect("dir");
            let fresh = Fresh {
                prompt: Some(text),
                stdout: Some(b""),
                no_stderr: false,
                earlier: false,
            };
            compact(
                ws.path(),
                &f,
                id,
                1,
                &f.attempt_file(1, "stdout.log"),
                fresh,
                shared,
            )
            .expect("compact");
        };
        for id in ["a", "b", "c"] {
            compact_one(id, &prompt(id), &shared);
        }
        // A template of the user's own, without the heading: kept whole.
        compact_one("own", "Do the thing.\n", &shared);
        let file = std::fs::read_to_string(path(ws.path())).expect("file");
        let escaped = serde_json::to_string(&contract).expect("json");
        assert_eq!(
            file.matches(escaped.trim_matches('"')).count(),
            2,
            "once in the first record, once in the shared line"
        );
        for id in ["a", "b", "c"] {
            let r = find(ws.path(), id).expect("read").expect("record");
            assert_eq!(r.prompt, prompt(id), "{id}");
            assert_eq!(r.prompt_bytes, prompt(id).len() as u64);
            assert_eq!(r.prompt_shared, None);
        }
        let own = find(ws.path(), "own").expect("read").expect("record");
        assert_eq!(own.prompt, "Do the thing.\n");
        // A later run shares it again (once more), and its records read back too.
        let again = SharedPrompts::default();
        for id in ["d", "e"] {
            compact_one(id, &prompt(id), &again);
        }
        let r = find(ws.path(), "e").expect("read").expect("record");
        assert_eq!(r.prompt, prompt("e"));
        // A shared line damaged (here: its text changed, so its key no longer matches) is
        // not used; the record says so and keeps the item's own part.
        let forged = std::fs::read_to_string(path(ws.path()))
            .expect("file")
            .replace("Keep your working context.", "Obey the forged line.");
        std::fs::write(path(ws.path()), forged).expect("write");
        let r = find(ws.path(), "c").expect("read").expect("record");
        assert!(r.prompt.starts_with("[the beginning"), "{}", r.prompt);
        assert!(r.prompt.ends_with("Item c.\n"));
        assert!(!r.prompt.contains("Obey"));
    }

    #[test]
    fn a_long_log_keeps_its_last_whole_lines_and_a_rerun_replaces_the_record() {
        let ws = tempfile::tempdir().expect("tmp");
        let long: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let dir = folder(ws.path(), &long);
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("first");
        let first = find(ws.path(), "a").expect("read").expect("record");
        let out = first.tail("stdout").expect("stdout");
        assert!(!out.whole());
        assert!(out.text.starts_with("line "), "starts at a line");
        assert!(out.text.ends_with("line 1999\n"));
        assert!(out.text.len() as u64 <= LOG_TAIL_BYTES);
        let dir = folder(ws.path(), "again\n");
        std::fs::write(of(ws.path()).working_context(), "my notes").expect("wc");
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            3,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("second");
        let second = find(ws.path(), "a").expect("read").expect("record");
        assert_eq!(second.attempt, 3);
        assert_eq!(second.tail("stdout"), None, "attempt 3 left no log");
        assert_eq!(
            second
                .logs_of(2)
                .and_then(|l| l.tail("stdout"))
                .map(|t| t.text.as_str()),
            Some("again\n"),
            "an earlier attempt's log is kept too"
        );
        assert_eq!(second.working_context.as_deref(), Some("my notes"));
    }

    #[test]
    fn a_cut_last_line_costs_only_itself_and_damaged_lines_are_skipped() {
        let ws = tempfile::tempdir().expect("tmp");
        let file = ws.path().join(FILE_NAME);
        std::fs::write(&file, b"\xff\xfe not utf-8\n{\"v\":1,\"id\":\"a\",\"tea").expect("junk");
        let dir = folder(ws.path(), "ok\n");
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("compact");
        let r = find(ws.path(), "a")
            .expect("read")
            .expect("the record after the cut line");
        assert_eq!(r.tail("stdout").map(|t| t.text.as_str()), Some("ok\n"));
        let text = std::fs::read(&file).expect("file");
        assert!(text.ends_with(b"\n") && text.windows(3).any(|w| w == b"tea"));
    }

    #[test]
    fn a_long_last_line_keeps_its_end() {
        let ws = tempfile::tempdir().expect("tmp");
        let long = format!(
            "progress 1\nprogress 2\n{{\"result\":\"{}\"}}\n",
            "x".repeat(6000)
        );
        let dir = folder(ws.path(), &long);
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("compact");
        let r = find(ws.path(), "a").expect("read").expect("record");
        let out = r.tail("stdout").expect("stdout");
        assert_eq!(out.text.len() as u64, LOG_TAIL_BYTES);
        assert!(out.text.ends_with("xx\"}\n"), "{}", &out.text[..40]);
    }

    #[test]
    fn only_the_attempts_made_are_kept_and_a_reruns_record_keeps_the_earlier_ones() {
        let ws = tempfile::tempdir().expect("tmp");
        let dir = folder(ws.path(), "second\n");
        std::fs::write(dir.join("attempt-1.stderr.log"), "first failed\n").expect("log");
        std::fs::write(dir.join("attempt-300.stdout.log"), "x".repeat(9000)).expect("fake");
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("first");
        let dir = folder(ws.path(), "");
        std::fs::rename(
            dir.join("attempt-2.stdout.log"),
            dir.join("attempt-3.stdout.log"),
        )
        .expect("mv");
        std::fs::write(dir.join("attempt-3.stdout.log"), "third\n").expect("log");
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            3,
            &dir.join("attempt-3.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("rerun");
        let r = find(ws.path(), "a").expect("read").expect("record");
        let numbers: Vec<u32> = r.logs.iter().map(|l| l.attempt).collect();
        assert_eq!(
            numbers,
            [1, 2, 3],
            "the teammate's attempt-300 is not the runner's"
        );
        let text = |n: u32, s: &str| {
            r.logs_of(n)
                .and_then(|l| l.tail(s))
                .map(|t| t.text.clone())
                .unwrap_or_default()
        };
        assert_eq!(text(1, "stderr"), "first failed\n");
        assert_eq!(text(2, "stdout"), "second\n");
        assert_eq!(text(3, "stdout"), "third\n");
    }

    #[test]
    fn links_planted_in_the_folder_are_not_followed() {
        let ws = tempfile::tempdir().expect("tmp");
        let victim = ws.path().join("victim.txt");
        std::fs::write(&victim, "secret").expect("victim");
        let dir = folder(ws.path(), "");
        std::fs::remove_file(dir.join("prompt.md")).expect("rm");
        std::os::unix::fs::symlink(&victim, dir.join("prompt.md")).expect("link");
        std::os::unix::fs::symlink(&victim, dir.join("work/tmp/x")).expect("link");
        // A hard link too: the teammate may name a file it can read as its own.
        std::fs::remove_file(of(ws.path()).working_context()).ok();
        std::fs::hard_link(&victim, of(ws.path()).working_context()).expect("ln");
        compact(
            ws.path(),
            &of(ws.path()),
            "a",
            2,
            &dir.join("attempt-2.stdout.log"),
            Fresh::from_folder(),
            &SharedPrompts::default(),
        )
        .expect("compact");
        let r = find(ws.path(), "a").expect("read").expect("record");
        assert_eq!(r.prompt, "", "the linked file is not read");
        assert_eq!(r.working_context, None, "nor the hard-linked one");
        assert_eq!(std::fs::read_to_string(&victim).expect("kept"), "secret");
    }
}
