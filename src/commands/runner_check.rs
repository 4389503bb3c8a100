//! `runner runners --check RUNNER TRANSCRIPT...`: a runner definition judged against recorded
//! CLI transcripts, offline — what the success rule (`report::judge`) would make of each: the
//! status, the failure kind and the one-line reason, as a run would record them. For writing
//! or changing a definition without a model, a key or the CLI.
//!
//! A transcript is a TOML file of what one run of the CLI left (see `examples/transcripts/`):
//!
//! ```toml
//! name = "rate limit, exit 0"     # default: the file's name
//! exit_code = 0                   # default 0
//! stdout = '''…'''                # what the CLI printed (parsed by the definition's `output`)
//! stderr = '''…'''                # default empty
//! report = '''{"status": …}'''    # what the agent wrote to RUNNER_REPORT, if anything
//! id = "1"                        # the item id the report must name (default "1")
//! expect = "rate_limited"         # optional: the status or failure kind it must get
//! timeout = "30m"                 # the attempt's time limit (default the run's, 30m)
//! ```
//!
//! `[failure] live` lines end the attempt as a run would at that time limit (as though each
//! came at the start); stdout's lines are looked at before stderr's, and a last line
//! without a newline is looked at too (a run matches only whole lines while the CLI runs).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agent::definition::{self, RunnerDef};
use crate::error::{Error, Result};
use crate::report::{self, Evidence, ProcessEnd, Verdict, VerifyResult};

/// One recorded run of an agent CLI (the module's doc gives the file's shape).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Transcript {
    /// A name for the table (default: the file's stem).
    #[serde(default)]
    pub name: Option<String>,
    /// The CLI's exit code.
    #[serde(default)]
    pub exit_code: i32,
    /// What it printed on stdout.
    #[serde(default)]
    pub stdout: String,
    /// What it printed on stderr.
    #[serde(default)]
    pub stderr: String,
    /// What the agent wrote to `RUNNER_REPORT`, if anything.
    #[serde(default)]
    pub report: Option<String>,
    /// The item id its report must name.
    #[serde(default = "default_id")]
    pub id: String,
    /// The status (`completed`, `failed`, …) or failure kind (`rate_limited`, `auth`, …) it
    /// must get; a different verdict makes the check exit 1.
    #[serde(default)]
    pub expect: Option<String>,
    /// The attempt's time limit (`90s`, `30m`): a live rate-limit line whose wait is longer
    /// ends the attempt. Default [`crate::settings::DEFAULT_TIMEOUT`].
    #[serde(default, deserialize_with = "time_limit")]
    pub timeout: Option<std::time::Duration>,
}

/// `timeout = "90s"`: a duration as `--timeout` takes it.
fn time_limit<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<std::time::Duration>, D::Error> {
    let text = String::deserialize(d)?;
    crate::settings::parse_duration("timeout", &text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(e.to_string()))
}

fn default_id() -> String {
    "1".into()
}

/// What `expect` may name: the statuses and failure kinds a transcript can get (not those of
/// a time limit, an interrupt, a skip, a verify command or a merge, which no transcript
/// records; `input` is, for a CLI whose request can never succeed).
fn expectable() -> Vec<String> {
    use crate::failure::FailureKind as K;
    let mut names: Vec<String> = ["completed", "failed", "blocked"]
        .map(String::from)
        .to_vec();
    names.extend(
        K::ALL
            .iter()
            .filter(|k| {
                !matches!(
                    k,
                    K::VerifyFailed
                        | K::TimedOut
                        | K::Cancelled
                        | K::Skipped
                        | K::MergeConflict
                        | K::MergeFailed
                        | K::Rejected
                )
            })
            .map(|k| k.to_string()),
    );
    names
}

