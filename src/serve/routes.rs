//! The live page's routes (all `GET`, all behind [`super::guard::check`]; `team` is the
//! served team's number, 0 first):
//!
//! | route | answer |
//! |---|---|
//! | `/` | the page (`templates/live.html`) |
//! | `/api/teams` | the served teams: `[{n, team, workspace}]` |
//! | `/api/summary?team=N` | the banner ([`super::team::Summary`]) |
//! | `/api/rows?team=N&status=&kind=&q=&sort=&desc=&start=&size=` | one page of the table ([`super::team::Rows`]) |
//! | `/api/events?team=N&from=OFFSET` | server-sent events, one per journal line after `OFFSET` (or after the `Last-Event-ID` header's, which a reconnecting browser sends): the line's patch ([`super::line::Patch`]) as data, the journal offset just past the line as id |
//! | `/api/item?team=N&id=ID` | one item's attempts, report and log ([`super::item`]) |
//! | `/api/log?team=N&id=ID&attempt=K&from=BYTE` | a piece of its log, from `BYTE` (default: the last 16 KiB) |
//!
//! The polling fallback is `/api/summary` and `/api/rows` asked again (the page does so when
//! its event stream fails).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;

use super::Shared;
use super::line::Line;
use super::team::{RowQuery, read_lines};

/// The page, compiled into the binary.
const PAGE: &str = include_str!("../../templates/live.html");

/// Most journal bytes an event stream reads at once.
const STREAM_CHUNK: u64 = 256 << 10;

/// The router, every route behind the guard.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/teams", get(teams))
        .route("/api/summary", get(summary))
        .route("/api/rows", get(rows))
        .route("/api/events", get(events))
        .route("/api/item", get(super::item::item))
        .route("/api/log", get(super::item::log))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            super::guard::check,
        ))
        .with_state(shared)
}

/// Which team a request is about.
#[derive(Debug, Deserialize)]
pub(crate) struct TeamQuery {
    /// The team's number (0 first).
    #[serde(default)]
    pub team: usize,
}

/// 404 with a reason.
pub(crate) fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("404 Not Found: {what}\n")).into_response()
}

/// A fresh nonce for the page's script.
fn nonce() -> String {
    use base64::Engine;
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `/`: the page, its script allowed by a nonce new for each answer.
async fn page(State(shared): State<Arc<Shared>>) -> Response {
    let nonce = nonce();
    let title = match shared.team(0) {
        Some(t) if shared.teams.len() == 1 => format!("Team {}", t.summary().team),
        _ => format!("{} teams", shared.teams.len()),
    };
    let body = PAGE
        .replace("{{ nonce }}", &nonce)
        .replace("{{ token }}", &shared.token)
        .replace("{{ title }}", &crate::ui::html::escape(&title));
    let csp = format!(
        "default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut r = Html(body).into_response();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}

/// `/api/teams`.
async fn teams(State(shared): State<Arc<Shared>>) -> Response {
    let list: Vec<_> = (0..shared.teams.len())
        .filter_map(|n| {
            let t = shared.team(n)?;
            let s = t.summary();
            Some(serde_json::json!({"n": n, "team": s.team, "workspace": s.workspace}))
        })
        .collect();
    Json(list).into_response()
}

/// `/api/summary`.
async fn summary(State(shared): State<Arc<Shared>>, Query(q): Query<TeamQuery>) -> Response {
    match shared.team(q.team) {
        Some(t) => Json(t.summary()).into_response(),
        None => not_found("no such team"),
    }
}

/// `/api/rows`.
async fn rows(State(shared): State<Arc<Shared>>, Query(q): Query<RowQuery>) -> Response {
    match shared.team(q.team) {
        Some(t) => Json(t.rows(&q)).into_response(),
        None => not_found("no such team"),
    }
}

/// The query of `/api/events`.
#[derive(Debug, Deserialize)]
struct EventsQuery {
    #[serde(default)]
    team: usize,
    /// The journal offset to follow from (default: now).
    from: Option<u64>,
}

/// An event stream's progress through one journal.
struct Follow {
    journal: PathBuf,
    /// Where the next read starts.
    at: u64,
    /// Events read and not sent yet.
    ready: VecDeque<SseEvent>,
    grew: tokio::sync::watch::Receiver<u64>,
}

impl Follow {
    /// Read what the journal gained into `ready`; whether it had anything.
    fn read(&mut self) -> bool {
        // A replaced journal is followed from its start.
        if super::team::shrank(&self.journal, self.at) {
            self.at = 0;
        }
        let ready = &mut self.ready;
        let to = read_lines(&self.journal, self.at, STREAM_CHUNK, |bytes, end| {
            let Some(line) = Line::parse(bytes) else {
                return;
            };
            let data = serde_json::to_string(&line.patch()).unwrap_or_default();
            ready.push_back(SseEvent::default().id(end.to_string()).data(data));
        });
        match to {
            Ok(to) if to > self.at => {
                self.at = to;
                true
            }
            _ => false,
        }
    }
}

/// `/api/events`: the journal's lines from the browser's `Last-Event-ID` (a reconnect), else
/// from `from`, else from now; each line once, in order.
async fn events(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let Some((journal, now)) = shared
        .team(q.team)
        .map(|t| (t.journal().to_owned(), t.offset()))
    else {
        return not_found("no such team");
    };
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let follow = Follow {
        journal,
        at: last.or(q.from).unwrap_or(now),
        ready: VecDeque::new(),
        grew: shared.grew.subscribe(),
    };
    Sse::new(stream(follow))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The events of `follow`, for as long as the browser listens.
fn stream(follow: Follow) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures_util::stream::unfold(follow, |mut f| async move {
        loop {
            if let Some(e) = f.ready.pop_front() {
                return Some((Ok(e), f));
            }
            if !f.read() {
                // Wait for the tailer to see growth (or look again in a while: a journal
                // another process appends to is what the tailer reads too).
                let woke = tokio::time::timeout(Duration::from_secs(1), f.grew.changed()).await;
                if let Ok(Err(_)) = woke {
                    // The server is stopping.
                    return None;
                }
            }
        }
    })
}
