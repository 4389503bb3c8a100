//! In-process dispatcher tests: the scripted backend instead of processes, interrupts sent
//! through a channel instead of signals, a temporary workspace.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Action, Dispatcher, Input, Interrupts, State, Wiring, run_wired};
use crate::failure::FailureKind;
use crate::item::WorkItem;
use crate::report::ItemStatus;
use crate::run::RunSpec;
use crate::run::backend::scripted::{Scripted, Step};
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;
use crate::run::supervise::job_control::Suspends;
use crate::run::supervise::process::Cancel;
use crate::schedule::test_support::{item, spec};

/// Keeps every event.
#[derive(Default)]
struct Events(Vec<Event>);

impl Reporter for Events {
    fn event(&mut self, event: &Event) {
        self.0.push(event.clone());
    }
}

impl Events {
    fn outcome(&self, id: &str) -> &Outcome {
        self.0
            .iter()
            .find_map(|e| match e {
                Event::ItemFinished(o) if o.id == id => Some(o.as_ref()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no outcome for item {id}"))
    }
}

struct Ran {
    summary: RunSummary,
    events: Events,
}

/// Sends interrupts when it sees fit (on a blocking task of its own).
type Interrupter = fn(Arc<Scripted>, tokio::sync::mpsc::UnboundedSender<()>);

/// Run `items` of `spec` on `backend`; `interrupt` is called with the backend and a sender
/// of interrupts on a task of its own.
async fn run_items(
    spec: RunSpec,
    items: Vec<WorkItem>,
    backend: Arc<Scripted>,
    interrupt: Option<Interrupter>,
) -> Ran {
    let mut team = Team::open(&spec.team, &spec.workspace).expect("team opens");
    let (tx, interrupts) = Interrupts::channel();
    let watcher = interrupt.map(|f| {
        let backend = backend.clone();
        tokio::task::spawn_blocking(move || f(backend, tx))
    });
    let mut events = Events::default();
    let total = items.len() as u64;
    let resumed = crate::run::record::journal::count_done_before(
        team.ledger(),
        &spec.rerun,
        items.iter().cloned().map(Ok),
    )
    .expect("items");
    let summary = run_wired(
        Arc::new(spec),
        &mut team,
        super::Items::Stream(Box::new(items.into_iter().map(Ok))),
        Some(total),
        resumed,
        &mut events,
        Wiring {
            backend,
            interrupts,
            suspends: Suspends::none(),
        },
    )
    .await
    .expect("the run ends");
    if let Some(w) = watcher {
        w.await.expect("watcher");
    }
    Ran { summary, events }
}

fn ids_started(backend: &Scripted) -> Vec<(String, u32)> {
    backend
        .seen()
        .into_iter()
        .map(|s| (s.id, s.attempt))
        .collect()
}

#[tokio::test]
async fn a_resumed_run_skips_completed_items_unless_their_content_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Arc::new(Scripted::new(Step::completed()));
    let ran = run_items(
        spec(dir.path(), 2, 0),
        vec![item("a", "do a", &[]), item("b", "do b", &[])],
        first.clone(),
        None,
    )
    .await;
    assert_eq!(ran.summary.count(ItemStatus::Completed), 2);
    assert_eq!(ran.summary.resumed, 0);

    let second = Arc::new(Scripted::new(Step::completed()));
    let ran = run_items(
        spec(dir.path(), 2, 0),
        vec![item("a", "do a", &[]), item("b", "do b, differently", &[])],
        second.clone(),
        None,
    )
    .await;
    assert_eq!(
        ids_started(&second),
        vec![("b".to_string(), 2)],
        "only the changed item runs again, its attempts numbered on from the first run"
    );
    assert_eq!(ran.summary.count(ItemStatus::Completed), 2);
    assert_eq!(ran.summary.resumed, 1);
    assert_eq!(ran.summary.total(), 2);
    assert_eq!(ran.events.outcome("b").attempts, 2);
}

#[tokio::test]
async fn a_failed_attempt_is_retried_with_its_context_in_the_next_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failed = Step {
        report: Some(json!({"status": "failed", "summary": "tests broke in parser.rs"})),
        ..Step::failed("boom")
    };
    let backend =
        Arc::new(Scripted::new(Step::completed()).script("a", vec![failed, Step::completed()]));
    let ran = run_items(
        spec(dir.path(), 1, 1),
        vec![item("a", "do a", &[])],
        backend.clone(),
        None,
    )
    .await;
    let o = ran.events.outcome("a");
    assert_eq!((o.status, o.attempts), (ItemStatus::Completed, 2));
    assert_eq!(o.summary, "did it");
    let seen = backend.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        !seen[0].prompt.contains("This is attempt"),
        "{}",
        seen[0].prompt
    );
    let retry = &seen[1].prompt;
    assert!(retry.contains("## This is attempt 2"), "{retry}");
    assert!(
        retry.contains("The previous attempt ended `failed`: exited with code 1"),
        "{retry}"
    );
    assert!(retry.contains("tests broke in parser.rs"), "{retry}");
    let retrying: Vec<(u32, bool)> = ran
        .events
        .0
        .iter()
        .filter_map(|e| match e {
            Event::AttemptFinished {
                attempt, retrying, ..
            } => Some((*attempt, *retrying)),
            _ => None,
        })
        .collect();
    assert_eq!(retrying, vec![(1, true), (2, false)]);
    assert_eq!(ran.summary.count(ItemStatus::Completed), 1);
}

