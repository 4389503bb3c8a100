//! `runner mcp`: the runner as tools of a lead agent, over the Model Context Protocol on
//! stdio (the official Rust SDK, `rmcp`). A Claude Code or Codex session adds it to its MCP
//! servers and hands its todo inbox or a CSV batch to a team without parsing text.
//!
//! Each tool runs this same binary's command (`runner list`, `add`, `resolve`, `batch`,
//! `status`, `show`), so the rules, the checks and the errors are the CLI's: bad input is a
//! tool error carrying the CLI's message (naming the field where the tool added one), and
//! nothing is changed. Nothing but protocol is written on stdout; logs go to stderr.
//!
//! A run (`todo_resolve`, `batch_run`) either starts in the background and returns at once
//! with its team and workspace (poll it with `status`), or with `wait: true` runs to its end,
//! sending MCP progress notifications (items finished of the total) when the client asked
//! for them (`_meta.progressToken`), and returns its summary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Which todo store a tool works on: the project's (`.agent-tasks/` in the repository, the
/// default when there is one), the user's global one, or a store folder named by path.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct StoreChoice {
    /// `project` (the repository's `.agent-tasks/`) or `global` (`~/.agent-tasks/`); default:
    /// the project's store inside a repository, else the global one.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// A store folder by path (instead of `scope`).
    #[serde(default)]
    pub store: Option<String>,
}

/// `project` or `global`.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The repository's store.
    Project,
    /// The user's store.
    Global,
}

/// `todo_list`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListParams {
    /// The store.
    #[serde(flatten)]
    pub store: StoreChoice,
}

/// `todo_add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddParams {
    /// The item: its first line is the title, the rest its continuation.
    pub text: String,
    /// Markdown for the item's checkpoint file (what is known, what is next).
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// Add it as an idea (never resolved) instead of a todo item.
    #[serde(default)]
    pub idea: bool,
    /// The store.
    #[serde(flatten)]
    pub store: StoreChoice,
}

/// How a run's teammates are started (all optional: the batch's or the store's settings
/// hold otherwise).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct TeamChoice {
    /// The runner definition (`claude`, `codex`, `exec`, `openai`, …; `runner runners`).
    #[serde(default)]
    pub runner: Option<String>,
    /// The model the teammates use.
    #[serde(default)]
    pub model: Option<String>,
    /// For the `exec` runner: the program and its arguments.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Run to the end before answering (with progress notifications), instead of starting
    /// the team in the background and answering with its workspace at once.
    #[serde(default)]
    pub wait: bool,
}

/// `todo_resolve`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResolveParams {
    /// The inbox item numbers the user confirmed, e.g. `1,3-4` (as `todo_list` numbers
    /// them). Required: ask the user which items to resolve first.
    #[serde(default)]
    pub select: Option<String>,
    /// The store.
    #[serde(flatten)]
    pub store: StoreChoice,
    /// How the team runs.
    #[serde(flatten)]
    pub team: TeamChoice,
}

/// `batch_run`: Codex's `spawn_agents_on_csv` names, plus an instruction file and the agent.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct BatchParams {
    /// The input CSV: one item per row.
    pub csv_path: String,
    /// The instruction template (`{column}` placeholders); or give `instruction_path`.
    #[serde(default)]
    pub instruction: Option<String>,
    /// A file holding the instruction template.
    #[serde(default)]
    pub instruction_path: Option<String>,
    /// The column that identifies a row (default: the row number).
    #[serde(default)]
    pub id_column: Option<String>,
    /// A JSON Schema each report's `output` must satisfy.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Where to write the output CSV (default: workers-output.csv beside the input).
    #[serde(default)]
    pub output_csv_path: Option<String>,
    /// Teammates at once.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Time limit of each attempt, seconds.
    #[serde(default)]
    pub max_runtime_seconds: Option<u64>,
    /// How the team runs.
    #[serde(flatten)]
    pub team: TeamChoice,
}

/// `status`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct StatusParams {
    /// The team: its workspace, its output CSV, its BATCH.md or todo-N.md (default: the most
    /// recently updated team in the server's folder).
    #[serde(default)]
    pub team: Option<String>,
}

/// `show`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ShowParams {
    /// The item's id or its teammate's name.
    pub item: String,
    /// The team, as for `status`.
    #[serde(default)]
    pub team: Option<String>,
}

/// The server: this binary, run from the folder the server was started in.
#[derive(Clone)]
pub struct RunnerTools {
    exe: PathBuf,
    cwd: PathBuf,
}

