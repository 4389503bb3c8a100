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
}