#[tokio::test]
async fn an_interrupt_cancels_running_items_and_counts_those_not_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = Arc::new(Scripted::new(
        Step::completed().after(Duration::from_secs(60)),
    ));
    let items = vec![
        item("a", "do a", &[]),
        item("b", "do b", &[]),
        item("c", "do c", &[]),
        item("d", "do d", &[]),
    ];
    // Two run at once; once both are under way, interrupt.
    let ran = run_items(
        spec(dir.path(), 2, 3),
        items,
        backend.clone(),
        Some(|backend, tx| {
            while backend.seen().len() < 2 {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = tx.send(());
        }),
    )
    .await;
    assert_eq!(
        ids_started(&backend),
        vec![("a".to_string(), 1), ("b".to_string(), 1)],
        "nothing starts after the interrupt, and nothing is retried"
    );
    for id in ["a", "b"] {
        let o = ran.events.outcome(id);
        assert_eq!(o.status, ItemStatus::Cancelled, "{id}: {}", o.error);
        assert_eq!(o.attempts, 1);
    }
    assert!(ran.summary.interrupted);
    assert_eq!(
        ran.summary.count(ItemStatus::Cancelled),
        4,
        "the two never started are counted too"
    );
    assert_eq!(ran.summary.total(), 4);
    assert!(
        ran.events
            .0
            .iter()
            .any(|e| matches!(e, Event::Interrupted { immediate: false }))
    );
    let snapshot = std::fs::read_to_string(dir.path().join("ws/team.json")).expect("team.json");
    assert!(
        snapshot.contains("\"state\": \"interrupted\""),
        "{snapshot}"
    );
}

#[tokio::test]
async fn an_item_whose_prerequisite_failed_is_skipped_and_never_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = Arc::new(Scripted::new(Step::completed()).script("a", vec![Step::failed("no")]));
    let ran = run_items(
        spec(dir.path(), 2, 0),
        vec![
            item("a", "do a", &[]),
            item("b", "do b", &["a"]),
            item("c", "do c", &["b"]),
            item("d", "do d", &[]),
        ],
        backend.clone(),
        None,
    )
    .await;
    let mut started = ids_started(&backend);
    started.sort();
    assert_eq!(started, vec![("a".to_string(), 1), ("d".to_string(), 1)]);
    let b = ran.events.outcome("b");
    assert_eq!(
        (b.status, b.error.as_str(), b.attempts),
        (
            ItemStatus::Skipped,
            "prerequisite a did not complete (failed)",
            0
        )
    );
    assert_eq!(ran.events.outcome("c").status, ItemStatus::Skipped);
    assert_eq!(ran.summary.count(ItemStatus::Skipped), 2);
    assert_eq!(ran.summary.count(ItemStatus::Failed), 1);
    assert_eq!(ran.summary.count(ItemStatus::Completed), 1);
}

