//! `runner mcp`: the runner as tools of a lead agent, over the Model Context Protocol on
//! stdio (the official Rust SDK, `rmcp`). A Claude Code or Codex session adds it to its MCP
//! servers and hands its todo inbox or a CSV batch to a team without parsing text.
//!
//! Each tool is a command (`runner list`, `add`, `resolve`, `batch`, `status`, `show`): its
//! arguments become that command line, parsed by the CLI's own definitions ([`params`]), and
//! the command's library function does the work in this process and returns a value the
//! tool serializes ([`crate::commands::todo::listing`], [`crate::commands::todo::add_item`],
//! [`crate::commands::status::team_status`], [`crate::commands::show::item_view`]; a run,
//! [`runs`]). So the rules, the checks and the errors are the CLI's: bad input is a tool
//! error carrying the message the CLI prints and its exit code (naming the field where the
//! tool added one), and nothing is changed. A team whose items failed is a status like any
//! other, not an error.
//!
//! A run (`todo_resolve`, `batch_run`) either starts in the background and returns at once
//! with its team and workspace (poll it with `status`), or with `wait: true` runs to its end,
//! sending MCP progress notifications (items finished of the total) when the client asked
//! for them (`_meta.progressToken`), and returns its summary.
//!
//! Nothing but protocol is written on stdout ([`stdio`]: the protocol has its own descriptor,
//! and whatever the library prints goes to stderr); when the client closes stdin, or the
//! server is sent SIGINT, SIGTERM or SIGHUP, the run under way is interrupted and every
//! teammate ended before the server exits ([`runs::Runs::shutdown`]). The command itself,
//! `runner mcp`, is [`command`]: the server sits above the commands it serves.

pub(crate) mod command;
pub(crate) mod params;
pub(crate) mod runs;
pub(crate) mod stdio;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_router};

use crate::cli::{Cli, Command};
use params::{
    AddParams, BatchParams, ListParams, ResolveParams, ShowParams, StatusParams, TeamChoice,
    store_args, team_args, write_beside,
};
use runs::{Runs, Start, error_text, refused};

/// The server: the runner's commands, run in the folder the server was started in.
#[derive(Clone)]
pub(crate) struct RunnerTools {
    cwd: PathBuf,
    runs: Runs,
}

/// `runner ARGV` parsed as the CLI parses it.
///
/// Errors: clap's message (exit 2), the tool error's text.
fn parse(argv: Vec<OsString>) -> Result<Command, String> {
    let full = std::iter::once(OsString::from("runner")).chain(argv);
    Cli::try_parse_from(full)
        .map(|cli| cli.command)
        .map_err(|e| format!("{} (exit 2)", e.render().to_string().trim()))
}

/// `f` (a command's library call: it reads and writes files) on a blocking thread; its value
/// as the tool's text, its error as the tool error the CLI would print.
async fn answer<T: std::fmt::Display + Send + 'static>(
    f: impl FnOnce() -> crate::error::Result<T> + Send + 'static,
) -> CallToolResult {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(value)) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
        Ok(Err(e)) => refused(error_text(&e)),
        Err(e) => refused(format!("the command failed: {e}")),
    }
}

/// The command line a tool call is, or the tool error's text: what to give instead.
type Argv = Result<Vec<OsString>, String>;

