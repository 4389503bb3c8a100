//! Where a supervised child starts: the leader of a process group of its own, so that one
//! signal reaches everything it started inside the group; and, when the runner has a
//! controlling terminal, of a session of its own as well, so that the child has none (issue
//! 50: an agent that opened `/dev/tty` for a password prompt sat stopped by `SIGTTIN` until
//! its time limit). Confined children get their session from the keeper
//! ([`crate::sandbox::shim`]).

use std::os::unix::fs::OpenOptionsExt;
use std::sync::LazyLock;

/// Whether this process has a controlling terminal: `/dev/tty` opens only then (`ENXIO`
/// otherwise). Looked at once: a run that starts without one never gains one.
static HAS_TERMINAL: LazyLock<bool> = LazyLock::new(|| {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOCTTY)
        .open("/dev/tty")
        .is_ok()
});

/// Make `cmd`'s child the leader of a new process group (its pid is the group's id) and,
/// when the runner has a controlling terminal, of a new session. Without a terminal a new
/// session would change nothing a child can see, and the plain group keeps the spawn on
/// `posix_spawn` (no `fork` of the runner's address space: see BENCHMARKS.md).
pub(crate) fn lead_own_group(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    match *HAS_TERMINAL {
        true => crate::sandbox::shim::new_session(cmd),
        false => {
            cmd.process_group(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child leads its own group either way, and its session is its own exactly when
    /// the runner has a terminal (in a test run that depends on how the tests were started,
    /// so the outcome is checked against what the test process has).
    #[test]
    fn the_child_leads_its_group_and_a_session_when_there_is_a_terminal() {
        let mut cmd = std::process::Command::new("sh");
        // Fields 1, 5 and 6 of /proc/PID/stat: pid, process group, session (`sh` has no
        // space in its name).
        cmd.args(["-c", "cut -d' ' -f1,5,6 /proc/$$/stat"]);
        lead_own_group(&mut cmd);
        let out = cmd.output().expect("sh");
        let text = String::from_utf8_lossy(&out.stdout);
        let ids: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(ids.len(), 3, "{text}");
        assert_eq!(ids[0], ids[1], "the group leader: {text}");
        assert_eq!(ids[0] == ids[2], *HAS_TERMINAL, "the session: {text}");
    }
}
