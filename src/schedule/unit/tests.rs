//! The retry and rate-limit policy as a user sees it — an item's status, its attempts, its
//! failure kind — on the scripted backend, one unit at a time, with tokio's clock paused:
//! back-offs, pauses and time limits take no real time, and how long they took is exact.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::retry::repeated_limit_backoff;
use super::{Earlier, run_item};
use crate::failure::FailureKind;
use crate::report::ItemStatus;
use crate::run::RunSpec;
use crate::run::backend::scripted::{Scripted, Step};
use crate::run::events::Event;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;
use crate::run::supervise::process::Cancel;
use crate::schedule::gate::{Gate, Spent};
use crate::schedule::test_support::{item, spec};

/// One team's run, with its gate, for units started one after another.
struct Bench {
    spec: Arc<RunSpec>,
    gate: Arc<Gate>,
    _team: Team,
    _dir: tempfile::TempDir,
}

/// What a user sees of one item's unit.
struct Ran {
    outcome: Outcome,
    /// Each attempt's number and whether it was to be retried, in order.
    attempts: Vec<(u32, bool)>,
    /// Time from the unit's start to its outcome (on the paused clock).
    took: Duration,
}

/// A team running one item at a time with `retries` retries; `tune` sets the rest.
fn bench(retries: u32, tune: impl FnOnce(&mut RunSpec)) -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 1, retries);
    tune(&mut s);
    let team = Team::open(&s.team, &s.workspace).expect("team opens");
    // The gate's own events (pauses, stops) are not what these tests look at.
    let (tx, _) = mpsc::unbounded_channel();
    let gate = Arc::new(Gate::new(
        s.settings.jobs,
        s.settings.limits.clone(),
        Spent::default(),
        tx,
    ));
    Bench {
        spec: Arc::new(s),
        gate,
        _team: team,
        _dir: dir,
    }
}

impl Bench {
    /// Run item `id`'s unit to its end on `backend`.
    async fn run(&self, backend: &Arc<Scripted>, id: &str) -> Ran {
        self.run_interrupted(backend, id, None).await
    }

    /// Run item `id`'s unit to its end on `backend`, interrupting the run (gracefully)
    /// `interrupt` after it started.
    async fn run_interrupted(
        &self,
        backend: &Arc<Scripted>,
        id: &str,
        interrupt: Option<Duration>,
    ) -> Ran {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // The sender lives as long as the unit: a dropped one reads as an interrupt.
        let (cancel_tx, cancel) = watch::channel(Cancel::None);
        let started = Instant::now();
        let unit = run_item(
            self.spec.clone(),
            backend.clone(),
            self.gate.clone(),
            item(id, &format!("do {id}"), &[]),
            Earlier {
                first_attempt: 1,
                ..Earlier::default()
            },
            tx,
            cancel,
        );
        match interrupt {
            None => unit.await,
            Some(after) => {
                let interrupting = async {
                    tokio::time::sleep(after).await;
                    let _ = cancel_tx.send(Cancel::Graceful);
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    _ = unit => {}
                    _ = interrupting => {}
                }
            }
        }
        let took = started.elapsed();
        drop(cancel_tx);
        let mut attempts = Vec::new();
        let mut outcome = None;
        while let Ok(event) = rx.try_recv() {
            match event {
                Event::AttemptFinished {
                    attempt, retrying, ..
                } => attempts.push((attempt, retrying)),
                Event::ItemFinished(o) => outcome = Some(*o),
                _ => {}
            }
        }
        Ran {
            outcome: outcome.expect("the unit sends its item's outcome"),
            attempts,
            took,
        }
    }
}

/// Status, attempts and failure kind: what the outputs show of an item.
fn seen(o: &Outcome) -> (ItemStatus, u32, Option<FailureKind>) {
    (o.status, o.attempts, o.failure_kind)
}

/// A failed report that says why (as an `exec` agent may).
fn failing_with(kind: &str, retry_after_s: Option<f64>) -> Step {
    let mut report = json!({"status": "failed", "summary": format!("{kind} from the API")});
    report["failure_kind"] = json!(kind);
    if let Some(s) = retry_after_s {
        report["retry_after_s"] = json!(s);
    }
    Step {
        exit_code: 0,
        report: Some(report),
        ..Step::failed("")
    }
}

