//! `--best-of N` (DESIGN §13): one item's N candidates, each a teammate of its own
//! (`<teammate>.cK`: its folder, its worktree and branch), run at once — each attempt passes
//! the team's gate, so `--jobs`, `--max-cost-usd` and rate limits count every candidate — and
//! the winner chosen among those that passed by `--judge` and the tie rules
//! ([`crate::report::best_of::choose`]). The item's outcome is the winner's, with every
//! candidate in `best_of` and the cost of them all.
//!
//! Durable: a candidate that ends (but was not stopped) leaves its outcome in
//! `<its folder>/candidate.json`; a run killed in the middle resumes only the candidates
//! without one. The files go once the item's outcome is sent, so a later run of an item none
//! of whose candidates passed (`--only failed`) tries every candidate again.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::item::WorkItem;
use crate::options::best_of::Judge;
use crate::report::best_of::{BestOf, Candidate, choose};
use crate::report::{self, ItemStatus};
use crate::run::RunSpec;
use crate::run::backend::Backend;
use crate::run::events::Event;
use crate::run::record::outcome::{Outcome, Spend};
use crate::run::supervise::process::Cancel;
use crate::schedule::gate::Gate;

use super::attempt::AttemptLogs;
use super::helpers::run_helper;
use super::{Earlier, attempt_item};

/// The file a finished candidate's outcome is kept in, in the runner's part of its folder
/// (read by `runner pick` too).
pub(crate) const MARKER: &str = "candidate.json";

/// Candidate `k` of `item`: the same task under its own teammate `<teammate>.cK`; with a
/// list of runners, with its own runner and model
/// ([`RunSpec::candidate_profile`], [`crate::schedule::plan::Plan::add_candidates`]).
fn candidate_item(spec: &RunSpec, item: &WorkItem, k: u32) -> WorkItem {
    WorkItem {
        teammate: format!("{}.c{k}", item.teammate),
        candidate: Some(k),
        profile: spec.candidate_profile(item, k),
        ..item.clone()
    }
}

/// A candidate's outcome an earlier run of this item left ([`MARKER`]), when it finished.
fn earlier_outcome(spec: &RunSpec, candidate: &WorkItem) -> Option<Outcome> {
    let path = spec.teammate_dir(&candidate.teammate).join(MARKER);
    let text = std::fs::read(&path).ok()?;
    let o: Outcome = serde_json::from_slice(&text).ok()?;
    (o.id == candidate.id && o.content_hash == candidate.content).then_some(o)
}

/// What an outcome's attempts cost.
fn spend_of(o: &Outcome) -> Spend {
    Spend {
        cost_usd: o.cost_usd,
        input_tokens: o.input_tokens,
        cached_input_tokens: o.cached_input_tokens,
        output_tokens: o.output_tokens,
    }
}

/// How the race of the candidates ended ([`race`]).
struct Race {
    /// Each candidate's outcome by number (index K-1); `None`: it left none (its task
    /// panicked).
    ended: Vec<Option<Outcome>>,
    /// What this run's candidate attempts cost.
    spent: Spend,
    /// With `--judge first`: the candidate that passed first.
    first: Option<u32>,
    /// The judge stage's attempts (`--judge stage NAME`), counted in the item's.
    judge_attempts: u32,
}

