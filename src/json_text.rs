//! JSON text as agents and their CLIs write it, made parseable before `serde_json` reads it:
//! a report file or a CLI's JSON lines that start with a UTF-8 byte order mark (PowerShell's
//! `Out-File`, Python's `utf-8-sig`), or that hold an escaped lone surrogate (`"\udc80"`:
//! Python's `surrogateescape` file names, a string cut in the middle of an emoji's pair).
//! `serde_json` refuses both; the work they describe was done, so neither may fail it.

use std::borrow::Cow;

/// `text` without a leading byte order mark, and with every `\uXXXX` escape of an unpaired
/// UTF-16 surrogate (a high one not followed by a `\uXXXX` low one, or a low one alone)
/// replaced by `\ufffd` (U+FFFD, the replacement character). Escaped backslashes (`\\udc80`
/// is a backslash and `udc80`) and well-formed pairs are left as they are. Borrowed when
/// nothing needed repair.
pub(crate) fn repaired(text: &str) -> Cow<'_, str> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    // Bytes of `text` before `copied` are in `out` (when it exists).
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escaped_unit(bytes, i) else {
            // `\\`, `\"`, `\n`, …: skip the escaped character with its backslash.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => !matches!(escaped_unit(bytes, i + 6), Some(0xDC00..=0xDFFF)),
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if !lone {
            // A pair is two escapes: skip both.
            i += if (0xD800..=0xDBFF).contains(&unit) {
                12
            } else {
                6
            };
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[copied..i]);
        o.push_str("\\ufffd");
        i += 6;
        copied = i;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
        None => Cow::Borrowed(text),
    }
}

/// The UTF-16 unit of the `\uXXXX` escape starting at `bytes[at]`, if one starts there.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let esc = bytes.get(at..at + 6)?;
    if esc[0] != b'\\' || esc[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&esc[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(&repaired(text)).expect("parses after repair")
    }

    #[test]
    fn a_byte_order_mark_is_dropped() {
        let text = "\u{FEFF}{\"a\":1}";
        assert!(
            serde_json::from_str::<Value>(text).is_err(),
            "serde refuses it"
        );
        assert_eq!(parsed(text)["a"], 1);
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        for (text, want) in [
            (r#"{"f":"a\udc80b"}"#, "a\u{FFFD}b"),
            (r#"{"f":"cut \ud83d"}"#, "cut \u{FFFD}"),
            (r#"{"f":"\ud83d\ud83d\ude00"}"#, "\u{FFFD}😀"),
            (r#"{"f":"\uDC80\uD800x"}"#, "\u{FFFD}\u{FFFD}x"),
        ] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
            assert_eq!(parsed(text)["f"], want, "{text}");
        }
    }

    #[test]
    fn what_serde_accepts_is_left_as_it_is() {
        for text in [
            r#"{"f":"😀 \ud83d\ude00 \u00e9 \n"}"#,
            r#"{"f":"a backslash then udc80: \\udc80"}"#,
            r#"{"f":"\\\ud83d\ude00"}"#,
            "no json at all \\u12",
        ] {
            assert!(matches!(repaired(text), Cow::Borrowed(_)), "{text}");
        }
    }
}
