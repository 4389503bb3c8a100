//! `runner runners`: the known runner definitions, whether each program is on PATH, and its
//! version (each `--version` call bounded by a time limit).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::definition::{self, BUILTIN, RunnerDef};
use crate::cli::RunnersArgs;
use crate::error::Result;
use crate::run::supervise::capture::capture;

/// How long a `--version` call may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// The first line a program prints on stdout for `args`, or why there is none (in
/// parentheses). No shell; run by [`capture`], so the program and anything it starts
/// are gone soon after [`VERSION_TIMEOUT`] at the latest.
fn version_of(program: &Path, args: &[String]) -> String {
    match capture(program, args, VERSION_TIMEOUT) {
        Ok(out) => out
            .stdout
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_owned(),
        Err(e) => format!("({e})"),
    }
}

/// One line of `runner runners`.
struct Row {
    name: String,
    program: String,
    version: String,
    proven: String,
    notes: String,
}

/// `PROVEN`: the real CLI version the definition's end-to-end test runs, or `no` (only
/// fakes of the CLI were run), or `-` for `exec` (any program) and kind `http` (no CLI).
fn proven(d: &RunnerDef) -> String {
    match (&d.proven, d.program.is_empty()) {
        (Some(p), _) => p.version.clone(),
        (None, true) => "-".into(),
        (None, false) => "no".into(),
    }
}

/// What the definition's `[sandbox] vars` do, for its notes: under the runner's sandbox
/// the CLI's own is handed over (`; sandboxed by the runner: sandbox=danger-full-access`).
fn handover(d: &RunnerDef) -> String {
    if d.sandbox.vars.is_empty() {
        return String::new();
    }
    let vars: Vec<String> = d
        .sandbox
        .vars
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "; under --sandbox landlock its own sandbox is off and ours replaces it ({})",
        vars.join(", ")
    )
}

/// What the definition does about the CLI's own retries (issue 29), for its notes: the
/// retries its `max_retries` var leaves the CLI (the runner does the waiting, once for the
/// whole team), and the kinds its `[failure] live` lines end an attempt with at once.
fn retries(d: &RunnerDef) -> String {
    let mut out = String::new();
    for (var, what) in [("max_retries", "retries"), ("max_attempts", "attempts")] {
        if let Some(n) = d.vars.get(var) {
            out.push_str(&format!(
                "; its own {what} set to {n} (the runner retries; --var {var}=N)"
            ));
        }
    }
    let live = d.failure.live();
    let mut kinds: Vec<&str> = live
        .iter()
        .map(|r| r.kind())
        .filter(|k| *k != crate::failure::FailureKind::RateLimited)
        .map(|k| k.as_str())
        .collect();
    kinds.dedup();
    let rate = live
        .iter()
        .any(|r| r.kind() == crate::failure::FailureKind::RateLimited);
    let what = match (kinds.is_empty(), rate) {
        (true, false) => None,
        (false, false) => Some(kinds.join("/")),
        (true, true) => Some("a rate limit longer than the time left".to_owned()),
        (false, true) => Some(format!(
            "{} (or a rate limit longer than the time left)",
            kinds.join("/")
        )),
    };
    if let Some(what) = what {
        out.push_str(&format!(
            "; ends an attempt at once when the CLI reports {what} while it runs"
        ));
    }
    out
}

/// `runner runners`: one line per built-in definition (or the store's replacement of it),
/// then per definition only the store has (`<store>/runners/*.toml`), then per
/// `--runner-file`, each checked as a run would check it (a broken one is exit 2); the notes
/// of one read from a file start with that file in brackets (and say when it replaces the
/// built-in of its name). Each line gives its program on PATH, the installed version (asked
/// of a built-in's program; of a file's only with `--versions`), the version its end-to-end
/// test proves (`PROVEN`; `no`: not proven against the real CLI) and a description or
/// install hint; then the kernel's Landlock ABI (what `--sandbox landlock` needs).
pub(crate) fn runners(args: RunnersArgs) -> Result<i32> {
    let store = args.store.as_deref();
    if let Some(runner) = &args.check {
        if let Some(file) = args.runner_file.first() {
            return Err(crate::error::Error::Usage(format!(
                "give the definition to --check itself: `runner runners --check {} TRANSCRIPT...`",
                file.display()
            )));
        }
        return crate::commands::runner_check::check(runner, store, &args.transcripts);
    }
    let defs = definitions(store, &args.runner_file)?;
    // One thread per definition: the `--version` calls run at once.
    let rows: Vec<Row> = std::thread::scope(|scope| {
        let handles: Vec<_> = defs
            .iter()
            .map(|(d, file)| scope.spawn(move || row(d, file.as_deref(), args.versions)))
            .collect();
        handles
            .into_iter()
            .zip(&defs)
            .map(|(h, (d, _))| {
                h.join().unwrap_or_else(|_| Row {
                    name: d.name.clone(),
                    program: String::new(),
                    version: String::new(),
                    proven: proven(d),
                    notes: String::new(),
                })
            })
            .collect()
    });
    print_table(&rows);
    crate::ui::outln(format_args!(
        "{}",
        crate::sandbox::describe(crate::sandbox::kernel_abi())
    ));
    Ok(0)
}

