//! Files and images in the instruction (`{file:COLUMN}`, `{image:COLUMN}`) with an agent CLI
//! (the fake agent): what each teammate's prompt holds, and how a row whose file cannot be
//! used ends — failed with kind `input`, alone, before any attempt — for UTF-8, Latin-1,
//! binary, missing, too big and outside files; and a teammate that plants a link to a
//! secret in the batch folder cannot get it into another item's prompt.

use std::path::{Path, PathBuf};

use crate::harness::{Sandbox, agent, by_id};

const SECRET: &str = "TOPSECRET-ssh-key-0123456789";

/// A batch folder `batch/` with its files, a secret beside it, and BATCH.md inlining
/// `{file:path}` and `{image:shot}`.
fn batch_with_files(sb: &Sandbox) {
    sb.write("secret.txt", SECRET);
    sb.write("batch/docs/utf8.md", "# Fine\nÀ bientôt.\n");
    sb.write("batch/docs/latin1.md", b"caf\xe9 \\ ok\n");
    sb.write("batch/docs/bin.dat", b"PK\x03\x04\x00\x00rest");
    sb.write("batch/docs/big.md", "x".repeat(2000));
    sb.write("batch/shot.png", b"\x89PNG\r\n\x1a\n0000IHDR");
    std::os::unix::fs::symlink(sb.join("secret.txt"), sb.join("batch/docs/link.md"))
        .expect("symlink");
    sb.write(
        "batch/workers-input.csv",
        "id,path,shot\n\
         utf8,docs/utf8.md,shot.png\n\
         latin1,docs/latin1.md,shot.png\n\
         bin,docs/bin.dat,shot.png\n\
         missing,docs/nope.md,shot.png\n\
         big,docs/big.md,shot.png\n\
         outside,../secret.txt,shot.png\n\
         link,docs/link.md,shot.png\n\
         notimage,docs/utf8.md,docs/utf8.md\n",
    );
    sb.write(
        "batch/BATCH.md",
        "---\nid_column: id\nfile_cap: 1KiB\n---\nAudit `{path}` MODE=success\n\n\
         {file:path}\n\nThe screenshot: {image:shot}\n",
    );
}

/// Every plain file under the sandbox but `secret.txt` itself (links are not followed).
fn assert_no_file_holds_the_secret(sb: &Sandbox) {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                walk(&e.path(), found);
            } else if kind.is_file()
                && e.file_name() != "secret.txt"
                && String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default())
                    .contains(SECRET)
            {
                found.push(e.path());
            }
        }
    }
    let mut found = Vec::new();
    walk(sb.path(), &mut found);
    assert!(found.is_empty(), "the secret is in {found:?}");
}

