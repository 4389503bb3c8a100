//! Steps every command that runs teammates shares: build the run spec, run the dispatcher
//! on a runtime, and turn the summary into an exit code.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::config::{self, RunOptions};
use crate::error::{EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, Error, Result};
use crate::prompt::TeammateTemplate;
use crate::report::ItemStatus;
use crate::run::RunSpec;
use crate::run::dispatcher::{self, ItemStream};
use crate::run::events::{Reporter, RunSummary};
use crate::run::team::Team;

/// Assemble the run spec from validated options and the run's places.
pub fn run_spec(
    opts: RunOptions,
    team: String,
    workspace: PathBuf,
    cwd: PathBuf,
    template: TeammateTemplate,
    schema: Option<(Value, jsonschema::Validator)>,
) -> Arc<RunSpec> {
    Arc::new(RunSpec {
        team,
        workspace,
        cwd,
        jobs: opts.jobs,
        timeout: opts.timeout,
        grace: opts.grace,
        pipe_wait: config::PIPE_WAIT,
        retries: opts.retries,
        retry_on: opts.retry_on,
        retry_delay: opts.retry_delay,
        log_cap: opts.log_cap,
        runner: opts.runner,
        command: opts.command,
        model: opts.model,
        agent_args: opts.agent_args,
        vars: opts.vars,
        template,
        schema,
        verify: opts.verify,
    })
}

/// Run the dispatcher to the end on a multi-threaded runtime.
///
/// Errors: the runtime cannot start, or the dispatcher failed (journal unwritable, source
/// unreadable).
pub fn execute(
    spec: Arc<RunSpec>,
    team: &mut Team,
    items: ItemStream,
    total: Option<u64>,
    reporter: &mut dyn Reporter,
) -> Result<RunSummary> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(dispatcher::run(spec, team, items, total, reporter))
}

/// The exit code of a finished run (DESIGN §7).
pub fn exit_code(s: &RunSummary) -> i32 {
    if s.interrupted {
        EXIT_INTERRUPTED
    } else if s.count(ItemStatus::Completed) == s.total() {
        EXIT_OK
    } else {
        EXIT_INCOMPLETE
    }
}

/// Today's date in local time, `YYYY-MM-DD`.
pub fn today() -> String {
    jiff::Zoned::now().strftime("%Y-%m-%d").to_string()
}