#[tokio::test]
async fn the_summary_counts_each_final_status_and_lists_the_problems() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blocked = Step {
        report: Some(json!({"status": "blocked", "summary": "s", "blocker": "needs a key"})),
        ..Step::completed()
    };
    let backend = Arc::new(
        Scripted::new(Step::completed())
            .script("b", vec![Step::failed("no")])
            .script("c", vec![blocked])
            .script("d", vec![Step::completed().after(Duration::from_secs(60))]),
    );
    let mut spec = spec(dir.path(), 4, 0);
    spec.settings.timeout = Some(Duration::from_millis(300));
    let ran = run_items(
        spec,
        vec![
            item("a", "do a", &[]),
            item("b", "do b", &[]),
            item("c", "do c", &[]),
            item("d", "do d", &[]),
            item("e", "do e", &["b"]),
        ],
        backend,
        None,
    )
    .await;
    let s = &ran.summary;
    let counts: Vec<(ItemStatus, u64)> = s.counts.clone();
    assert_eq!(
        counts,
        vec![
            (ItemStatus::Completed, 1),
            (ItemStatus::Failed, 1),
            (ItemStatus::Blocked, 1),
            (ItemStatus::TimedOut, 1),
            (ItemStatus::Cancelled, 0),
            (ItemStatus::Skipped, 1),
        ]
    );
    assert!(!s.interrupted);
    let problems: Vec<(&str, ItemStatus)> = s
        .problems
        .iter()
        .map(|p| (p.id.as_str(), p.status))
        .collect();
    // In the batch's order, though d (timed out after 300 ms) ended after e (skipped at once).
    assert_eq!(
        problems,
        vec![
            ("b", ItemStatus::Failed),
            ("c", ItemStatus::Blocked),
            ("d", ItemStatus::TimedOut),
            ("e", ItemStatus::Skipped),
        ]
    );
    assert_eq!(ran.events.outcome("c").error, "blocked: needs a key");
    assert!(matches!(ran.events.0.last(), Some(Event::RunFinished(f)) if f.total() == 5));
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

#[tokio::test]
async fn a_rate_limited_attempt_is_made_again_after_the_pause_without_using_a_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limited = failing_with("rate_limited", Some(0.3));
    let backend = Arc::new(
        Scripted::new(Step::completed())
            .script("a", vec![limited.clone(), limited, Step::completed()]),
    );
    let started = std::time::Instant::now();
    let ran = run_items(
        spec(dir.path(), 2, 0),
        vec![item("a", "do a", &[]), item("b", "do b", &[])],
        backend.clone(),
        None,
    )
    .await;
    let a = ran.events.outcome("a");
    assert_eq!(
        (a.status, a.attempts),
        (ItemStatus::Completed, 3),
        "--retries 0, yet re-queued twice"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "waited out both pauses: {:?}",
        started.elapsed()
    );
    let paused = ran
        .events
        .0
        .iter()
        .filter(|e| matches!(e, Event::TeamPaused { .. }))
        .count();
    assert_eq!(paused, 2, "each rate limit pauses the team");
    assert_eq!(ran.summary.count(ItemStatus::Completed), 2);
}

