//! `runner mcp`: the runner as tools of a lead agent, over the Model Context Protocol on
//! stdio (the official Rust SDK, `rmcp`). A Claude Code or Codex session adds it to its MCP
//! servers and hands its todo inbox or a CSV batch to a team without parsing text.
//!
//! Each tool is a command (`runner list`, `add`, `resolve`, `batch`, `status`, `show`): its
//! arguments become that command line, parsed by the CLI's own definitions ([`argv`]), and
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
//! for them (`_meta.progressToken`), and returns its summary. A waited call the client
//! cancels (`notifications/cancelled`) and the `stop` tool interrupt the team as Ctrl-C does,
//! through the plan's own interrupt channel ([`crate::schedule::plan::Plan::interrupt`]):
//! running items end `cancelled`, the outputs are written, nothing is left running.
//! `todo_resolve` takes the items' stable ids (`todo_list` shows them), refuses an id no open
//! item has, and answers with the items it moved. With `serve: true` a run's live page
//! ([`crate::serve`]) is served from this process as `--serve` does, its URL (with the
//! token) the answer's `page_url`, and it stops when the run ends; `notify` is `--notify`.
//!
//! Every tool has a title, annotations (`readOnlyHint` for `todo_list`, `status`, `show`),
//! a plain input schema that also checks each call ([`params::Strict`], [`schema`]: unknown
//! fields refused with the one meant, errors naming their field), and an output schema its
//! `structuredContent` follows (the same JSON is the text, for older clients).
//!
//! Nothing but protocol is written on stdout ([`stdio`]: the protocol has its own descriptor,
//! and whatever the library prints goes to stderr). When the client closes stdin, a waited
//! run is interrupted, while a run started in the background goes on: the server takes no
//! more calls and exits when that team ends ([`runs::Runs::client_gone`]). SIGINT, SIGTERM
//! or SIGHUP interrupts the run under way, background or not, and every teammate is ended
//! before the server exits, 130 then ([`runs::Runs::shutdown`]). The command itself,
//! `runner mcp`, is [`command`]: the server sits above the commands it serves.

pub(crate) mod argv;
pub(crate) mod command;
pub(crate) mod params;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod stdio;

use std::ffi::OsString;
use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_router};
use serde_json::{Value, json};

use crate::cli::Command;
use argv::{batch_argv, parse, run_argv, same_team, status_args};
use params::{
    AddParams, BatchParams, ListParams, ResolveParams, ShowParams, StatusParams, StopParams,
    Strict, store_args,
};
use runs::{Launch, Runs, Start, error_text, refused};

/// The server: the runner's commands, run in the folder the server was started in.
#[derive(Clone)]
pub(crate) struct RunnerTools {
    cwd: PathBuf,
    runs: Runs,
}

/// `f` (a command's library call: it reads and writes files) on a blocking thread; its value
/// as the tool's structured result (and its text), its error as the tool error the CLI would
/// print.
async fn answer(
    f: impl FnOnce() -> crate::error::Result<Value> + Send + 'static,
) -> CallToolResult {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(value)) => CallToolResult::structured(value),
        Ok(Err(e)) => refused(error_text(&e)),
        Err(e) => refused(format!("the command failed: {e}")),
    }
}

/// The arguments of a call, or the tool error that refuses them.
macro_rules! arguments {
    ($strict:expr) => {
        match $strict.0 {
            Ok(p) => p,
            Err(e) => return Ok(refused(e)),
        }
    };
}

