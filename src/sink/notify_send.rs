//! Delivering notifications ([`super::notify`]) on a thread of their own: what waits is a
//! fixed-size [`Pending`] record (the first blocked items of a wave and their count, the
//! team's stop, the end), so the run never waits on a receiver and nothing grows while one
//! is slow. Each notification goes to every target in turn: a webhook gets a JSON POST,
//! retried [`ATTEMPTS`] times with a doubling pause when it answers 5xx or 429 or cannot be
//! reached; a command gets the JSON on its stdin and [`COMMAND_TIME`] to end. What fails is
//! returned as warnings, each naming the target with its URL redacted.

use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::options::notify::NotifyTarget;

/// How long after the first blocked item the others of its wave are gathered into its
/// one notification (each kind is told once per run; the end names every count).
pub(crate) const WAVE: Duration = Duration::from_secs(10);
/// Tries of one webhook request (the first and the retries).
pub(crate) const ATTEMPTS: u32 = 3;
/// The pause before the first retry of a webhook request, doubled for each next one.
const BACKOFF: Duration = Duration::from_secs(1);
/// One webhook request's time limit (connecting included).
const REQUEST_TIME: Duration = Duration::from_secs(5);
/// How long a notify command may run before it is ended.
const COMMAND_TIME: Duration = Duration::from_secs(10);

/// What waits to be delivered: written by the sink under the lock, taken by the thread.
#[derive(Default)]
pub(crate) struct Pending {
    /// The blocked items of the wave not told yet (at most the listed number).
    blocked: Vec<Value>,
    /// How many items the wave has.
    blocked_count: u64,
    /// When the wave's first item came.
    wave_from: Option<Instant>,
    /// The wave was told: later blocked items are counted by the end only.
    blocked_told: bool,
    /// The team's stop, not told yet.
    stopped: Option<Value>,
    /// The stop was noted (once per run).
    stop_noted: bool,
    /// The end, once the run hands it over.
    pub end: Option<Value>,
    /// Nothing more will come: tell what waits, then end the thread.
    pub closed: bool,
}

impl Pending {
    /// An item ended blocked (`item`: its id, title, blocker), kept when fewer than
    /// `listed` are.
    pub(crate) fn block(&mut self, item: Value, listed: usize) {
        if self.blocked_told {
            return;
        }
        self.blocked_count += 1;
        self.wave_from.get_or_insert_with(Instant::now);
        if self.blocked.len() < listed {
            self.blocked.push(item);
        }
    }

    /// The team stopped itself (the first stop only).
    pub(crate) fn stop(&mut self, notice: Value) {
        if !self.stop_noted {
            self.stop_noted = true;
            self.stopped = Some(notice);
        }
    }

    /// The next notification due now, or when to look again (`None`: when woken).
    fn due(&mut self, context: &Context) -> Result<Value, Option<Instant>> {
        if let Some(stop) = self.stopped.take() {
            return Ok(stop);
        }
        if let Some(from) = self.wave_from {
            let until = from + WAVE;
            if Instant::now() < until && !self.closed {
                return Err(Some(until));
            }
            self.wave_from = None;
            self.blocked_told = true;
            return Ok(context.wave(std::mem::take(&mut self.blocked), self.blocked_count));
        }
        match self.end.take() {
            Some(end) => Ok(end),
            None => Err(None),
        }
    }
}

/// Text a teammate or its agent wrote (a title, a blocker, a reason) as a message's `text`
/// carries it: one line of at most 200 characters, control and invisible characters shown
/// as text ([`crate::shown::terminal_safe`]), `&`, `<` and `>` escaped as Slack and
/// Mattermost ask (so no `<!channel>` ping or disguised link), and `@` followed by a
/// zero-width space (so no `@everyone` or `@here` on Discord). The JSON's own fields keep
/// the text as it was.
pub(crate) fn quoted(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = line.chars().take(200).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    crate::shown::terminal_safe(&short)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "@\u{200B}")
}

/// What the delivery thread says beside the events' own values.
pub(crate) struct Context {
    /// Team name.
    pub team: String,
    /// Team workspace.
    pub workspace: String,
    /// Where a person looks next (`See: runner status WS`).
    pub see: String,
}

impl Context {
    /// One notification for a wave of `count` blocked items, the first of them `items`.
    fn wave(&self, items: Vec<Value>, count: u64) -> Value {
        let named: Vec<String> = items
            .iter()
            .map(|i| {
                let id = quoted(i["id"].as_str().unwrap_or_default());
                match i["blocker"].as_str() {
                    Some(b) => format!("{id} ({})", quoted(b)),
                    None => id,
                }
            })
            .collect();
        let more = count.saturating_sub(named.len() as u64);
        let tail = match more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let (noun, verb) = match count {
            1 => ("item is", "needs"),
            _ => ("items are", "need"),
        };
        json!({
            "text": format!(
                "Team {}: {count} {noun} blocked and {verb} a person: {}{tail}. {}",
                self.team,
                named.join(", "),
                self.see
            ),
            "kind": "blocked",
            "team": self.team,
            "workspace": self.workspace,
            "at": crate::run::now_rfc3339(),
            "blocked": count,
            "items": items,
        })
    }
}

