//! What the runner and an attempt's keeper say to each other over the attempt's socket
//! (DESIGN §10): the runner's [`Request`] (what to start, where, with what environment and
//! which paths it may write), then the keeper's [`Report`]s: its pid once it runs, and how
//! the agent ended (or that the keeper server was lost).
//!
//! A request is a little-endian `u32` byte count, then records, each a tag byte and a
//! NUL-terminated string: `C` the working directory, `W` a path the agent may write, `X` the
//! executable, `A` an argument (the first is `argv[0]`), `E` a `NAME=value` of the
//! environment. None of them can hold a NUL (the kernel takes none in a path, an argument
//! or a variable). A report is 8 bytes: a little-endian `u32` tag and an `i32` value.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The largest request a keeper reads, bytes (an environment and command line beyond this
/// would not pass `execve`'s limits either).
pub(crate) const MAX_REQUEST: usize = 16 * 1024 * 1024;

/// What the runner asks the keeper server to start for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The agent's working directory.
    pub cwd: CString,
    /// The paths the agent may write beneath (its Landlock grants).
    pub writes: Vec<PathBuf>,
    /// The absolute path of the program to exec (resolved by the runner).
    pub executable: CString,
    /// Its argv, `argv[0]` first (never empty).
    pub argv: Vec<CString>,
    /// Its whole environment, as `NAME=value`.
    pub env: Vec<CString>,
}

impl Request {
    /// The request as sent: its byte count, then its records.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let mut record = |tag: u8, bytes: &[u8]| {
            body.push(tag);
            body.extend_from_slice(bytes);
            body.push(0);
        };
        record(b'C', self.cwd.as_bytes());
        for w in &self.writes {
            record(b'W', w.as_os_str().as_bytes());
        }
        record(b'X', self.executable.as_bytes());
        for a in &self.argv {
            record(b'A', a.as_bytes());
        }
        for e in &self.env {
            record(b'E', e.as_bytes());
        }
        let mut out = u32::try_from(body.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes()
            .to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Read a request's records (`body`: the bytes after the count).
    ///
    /// Errors: a record without its NUL, an unknown tag, no working directory, executable
    /// or argument.
    pub(crate) fn decode(body: &[u8]) -> Result<Request, String> {
        let mut cwd = None;
        let mut executable = None;
        let (mut writes, mut argv, mut env) = (Vec::new(), Vec::new(), Vec::new());
        let mut rest = body;
        while let Some((&tag, tail)) = rest.split_first() {
            let end = tail
                .iter()
                .position(|b| *b == 0)
                .ok_or("a request record without its end")?;
            let text = CString::new(&tail[..end]).map_err(|_| "a NUL inside a record")?;
            rest = &tail[end + 1..];
            match tag {
                b'C' => cwd = Some(text),
                b'W' => writes.push(PathBuf::from(std::ffi::OsStr::from_bytes(text.as_bytes()))),
                b'X' => executable = Some(text),
                b'A' => argv.push(text),
                b'E' => env.push(text),
                other => return Err(format!("an unknown request record `{}`", other as char)),
            }
        }
        match (cwd, executable, argv.is_empty()) {
            (Some(cwd), Some(executable), false) => Ok(Request {
                cwd,
                writes,
                executable,
                argv,
                env,
            }),
            _ => Err("a request without its directory, program or arguments".into()),
        }
    }
}

/// What the keeper of one attempt tells the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The keeper runs, with this pid: the leader of the attempt's process group.
    Started(i32),
    /// The agent exited with this code (3 or 127 when it could not be confined or exec'd,
    /// with a line on its stderr).
    Exited(i32),
    /// The agent was killed by this signal.
    Signalled(i32),
    /// The keeper server ended while the attempt ran: the keeper killed the attempt's tree.
    Lost,
}

impl Report {
    /// The report's 8 bytes.
    pub(crate) fn encode(self) -> [u8; 8] {
        let (tag, value): (u32, i32) = match self {
            Report::Started(pid) => (1, pid),
            Report::Exited(code) => (2, code),
            Report::Signalled(sig) => (3, sig),
            Report::Lost => (4, 0),
        };
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&tag.to_le_bytes());
        out[4..].copy_from_slice(&value.to_le_bytes());
        out
    }

    /// Read a report; `None` for a tag no keeper writes.
    pub(crate) fn decode(bytes: [u8; 8]) -> Option<Report> {
        let [t0, t1, t2, t3, v0, v1, v2, v3] = bytes;
        let value = i32::from_le_bytes([v0, v1, v2, v3]);
        match u32::from_le_bytes([t0, t1, t2, t3]) {
            1 => Some(Report::Started(value)),
            2 => Some(Report::Exited(value)),
            3 => Some(Report::Signalled(value)),
            4 => Some(Report::Lost),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written_with_empty_arguments_and_odd_bytes() {
        let req = Request {
            cwd: c"/w/a b".into(),
            writes: vec![PathBuf::from("/w/a b"), PathBuf::from("/tmp/\u{e9}")],
            executable: c"/bin/sh".into(),
            argv: vec![c"sh".into(), c"-c".into(), c"".into(), c"echo hi".into()],
            env: vec![c"A=1".into(), c"B=".into()],
        };
        let bytes = req.encode();
        let count = u32::from_le_bytes(bytes[..4].try_into().expect("count")) as usize;
        assert_eq!(count, bytes.len() - 4);
        assert_eq!(Request::decode(&bytes[4..]), Ok(req));
    }

    #[test]
    fn a_broken_request_is_refused() {
        assert!(Request::decode(b"C/w\0X/bin/sh\0").is_err(), "no argv");
        assert!(Request::decode(b"C/w\0X/bin/sh\0Ash").is_err(), "no end");
        assert!(Request::decode(b"Z/w\0").is_err(), "unknown tag");
        assert!(Request::decode(b"C/w\0X/bin/sh\0Ash\0").is_ok());
    }

    #[test]
    fn reports_read_back() {
        for r in [
            Report::Started(42),
            Report::Exited(127),
            Report::Signalled(9),
            Report::Lost,
        ] {
            assert_eq!(Report::decode(r.encode()), Some(r));
        }
        assert_eq!(Report::decode([9, 0, 0, 0, 0, 0, 0, 0]), None);
    }
}
