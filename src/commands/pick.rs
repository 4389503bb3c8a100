//! `runner pick ID CANDIDATE [WS]`: settle a `--best-of` item that `--judge person` left
//! `blocked` (DESIGN §13). The item's new outcome — the candidate's, with the item's summed
//! attempts and cost and the candidates as they were — is appended to the team's journal
//! under its lock; the next run of the batch skips the item as completed, writes its outputs
//! and (with `--merge`) merges the winner's branch.

use crate::cli::PickArgs;
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::record::folder::TeammateFolder;
use crate::run::record::journal::Entry;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;
use crate::run::record::workspace::{Found, locate};
use crate::schedule::unit::best_of::MARKER;

/// Run `runner pick`.
///
/// Errors: no such team or item (exit 2); an item no person is asked about, or a candidate
/// that did not pass or left no outcome (exit 2, naming those that can be picked); the team
/// is running (its lock is held); the journal cannot be read or written.
pub(crate) fn pick(args: PickArgs) -> Result<i32> {
    let Found::Workspace(dir) = locate(args.workspace.as_deref())? else {
        return Err(Error::Usage(
            "the team was cleaned (only its archive is left); nothing can be picked".into(),
        ));
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut team = Team::open(&name, &dir)?;
    let Some(blocked) = team.outcome(&args.id)? else {
        return Err(Error::Unknown {
            what: "item".into(),
            name: args.id.clone(),
            suggestion: String::new(),
            hint: format!("no item by that id has finished in team {}", dir.display()),
        });
    };
    let b = match blocked.best_of.as_deref() {
        Some(b) if b.winner.is_none() && blocked.status == ItemStatus::Blocked => b.clone(),
        _ => {
            return Err(Error::Usage(format!(
                "item {} is not waiting for a person to pick its winner (it is {}); `runner pick` settles a --best-of item run with --judge person",
                args.id, blocked.status
            )));
        }
    };
    let wanted = args.candidate.trim().trim_start_matches('c');
    let passed: Vec<String> = b
        .candidates
        .iter()
        .filter(|c| c.passed(false))
        .map(|c| format!("c{}", c.candidate))
        .collect();
    let chosen = b
        .candidates
        .iter()
        .find(|c| c.candidate.to_string() == wanted || c.teammate == args.candidate);
    let Some(chosen) = chosen.filter(|c| c.passed(false)) else {
        return Err(Error::Usage(format!(
            "{}: not a candidate of item {} that passed; pick one of {}",
            args.candidate,
            args.id,
            passed.join(", ")
        )));
    };
    let marker = TeammateFolder::new(&dir, &chosen.teammate)
        .dir()
        .join(MARKER);
    let winner: Outcome = std::fs::read(&marker)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| {
            Error::Usage(format!(
                "{}: the outcome candidate {} left is gone; run the batch again (every candidate runs again)",
                marker.display(),
                chosen.teammate
            ))
        })?;
    let k = chosen.candidate;
    let outcome = Outcome {
        id: blocked.id.clone(),
        title: blocked.title.clone(),
        content_hash: blocked.content_hash.clone(),
        attempts: blocked.attempts,
        cost_usd: blocked.cost_usd,
        input_tokens: blocked.input_tokens,
        cached_input_tokens: blocked.cached_input_tokens,
        output_tokens: blocked.output_tokens,
        started_at: blocked.started_at.clone(),
        best_of: Some(Box::new(crate::report::best_of::BestOf {
            winner: Some(k),
            rule: "person: picked with `runner pick`".into(),
            ..b.clone()
        })),
        ..winner
    };
    team.record(&Entry::ItemFinished {
        outcome: Box::new(outcome),
    })?;
    team.sync()?;
    for c in &b.candidates {
        let _ = std::fs::remove_file(TeammateFolder::new(&dir, &c.teammate).dir().join(MARKER));
    }
    crate::ui::out(format!(
        "Item {}: candidate c{k} ({}) is the winner. Run the batch again to write its outputs{}.\n",
        args.id,
        chosen.teammate,
        if chosen.branch.is_some() {
            " and merge its branch (with --merge)"
        } else {
            ""
        }
    ));
    Ok(0)
}
