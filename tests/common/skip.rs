//! The one way a test skips for missing software (a real agent CLI, the example validators,
//! Chromium, `script`, a kernel with Landlock): [`skip`] prints a `skipped: …` notice and the
//! test returns early, passing. With `RUNNER_TEST_REQUIRE_ALL` set (`.ci/run` sets it) the
//! same words fail the test instead, so a broken install turns CI red rather than green.
//!
//! Shared by the test crates `tests/runner` and `tests/e2e` through `#[path]`.

/// The switch: set to anything but empty or `0`, every skip is a failure.
pub(crate) const REQUIRE_ALL: &str = "RUNNER_TEST_REQUIRE_ALL";

/// Whether [`REQUIRE_ALL`] is on in this process's environment.
pub(crate) fn required() -> bool {
    std::env::var_os(REQUIRE_ALL).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Skip the calling test because of `why` (what is missing, and how to get it): print
/// `skipped: <why>` on stderr, or panic with the same words when [`REQUIRE_ALL`] is on. The
/// caller returns (or leaves out the part that needs the software) after it.
#[track_caller]
pub(crate) fn skip(why: impl std::fmt::Display) {
    if required() {
        panic!("skipped: {why} ({REQUIRE_ALL} is set, so a skip fails the test)");
    }
    eprintln!("skipped: {why}");
}