#[tokio::test]
async fn a_rate_limit_past_rate_limit_wait_ends_the_item_rate_limited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 1, 3);
    s.settings.limits.rate_limit_wait = Duration::from_millis(500);
    let backend = Arc::new(Scripted::new(failing_with("rate_limited", Some(0.4))));
    let ran = run_items(s, vec![item("a", "do a", &[])], backend.clone(), None).await;
    let a = ran.events.outcome("a");
    assert_eq!(a.status, ItemStatus::Failed);
    assert_eq!(a.failure_kind, Some(FailureKind::RateLimited));
    assert!(
        a.error.starts_with("still rate limited after waiting"),
        "{}",
        a.error
    );
    assert_eq!(
        a.attempts, 2,
        "one pause of 0.4 s fits in 0.5 s, a second does not"
    );
}

#[tokio::test]
async fn an_auth_failure_stops_the_team_and_the_rest_are_skipped_with_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = Arc::new(Scripted::new(failing_with("auth", None)));
    let items: Vec<WorkItem> = (0..20).map(|n| item(&n.to_string(), "x", &[])).collect();
    let ran = run_items(spec(dir.path(), 2, 2), items, backend.clone(), None).await;
    let made = backend.seen().len();
    assert!(made <= 2, "one wave of attempts, no retries: {made}");
    assert_eq!(ran.summary.count(ItemStatus::Skipped), 20 - made as u64);
    let skipped = ran.events.outcome("19");
    assert_eq!(skipped.status, ItemStatus::Skipped);
    assert!(
        skipped.error.starts_with(
            "not started: authentication failed (the report says failed: auth from the API)"
        ),
        "{}",
        skipped.error
    );
    assert_eq!(
        ran.events.outcome("0").failure_kind,
        Some(FailureKind::Auth)
    );
}

#[tokio::test]
async fn max_fail_stops_starting_items_once_n_did_not_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 1, 0);
    s.settings.limits.max_fail = Some(crate::options::limits::MaxFail {
        count: 2,
        immediate: false,
    });
    let backend = Arc::new(Scripted::new(Step::failed("boom")));
    let items: Vec<WorkItem> = (0..6).map(|n| item(&n.to_string(), "x", &[])).collect();
    let ran = run_items(s, items, backend.clone(), None).await;
    assert_eq!(backend.seen().len(), 2);
    assert_eq!(ran.summary.count(ItemStatus::Failed), 2);
    assert_eq!(ran.summary.count(ItemStatus::Skipped), 4);
    assert!(
        ran.events
            .outcome("5")
            .error
            .contains("--max-fail 2 reached"),
        "{}",
        ran.events.outcome("5").error
    );
}

#[tokio::test]
async fn the_budget_stops_new_attempts_once_spent_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 1, 0);
    s.settings.limits.max_cost_usd = Some(1.0);
    // An exec agent says what it spent in its report.
    let costly = Step {
        report: Some(json!({"status": "completed", "summary": "did it", "cost_usd": 0.4})),
        ..Step::completed()
    };
    let backend = Arc::new(Scripted::new(costly));
    let items: Vec<WorkItem> = (0..6).map(|n| item(&n.to_string(), "x", &[])).collect();
    let ran = run_items(s, items, backend.clone(), None).await;
    // 0.4, 0.8, and no third (one at a time): 0.8 spent + 0.4 expected would pass $1.
    assert_eq!(backend.seen().len(), 2);
    assert_eq!(ran.summary.count(ItemStatus::Completed), 2);
    assert_eq!(ran.summary.count(ItemStatus::Skipped), 4);
    assert!(
        ran.events
            .outcome("5")
            .error
            .starts_with("not started: budget of $1 reached: spent $0.8"),
        "{}",
        ran.events.outcome("5").error
    );
}