#[test]
fn files_go_into_prompts_and_a_row_whose_file_cannot_be_used_fails_alone() {
    let sb = Sandbox::new();
    batch_with_files(&sb);
    let fake = agent("fake_agent.py");
    let r = sb.run(&[
        "batch",
        "batch/BATCH.md",
        "--format",
        "plain",
        "--retries",
        "2",
        "--",
        "python3",
        &fake,
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("batch/workers-output.csv"), "id");
    for id in ["utf8", "latin1"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
    }
    let failed = |id: &str, words: &str| {
        let row = &rows[id];
        assert_eq!(row["status"], "failed", "{row:?}");
        assert_eq!(row["failure_kind"], "input", "{row:?}");
        // Never started, never retried: no attempt was spent on it.
        assert_eq!(row["attempts"], "0", "{row:?}");
        assert!(row["error"].contains(words), "{id}: {row:?}");
    };
    failed("bin", "is binary (a NUL byte at offset 4)");
    failed("missing", "`docs/nope.md` is not there");
    failed(
        "big",
        "is 2000 bytes, over the cap of 1024 bytes; raise it with --file-cap",
    );
    failed("outside", "is outside the batch's folder");
    failed("link", "is outside the batch's folder");
    failed(
        "notimage",
        "`{image:shot}`: `docs/utf8.md` is not a PNG, JPEG, GIF or WebP",
    );
    // The prompts hold the files: UTF-8 as it is, Latin-1 escaped with the note; the image
    // as its absolute path (an agent CLI reads it itself).
    let ws = "batch/workers-output.runner";
    let utf8 = sb.prompt(ws, "utf8");
    assert!(utf8.contains("Audit `docs/utf8.md`"), "{utf8}");
    assert!(utf8.contains("# Fine\nÀ bientôt.\n"), "{utf8}");
    let shot = sb.join("batch/shot.png");
    let shot = std::fs::canonicalize(&shot).unwrap_or(shot);
    assert!(
        utf8.contains(&format!("The screenshot: {}", shot.display())),
        "{utf8}"
    );
    let latin1 = sb.prompt(ws, "latin1");
    assert!(latin1.contains("This file is not valid UTF-8"), "{latin1}");
    assert!(latin1.contains("caf\\xE9 \\\\ ok"), "{latin1}");
    // The secret reached no file the run wrote.
    assert_no_file_holds_the_secret(&sb);
    // The closing summary names the kind.
    assert!(r.stdout.contains("[input]"), "{r:?}");
}

#[test]
fn dry_run_shows_the_files_and_which_rows_would_fail() {
    let sb = Sandbox::new();
    batch_with_files(&sb);
    let before = sb.tree();
    let r = sb.run(&["batch", "batch/BATCH.md", "--dry-run", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("| # Fine"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("(fails with kind input: `{file:path}`: `docs/nope.md` is not there"),
        "{}",
        r.stdout
    );
    assert_eq!(sb.tree(), before, "a dry run writes nothing");
}

/// Attacker/victim: teammate `attacker` replaces the victim row's file by a link to a
/// secret outside the batch folder; the victim item, which starts after it, must not get the
/// secret into its prompt (the runner opens the file without following a link out of the
/// folder), and ends failed with kind `input`.
#[test]
fn a_link_a_teammate_plants_does_not_carry_a_secret_into_another_prompt() {
    let sb = Sandbox::new();
    sb.write("secret.txt", SECRET);
    sb.write("batch/docs/victim.md", "the victim's own text\n");
    sb.write(
        "batch/workers-input.csv",
        "id,path,depends_on\nattacker,docs/a.md,\nvictim,docs/victim.md,attacker\n",
    );
    sb.write("batch/docs/a.md", "ATTACK\n");
    sb.write(
        "batch/BATCH.md",
        "---\nid_column: id\n---\nAudit {path}:\n\n{file:path}\n",
    );
    let secret = sb.join("secret.txt").display().to_string();
    // The agent: the attacker plants the link (in the working directory, the batch folder's
    // parent); every teammate copies its prompt beside its report and completes.
    let script = format!(
        "prompt=$(cat); \
         case \"$prompt\" in *ATTACK*) rm -f batch/docs/victim.md; ln -s '{secret}' batch/docs/victim.md;; esac; \
         printf '%s' \"$prompt\" > \"$RUNNER_REPORT.prompt\"; \
         printf '{{\"id\":\"%s\",\"status\":\"completed\",\"summary\":\"ok\"}}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\""
    );
    let r = sb.run(&[
        "batch",
        "batch/BATCH.md",
        "--format",
        "plain",
        "--keep-logs",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("batch/workers-output.csv"), "id");
    assert_eq!(rows["attacker"]["status"], "completed", "{rows:?}");
    assert_eq!(rows["victim"]["status"], "failed", "{rows:?}");
    assert_eq!(rows["victim"]["failure_kind"], "input", "{rows:?}");
    assert!(
        std::fs::symlink_metadata(sb.join("batch/docs/victim.md"))
            .is_ok_and(|m| m.file_type().is_symlink()),
        "the attack took place"
    );
    assert_no_file_holds_the_secret(&sb);
}
