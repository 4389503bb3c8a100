//! `--junit FILE`: a JUnit XML report (with `quick-junit`), one test case per item, so CI
//! systems show per-item results where they show test results.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};

use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::report::{ItemStatus, Verdict};
use crate::run::events::{Event, Reporter};
use crate::run::record::outcome::Outcome;

/// The items a run covers, in input order, streamed afresh on each call: the plan's item
/// source, handed to the sink as a value (the sink knows nothing of plans).
pub(crate) type Items =
    Box<dyn Fn() -> Result<Box<dyn Iterator<Item = Result<WorkItem>> + Send>> + Send>;

/// Bytes of the log tail put in a failed test case's output.
const LOG_TAIL: u64 = 4096;

fn tail(path: &str) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// `text` with every character XML 1.0 forbids (`Char` production: C0 controls other than tab,
/// newline and carriage return; U+FFFE, U+FFFF) replaced visibly by U+FFFD, so one item's
/// text never makes a CI reader reject the whole file. ESC is left for `quick-junit`, which
/// strips ANSI escape sequences whole.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' | '\x1b' => c,
            '\0'..='\x1f' | '\u{FFFE}' | '\u{FFFF}' => '\u{FFFD}',
            _ => c,
        })
        .collect()
}

/// One test case for an item's outcome. Completed → success (flaky when `retried`, the
/// verdicts of the attempts that failed before, is not empty: one `flakyFailure` each, as
/// nextest marks tests that passed on a retry); failed, blocked and timed out → failure (with
/// the reason as message and the log tail as output); cancelled and skipped → skipped.
pub(crate) fn test_case(team: &str, o: &Outcome, retried: &[Verdict]) -> TestCase {
    let mut status = match o.status {
        ItemStatus::Completed => TestCaseStatus::success(),
        ItemStatus::Failed | ItemStatus::Blocked | ItemStatus::TimedOut => {
            TestCaseStatus::non_success(NonSuccessKind::Failure)
        }
        ItemStatus::Cancelled | ItemStatus::Skipped => TestCaseStatus::skipped(),
    };
    if o.status == ItemStatus::Completed {
        status.add_reruns(retried.iter().map(|v| {
            let mut run = TestRerun::new(NonSuccessKind::Failure);
            run.set_message(xml_text(&format!("{}: {}", v.status, v.reason)));
            run.set_type(v.kind.map_or(v.status.as_str(), |k| k.as_str()));
            run
        }));
    }
    if o.status != ItemStatus::Completed {
        // The reason may already start with the status (`blocked: need a key`).
        let prefix = format!("{}: ", o.status);
        status.set_message(xml_text(&if o.error.starts_with(&prefix) {
            o.error.clone()
        } else {
            format!("{prefix}{}", o.error)
        }));
        // The failure kind is the type a CI dashboard groups by (`rate_limited`, `auth`).
        status.set_type(o.failure_kind.map_or(o.status.as_str(), |k| k.as_str()));
    }
    let mut case = TestCase::new(xml_text(&format!("{} ({})", o.teammate, o.id)), status);
    case.set_classname(xml_text(team));
    case.set_time(Duration::from_secs_f64(o.duration_s.max(0.0)));
    case.add_property(("attempts", o.attempts.to_string().as_str()));
    case.add_property(("status", o.status.as_str()));
    if let Some(c) = o.cost_usd {
        case.add_property((
            "cost_usd",
            crate::run::record::outcome::usd_text(c).as_str(),
        ));
    }
    if o.status != ItemStatus::Completed
        && !o.log.is_empty()
        && let Some(t) = tail(&o.log)
    {
        case.set_system_out(xml_text(&t));
    }
    case
}

/// Whether `bytes` are a JUnit XML report (what [`write`](fn@write) makes, or another tool's): the
/// only kind of file `--junit` replaces.
pub(crate) fn is_junit(bytes: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    head.trim_start().starts_with('<')
        && (head.contains("<testsuites") || head.contains("<testsuite"))
}

/// Write the report for `outcomes` (each with the verdicts of its retried attempts) to
/// `path` (atomically).
///
/// Errors: the file cannot be written.
pub(crate) fn write(
    path: &Path,
    team: &str,
    outcomes: &[(Outcome, Vec<Verdict>)],
    elapsed_s: f64,
) -> Result<()> {
    let mut suite = TestSuite::new(xml_text(team));
    suite.add_test_cases(
        outcomes
            .iter()
            .map(|(o, retried)| test_case(team, o, retried)),
    );
    suite.set_time(Duration::from_secs_f64(elapsed_s.max(0.0)));
    let mut report = Report::new("runner");
    report.add_test_suite(suite);
    report.set_time(Duration::from_secs_f64(elapsed_s.max(0.0)));
    let xml = report
        .to_string()
        .map_err(|e| Error::Environment(format!("cannot build the JUnit report: {e}")))?;
    crate::fsutil::make_parent(path)?;
    crate::fsutil::write_atomic(path, xml.as_bytes())
}

/// The `--junit FILE` sink: one test case per item the run covered, in input order (an item
/// that never started is a skipped case).
pub(crate) struct Junit {
    /// The report file.
    pub path: PathBuf,
    /// The suite's name and each case's class name: the team and its batch
    /// (`workers-output (examples/audit/workers-input.csv)`), so two batches whose outputs
    /// share a name are two suites in CI.
    pub team: String,
    /// The items the run covered.
    pub items: Items,
    /// Verdicts of attempts that were retried, by item id (seen live).
    pub retried: HashMap<String, Vec<Verdict>>,
}

impl Junit {
    /// The report `path` of suite `team` ([`Junit::team`]) over `items`.
    pub(crate) fn new(path: PathBuf, team: String, items: Items) -> Junit {
        Junit {
            path,
            team,
            items,
            retried: HashMap::new(),
        }
    }
}

impl Reporter for Junit {
    fn event(&mut self, event: &Event) {
        if let Event::AttemptFinished {
            id,
            verdict,
            retrying: true,
            ..
        } = event
        {
            self.retried
                .entry(id.clone())
                .or_default()
                .push(verdict.clone());
        }
    }
}

impl Sink for Junit {
    fn writes(&self) -> Vec<PlanFile> {
        vec![
            PlanFile::new("JUnit report", &self.path, "--junit")
                .replacing("a JUnit report", is_junit),
        ]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        let mut outcomes = Vec::new();
        for item in (self.items)()? {
            let item = item?;
            let outcome = match run.outcomes.outcome(&item.id)? {
                Some(o) => o,
                None => super::output_csv::not_started(
                    &item.id,
                    &item.teammate,
                    &item.title,
                    run.summary.interrupted,
                ),
            };
            let retried = self.retried.remove(&item.id).unwrap_or_default();
            outcomes.push((outcome, retried));
        }
        write(&self.path, &self.team, &outcomes, run.summary.elapsed_s)
    }
}