/// What a finished command said.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Success with its stdout, or a tool error with its message (and exit code).
    fn result(self) -> CallToolResult {
        match self.code {
            0 => CallToolResult::success(vec![ContentBlock::text(self.stdout)]),
            code => CallToolResult::error(vec![ContentBlock::text(format!(
                "{} (exit {code})",
                self.stderr.trim()
            ))]),
        }
    }
}

/// A tool error saying `text` (what was wrong and what to give instead).
fn refused(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

fn store_args(s: &StoreChoice) -> Result<Vec<OsString>, String> {
    match (&s.scope, &s.store) {
        (Some(_), Some(_)) => Err(
            "give `scope` or `store`, not both: `store` names a store folder, `scope` picks the project's or the global one".into(),
        ),
        (Some(Scope::Project), None) => Ok(vec!["--project".into()]),
        (Some(Scope::Global), None) => Ok(vec!["--global".into()]),
        (None, Some(dir)) => Ok(vec!["--store".into(), dir.into()]),
        (None, None) => Ok(Vec::new()),
    }
}

fn team_args(t: &TeamChoice) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    if let Some(r) = &t.runner {
        a.extend(["--runner".into(), r.into()]);
    }
    if let Some(m) = &t.model {
        a.extend(["--model".into(), m.into()]);
    }
    if let Some(cmd) = &t.command {
        a.push("--".into());
        a.extend(cmd.iter().map(OsString::from));
    }
    a
}

/// Write `text` to `path` for a run to read, unless a different file is there.
fn write_beside(path: &Path, text: &str, field: &str) -> Result<(), String> {
    match std::fs::read(path) {
        Ok(old) if old == text.as_bytes() => Ok(()),
        Ok(_) => Err(format!(
            "`{field}`: {} already exists with other content; give its path instead, or another `output_csv_path`",
            path.display()
        )),
        Err(_) => std::fs::write(path, text)
            .map_err(|e| format!("`{field}`: cannot write {}: {e}", path.display())),
    }
}

#[tool_router]
impl RunnerTools {
    /// A server running `exe` from folder `cwd`.
    pub fn new(exe: PathBuf, cwd: PathBuf) -> RunnerTools {
        RunnerTools { exe, cwd }
    }

