//! Fault injection for crash tests: `RUNNER_FAULT=<point>` makes the runner abort (as if
//! killed) at that named point, so tests can check that a crash there loses nothing. Unset,
//! it costs one environment lookup per point.

/// Abort the process if `RUNNER_FAULT` names `point`.
pub(crate) fn point(point: &str) {
    if std::env::var_os("RUNNER_FAULT").is_some_and(|v| v == point) {
        eprintln!("runner: fault injected at {point}");
        std::process::abort();
    }
}

/// Stop the process (SIGSTOP) if `RUNNER_PAUSE` names `point`, so an interleaving test can
/// act while the runner stands still at exactly this step, then continue it with SIGCONT.
/// Unset, it costs one environment lookup per point.
pub(crate) fn pause(point: &str) {
    if std::env::var_os("RUNNER_PAUSE").is_some_and(|v| v == point) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }
}
