//! `runner list` and `runner add`: the todo inbox (seed `todo-skill.md`); `list` also shows
//! the batch files with items left to run, each with the command that runs them.

use std::io::{IsTerminal, Read};
use std::path::Path;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::{AddArgs, ListArgs, RunArgs, StoreArgs};
use crate::error::{Error, Result};
use crate::run::backend::Backend;
use crate::run::record::resume;
use crate::run::record::workspace::Found;
use crate::settings::Settings;
use crate::source::todo::{EditError, Section, TodoDocument, escape_title};
use crate::store::{self, Need, ScopeFlags, Store, today};
use crate::store::{parse_checked, parse_inbox};
use crate::ui::inbox::{ListedItem, WaitingBatch, open_items, render_batches, render_items};

/// The checkpoint template compiled into the binary (`templates/checkpoint.md`).
pub(crate) const CHECKPOINT_TEMPLATE: &str = include_str!("../../templates/checkpoint.md");

/// Whether stdin carries a protocol (`runner mcp`): then no command asks on the terminal,
/// even when stdin is one.
static STDIN_IS_PROTOCOL: AtomicBool = AtomicBool::new(false);

/// Say that stdin carries a protocol for the rest of the process ([`STDIN_IS_PROTOCOL`]).
pub(crate) fn stdin_is_protocol() {
    STDIN_IS_PROTOCOL.store(true, Ordering::Relaxed);
}

/// Pick the store for a command, asking on a terminal when the rules need a choice.
pub(crate) fn open_store(args: &StoreArgs, need: Need) -> Result<Store> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let flags = ScopeFlags {
        store: args.store.clone(),
        global: args.global,
        project: args.project,
    };
    let interactive = !STDIN_IS_PROTOCOL.load(Ordering::Relaxed)
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal();
    store::choose(&flags, &cwd, need, interactive, |root| {
        let items = [
            format!("project store ({})", root.join(store::STORE_DIR).display()),
            format!("global store (~/{})", store::STORE_DIR),
        ];
        dialoguer::Select::new()
            .with_prompt("Which todo store?")
            .items(&items)
            .default(0)
            .interact()
            .map(|i| i == 0)
            .map_err(|e| Error::Usage(format!("no store chosen: {e}")))
    })
}

/// The settings of a run from `store` (the flags over its `runner.toml` over the defaults,
/// with its `runners/` overrides) and the backend built from them, once.
///
/// Errors: as [`Settings::resolve`] and [`crate::run::backend::for_settings`], an invalid
/// runner.toml, a `--verify` placeholder a todo item has no value for (exit 2).
pub(crate) fn store_settings(
    store: &Store,
    run: &RunArgs,
    command: &[String],
) -> Result<(Settings, Arc<dyn Backend>)> {
    let settings = Settings::resolve(run, command, &store.settings()?, Some(&store.dir))?;
    if let Some(v) = &settings.verify {
        let names = crate::plans::todo_batch::ITEM_VARS.map(String::from);
        crate::prompt::check_verify(v, &names)?;
    }
    let backend = crate::run::backend::for_settings(&settings)?;
    Ok((settings, backend))
}

/// Read a todo file (UTF-8) and parse it checked.
///
/// Errors: unreadable, not UTF-8, or with problems (exit 2, naming file and line).
pub(crate) fn read_doc(path: &Path) -> Result<(String, TodoDocument)> {
    let (text, _) = store::read_todo(path)?;
    let doc = parse_checked(path, &text)?;
    Ok((text, doc))
}

/// The todo inbox of a store and its batch files with items left to run, as `runner list`
/// shows them.
pub(crate) struct Listing {
    /// The inbox file (`todo.md`).
    pub inbox: std::path::PathBuf,
    /// The inbox, parsed.
    pub doc: TodoDocument,
    /// The batch files with unticked items, each with the command that runs them.
    pub waiting: Vec<(WaitingBatch, TodoDocument)>,
}