    #[tool(
        description = "The open items of the todo inbox, numbered, and the batches waiting to run (JSON, as `runner list --format json`). Never runs anything."
    )]
    async fn todo_list(
        &self,
        Parameters(p): Parameters<ListParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args: Vec<OsString> = vec!["list".into(), "--format".into(), "json".into()];
        match store_args(&p.store) {
            Ok(s) => args.extend(s),
            Err(e) => return Ok(refused(e)),
        }
        Ok(self.cli(&args, None).await.result())
    }

    #[tool(
        description = "Add an item to the todo inbox (a todo item gets a checkpoint file; an idea none). Never runs anything."
    )]
    async fn todo_add(
        &self,
        Parameters(p): Parameters<AddParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args: Vec<OsString> = vec!["add".into()];
        match store_args(&p.store) {
            Ok(s) => args.extend(s),
            Err(e) => return Ok(refused(e)),
        }
        if p.idea {
            args.push("--idea".into());
        }
        if p.checkpoint.is_some() {
            args.extend(["--checkpoint".into(), "-".into()]);
        }
        args.extend(["--".into(), p.text.into()]);
        Ok(self.cli(&args, p.checkpoint).await.result())
    }

    #[tool(
        description = "Hand the inbox items the user confirmed to a team: they move to the next todo-N.md and teammates resolve them. `select` is required (the numbers `todo_list` shows). Answers at once with the team's workspace (poll with `status`), or with `wait: true` at the end."
    )]
    async fn todo_resolve(
        &self,
        Parameters(p): Parameters<ResolveParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(select) = p.select.filter(|s| !s.trim().is_empty()) else {
            return Ok(refused(
                "`select` is required: ask the user which inbox items to resolve (`todo_list` numbers them), then pass those numbers, e.g. \"1,3-4\"",
            ));
        };
        let mut args: Vec<OsString> = vec!["resolve".into(), "--yes".into()];
        match store_args(&p.store) {
            Ok(s) => args.extend(s),
            Err(e) => return Ok(refused(e)),
        }
        args.extend(["--select".into(), select.into()]);
        Ok(self.run_team(args, &p.team, ctx).await)
    }

    #[tool(
        description = "Run a CSV batch: one teammate per row with the instruction (`{column}` placeholders), each report checked, results to the output CSV. Answers at once with the team's workspace (poll with `status`), or with `wait: true` at the end."
    )]
    async fn batch_run(
        &self,
        Parameters(p): Parameters<BatchParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let input = self.cwd.join(&p.csv_path);
        let output = match &p.output_csv_path {
            Some(o) => self.cwd.join(o),
            None => input
                .parent()
                .unwrap_or(Path::new("."))
                .join("workers-output.csv"),
        };
        let stem = output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workers-output".into());
        let beside = |ext: &str| output.with_file_name(format!("{stem}.{ext}"));
        let instruction = match (&p.instruction, &p.instruction_path) {
            (Some(_), Some(_)) => {
                return Ok(refused(
                    "give `instruction` or `instruction_path`, not both",
                ));
            }
            (None, None) => {
                return Ok(refused(
                    "`instruction` (the template) or `instruction_path` (a file holding it) is required",
                ));
            }
            (None, Some(path)) => self.cwd.join(path),
            (Some(text), None) => {
                // The run's files are recorded so the same call resumes: the text lives
                // beside the output, where a later call finds it again.
                let path = beside("instruction.md");
                if let Err(e) = write_beside(&path, text, "instruction") {
                    return Ok(refused(e));
                }
                path
            }
        };
        let mut args: Vec<OsString> = vec![
            "batch".into(),
            "--input".into(),
            input.into(),
            "--instruction".into(),
            instruction.into(),
            "--output".into(),
            output.clone().into(),
        ];
        if let Some(schema) = &p.output_schema {
            let path = beside("schema.json");
            let text = serde_json::to_string_pretty(schema).unwrap_or_default();
            if let Err(e) = write_beside(&path, &text, "output_schema") {
                return Ok(refused(e));
            }
            args.extend(["--output-schema".into(), path.into()]);
        }
        if let Some(c) = &p.id_column {
            args.extend(["--id-column".into(), c.into()]);
        }
        if let Some(j) = p.max_concurrency {
            args.extend(["--jobs".into(), j.to_string().into()]);
        }
        if let Some(s) = p.max_runtime_seconds {
            args.extend(["--timeout".into(), format!("{s}s").into()]);
        }
        Ok(self.run_team(args, &p.team, ctx).await)
    }

    #[tool(
        description = "The live or last state of a team: counts, running teammates (with what they last said), what failed, and the command that resumes it (as `runner status --brief`)."
    )]
    async fn status(
        &self,
        Parameters(p): Parameters<StatusParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args: Vec<OsString> = vec!["status".into(), "--brief".into()];
        args.extend(p.team.map(OsString::from));
        Ok(self.cli(&args, None).await.result())
    }

    #[tool(
        description = "One item of a team: its status, every attempt with its verdict, the report, what the teammate last said, and the end of its log (as `runner show`)."
    )]
    async fn show(
        &self,
        Parameters(p): Parameters<ShowParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args: Vec<OsString> = vec!["show".into(), "--".into(), p.item.into()];
        args.extend(p.team.map(OsString::from));
        Ok(self.cli(&args, None).await.result())
    }
}

/// Runs started in the background by this server, for their event files' names.
static STARTED: AtomicU64 = AtomicU64::new(0);

impl RunnerTools {
    /// `runner ARGS` in the server's folder, without colour (its output goes to a client).
    fn command(&self, args: &[OsString]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(args).current_dir(&self.cwd).env("NO_COLOR", "1");
        cmd
    }

