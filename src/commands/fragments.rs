//! `runner fragments [NAME]` and `runner apply NAME k=v…`: the store's task fragments
//! (`crate::fragment`), listed, shown, and appended to the inbox as items linked by
//! `@after`, each marked `@fragment:NAME#ROUND/STEP` (DESIGN §3 "Fragments").

use std::collections::HashMap;

use super::todo::open_store;
use crate::cli::{ApplyArgs, FragmentsArgs};
use crate::error::{Error, Result};
use crate::fragment::{Fragment, RenderedStep, keys, latest_round, parse_assignments};
use crate::source::todo::{EditError, FragmentMark, Section, TodoDocument, escape_text};
use crate::store::{Need, Store, parse_inbox, today};
use crate::ui::outln;

/// `runner fragments [NAME]`.
pub(crate) fn fragments(args: FragmentsArgs) -> Result<i32> {
    if let Some(dir) = &args.store.store {
        crate::store::check_given(dir)?;
    }
    let store = open_store(&args.store, Need::DefaultProject)?;
    if let Some(name) = &args.name {
        show(&store, &store.fragment(name)?);
        return Ok(0);
    }
    let names = store.fragment_names();
    if names.is_empty() {
        outln(format_args!(
            "No fragments in {}: write one there as NAME.toml (`description`, then \
             `[[steps]]` with `key`, `subject`, `description`, `after`).",
            store.fragments_dir().display()
        ));
        return Ok(0);
    }
    outln(store.fragments_dir().display());
    for name in names {
        match store.fragment(&name) {
            Ok(f) => {
                outln(format_args!("{name}  {}", f.description));
                outln(format_args!("  steps: {}", keys(&f.steps)));
                outln(format_args!("  variables: {}", variables(&f)));
            }
            Err(e) => crate::ui::warn(format_args!(
                "{e}; `runner apply {name}` refuses it until it is fixed"
            )),
        }
    }
    Ok(0)
}

/// The fragment's variables, or `none`.
fn variables(f: &Fragment) -> String {
    match f.variables() {
        v if v.is_empty() => "none".to_owned(),
        v => v.join(", "),
    }
}

/// `runner fragments NAME`: everything about one fragment.
fn show(store: &Store, f: &Fragment) {
    outln(format_args!("{} ({})", f.name, f.path.display()));
    if !f.description.is_empty() {
        outln(&f.description);
    }
    outln(format_args!("variables: {}", variables(f)));
    let (files, _) = store.todo_files();
    match latest_round(files.iter().map(|t| &t.doc), &f.name) {
        Some(r) => outln(format_args!("latest round: {r}")),
        None => outln("latest round: none (not applied yet)"),
    }
    outln("steps:");
    for (k, s) in f.steps.iter().enumerate() {
        let after = match s.after.is_empty() {
            true => String::new(),
            false => format!(" (after {})", s.after.join(", ")),
        };
        outln(format_args!("  {}. {}{after}: {}", k + 1, s.key, s.subject));
        for line in s.description.trim().lines() {
            outln(format_args!("       {line}"));
        }
    }
}

/// `runner apply NAME k=v…`: render every step, then under the store lock append them to
/// the inbox's Todo section in order, each `@after` the items of the steps it follows and
/// marked with the next round. Anything refused is refused before the inbox is written.
pub(crate) fn apply(args: ApplyArgs) -> Result<i32> {
    let values = parse_assignments(&args.vars)?;
    // Like `runner fragments`, the project's store inside a git repository: the fragments
    // listed there are the ones applied.
    let store = open_store(&args.store, Need::DefaultProject)?;
    let fragment = store.fragment(&args.name)?;
    let steps = fragment.render(&values)?;
    let _lock = store.lock()?;
    let (files, unreadable) = store.todo_files();
    if let Some(e) = unreadable.into_iter().next() {
        // An unreadable batch file may hold this fragment's latest round.
        return Err(e);
    }
    let round = latest_round(files.iter().map(|t| &t.doc), &fragment.name).unwrap_or(0) + 1;
    let inbox = store.inbox();
    let (text, _) = store.read_inbox(&today())?;
    let mut doc = parse_inbox(&inbox, &text)?;
    let mut numbers: HashMap<&str, u32> = HashMap::new();
    for s in &steps {
        let mark = FragmentMark {
            name: fragment.name.clone(),
            round,
            step: s.key.clone(),
            after: s.after.clone(),
        };
        let after: Vec<u32> = s
            .after
            .iter()
            .filter_map(|k| numbers.get(k.as_str()).copied())
            .collect();
        let n = append(&mut doc, s, &mark, &after).map_err(|e| {
            let why = match e {
                EditError::NotReadBack => "the appended item would not read back as written: \
                    a `description` line reads as an item (`- [ ] …`) or a `> runner:` note, \
                    or the inbox's Todo section ends inside an open code fence"
                    .to_owned(),
                e => e.to_string(),
            };
            Error::input_at(
                &fragment.path,
                Some(s.line),
                format!(
                    "step `{}`: {why}; nothing was written to {}",
                    s.key,
                    inbox.display()
                ),
            )
        })?;
        numbers.insert(&s.key, n);
    }
    doc.set_last_updated(&today());
    crate::fault::pause("apply-edit");
    crate::fsutil::write_atomic(&inbox, doc.render().as_bytes())?;
    outln(format_args!(
        "Applied fragment {}, round {round}, to {}:",
        fragment.name,
        inbox.display()
    ));
    for s in &steps {
        let after: Vec<String> = s
            .after
            .iter()
            .filter_map(|k| numbers.get(k.as_str()))
            .map(u32::to_string)
            .collect();
        let after = match after.is_empty() {
            true => String::new(),
            false => format!(", after {}", after.join(",")),
        };
        let n = numbers.get(s.key.as_str()).copied().unwrap_or_default();
        outln(format_args!("  {n:>3}. {} ({}{after})", s.subject, s.key));
    }
    outln("Hand them out with `runner resolve`.");
    Ok(0)
}

/// Append step `s` to the Todo section of `doc` as `SUBJECT @after:… @fragment:MARK` with
/// its description as continuation; it must read back as exactly that item. Returns its
/// number.
fn append(
    doc: &mut TodoDocument,
    s: &RenderedStep,
    mark: &FragmentMark,
    after: &[u32],
) -> std::result::Result<u32, EditError> {
    let mut line = escape_text(&s.subject);
    if !after.is_empty() {
        let list: Vec<String> = after.iter().map(u32::to_string).collect();
        line.push_str(&format!(" @after:{}", list.join(",")));
    }
    line.push_str(&format!(" @fragment:{mark}"));
    let mut edited = doc.clone();
    let n = edited.append_item(Section::Todo, &line, &s.description)?;
    let item = edited.item(n).ok_or(EditError::NotReadBack)?;
    if let Some(p) = edited.block_problems(n).first() {
        return Err(EditError::Unreadable(p.message.clone()));
    }
    if item.title != s.subject || item.after != after || item.fragment.as_ref() != Some(mark) {
        return Err(EditError::NotReadBack);
    }
    *doc = edited;
    Ok(n)
}
