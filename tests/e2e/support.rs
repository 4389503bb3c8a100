//! What every real-CLI end-to-end test needs: finding the pinned CLI that `.ci/run` installed
//! under `target/e2e-<name>/` (or skipping with a notice), a private temp folder with a clean
//! environment to run `runner batch` in, reading `workers-output.csv`, and checking that no
//! process of the run is left. The scripted model APIs live in each CLI's own module (and
//! the OpenAI Chat Completions one, shared by several CLIs, in `chat_api`); the small pieces
//! they all need (shared state, headers, JSON bodies, message text, SSE bodies, the
//! catch-all responder) are here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Longest a whole `runner` invocation may take before the test fails. The runner's own
/// `--timeout` (then `--grace 5s`) should end a hung CLI first; this is the backstop.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(110);

/// The report a scripted model writes for item `id` (the DESIGN §4 report shape).
pub(crate) fn report_json(id: &str) -> String {
    json!({
        "id": id,
        "status": "completed",
        "summary": "wrote the report",
        "files_modified": [],
        "files_created": [],
        "tests": "none",
        "blocker": null,
        "next_steps": [],
        "output": {"answer": 42}
    })
    .to_string()
}

/// The last absolute path ending in `report.json` in `text` (the prompt names
/// `$RUNNER_REPORT`, e.g. "Write your report as JSON to the file `/…/report.json`").
pub(crate) fn find_report_path(text: &str) -> Option<String> {
    const NAME: &str = "report.json";
    text.match_indices(NAME)
        .filter_map(|(i, _)| {
            let start = text[..i]
                .rfind(|c: char| c.is_whitespace() || "`\"'()<>[]=,;".contains(c))
                .map_or(0, |s| s + 1);
            let candidate = &text[start..i + NAME.len()];
            candidate.starts_with('/').then(|| candidate.to_string())
        })
        .last()
}

// ---------------------------------------------------------------------------------------
// Finding a CLI

/// One installed agent CLI under test.
#[derive(Debug, Clone)]
pub(crate) struct Cli {
    /// The runner definition's name (`codex`), also the command name on the test's PATH.
    pub name: &'static str,
    /// The binary.
    pub bin: PathBuf,
    /// What `--version` printed (trimmed).
    pub version: String,
}

/// The CLI `name` to test, or `None` (with a `skipped: ...` notice on stderr) when it is not
/// installed. It is `$RUNNER_E2E_<NAME>` when set (then it must work), else
/// `target/e2e-<name>/<rel>` as `.ci/run` installs it (`rel` is e.g.
/// `node_modules/.bin/codex` or `venv/bin/aider`). `version_has` must appear in the output
/// of `--version` (run with a private HOME and a 30 s limit).
pub(crate) fn cli_or_skip(
    name: &'static str,
    rel: &str,
    version_has: &str,
    test: &str,
) -> Option<Cli> {
    let var = format!("RUNNER_E2E_{}", name.to_uppercase());
    let explicit = std::env::var_os(&var).filter(|v| !v.is_empty());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/e2e-{name}"));
    let bin = explicit.clone().map(PathBuf::from).unwrap_or(dir.join(rel));
    let why = if !bin.exists() {
        format!("no {name} at {}", bin.display())
    } else {
        match version_of(&bin) {
            Ok(v) if v.contains(version_has) => {
                return Some(Cli {
                    name,
                    bin,
                    version: v,
                });
            }
            Ok(v) => format!(
                "`{} --version` printed {v:?}, not {version_has:?}",
                bin.display()
            ),
            Err(e) => format!("{} does not run: {e}", bin.display()),
        }
    };
    if explicit.is_some() {
        panic!("{var} is set but unusable: {why}");
    }
    let log = dir.join("install.log");
    let hint = if log.exists() {
        format!(" (the last install attempt's log: {})", log.display())
    } else {
        String::new()
    };
    crate::skip::skip(format!(
        "{test}: {why}{hint}. Install it with `bash .ci/run` (it needs the npm registry or \
         PyPI), or set {var} to a {name} binary."
    ));
    None
}