impl Listing {
    /// `runner list --format json`: `{"v":1,"inbox":…,"items":[…],"batches":[…]}`
    /// ([`crate::ui::inbox::json`]).
    pub(crate) fn json(&self) -> String {
        let batches: Vec<WaitingBatch> = self.waiting.iter().map(|(b, _)| b.clone()).collect();
        crate::ui::inbox::json(&self.inbox.display().to_string(), &self.doc, &batches)
    }
}

/// Read the inbox of the store `args` picks (made, empty, when it is not there yet and the
/// store can be written) and the batches waiting in it.
///
/// Errors: `--store` is no store; the inbox cannot be read or has problems (exit 2, naming
/// file and line).
pub(crate) fn listing(args: &ListArgs) -> Result<Listing> {
    if let Some(dir) = &args.store.store {
        store::check_given(dir)?;
    }
    let store = open_store(&args.store, Need::DefaultProject)?;
    store.settle_move()?;
    let (mut text, existed) = store.read_inbox(&today())?;
    if !existed {
        // Listing only reads: a store this user may not write is listed (empty), not refused.
        let made = store.lock().and_then(|_lock| {
            // Another writer may have made it since.
            let (now, exists) = store.read_inbox(&today())?;
            if !exists {
                crate::fsutil::write_atomic(&store.inbox(), now.as_bytes())?;
            }
            Ok(now)
        });
        match made {
            Ok(now) => text = now,
            Err(e) => eprintln!("warning: the inbox was not created: {e}"),
        }
    }
    let doc = parse_inbox(&store.inbox(), &text)?;
    Ok(Listing {
        inbox: store.inbox(),
        doc,
        waiting: waiting_batches(&store),
    })
}

/// `runner list`.
pub(crate) fn list(args: ListArgs) -> Result<i32> {
    let listing = listing(&args)?;
    if args.format == crate::options::Format::Json {
        crate::ui::out_raw(listing.json());
        return Ok(0);
    }
    crate::ui::outln(listing.inbox.display());
    crate::ui::out(render_items(&listing.doc));
    let shown: Vec<(WaitingBatch, &TodoDocument)> = listing
        .waiting
        .iter()
        .map(|(b, d)| (b.clone(), d))
        .collect();
    crate::ui::out(render_batches(&shown));
    Ok(0)
}

/// The batch files of `store` with unticked items, by number, each with the command that
/// runs what is left: derived from its team's last run when its workspace is there and has
/// something left ([`resume::for_team`]), else `runner run todo-N.md` (with
/// `--include-ideas` when an unticked item is an idea). A batch file that cannot be read
/// is warned about and left out.
fn waiting_batches(store: &Store) -> Vec<(WaitingBatch, TodoDocument)> {
    let here = std::env::current_dir().unwrap_or_default();
    let mut out = Vec::new();
    for (_, path) in store.batches() {
        let doc = match store::read_todo(&path) {
            Ok((_, doc)) => doc,
            Err(e) => {
                crate::ui::warn(e);
                continue;
            }
        };
        let open = open_items(&doc);
        if open.is_empty() {
            continue;
        }
        let team = crate::plans::todo_batch::team_name(&path);
        let found = Found::Workspace(store.team_dir(&team));
        let snapshot = found.snapshot().ok();
        let running = snapshot.as_ref().is_some_and(|s| s.is_live());
        let recorded = snapshot.and_then(|s| resume::for_team(&found, &s));
        let resume = recorded.unwrap_or_else(|| {
            let shown = path
                .strip_prefix(&here)
                .unwrap_or(&path)
                .display()
                .to_string();
            let ideas = open.iter().any(|i| i.section == Section::Ideas);
            let mut words = vec!["runner", "run", shown.as_str()];
            if ideas {
                words.push("--include-ideas");
            }
            resume::shell_words(&words)
        });
        let batch = WaitingBatch {
            file: path.display().to_string(),
            team,
            status: doc.frontmatter_value("status").unwrap_or_default(),
            resume,
            running,
            items: open.into_iter().map(ListedItem::of).collect(),
        };
        out.push((batch, doc));
    }
    out
}

