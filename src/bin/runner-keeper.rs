//! `runner-keeper`: the keeper of one attempt under `--sandbox landlock`, started by the
//! runner (never by hand); everything is in the library's [`teammate_runner::keeper_main`].

fn main() {
    teammate_runner::keeper_main()
}
