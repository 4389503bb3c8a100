//! A teammate's `working-context.md` (DESIGN §4; the checkpoint seed `checkpoint-skill.md`):
//! Part A, a current-state snapshot in nine numbered sections that the teammate rewrites at
//! every checkpoint, then Part B, an append-only journal of timestamped entries.
//!
//! The runner writes the skeleton ([`skeleton`], from `templates/working-context.md`) into a
//! teammate folder that has none, so the prompt only has to point at it; carries Part A and
//! the last journal entry into a retry ([`carry`]); and tells `runner status` when the
//! teammate last checkpointed ([`last_checkpoint`]). [`parse`] is pure and tolerant: a file
//! without the two parts is carried whole, capped, as before.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// The skeleton compiled into the binary (`templates/working-context.md`); `{{ teammate }}`
/// stands for the teammate's name.
pub(crate) const TEMPLATE: &str = include_str!("../templates/working-context.md");

/// The file's name in a teammate folder.
pub(crate) const FILE_NAME: &str = "working-context.md";

/// The default of `runner status --stale-after`: a running teammate with no checkpoint for
/// longer than this (since its last checkpoint, or since its attempt started when it made
/// none in this attempt) is flagged stale.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

/// Largest file [`carry`] parses; a larger one is carried capped, as an unstructured file.
const PARSE_MAX: u64 = 4 * 1024 * 1024;

/// Most bytes of Part A carried into a retry.
const PART_A_MAX: usize = 32 * 1024;

/// Most bytes of the last journal entry carried into a retry.
const ENTRY_MAX: usize = 16 * 1024;

/// The skeleton for `teammate`.
pub(crate) fn skeleton(teammate: &str) -> String {
    TEMPLATE.replace("{{ teammate }}", teammate)
}

/// Whether `text` says nothing the runner did not write: empty, or `teammate`'s untouched
/// skeleton.
pub(crate) fn is_skeleton(text: &str, teammate: &str) -> bool {
    text.trim().is_empty() || text == skeleton(teammate)
}

/// The two parts of a structured working context, as slices of its text (trailing blank
/// lines dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parts<'a> {
    /// Part A from its heading to the next heading of its level or higher; `None` when the
    /// file has no Part A heading.
    pub part_a: Option<&'a str>,
    /// The Part B heading line; `None` when the file has no Part B.
    pub part_b_heading: Option<&'a str>,
    /// The last journal entry, from its heading to the end of Part B.
    pub last_entry: Option<&'a str>,
    /// How many journal entries come before the last one.
    pub earlier_entries: usize,
}

/// One markdown heading outside code fences and HTML comments: its byte offset, level
/// (number of `#`) and text.
struct Heading<'a> {
    at: usize,
    level: usize,
    text: &'a str,
}

fn headings(text: &str) -> Vec<Heading<'_>> {
    let mut out = Vec::new();
    let (mut fence, mut comment) = (None::<&str>, false);
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let t = line.trim();
        if comment {
            comment = !t.contains("-->");
            continue;
        }
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            continue;
        }
        if t.starts_with("<!--") {
            comment = !t.contains("-->");
            continue;
        }
        let level = line.bytes().take_while(|b| *b == b'#').count();
        let rest = &line[level..];
        if (1..=6).contains(&level) && (rest.starts_with(' ') || rest.trim().is_empty()) {
            out.push(Heading {
                at: start,
                level,
                text: rest.trim(),
            });
        }
    }
    out
}

/// Whether heading text names part `letter` ("Part A — Current State", "part b: journal").
fn names_part(text: &str, letter: char) -> bool {
    let lower = text.to_lowercase();
    let Some(rest) = lower.strip_prefix("part") else {
        return false;
    };
    let mut chars = rest.trim_start().chars();
    chars.next() == Some(letter) && chars.next().is_none_or(|c| !c.is_alphanumeric())
}

