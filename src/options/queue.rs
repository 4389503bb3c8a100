//! `--queue redis://HOST[:PORT][/DB]` (BATCH.md `queue:`): the Redis (or Valkey) server whose
//! shared work queue this run's items come from ([`crate::queue`]). `rediss://` connects over
//! TLS. The URL may carry a password (`redis://:PASSWORD@HOST`); it is never shown.

use std::fmt;
use std::str::FromStr;

/// A checked queue URL: `redis://` or `rediss://`, a host, an optional port and database
/// number, nothing else. [`fmt::Display`] shows it with its password redacted; only
/// [`QueueUrl::secret_url`] hands the whole URL to the client.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct QueueUrl {
    url: String,
    shown: String,
    /// `--queue-ca FILE`: the PEM certificates a `rediss://` server's certificate must chain
    /// to instead of the system's roots.
    ca: Option<std::path::PathBuf>,
}

impl QueueUrl {
    /// The rule, for messages.
    pub(crate) const RULE: &'static str =
        "redis://[:PASSWORD@]HOST[:PORT][/DB] (or rediss:// for TLS)";

    /// The URL as typed, password included: for the Redis client only, never for a message.
    pub(crate) fn secret_url(&self) -> &str {
        &self.url
    }

    /// This URL trusting the CA certificates in `ca` (`--queue-ca`; `None` keeps its own).
    pub(crate) fn with_ca(mut self, ca: Option<std::path::PathBuf>) -> QueueUrl {
        if ca.is_some() {
            self.ca = ca;
        }
        self
    }

    /// The `--queue-ca` file, if one was given.
    pub(crate) fn ca(&self) -> Option<&std::path::Path> {
        self.ca.as_deref()
    }

    /// The `redis-cli` command line reaching this server and database, for messages:
    /// `redis-cli -h HOST -p PORT [-n DB] [--tls] [--user NAME] [-a PASSWORD]` — the word
    /// PASSWORD, for the user to replace, never the URL's.
    pub(crate) fn cli(&self) -> String {
        let Ok(u) = reqwest::Url::parse(self.url.trim()) else {
            return "redis-cli".to_owned();
        };
        let mut cmd = format!(
            "redis-cli -h {} -p {}",
            u.host_str().unwrap_or("127.0.0.1"),
            u.port().unwrap_or(6379)
        );
        let db = u.path().trim_start_matches('/');
        if !db.is_empty() {
            cmd.push_str(&format!(" -n {db}"));
        }
        if self.tls() {
            cmd.push_str(" --tls");
        }
        if !u.username().is_empty() {
            cmd.push_str(&format!(" --user {}", u.username()));
        }
        if u.password().is_some() {
            cmd.push_str(" -a PASSWORD");
        }
        cmd
    }

    /// Whether it connects over TLS (`rediss://`).
    pub(crate) fn tls(&self) -> bool {
        self.url.starts_with("rediss://")
    }
}

impl fmt::Display for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueUrl({})", self.shown)
    }
}

impl FromStr for QueueUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<QueueUrl, String> {
        let text = text.trim();
        let bad = |why: &str| format!("not a queue URL ({why}); give {}", QueueUrl::RULE);
        let u = reqwest::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        if !matches!(u.scheme(), "redis" | "rediss") {
            return Err(bad(&format!("the scheme is `{}`", u.scheme())));
        }
        let host = u
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        let db = u.path().trim_start_matches('/');
        if !db.is_empty() && db.parse::<u16>().is_err() {
            return Err(bad(&format!("`/{db}` is not a database number")));
        }
        if u.query().is_some() || u.fragment().is_some() {
            return Err(bad("it has a query or fragment"));
        }
        let user = match (u.username(), u.password().is_some()) {
            ("", false) => String::new(),
            ("", true) => ":REDACTED@".to_owned(),
            (name, false) => format!("{name}@"),
            (name, true) => format!("{name}:REDACTED@"),
        };
        let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
        let db = if db.is_empty() {
            String::new()
        } else {
            format!("/{db}")
        };
        Ok(QueueUrl {
            url: text.to_owned(),
            shown: format!("{}://{user}{host}{port}{db}", u.scheme()),
            ca: None,
        })
    }
}

/// The parser of `--queue` (`batch`, `collect`, `status`): [`QueueUrl`]'s rules, and a
/// refusal that shows the value with its user info hidden — clap's own message for a value
/// its parser refuses repeats the value as typed, password included.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueUrlParser;

impl clap::builder::TypedValueParser for QueueUrlParser {
    type Value = QueueUrl;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<QueueUrl, clap::Error> {
        let text = value.to_string_lossy();
        text.parse().map_err(|why: String| {
            let flag = arg.map_or_else(|| "--queue".to_owned(), ToString::to_string);
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{flag}': {why}\n",
                    without_user_info(&text)
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// `text` with all before its last `@` back to its scheme (a URL's user name and password)
/// hidden: `redis://REDACTED@host`. Text without an `@` is returned as it is.
fn without_user_info(text: &str) -> String {
    match text.rsplit_once('@') {
        None => text.to_owned(),
        Some((head, tail)) => match head.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://REDACTED@{tail}"),
            None => format!("REDACTED@{tail}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown_and_other_urls_are_refused() {
        let q: QueueUrl = "redis://:s3cret-pass@cache.local:6380/2"
            .parse()
            .expect("a queue URL");
        assert_eq!(q.to_string(), "redis://:REDACTED@cache.local:6380/2");
        assert!(!format!("{q:?}").contains("s3cret"));
        assert_eq!(q.secret_url(), "redis://:s3cret-pass@cache.local:6380/2");
        let q: QueueUrl = "rediss://worker:pw@h".parse().expect("a queue URL");
        assert_eq!(q.to_string(), "rediss://worker:REDACTED@h");
        for bad in [
            "http://h",
            "redis://",
            "redis://h/x",
            "redis://h/0?p=1",
            "h:6379",
        ] {
            assert!(bad.parse::<QueueUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn redis_cli_is_named_with_the_url_s_server_and_database_never_its_password() {
        let q: QueueUrl = "redis://:s3cret@cache.local:6380/2"
            .parse()
            .expect("a queue URL");
        assert_eq!(q.cli(), "redis-cli -h cache.local -p 6380 -n 2 -a PASSWORD");
        let q: QueueUrl = "rediss://w:pw@h".parse().expect("a queue URL");
        assert_eq!(q.cli(), "redis-cli -h h -p 6379 --tls --user w -a PASSWORD");
    }

    #[test]
    fn a_refused_url_is_shown_without_its_user_info() {
        assert_eq!(without_user_info("http://:pw@h:1"), "http://REDACTED@h:1");
        assert_eq!(
            without_user_info("redis://u:p@ss@h/x"),
            "redis://REDACTED@h/x"
        );
        assert_eq!(without_user_info("u:pw@h"), "REDACTED@h");
        assert_eq!(without_user_info("redis://h:1/x"), "redis://h:1/x");
    }
}
