//! The `runner` command line, start to end: the sandbox keeper's fallback entry, the
//! flags, diagnostics on stderr (`tracing`), one command, and its error as an exit code
//! (DESIGN §7). `main.rs` only calls [`run`].

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands;

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUNNER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi);
    // Asked for diagnostics (-v, RUNNER_LOG): timestamped lines. Otherwise the few warnings
    // read like the runner's other messages: `warning: ...`.
    let _ = match verbose > 0 || std::env::var_os("RUNNER_LOG").is_some() {
        true => builder.try_init(),
        false => builder.event_format(Plain).try_init(),
    };
}

/// `warning: MESSAGE` (the level in lower case, then the event's fields), as the runner's
/// own messages print.
struct Plain;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Plain
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(w, "{level}: ")?;
        tracing_subscriber::fmt::FormatFields::format_fields(ctx, w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The `runner` command line: parse the flags, run the command and map its error to an exit
/// code (DESIGN §7). Returns the process exit code.
pub(crate) fn run() -> i32 {
    // The sandbox's keeper when `runner-keeper` is not installed beside this binary: not part
    // of the command line users see (help, completions, man page).
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| a == crate::sandbox::keeper::KEEPER_ARG)
    {
        crate::sandbox::keeper::main(args);
    }
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    // As many descriptors as the hard limit allows (DESIGN §6); `--jobs` is capped to them.
    crate::run::supervise::descriptors::raise_soft_limit();
    let result = match cli.command {
        Command::Batch(args) => commands::batch::run(args),
        Command::List(args) => commands::todo::list(args),
        Command::Add(args) => commands::todo::add(args),
        Command::Resolve(args) => commands::resolve::resolve(args),
        Command::Run(args) => commands::todo_run::run(args),
        Command::Fragments(args) => commands::fragments::fragments(args),
        Command::Apply(args) => commands::fragments::apply(args),
        Command::Reset(args) => commands::reset::reset(args),
        Command::Runners(args) => commands::runners::runners(args),
        Command::Merge(args) => commands::merge::merge(args),
        Command::Collect(args) => commands::collect::collect(args),
        Command::Status(args) => commands::status::status(args),
        Command::Clean(args) => commands::clean::clean(args),
        Command::Review(args) => commands::review::review(args),
        Command::Accept(args) => commands::review::accept(args),
        Command::Reject(args) => commands::review::reject(args),
        Command::Show(args) => commands::show::show(args),
        Command::Logs(args) => commands::show::logs(args),
        Command::Pick(args) => commands::pick::pick(args),
        Command::Report(args) => commands::report::report(args),
        Command::Serve(args) => commands::serve::serve(args),
        Command::Completions(args) => commands::docs::completions(args),
        Command::Man => commands::docs::man(),
        Command::Mcp => crate::mcp::command::mcp(),
        Command::Skill(crate::cli::SkillCommand::Install(args)) => commands::skill::install(args),
    };
    // The run's keeper server, if it started one, ends with it (DESIGN §10).
    crate::sandbox::client::shutdown();
    match result {
        Ok(code) => code,
        Err(e) => {
            // An error may quote an item, a title or a file's line: shown, never obeyed.
            eprintln!("error: {}", crate::ui::terminal_safe(&e.to_string()));
            e.exit_code()
        }
    }
}
