//! README's "Ten agents on one repository, landing through the queue" runs as written: every
//! `$` line of its console blocks, in order (with `examples/landing/`'s scripted teammate),
//! and the state it describes — `--serialize-overlaps`' chain in the plan, nine merges and
//! `feature-b` failing `merge_failed`, the fixed row awaiting review, accepted, the tests
//! passing on `main` (issue 57).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{Run, Sandbox, by_id, git};

/// The `$` lines of the README section `heading`'s console blocks, in order.
fn commands_of(readme: &str, heading: &str) -> Vec<String> {
    let start = readme.find(heading).expect("the section");
    let section = &readme[start..];
    let end = section[heading.len()..]
        .find("\n## ")
        .map_or(section.len(), |e| e + heading.len());
    let mut in_console = false;
    let mut out = Vec::new();
    for line in section[..end].lines() {
        match line.trim_end() {
            "```console" => in_console = true,
            "```" => in_console = false,
            l if in_console => {
                if let Some(cmd) = l.strip_prefix("$ ") {
                    out.push(cmd.to_owned());
                }
            }
            _ => {}
        }
    }
    out
}

/// Run `cmd` with `sh -c` in `cwd`, `runner` first on PATH, HOME in the sandbox.
fn sh(sb: &Sandbox, cwd: &Path, cmd: &str) -> Run {
    let bin = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("the runner's folder")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("sh");
    c.args(["-c", cmd])
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", sb.join("home"))
        .env("NO_COLOR", "1");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("RUNNER_")) {
        c.env_remove(k);
    }
    c.output().expect("sh").into()
}

#[test]
fn the_readmes_ten_agents_example_runs_as_written() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let commands = commands_of(
        &readme,
        "### Ten agents on one repository, landing through the queue",
    );
    assert!(commands.len() >= 8, "{commands:?}");
    let sb = Sandbox::new();
    let app = sb.join("app");
    let mut cwd = root.clone();
    let mut runs = Vec::new();
    for cmd in &commands {
        // The example's folder is the README's /tmp/app; here it is the sandbox's.
        let cmd = cmd.replace("/tmp/app", &app.display().to_string());
        if let Some(dir) = cmd.strip_prefix("cd ") {
            cwd = cwd.join(dir);
            continue;
        }
        let r = sh(&sb, &cwd, &cmd);
        runs.push((cmd, r));
    }
    let said = |part: &str| {
        runs.iter()
            .find(|(c, _)| c.contains(part))
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("no command {part}: {runs:?}"))
    };
    let dry = said("--dry-run");
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(dry.stdout.contains("  lint-m5 → docs-m5\n"), "{dry:?}");
    assert!(
        dry.stderr
            .contains("rows lint-m5, docs-m5 will touch the same files (src/m5.rs)"),
        "{dry:?}"
    );
    let first = said("--serialize-overlaps --jobs 10 --format plain");
    assert_eq!(first.code, 1, "feature-b failed: {first:?}");
    assert!(
        first.stdout.contains(
            "FAILED 10-feature-b [merge_failed]  the merged tree failed --verify-merged: `sh test.sh` exited with code 101: test cli::aliases_are_unique ... FAILED: alias -e is taken twice"
        ),
        "{first:?}"
    );
    assert_eq!(
        first.stdout.matches("into main as ").count(),
        9,
        "{first:?}"
    );
    assert!(
        first
            .stdout
            .contains("Summary: 10 item(s): 9 completed, 1 failed")
    );
    let review = said("--merge=review");
    assert_eq!(review.code, 0, "{review:?}");
    assert!(
        review.stdout.contains(
            "Awaiting review (runner review; runner accept ID…; runner reject ID…): 10-feature-b"
        ),
        "{review:?}"
    );
    let diff = said("runner review --diff");
    assert!(diff.stdout.contains("+alias: -i"), "{diff:?}");
    let accepted = said("runner accept feature-b");
    assert_eq!(accepted.code, 0, "{accepted:?}");
    assert!(
        accepted.stdout.contains("MERGED 10-feature-b  as "),
        "{accepted:?}"
    );
    let tests = said("sh test.sh");
    assert_eq!(tests.code, 0, "{tests:?}");
    assert!(tests.stdout.contains("test result: ok"));
    // What the README says: docs-m5 documented the fixed line; ten merges on main; the
    // output names every merge.
    assert_eq!(
        std::fs::read_to_string(app.join("src/m5.rs")).expect("m5"),
        "/// The module's entry point.\nfn m5() {}\n"
    );
    let merges = git(&app, &["log", "--merges", "--format=%H", "main"]);
    assert_eq!(merges.lines().count(), 10, "{merges}");
    let out = by_id(&app.join("workers-output.csv"), "id");
    for (id, row) in &out {
        assert_eq!(row["status"], "completed", "{id}");
        assert!(
            merges.contains(&row["merged"]) && !row["merged"].is_empty(),
            "{id}: {row:?}"
        );
    }
}