/// The definitions `runner runners` lists, each with the file it came from when it is not
/// the built-in one: the built-in ones (or the store's replacements), those only the store
/// has, then `runner_files`.
///
/// Errors: a definition that does not load (exit 2).
fn definitions(
    store: Option<&Path>,
    runner_files: &[PathBuf],
) -> Result<Vec<(RunnerDef, Option<PathBuf>)>> {
    let mut defs: Vec<(RunnerDef, Option<PathBuf>)> = Vec::new();
    for (name, _) in BUILTIN {
        let file = store
            .map(|s| definition::store_file(s, name))
            .filter(|p| p.is_file());
        defs.push((definition::load(name, store, None)?, file));
    }
    if let Some(store) = store {
        for name in definition::store_only(store)? {
            let file = definition::store_file(store, &name);
            defs.push((definition::load(&name, Some(store), None)?, Some(file)));
        }
    }
    for file in runner_files {
        defs.push((definition::load("", None, Some(file))?, Some(file.clone())));
    }
    for w in defs.iter().flat_map(|(d, _)| &d.warnings) {
        crate::ui::warn(w);
    }
    Ok(defs)
}

/// What the VERSION column says of a definition read from a file when `--versions` was not
/// given: its program is not run.
const NOT_ASKED: &str = "(not run; --versions)";

/// The line of definition `d` (read from `file`, when not built in): its program on PATH
/// and version, or where its requests go and whether its key is set. A program named by a
/// file (a repository's store, `--runner-file`) is asked its version only with `versions`
/// (`--versions`): listing must not run what a repository chose.
fn row(d: &RunnerDef, file: Option<&Path>, versions: bool) -> Row {
    let row = |program: String, version: String, notes: String| Row {
        name: d.name.clone(),
        program,
        version,
        proven: proven(d),
        notes: match file {
            Some(f) => {
                let replaces = match d.replaces_builtin.is_some() {
                    true => "replaces the built-in; ",
                    false => "",
                };
                let rest = format!("{replaces}{notes}{}{}", retries(d), handover(d));
                format!("[{}] {}", f.display(), rest.trim_start_matches("; "))
                    .trim_end()
                    .into()
            }
            None => format!("{notes}{}{}", retries(d), handover(d)),
        },
    };
    if let Some(http) = d.backend.http() {
        // No program: say where requests go and whether the key is there.
        let key = match std::env::var_os(&http.key_env) {
            _ if http.key_env.is_empty() => String::new(),
            Some(v) if !v.is_empty() => format!("; {} is set", http.key_env),
            _ => format!("; {} is not set", http.key_env),
        };
        let base = std::env::var(&http.base_url_env)
            .ok()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| http.base_url.clone());
        return row(
            "(http)".into(),
            "-".into(),
            format!("{} ({base}{key})", d.description),
        );
    }
    if d.program.is_empty() {
        return row("(after --)".into(), "-".into(), d.description.clone());
    }
    match which::which(&d.program) {
        Ok(path) => {
            let version = if d.version_args.is_empty() {
                String::new()
            } else if file.is_some() && !versions {
                NOT_ASKED.to_owned()
            } else {
                version_of(&path, &d.version_args)
            };
            row(path.display().to_string(), version, d.description.clone())
        }
        Err(_) => row(
            "missing".into(),
            String::new(),
            format!("install: {}", d.install_hint),
        ),
    }
}

/// The table: a header, then one line per row, each column as wide as its widest value.
fn print_table(rows: &[Row]) {
    let width = |f: fn(&Row) -> &str, min: usize| {
        rows.iter()
            .map(|r| f(r).len())
            .max()
            .unwrap_or(min)
            .max(min)
    };
    let w0 = width(|r| &r.name, 4);
    let w1 = width(|r| &r.program, 7);
    let w2 = width(|r| &r.version, 7);
    let w3 = width(|r| &r.proven, 6);
    crate::ui::outln(format_args!(
        "{:w0$}  {:w1$}  {:w2$}  {:w3$}  NOTES",
        "NAME", "PROGRAM", "VERSION", "PROVEN"
    ));
    for r in rows {
        crate::ui::outln(format_args!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}",
            r.name, r.program, r.version, r.proven, r.notes
        ));
    }
}