#[tokio::test]
async fn max_fail_immediate_also_stops_the_running_teammates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 3, 0);
    s.settings.limits.max_fail = Some(crate::options::limits::MaxFail {
        count: 1,
        immediate: true,
    });
    // One fails at once; two work for a minute; the rest never start.
    let backend = Arc::new(
        Scripted::new(Step::completed().after(Duration::from_secs(60)))
            .script("0", vec![Step::failed("boom")]),
    );
    let items: Vec<WorkItem> = (0..6).map(|n| item(&n.to_string(), "x", &[])).collect();
    let started = std::time::Instant::now();
    let ran = run_items(s, items, backend.clone(), None).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the running ones were stopped, not waited for"
    );
    assert_eq!(ran.summary.count(ItemStatus::Failed), 1);
    assert_eq!(
        ran.summary.count(ItemStatus::Cancelled),
        2,
        "the two running"
    );
    assert_eq!(ran.summary.count(ItemStatus::Skipped), 3, "never started");
    assert_eq!(backend.seen().len(), 3);
    // The stopped ones say why: the limit, not an interrupt.
    for id in ["1", "2"] {
        let error = &ran.events.outcome(id).error;
        assert!(
            error.contains("stopped while running: --max-fail 1 reached"),
            "{id}: {error}"
        );
    }
}

// The decisions alone: `Dispatcher::handle` and `fill` called as plain functions.

/// A dispatcher over `spec` on a fresh team in `dir`, recording into `events`.
fn dispatcher<'a>(spec: RunSpec, team: &'a mut Team, events: &'a mut Events) -> Dispatcher<'a> {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let jobs = spec.settings.jobs;
    let gate = Arc::new(super::Gate::new(
        jobs,
        spec.settings.limits.clone(),
        super::Spent {
            usd: 0.0,
            costed: 0,
        },
        tx,
    ));
    let snapshot = crate::run::record::team::Snapshot::new(team, None, None);
    Dispatcher {
        spec: Arc::new(spec),
        team,
        reporter: events,
        gate,
        jobs,
        st: State::new(snapshot),
        running: Default::default(),
        waiting: Default::default(),
        source_done: false,
        source_error: None,
        interrupted: false,
        stopped_running: None,
        snapshot_failing: false,
    }
}

fn started(actions: &[Action]) -> Vec<(&str, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start(item, earlier) => Some((item.id.as_str(), earlier.first_attempt)),
            Action::Cancel(_) => None,
        })
        .collect()
}

fn finished(id: &str, status: ItemStatus) -> Input {
    Input::Unit(Event::ItemFinished(Box::new(Outcome::not_run(
        id,
        &format!("task-{id}"),
        &format!("item {id}"),
        status,
        "done".into(),
    ))))
}

#[test]
fn the_first_interrupt_stops_gracefully_the_second_at_once_and_nothing_more_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = spec(dir.path(), 1, 0);
    let mut team = Team::open(&s.team, &s.workspace).expect("team opens");
    let mut events = Events::default();
    let mut d = dispatcher(s, &mut team, &mut events);
    let mut items: crate::schedule::feed::Items = crate::schedule::feed::Items::Stream(Box::new(
        vec![item("a", "x", &[]), item("b", "x", &[])]
            .into_iter()
            .map(Ok),
    ));
    assert_eq!(started(&d.fill(&mut items).expect("fill")), [("a", 1)]);
    assert_eq!(
        d.handle(Input::Interrupt).expect("handle"),
        [Action::Cancel(Cancel::Graceful)]
    );
    assert!(
        d.fill(&mut items).expect("fill").is_empty(),
        "b is not started"
    );
    assert_eq!(
        d.handle(Input::Interrupt).expect("handle"),
        [Action::Cancel(Cancel::Immediate)]
    );
    assert!(!d.over().expect("over"), "a still runs");
    d.handle(finished("a", ItemStatus::Cancelled))
        .expect("handle");
    assert!(d.over().expect("over"));
}

