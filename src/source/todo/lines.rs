//! The lines of a file, each with its exact ending, so that a document renders back to the
//! bytes it was parsed from: splitting, rendering, inserting and removing lines.

/// The byte order mark some editors put at the start of a UTF-8 file.
pub(super) const BOM: char = '\u{feff}';

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The last line of a file without a final newline.
    None,
    Lf,
    CrLf,
}

impl Ending {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Ending::None => "",
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
        }
    }
}

/// One line of the file: its text without the ending, and the ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    pub(super) text: String,
    pub(super) ending: Ending,
}

/// Splits text into lines, each keeping its exact ending. A final line without a newline
/// has [`Ending::None`]; text ending in a newline has no empty last line.
pub(super) fn split_lines(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some((head, tail)) = rest.split_once('\n') {
        let line = match head.strip_suffix('\r') {
            Some(text) => Line {
                text: text.to_string(),
                ending: Ending::CrLf,
            },
            None => Line {
                text: head.to_string(),
                ending: Ending::Lf,
            },
        };
        lines.push(line);
        rest = tail;
    }
    if !rest.is_empty() {
        lines.push(Line {
            text: rest.to_string(),
            ending: Ending::None,
        });
    }
    lines
}

pub(super) fn render_lines(bom: bool, lines: &[Line]) -> String {
    let mut out = String::with_capacity(lines.iter().map(|line| line.text.len() + 2).sum());
    if bom {
        out.push(BOM);
    }
    for line in lines {
        out.push_str(&line.text);
        out.push_str(line.ending.as_str());
    }
    out
}

/// Inserts lines before index `at` (clamped to the end), each ending with `ending`. At the
/// end of a document whose last line has no ending, that line gets `ending` and the last
/// inserted line gets none, so the file still ends without a newline.
pub(super) fn insert_lines(lines: &mut Vec<Line>, at: usize, texts: Vec<String>, ending: Ending) {
    let at = at.min(lines.len());
    let mut new_lines: Vec<Line> = texts
        .into_iter()
        .map(|text| Line { text, ending })
        .collect();
    if at == lines.len()
        && let Some(previous) = lines.last_mut()
        && previous.ending == Ending::None
        && let Some(last_new) = new_lines.last_mut()
    {
        previous.ending = ending;
        last_new.ending = Ending::None;
    }
    lines.splice(at..at, new_lines);
}

/// Keeps the lines not flagged `remove`. If the last line had no ending and was removed, the
/// new last line loses its ending, so the file still ends without a newline.
pub(super) fn keep_lines(lines: &[Line], remove: &[bool]) -> Vec<Line> {
    let mut kept: Vec<Line> = lines
        .iter()
        .zip(remove.iter().copied().chain(std::iter::repeat(false)))
        .filter(|(_, removed)| !removed)
        .map(|(line, _)| line.clone())
        .collect();
    let last_removed_without_ending = lines.last().is_some_and(|line| line.ending == Ending::None)
        && remove.last() == Some(&true);
    if last_removed_without_ending && let Some(last) = kept.last_mut() {
        last.ending = Ending::None;
    }
    kept
}