/// Run item `item`'s `n` candidates at once and send its outcome: the winner's, or a
/// failure when none passed; `cancelled` when the run was interrupted before a winner was
/// known (a resume runs the candidates that did not finish).
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    spec: Arc<RunSpec>,
    backend: Arc<dyn Backend>,
    gate: Arc<Gate>,
    item: WorkItem,
    earlier: Earlier,
    tx: mpsc::UnboundedSender<Event>,
    cancel: watch::Receiver<Cancel>,
) {
    let settings = spec.settings_for(&item);
    let (n, judge) = (settings.best_of, settings.judge.clone());
    let candidates: Vec<WorkItem> = (1..=n).map(|k| candidate_item(&spec, &item, k)).collect();
    let known: Vec<Option<Outcome>> = candidates
        .iter()
        .map(|c| earlier_outcome(&spec, c))
        .collect();
    let race = race(
        &spec,
        &backend,
        &gate,
        &tx,
        &candidates,
        known,
        &judge,
        cancel.clone(),
    )
    .await;
    let interrupted = *cancel.borrow() != Cancel::None;
    let mut rows: Vec<Candidate> = candidates
        .iter()
        .zip(&race.ended)
        .map(|(c, o)| row(&spec, c, o.as_ref(), race.first))
        .collect();
    if interrupted && race.first.is_none() {
        let why = "interrupted while its candidates ran; a resume runs those that did not finish";
        // The attempts its candidates started: it did start (the summary's "never started").
        let attempts = race.ended.iter().flatten().map(|o| o.attempts).sum();
        return cancelled(&item, why, attempts, &tx);
    }
    if let Judge::Score(argv) = &judge {
        for (c, r) in candidates.iter().zip(rows.iter_mut()) {
            if r.passed(false) {
                score(&spec, c, argv, r, cancel.clone()).await;
            }
        }
    }
    let scored = matches!(judge, Judge::Score(_));
    if judge == Judge::Person && rows.iter().any(|r| r.passed(false)) {
        let why = format!(
            "a person picks the winner among {}: runner pick {} CANDIDATE",
            passed_names(&rows).join(", "),
            item.id
        );
        let rule = "person: waiting for `runner pick`".to_owned();
        return blocked(&item, &race, earlier.spent, rows, &tx, why, rule);
    }
    let mut race = race;
    let by_judge = match by_stage(&spec, &backend, &gate, &item, &rows, &mut race, &tx, cancel)
        .await
    {
        StageSaid::Nothing => None,
        StageSaid::Winner(i, rule) => Some((i, rule)),
        StageSaid::Interrupted => {
            let why = "interrupted while its judge stage ran; a resume runs the judge stage again";
            let attempts = race.ended.iter().flatten().map(|o| o.attempts).sum();
            return cancelled(&item, why, attempts, &tx);
        }
        StageSaid::Undecided(why) => {
            let name = spec.judge_stage.as_ref().map_or("", |j| j.name.as_str());
            let why = format!(
                "the judge stage `{name}` decided nothing ({why}); a person picks the winner among {}: runner pick {} CANDIDATE",
                passed_names(&rows).join(", "),
                item.id
            );
            let rule = format!("stage {name}: decided nothing; waiting for `runner pick`");
            blocked(&item, &race, earlier.spent, rows, &tx, why, rule);
            super::judge_stage::forget(&spec, &item);
            return;
        }
    };
    let chosen = match (race.first, by_judge) {
        (Some(k), _) => Some(((k - 1) as usize, "first to pass".to_owned())),
        (None, Some(decided)) => Some(decided),
        (None, None) => choose(&rows, scored),
    };
    let passed = rows.iter().filter(|r| r.passed(scored)).count() as u32;
    let outcome = item_outcome(&item, &race, earlier.spent, &rows, chosen.as_ref());
    let label = match &judge {
        Judge::Stage(name) => format!("stage {name}"),
        other => other.word().to_owned(),
    };
    let best_of = BestOf {
        winner: chosen.as_ref().map(|(i, _)| rows[*i].candidate),
        rule: match chosen {
            Some((_, rule)) => format!("{label}: {rule}"),
            None => format!("none of the {n} candidates passed"),
        },
        passed,
        total: n,
        candidates: std::mem::take(&mut rows),
    };
    let outcome = Outcome {
        best_of: Some(Box::new(best_of)),
        ..outcome
    };
    let _ = tx.send(Event::ItemFinished(Box::new(outcome)));
    // Decided: a later run of the item (if it failed) tries every candidate again.
    for c in &candidates {
        let _ = std::fs::remove_file(spec.teammate_dir(&c.teammate).join(MARKER));
    }
    super::judge_stage::forget(&spec, &item);
}

/// Send the item's outcome `cancelled`, saying `why` (the run was interrupted before a
/// winner was known), with the `attempts` its candidates made (0 only if none started).
fn cancelled(item: &WorkItem, why: &str, attempts: u32, tx: &mpsc::UnboundedSender<Event>) {
    let outcome = Outcome {
        attempts,
        ..Outcome::not_run(
            &item.id,
            &item.teammate,
            &item.title,
            ItemStatus::Cancelled,
            why.to_owned(),
        )
    };
    let _ = tx.send(Event::ItemFinished(Box::new(outcome)));
}

/// The names of the candidates that passed (`c1`, `c3`).
fn passed_names(rows: &[Candidate]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.passed(false))
        .map(|r| format!("c{}", r.candidate))
        .collect()
}