/// Read transcript `path`.
///
/// Errors: it cannot be read or is not a transcript, or its `expect` names no status or
/// kind (exit 2, naming the file and line).
pub(crate) fn read(path: &Path) -> Result<Transcript> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::read_input("the transcript", path, e))?;
    let t: Transcript = parse(path, &text)?;
    if let Some(e) = &t.expect {
        let known = expectable();
        if !known.contains(e) {
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with("expect"))
                .map(|i| i as u64 + 1);
            return Err(Error::input_at(
                path,
                line,
                format!(
                    "`expect = \"{e}\"` names no status or failure kind{}; it takes one of: {}",
                    crate::suggest::did_you_mean(e, known.iter().map(String::as_str)),
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(t)
}

/// The transcript in `text` (of file `path`).
fn parse(path: &Path, text: &str) -> Result<Transcript> {
    toml::from_str(text).map_err(|e| {
        Error::input_at(
            path,
            Error::line_of(text, e.span()),
            format!(
                "not a transcript: {} (examples/transcripts/README.md shows the fields)",
                e.message()
            ),
        )
    })
}

/// The verdict definition `def` gives transcript `t`: its stdout parsed by the definition's
/// `output` and `[result]`, the report from `report` or the final text, the `[failure]` rules
/// over stdout and the last 4 KiB of stderr — as a run judges an attempt that exited on its
/// own (no schema, no verify command).
pub(crate) fn judge(def: &RunnerDef, t: &Transcript) -> Verdict {
    // What a run reads: stdout's head and tail past 4 MiB, no report over the limit.
    let stdout =
        crate::run::backend::capped_text(t.stdout.as_bytes(), crate::run::backend::FULL_READ);
    let agent = crate::agent::output::parse(def, &stdout);
    let found = match &t.report {
        Some(r) if r.len() as u64 > report::MAX_REPORT_BYTES => {
            Err(report::ReportError::Unreadable(format!(
                "the report file is {} bytes, over the {} byte limit; keep large results in files and name them in the report",
                r.len(),
                report::MAX_REPORT_BYTES
            )))
        }
        _ => report::find(t.report.as_deref(), agent.final_text.as_deref(), &[&t.id]),
    };
    let start = t.stderr.len().saturating_sub(4096);
    let start = (start..=t.stderr.len())
        .find(|i| t.stderr.is_char_boundary(*i))
        .unwrap_or(t.stderr.len());
    let stderr_end = &t.stderr[start..];
    let end = live_end(def, t).unwrap_or(ProcessEnd::Exited(t.exit_code));
    let evidence = Evidence {
        end: &end,
        stderr_end: (!stderr_end.trim().is_empty()).then_some(stderr_end),
        agent: &agent,
        rules: &def.failure,
        text_output: def.output == crate::agent::OutputFormat::Text,
        report: &found,
        schema_errors: None,
        verify: &VerifyResult::NotRun,
        commit: None,
    };
    report::judge(&evidence)
}

/// How a run would have ended the attempt early: at the first stdout, then stderr, line a
/// `[failure] live` entry matches that ends an attempt with the transcript's time limit
/// (`auth`, `quota`, a rate limit whose wait is longer).
fn live_end(def: &RunnerDef, t: &Transcript) -> Option<ProcessEnd> {
    use crate::failure::live::{self, Stream};
    let rules = def.failure.live();
    let hit = [(Stream::Stdout, &t.stdout), (Stream::Stderr, &t.stderr)]
        .into_iter()
        .flat_map(|(stream, text)| text.lines().map(move |l| (stream, l)))
        .filter_map(|(stream, line)| live::first_hit(rules, stream, line.as_bytes()))
        .find(|hit| {
            hit.ends_attempt(Some(t.timeout.unwrap_or(crate::settings::DEFAULT_TIMEOUT)))
        })?;
    Some(ProcessEnd::Failed {
        kind: hit.kind,
        reason: hit.reason(
            def.failure
                .hint_for(&hit.line)
                .or_else(|| def.failure.hint_for(&hit.text))
                .as_deref(),
        ),
        retry_after: hit.wait,
    })
}

/// Whether `verdict` is what `expect` names: its status, or its failure kind.
fn meets(verdict: &Verdict, expect: &str) -> bool {
    verdict.status.to_string() == expect || verdict.kind.is_some_and(|k| k.to_string() == expect)
}

/// The definition `runner` names: a TOML file when it names one (a path ending in `.toml`),
/// else a store's or the built-in definition of that name.
///
/// Errors: as [`definition::load`].
fn definition_of(runner: &str, store: Option<&Path>) -> Result<RunnerDef> {
    let path = Path::new(runner);
    let def = match path.is_file() || runner.to_lowercase().ends_with(".toml") {
        true => definition::load("", None, Some(path))?,
        false => definition::load(runner, store, None)?,
    };
    for w in &def.warnings {
        crate::ui::warn(w);
    }
    if def.answers_only() {
        return Err(Error::Usage(format!(
            "runner definition `{}` sends HTTP requests: --check judges what a CLI printed (a process definition)",
            def.name
        )));
    }
    Ok(def)
}

/// `runner runners --check RUNNER TRANSCRIPT...`: one line per transcript (its name, the
/// status, the kind, the reason, and `ok` / `EXPECTED …` when it names what it must get).
/// Exit 0 when every expectation holds, 1 when one does not.
///
/// Errors: an unknown or invalid definition, an unreadable or invalid transcript (exit 2,
/// before anything is printed).
pub(crate) fn check(runner: &str, store: Option<&Path>, files: &[PathBuf]) -> Result<i32> {
    let def = definition_of(runner, store)?;
    let transcripts = files
        .iter()
        .map(|f| read(f).map(|t| (f, t)))
        .collect::<Result<Vec<_>>>()?;
    let mut missed = 0;
    let mut out = String::new();
    for (file, t) in &transcripts {
        let v = judge(&def, t);
        let name = t.name.as_deref().map_or_else(
            || {
                file.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            },
            |n| report::one_line(n, 40),
        );
        let kind = v.kind.map_or("-".to_string(), |k| k.to_string());
        let check = match &t.expect {
            None => String::new(),
            Some(e) if meets(&v, e) => "  ok".into(),
            Some(e) => {
                missed += 1;
                format!("  EXPECTED {e}")
            }
        };
        let reason = match v.reason.is_empty() {
            true => String::new(),
            false => format!("  {}", report::one_line(&v.reason, 200)),
        };
        out.push_str(&format!(
            "{name:<24} {:<10} {kind:<13}{reason}{check}\n",
            v.status.to_string()
        ));
    }
    out.push_str(&format!(
        "{} transcript(s) judged by runner definition `{}`{}{}\n",
        transcripts.len(),
        def.name,
        match Path::new(runner).is_file() {
            true => format!(" ({runner})"),
            false => String::new(),
        },
        match missed {
            0 => String::new(),
            n => format!("; {n} did not get what they expect"),
        }
    ));
    crate::ui::out(&out);
    Ok(if missed == 0 { 0 } else { 1 })
}