/// Split `text` into its parts; `None` when it has neither a Part A nor a Part B heading
/// (then it is no structured working context).
pub(crate) fn parse(text: &str) -> Option<Parts<'_>> {
    let hs = headings(text);
    let end_of = |i: usize| {
        hs[i + 1..]
            .iter()
            .find(|h| h.level <= hs[i].level)
            .map_or(text.len(), |h| h.at)
    };
    let a = hs.iter().position(|h| names_part(h.text, 'a'));
    let b = hs.iter().position(|h| names_part(h.text, 'b'));
    if a.is_none() && b.is_none() {
        return None;
    }
    let trimmed = |from: usize, to: usize| text[from..to].trim_end();
    let part_a = a.map(|i| trimmed(hs[i].at, end_of(i)));
    let (mut part_b_heading, mut last_entry, mut earlier_entries) = (None, None, 0);
    if let Some(i) = b {
        let b_end = end_of(i);
        part_b_heading = text[hs[i].at..].lines().next().map(str::trim_end);
        let inner: Vec<&Heading> = hs[i + 1..].iter().take_while(|h| h.at < b_end).collect();
        if let Some(entry_level) = inner.first().map(|h| h.level) {
            let entries: Vec<&&Heading> = inner.iter().filter(|h| h.level == entry_level).collect();
            earlier_entries = entries.len().saturating_sub(1);
            last_entry = entries.last().map(|h| trimmed(h.at, b_end));
        }
    }
    Some(Parts {
        part_a,
        part_b_heading,
        last_entry,
        earlier_entries,
    })
}

/// `s` cut to at most `max` bytes on a character boundary, the cut said.
fn capped(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… (cut: {} more bytes are in the file)",
        &s[..end],
        s.len() - end
    )
}

/// What a retry prompt carries of the working context `text` (DESIGN §4): Part A and the last
/// Part B entry when the file has that structure (the earlier entries are left in the file,
/// and the text says how many); `None` when it is structured but says nothing yet (the
/// untouched skeleton) or is blank; else the whole text, capped to `max` bytes (head and
/// tail kept by the caller's reader).
pub(crate) fn carry_text(text: &str, teammate: &str, max: usize) -> Option<String> {
    if is_skeleton(text, teammate) {
        return None;
    }
    let Some(parts) = parse(text) else {
        return Some(capped(text, max));
    };
    let mut out = String::new();
    if let Some(a) = parts.part_a {
        out.push_str(&capped(a, PART_A_MAX));
        out.push_str("\n\n");
    }
    if let Some(h) = parts.part_b_heading {
        out.push_str(h);
        out.push_str("\n\n");
        if parts.earlier_entries > 0 {
            out.push_str(&format!(
                "({} earlier entr{} left out here; they are in the file.)\n\n",
                parts.earlier_entries,
                if parts.earlier_entries == 1 {
                    "y"
                } else {
                    "ies"
                }
            ));
        }
        match parts.last_entry {
            Some(e) => out.push_str(&capped(e, ENTRY_MAX)),
            None => out.push_str("(no entry yet)"),
        }
    }
    Some(out.trim_end().to_owned())
}

