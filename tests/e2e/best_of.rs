//! End to end: `--best-of claude,codex:MODEL` (issue 52) with the REAL Claude Code and
//! Codex CLIs, each against its scripted local stand-in (`claude.rs`, `codex.rs`), as the two
//! candidates of one item. Both write the report with their own tools; the runner judges
//! each, chooses a winner by the tie rules and records both. Skips unless both are installed.

use crate::cases::{self, Agent, Key, Script, StandIn};
use crate::claude::Claude;
use crate::codex::{self, Codex};
use crate::support::Sandbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_and_codex_are_the_two_candidates_of_one_item() {
    let test = "best_of::claude_and_codex_are_the_two_candidates_of_one_item";
    let (Some(claude), Some(codex_cli)) = (cases::find::<Claude>(test), cases::find::<Codex>(test))
    else {
        return;
    };
    let claude_api = Claude::start(Script::WriteReport).await;
    let codex_api = Codex::start(Script::WriteReport).await;
    let sb = Sandbox::new(&claude);
    std::os::unix::fs::symlink(&codex_cli.bin, sb.path().join("bin").join("codex"))
        .expect("symlink codex");
    let mut env = Claude::setup(&claude, &sb, &claude_api, Key::Right).env;
    env.extend(Codex::setup(&codex_cli, &sb, &codex_api, Key::Right).env);
    let candidates = format!("claude,codex:{}", codex::MODEL);
    let r = sb
        .run(
            &["--timeout", "90s", "--best-of", &candidates, "--jobs", "2"],
            &env,
        )
        .await;
    let row = sb.row();
    assert_eq!(
        (r.code, row["status"].as_str(), row["candidates"].as_str()),
        (0, "completed", "2/2 passed"),
        "{row:?}\n{}\n{}",
        sb.context(&r, claude_api.log()),
        sb.context(&r, codex_api.log())
    );
    assert!(
        row["winner"].starts_with("1-1.c1 (claude") || row["winner"].starts_with("1-1.c2 (codex"),
        "{row:?}"
    );
    assert_eq!(claude_api.turns(), 2, "claude worked as candidate 1");
    assert_eq!(codex_api.turns(), 2, "codex worked as candidate 2");
    sb.assert_no_survivors();
}
