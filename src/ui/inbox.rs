//! The inbox as `runner list` and `runner resolve` show it.

use crate::source::todo::{Mark, Section, TodoDocument};

/// The open items of `doc` as text, Todo then Ideas: numbered, with the checkpoint, the
/// prerequisites (`@after:`), the continuation lines and the runner's note.
pub fn render_items(doc: &TodoDocument) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (section, heading) in [(Section::Todo, "Todo"), (Section::Ideas, "Ideas")] {
        let open: Vec<_> = doc
            .items()
            .iter()
            .filter(|i| i.section == section && i.mark != Mark::Done)
            .collect();
        let _ = writeln!(out, "{heading} ({})", open.len());
        for i in open {
            let indent = "  ".repeat(1 + i.indent / 2);
            let mark = if i.mark == Mark::InProgress {
                "[~]"
            } else {
                "[ ]"
            };
            let cp = i
                .context
                .as_ref()
                .map(|c| format!("  @context:{c}"))
                .unwrap_or_default();
            let after: Vec<String> = i
                .after
                .iter()
                .map(u32::to_string)
                .chain(i.after_batches.iter().map(ToString::to_string))
                .collect();
            let after = match after.is_empty() {
                true => String::new(),
                false => format!("  @after:{}", after.join(",")),
            };
            let _ = writeln!(
                out,
                "{indent}{:>3}. {mark} {}{cp}{after}",
                i.number, i.title
            );
            for line in i.continuation.lines() {
                let _ = writeln!(out, "{indent}       {line}");
            }
            if let Some(note) = &i.note {
                let _ = writeln!(out, "{indent}       > runner: {note}");
            }
        }
    }
    out
}