/// What the judge stage said of an item ([`by_stage`]).
enum StageSaid {
    /// It did not run: no `--judge stage`, or fewer than two candidates passed.
    Nothing,
    /// The winner's index among the rows, and the rule in words.
    Winner(usize, String),
    /// It named no candidate that passed, or did not complete: why.
    Undecided(String),
    /// The run was interrupted while it ran.
    Interrupted,
}

/// With `--judge stage NAME` and two or more candidates that passed: run the judge stage
/// (or read back what it decided before a kill), its attempts counted in `race`, and its
/// cost when it ran now (an earlier run's is in the journal). What it said.
#[allow(clippy::too_many_arguments)]
async fn by_stage(
    spec: &Arc<RunSpec>,
    backend: &Arc<dyn Backend>,
    gate: &Arc<Gate>,
    item: &WorkItem,
    rows: &[Candidate],
    race: &mut Race,
    tx: &mpsc::UnboundedSender<Event>,
    cancel: watch::Receiver<Cancel>,
) -> StageSaid {
    if !matches!(spec.settings_for(item).judge, Judge::Stage(_)) {
        return StageSaid::Nothing;
    }
    let survivors: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].passed(false)).collect();
    if survivors.len() < 2 {
        return StageSaid::Nothing;
    }
    let judged = super::judge_stage::judge(
        spec,
        backend,
        gate,
        item,
        rows,
        &race.ended,
        &survivors,
        tx,
        cancel,
    )
    .await;
    let Some(j) = judged else {
        return StageSaid::Interrupted;
    };
    if j.fresh {
        race.spent.add(spend_of(&j.outcome));
    }
    race.judge_attempts = j.outcome.attempts;
    match j.decision {
        Ok((i, rule)) => StageSaid::Winner(i, rule),
        Err(why) => StageSaid::Undecided(why),
    }
}

/// The item ends `blocked` (`--judge person`, or a judge stage that decided nothing),
/// saying `why` and how to settle it; the candidates' outcomes stay in their folders for
/// `runner pick`.
fn blocked(
    item: &WorkItem,
    race: &Race,
    earlier: Spend,
    rows: Vec<Candidate>,
    tx: &mpsc::UnboundedSender<Event>,
    why: String,
    rule: String,
) {
    let passed = passed_names(&rows).len() as u32;
    let base = item_outcome(item, race, earlier, &rows, None);
    let mut o = Outcome::not_run(
        &item.id,
        &item.teammate,
        &item.title,
        ItemStatus::Blocked,
        why,
    );
    o.failure_kind = None;
    o.started_at = base.started_at.clone();
    o.content_hash.clone_from(&item.content);
    o.attempts = base.attempts;
    o.cost_usd = base.cost_usd;
    o.input_tokens = base.input_tokens;
    o.cached_input_tokens = base.cached_input_tokens;
    o.output_tokens = base.output_tokens;
    o.best_of = Some(Box::new(BestOf {
        winner: None,
        rule,
        passed,
        total: rows.len() as u32,
        candidates: rows,
    }));
    let _ = tx.send(Event::ItemFinished(Box::new(o)));
}