/// What a retry carries of the working context at `path` ([`carry_text`]); an unstructured
/// or very large file is read with `read_capped` (at most `max` bytes, head and tail).
/// `None` when there is no file, it cannot be read, or it holds nothing yet.
pub(crate) fn carry(
    path: &Path,
    teammate: &str,
    max: u64,
    read_capped: impl Fn(&Path, u64) -> Option<String>,
) -> Option<String> {
    use std::io::Read;
    // The teammate's own file: never read through a link it planted (issue 25).
    let mut file = crate::fsutil::open_plain_file(path).ok()??;
    let len = file.metadata().ok()?.len();
    if len > PARSE_MAX {
        return read_capped(path, max);
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    if parse(&text).is_none() {
        return read_capped(path, max).filter(|t| !t.trim().is_empty());
    }
    carry_text(&text, teammate, usize::try_from(max).unwrap_or(usize::MAX))
}

/// Write the skeleton into `dir/working-context.md` unless a file is there (an earlier
/// attempt's, or the teammate's own): the file is created, never replaced, private (0600).
///
/// Errors: the file cannot be created or written (an existing file is no error).
pub(crate) fn seed(dir: &Path, teammate: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(FILE_NAME);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => f.write_all(skeleton(teammate).as_bytes()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// When the teammate last wrote its working context in the folder `dir`: the file's
/// modification time, or `None` when there is no file or it is still the runner's skeleton
/// (which is no checkpoint).
pub(crate) fn last_checkpoint(dir: &Path, teammate: &str) -> Option<SystemTime> {
    let path = dir.join(FILE_NAME);
    let meta = std::fs::metadata(&path).ok()?;
    let skeleton = skeleton(teammate);
    if meta.len() == skeleton.len() as u64
        && std::fs::read(&path).ok().as_deref() == Some(skeleton.as_bytes())
    {
        return None;
    }
    meta.modified().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILLED: &str = "# Working Context — t1\n\n_Last updated: 2026-01-31T14:05:00Z_\n\n\
        ## Part A — Current State\n\n### 1. Objective\nFix auth.\n\n### 4. In Flight\n\
        Half of `src/auth.rs`.\n\n## Part B — Journal\n\n<!-- example:\n### not an entry\n-->\n\n\
        ### 2026-01-31T13:00:00Z — read the code\n- Did: read src/auth.rs\n\n\
        ### 2026-01-31T14:05:00Z — tests\n- Did: wrote tests\n```\n### not a heading\n```\n\
        #### detail\nmore\n";

    #[test]
    fn the_template_has_nine_numbered_sections_and_both_parts() {
        let s = skeleton("todo-task-1");
        assert!(s.starts_with("# Working Context — todo-task-1\n"), "{s}");
        for n in 1..=9 {
            assert!(s.contains(&format!("\n### {n}. ")), "section {n} missing");
        }
        let p = parse(&s).expect("structured");
        assert!(p.part_a.is_some_and(|a| a.contains("### 9. ")));
        assert!(p.part_b_heading.is_some_and(|h| h.starts_with("## Part B")));
        // The example entry is inside a comment: the skeleton has no journal entry.
        assert_eq!(p.last_entry, None);
    }

    #[test]
    fn parts_are_found_outside_comments_and_fences() {
        let p = parse(FILLED).expect("structured");
        let a = p.part_a.expect("part a");
        assert!(
            a.starts_with("## Part A") && a.ends_with("Half of `src/auth.rs`."),
            "{a}"
        );
        assert_eq!(p.part_b_heading, Some("## Part B — Journal"));
        let e = p.last_entry.expect("entry");
        assert!(e.starts_with("### 2026-01-31T14:05:00Z — tests"), "{e}");
        assert!(
            e.contains("### not a heading") && e.ends_with("more"),
            "{e}"
        );
        assert_eq!(p.earlier_entries, 1);
    }

    #[test]
    fn a_retry_carries_part_a_and_the_last_entry_only() {
        let c = carry_text(FILLED, "t1", 64 * 1024).expect("carried");
        assert!(
            c.contains("### 4. In Flight\nHalf of `src/auth.rs`."),
            "{c}"
        );
        assert!(c.contains("### 2026-01-31T14:05:00Z — tests"), "{c}");
        assert!(
            !c.contains("read the code"),
            "an earlier entry was carried: {c}"
        );
        assert!(c.contains("1 earlier entry left out"), "{c}");
        assert!(!c.contains("_Last updated"), "{c}");
    }

    #[test]
    fn unstructured_blank_and_untouched_files() {
        assert_eq!(
            carry_text("did a, b; next c", "t", 1024).as_deref(),
            Some("did a, b; next c")
        );
        assert!(
            carry_text("x".repeat(100).as_str(), "t", 10).is_some_and(|c| c.contains("cut: 90"))
        );
        assert_eq!(carry_text("  \n", "t", 1024), None);
        assert_eq!(carry_text(&skeleton("t"), "t", 1024), None);
        // Part B only, with lower-case headings and no entry yet.
        let c = carry_text("notes\n# part b: journal\n", "t", 1024).expect("carried");
        assert!(
            c.contains("# part b: journal") && c.contains("no entry yet"),
            "{c}"
        );
        // "Party" and "Part Alpha" are no parts.
        assert_eq!(parse("## Party A\n## Part Alpha\n"), None);
    }

    #[test]
    fn a_huge_part_a_is_cut_on_a_character_boundary() {
        let text = format!(
            "## Part A\n{}\n## Part B\n### e1\nx\n",
            "é".repeat(PART_A_MAX)
        );
        let c = carry_text(&text, "t", 1024).expect("carried");
        assert!(
            c.contains("more bytes are in the file") && c.contains("### e1"),
            "{c}"
        );
    }

    #[test]
    fn seed_never_replaces_and_the_skeleton_is_no_checkpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        seed(dir.path(), "t").expect("seeded");
        assert_eq!(last_checkpoint(dir.path(), "t"), None);
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, FILLED).expect("write");
        seed(dir.path(), "t").expect("kept");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), FILLED);
        assert!(last_checkpoint(dir.path(), "t").is_some());
        let read = |p: &Path, _| std::fs::read_to_string(p).ok();
        let c = carry(&path, "t", 1024, read).expect("carried");
        assert!(c.contains("tests") && !c.contains("read the code"), "{c}");
    }
}
