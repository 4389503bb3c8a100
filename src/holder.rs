//! Who holds a lock file ([`crate::fsutil::try_pid_lock`]): its pid and, when it is another
//! machine or container, its host. Below both the lock and the error that names the holder.

use std::fs;

/// Who holds a lock, as its file says (`PID HOST`): a lock on a shared volume may be held
/// from another machine or container, whose pid means nothing here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The holder's pid, when it wrote one.
    pub pid: Option<u32>,
    /// Its host, when it is not this one.
    pub host: Option<String>,
}

impl Holder {
    /// Read a lock file's text `PID HOST`; a missing or unreadable word is `None`, and so
    /// is the host when it is this one.
    pub(crate) fn read(text: &str) -> Holder {
        let mut words = text.split_whitespace();
        let pid = words.next().and_then(|p| p.parse().ok());
        let host = words
            .next()
            .filter(|h| *h != this_host())
            .map(str::to_owned);
        Holder { pid, host }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pid = self.pid.map_or("unknown".to_string(), |p| p.to_string());
        match &self.host {
            None => write!(f, "pid {pid}"),
            Some(host) => write!(
                f,
                "on host {host}, pid {pid} there: another machine or container sharing this folder, whose pid means nothing here"
            ),
        }
    }
}

/// This machine's (or container's) host name, from the kernel (`/proc/sys/kernel/hostname`
/// is per UTS namespace, so each pod has its own); `-` when it cannot be read.
pub(crate) fn this_host() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
            .unwrap_or_else(|| "-".to_owned())
    })
    .clone()
}