/// `BIN --version` with a private HOME, a 30 s limit; stdout (or stderr when stdout is
/// empty), trimmed.
fn version_of(bin: &Path) -> Result<String, String> {
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(bin)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if Instant::now() > until => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("`--version` did not finish within 30 s".into());
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(if stdout.is_empty() { stderr } else { stdout })
    } else {
        Err(format!(
            "`--version` exited {:?}: {stdout} {stderr}",
            out.status.code()
        ))
    }
}

// ---------------------------------------------------------------------------------------
// The request log of a scripted API

/// One line per request a scripted API saw, for the test log and failure messages.
#[derive(Clone, Default)]
pub(crate) struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Record (and print) one line.
    pub(crate) fn push(&self, line: String) {
        eprintln!("[mock api] {line}");
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    /// Every line so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Every line so far, one per line.
    pub(crate) fn dump(&self) -> String {
        self.lines().join("\n")
    }
    /// Fail the test when a line is marked `(unexpected)`.
    #[track_caller]
    pub(crate) fn assert_nothing_unexpected(&self) {
        let unexpected = self.unexpected();
        assert!(
            unexpected.is_empty(),
            "unexpected requests: {unexpected:#?}"
        );
    }
    /// Lines marked `(unexpected)`.
    pub(crate) fn unexpected(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.contains("(unexpected)"))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// Pieces of the scripted APIs

/// State a responder shares with the test (what it saw, for the assertions); cloning shares
/// it. A panic while it is held does not poison it for the assertions.
pub(crate) struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared(Arc::default())
    }
}

impl<T> Shared<T> {
    /// Run `f` on the state, under the lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The value of request header `name`, when present and text.
pub(crate) fn header(req: &Request, name: &str) -> Option<String> {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The request body as JSON, or `None` after logging it as `(unexpected)` (with its size and
/// `content-encoding`); the caller answers with its API's 400.
pub(crate) fn json_body(req: &Request, log: &Log) -> Option<Value> {
    match serde_json::from_slice(&req.body) {
        Ok(v) => Some(v),
        Err(e) => {
            log.push(format!(
                "(unexpected) {} {} with a body that is not JSON ({} bytes, content-encoding \
                 {:?}): {e}",
                req.method,
                req.url,
                req.body.len(),
                header(req, "content-encoding")
            ));
            None
        }
    }
}

/// The text of one message `content` (or Gemini `parts`): a string as it is, an array as the
/// `text` of each part, each followed by a newline.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .map(|t| format!("{t}\n"))
            .collect(),
        _ => String::new(),
    }
}

/// All text of the `user` messages of a `messages` array (Anthropic Messages, OpenAI Chat
/// Completions), see [`text_of`].
pub(crate) fn user_text(messages: &Value) -> String {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .collect()
}

/// A server-sent-events body of named events, `event: <type>` then `data: <event>` (the
/// Anthropic Messages and OpenAI Responses streams).
pub(crate) fn named_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            let name = e["type"].as_str().unwrap_or("message");
            format!("event: {name}\ndata: {e}\n\n")
        })
        .collect()
}

/// A server-sent-events body of `data: <chunk>` lines ending with `data: [DONE]` (the OpenAI
/// Chat Completions stream).
pub(crate) fn data_events(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

/// A 200 `text/event-stream` response with `body` and `cache-control: no-cache`.
pub(crate) fn event_stream(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream")
}

/// The catch-all responder: every request no other mock matched is logged as `(unexpected)`
/// and answered with `not_found`, the API's own 404.
pub(crate) struct Other {
    /// The API's request log.
    pub log: Log,
    /// The answer: a 404 with the API's error body.
    pub not_found: ResponseTemplate,
}

impl Other {
    /// Mount it on `server` below every other mock (priority 10), so it answers only what
    /// they do not.
    pub(crate) async fn mount(self, server: &MockServer) {
        Mock::given(any())
            .respond_with(self)
            .with_priority(10)
            .mount(server)
            .await;
    }
}

impl Respond for Other {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.log.push(format!(
            "(unexpected) {} {} ({} body bytes) -> 404",
            req.method,
            req.url,
            req.body.len()
        ));
        self.not_found.clone()
    }
}

