//! What an attempt's process reads on its stdin ([`Stdin`]): nothing, a file, the prompt
//! held in memory as a sealed in-memory file, or — for a CLI that reads only a pipe — the
//! prompt through a pipe a thread of the runner writes and closes.

use std::process::Stdio;

/// What a child reads on its stdin.
#[derive(Debug, Clone, Default)]
pub(crate) enum Stdin {
    /// `/dev/null`.
    #[default]
    Null,
    /// A file, opened read-only (like `cmd < file`): the child reads it at its own pace and
    /// never waits on the runner to feed a pipe (the supervisor's tests; a run hands prompts
    /// over as `Text`).
    #[cfg(test)]
    File(std::path::PathBuf),
    /// This text, in a sealed in-memory file (`memfd_create`, then `F_SEAL_WRITE`): to the
    /// child it is a read-only file like the one above, at its own pace; nothing is written
    /// to disk and nothing in a teammate's reach can change it (DESIGN §6b: the runner's
    /// records are handed to the teammate as open descriptors).
    Text(std::sync::Arc<str>),
    /// This text through a pipe (`prompt = "pipe"`, as with `cat prompt.md |`): a thread
    /// writes it and closes the pipe, so the child reads it and then end of input. A child
    /// that exits without reading it all ends the write (broken pipe), and so the thread.
    Pipe(std::sync::Arc<str>),
}

/// A pipe's read end that yields `text`, then end of input ([`Stdin::Pipe`]).
fn piped_text(text: std::sync::Arc<str>) -> std::io::Result<std::io::PipeReader> {
    use std::io::Write;
    let (reader, mut writer) = std::io::pipe()?;
    std::thread::Builder::new()
        .name("runner-prompt-pipe".into())
        .spawn(move || {
            // A child that stops reading early closes its end: the write fails, which is
            // its choice, not an error of the run.
            let _ = writer.write_all(text.as_bytes());
        })?;
    Ok(reader)
}

/// A sealed in-memory file holding `text`, positioned at its start ([`Stdin::Text`]).
fn sealed_text(text: &str) -> std::io::Result<std::fs::File> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::{Seek, Write};
    let fd = memfd_create(
        c"runner-prompt",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes())?;
    file.rewind()?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    Ok(file)
}

impl Stdin {
    /// The child's stdin, opened.
    ///
    /// Errors: what could not be opened (`cannot open <path>`, or the prompt could not be
    /// handed over in memory), with the OS error.
    pub(super) fn open(&self) -> Result<Stdio, (String, std::io::Error)> {
        Ok(match self {
            Stdin::Null => Stdio::null(),
            _ => Stdio::from(self.open_fd()?),
        })
    }

    /// The child's stdin, opened as a descriptor (`/dev/null` for [`Stdin::Null`]): what a
    /// confined attempt hands the keeper server.
    ///
    /// Errors: as [`Stdin::open`].
    pub(super) fn open_fd(&self) -> Result<std::os::fd::OwnedFd, (String, std::io::Error)> {
        Ok(match self {
            Stdin::Null => std::fs::File::open("/dev/null")
                .map_err(|e| ("cannot open /dev/null".to_owned(), e))?
                .into(),
            #[cfg(test)]
            Stdin::File(path) => std::fs::File::open(path)
                .map_err(|e| (format!("cannot open {}", path.display()), e))?
                .into(),
            Stdin::Text(text) => sealed_text(text)
                .map_err(|e| ("cannot hand the prompt over in memory".to_owned(), e))?
                .into(),
            Stdin::Pipe(text) => piped_text(text.clone())
                .map_err(|e| ("cannot hand the prompt over through a pipe".to_owned(), e))?
                .into(),
        })
    }
}