    /// Run `runner ARGS` to its end, `stdin` written to it.
    async fn cli(&self, args: &[OsString], stdin: Option<String>) -> Ran {
        let mut cmd = self.command(args);
        cmd.stdin(match stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Ran {
                    code: 3,
                    stdout: String::new(),
                    stderr: format!("cannot start {}: {e}", self.exe.display()),
                };
            }
        };
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(text.as_bytes()).await;
        }
        match child.wait_with_output().await {
            Ok(out) => Ran {
                code: out.status.code().unwrap_or(1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            },
            Err(e) => Ran {
                code: 3,
                stdout: String::new(),
                stderr: e.to_string(),
            },
        }
    }

    /// Start a team (`runner ARGS --format json`, the team's options after them): to its end
    /// with progress notifications (`wait`), else in the background until it says where it
    /// runs.
    async fn run_team(
        &self,
        mut args: Vec<OsString>,
        team: &TeamChoice,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        args.extend(["--format".into(), "json".into()]);
        args.extend(team_args(team));
        match team.wait {
            true => self.run_to_end(&args, ctx).await,
            false => self.start_in_background(&args).await,
        }
    }

    async fn run_to_end(
        &self,
        args: &[OsString],
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = ctx.meta.get_progress_token();
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return refused(format!("cannot start {}: {e}", self.exe.display())),
        };
        let stderr = child.stderr.take().map(|e| {
            tokio::spawn(async move {
                let mut text = String::new();
                let mut lines = BufReader::new(e).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    text.push_str(&l);
                    text.push('\n');
                }
                text
            })
        });
        let (mut total, mut done) = (None::<u64>, 0u64);
        let mut last = Vec::new();
        if let Some(out) = child.stdout.take() {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                match event["event"].as_str() {
                    Some("run_started") => total = event["total"].as_u64(),
                    Some("item_finished") => {
                        done += 1;
                        if let Some(t) = &token {
                            let mut p = ProgressNotificationParam::new(t.clone(), done as f64);
                            if let Some(n) = total {
                                p = p.with_total(n as f64);
                            }
                            let o = &event["outcome"];
                            p = p.with_message(format!(
                                "{} {}",
                                o["id"].as_str().unwrap_or_default(),
                                o["status"].as_str().unwrap_or_default()
                            ));
                            let _ = ctx.peer.notify_progress(p).await;
                        }
                    }
                    Some("run_finished") | Some("run_ended") => last.push(event),
                    _ => {}
                }
            }
        }
        let code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(1);
        let err = match stderr {
            Some(t) => t.await.unwrap_or_default(),
            None => String::new(),
        };
        // 0: every item completed; 1: some did not (a result, not a tool error).
        if code > 1 {
            return refused(format!("{} (exit {code})", err.trim()));
        }
        let summary = json!({ "exit_code": code, "events": last });
        CallToolResult::success(vec![ContentBlock::text(summary.to_string())])
    }

    async fn start_in_background(&self, args: &[OsString]) -> CallToolResult {
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let events = std::env::temp_dir().join(format!(
            "runner-mcp-{}-{n}.events.jsonl",
            std::process::id()
        ));
        let log = events.with_extension("stderr.log");
        let (Ok(out), Ok(err)) = (std::fs::File::create(&events), std::fs::File::create(&log))
        else {
            return refused(format!("cannot create {}", events.display()));
        };
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // The team outlives this call, and this server.
            .process_group(0)
            .kill_on_drop(false);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return refused(format!("cannot start {}: {e}", self.exe.display())),
        };
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&events).unwrap_or_default();
            if let Some(started) = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|e| e["event"] == "run_started")
            {
                let answer = json!({
                    "team": started["team"],
                    "workspace": started["workspace"],
                    "total": started["total"],
                    "pid": child.id(),
                    "stderr_log": log,
                    "next": "poll the `status` tool with this workspace as `team`; the journal in the workspace holds every event",
                });
                // Reaped in the background so it leaves no zombie while this server lives;
                // its events copy goes then (the workspace's journal has them), and its
                // stderr unless the run could not go on (exit 2 or more).
                tokio::spawn(async move {
                    let code = child.wait().await.ok().and_then(|s| s.code());
                    let _ = std::fs::remove_file(&events);
                    let empty = std::fs::metadata(&log).is_ok_and(|m| m.len() == 0);
                    if empty || matches!(code, Some(0 | 1)) {
                        let _ = std::fs::remove_file(&log);
                    }
                });
                return CallToolResult::success(vec![ContentBlock::text(answer.to_string())]);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&events);
                let _ = std::fs::remove_file(&log);
                return refused(format!(
                    "{} (exit {})",
                    err.trim(),
                    status.code().unwrap_or(1)
                ));
            }
            if tokio::time::Instant::now() > until {
                return refused(format!(
                    "the team did not start within 60 s; see {}",
                    log.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[rmcp::tool_handler]
impl ServerHandler for RunnerTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "teammate-runner: hand the user's todo inbox or a CSV batch to a team of agents. \
             todo_list and todo_add never run anything; todo_resolve needs the item numbers \
             the user confirmed. A run answers with its workspace; poll it with status, and \
             look at one item with show.",
        )
    }
}

/// Serve on stdio until the client closes it.
///
/// Errors: the transport failed (the message says how).
pub async fn serve(exe: PathBuf, cwd: PathBuf) -> crate::error::Result<()> {
    let service = RunnerTools::new(exe, cwd)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| crate::error::Error::Environment(format!("MCP: {e}")))?;
    service
        .waiting()
        .await
        .map_err(|e| crate::error::Error::Environment(format!("MCP: {e}")))?;
    Ok(())
}