#[test]
fn an_item_waits_for_its_prerequisite_and_starts_once_it_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = spec(dir.path(), 4, 0);
    let mut team = Team::open(&s.team, &s.workspace).expect("team opens");
    let mut events = Events::default();
    let mut d = dispatcher(s, &mut team, &mut events);
    let mut items: crate::schedule::feed::Items = crate::schedule::feed::Items::Stream(Box::new(
        vec![
            item("b", "x", &["a"]),
            item("a", "x", &[]),
            item("c", "x", &["a"]),
        ]
        .into_iter()
        .map(Ok),
    ));
    assert_eq!(started(&d.fill(&mut items).expect("fill")), [("a", 1)]);
    assert!(
        d.handle(finished("a", ItemStatus::Completed))
            .expect("handle")
            .is_empty()
    );
    // Waiting ones start in input order.
    assert_eq!(
        started(&d.fill(&mut items).expect("fill")),
        [("b", 1), ("c", 1)]
    );
}

#[test]
fn max_fail_immediate_cancels_the_running_and_their_outcomes_say_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(dir.path(), 2, 0);
    s.settings.limits.max_fail = Some(crate::options::limits::MaxFail {
        count: 1,
        immediate: true,
    });
    let mut team = Team::open(&s.team, &s.workspace).expect("team opens");
    let mut events = Events::default();
    {
        let mut d = dispatcher(s, &mut team, &mut events);
        let mut items: crate::schedule::feed::Items =
            crate::schedule::feed::Items::Stream(Box::new(
                vec![
                    item("a", "x", &[]),
                    item("b", "x", &[]),
                    item("c", "x", &[]),
                ]
                .into_iter()
                .map(Ok),
            ));
        assert_eq!(
            started(&d.fill(&mut items).expect("fill")),
            [("a", 1), ("b", 1)]
        );
        assert_eq!(
            d.handle(finished("a", ItemStatus::Failed)).expect("handle"),
            [Action::Cancel(Cancel::Graceful)]
        );
        d.handle(finished("b", ItemStatus::Cancelled))
            .expect("handle");
        assert!(started(&d.fill(&mut items).expect("fill")).is_empty());
        assert!(d.over().expect("over"));
    }
    assert!(
        events
            .outcome("b")
            .error
            .starts_with("stopped while running: --max-fail 1 reached"),
        "{}",
        events.outcome("b").error
    );
    assert!(
        events
            .outcome("c")
            .error
            .starts_with("not started: --max-fail 1 reached"),
        "{}",
        events.outcome("c").error
    );
}

#[test]
fn a_crashed_unit_leaves_its_item_failed_not_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = spec(dir.path(), 1, 0);
    let mut team = Team::open(&s.team, &s.workspace).expect("team opens");
    let mut events = Events::default();
    {
        let mut d = dispatcher(s, &mut team, &mut events);
        let mut items: crate::schedule::feed::Items = crate::schedule::feed::Items::Stream(
            Box::new(vec![item("a", "x", &[])].into_iter().map(Ok)),
        );
        assert_eq!(started(&d.fill(&mut items).expect("fill")), [("a", 1)]);
        d.handle(Input::Crashed(Some(item("a", "x", &[]))))
            .expect("handle");
        // As the loop does after each input: the source is found to be at its end.
        assert!(d.fill(&mut items).expect("fill").is_empty());
        assert!(d.over().expect("over"));
    }
    assert_eq!(events.outcome("a").status, ItemStatus::Failed);
    assert!(events.outcome("a").error.contains("supervisor crashed"));
    // The journal has it too: a resume will not lose it.
    drop(team);
    // A child another test forks in this instant holds the lock's descriptor until its exec
    // (close-on-exec): the lock is free once it has.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let reopened = loop {
        match Team::open("t", &dir.path().join("ws")) {
            Ok(t) => break t,
            Err(e) => {
                assert!(std::time::Instant::now() < until, "team reopens: {e:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    assert_eq!(
        reopened.ledger().get("a").map(|f| f.status),
        Some(ItemStatus::Failed)
    );
}
