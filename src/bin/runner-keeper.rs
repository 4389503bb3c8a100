//! `runner-keeper`: the keeper server of a run under `--sandbox landlock`, which forks the
//! keeper of each confined attempt; started by the runner (never by hand); everything is in
//! the library's [`teammate_runner::keeper_main`].

fn main() {
    teammate_runner::keeper_main()
}
