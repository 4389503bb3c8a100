//! `runner skill install` (issue 28): the shipped todo skill lands where Claude Code and
//! Codex find it, once, never over a file the runner did not write — and the commands it
//! tells an agent to run work as written.

use std::path::Path;

use crate::harness::{Sandbox, git};

const SHIPPED: &str = include_str!("../../skills/todo/SKILL.md");

/// A git repository in the sandbox.
fn repo() -> Sandbox {
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q"]);
    sb
}

#[test]
fn the_skill_installs_for_claude_and_codex_once_and_never_over_a_users_file() {
    let sb = repo();
    let r = sb.run(&["skill", "install"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(sb.read(".claude/skills/todo/SKILL.md"), SHIPPED);
    let again = sb.run(&["skill", "install", "--claude", "--project"]);
    assert!(again.stdout.contains("up to date"), "{again:?}");

    sb.write("AGENTS.md", "# House rules\n\nBe brief.\n");
    for _ in 0..2 {
        let r = sb.run(&["skill", "install", "--codex"]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let agents = sb.read("AGENTS.md");
    assert!(
        agents.starts_with("# House rules\n\nBe brief.\n\n"),
        "{agents}"
    );
    assert_eq!(
        agents.matches("runner todo skill: begin").count(),
        1,
        "{agents}"
    );
    assert!(
        agents.contains("runner resolve --project --select 1 --yes > .agent-tasks/resolve.log"),
        "{agents}"
    );

    let global = sb.run(&["skill", "install", "--global"]);
    assert_eq!(global.code, 0, "{global:?}");
    assert_eq!(sb.read("home/.claude/skills/todo/SKILL.md"), SHIPPED);

    // Someone's own skill of that name is left alone.
    let other = repo();
    other.write(
        ".claude/skills/todo/SKILL.md",
        "---\nname: todo\n---\nmine\n",
    );
    let before = other.tree();
    let r = other.run(&["skill", "install"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("was not written by `runner skill install`"),
        "{r:?}"
    );
    assert_eq!(other.tree(), before);
    let outside = Sandbox::new();
    let r = outside.run(&["skill", "install", "--project"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not in a git repository"), "{r:?}");
}

/// Every `sh` block of the skill, run as written (the agent for `resolve` comes from the
/// store's runner.toml): list, add with a checkpoint, resolve the confirmed item, status.
#[test]
fn the_skills_commands_work_as_written() {
    let sb = repo();
    let agent = sb.write(
        "agent.sh",
        "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"done\"}' > \"$RUNNER_REPORT\"\n",
    );
    sb.write(
        ".agent-tasks/runner.toml",
        format!(
            "runner = \"exec\"\ncommand = [\"sh\", {:?}]\n",
            agent.display().to_string()
        ),
    );
    let blocks: Vec<&str> = SHIPPED
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split_once("\n```").map(|(code, _)| code))
        .collect();
    assert_eq!(blocks.len(), 4, "list, add, resolve, status");
    let runner_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("bin dir")
        .to_owned();
    let path = format!(
        "{}:{}",
        runner_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outputs = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if i == 3 {
            // The resolve runs in the background: its log ends with its summary.
            crate::harness::wait_for("the background resolve to end", 60, || {
                sb.read_opt(".agent-tasks/resolve.log")
                    .is_some_and(|log| log.contains("Every item completed"))
            });
        }
        let out = std::process::Command::new("sh")
            .args(["-c", block])
            .current_dir(sb.path())
            .env("PATH", &path)
            .env("HOME", sb.join("home"))
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("sh");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{block}\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(text);
    }
    let listed: serde_json::Value = serde_json::from_str(&outputs[0]).expect("list JSON");
    assert!(listed.is_object(), "{listed}");
    assert!(outputs[1].contains("Added item 1"), "{}", outputs[1]);
    let batch = sb.read(".agent-tasks/todo-1.md");
    assert!(batch.contains("- [x] Finish the auth module"), "{batch}");
    assert!(outputs[3].contains("completed"), "{}", outputs[3]);
}
