//! `--judge stage NAME` (DESIGN §13): the judge stage of BATCH.md runs once for an item
//! whose candidates two or more passed, every one of them in its prompt (`{candidates}`:
//! name, runner, model, summary, output, verify, score, cost and its diff against the run's
//! base, bounded), and its report's `winner` names the winner. A name that is no candidate
//! that passed, or a judge that did not complete, decides nothing: the item waits for
//! `runner pick`.
//!
//! Durable: the judge's outcome goes to `<its folder>/judge.json` as soon as it ends, so a
//! run killed after the judge decided reads it back on resume and never runs it again.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::item::WorkItem;
use crate::report::best_of::Candidate;
use crate::report::{self, ItemStatus};
use crate::run::backend::Backend;
use crate::run::events::Event;
use crate::run::record::outcome::Outcome;
use crate::run::supervise::process::Cancel;
use crate::run::{JudgeStage, RunSpec};
use crate::schedule::gate::Gate;

use super::{Earlier, attempt_item};

/// The file the judge's outcome is kept in, in the runner's part of its folder.
pub(crate) const MARKER: &str = "judge.json";

/// Most lines of one candidate's diff the judge is shown.
const DIFF_LINES: usize = 300;

/// Most characters of one diff line the judge is shown.
const LINE_CHARS: usize = 400;

/// How the judge stage ended.
pub(super) struct Judged {
    /// The judge's own outcome (its attempts, cost, report).
    pub outcome: Outcome,
    /// It ran in this run (its cost is not in the journal's earlier attempts yet).
    pub fresh: bool,
    /// The winner's index among the candidates' rows and the rule in words; or why the
    /// judge decided nothing (the item waits for `runner pick`).
    pub decision: Result<(usize, String), String>,
}

/// The judge stage's teammate for `item`: `<teammate>.<stage>`, the item's id (its report
/// names it), with the stage's profile.
fn judge_item(item: &WorkItem, js: &JudgeStage, candidates: &str) -> WorkItem {
    let (headers, values): (Vec<String>, Vec<String>) = item.vars.iter().cloned().unzip();
    let (mut body, mut inline, slots) = js
        .instruction
        .render_with(&headers, &values, &|n| n == "candidates");
    if slots.is_empty() {
        body.push_str("\n\n");
        body.push_str(candidates);
    } else {
        let mut filled = String::with_capacity(body.len() + candidates.len() * slots.len());
        let mut from = 0;
        for (at, _) in &slots {
            filled.push_str(body.get(from..*at).unwrap_or_default());
            filled.push_str(candidates);
            from = *at;
        }
        filled.push_str(body.get(from..).unwrap_or_default());
        for part in &mut inline {
            part.at += candidates.len() * slots.iter().filter(|(at, _)| *at <= part.at).count();
        }
        body = filled;
    }
    WorkItem {
        teammate: format!("{}.{}", item.teammate, js.name),
        title: format!("{}: the winner of {}", js.name, item.title),
        body,
        inline,
        checkpoint: None,
        after: Vec::new(),
        stage: None,
        profile: Some(js.profile),
        candidate: None,
        ..item.clone()
    }
}

/// `candidate`'s diff against the run's base, at most [`DIFF_LINES`] lines (then `… N more
/// lines`); a note when it has no branch or git cannot diff it.
async fn diff_of(spec: &RunSpec, c: &Candidate) -> String {
    let (Some(iso), Some(branch)) = (&spec.isolation, &c.branch) else {
        return "(no diff: the candidates work without --isolate worktree)".to_owned();
    };
    let (repo, base, branch) = (iso.repo.clone(), iso.base.clone(), branch.clone());
    let out = tokio::task::spawn_blocking(move || {
        crate::run::isolation::worktree::git_sync(&repo, &["diff", &base, &branch], &[])
    })
    .await;
    let out = match out {
        Ok(o) if o.ok => o.stdout,
        Ok(o) => return format!("(no diff: git said {})", report::one_line(&o.stderr, 200)),
        Err(_) => return "(no diff: git did not run)".to_owned(),
    };
    if out.trim().is_empty() {
        return "(no change)".to_owned();
    }
    bounded(&out)
}

/// `diff` cut to [`DIFF_LINES`] lines of at most [`LINE_CHARS`] characters, then `… N
/// more lines`.
fn bounded(out: &str) -> String {
    let lines: Vec<&str> = out.lines().collect();
    let mut shown: Vec<String> = lines
        .iter()
        .take(DIFF_LINES)
        .map(|l| match l.chars().count() > LINE_CHARS {
            true => format!("{}…", l.chars().take(LINE_CHARS).collect::<String>()),
            false => (*l).to_owned(),
        })
        .collect();
    if lines.len() > DIFF_LINES {
        shown.push(format!("… {} more lines", lines.len() - DIFF_LINES));
    }
    shown.join("\n")
}