/// An item `runner add` wrote: its number in the inbox, the inbox, and its checkpoint file
/// (`None` for an idea). Shown as the command prints it (`Added item 3 to … with checkpoint
/// cp-….md`).
pub(crate) struct Added {
    /// Its number, as `runner list` counts.
    pub number: u32,
    /// The inbox it went to.
    pub inbox: std::path::PathBuf,
    /// Its checkpoint file's name in the store (`None`: an idea).
    pub checkpoint: Option<String>,
}

impl std::fmt::Display for Added {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (number, inbox) = (self.number, self.inbox.display());
        match &self.checkpoint {
            Some(cp) => write!(f, "Added item {number} to {inbox} with checkpoint {cp}"),
            None => write!(f, "Added idea {number} to {inbox}"),
        }
    }
}

/// The title and the continuation of `args.text`, once it is known to be an item `add`
/// takes.
///
/// Errors: the text is empty, or an idea is given a checkpoint (exit 2).
fn item_text(args: &AddArgs, has_checkpoint: bool) -> Result<(String, String)> {
    let (title, continuation) = match args.text.trim().split_once('\n') {
        Some((t, rest)) => (t.trim().to_owned(), rest.to_owned()),
        None => (args.text.trim().to_owned(), String::new()),
    };
    if title.is_empty() {
        return Err(Error::Usage("the item text is empty".into()));
    }
    if args.idea && has_checkpoint {
        return Err(Error::Usage(
            "an idea has no checkpoint; drop --checkpoint or --idea".into(),
        ));
    }
    Ok((title, continuation))
}

/// `runner add`.
pub(crate) fn add(args: AddArgs) -> Result<i32> {
    item_text(&args, args.checkpoint.is_some())?;
    let body = match args.checkpoint.as_deref() {
        None => None,
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Error::Usage(format!("cannot read the checkpoint from stdin: {e}")))?;
            Some(s)
        }
        Some(p) => Some(store::read_utf8(Path::new(p))?),
    };
    crate::ui::outln(add_item(&args, body)?);
    Ok(0)
}

/// Whether `text` starts with a `---` frontmatter block (closed by a `---` line).
fn has_frontmatter(text: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}');
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return false;
    };
    rest.lines().any(|l| l.trim_end() == "---")
}

/// Add `args.text` to the inbox of the store `args` picks, a todo item with a checkpoint file
/// rendered from the store's template around `checkpoint` (the Markdown `--checkpoint` named;
/// its own path in `args` is not read) — or `checkpoint` as it is when it has a frontmatter
/// of its own —, or an idea.
///
/// Errors: as [`item_text`]; the template does not render; the item would not read back as
/// given (an `@after:` naming no item) — nothing is written then (exit 2); the store cannot
/// be locked or written.
pub(crate) fn add_item(args: &AddArgs, checkpoint: Option<String>) -> Result<Added> {
    let (title, continuation) = item_text(args, checkpoint.is_some())?;
    let body = checkpoint;
    let store = open_store(&args.store, Need::Choice)?;
    let cp_template = store.template("checkpoint.md", CHECKPOINT_TEMPLATE)?;
    // Check everything before writing: the template renders, the item reads back.
    let now = jiff::Zoned::now();
    let checkpoint_text = if args.idea {
        None
    } else if let Some(own) = body.as_deref().filter(|b| has_frontmatter(b)) {
        // A checkpoint with its own frontmatter is copied as it is: never a second one.
        Some(own.to_owned())
    } else {
        let env = minijinja::Environment::new();
        let rendered = env
            .render_str(
                &cp_template,
                minijinja::context! {
                    created => now.strftime("%Y-%m-%dT%H:%M:%S").to_string(),
                    task => &title,
                    // The file's bytes as they are (its last newline too); a blank one
                    // leaves the template's sections.
                    body => body.as_deref().filter(|b| !b.trim().is_empty()),
                },
            )
            .map_err(|e| {
                Error::input_at(
                    &store.dir.join("templates/checkpoint.md"),
                    e.line().map(|l| l as u64),
                    e,
                )
            })?;
        Some(rendered)
    };
    let section = if args.idea {
        Section::Ideas
    } else {
        Section::Todo
    };
    // The edit is tried on the inbox as it is (bad input changes nothing), then made
    // under the store lock on the inbox as it is then.
    let line = escape_title(&title);
    let (text, _) = store.read_inbox(&today())?;
    let stand_in = checkpoint_text
        .as_ref()
        .map(|_| "cp-00000000-000000.md".to_string());
    let mut doc = parse_inbox(&store.inbox(), &text)?;
    append(&mut doc, section, &line, &continuation, stand_in)
        .map_err(|e| Error::input_at(&store.inbox(), None, e))?;
    let first_use = !store.dir.exists();
    let lock = store.lock()?;
    if first_use {
        suggest_ignoring(&store.dir);
    }
    let (text, _) = store.read_inbox(&today())?;
    let mut doc = TodoDocument::parse(&text);
    let mut checkpoint_name = None;
    if let Some(content) = checkpoint_text {
        let name = store.create_checkpoint(&now.strftime("%Y%m%d-%H%M%S").to_string(), &content)?;
        checkpoint_name = Some(name);
    }
    let number = match append(
        &mut doc,
        section,
        &line,
        &continuation,
        checkpoint_name.clone(),
    ) {
        Ok(n) => n,
        Err(e) => {
            if let Some(name) = &checkpoint_name {
                let _ = std::fs::remove_file(store.dir.join(name));
            }
            return Err(Error::input_at(&store.inbox(), None, e));
        }
    };
    doc.set_last_updated(&today());
    crate::fault::pause("add-edit");
    crate::fsutil::write_atomic(&store.inbox(), doc.render().as_bytes())?;
    drop(lock);
    Ok(Added {
        number,
        inbox: store.inbox(),
        checkpoint: checkpoint_name,
    })
}

