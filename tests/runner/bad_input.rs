//! The bad-input catalogue: every case must exit 2 (or 3 for the environment), name the
//! file and line (where there is one) and what to do, and leave the tree byte-identical.

use crate::bad_input_cases::{GOOD_CSV, GOOD_INSTR, cases};
use crate::harness::{Sandbox, agent};

#[test]
fn every_bad_input_exits_2_or_3_names_the_place_and_changes_nothing() {
    let cases = cases();
    assert!(cases.len() >= 25, "the catalogue keeps at least 25 cases");
    let fake = agent("fake_agent.py");
    let mut failures = Vec::new();
    for case in &cases {
        let sb = Sandbox::new();
        for (rel, bytes) in case.files {
            sb.write(rel, bytes);
        }
        let before = sb.tree();
        let times = folder_times(sb.path());
        let mut args: Vec<&str> = case.args.to_vec();
        if case.agent {
            args.extend_from_slice(&["--", "python3", &fake]);
        }
        let r = sb.run(&args);
        let mut problems = Vec::new();
        if r.code != case.code {
            problems.push(format!("exit {} instead of {}", r.code, case.code));
        }
        for want in case.want {
            if !r.stderr.contains(want) {
                problems.push(format!("stderr lacks {want:?}"));
            }
        }
        if r.stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if sb.tree() != before {
            problems.push("files changed".into());
        }
        // Not even a file made and removed at once (issue 56: a write probe in the output
        // folder): every folder's modification time is as it was.
        if folder_times(sb.path()) != times {
            problems.push("a folder was written (its modification time changed)".into());
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n{r:?}", case.what, problems.join(", ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Hostile sizes (issue 25): a header of 10,001 columns, a 17 MiB cell, a JSON Lines line
/// over 16 MiB or with 10,001 keys, a row whose task text (instruction with its values) is
/// over 16 MiB, a 17 MiB instruction — each exits 2 naming the file and line, before a
/// teammate starts, with nothing written.
#[test]
fn hostile_input_sizes_exit_2_naming_the_line_and_change_nothing() {
    const MIB: usize = 1 << 20;
    let wide: Vec<String> = (0..10_001).map(|i| format!("c{i}")).collect();
    let big = "x".repeat(17 * MIB);
    let six = "y".repeat(6 * MIB);
    let keys: Vec<String> = (0..10_001).map(|i| format!("\"k{i}\":1")).collect();
    // (what, files written over the good in.csv and instr.md, the input, what stderr says)
    type Hostile<'a> = (&'a str, Vec<(&'a str, Vec<u8>)>, &'a str, Vec<&'a str>);
    let cases: Vec<Hostile> = vec![
        (
            "10,001 columns",
            vec![("in.csv", format!("{}\n", wide.join(",")).into_bytes())],
            "in.csv",
            vec!["in.csv:1:", "10001 columns, more than the 10000"],
        ),
        (
            "a 17 MiB cell",
            vec![(
                "in.csv",
                format!("id,mode\na,success\nb,\"{big}\"\nc,success\n").into_bytes(),
            )],
            "in.csv",
            vec!["in.csv:3:", "this row is over 16 MiB"],
        ),
        (
            "a JSON Lines line over 16 MiB",
            vec![(
                "rows.jsonl",
                format!(
                    "{{\"id\":\"a\",\"mode\":\"success\"}}\n{{\"id\":\"b\",\"mode\":\"{big}\"}}\n"
                )
                .into_bytes(),
            )],
            "rows.jsonl",
            vec!["rows.jsonl:2:", "this row is over 16 MiB"],
        ),
        (
            "a JSON Lines row of 10,001 keys",
            vec![(
                "rows.jsonl",
                format!("{{\"id\":\"a\",\"mode\":\"success\",{}}}\n", keys.join(",")).into_bytes(),
            )],
            "rows.jsonl",
            vec!["rows.jsonl:1:", "columns, more than the 10000"],
        ),
        (
            "a task text over 16 MiB (a 6 MiB value used three times)",
            vec![
                (
                    "in.csv",
                    format!("id,mode\na,success\nb,{six}\n").into_bytes(),
                ),
                ("instr.md", b"Do {id}: {mode} {mode} {mode}\n".to_vec()),
            ],
            "in.csv",
            vec!["in.csv:3:", "over the 16 MiB an item may have"],
        ),
        (
            "a 17 MiB instruction",
            vec![("instr.md", big.clone().into_bytes())],
            "in.csv",
            vec!["instr.md", "the instruction is over 16 MiB"],
        ),
    ];
    let fake = agent("fake_agent.py");
    let mut failures = Vec::new();
    for (what, files, input, want) in cases {
        let sb = Sandbox::new();
        sb.write("in.csv", GOOD_CSV);
        sb.write("instr.md", GOOD_INSTR);
        for (rel, bytes) in &files {
            sb.write(rel, bytes);
        }
        let before = sb.tree();
        let r = sb.run(&[
            "batch",
            "--input",
            input,
            "--instruction",
            "instr.md",
            "--",
            "python3",
            &fake,
        ]);
        let mut problems = Vec::new();
        if r.code != 2 {
            problems.push(format!("exit {}", r.code));
        }
        for w in &want {
            if !r.stderr.contains(w) {
                problems.push(format!("stderr lacks {w:?}"));
            }
        }
        if sb.tree() != before {
            problems.push("files changed".into());
        }
        if !problems.is_empty() {
            let stderr: String = r.stderr.chars().take(600).collect();
            failures.push(format!("{what}: {}\n{stderr}", problems.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `cmd` run by a user who cannot write in the sandbox's `ro` folder (mode 0555): as it
/// is unless it is root (root writes anywhere), then as `nobody` (setpriv), running a link
/// (or a copy) of the binary from the sandbox, since the build folder may be closed to it.
fn as_user_who_cannot_write(sb: &Sandbox, cmd: std::process::Command) -> std::process::Command {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    if !sb.join("ro").exists() {
        std::fs::create_dir(sb.join("ro")).expect("mkdir");
    }
    mode(&sb.join("ro"), 0o555);
    let meta = std::fs::metadata("/proc/self").expect("/proc");
    if std::os::unix::fs::MetadataExt::uid(&meta) != 0 {
        return cmd;
    }
    mode(sb.path(), 0o777);
    let bin = sb.join("bin-runner");
    if std::fs::hard_link(cmd.get_program(), &bin).is_err() {
        std::fs::copy(cmd.get_program(), &bin).expect("copy the runner binary");
    }
    let mut as_nobody = std::process::Command::new("setpriv");
    as_nobody.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    as_nobody
        .arg(&bin)
        .args(cmd.get_args())
        .current_dir(sb.path());
    as_nobody.env("NO_COLOR", "1").env("HOME", sb.join("home"));
    as_nobody
}

/// A file asked for in a folder the user may not write (`-o`, `--junit`, `--trace`) is
/// refused before any teammate runs, naming the folder (`-o` was a confusing batch-record or
/// create error; `--junit`/`--trace` failed only after the whole batch had run).
#[test]
fn a_folder_the_user_cannot_write_is_refused_before_anything_runs() {
    let fake = agent("fake_agent.py");
    let cases: [(&[&str], &str); 3] = [
        (
            &["-o", "ro/out.csv"],
            "ro/out.csv: cannot write in the folder",
        ),
        (
            &["--junit", "ro/j.xml"],
            "--junit ro/j.xml: cannot write in the folder",
        ),
        (
            &["--trace", "ro/t.json"],
            "--trace ro/t.json: cannot write in the folder",
        ),
    ];
    for (extra, want) in cases {
        let sb = Sandbox::new();
        sb.write("in.csv", GOOD_CSV);
        sb.write("instr.md", b"Do {id}\n");
        let mut args = vec!["batch", "--input", "in.csv", "--instruction", "instr.md"];
        args.extend(["--id-column", "id"]);
        args.extend(extra);
        args.extend(["--", "python3", &fake]);
        let mut cmd = as_user_who_cannot_write(&sb, sb.cmd(&args));
        let before = sb.tree();
        let r: crate::harness::Run = cmd.output().expect("spawn runner").into();
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stderr.contains(want), "{extra:?}: {r:?}");
        assert!(!r.stderr.contains("started"), "{extra:?}: {r:?}");
        assert_eq!(sb.tree(), before, "{extra:?}: nothing on disk changes");
    }
}

/// Output folders that are not there yet are made, as most tools do (`-o newdir/`,
/// `--junit reports/j.xml`, `--trace tr/t.json`); a file standing where a folder must be is
/// refused before anything runs, every such problem in one message, and nothing changes.
#[test]
fn missing_output_folders_are_made_and_every_blocked_one_is_named_at_once() {
    let fake = agent("fake_agent.py");
    let sb = Sandbox::new();
    sb.write("in.csv", GOOD_CSV);
    sb.write("instr.md", b"Do {id}\n");
    let run = |extra: &[&str]| -> crate::harness::Run {
        let mut args = vec!["batch", "--input", "in.csv", "--instruction", "instr.md"];
        args.extend(["--id-column", "id"]);
        args.extend(extra);
        args.extend(["--", "python3", &fake]);
        sb.cmd(&args).output().expect("spawn runner").into()
    };
    let r = run(&[
        "-o",
        "new/deeper/",
        "--junit",
        "reports/ci/j.xml",
        "--trace",
        "tr/t.json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    for made in [
        "new/deeper/workers-output.csv",
        "reports/ci/j.xml",
        "tr/t.json",
    ] {
        assert!(sb.join(made).is_file(), "{made}: {r:?}");
    }
    sb.write("blocker", b"a file, not a folder\n");
    let before = sb.tree();
    // A path that names a folder is no file to write.
    let r = run(&["--junit", "reports/"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("that is a folder"), "{r:?}");
    assert_eq!(sb.tree(), before, "nothing on disk changes");
    let r = run(&[
        "-o",
        "blocker/out.csv",
        "--junit",
        "blocker/j.xml",
        "--trace",
        "blocker/sub/t.json",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("blocker/out.csv: ")
            && r.stderr.contains("--junit blocker/j.xml: ")
            && r.stderr.contains("--trace blocker/sub/t.json: ")
            && r.stderr.contains("blocker is a file, not a folder"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changes");
}

/// `runner list` only reads: a store the user may not write is listed, with a warning that
/// its inbox was not created (it failed "cannot open the lock", exit 3).
#[test]
fn list_shows_a_store_the_user_cannot_write() {
    let sb = Sandbox::new();
    let mut cmd = as_user_who_cannot_write(&sb, sb.cmd(&["list", "--store", "ro"]));
    let before = sb.tree();
    let r: crate::harness::Run = cmd.output().expect("spawn runner").into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Todo (0)"), "{r:?}");
    assert!(
        r.stderr.contains("warning: the inbox was not created"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changes");
}

/// Every folder under `root` (itself included) with its modification time.
fn folder_times(root: &std::path::Path) -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        if let Ok(m) = std::fs::symlink_metadata(&dir).and_then(|m| m.modified()) {
            out.push((dir.clone(), m));
        }
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}
