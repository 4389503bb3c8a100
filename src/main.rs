//! The `runner` binary: everything is in the library's [`teammate_runner::run_from_args`].

fn main() {
    std::process::exit(teammate_runner::run_from_args());
}
