//! Running a short command to its end and keeping what it printed ([`capture`]): the
//! version probe of `runner runners` (`--version`), in its own process group, with nothing
//! it started left behind.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::descendants;
use super::process::GroupGuard;

/// Most bytes of each stream [`capture`] keeps (the rest is read and dropped).
pub(crate) const CAPTURE_MAX: usize = 64 * 1024;
/// How long [`capture`] waits for the pipes to close after the program exits (a grandchild
/// may hold them) before it ends the group.
const CAPTURE_PIPE_WAIT: Duration = Duration::from_millis(500);

/// What a short command printed, from [`capture`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Output {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its stdout, lossily decoded, at most [`CAPTURE_MAX`] bytes.
    pub stdout: String,
    /// Its stderr, lossily decoded, at most [`CAPTURE_MAX`] bytes.
    pub stderr: String,
}

/// Why [`capture`] has no output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaptureError {
    /// The program could not be started.
    #[error("cannot run: {0}")]
    Spawn(std::io::Error),
    /// Waiting for it failed.
    #[error("cannot wait: {0}")]
    Wait(std::io::Error),
    /// It did not exit within the time limit (its group was killed).
    #[error("no answer in {}s", .0.as_secs())]
    TimedOut(Duration),
}

/// Run a short command to its end and keep what it printed, for questions such as
/// `--version`: argv (no shell), stdin /dev/null, in its own process group; stdout and stderr
/// are drained concurrently (so a chatty program never blocks on a full pipe), each kept up
/// to [`CAPTURE_MAX`] bytes. It gets `timeout` to exit; after it exits its pipes get a short
/// bounded wait. The whole group is killed before this returns, so nothing it started
/// outlives it. Blocking: call it from a plain thread, not from async code.
///
/// Errors: [`CaptureError::Spawn`] when it cannot start, [`CaptureError::TimedOut`] when it
/// did not exit in time, [`CaptureError::Wait`] when waiting for it failed.
pub(crate) fn capture(
    program: &Path,
    args: &[String],
    timeout: Duration,
) -> Result<Output, CaptureError> {
    use std::sync::mpsc;
    let mut cmd = std::process::Command::new(program);
    super::session::lead_own_group(&mut cmd);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, registered) = descendants::spawn_registered(|| cmd.spawn(), |c| Some(c.id()))
        .map_err(CaptureError::Spawn)?;
    let started = Instant::now();
    let group = GroupGuard {
        pgid: Pid::from_raw(child.id() as i32),
        marker: None,
    };
    let (tx, streams) = mpsc::channel::<(usize, Vec<u8>)>();
    let mut readers = 0;
    let pipes: [Option<Box<dyn std::io::Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ];
    for (i, pipe) in pipes.into_iter().enumerate() {
        let Some(pipe) = pipe else { continue };
        readers += 1;
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, read_bounded(pipe, CAPTURE_MAX)));
        });
    }
    drop(tx);
    let (exited_tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait();
        drop(registered);
        let _ = exited_tx.send(status);
    });
    let status = match exited.recv_timeout(timeout) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(CaptureError::Wait(e)),
        Err(_) => {
            // Dropping the guard kills the group; the waiter thread then reaps the child.
            drop(group);
            return Err(CaptureError::TimedOut(timeout));
        }
    };
    let mut out = [Vec::new(), Vec::new()];
    let mut collect = |until: Instant, readers: &mut usize| {
        while *readers > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match streams.recv_timeout(left) {
                Ok((i, bytes)) => {
                    out[i] = bytes;
                    *readers -= 1;
                }
                Err(_) => break,
            }
        }
    };
    let left = timeout.saturating_sub(started.elapsed());
    collect(Instant::now() + CAPTURE_PIPE_WAIT.min(left), &mut readers);
    // Killing the group closes the pipes its members still hold; a process that left the
    // group cannot keep us waiting longer than a moment.
    drop(group);
    collect(Instant::now() + CAPTURE_PIPE_WAIT, &mut readers);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(Output {
        code: status.code(),
        stdout: text(&out[0]),
        stderr: text(&out[1]),
    })
}

/// Read `pipe` to its end, keeping its first `max` bytes.
fn read_bounded(mut pipe: impl std::io::Read, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_both_streams_and_the_exit_code() {
        let out = capture(
            Path::new("sh"),
            &["-c".into(), "echo v1.2.3; echo warn >&2; exit 3".into()],
            Duration::from_secs(20),
        )
        .expect("runs");
        assert_eq!(
            out,
            Output {
                code: Some(3),
                stdout: "v1.2.3\n".into(),
                stderr: "warn\n".into()
            }
        );
        assert!(matches!(
            capture(Path::new("/nonexistent/prog"), &[], Duration::from_secs(1)),
            Err(CaptureError::Spawn(_))
        ));
    }

    #[test]
    fn capture_never_blocks_on_a_chatty_program_and_caps_what_it_keeps() {
        // 1 MB on each stream: far more than a pipe holds, so both must be drained at once.
        let script =
            "head -c 1000000 /dev/zero | tr '\\0' e >&2; head -c 1000000 /dev/zero | tr '\\0' o";
        let out = capture(
            Path::new("sh"),
            &["-c".into(), script.into()],
            Duration::from_secs(20),
        )
        .expect("runs to its end");
        assert_eq!(out.code, Some(0));
        assert_eq!(
            (out.stdout.len(), out.stderr.len()),
            (CAPTURE_MAX, CAPTURE_MAX)
        );
        assert!(out.stdout.bytes().all(|b| b == b'o'));
    }

    #[test]
    fn capture_stops_at_its_time_limit_and_leaves_no_process_behind() {
        let started = Instant::now();
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let e = capture(
            Path::new("sh"),
            &["-c".into(), script],
            Duration::from_millis(300),
        )
        .expect_err("it never exits");
        assert!(matches!(e, CaptureError::TimedOut(_)), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid = std::fs::read_to_string(&pid_file).expect("pid written");
        assert!(gone(pid.trim()), "the group's sleep {pid} survived");

        // A grandchild that keeps the pipes open does not hold the answer back either.
        let started = Instant::now();
        let script = format!("sleep 30 & echo $! > {}; echo v9", pid_file.display());
        let out = capture(
            Path::new("sh"),
            &["-c".into(), script],
            Duration::from_secs(20),
        )
        .expect("runs");
        assert_eq!(out.stdout, "v9\n");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid = std::fs::read_to_string(&pid_file).expect("pid written");
        assert!(gone(pid.trim()), "the grandchild {pid} survived");
    }

    /// Whether process `pid` has ended (gone, or a zombie awaiting its reaper), waiting up to
    /// two seconds for it.
    fn gone(pid: &str) -> bool {
        let stat = format!("/proc/{pid}/stat");
        for _ in 0..200 {
            match std::fs::read_to_string(&stat) {
                Err(_) => return true,
                Ok(s)
                    if s.rsplit(')')
                        .next()
                        .is_some_and(|r| r.trim_start().starts_with('Z')) =>
                {
                    return true;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        false
    }
}
