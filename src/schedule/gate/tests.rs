//! The gate's policy: pauses, the AIMD limit, its probes and overflows, stops.

use super::*;
use crate::options::limits::MaxFail;

fn verdict(kind: FailureKind, retry_after_s: Option<f64>) -> Verdict {
    let mut v = Verdict::not_completed(ItemStatus::Failed, Some(kind), format!("{kind} text"));
    v.retry_after_s = retry_after_s;
    v
}

fn gate(jobs: usize, limits: Limits) -> (Arc<Gate>, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Gate::new(jobs, limits, Spent::default(), tx)), rx)
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_pauses_everyone_halves_the_limit_and_successes_win_it_back() {
    let (g, mut rx) = gate(8, Limits::default());
    let p = g.admit().await.expect("open");
    let q = g.admit().await.expect("open");
    let limited = verdict(FailureKind::RateLimited, Some(30.0));
    assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    assert_eq!(g.view().limit, 4);
    assert_eq!(
        q.ended("i", &limited, None, Duration::ZERO),
        After::Requeue,
        "the same burst"
    );
    assert_eq!(g.view().limit, 4, "halved once per burst");
    let Ok(Event::TeamPaused {
        limit: 4, until, ..
    }) = rx.try_recv()
    else {
        panic!("a team_paused event with limit 4");
    };
    // Milliseconds, like every `at` (not jiff's nanoseconds).
    let fraction = until
        .trim_end_matches('Z')
        .split_once('.')
        .map_or(0, |(_, f)| f.len());
    assert!(
        until.parse::<jiff::Timestamp>().is_ok() && fraction <= 3,
        "{until}"
    );
    let started = tokio::time::Instant::now();
    let p = g.admit().await.expect("after the pause");
    assert!(
        started.elapsed() >= Duration::from_secs(30),
        "waited out the pause"
    );
    drop(p);
    succeed(&g, 7);
    assert_eq!(g.view().limit, 4);
    succeed(&g, 1);
    assert_eq!(
        g.view().limit,
        5,
        "+1 after two rounds of the limit: 2 × 4 successes"
    );

    // The step up to 5 is a probe. Its successes left credit (one per success, up to the
    // limit: 4): that many rate limits are overflows — only that attempt waits, the limit
    // stands, the team goes on.
    let limited = verdict(FailureKind::RateLimited, Some(1.0));
    let wait = After::Wait(Duration::from_secs(1));
    for _ in 0..4 {
        assert_eq!(g.ended("i", &limited, None, Duration::ZERO), wait);
    }
    assert_eq!(g.view().limit, 5);
    // The credit spent, the probe failed: back to 4 without pausing the team (only that
    // attempt waits), and the next probe waits twice the rounds.
    assert_eq!(g.ended("i", &limited, None, Duration::ZERO), wait);
    assert_eq!(g.view().limit, 4);
    assert_eq!(g.pause_left(), Duration::ZERO, "the team goes on");
    succeed(&g, 15);
    assert_eq!(g.view().limit, 4);
    succeed(&g, 1);
    assert_eq!(g.view().limit, 5, "probed again after 4 × 4 successes");
    // A probe that holds (a run of successes at 5) is proven, and the next one steps to 6;
    // failing, it steps back to 5, not below.
    succeed(&g, 20);
    assert_eq!(g.view().limit, 6);
    for _ in 0..5 {
        assert_eq!(g.ended("i", &limited, None, Duration::ZERO), wait);
    }
    assert_eq!(g.ended("i", &limited, None, Duration::ZERO), wait);
    assert_eq!(g.view().limit, 5);
    // Not probing, no credit: a rate limit is the provider's, and pauses the team again.
    assert_eq!(g.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    assert!(g.pause_left() > Duration::ZERO);
}

/// `n` attempts admitted now end completed.
fn succeed(g: &Gate, n: usize) {
    for _ in 0..n {
        g.ended("i", &Verdict::completed(), None, Duration::ZERO);
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_burst_the_limit_is_what_the_server_served_of_it() {
    // Eight start against a server that serves two: six rate limits, two served. The
    // limit is halved at once (4) and, the burst over, falls to the two it served.
    let (g, _rx) = gate(8, Limits::default());
    let permits = futures_admit(&g, 8).await;
    let limited = verdict(FailureKind::RateLimited, Some(1.0));
    let mut permits = permits.into_iter();
    for p in permits.by_ref().take(6) {
        assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    }
    assert_eq!(g.view().limit, 4);
    let p = permits.next().expect("7");
    p.ended("i", &Verdict::completed(), None, Duration::ZERO);
    assert_eq!(g.view().limit, 4, "one of the burst still runs");
    let p = permits.next().expect("8");
    p.ended("i", &Verdict::completed(), None, Duration::ZERO);
    assert_eq!(g.view().limit, 2);
    assert!(g.pause_left() > Duration::ZERO, "the pause stands");
    // Its successes ran at the old limit: no credit, the next rate limit is the
    // provider's.
    assert_eq!(g.ended("i", &limited, None, Duration::ZERO), After::Requeue);

    // One rate limit among eight, seven served: the limit does not fall below the seven
    // the server served at once (halving would say 4).
    let (g, _rx) = gate(8, Limits::default());
    let mut permits = futures_admit(&g, 8).await.into_iter();
    let first = permits.next().expect("1");
    assert_eq!(
        first.ended("i", &limited, None, Duration::ZERO),
        After::Requeue
    );
    assert_eq!(g.view().limit, 4);
    for p in permits {
        p.ended("i", &Verdict::completed(), None, Duration::ZERO);
    }
    assert_eq!(g.view().limit, 7);
}

#[tokio::test(start_paused = true)]
async fn rate_limits_a_probe_met_at_once_step_it_back_only_once() {
    let (g, _rx) = gate(8, Limits::default());
    // Down to 4 (a burst the server served none of), then up to 5: a probe.
    let p = g.admit().await.expect("open");
    let limited = verdict(FailureKind::RateLimited, Some(1.0));
    assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    let _ = g.admit().await.expect("after the pause");
    succeed(&g, 8);
    assert_eq!(g.view().limit, 5);
    // Its credit spent by overflows, three attempts admitted during the probe meet a
    // rate limit together: one step back, to 4, not 3 or 2; each waits alone.
    for _ in 0..4 {
        g.ended("i", &limited, None, Duration::ZERO);
    }
    let three = futures_admit(&g, 3).await;
    for p in three {
        assert_eq!(
            p.ended("i", &limited, None, Duration::ZERO),
            After::Wait(Duration::from_secs(1))
        );
        assert_eq!(g.view().limit, 4);
    }
    assert_eq!(g.pause_left(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn an_overflow_interrupts_the_run_of_successes_a_step_up_needs() {
    let (g, _rx) = gate(8, Limits::default());
    let limited = verdict(FailureKind::RateLimited, Some(1.0));
    // At --jobs, before any rate limit, successes give no credit: the first rate limit
    // is the server's limit met, and pauses the team.
    succeed(&g, 3);
    let p = g.admit().await.expect("open");
    assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    let (g, _rx) = gate(8, Limits::default());
    let p = g.admit().await.expect("open");
    assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
    let _ = g.admit().await.expect("after the pause");
    assert_eq!(g.view().limit, 4);
    succeed(&g, 7);
    assert_eq!(
        g.ended("i", &limited, None, Duration::ZERO),
        After::Wait(Duration::from_secs(1)),
        "an overflow"
    );
    succeed(&g, 7);
    assert_eq!(g.view().limit, 4, "no run of 8 successes yet");
    succeed(&g, 1);
    assert_eq!(g.view().limit, 5);
}

#[tokio::test(start_paused = true)]
async fn no_more_than_the_limit_run_at_once() {
    let (g, _rx) = gate(2, Limits::default());
    let a = g.admit().await.expect("1");
    let _b = g.admit().await.expect("2");
    let g2 = g.clone();
    let third = tokio::spawn(async move { g2.admit().await.map(|_| ()) });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!third.is_finished(), "a third waits");
    assert_eq!(g.view().waiting, 1);
    drop(a);
    third.await.expect("join").expect("admitted once one ended");
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_past_the_wait_budget_is_final() {
    let limits = Limits {
        rate_limit_wait: Duration::from_secs(60),
        ..Limits::default()
    };
    let (g, _rx) = gate(4, limits);
    let v = verdict(FailureKind::RateLimited, Some(50.0));
    assert_eq!(
        g.ended("i", &v, None, Duration::from_secs(20)),
        After::Final
    );
    assert_eq!(g.ended("i", &v, None, Duration::ZERO), After::Requeue);
}

#[tokio::test(start_paused = true)]
async fn auth_and_a_long_quota_stop_the_team_a_short_quota_waits() {
    let (g, mut rx) = gate(4, Limits::default());
    let short = verdict(FailureKind::Quota, Some(120.0));
    assert_eq!(g.ended("i", &short, None, Duration::ZERO), After::Requeue);
    assert!(g.stopped().is_none());
    let long = verdict(FailureKind::Quota, Some(86_400.0));
    assert_eq!(g.ended("i", &long, None, Duration::ZERO), After::Final);
    assert_eq!(g.stopped().as_deref(), Some("quota exhausted: quota text"));
    assert_eq!(
        g.admit().await.map(|_| ()),
        Err("quota exhausted: quota text".into())
    );
    let (g, _) = gate(4, Limits::default());
    assert_eq!(
        g.ended("i", &verdict(FailureKind::Auth, None), None, Duration::ZERO),
        After::Final
    );
    assert_eq!(
        g.stopped().as_deref(),
        Some("authentication failed (auth text)")
    );
    let stops = std::iter::from_fn(|| rx.try_recv().ok())
        .filter(|e| matches!(e, Event::TeamStopped { .. }))
        .count();
    assert_eq!(stops, 1);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_rate_limits_without_a_named_wait_pauses_once_not_ever_longer() {
    let (g, mut rx) = gate(8, Limits::default());
    let permits: Vec<Permit> = futures_admit(&g, 8).await;
    let unnamed = verdict(FailureKind::RateLimited, None);
    for p in permits {
        assert_eq!(p.ended("i", &unnamed, None, Duration::ZERO), After::Requeue);
    }
    let left = g.pause_left();
    assert!(
        left <= Duration::from_millis(2500),
        "one back-off of about 2 s for the wave, not 2^8: {left:?}"
    );
    let pauses = std::iter::from_fn(|| rx.try_recv().ok())
        .filter(|e| matches!(e, Event::TeamPaused { .. }))
        .count();
    assert_eq!(pauses, 1, "one pause for the wave");
}

/// Admit `n` attempts at once.
async fn futures_admit(g: &Arc<Gate>, n: usize) -> Vec<Permit> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(g.admit().await.expect("open"));
    }
    out
}

#[tokio::test(start_paused = true)]
async fn the_first_set_up_failures_stop_the_team_but_not_after_the_set_up_worked() {
    let (g, _rx) = gate(8, Limits::default());
    let setup = verdict(FailureKind::Setup, None);
    // One item's retries are one item: they do not stop the team.
    for _ in 0..SETUP_STOP + 1 {
        assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Judged);
    }
    // Nor do items failing each in its own words (a row's own missing file).
    let mut own = verdict(FailureKind::Setup, None);
    own.reason = "no such file: row b".into();
    assert_eq!(g.ended("b", &own, None, Duration::ZERO), After::Judged);
    assert!(g.stopped().is_none());
    // A second item failing the same way, after 4 such attempts of the first: stopped.
    assert_eq!(g.ended("c", &setup, None, Duration::ZERO), After::Final);
    let why = g.stopped().expect("stopped");
    assert!(
        why.starts_with("set-up failure: the first 5 attempts (2 items) failed the same way before any attempt got further (setup text)"),
        "{why}"
    );
    // Two items' first attempts are not yet enough; a third attempt is.
    let (g, _rx) = gate(8, Limits::default());
    assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Judged);
    assert_eq!(g.ended("b", &setup, None, Duration::ZERO), After::Judged);
    assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Final);
    // Once an attempt ended otherwise the set-up works: later set-up failures (an
    // endpoint going down mid-run) are judged one by one.
    let (g, _rx) = gate(8, Limits::default());
    g.ended("x", &Verdict::completed(), None, Duration::ZERO);
    for item in ["a", "b", "c", "d", "e"] {
        assert_eq!(g.ended(item, &setup, None, Duration::ZERO), After::Judged);
    }
    assert!(g.stopped().is_none());
}

#[tokio::test(start_paused = true)]
async fn the_budget_counts_the_expected_cost_of_running_attempts() {
    let limits = Limits {
        max_cost_usd: Some(1.0),
        ..Limits::default()
    };
    let (g, _rx) = gate(4, limits);
    let a = g.admit().await.expect("nothing spent yet");
    g.ended("i", &Verdict::completed(), Some(0.4), Duration::ZERO);
    drop(a);
    // 0.4 spent + 0.4 expected for this one = 0.8 ≤ 1.0
    let _b = g.admit().await.expect("0.4 spent, 0 running");
    // 0.4 + 0.4 for the running one + 0.4 for this one = 1.2 > 1.0
    let e = g.admit().await.map(|_| ()).expect_err("over budget");
    assert_eq!(e, "budget of $1 reached: spent $0.4");
}

#[tokio::test(start_paused = true)]
async fn max_fail_stops_after_n_items_and_says_when_to_cancel() {
    let limits = Limits {
        max_fail: Some(MaxFail {
            count: 2,
            immediate: true,
        }),
        ..Limits::default()
    };
    let (g, _rx) = gate(4, limits);
    assert!(!g.item_finished(ItemStatus::Failed));
    assert!(!g.item_finished(ItemStatus::Skipped), "skips do not count");
    assert!(g.stopped().is_none());
    assert!(g.item_finished(ItemStatus::TimedOut));
    assert_eq!(
        g.stopped().as_deref(),
        Some("--max-fail 2 reached: 2 item(s) did not complete")
    );
}

/// A fleet's limit for the tests: `free` slots granted at once, the others left waiting;
/// each ended attempt's ending noted and answered with `word`.
#[derive(Debug)]
struct Fleet {
    free: Mutex<usize>,
    word: Mutex<shared::Word>,
    waiting: Mutex<Vec<tokio::sync::oneshot::Sender<Slot>>>,
    ended: Mutex<Vec<shared::Ending>>,
}

impl shared::SharedLimit for Fleet {
    fn acquire(&self) -> tokio::sync::oneshot::Receiver<Slot> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut free = self.free.lock().expect("free");
        if *free > 0 {
            *free -= 1;
            let _ = tx.send(Slot {
                token: "t".into(),
                version: 3,
                limit: 1,
            });
        } else {
            self.waiting.lock().expect("waiting").push(tx);
        }
        rx
    }

    fn end(&self, _: Slot, ending: shared::Ending) -> tokio::sync::oneshot::Receiver<shared::Word> {
        self.ended.lock().expect("ended").push(ending);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = tx.send(*self.word.lock().expect("word"));
        rx
    }
}

fn fleet(free: usize, limited: Option<Limited>) -> Arc<Fleet> {
    Arc::new(Fleet {
        free: Mutex::new(free),
        word: Mutex::new(shared::Word { limited, limit: 1 }),
        waiting: Mutex::new(Vec::new()),
        ended: Mutex::new(Vec::new()),
    })
}

#[tokio::test(start_paused = true)]
async fn with_a_fleet_s_limit_an_attempt_starts_only_with_a_slot_and_the_fleet_decides() {
    let (g, _rx) = gate(8, Limits::default());
    let f = fleet(1, Some(Limited::Pause { first: true }));
    g.share_limit(f.clone());
    let p = g.admit().await.expect("a slot");
    assert_eq!(g.view().limit, 1, "the fleet's limit shown");
    // Below --jobs, but the fleet has no slot free: the next attempt waits for one.
    let g2 = g.clone();
    let second = tokio::spawn(async move { g2.admit().await.map(|_| ()) });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!second.is_finished(), "waits for the fleet's slot");
    // The fleet says the rate limit was the first of a burst: the team pauses; this gate's
    // own limit does not move (the fleet's does).
    let limited = verdict(FailureKind::RateLimited, Some(30.0));
    assert_eq!(
        p.end("i", &limited, None, Duration::ZERO).await,
        After::Requeue
    );
    assert!(g.pause_left() > Duration::ZERO);
    assert_eq!(g.view().limit, 1);
    // An overflow in the fleet's word: only that attempt waits.
    *f.word.lock().expect("word") = shared::Word {
        limited: Some(Limited::Alone),
        limit: 2,
    };
    *f.free.lock().expect("free") = 1;
    tokio::time::sleep(Duration::from_secs(31)).await;
    let p = g.admit().await.expect("after the pause");
    assert_eq!(
        p.end("i", &limited, None, Duration::ZERO).await,
        After::Wait(Duration::from_secs(30))
    );
    // Successes move nothing here: the fleet counts them.
    *f.free.lock().expect("free") = 20;
    for _ in 0..20 {
        let p = g.admit().await.expect("a slot");
        p.end("i", &Verdict::completed(), None, Duration::ZERO)
            .await;
    }
    assert_eq!(
        g.view().limit,
        2,
        "the fleet's, not a step up of this gate's"
    );
    let ended = f.ended.lock().expect("ended").clone();
    assert_eq!(
        &ended[..2],
        &[shared::Ending::Limited, shared::Ending::Limited]
    );
    assert!(ended[2..].iter().all(|e| *e == shared::Ending::Served));
    // A slot granted to an attempt no longer waiting goes back (dropped, not counted).
    second.abort();
    let _ = second.await;
}

#[tokio::test(start_paused = true)]
async fn a_fleet_that_does_not_answer_leaves_the_attempt_to_its_own_gate() {
    let (g, _rx) = gate(2, Limits::default());
    let f = fleet(0, None);
    g.share_limit(f.clone());
    // Its request dropped unanswered (the server down): admitted by --jobs alone.
    let g2 = g.clone();
    let first = tokio::spawn(async move { g2.admit().await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(10)).await;
    f.waiting.lock().expect("waiting").clear();
    assert!(first.await.expect("joined").is_ok());
}