/// Append item `line` (pinned to `checkpoint`) with `continuation` to `section` of `doc`;
/// it must read back as given: one item, with that checkpoint, its `@after:` naming items
/// that exist. Returns its number.
fn append(
    doc: &mut TodoDocument,
    section: Section,
    line: &str,
    continuation: &str,
    checkpoint: Option<String>,
) -> std::result::Result<u32, EditError> {
    let line = match &checkpoint {
        Some(name) => format!("{line} @context:{name}"),
        None => line.to_string(),
    };
    let before = doc.items().len();
    let n = doc.append_item(section, &line, continuation)?;
    let item = doc.item(n).ok_or(EditError::NotReadBack)?;
    // Counted as the user counts: the inbox's items before this one (`runner list`). Items
    // after the new one moved up a number, its own `@after:` with them: as written, `k`.
    let moved = (n as usize) <= before;
    let as_written = |k: u32| if moved && k > n { k - 1 } else { k };
    if let Some(k) = item
        .after
        .iter()
        .map(|k| as_written(*k))
        .find(|k| *k as usize > before)
    {
        let has = match before {
            0 => "no items yet".to_owned(),
            1 => "1 item, number 1".to_owned(),
            b => format!("{b} items, numbered 1 to {b}"),
        };
        return Err(EditError::Unreadable(format!(
            "@after:{k} names no item (the inbox has {has})"
        )));
    }
    match doc.block_problems(n).first() {
        Some(p) => Err(EditError::Unreadable(p.message.clone())),
        None if item.context != checkpoint => Err(EditError::NotReadBack),
        None => Ok(n),
    }
}

/// When a store is made inside a git work tree that does not ignore it: say which lines keep
/// the runner's files (the store, and the `*.runner/` workspaces of CSV batches) out of
/// commits. Said once, when the store is new.
fn suggest_ignoring(store: &Path) {
    let Some(root) = crate::store::git_root(store) else {
        return;
    };
    let ignored = std::process::Command::new("git")
        .args(["check-ignore", "-q"])
        .arg(store)
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    if ignored {
        return;
    }
    let rel = store
        .strip_prefix(&root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| store.display().to_string());
    eprintln!(
        "note: created {}; to keep the runner's files out of commits, add to {}/.gitignore:\n  {rel}/\n  *.runner/",
        store.display(),
        root.display()
    );
}
