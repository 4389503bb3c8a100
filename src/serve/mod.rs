//! The live page (`runner serve`, `--serve`): a read-only web page of one or more teams that
//! follows their journals as they grow.
//!
//! - `mod` (here): the server's life — the listener on 127.0.0.1 (a free port unless one is
//!   given), the random token in its URL, the thread that serves and the one that tails the
//!   journals.
//! - `guard`: every request's checks (the token, `Host`, `Origin`) and the headers every
//!   answer carries (a strict Content-Security-Policy, no referrer, no caching).
//! - `routes`: the page (`templates/live.html`) and its JSON and server-sent-event routes.
//! - `team`: one team's bounded state (a short row per item, the banner).
//! - `line`: a journal line read as the page needs it, and the patch it sends for it.
//! - `item`: one item's attempts, report and log tail, read when the page asks.
//!
//! No route changes anything: every one is a `GET` that reads the workspace, and files are
//! opened only beneath it, following no link ([`crate::fsutil::open_beneath_no_links`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

mod guard;
mod item;
pub(crate) mod line;
mod routes;
pub(crate) mod team;

use team::TeamState;

/// How often the journals are looked at for new lines.
const TAIL_EVERY: Duration = Duration::from_millis(100);

/// What every route shares.
pub(crate) struct Shared {
    /// The random token every request must carry (`?token=`), 32 hex digits.
    token: String,
    /// The port listened on (the `Host` a request must name).
    port: u16,
    /// The served teams, in the order given.
    teams: Vec<Mutex<TeamState>>,
    /// Bumped each time a journal grew: the event streams wait on it.
    grew: tokio::sync::watch::Sender<u64>,
}

/// The file in a served run's workspace that names its live page (`runner status` shows
/// it): `{"url": …, "pid": …}`, private to the user (the URL holds the token), removed when
/// the page goes.
pub(crate) const ANNOUNCED: &str = "live-page.json";

/// The live page's URL `workspace` announces, if the process serving it is alive.
pub(crate) fn announced(workspace: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(workspace.join(ANNOUNCED)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(v["pid"].as_u64()?).ok()?;
    crate::run::record::team::alive(pid)
        .then(|| v["url"].as_str().map(str::to_owned))
        .flatten()
}

impl Shared {
    /// Team `n`'s state, locked (a poisoned lock still holds a usable state: read-only
    /// rows).
    fn team(&self, n: usize) -> Option<std::sync::MutexGuard<'_, TeamState>> {
        let m = self.teams.get(n)?;
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A running live page: its URL, served until this is dropped (or, with [`Live::wait`],
/// for good).
pub(crate) struct Live {
    /// `http://127.0.0.1:PORT/?token=…`: the page, with its token.
    pub url: String,
    stop: Arc<AtomicBool>,
    /// The workspace whose [`ANNOUNCED`] file names this page (removed when it goes).
    announce: Option<PathBuf>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Live {
    /// Serve until the process ends (`runner serve`).
    pub(crate) fn wait(mut self) {
        if let Some(t) = self.server.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(ws) = &self.announce {
            let _ = std::fs::remove_file(ws.join(ANNOUNCED));
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.server.take() {
            let _ = t.join();
        }
    }
}

/// A new random token: 16 random bytes as hex.
fn token() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Start serving the teams whose workspaces are `dirs` (a journal that does not exist yet
/// is waited for) on 127.0.0.1, port `port` or a free one. What the journals hold already is
/// read before this returns, so the first page is whole. With `announce` (one run's page),
/// the first workspace gets an [`ANNOUNCED`] file once its journal exists.
///
/// Errors: the port cannot be listened on (taken, or not allowed), or the server's thread
/// cannot start (exit 3).
pub(crate) fn start(dirs: &[PathBuf], port: Option<u16>, announce: bool) -> Result<Live> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).map_err(|e| {
        Error::Environment(format!(
            "cannot listen on 127.0.0.1:{} for the live page: {e}{}",
            port.unwrap_or(0),
            if port.is_some() {
                "; choose another --port, or leave it out for a free one"
            } else {
                ""
            }
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Environment(format!("the live page's socket: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Environment(format!("the live page's socket: {e}")))?
        .port();
    let mut teams = Vec::new();
    for dir in dirs {
        let mut t = TeamState::new(dir);
        // Read what is there already (in chunks, as the tailer does).
        while t.catch_up().unwrap_or(false) {}
        teams.push(Mutex::new(t));
    }
    let (grew, _) = tokio::sync::watch::channel(0);
    let token = token();
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    let shared = Arc::new(Shared {
        token,
        port,
        teams,
        grew,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let announce = dirs.first().filter(|_| announce).cloned();
    let note = announce.clone().map(|ws| (ws, url.clone()));
    tail(shared.clone(), stop.clone(), note);
    let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = routes::router(shared);
    let server = std::thread::Builder::new()
        .name("live-page".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                // Not a graceful shutdown: that would wait for every event stream, and a
                // stream ends only when its browser goes.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
            // Event streams never end by themselves: do not wait for them.
            rt.shutdown_timeout(Duration::from_millis(100));
        })
        .map_err(|e| Error::Environment(format!("cannot start the live page's thread: {e}")))?;
    Ok(Live {
        url,
        stop,
        announce,
        shutdown: Some(shutdown),
        server: Some(server),
    })
}

/// The tailer: one thread that reads what each journal gained and wakes the event streams;
/// with `note` (a workspace and the URL), it writes the [`ANNOUNCED`] file there once the
/// run's journal exists.
fn tail(shared: Arc<Shared>, stop: Arc<AtomicBool>, mut note: Option<(PathBuf, String)>) {
    let spawned = std::thread::Builder::new()
        .name("live-tail".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some((ws, url)) = &note
                    && ws.join("journal.jsonl").exists()
                {
                    let v = serde_json::json!({"url": url, "pid": std::process::id()});
                    let _ = crate::fsutil::write_atomic_private(
                        &ws.join(ANNOUNCED),
                        v.to_string().as_bytes(),
                    );
                    note = None;
                }
                let mut grew = false;
                for n in 0..shared.teams.len() {
                    if let Some(mut t) = shared.team(n) {
                        grew |= t.catch_up().unwrap_or(false);
                    }
                }
                if grew {
                    shared.grew.send_modify(|g| *g += 1);
                } else {
                    std::thread::sleep(TAIL_EVERY);
                }
            }
        });
    if let Err(e) = spawned {
        crate::shown::warn(format!(
            "the live page will not follow the journal (no thread: {e})"
        ));
    }
}
