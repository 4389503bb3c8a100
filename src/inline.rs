//! Files and images in a task text: `{file:COLUMN}` and `{image:COLUMN}` in a CSV batch's
//! instruction (issue 27). The column holds a path, relative to the batch's folder (the
//! folder of BATCH.md, else of the input file); the file is read when its item starts, so a
//! batch of 10,000 rows never holds 10,000 files in memory, and a file that cannot be used
//! fails that item alone — failure kind `input`, never the run.
//!
//! - `{file:…}` inserts the file's text. Valid UTF-8 goes in as it is; other text goes in
//!   losslessly and readably — each byte that is not UTF-8 as `\xNN`, each backslash as `\\`
//!   — after one line that tells the model so. A NUL byte means binary: refused.
//! - `{image:…}` (PNG, JPEG, GIF or WebP, told by their magic bytes, not the name): an agent
//!   CLI gets the image's absolute path (it reads the file itself); the HTTP backend sends
//!   the image as a content part of the request and the text names it.
//!
//! Files are opened with [`crate::fsutil::open_beneath`]: never outside the batch's folder,
//! not even through a link a teammate planted there.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Most bytes of one item's task text (the instruction with the row's values in it): 16 MiB,
/// above what any agent's context takes.
pub(crate) const MAX_PROMPT_BYTES: usize = 16 << 20;

/// A size in MiB for messages (`16 MiB`).
pub(crate) fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// Default `--file-cap`: the most bytes of one inlined file, 256 KiB (about 64,000 tokens).
pub(crate) const DEFAULT_FILE_CAP: u64 = 256 * 1024;

/// Default `--image-cap`: the most bytes of one image, 5 MiB — the per-image limit of the
/// Anthropic Messages API (OpenAI's is 20 MB, so the lower one serves both).
pub(crate) const DEFAULT_IMAGE_CAP: u64 = 5 * 1024 * 1024;

/// A cap as people write it: `256KiB`, `1MiB`, `300kB`, `300000` (bytes), at least 1 byte.
///
/// Errors: what to write instead (for `--file-cap`, `file_cap:` and the image ones).
pub(crate) fn parse_cap(text: &str) -> Result<u64, String> {
    match text.trim().parse::<bytesize::ByteSize>() {
        Ok(size) if size.as_u64() > 0 => Ok(size.as_u64()),
        _ => Err(format!(
            "a size such as 256KiB, 1MiB or 300000 (bytes), not `{}`",
            text.trim()
        )),
    }
}

/// The line put before a file that is not valid UTF-8.
pub(crate) const NOT_UTF8_NOTE: &str = "(This file is not valid UTF-8. Each byte that is not is \
written as \\xNN, its value in hex, and each backslash as \\\\; everything else is as in the \
file.)";

/// What a placeholder inlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InlineKind {
    /// `{file:COLUMN}`: the file's text.
    File,
    /// `{image:COLUMN}`: an image.
    Image,
}

impl InlineKind {
    /// `file:path` → `(File, "path")`, `image:shot` → `(Image, "shot")`; `None` for a plain
    /// column name.
    pub(crate) fn of_placeholder(name: &str) -> Option<(InlineKind, &str)> {
        if let Some(column) = name.strip_prefix("file:") {
            Some((InlineKind::File, column.trim()))
        } else {
            name.strip_prefix("image:")
                .map(|column| (InlineKind::Image, column.trim()))
        }
    }

    /// The placeholder's word: `file` or `image`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            InlineKind::File => "file",
            InlineKind::Image => "image",
        }
    }
}

/// Where a file goes into an item's task text: made by
/// [`crate::prompt::Instruction::render`], filled in by [`expand`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InlinePart {
    /// Byte offset in the rendered text (at a segment boundary).
    pub at: usize,
    /// File or image.
    pub kind: InlineKind,
    /// The column that names the file.
    pub column: String,
    /// Its value in the item's row: the path as written.
    pub value: String,
}

/// Where an item's files are read from, and the most bytes of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRoot {
    /// The batch's folder (absolute): every file must lie inside it.
    pub dir: PathBuf,
    /// Most bytes of a `{file:…}` (`--file-cap`).
    pub file_cap: u64,
    /// Most bytes of an `{image:…}` (`--image-cap`).
    pub image_cap: u64,
}

/// An image an item's task text holds, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    /// The path as the row wrote it (how the text names the image).
    pub name: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: &'static str,
    /// The image's bytes.
    pub bytes: Vec<u8>,
}

/// An item's task text with its files in it, and its images.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Expanded {
    /// The task text.
    pub body: String,
    /// The images, in the order the text names them.
    pub images: Vec<Image>,
}

