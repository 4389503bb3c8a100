//! Fault injection for crash tests: `RUNNER_FAULT=<point>` makes the runner abort (as if
//! killed) at that named point, so tests can check that a crash there loses nothing. Unset,
//! it costs one environment lookup per point.

/// Abort the process if `RUNNER_FAULT` names `point`.
pub fn point(point: &str) {
    if std::env::var_os("RUNNER_FAULT").is_some_and(|v| v == point) {
        eprintln!("runner: fault injected at {point}");
        std::process::abort();
    }
}