// ---------------------------------------------------------------------------------------
// Running `runner` in a temp folder

/// A temp folder for one run, holding `bin/<cli>` (a link to the CLI), `home/`, `tmp/`,
/// `in.csv` (one row, id `1`) and `instr.md`; on drop, no process started in it survives.
pub(crate) struct Sandbox {
    dir: tempfile::TempDir,
}

/// What one `runner batch` did.
pub(crate) struct Run {
    /// Exit code (-1 when signalled).
    pub code: i32,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// Wall time.
    pub took: Duration,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:.1?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

impl Sandbox {
    /// A fresh sandbox with `cli` on its PATH as `cli.name`.
    pub(crate) fn new(cli: &Cli) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix(&format!("runner-{}-e2e-", cli.name))
            .tempdir()
            .expect("tempdir");
        Sandbox::fill(cli, dir)
    }

    /// [`Sandbox::new`] under cargo's `target/tmp` instead of `/tmp`, as a project folder
    /// is: no folder above it is writable by others. Gemini CLI skips a settings file below
    /// such a folder ("Parent directory '/tmp' is insecure"), the definition's system
    /// defaults among them.
    pub(crate) fn new_private(cli: &Cli) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix(&format!("runner-{}-e2e-", cli.name))
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("tempdir");
        Sandbox::fill(cli, dir)
    }

    fn fill(cli: &Cli, dir: tempfile::TempDir) -> Sandbox {
        for sub in ["bin", "home", "tmp", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        std::os::unix::fs::symlink(&cli.bin, dir.path().join("bin").join(cli.name))
            .expect("symlink");
        std::fs::write(dir.path().join("in.csv"), "id\n1\n").expect("in.csv");
        std::fs::write(
            dir.path().join("instr.md"),
            "Write the report for item {id}; nothing else needs doing.\n",
        )
        .expect("instr.md");
        Sandbox { dir }
    }

    /// The sandbox folder (the run's working directory).
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The private HOME the CLI sees (`<sandbox>/home`).
    pub(crate) fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// `runner batch --input in.csv --instruction instr.md --format plain --grace 5s
    /// --rate-limit-wait 0s --keep-logs ARGS...`
    /// in the sandbox, with a clean environment (PATH with `bin/` first, HOME, TMPDIR,
    /// XDG_* under `home/`, LANG, NO_COLOR) plus `env`. Nothing from the developer's
    /// environment leaks in: no real key, login, proxy, model or config dir.
    pub(crate) async fn run(&self, args: &[&str], env: &[(&str, String)]) -> Run {
        self.run_in(self.path(), args, env).await
    }

    /// [`Sandbox::run`] at the default `--sandbox auto` in the default layout: from `work/`
    /// (the teammate's working directory) with the output in it, as a user runs a batch in
    /// its own folder — so the runner keeps the team workspace in the state folder under
    /// HOME (issue 49) and auto confines the teammate with Landlock. `None` (having printed a
    /// "skipped" notice) when this kernel cannot, and auto said so; otherwise the run, whose
    /// first line is checked to say `sandbox landlock`.
    pub(crate) async fn run_sandboxed(&self, args: &[&str], env: &[(&str, String)]) -> Option<Run> {
        let mut all = vec!["-o", "workers-output.csv"];
        all.extend_from_slice(args);
        let r = self.run_in(&self.path().join("work"), &all, env).await;
        if r.stdout.contains("sandbox none (auto: this kernel") {
            crate::skip::skip(format!(
                "this kernel cannot confine teammates: {}",
                r.stdout
            ));
            return None;
        }
        assert!(r.stdout.contains("; sandbox landlock"), "{r:?}");
        Some(r)
    }

    /// Like [`Sandbox::run`], with `cwd` (e.g. `<sandbox>/work`) as the working directory of
    /// `runner` and so of the agent; `in.csv` and `instr.md` are still the sandbox's. Give
    /// `-o <sandbox>/workers-output.csv` to keep the team workspace (and [`Sandbox::row`])
    /// in the sandbox, outside the agent's working directory.
    pub(crate) async fn run_in(&self, cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Run {
        let root = self.path();
        let path = format!(
            "{}:{}",
            root.join("bin").display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
        );
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_runner"));
        let (input, instruction) = (root.join("in.csv"), root.join("instr.md"));
        cmd.arg("batch")
            .arg("--input")
            .arg(&input)
            .arg("--instruction")
            .arg(&instruction)
            .args([
                "--format",
                "plain",
                "--grace",
                "5s",
                // One item: a rate limit ends it at once instead of pausing the team (a test
                // that proves the pause passes its own, later, --rate-limit-wait).
                "--rate-limit-wait",
                "0s",
                // The tests read the CLI's logs in its folder after it completed (a completed
                // item's compaction is the runner's own, proven in tests/runner).
                "--keep-logs",
            ])
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env("XDG_STATE_HOME", self.home().join(".local/state"))
            .env("XDG_CACHE_HOME", self.home().join(".cache"))
            .env("TMPDIR", root.join("tmp"))
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            // No repository above the sandbox counts (a stray `/tmp/.git`, or this project's
            // own for a sandbox under `target/tmp`).
            .env("GIT_CEILING_DIRECTORIES", root.parent().unwrap_or(root))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        for keep in ["RUNNER_LOG", "RUST_BACKTRACE"] {
            if let Some(v) = std::env::var_os(keep) {
                cmd.env(keep, v);
            }
        }
        let started = Instant::now();
        let child = cmd.spawn().expect("spawn runner");
        let out = match tokio::time::timeout(RUN_LIMIT, child.wait_with_output()).await {
            Ok(out) => out.expect("wait for runner"),
            // Dropping the future kills `runner` (kill_on_drop); Sandbox::drop ends the rest.
            Err(_) => panic!(
                "runner did not finish within {RUN_LIMIT:?}; workspace: {}",
                root.display()
            ),
        };
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        };
        eprintln!("runner: {run:?}");
        run
    }

    /// The output of the last run: `workers-output.csv` in the sandbox folder, or in `work/`
    /// after [`Sandbox::run_sandboxed`].
    fn output(&self) -> PathBuf {
        let here = self.path().join("workers-output.csv");
        let in_work = self.path().join("work/workers-output.csv");
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        match (modified(&here), modified(&in_work)) {
            (Some(a), Some(b)) if b > a => in_work,
            (None, Some(_)) => in_work,
            _ => here,
        }
    }

    /// The one row of workers-output.csv, column → value.
    pub(crate) fn row(&self) -> BTreeMap<String, String> {
        let file = self.output();
        let mut rdr = csv::Reader::from_path(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let headers = rdr.headers().expect("headers").clone();
        let rows: Vec<BTreeMap<String, String>> = rdr
            .records()
            .map(|r| {
                let r = r.expect("record");
                headers
                    .iter()
                    .zip(r.iter())
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), 1, "one row: {rows:?}");
        rows.into_iter().next().unwrap_or_default()
    }

    /// The teammate folder of item `1`: in the workspace beside the output, or in the one
    /// the runner kept in the state folder (`home/.local/state/teammate-runner/teams/*`)
    /// when teammates could write beside the output.
    pub(crate) fn teammate(&self) -> PathBuf {
        let beside = self.output().with_extension("runner");
        let state = self.home().join(".local/state/teammate-runner/teams");
        let kept = std::fs::read_dir(&state)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("teammates/1-1").is_dir());
        match (beside.join("teammates/1-1").is_dir(), kept) {
            (false, Some(ws)) => ws.join("teammates/1-1"),
            _ => beside.join("teammates/1-1"),
        }
    }

    /// The tails of the last attempts' stdout and stderr logs, for failure messages.
    pub(crate) fn agent_log(&self) -> String {
        let p = self.teammate();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        let tail = |s: String| {
            let cut = s.len().saturating_sub(6000);
            let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            s[cut..].to_string()
        };
        let mut out = String::new();
        for n in 1..=3 {
            let (o, e) = (
                format!("attempt-{n}.stdout.log"),
                format!("attempt-{n}.stderr.log"),
            );
            if !p.join(&o).exists() {
                break;
            }
            out.push_str(&format!(
                "--- {o} (tail)\n{}\n--- {e} (tail)\n{}\n",
                tail(read(&o)),
                tail(read(&e))
            ));
        }
        out
    }

    /// Processes whose environment mentions this sandbox (the run's children), with their
    /// command lines; zombies are not counted.
    pub(crate) fn live_processes(&self) -> Vec<(u32, String)> {
        let needle = self.path().display().to_string();
        let mut found = Vec::new();
        let me = std::process::id();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if !String::from_utf8_lossy(&env).contains(&needle) {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
            {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
        found
    }

    /// Fail the test when a process of this sandbox is still alive 5 s from now.
    #[track_caller]
    pub(crate) fn assert_no_survivors(&self) {
        let survivors = self.survivors_after(5.0);
        assert!(survivors.is_empty(), "left running: {survivors:?}");
    }

    /// The one output row, after asserting the run's exit code and the row's `status` and
    /// `failure_kind` (with [`Sandbox::context`] when they differ).
    #[track_caller]
    pub(crate) fn assert_outcome(
        &self,
        run: &Run,
        log: &Log,
        code: i32,
        status: &str,
        kind: &str,
    ) -> BTreeMap<String, String> {
        let row = self.row();
        assert_eq!(
            (
                run.code,
                row["status"].as_str(),
                row["failure_kind"].as_str()
            ),
            (code, status, kind),
            "{row:?}\n{}",
            self.context(run, log)
        );
        row
    }

    /// The one output row of a run in which the scripted model wrote the report
    /// ([`report_json`]): exit 0, `completed` with its summary, exit code 0, no error and no
    /// failure kind (with [`Sandbox::context`] when not).
    #[track_caller]
    pub(crate) fn assert_completed(&self, run: &Run, log: &Log) -> BTreeMap<String, String> {
        self.assert_completed_with(run, log, "wrote the report")
    }

    /// [`Sandbox::assert_completed`] for a report whose summary is `summary`.
    #[track_caller]
    pub(crate) fn assert_completed_with(
        &self,
        run: &Run,
        log: &Log,
        summary: &str,
    ) -> BTreeMap<String, String> {
        let row = self.assert_outcome(run, log, 0, "completed", "");
        assert_eq!(
            (
                row["summary"].as_str(),
                row["exit_code"].as_str(),
                row["error"].as_str()
            ),
            (summary, "0", ""),
            "{row:?}\n{}",
            self.context(run, log)
        );
        row
    }

    /// The report the CLI's own tool wrote, at `path` as the prompt named it: a
    /// `report.json` inside this sandbox holding the scripted report. Returns the path.
    #[track_caller]
    pub(crate) fn assert_report_written(&self, path: Option<String>) -> String {
        let report = path.expect("the prompt named the report path");
        assert!(
            report.starts_with(&self.path().display().to_string())
                && report.ends_with("/report.json"),
            "{report}"
        );
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("the report file"))
                .expect("report JSON");
        assert_eq!(written["summary"], "wrote the report");
        report
    }

    /// `run`, the agent's logs ([`Sandbox::agent_log`]) and the scripted API's `log`, for a
    /// failure message.
    pub(crate) fn context(&self, run: &Run, log: &Log) -> String {
        format!(
            "{run:?}\n{}\n--- mock api log\n{}",
            self.agent_log(),
            log.dump()
        )
    }

    /// Wait up to `secs` for no process of this sandbox to be alive; return the survivors.
    pub(crate) fn survivors_after(&self, secs: f64) -> Vec<(u32, String)> {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let live = self.live_processes();
            if live.is_empty() || Instant::now() > until {
                return live;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never leave a CLI process behind, even when a test fails.
        for (pid, _) in self.live_processes() {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}