/// Fill `parts` into `body`: each file's text, each image's path (for an agent CLI; with
/// `answers_only`, the HTTP backend, its name and the image itself in
/// [`Expanded::images`]).
///
/// Errors: the reason the item cannot start, naming the column, the path and what to do: an
/// empty value, a path outside the batch's folder (or a link leading out of it), a missing or
/// unreadable file, one over its cap, a binary file (a NUL byte), an image of another format,
/// or a task text over [`MAX_PROMPT_BYTES`].
pub(crate) fn expand(
    body: &str,
    parts: &[InlinePart],
    root: &FileRoot,
    answers_only: bool,
) -> Result<Expanded, String> {
    if parts.is_empty() {
        return Ok(Expanded {
            body: body.to_owned(),
            images: Vec::new(),
        });
    }
    let mut text = String::with_capacity(body.len());
    let mut images = Vec::new();
    let mut from = 0;
    for part in parts {
        let at = part.at.min(body.len());
        text.push_str(body.get(from..at).unwrap_or_default());
        from = at;
        let what = format!("`{{{}:{}}}`", part.kind.word(), part.column);
        let value = part.value.trim();
        if value.is_empty() {
            return Err(format!(
                "{what}: the row's `{}` is empty; give the path of a file in {}",
                part.column,
                root.dir.display()
            ));
        }
        let cap = match part.kind {
            InlineKind::File => (root.file_cap, "--file-cap"),
            InlineKind::Image => (root.image_cap, "--image-cap"),
        };
        let (bytes, path) = read(root, value, cap)
            .map_err(|why| format!("{what}: `{value}` {why}", value = one_line(value)))?;
        match part.kind {
            InlineKind::File => text.push_str(&file_text(&bytes).map_err(|why| {
                format!(
                    "{what}: `{}` {why}; name a text file, or send images with {{image:{}}}",
                    one_line(value),
                    part.column
                )
            })?),
            InlineKind::Image => {
                let media_type = image_type(&bytes).ok_or_else(|| {
                    format!(
                        "{what}: `{}` is not a PNG, JPEG, GIF or WebP image (it starts with {})",
                        one_line(value),
                        hex_start(&bytes)
                    )
                })?;
                match answers_only {
                    true => text.push_str(&format!("`{}` (image attached)", one_line(value))),
                    false => text.push_str(&path.to_string_lossy()),
                }
                images.push(Image {
                    name: value.to_owned(),
                    media_type,
                    bytes,
                });
            }
        }
        if text.len() > MAX_PROMPT_BYTES {
            return Err(format!(
                "with {what} the task text is over {}, the most an item may have",
                mib(MAX_PROMPT_BYTES as u64)
            ));
        }
    }
    text.push_str(body.get(from..).unwrap_or_default());
    if text.len() > MAX_PROMPT_BYTES {
        return Err(format!(
            "with its files the task text is over {}, the most an item may have",
            mib(MAX_PROMPT_BYTES as u64)
        ));
    }
    // An agent that only answers does not read paths: its images are sent, not named.
    if !answers_only {
        images.clear();
    }
    Ok(Expanded { body: text, images })
}