/// A report that says `blocked`.
fn blocked() -> Step {
    Step {
        report: Some(json!({"status": "blocked", "summary": "s", "blocker": "needs a key"})),
        ..Step::completed()
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_retried_after_a_doubling_back_off_until_it_completes() {
    let b = bench(2, |s| s.settings.retry_delay = Duration::from_secs(10));
    let script = || {
        vec![
            Step::failed("boom"),
            Step::failed("boom"),
            Step::completed(),
        ]
    };
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", script()));
    let ran = b.run(&backend, "a").await;
    assert_eq!(seen(&ran.outcome), (ItemStatus::Completed, 3, None));
    assert_eq!(ran.attempts, [(1, true), (2, true), (3, false)]);
    // 10 s then 20 s, each times a jitter of 0.5 to 1.5.
    assert!(
        ran.took >= Duration::from_secs(15) && ran.took < Duration::from_secs(45),
        "{:?}",
        ran.took
    );

    // One retry fewer: the item ends with its second failure.
    let b = bench(1, |s| s.settings.retry_delay = Duration::from_secs(10));
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", script()));
    let ran = b.run(&backend, "a").await;
    assert_eq!(
        seen(&ran.outcome),
        (ItemStatus::Failed, 2, Some(FailureKind::AgentError))
    );
    assert_eq!(ran.attempts, [(1, true), (2, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_status_left_out_of_retry_on_is_not_retried() {
    let b = bench(2, |s| s.settings.retry_on = vec![ItemStatus::Failed]);
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", vec![blocked()]));
    let ran = b.run(&backend, "a").await;
    assert_eq!(seen(&ran.outcome).0, ItemStatus::Blocked);
    assert_eq!(ran.attempts, [(1, false)]);
    assert_eq!(ran.outcome.error, "blocked: needs a key");

    // Listed, it is retried.
    let b = bench(2, |s| {
        s.settings.retry_on = vec![ItemStatus::Failed, ItemStatus::Blocked]
    });
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", vec![blocked()]));
    let ran = b.run(&backend, "a").await;
    assert_eq!(seen(&ran.outcome), (ItemStatus::Completed, 2, None));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_only_when_timed_out_is_in_retry_on() {
    let slow = || vec![Step::completed().after(Duration::from_secs(120))];
    let limited = |retry_on: Vec<ItemStatus>| {
        bench(1, |s| {
            s.settings.timeout = Some(Duration::from_secs(60));
            s.settings.retry_on = retry_on;
        })
    };
    let b = limited(vec![ItemStatus::Failed]);
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", slow()));
    let ran = b.run(&backend, "a").await;
    assert_eq!(
        seen(&ran.outcome),
        (ItemStatus::TimedOut, 1, Some(FailureKind::TimedOut))
    );
    assert_eq!(ran.attempts, [(1, false)]);
    assert!(ran.took >= Duration::from_secs(60), "{:?}", ran.took);

    let b = limited(vec![ItemStatus::Failed, ItemStatus::TimedOut]);
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", slow()));
    let ran = b.run(&backend, "a").await;
    assert_eq!(seen(&ran.outcome), (ItemStatus::Completed, 2, None));
    assert_eq!(ran.attempts, [(1, true), (2, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_attempt_is_made_again_after_the_pause_without_using_a_retry() {
    let b = bench(0, |_| {});
    let limited = failing_with("rate_limited", Some(30.0));
    let backend =
        Arc::new(Scripted::new(Step::completed()).script("a", vec![limited, Step::completed()]));
    let ran = b.run(&backend, "a").await;
    assert_eq!(
        seen(&ran.outcome),
        (ItemStatus::Completed, 2, None),
        "--retries 0, yet attempted again"
    );
    assert_eq!(ran.outcome.rate_limit_waits, 1);
    assert_eq!(ran.attempts, [(1, true), (2, false)]);
    assert!(
        ran.took >= Duration::from_secs(30),
        "waited out the pause the provider asked for: {:?}",
        ran.took
    );
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_that_would_pass_rate_limit_wait_ends_the_item_rate_limited() {
    let b = bench(3, |s| {
        s.settings.limits.rate_limit_wait = Duration::from_secs(60);
    });
    let backend = Arc::new(Scripted::new(failing_with("rate_limited", Some(40.0))));
    let ran = b.run(&backend, "a").await;
    assert_eq!(
        seen(&ran.outcome),
        (ItemStatus::Failed, 2, Some(FailureKind::RateLimited)),
        "one pause of 40 s fits in 60 s, a second does not; no retry of --retries 3 is used"
    );
    assert!(
        ran.outcome
            .error
            .starts_with("still rate limited after waiting 40s; waiting the 40s it asks for would pass --rate-limit-wait 1m"),
        "{}",
        ran.outcome.error
    );
    assert_eq!(ran.attempts, [(1, true), (2, false)]);
}

#[tokio::test(start_paused = true)]
async fn overflows_in_a_row_wait_what_the_server_asks_without_growing() {
    let b = bench(0, |s| s.settings.jobs = 4);
    // The gate has met the server's limit (4 → 2, a 1 s pause) and earned credit since:
    // 4 successes step it up to 3, 2 more fill the credit to 3.
    let limited = |_: ()| {
        let mut v = crate::report::Verdict::not_completed(
            ItemStatus::Failed,
            Some(FailureKind::RateLimited),
            "429".into(),
        );
        v.retry_after_s = Some(1.0);
        v
    };
    b.gate.ended("x", &limited(()), None, Duration::ZERO);
    for _ in 0..6 {
        b.gate.ended(
            "x",
            &crate::report::Verdict::completed(),
            None,
            Duration::ZERO,
        );
    }
    assert_eq!(b.gate.view().limit, 3);
    let over = failing_with("rate_limited", Some(1.0));
    let backend = Arc::new(Scripted::new(Step::completed()).script(
        "a",
        vec![over.clone(), over.clone(), over, Step::completed()],
    ));
    let ran = b.run(&backend, "a").await;
    assert_eq!(seen(&ran.outcome), (ItemStatus::Completed, 4, None));
    assert_eq!(ran.outcome.rate_limit_waits, 3);
    assert_eq!(b.gate.view().limit, 3, "three overflows: the limit stands");
    // The pause (1 s) and three waits of 1 s; a third rate limit in a row of the item's own
    // would add 2 s.
    assert!(ran.took < Duration::from_secs(5), "{:?}", ran.took);
}

#[test]
fn an_items_own_back_off_grows_from_its_third_rate_limit_in_a_row() {
    let secs = |n| repeated_limit_backoff(n).as_secs();
    assert_eq!(
        (1..=6).map(secs).collect::<Vec<_>>(),
        [0, 0, 2, 4, 8, 16],
        "a hint that repeats is not obeyed to the letter"
    );
    assert_eq!(secs(40), 300, "at most 5 minutes");
}

#[tokio::test(start_paused = true)]
async fn a_setup_failure_that_stopped_the_team_is_not_retried() {
    // Exit 127: the shell found no agent command.
    let broken = Step {
        exit_code: 127,
        ..Step::failed("sh: agent: not found")
    };
    let b = bench(2, |s| s.settings.retry_delay = Duration::from_secs(1));
    let backend = Arc::new(Scripted::new(broken));
    // Alone, one item's set-up failures are retried: it may be the item's own.
    let first = b.run(&backend, "b").await;
    assert_eq!(
        seen(&first.outcome),
        (ItemStatus::Failed, 3, Some(FailureKind::Setup))
    );
    // A second item failing the same way stops the team: its failure is final at once.
    let second = b.run(&backend, "a").await;
    assert_eq!(
        seen(&second.outcome),
        (ItemStatus::Failed, 1, Some(FailureKind::Setup)),
        "--retries 2, but the team stopped"
    );
    assert_eq!(second.attempts, [(1, false)]);
    // And nothing more starts.
    let third = b.run(&backend, "c").await;
    assert_eq!(
        seen(&third.outcome),
        (ItemStatus::Skipped, 0, Some(FailureKind::Skipped))
    );
    assert!(
        third
            .outcome
            .error
            .starts_with("not started: set-up failure"),
        "{}",
        third.outcome.error
    );
    assert_eq!(backend.seen().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_during_the_back_off_ends_the_item_cancelled_without_its_retry() {
    let b = bench(2, |s| s.settings.retry_delay = Duration::from_secs(60));
    let backend = Arc::new(Scripted::new(Step::failed("boom")));
    let ran = b
        .run_interrupted(&backend, "a", Some(Duration::from_secs(5)))
        .await;
    assert_eq!(
        seen(&ran.outcome),
        (ItemStatus::Cancelled, 1, Some(FailureKind::Cancelled))
    );
    assert_eq!(ran.outcome.error, "interrupted before a retry");
    assert_eq!(ran.attempts, [(1, true)]);
    assert!(
        ran.took < Duration::from_secs(30),
        "the back-off ended with the interrupt: {:?}",
        ran.took
    );
    assert_eq!(backend.seen().len(), 1);
}
