//! Issue 49: the verify command is confined too. A confined teammate rewrites the verify
//! script (`check.sh` in its working directory) into one that writes outside it — a file in
//! HOME, a victim file beside the run, the team's journal, the main checkout from a
//! worktree — and passes only when such a write succeeds. Under `--sandbox landlock` every
//! such write is denied (the item fails its verify, the victims are intact) while the verify
//! still writes its working directory and a private `TMPDIR` that is gone after the run;
//! under `--sandbox none` (the control: what every verify did before) the same script
//! writes them and the item passes.

use crate::harness::{Run, Sandbox, by_id, git, landlock_or_skip};
use crate::sandbox::{assert_no_survivors, layout, run_cmd, workspace};

/// The lines `check.sh` wrote in `dir/verify-attack.txt`: (target, "ok" or "denied").
fn attack_lines(dir: &std::path::Path) -> Vec<(String, String)> {
    let path = dir.join("verify-attack.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(t, r)| (t.to_owned(), r.to_owned()))
        .collect()
}

/// The private TMPDIR the verify had (from its `TMPDIR … ok` line): it is not the
/// teammate's own `work/` folder (its TMPDIR), and it is gone.
fn assert_private_tmpdir_gone(lines: &[(String, String)], teammate_work: &std::path::Path) {
    let tmp = lines
        .iter()
        .find_map(|(t, r)| t.strip_prefix("TMPDIR ").map(|p| (p.to_owned(), r.clone())))
        .expect("a TMPDIR line");
    assert_eq!(
        tmp.1, "ok",
        "the verify could not write its TMPDIR: {lines:?}"
    );
    let tmp = std::path::PathBuf::from(tmp.0);
    assert!(!tmp.starts_with(teammate_work), "{}", tmp.display());
    assert!(!tmp.exists(), "left behind: {}", tmp.display());
}

#[test]
fn a_rewritten_verify_writes_nothing_outside_the_working_directory_under_the_sandbox() {
    if !landlock_or_skip("verify confined") {
        return;
    }
    for mode in ["landlock", "none"] {
        let sb = layout(&[("a", "rewrite_verify")]);
        sb.write("work/check.sh", "#!/bin/sh\nexit 1\n");
        sb.write("victim.txt", "intact\n");
        let journal = workspace(&sb).join("journal.jsonl");
        let victims = [
            sb.join("home/keep.txt"),
            sb.join("victim.txt"),
            journal.clone(),
        ];
        let joined: Vec<String> = victims.iter().map(|p| p.display().to_string()).collect();
        let r: Run = run_cmd(&sb, mode, &["--verify", "sh check.sh"])
            .env("VICTIMS", joined.join(":"))
            .output()
            .expect("runner")
            .into();
        eprintln!("{mode}: {r:?}");
        let lines = attack_lines(&sb.join("work"));
        let row = &by_id(&sb.join("out/workers-output.csv"), "id")["a"];
        let journal_text = std::fs::read_to_string(&journal).expect("journal");
        if mode == "landlock" {
            for v in &joined {
                assert!(
                    lines.contains(&(v.clone(), "denied".into())),
                    "{v}: {lines:?}"
                );
            }
            assert_eq!(sb.read("home/keep.txt"), "mine\n");
            assert_eq!(sb.read("victim.txt"), "intact\n");
            assert!(!journal_text.contains("pwned"), "{journal_text}");
            assert_eq!(r.code, 1, "{r:?}");
            assert_eq!(row["status"], "failed", "{row:?}");
            assert_eq!(row["failure_kind"], "verify_failed", "{row:?}");
            assert!(
                row["error"].contains("the sandbox denied writing"),
                "the denied write is explained: {row:?}"
            );
            let own = workspace(&sb).join("teammates/1-a/work");
            assert_private_tmpdir_gone(&lines, &own);
            assert_no_survivors(&sb);
        } else {
            // The control: unconfined, the rewritten verify writes where it likes and passes.
            assert!(
                lines.contains(&(joined[1].clone(), "ok".into())),
                "{lines:?}"
            );
            assert_eq!(sb.read("victim.txt"), "intact\npwned\n");
            assert_eq!(row["status"], "completed", "{row:?}");
        }
    }
}

#[test]
fn a_rewritten_verify_in_a_worktree_writes_its_worktree_only() {
    if !landlock_or_skip("verify confined to its worktree") {
        return;
    }
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q", "-b", "main"]);
    sb.write("README.md", "original\n");
    sb.write("check.sh", "#!/bin/sh\nexit 1\n");
    sb.write(
        ".gitignore",
        "*.runner/\nworkers-output*.csv\nin.csv\ninstr.md\nhome/\n",
    );
    git(sb.path(), &["add", "-A"]);
    git(sb.path(), &["commit", "-q", "-m", "init"]);
    sb.write("home/keep.txt", "mine\n");
    sb.write_rows(&[("a", "rewrite_verify")]);
    let victims = [sb.join("README.md"), sb.join("home/keep.txt")];
    let joined: Vec<String> = victims.iter().map(|p| p.display().to_string()).collect();
    let r: Run = sb
        .fake_batch_cmd(&[
            "--sandbox",
            "landlock",
            "--isolate",
            "worktree",
            "--verify",
            "sh check.sh",
        ])
        .env("VICTIMS", joined.join(":"))
        .output()
        .expect("runner")
        .into();
    eprintln!("{r:?}");
    let ws = sb.join("workers-output.runner");
    let lines = attack_lines(&ws.join("worktrees/1-a"));
    for v in &joined {
        assert!(
            lines.contains(&(v.clone(), "denied".into())),
            "{v}: {lines:?}"
        );
    }
    assert_eq!(sb.read("README.md"), "original\n", "the main checkout");
    assert_eq!(sb.read("home/keep.txt"), "mine\n");
    assert_private_tmpdir_gone(&lines, &ws.join("teammates/1-a/work"));
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed", "{:?}", rows["a"]);
    assert_eq!(
        rows["a"]["failure_kind"], "verify_failed",
        "{:?}",
        rows["a"]
    );
    assert_no_survivors(&sb);
}