/// Run the candidates that have no outcome yet (`known`) at once, each under its own cancel
/// (the run's, passed on); with `--judge first`, the first that passes stops the others at
/// once (their processes are killed and waited for; what they spent so far is counted).
#[allow(clippy::too_many_arguments)]
async fn race(
    spec: &Arc<RunSpec>,
    backend: &Arc<dyn Backend>,
    gate: &Arc<Gate>,
    tx: &mpsc::UnboundedSender<Event>,
    candidates: &[WorkItem],
    known: Vec<Option<Outcome>>,
    judge: &Judge,
    mut cancel: watch::Receiver<Cancel>,
) -> Race {
    let first = match judge {
        Judge::First => known
            .iter()
            .flatten()
            .find(|o| o.status == ItemStatus::Completed)
            .and_then(|o| candidates.iter().find(|c| c.teammate == o.teammate))
            .and_then(|c| c.candidate),
        _ => None,
    };
    let mut race = Race {
        ended: known,
        spent: Spend::default(),
        first,
        judge_attempts: 0,
    };
    if race.first.is_some() {
        return race;
    }
    let mut set = JoinSet::new();
    let mut stops: Vec<(u32, watch::Sender<Cancel>)> = Vec::new();
    for c in candidates {
        let k = c.candidate.unwrap_or(1);
        if race.ended[(k - 1) as usize].is_some() {
            continue;
        }
        let (stop, stopped) = watch::channel(*cancel.borrow());
        stops.push((k, stop));
        // A candidate with a runner of its own runs on that runner's backend.
        let backend = spec.profile_of(c).map_or(backend, |p| &p.backend);
        let (spec, backend, gate, tx, c) = (
            Arc::clone(spec),
            Arc::clone(backend),
            Arc::clone(gate),
            tx.clone(),
            c.clone(),
        );
        set.spawn(async move {
            let ended = attempt_item(
                &spec,
                backend.as_ref(),
                &gate,
                &c,
                Earlier::default(),
                &tx,
                stopped,
            )
            .await;
            let mut held = ended.held;
            held.write();
            // Not one that never finished (the run was interrupted, the team stopped).
            if !matches!(
                ended.outcome.status,
                ItemStatus::Cancelled | ItemStatus::Skipped
            ) {
                let path = spec.teammate_dir(&c.teammate).join(MARKER);
                let json = serde_json::to_vec(&ended.outcome).unwrap_or_default();
                if let Err(e) = crate::fsutil::write_private_file(&path, &json) {
                    tracing::warn!("candidate {}: {e}", c.teammate);
                }
                crate::fault::point("after_candidate");
            }
            (k, ended.outcome)
        });
    }
    let mut listening = true;
    loop {
        tokio::select! {
            joined = set.join_next() => {
                let Some(joined) = joined else { break };
                let Ok((k, outcome)) = joined else { continue };
                race.spent.add(spend_of(&outcome));
                if matches!(judge, Judge::First)
                    && race.first.is_none()
                    && outcome.status == ItemStatus::Completed
                {
                    race.first = Some(k);
                    for (_, stop) in stops.iter().filter(|(j, _)| *j != k) {
                        let _ = stop.send(Cancel::Immediate);
                    }
                }
                race.ended[(k - 1) as usize] = Some(outcome);
            }
            changed = cancel.changed(), if listening => {
                if changed.is_err() {
                    listening = false;
                    continue;
                }
                let level = *cancel.borrow();
                for (_, stop) in &stops {
                    stop.send_if_modified(|now| {
                        let raise = level > *now;
                        if raise {
                            *now = level;
                        }
                        raise
                    });
                }
            }
        }
    }
    race
}

/// Candidate `c`'s row: its outcome's status, verify, cost, time and diff; a candidate a
/// `first` judge stopped says so, one that left no outcome is failed.
fn row(spec: &RunSpec, c: &WorkItem, o: Option<&Outcome>, first: Option<u32>) -> Candidate {
    let settings = spec.settings_for(c);
    let verify = match o {
        Some(o) if o.failure_kind == Some(crate::failure::FailureKind::VerifyFailed) => "failed",
        Some(o) if settings.verify.is_some() && o.status == ItemStatus::Completed => "passed",
        _ => "",
    };
    let (status, error) = match o {
        Some(o) if o.status == ItemStatus::Cancelled && first.is_some() => (
            ItemStatus::Cancelled,
            format!("stopped: candidate {} passed first", first.unwrap_or(0)),
        ),
        Some(o) => (o.status, o.error.clone()),
        None => (
            ItemStatus::Failed,
            "the candidate ended without an outcome".to_owned(),
        ),
    };
    Candidate {
        candidate: c.candidate.unwrap_or(1),
        teammate: c.teammate.clone(),
        runner: settings.runner.name.clone(),
        model: o
            .and_then(|o| o.model.clone())
            .or_else(|| settings.model.clone()),
        status,
        error,
        verify: verify.to_owned(),
        score: None,
        cost_usd: o.and_then(|o| o.cost_usd),
        duration_s: o.map_or(0.0, |o| o.duration_s),
        attempts: o.map_or(0, |o| o.attempts),
        finished_at: o.map(|o| o.finished_at.clone()).unwrap_or_default(),
        diffstat: o.and_then(|o| o.diffstat.clone()),
        branch: o.and_then(|o| o.branch.clone()),
    }
}

