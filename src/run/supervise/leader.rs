//! The leader of an attempt's process group, as the supervisor ([`super::process`]) holds
//! it: the runner's own child (unconfined), or, under `--sandbox landlock`, the keeper the
//! sandbox's keeper server handed it to ([`crate::sandbox::client`]), which is no child of
//! the runner's: its pid comes in its first report and how the agent ended in its last. A
//! keeper serves another attempt once its [`Leader`] is dropped, so the supervisor holds it
//! until it has sent the attempt's group its last signal.
//! Either way the runner signals the group by the leader's pid and drains the agent's
//! stdout and stderr from pipes it reads.

use std::ffi::OsString;
use std::os::fd::{OwnedFd, RawFd};

use tokio::io::AsyncRead;

use super::descendants;
use super::process::Spawn;

/// A pipe the agent writes and the runner drains.
pub(super) type Output = Box<dyn AsyncRead + Unpin + Send>;

/// What the leader is.
enum Kind {
    /// The runner's child.
    Own(tokio::process::Child),
    /// A keeper of the sandbox's server.
    Kept(crate::sandbox::client::Kept),
}

/// A started attempt's leader and its output pipes.
pub(super) struct Leader {
    kind: Kind,
    /// The agent's stdout, until the supervisor takes it to drain.
    pub(super) stdout: Option<Output>,
    /// The agent's stderr, until the supervisor takes it to drain.
    pub(super) stderr: Option<Output>,
    /// The pipes' inodes, to find who holds them after the leader exits.
    pub(super) pipes: Vec<u64>,
}

impl Leader {
    /// The runner's own `child`, spawned with piped stdout and stderr.
    pub(super) fn own(mut child: tokio::process::Child) -> Leader {
        let pipes = [
            child.stdout.as_ref().and_then(descendants::pipe_inode),
            child.stderr.as_ref().and_then(descendants::pipe_inode),
        ]
        .into_iter()
        .flatten()
        .collect();
        let stdout = child.stdout.take().map(|p| Box::new(p) as Output);
        let stderr = child.stderr.take().map(|p| Box::new(p) as Output);
        Leader {
            kind: Kind::Own(child),
            stdout,
            stderr,
            pipes,
        }
    }

    /// The leader's pid (the group's id); `None` when the child's exit was already seen.
    pub(super) fn id(&self) -> Option<u32> {
        match &self.kind {
            Kind::Own(child) => child.id(),
            Kind::Kept(kept) => Some(kept.id()),
        }
    }

    /// The descriptor a keeper's reports come on (`None` for the runner's own child).
    pub(super) fn report_fd(&self) -> Option<RawFd> {
        match &self.kind {
            Kind::Own(_) => None,
            Kind::Kept(kept) => Some(kept.report_fd()),
        }
    }

    /// How the attempt's process ended, as a wait status.
    ///
    /// Errors: the wait failed, or ([`crate::sandbox::client::LOST`]) the keeper server
    /// ended while the attempt ran.
    pub(super) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match &mut self.kind {
            Kind::Own(child) => child.wait().await,
            Kind::Kept(kept) => kept.wait().await,
        }
    }
}

/// Start `spec`'s program confined to writing beneath `writes`, under a keeper of the
/// sandbox's server, with the environment the unconfined spawn would give it and `marker`.
///
/// Errors: the stdin could not be opened (what, and the OS error), or the start failed
/// ([`crate::sandbox::client::start`]).
pub(super) async fn start_confined(
    spec: &Spawn,
    writes: &[std::path::PathBuf],
    marker: &str,
) -> Result<Leader, (String, std::io::Error)> {
    let stdin = spec.stdin.open_fd()?;
    let path = child_path(spec);
    let what = crate::sandbox::client::Confined {
        program: &spec.program,
        args: &spec.args,
        writes,
        cwd: &spec.cwd,
        path: path.as_deref(),
        env: child_env(spec, marker),
    };
    let (kept, out, err) = crate::sandbox::client::start(what, stdin)
        .await
        .map_err(|e| (format!("cannot start `{}`", spec.program), e))?;
    let pipes = [&out, &err]
        .into_iter()
        .filter_map(descendants::pipe_inode)
        .collect();
    let receiver = |fd: OwnedFd| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .map(|r| Box::new(r) as Output)
            .map_err(|e| ("cannot read the agent's output".to_owned(), e))
    };
    Ok(Leader {
        kind: Kind::Kept(kept),
        stdout: Some(receiver(out)?),
        stderr: Some(receiver(err)?),
        pipes,
    })
}

/// The environment the spawn gives the child: the runner's, without `spec.env_unset`, with
/// `spec.env_set` and the attempt's marker.
fn child_env(spec: &Spawn, marker: &str) -> Vec<(OsString, OsString)> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for k in &spec.env_unset {
        env.remove(std::ffi::OsStr::new(k));
    }
    for (k, v) in &spec.env_set {
        env.insert(OsString::from(k), v.clone());
    }
    env.insert(
        OsString::from(descendants::ATTEMPT_VAR),
        OsString::from(marker),
    );
    env.into_iter().collect()
}

/// The `PATH` the child looks its program up in: the one the spawn sets, else the runner's
/// unless the spawn removes it.
pub(super) fn child_path(spec: &Spawn) -> Option<OsString> {
    match spec.env_set.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(v.clone()),
        None if spec.env_unset.iter().any(|k| k == "PATH") => None,
        None => std::env::var_os("PATH"),
    }
}