/// Start the delivery thread for `targets`; the receiver gets its warnings when it is done
/// (after [`Pending::closed`]). `None` (with a warning) when no thread can be started.
pub(crate) fn spawn(
    targets: Vec<NotifyTarget>,
    context: Context,
    shared: Arc<(Mutex<Pending>, Condvar)>,
) -> Option<Receiver<Vec<String>>> {
    let (done, warnings) = sync_channel(1);
    let started = std::thread::Builder::new()
        .name("notify".into())
        .spawn(move || {
            let said = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(deliver_all(&targets, &context, &shared)),
                Err(e) => vec![format!("notifications are off: no runtime for them ({e})")],
            };
            let _ = done.send(said);
        });
    match started {
        Ok(_) => Some(warnings),
        Err(e) => {
            crate::shown::warn(format!("notifications are off: no thread for them ({e})"));
            None
        }
    }
}

/// Deliver every notification as it is due, until the run is closed and nothing waits.
async fn deliver_all(
    targets: &[NotifyTarget],
    context: &Context,
    shared: &(Mutex<Pending>, Condvar),
) -> Vec<String> {
    let clients = Clients {
        proxied: client(false),
        direct: client(true),
    };
    let mut warnings = Vec::new();
    loop {
        let Some(notice) = next(context, shared) else {
            return warnings;
        };
        for target in targets {
            if let Err(why) = send(&clients, target, &notice).await {
                let kind = notice["kind"].as_str().unwrap_or_default();
                warnings.push(format!(
                    "the {kind} notification to {} failed: {why}; the run goes on as it was",
                    target.shown()
                ));
            }
        }
    }
}

/// Wait for the next notification due; `None` once the run is closed and nothing waits.
/// (Blocks this thread only: the runtime on it has nothing else to run meanwhile.)
fn next(context: &Context, shared: &(Mutex<Pending>, Condvar)) -> Option<Value> {
    let (lock, wake) = shared;
    let mut pending = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match pending.due(context) {
            Ok(notice) => return Some(notice),
            Err(_) if pending.closed => return None,
            Err(Some(until)) => {
                let left = until.saturating_duration_since(Instant::now());
                pending = wake
                    .wait_timeout(pending, left)
                    .map(|(p, _)| p)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            Err(None) => pending = wake.wait(pending).unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// The HTTP clients of the notifications; `None` where one cannot be built (each webhook
/// it serves then fails with a warning).
struct Clients {
    /// Through `HTTP(S)_PROXY` as the environment says.
    proxied: Option<reqwest::Client>,
    /// Straight, for a receiver on this machine (a proxy cannot reach our loopback; the
    /// HTTP backend does the same).
    direct: Option<reqwest::Client>,
}

impl Clients {
    /// The client for `url`.
    fn of(&self, url: &reqwest::Url) -> Option<&reqwest::Client> {
        match crate::run::backend::http::settings::on_this_machine(url) {
            true => self.direct.as_ref(),
            false => self.proxied.as_ref(),
        }
    }
}

/// An HTTP client of the notifications (rustls with ring, as the HTTP backend's), `direct`
/// without a proxy.
fn client(direct: bool) -> Option<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = match direct {
        true => reqwest::Client::builder().no_proxy(),
        false => reqwest::Client::builder(),
    };
    builder
        .timeout(REQUEST_TIME)
        .user_agent(concat!("teammate-runner/", env!("CARGO_PKG_VERSION")))
        .build()
        .ok()
}

/// Deliver `notice` to one target.
///
/// Errors: why it was not delivered, one line (a URL in it redacted).
async fn send(clients: &Clients, target: &NotifyTarget, notice: &Value) -> Result<(), String> {
    match target {
        NotifyTarget::Webhook(url) => {
            let client = clients.of(url).ok_or("no HTTP client could be set up")?;
            post(client, url, notice).await
        }
        NotifyTarget::Command(argv) => run_command(argv, notice).await,
        NotifyTarget::Bell => Ok(()),
    }
}

/// POST `notice` to `url`, retried while the answer is 5xx or 429 or none came.
///
/// Errors: a 4xx answer other than 429 at once (the URL or the body is wrong: retrying
/// changes nothing); the last failure after [`ATTEMPTS`] tries.
async fn post(client: &reqwest::Client, url: &reqwest::Url, notice: &Value) -> Result<(), String> {
    let body = notice.to_string();
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let sent = client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => return Ok(()),
            Ok(answer) => {
                let status = answer.status();
                last = format!("it answered {status}");
                if !(status.is_server_error() || status.as_u16() == 429) {
                    return Err(last);
                }
            }
            // Without the URL: its path is the webhook's secret.
            Err(e) => last = format!("no answer ({})", e.without_url()),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(BACKOFF * 2u32.pow(attempt - 1)).await;
        }
    }
    Err(format!("{last}, {ATTEMPTS} tries"))
}

/// Run `argv` with `notice` on its stdin, its output dropped.
///
/// Errors: it cannot start, fails, or runs longer than [`COMMAND_TIME`] (then it is
/// killed).
async fn run_command(argv: &[String], notice: &Value) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let (program, args) = argv.split_first().ok_or("an empty command")?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("it could not start ({e})"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is not a failure.
        let _ = stdin.write_all(format!("{notice}\n").as_bytes()).await;
    }
    match tokio::time::timeout(COMMAND_TIME, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("it ended with {status}")),
        Ok(Err(e)) => Err(format!("it could not be waited for ({e})")),
        Err(_) => Err(format!(
            "it ran longer than {}s and was ended",
            COMMAND_TIME.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_teammates_words_ping_no_one_and_hide_no_link() {
        assert_eq!(
            quoted("needs <!channel> & @everyone\n<https://evil|docs>"),
            "needs &lt;!channel&gt; &amp; @\u{200B}everyone &lt;https://evil|docs&gt;"
        );
        assert_eq!(quoted(&"x".repeat(300)).chars().count(), 201);
    }
}