/// The item's outcome: the winner's (`chosen`: its index and rule), else a failure naming
/// why each candidate is out; its attempts those of every candidate, its cost theirs plus
/// what `earlier` runs of the item spent.
fn item_outcome(
    item: &WorkItem,
    race: &Race,
    earlier: Spend,
    rows: &[Candidate],
    chosen: Option<&(usize, String)>,
) -> Outcome {
    let ran: Vec<&Outcome> = race.ended.iter().flatten().collect();
    let mut o = match chosen.and_then(|(i, _)| race.ended[*i].clone()) {
        Some(winner) => winner,
        None => {
            let why: Vec<String> = rows
                .iter()
                .map(|r| format!("{}: {} {}", r.teammate, r.status, r.error))
                .collect();
            let mut o = Outcome::not_run(
                &item.id,
                &item.teammate,
                &item.title,
                ItemStatus::Failed,
                report::one_line(
                    &format!(
                        "none of the {} candidates passed ({})",
                        rows.len(),
                        why.join("; ")
                    ),
                    1000,
                ),
            );
            o.failure_kind = ran.iter().find_map(|r| r.failure_kind);
            // A team that stopped before any candidate ran skips the item.
            if rows.iter().all(|r| r.status == ItemStatus::Skipped) {
                o.status = ItemStatus::Skipped;
            }
            o.started_at = ran
                .iter()
                .map(|r| r.started_at.clone())
                .min()
                .unwrap_or_default();
            o
        }
    };
    let mut spent = earlier;
    spent.add(race.spent);
    o.id.clone_from(&item.id);
    o.title.clone_from(&item.title);
    o.content_hash.clone_from(&item.content);
    o.attempts = ran.iter().map(|r| r.attempts).sum::<u32>() + race.judge_attempts;
    o.cost_usd = spent.cost_usd;
    o.input_tokens = spent.input_tokens;
    o.cached_input_tokens = spent.cached_input_tokens;
    o.output_tokens = spent.output_tokens;
    o
}

/// Run `--judge score CMD` for candidate `c` where its verify runs (its worktree, else the
/// run's working directory; `RUNNER_TEAMMATE_DIR` names its folder): the
/// last line it prints is its score (`r.score`); a command that fails or prints no number
/// puts the candidate out, saying why in `r.error`.
async fn score(
    spec: &RunSpec,
    c: &WorkItem,
    argv: &[String],
    r: &mut Candidate,
    cancel: watch::Receiver<Cancel>,
) {
    let folder = spec.teammate(&c.teammate);
    let worktree = spec.workspace.join("worktrees").join(&c.teammate);
    let cwd: PathBuf = match spec.isolation.is_some() && worktree.join(".git").is_file() {
        true => worktree,
        false => spec.cwd.clone(),
    };
    let attempt = crate::run::record::compact::logged_attempts(folder.dir())
        .last()
        .copied()
        .unwrap_or(1);
    let logs = AttemptLogs {
        dir: folder.dir(),
        attempt,
    };
    let var = |k: &str, v: &dyn AsRef<std::ffi::OsStr>| (k.to_owned(), v.as_ref().to_owned());
    let env: Vec<(String, OsString)> = vec![
        var("RUNNER_ITEM_ID", &c.id),
        var("RUNNER_TEAM", &spec.team),
        var("RUNNER_TEAMMATE", &c.teammate),
        var("RUNNER_CANDIDATE", &c.candidate.unwrap_or(1).to_string()),
        var("RUNNER_REPORT", &folder.report()),
        var("RUNNER_TEAMMATE_DIR", &folder.work()),
        var("RUNNER_WORKSPACE", &spec.workspace),
    ];
    let confine =
        (spec.settings.sandbox == crate::sandbox::Mode::Landlock).then(|| vec![cwd.clone()]);
    let ran = run_helper(
        spec,
        c,
        "score",
        argv,
        &cwd,
        &logs,
        &env,
        confine.as_deref(),
        cancel,
    )
    .await;
    let shown = argv.join(" ");
    match ran {
        Err(f) => r.error = format!("score: {}", f.reason),
        Ok(()) => {
            let printed = std::fs::read_to_string(logs.path("score.log")).unwrap_or_default();
            let last = printed.lines().map(str::trim).rfind(|l| !l.is_empty());
            match last.map(|l| (l, l.parse::<f64>())) {
                Some((_, Ok(v))) if v.is_finite() => r.score = Some(v),
                Some((l, _)) => {
                    r.error = format!(
                        "score: `{shown}` printed `{}`, not a number",
                        report::one_line(l, 80)
                    )
                }
                None => r.error = format!("score: `{shown}` printed nothing"),
            }
        }
    }
}
