//! Judging an executed attempt: the report (file or final text), its `output_schema`, the
//! worktree commit, the verify command, and the verdict of [`report::judge`] on all of it.

use std::path::{Path, PathBuf};

use tokio::sync::watch;

use crate::agent::AgentResult;
use crate::item::WorkItem;
use crate::report::{self, Evidence, ItemStatus, VerifyResult};
use crate::run::RunSpec;
use crate::run::backend::Execution;
use crate::run::supervise::process::Cancel;

use super::attempt::{AttemptLogs, AttemptResult, Held};
use super::helpers::run_verify;
use super::prepare::Prepared;

/// The report file's text: `Ok(None)` when there is none, `Err` when it is too large or not
/// UTF-8 (then it is invalid, whatever the final text says).
fn read_report_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    // Never through a link, and only a plain file (issue 25).
    let (mut file, meta) = match crate::fsutil::open_plain_file_with_meta(path) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("the report file cannot be read: {e}")),
    };
    if meta.len() > report::MAX_REPORT_BYTES {
        return Err(format!(
            "the report file is {} bytes, over the {} byte limit; keep large results in files and name them in the report",
            meta.len(),
            report::MAX_REPORT_BYTES
        ));
    }
    // Room for all of it up front: one read (`Take` gives `read_to_end` no size hint).
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    match file
        .by_ref()
        .take(report::MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "the report file is not UTF-8".to_string()),
        Err(_) => Ok(None),
    }
}

/// The reason of a sandboxed attempt that failed as `agent_error`, led by the write the
/// sandbox denied when its stderr names one ([`crate::sandbox::denied_write`]) that the
/// sandbox explains: outside what the attempt may write (`granted`) and the team workspace,
/// and writable to the user without the sandbox (else it was the file's permissions, or a
/// read, which Landlock never denies). That path and the key that would allow it.
fn sandbox_hint(
    spec: &RunSpec,
    granted: &[PathBuf],
    stderr: Option<&str>,
    reason: String,
) -> String {
    let Some(path) = stderr.and_then(crate::sandbox::denied_write) else {
        return reason;
    };
    let real = crate::fsutil::real_path(&path);
    let inside = |root: &Path| real.starts_with(crate::fsutil::real_path(root));
    if inside(&spec.workspace) || granted.iter().any(|g| inside(g)) {
        return reason;
    }
    // The path, or the folder it would be made in.
    let Some(existing) = path.ancestors().find(|a| a.exists()) else {
        return reason;
    };
    if nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK).is_err() {
        return reason;
    }
    format!(
        "the sandbox denied writing {} (if the agent needs it, add it to `[sandbox] writes` of a runner definition — docs/runners.md; for an exec agent, a --runner-file with args = [\"{{command_args}}\"] — or run with --sandbox none); {reason}",
        path.display()
    )
}

/// A commit title from a report's `summary`: its first line, at most 72 characters (cut at a
/// word, with `…`); `None` when it is blank.
fn commit_title(summary: &str) -> Option<String> {
    let line = summary.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() <= 72 {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(71).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > 40 => &cut[..i],
        _ => cut.as_str(),
    };
    Some(format!("{}…", cut.trim_end()))
}