/// `runner batch …` for `p`: the files relative to the server's folder `cwd`, an inline
/// instruction or schema written beside the output (so the same call again resumes).
fn batch_argv(p: &BatchParams, cwd: &Path) -> Argv {
    let input = cwd.join(&p.csv_path);
    let output = match &p.output_csv_path {
        Some(o) => cwd.join(o),
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
            return Err("give `instruction` or `instruction_path`, not both".into());
        }
        (None, None) => {
            return Err(
                "`instruction` (the template) or `instruction_path` (a file holding it) is required"
                    .into(),
            );
        }
        (None, Some(path)) => cwd.join(path),
        (Some(text), None) => {
            // The run's files are recorded so the same call resumes: the text lives
            // beside the output, where a later call finds it again.
            let path = beside("instruction.md");
            write_beside(&path, text, "instruction")?;
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
        write_beside(&path, &text, "output_schema")?;
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
    Ok(args)
}

/// The run's own flags after a run command's: plain lines (they go to the server's stderr,
/// its log), then the team's runner options.
fn run_argv(mut args: Vec<OsString>, team: &TeamChoice) -> Vec<OsString> {
    args.extend(["--format".into(), "plain".into()]);
    args.extend(team_args(team));
    args
}

#[tool_router]
impl RunnerTools {
    /// A server whose tools work in folder `cwd`.
    pub(crate) fn new(cwd: PathBuf) -> RunnerTools {
        RunnerTools {
            cwd,
            runs: Runs::default(),
        }
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
        let args = match parse(args) {
            Ok(Command::List(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner list`")),
            Err(e) => return Ok(refused(e)),
        };
        Ok(answer(move || crate::commands::todo::listing(&args).map(|l| l.json())).await)
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
        let args = match parse(args) {
            Ok(Command::Add(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner add`")),
            Err(e) => return Ok(refused(e)),
        };
        let checkpoint = p.checkpoint;
        Ok(answer(move || {
            crate::commands::todo::add_item(&args, checkpoint).map(|a| format!("{a}\n"))
        })
        .await)
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
        if let Some(text) = self.runs.busy() {
            return Ok(refused(text));
        }
        let mut args: Vec<OsString> = vec!["resolve".into(), "--yes".into()];
        match store_args(&p.store) {
            Ok(s) => args.extend(s),
            Err(e) => return Ok(refused(e)),
        }
        args.extend(["--select".into(), select.clone().into()]);
        let args = match parse(run_argv(args, &p.team)) {
            Ok(Command::Resolve(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner resolve`")),
            Err(e) => return Ok(refused(e)),
        };
        let what = format!("todo_resolve of items {select}");
        Ok(self
            .runs
            .start(Start::Resolve(Box::new(args)), what, p.team.wait, ctx)
            .await)
    }

    #[tool(
        description = "Run a CSV batch: one teammate per row with the instruction (`{column}` placeholders), each report checked, results to the output CSV. Answers at once with the team's workspace (poll with `status`), or with `wait: true` at the end."
    )]
    async fn batch_run(
        &self,
        Parameters(p): Parameters<BatchParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(text) = self.runs.busy() {
            return Ok(refused(text));
        }
        let args = match batch_argv(&p, &self.cwd) {
            Ok(a) => a,
            Err(e) => return Ok(refused(e)),
        };
        let args = match parse(run_argv(args, &p.team)) {
            Ok(Command::Batch(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner batch`")),
            Err(e) => return Ok(refused(e)),
        };
        let what = format!("batch_run of {}", p.csv_path);
        Ok(self
            .runs
            .start(Start::Batch(Box::new(args)), what, p.team.wait, ctx)
            .await)
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
        let args = match parse(args) {
            Ok(Command::Status(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner status`")),
            Err(e) => return Ok(refused(e)),
        };
        // A team whose items failed is its status, not an error.
        Ok(answer(move || crate::commands::status::team_status(&args).map(|v| v.text)).await)
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
        let args = match parse(args) {
            Ok(Command::Show(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner show`")),
            Err(e) => return Ok(refused(e)),
        };
        Ok(
            answer(move || crate::commands::show::item_view(&args.id, args.workspace.as_deref()))
                .await,
        )
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

/// Serve on stdio until the client closes it or the server is signalled, then end the run
/// under way ([`Runs::shutdown`]).
///
/// Errors: the protocol's descriptor or a signal handler cannot be set up, or the transport
/// failed (the message says how).
pub(crate) async fn serve(cwd: PathBuf, out: stdio::ProtocolOut) -> crate::error::Result<()> {
    let mut signals = stdio::Signals::listen()?;
    let tools = RunnerTools::new(cwd);
    let runs = tools.runs.clone();
    let service = tools
        .serve((tokio::io::stdin(), out.into_async()))
        .await
        .map_err(|e| crate::error::Error::Environment(format!("MCP: {e}")))?;
    let signalled = tokio::select! {
        ended = service.waiting() => {
            if let Err(e) = ended {
                tracing::warn!("MCP: {e}");
            }
            false
        }
        _ = signals.next() => true,
    };
    runs.shutdown(signalled).await;
    Ok(())
}