/// `{"text": TEXT}`: a command's printed view as a structured result.
fn text_value(text: String) -> Value {
    json!({ "text": text })
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
        title = "List the todo inbox",
        description = "The open items of the todo inbox, each with its number and its stable `id` (which `todo_resolve` takes), and the batches waiting to run (as `runner list --format json`). Never runs anything.",
        input_schema = schema::input::<ListParams>(),
        output_schema = schema::listing_output(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn todo_list(
        &self,
        Parameters(p): Parameters<Strict<ListParams>>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
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
        Ok(answer(move || {
            let listing = crate::commands::todo::listing(&args)?;
            Ok(serde_json::from_str(&listing.json()).unwrap_or(Value::Null))
        })
        .await)
    }

    #[tool(
        title = "Add a todo item",
        description = "Add an item to the todo inbox (a todo item gets a checkpoint file; an idea none); answers with its number and stable `id`. Never runs anything.",
        input_schema = schema::input::<AddParams>(),
        output_schema = schema::added_output(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn todo_add(
        &self,
        Parameters(p): Parameters<Strict<AddParams>>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
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
            let added = crate::commands::todo::add_item(&args, checkpoint)?;
            // Its id, as the inbox now reads.
            let text = std::fs::read_to_string(&added.inbox).unwrap_or_default();
            let doc = crate::source::todo::TodoDocument::parse(&text);
            let id = doc.item(added.number).map(|i| i.key()).unwrap_or_default();
            Ok(json!({
                "number": added.number,
                "id": id,
                "inbox": added.inbox,
                "checkpoint": added.checkpoint,
                "text": format!("{added}\n"),
            }))
        })
        .await)
    }

    #[tool(
        title = "Resolve confirmed todo items with a team",
        description = "Hand the inbox items the user confirmed to a team: they move to the next todo-N.md and teammates resolve them. `ids` is required (each item's `id` as `todo_list` shows it; an id no open item has any more is refused and nothing runs). Answers with the items it moved (id, title), the team and how to follow it: at once while the team runs in the background (follow it with `status`, interrupt it with `stop`), or with `wait: true` at the run's end (with progress notifications; cancelling the call interrupts the team). With `serve: true` the run's live page is served while it goes on (as `--serve`) and every answer names it in `page_url` (its token included); `notify` tells webhooks, the bell or a command when the run ends or needs a person (as `--notify`). A resolve lasts as long as its slowest item.",
        input_schema = schema::input::<ResolveParams>(),
        output_schema = schema::run_output(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn todo_resolve(
        &self,
        Parameters(p): Parameters<Strict<ResolveParams>>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
        let select = p.select.filter(|s| !s.trim().is_empty());
        let ids = p.ids.filter(|ids| !ids.is_empty());
        let (chosen, what): (Vec<OsString>, String) = match (&ids, &select) {
            (Some(_), Some(_)) => {
                return Ok(refused(
                    "`ids` or `select`: give one, not both (`ids` are the `id`s `todo_list` shows)",
                ));
            }
            (None, None) => {
                return Ok(refused(
                    "`ids` is required: ask the user which inbox items to resolve (`todo_list` shows each item's `id`), then pass those ids, e.g. [\"cp-20260427-143000.md\", \"k-3f2a9c01d4e5\"]",
                ));
            }
            (Some(ids), None) => (
                ids.iter()
                    .map(|id| OsString::from(format!("--id={id}")))
                    .collect(),
                format!("todo_resolve of items {}", ids.join(", ")),
            ),
            (None, Some(select)) => (
                vec!["--select".into(), select.into()],
                format!("todo_resolve of items {select}"),
            ),
        };
        let slot = match self.runs.reserve(&what).await {
            Ok(slot) => slot,
            Err(text) => return Ok(refused(text)),
        };
        let mut args: Vec<OsString> = vec!["resolve".into(), "--yes".into()];
        match store_args(&p.store) {
            Ok(s) => args.extend(s),
            Err(e) => return Ok(refused(e)),
        }
        args.extend(chosen);
        let argv = run_argv(args, &p.team);
        let args = match parse(argv.clone()) {
            Ok(Command::Resolve(a)) => a,
            Ok(_) => return Ok(refused("internal: not `runner resolve`")),
            Err(e) => return Ok(refused(e)),
        };
        Ok(self
            .runs
            .start(
                slot,
                Launch {
                    start: Start::Resolve(Box::new(args)),
                    argv,
                },
                p.team.wait,
                ctx,
                Vec::new(),
            )
            .await)
    }

    #[tool(
        title = "Run a CSV batch with a team",
        description = "Run a CSV batch: one teammate per row with the instruction (`{column}` placeholders), each report checked, results to the output CSV. Answers at once while the team runs in the background (follow it with `status`, interrupt it with `stop`), or with `wait: true` at the run's end (with progress notifications; cancelling the call interrupts the team). With `serve: true` the run's live page is served while it goes on (as `--serve`) and every answer names it in `page_url` (its token included); `notify` tells webhooks, the bell or a command when the run ends or needs a person (as `--notify`). The same call again resumes the batch: nothing that completed runs twice. A refused call writes nothing.",
        input_schema = schema::input::<BatchParams>(),
        output_schema = schema::run_output(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    async fn batch_run(
        &self,
        Parameters(p): Parameters<Strict<BatchParams>>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
        let what = format!("batch_run of {}", p.csv_path);
        let slot = match self.runs.reserve(&what).await {
            Ok(slot) => slot,
            Err(text) => return Ok(refused(text)),
        };
        let argv = match batch_argv(&p, &self.cwd) {
            Ok(a) => a,
            Err(e) => return Ok(refused(e)),
        };
        let line = run_argv(argv.args.clone(), &p.team);
        let args = match parse(line.clone()) {
            Ok(Command::Batch(a)) => a,
            Ok(_) => {
                argv.undo();
                return Ok(refused("internal: not `runner batch`"));
            }
            Err(e) => {
                argv.undo();
                return Ok(refused(e));
            }
        };
        Ok(self
            .runs
            .start(
                slot,
                Launch {
                    start: Start::Batch(Box::new(args)),
                    argv: line,
                },
                p.team.wait,
                ctx,
                argv.written,
            )
            .await)
    }

    #[tool(
        title = "Status of a team",
        description = "The live or last state of a team: counts, running teammates (with what they last said), what failed, and the command that resumes it (as `runner status --brief`); for a team run with best_of, each finished item's `winners` entry (winner, rule, how many candidates passed). A team whose items failed is a status like any other, not an error.",
        input_schema = schema::input::<StatusParams>(),
        output_schema = schema::status_output(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn status(
        &self,
        Parameters(p): Parameters<Strict<StatusParams>>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
        // The team is a path, never a flag (`--watch` is a folder that is not there).
        let args = status_args(p.team.map(PathBuf::from));
        Ok(answer(move || {
            let view = crate::commands::status::team_status(&args)?;
            let code = view.exit_code();
            let s = &view.snapshot;
            let winners: Vec<Value> = s
                .finished
                .iter()
                .chain(&s.earlier_unfinished)
                .filter_map(|e| Some(runs::winner_json(&e.id, e.status, e.best_of.as_ref()?)))
                .collect();
            let mut answer = json!({
                "text": view.text,
                "exit_code": code,
                "state": s.state,
                "counts": s.team_counts(),
            });
            if !winners.is_empty() {
                answer["winners"] = Value::Array(winners);
            }
            Ok(answer)
        })
        .await)
    }

    #[tool(
        title = "Show one item of a team",
        description = "One item of a team: its status, every attempt with its verdict, the report, what the teammate last said, and the end of its log (as `runner show`).",
        input_schema = schema::input::<ShowParams>(),
        output_schema = schema::show_output(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn show(
        &self,
        Parameters(p): Parameters<Strict<ShowParams>>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
        let (item, team) = (p.item, p.team.map(PathBuf::from));
        Ok(
            answer(move || {
                crate::commands::show::item_view(&item, team.as_deref()).map(text_value)
            })
            .await,
        )
    }

    #[tool(
        title = "Stop a running team",
        description = "Stop the team this server is running (started by `batch_run` or `todo_resolve`, in the background or waited for) as Ctrl-C does: running items end `cancelled`, the outputs are written, no teammate is left running. Answers once it has stopped, with the team's status; the same run call resumes it.",
        input_schema = schema::input::<StopParams>(),
        output_schema = schema::stop_output(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn stop(
        &self,
        Parameters(p): Parameters<Strict<StopParams>>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = arguments!(p);
        let Some((what, team)) = self.runs.under_way() else {
            return Ok(refused(
                "no team is running in this server; nothing was stopped (`status` shows a team's state)",
            ));
        };
        if let Some(asked) = &p.team {
            let Some((name, workspace)) = &team else {
                return Ok(refused(format!(
                    "{what} is still starting; call `stop` again in a moment"
                )));
            };
            if !same_team(asked, name, workspace) {
                return Ok(refused(format!(
                    "`team`: {asked} is not the team this server is running ({what}: team {name}, workspace {}); nothing was stopped",
                    workspace.display()
                )));
            }
        }
        self.runs.stop().await;
        let Some((name, workspace)) = team else {
            return Ok(CallToolResult::structured(json!({ "stopped": what })));
        };
        let args = status_args(Some(workspace.clone()));
        let status =
            tokio::task::spawn_blocking(move || crate::commands::status::team_status(&args))
                .await
                .ok()
                .and_then(|r| r.ok())
                .map(|v| v.text);
        Ok(CallToolResult::structured(json!({
            "stopped": what,
            "team": name,
            "workspace": workspace,
            "status": status,
        })))
    }
}

/// The protocol error of a call to a tool the server does not have: its name, the one
/// meant when it is close to one, and the tools there are.
fn unknown_tool(name: &str, tools: &[rmcp::model::Tool]) -> ErrorData {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    ErrorData::invalid_params(
        format!(
            "unknown tool `{name}`{}; the tools are {}",
            crate::suggest::did_you_mean(name, names.iter().copied()),
            names.join(", ")
        ),
        None,
    )
}

#[rmcp::tool_handler]
impl ServerHandler for RunnerTools {
    /// The tool's call; an unknown tool is refused by name ([`unknown_tool`]).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let router = Self::tool_router();
        if !router.has_route(&request.name) {
            return Err(unknown_tool(&request.name, &router.list_all()));
        }
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        let mut server = Implementation::new("teammate-runner", env!("CARGO_PKG_VERSION"));
        server.title = Some("teammate-runner".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(server)
            .with_instructions(
                "teammate-runner: hand the user's todo inbox or a CSV batch to a team of agents. \
                 todo_list and todo_add never run anything; todo_resolve takes the ids of the \
                 items the user confirmed (todo_list shows them). A run lasts as long as its \
                 slowest item: start it in the background, follow it with status, stop it with \
                 stop, and look at one item with show.",
            )
    }
}

/// Serve on stdio until the client closes it or the server is signalled. A client that goes
/// away ends its waited run ([`Runs::shutdown`]); a background run goes on to its end, the
/// server with it, taking no call ([`Runs::client_gone`]); SIGINT, SIGTERM or SIGHUP
/// interrupts whatever runs. The exit code: 130 when a signal interrupted a run, else 0.
///
/// Errors: the protocol's descriptor or a signal handler cannot be set up, or the transport
/// failed (the message says how).
pub(crate) async fn serve(cwd: PathBuf, out: stdio::ProtocolOut) -> crate::error::Result<i32> {
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
            tokio::select! {
                _ = runs.client_gone() => false,
                _ = signals.next() => true,
            }
        }
        _ = signals.next() => true,
    };
    let interrupted = runs.shutdown(signalled).await;
    Ok(if interrupted {
        crate::error::EXIT_INTERRUPTED
    } else {
        crate::error::EXIT_OK
    })
}