/// The surviving candidates as the judge reads them: for each, its name (what `winner`
/// takes), runner, model, verify, score, cost, summary, output and diff.
async fn candidates_text(
    spec: &RunSpec,
    rows: &[Candidate],
    ended: &[Option<Outcome>],
    survivors: &[usize],
) -> String {
    let mut out = format!(
        "{} candidates passed; name the best one in your report's `winner` field (one of: {}).\n",
        survivors.len(),
        survivors
            .iter()
            .map(|i| format!("c{}", rows[*i].candidate))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &i in survivors {
        let c = &rows[i];
        let o = ended.get(i).and_then(Option::as_ref);
        let output = o
            .map(|o| serde_json::to_string(&o.output).unwrap_or_default())
            .filter(|s| s != "null")
            .unwrap_or_else(|| "{}".to_owned());
        out.push_str(&format!(
            "\n## Candidate c{k} ({teammate})\n- runner: {runner}\n- model: {model}\n- verify: {verify}\n- score: {score}\n- cost: {cost}\n- diffstat: {stat}\n- summary: {summary}\n- output: {output}\n\n```diff\n{diff}\n```\n",
            k = c.candidate,
            teammate = c.teammate,
            runner = c.runner,
            model = c.model.as_deref().unwrap_or("(not said)"),
            verify = if c.verify.is_empty() { "none" } else { &c.verify },
            score = c.score.map_or("none".to_owned(), |s| s.to_string()),
            cost = c.cost_usd.map_or("unknown".to_owned(), |u| format!("${u:.4}")),
            stat = c.diffstat.as_deref().unwrap_or("none"),
            summary = o.map_or("", |o| o.summary.as_str()),
            diff = diff_of(spec, c).await,
        ));
    }
    out
}

/// The winner the judge's report names (`winner`: `c2`, `2` or the candidate's teammate;
/// in its `output`, else at the report's top level) among `survivors`; else why not.
fn named(judge: &Outcome, rows: &[Candidate], survivors: &[usize]) -> Result<usize, String> {
    let names: Vec<String> = survivors
        .iter()
        .map(|i| format!("c{}", rows[*i].candidate))
        .collect();
    let field = judge
        .output
        .get("winner")
        .or_else(|| judge.report.as_ref().and_then(|r| r.get("winner")));
    let said = match field {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(format!(
                "its `winner` is {other}, not a candidate's name (one of {})",
                names.join(", ")
            ));
        }
        None => {
            return Err(format!(
                "its report names no `winner` (one of {})",
                names.join(", ")
            ));
        }
    };
    let k = said.trim_start_matches('c');
    survivors
        .iter()
        .copied()
        .find(|&i| rows[i].candidate.to_string() == k || rows[i].teammate == said)
        .ok_or_else(|| {
            format!(
                "it named `{}`, not a candidate that passed (one of {})",
                report::one_line(&said, 80),
                names.join(", ")
            )
        })
}

/// The judge's outcome an earlier run of this item left ([`MARKER`]).
fn earlier_outcome(spec: &RunSpec, judge: &WorkItem) -> Option<Outcome> {
    let text = std::fs::read(spec.teammate_dir(&judge.teammate).join(MARKER)).ok()?;
    let o: Outcome = serde_json::from_slice(&text).ok()?;
    (o.id == judge.id && o.content_hash == judge.content).then_some(o)
}

/// Forget the judge's outcome of `item` (its item is decided, or waits for a person).
pub(super) fn forget(spec: &RunSpec, item: &WorkItem) {
    if let Some(js) = &spec.judge_stage {
        let teammate = format!("{}.{}", item.teammate, js.name);
        let _ = std::fs::remove_file(spec.teammate_dir(&teammate).join(MARKER));
    }
}

