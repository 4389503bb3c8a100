//! `runner runners`: the known runner definitions, whether each program is on PATH, and its
//! version (each `--version` call bounded by a time limit).

use std::path::Path;
use std::time::Duration;

use crate::agent::definition::{self, BUILTIN, RunnerDef};
use crate::cli::RunnersArgs;
use crate::error::Result;
use crate::run::process;

/// How long a `--version` call may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// The first line a program prints on stdout for `args`, or why there is none (in
/// parentheses). No shell; run by [`process::capture`], so the program and anything it starts
/// are gone soon after [`VERSION_TIMEOUT`] at the latest.
fn version_of(program: &Path, args: &[String]) -> String {
    match process::capture(program, args, VERSION_TIMEOUT) {
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

/// `runner runners`.
pub fn runners(args: RunnersArgs) -> Result<i32> {
    let mut defs: Vec<RunnerDef> = Vec::new();
    for (name, _) in BUILTIN {
        defs.push(definition::load(name, args.store.as_deref(), None)?);
    }
    let rows: Vec<(String, String, String, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = defs
            .iter()
            .map(|d| {
                scope.spawn(move || {
                    if d.program.is_empty() {
                        return (
                            d.name.clone(),
                            "(after --)".to_string(),
                            "-".to_string(),
                            d.description.clone(),
                        );
                    }
                    match which::which(&d.program) {
                        Ok(path) => {
                            let version = if d.version_args.is_empty() {
                                String::new()
                            } else {
                                version_of(&path, &d.version_args)
                            };
                            (
                                d.name.clone(),
                                path.display().to_string(),
                                version,
                                d.description.clone(),
                            )
                        }
                        Err(_) => (
                            d.name.clone(),
                            "missing".to_string(),
                            String::new(),
                            format!("install: {}", d.install_hint),
                        ),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (String::new(), String::new(), String::new(), String::new())
                })
            })
            .collect()
    });
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(7).max(7);
    let w2 = rows.iter().map(|r| r.2.len()).max().unwrap_or(7).max(7);
    crate::ui::outln(format_args!(
        "{:w0$}  {:w1$}  {:w2$}  NOTES",
        "NAME", "PROGRAM", "VERSION"
    ));
    for (name, path, version, notes) in &rows {
        crate::ui::outln(format_args!(
            "{name:w0$}  {path:w1$}  {version:w2$}  {notes}"
        ));
    }
    Ok(0)
}