/// Judge an executed attempt: commit the worktree, find and validate the report, check its
/// output against the schema, run the verify command when everything else says completed,
/// and ask [`report::judge`] for the verdict.
pub(super) async fn judge_attempt(
    spec: &RunSpec,
    item: &WorkItem,
    prepared: &Prepared,
    ran: Execution,
    logs: &AttemptLogs<'_>,
    cancel: watch::Receiver<Cancel>,
) -> AttemptResult {
    let report_path = &prepared.report_path;
    let found = match read_report_file(report_path) {
        Err(problem) => Err(report::ReportError::Unreadable(problem)),
        // A stage's report may name its row (`RUNNER_ROW_ID`) or itself.
        Ok(text) => {
            let row = item.stage.as_ref().map(|s| s.row.as_str());
            let ids: Vec<&str> = std::iter::once(item.id.as_str()).chain(row).collect();
            report::find(text.as_deref(), ran.agent.final_text.as_deref(), &ids)
        }
    };
    // Nothing the agent did is lost: whatever it left uncommitted goes on its branch, titled
    // with what its report says it did (else the item's title).
    let git = match (&prepared.worktree, &spec.isolation) {
        (Some(wt), Some(iso)) => {
            let title = match &found {
                Ok((r, _)) => commit_title(&r.summary).unwrap_or_else(|| item.title.clone()),
                Err(_) => item.title.clone(),
            };
            Some(
                iso.commit_all(wt, &title)
                    .await
                    .map(|(c, d)| (wt.branch.clone(), c, d)),
            )
        }
        _ => None,
    };
    let commit = git
        .as_ref()
        .map(|g| g.as_ref().map(|_| ()).map_err(Clone::clone));
    let schema_errors = match (&found, spec.schema_for(item)) {
        (Ok((r, _)), Some((_, validator))) => report::schema_errors(r, validator),
        _ => None,
    };
    if let Ok((r, report::ReportSource::FinalText)) = &found {
        // Keep what the verdict was based on next to the logs.
        let pretty = serde_json::to_string_pretty(&r.raw).unwrap_or_default();
        let _ = crate::fsutil::write_private_file(report_path, pretty.as_bytes());
    }
    let mut evidence = Evidence {
        end: &ran.end,
        stderr_end: ran.stderr_end.as_deref(),
        agent: &ran.agent,
        rules: &spec.settings_for(item).runner.failure,
        text_output: spec.settings_for(item).runner.output == crate::agent::OutputFormat::Text,
        report: &found,
        schema_errors: schema_errors.as_deref(),
        verify: &VerifyResult::NotRun,
        commit: None,
    };
    // The verify command runs when the attempt's own evidence says completed.
    let (verify, verify_log) = match &spec.settings_for(item).verify {
        Some(verify) if report::judge(&evidence).status == ItemStatus::Completed => {
            run_verify(
                spec,
                item,
                verify,
                &prepared.cwd,
                logs,
                &prepared.env,
                cancel,
            )
            .await
        }
        _ => (VerifyResult::NotRun, PathBuf::new()),
    };
    evidence.verify = &verify;
    evidence.commit = commit.as_ref();
    let mut verdict = report::judge(&evidence);
    if prepared.sandbox.is_some() && verdict.kind == Some(crate::failure::FailureKind::AgentError) {
        let granted = prepared.sandbox.as_deref().unwrap_or_default();
        verdict.reason = sandbox_hint(spec, granted, ran.stderr_end.as_deref(), verdict.reason);
    }
    let verdict_kind = verdict.kind;
    let report = found.ok().map(|(r, _)| r);
    let mut agent = ran.agent;
    spent_as_reported(&mut agent, report.as_ref());
    AttemptResult {
        git: git.and_then(Result::ok),
        verify_cancelled: matches!(verify, VerifyResult::Cancelled),
        verdict,
        exit_code: ran.exit_code,
        elapsed: ran.elapsed,
        agent,
        report,
        // A failed verify is explained by its own log, not the agent's.
        log: match verdict_kind {
            Some(crate::failure::FailureKind::VerifyFailed)
                if !verify_log.as_os_str().is_empty() =>
            {
                verify_log
            }
            _ => ran.log,
        },
        held: Held::default(),
    }
}

/// What an agent that is no CLI (exec) says it spent in its `report` (`cost_usd`,
/// `input_tokens`, `output_tokens`), where its output told nothing.
fn spent_as_reported(agent: &mut AgentResult, report: Option<&report::Report>) {
    let said = |key: &str| report.and_then(|r| r.raw.get(key));
    if agent.cost_usd.is_none() {
        agent.cost_usd = said("cost_usd")
            .and_then(serde_json::Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0);
    }
    if agent.input_tokens.is_none() {
        agent.input_tokens = said("input_tokens").and_then(serde_json::Value::as_u64);
    }
    if agent.output_tokens.is_none() {
        agent.output_tokens = said("output_tokens").and_then(serde_json::Value::as_u64);
    }
}