/// Read the file `value` names inside `root.dir`, at most `cap` bytes; its bytes and its
/// absolute path.
///
/// Errors: the end of a reason that starts with the path (`is outside …`, `is not there`).
fn read(
    root: &FileRoot,
    value: &str,
    (cap, flag): (u64, &str),
) -> Result<(Vec<u8>, PathBuf), String> {
    let given = Path::new(value);
    // An absolute path is taken when it lies inside the folder.
    let rel = match given.is_absolute() {
        true => match given
            .strip_prefix(&root.dir)
            .or_else(|_| given.strip_prefix(crate::fsutil::real_path(&root.dir)))
        {
            Ok(rel) => rel.to_owned(),
            Err(_) => return Err(outside(root)),
        },
        false => given.to_owned(),
    };
    let path = root.dir.join(&rel);
    let file = crate::fsutil::open_beneath(&root.dir, &rel).map_err(|e| match e {
        e if e.raw_os_error() == Some(nix::libc::EXDEV) => outside(root),
        e if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            "is a link; name the file it points at".to_owned()
        }
        e if e.kind() == std::io::ErrorKind::NotFound => {
            format!("is not there ({}); check the row's path", path.display())
        }
        e => format!("cannot be read ({}): {e}", path.display()),
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > cap {
        return Err(too_big(len, cap, flag));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({}): {e}", path.display()))?;
    // A file that grew since its size was read.
    if bytes.len() as u64 > cap {
        return Err(too_big(bytes.len() as u64, cap, flag));
    }
    Ok((bytes, path))
}

fn outside(root: &FileRoot) -> String {
    format!(
        "is outside the batch's folder {} (or a link leads out of it); only files inside it \
         are read",
        root.dir.display()
    )
}

fn too_big(len: u64, cap: u64, flag: &str) -> String {
    format!(
        "is {len} bytes, over the cap of {cap} bytes; raise it with {flag} (e.g. {flag} 1MiB) \
         or send a part of the file"
    )
}

/// The text of a file's bytes: as it is when it is UTF-8, else [`NOT_UTF8_NOTE`] and the
/// bytes with each one that is not UTF-8 as `\xNN` and each backslash as `\\`.
///
/// Errors: a NUL byte (a binary file), with its offset.
pub(crate) fn file_text(bytes: &[u8]) -> Result<String, String> {
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!(
            "is binary (a NUL byte at offset {at}): it is not sent"
        ));
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(NOT_UTF8_NOTE.len() + bytes.len() + bytes.len() / 8);
    out.push_str(NOT_UTF8_NOTE);
    out.push('\n');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    Ok(out)
}

/// The media type of an image by its first bytes: PNG, JPEG, GIF or WebP (the formats both
/// the OpenAI and the Anthropic API take).
pub(crate) fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn hex_start(bytes: &[u8]) -> String {
    match bytes.is_empty() {
        true => "nothing: it is empty".to_owned(),
        false => bytes
            .iter()
            .take(8)
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// A value for a one-line reason: its first line, at most 120 characters.
fn one_line(value: &str) -> String {
    crate::report::one_line(value, 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(dir: &Path) -> FileRoot {
        FileRoot {
            dir: dir.to_owned(),
            file_cap: 64,
            image_cap: 64,
        }
    }

    fn part(at: usize, kind: InlineKind, value: &str) -> InlinePart {
        InlinePart {
            at,
            kind,
            column: "path".into(),
            value: value.into(),
        }
    }

    #[test]
    fn utf8_text_goes_in_as_it_is_and_other_text_readably_and_losslessly() {
        assert_eq!(file_text("héllo \\ x".as_bytes()), Ok("héllo \\ x".into()));
        // Latin-1 "café \ ok": é is 0xE9.
        let latin1 = b"caf\xE9 \\ ok";
        let text = file_text(latin1).expect("text");
        assert_eq!(text, format!("{NOT_UTF8_NOTE}\ncaf\\xE9 \\\\ ok"));
        assert!(file_text(b"PK\x03\x04\x00\x00").is_err_and(|e| e.contains("offset 4")));
    }

    #[test]
    fn images_are_told_by_their_magic_bytes() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a.."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"<svg xmlns="), None);
    }

    #[test]
    fn files_go_where_their_placeholder_was() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("docs")).expect("mkdir");
        std::fs::write(dir.path().join("docs/a.md"), "# A\n").expect("write");
        std::fs::write(dir.path().join("s.png"), b"\x89PNG\r\n\x1a\nxx").expect("write");
        let body = "Audit:\n\nand .";
        let parts = [
            part(7, InlineKind::File, "docs/a.md"),
            part(12, InlineKind::Image, "s.png"),
        ];
        let r = root(dir.path());
        let cli = expand(body, &parts, &r, false).expect("expands");
        assert_eq!(
            cli.body,
            format!("Audit:\n# A\n\nand {}.", dir.path().join("s.png").display())
        );
        assert!(cli.images.is_empty());
        let http = expand(body, &parts, &r, true).expect("expands");
        assert_eq!(http.body, "Audit:\n# A\n\nand `s.png` (image attached).");
        assert_eq!(http.images.len(), 1);
        assert_eq!(http.images[0].media_type, "image/png");
        // An absolute path inside the folder is taken.
        let abs = dir.path().join("docs/a.md").display().to_string();
        assert!(expand("", &[part(0, InlineKind::File, &abs)], &r, false).is_ok());
    }

    #[test]
    fn a_file_that_cannot_be_used_is_the_items_failure_with_what_to_do() {
        let outer = tempfile::tempdir().expect("tmp");
        let dir = outer.path().join("batch");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(outer.path().join("secret"), "key").expect("write");
        std::fs::write(dir.join("big.md"), "x".repeat(65)).expect("write");
        std::fs::write(dir.join("bin"), b"a\0b").expect("write");
        std::fs::write(dir.join("fake.png"), b"<svg/>").expect("write");
        std::os::unix::fs::symlink(outer.path().join("secret"), dir.join("link.md")).expect("link");
        let r = root(&dir);
        let fails =
            |kind, value: &str| expand("", &[part(0, kind, value)], &r, true).expect_err("fails");
        assert!(fails(InlineKind::File, "nope.md").contains("is not there"));
        assert!(fails(InlineKind::File, "../secret").contains("outside the batch's folder"));
        let abs = outer.path().join("secret").display().to_string();
        assert!(fails(InlineKind::File, &abs).contains("outside"));
        // A link planted in the folder does not lead out of it.
        assert!(fails(InlineKind::File, "link.md").contains("outside"));
        assert!(fails(InlineKind::File, "big.md").contains("over the cap of 64 bytes"));
        assert!(fails(InlineKind::File, "bin").contains("binary"));
        assert!(fails(InlineKind::Image, "fake.png").contains("not a PNG"));
        assert!(fails(InlineKind::File, "  ").contains("is empty"));
        assert!(fails(InlineKind::File, ".").contains("not a plain file"));
    }
}
