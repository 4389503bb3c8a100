//! `runner runners`: the known runner definitions, whether each program is on PATH, and its
//! version (each `--version` call bounded by a time limit).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::definition::{self, BUILTIN, RunnerDef};
use crate::cli::RunnersArgs;
use crate::error::Result;

/// How long a `--version` call may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// The first line a program prints for `args`, or why there is none. No shell; the child is
/// killed after [`VERSION_TIMEOUT`].
fn version_of(program: &Path, args: &[String]) -> String {
    use std::os::unix::process::CommandExt;
    let mut child = match Command::new(program)
        .process_group(0)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return format!("(cannot run: {e})"),
    };
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > VERSION_TIMEOUT => {
                // The whole group: a wrapper script's own children must not outlive it.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.kill();
                let _ = child.wait();
                return format!("(no answer in {}s)", VERSION_TIMEOUT.as_secs());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return format!("(cannot wait: {e})"),
        }
    }
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.by_ref().take(4096).read_to_string(&mut out);
    }
    out.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_owned()
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
    println!(
        "{:w0$}  {:w1$}  {:w2$}  NOTES",
        "NAME", "PROGRAM", "VERSION"
    );
    for (name, path, version, notes) in &rows {
        println!("{name:w0$}  {path:w1$}  {version:w2$}  {notes}");
    }
    Ok(0)
}
