//! Text shown on a terminal, never obeyed (DESIGN §10): what an agent wrote or a person
//! typed reaches a terminal with its escape sequences, control and invisible characters
//! made visible. The bottom layer, so that any module may print a warning through it; `ui`
//! builds the rest of the terminal output on it.

use std::io::Write;

/// Characters that change how text reads without being seen ("Trojan Source",
/// CVE-2021-42574): bidirectional embeddings, overrides and isolates, zero-width
/// characters and marks, the Arabic letter mark and the byte-order mark.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}'..='\u{200F}'
        | '\u{061C}' | '\u{FEFF}')
}

/// Agent text as a terminal may show it: escape sequences and other control characters
/// (but newlines and tabs) as `^[`-style or `\u{..}` text, so no OSC 52 clipboard write,
/// title, cursor move or link reaches the terminal; invisible characters
/// ([`is_invisible`]) shown as `<U+202E>`, so a summary cannot read otherwise than it is.
pub(crate) fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c if is_invisible(c) => out.push_str(&format!("<U+{:04X}>", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `warning: MESSAGE` on stderr, shown, never obeyed ([`terminal_safe`]): as every reporter
/// shows an [`Event::Warning`], and as the runner's diagnostics print outside a run (a
/// warning may quote an item's title or a line of a file). Write errors are ignored: a run
/// goes on when nobody reads.
pub(crate) fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "warning: {}",
        terminal_safe(&message.to_string())
    );
}