/// Run the judge stage over `item`'s `survivors` (indexes into `rows` and `ended`), or read
/// back what it decided before; `None` when the run was interrupted before it ended (a
/// resume runs it) or there is no judge stage.
#[allow(clippy::too_many_arguments)]
pub(super) async fn judge(
    spec: &Arc<RunSpec>,
    backend: &Arc<dyn Backend>,
    gate: &Arc<Gate>,
    item: &WorkItem,
    rows: &[Candidate],
    ended: &[Option<Outcome>],
    survivors: &[usize],
    tx: &mpsc::UnboundedSender<Event>,
    cancel: watch::Receiver<Cancel>,
) -> Option<Judged> {
    let js = spec.judge_stage.as_ref()?;
    // The marker is checked before the candidates' diffs are read: a decided judge is not
    // shown them again.
    let probe = judge_item(item, js, "");
    let (outcome, fresh) = match earlier_outcome(spec, &probe) {
        Some(o) => (o, false),
        None => {
            let text = candidates_text(spec, rows, ended, survivors).await;
            let judge = judge_item(item, js, &text);
            let backend = spec.profile_of(&judge).map_or(backend, |p| &p.backend);
            let ended = attempt_item(
                spec,
                backend.as_ref(),
                gate,
                &judge,
                Earlier::default(),
                tx,
                cancel,
            )
            .await;
            let mut held = ended.held;
            held.write();
            match ended.outcome.status {
                ItemStatus::Cancelled => return None,
                // The team stopped before it started: nothing is decided, nothing kept.
                ItemStatus::Skipped => {
                    let why = format!("it did not run: {}", ended.outcome.error);
                    return Some(Judged {
                        outcome: ended.outcome,
                        fresh: true,
                        decision: Err(why),
                    });
                }
                _ => {}
            }
            let path = spec.teammate_dir(&judge.teammate).join(MARKER);
            let json = serde_json::to_vec(&ended.outcome).unwrap_or_default();
            if let Err(e) = crate::fsutil::write_private_file(&path, &json) {
                tracing::warn!("judge {}: {e}", judge.teammate);
            }
            crate::fault::point("after_judge");
            (ended.outcome, true)
        }
    };
    let decision = match outcome.status {
        ItemStatus::Completed => named(&outcome, rows, survivors).map(|i| {
            let why = report::one_line(&outcome.summary, 200);
            let rule = match why.is_empty() {
                true => format!("the judge stage chose c{}", rows[i].candidate),
                false => format!("the judge stage chose c{}: {why}", rows[i].candidate),
            };
            (i, rule)
        }),
        status => Err(format!(
            "it ended {status}: {}",
            report::one_line(&outcome.error, 300)
        )),
    };
    Some(Judged {
        outcome,
        fresh,
        decision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(k: u32) -> Candidate {
        Candidate {
            candidate: k,
            teammate: format!("1-a.c{k}"),
            runner: "exec".into(),
            model: None,
            status: ItemStatus::Completed,
            error: String::new(),
            verify: String::new(),
            score: None,
            cost_usd: None,
            duration_s: 1.0,
            attempts: 1,
            finished_at: String::new(),
            diffstat: None,
            branch: None,
        }
    }

    fn judge_said(output: Value) -> Outcome {
        let mut o = Outcome::not_run("a", "1-a.pick", "a", ItemStatus::Completed, String::new());
        o.output = output;
        o
    }

    #[test]
    fn the_winner_is_a_survivor_named_by_number_or_teammate_and_nothing_else() {
        let rows = [cand(1), cand(2), cand(3)];
        let survivors = [1, 2];
        let named_ = |v: Value| named(&judge_said(v), &rows, &survivors);
        assert_eq!(named_(serde_json::json!({"winner": "c3"})), Ok(2));
        assert_eq!(named_(serde_json::json!({"winner": " 2 "})), Ok(1));
        assert_eq!(named_(serde_json::json!({"winner": 3})), Ok(2));
        assert_eq!(named_(serde_json::json!({"winner": "1-a.c2"})), Ok(1));
        let loser = named_(serde_json::json!({"winner": "c1"})).expect_err("c1 did not pass");
        assert_eq!(
            loser,
            "it named `c1`, not a candidate that passed (one of c2, c3)"
        );
        assert!(named_(serde_json::json!({"winner": "c9"})).is_err());
        assert_eq!(
            named_(serde_json::json!({})),
            Err("its report names no `winner` (one of c2, c3)".to_owned())
        );
        assert!(named_(serde_json::json!({"winner": ["c2"]})).is_err());
    }

    #[test]
    fn a_long_diff_is_cut_with_the_number_of_lines_left_out() {
        let body: String = (0..DIFF_LINES + 7).map(|i| format!("+{i}\n")).collect();
        let cut = bounded(&body);
        assert!(cut.ends_with("… 7 more lines"), "{cut}");
        assert_eq!(cut.lines().count(), DIFF_LINES + 1);
    }
}
