//! `--isolate` / `isolate`: whether each teammate works in its own git worktree.

use std::str::FromStr;

/// `--isolate none|worktree`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Teammates share the working tree (the default).
    #[default]
    None,
    /// Each teammate works in its own git worktree and branch.
    Worktree,
}

impl Isolation {
    /// What `--isolate` / `isolate` must be.
    pub(crate) const RULE: &'static str = "must be none or worktree";
}

/// `none` or `worktree`, exactly (a flag's text is trimmed by the caller).
impl FromStr for Isolation {
    /// [`Isolation::RULE`].
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Isolation, &'static str> {
        match text {
            "none" => Ok(Isolation::None),
            "worktree" => Ok(Isolation::Worktree),
            _ => Err(Isolation::RULE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_is_none_or_worktree() {
        assert_eq!("none".parse(), Ok(Isolation::None));
        assert_eq!("worktree".parse(), Ok(Isolation::Worktree));
        assert_eq!("yes".parse::<Isolation>(), Err(Isolation::RULE));
    }
}
