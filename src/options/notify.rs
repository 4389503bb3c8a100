//! `--notify` / `notify`: where a run says that it ended, that items wait for a person, or
//! that the team stopped itself (issue 53). One target per flag or list entry.

use std::str::FromStr;

/// One place notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotifyTarget {
    /// `http://…` or `https://…`: a JSON POST with a `text` field (what Slack, Discord's
    /// `/slack` endpoint and Mattermost incoming webhooks accept).
    Webhook(reqwest::Url),
    /// `bell`: the terminal's bell on stderr, when stderr is a terminal.
    Bell,
    /// Anything else: a command line (split as a shell would, never run by one), started
    /// with the notification as one JSON object on its stdin.
    Command(Vec<String>),
}

impl NotifyTarget {
    /// What `--notify` / `notify` must be.
    pub(crate) const RULE: &'static str =
        "must be an http:// or https:// webhook URL, `bell`, or a command line";

    /// What a target written as a comma list is told.
    const ONE_EACH: &'static str = "holds a comma list; give one target per --notify, or a list \
         (`notify: [bell, https://…]`); targets are an http:// or https:// webhook URL, `bell`, \
         or a command line";

    /// The target as messages show it: a webhook's URL with everything after its host
    /// hidden ([`crate::redact::webhook`]: Slack's and Discord's put the secret in the
    /// path), a command line as written.
    pub(crate) fn shown(&self) -> String {
        match self {
            NotifyTarget::Webhook(url) => crate::redact::webhook(url.as_str()),
            NotifyTarget::Bell => "bell".to_owned(),
            NotifyTarget::Command(argv) => {
                shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
            }
        }
    }
}

/// The scheme of `text` when it looks like a URL (`scheme://…`, the scheme letters, digits,
/// `+`, `-` or `.` after a letter).
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// A URL (`http://` or `https://`, case-insensitive) is a webhook, `bell` the terminal's
/// bell, any other non-empty text a command line — but for text that looks like a URL of
/// another scheme (`ftp://x`) or a comma list of targets (`bell,http://x`), which are refused
/// rather than run as a program of that name.
impl FromStr for NotifyTarget {
    /// [`NotifyTarget::RULE`], why the URL does not parse, or that the scheme or the comma
    /// list is no target.
    type Err = String;

    fn from_str(text: &str) -> Result<NotifyTarget, String> {
        let text = text.trim();
        // `bell,http://x`: one of its pieces is a target of its own.
        let pieces: Vec<&str> = text.split(',').map(str::trim).collect();
        if pieces.len() > 1
            && pieces
                .iter()
                .any(|p| *p == "bell" || url_scheme(p).is_some())
        {
            return Err(NotifyTarget::ONE_EACH.to_owned());
        }
        if let Some(scheme) = url_scheme(text)
            && !scheme.eq_ignore_ascii_case("http")
            && !scheme.eq_ignore_ascii_case("https")
        {
            return Err(format!(
                "is a `{scheme}://` URL, which cannot be notified; {}",
                NotifyTarget::RULE.replacen("must be", "a target must be", 1)
            ));
        }
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            return match reqwest::Url::parse(text) {
                Ok(url) if url.host_str().is_some() => Ok(NotifyTarget::Webhook(url)),
                Ok(_) => Err("is a URL without a host".to_owned()),
                Err(e) => Err(format!("is not a URL ({e})")),
            };
        }
        if text == "bell" {
            return Ok(NotifyTarget::Bell);
        }
        match shlex::split(text) {
            Some(argv) if !argv.is_empty() => Ok(NotifyTarget::Command(argv)),
            _ => Err(NotifyTarget::RULE.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_a_webhook_bell_the_bell_and_the_rest_a_command() {
        let hook: NotifyTarget = "https://hooks.slack.com/services/T0/B0/s3cr3t"
            .parse()
            .expect("webhook");
        assert!(matches!(hook, NotifyTarget::Webhook(_)));
        assert!(!hook.shown().contains("s3cr3t"), "{}", hook.shown());
        assert_eq!("bell".parse(), Ok(NotifyTarget::Bell));
        assert_eq!(
            "notify-send 'runner says'".parse(),
            Ok(NotifyTarget::Command(vec![
                "notify-send".into(),
                "runner says".into()
            ]))
        );
        assert!("".parse::<NotifyTarget>().is_err());
        assert!("https://".parse::<NotifyTarget>().is_err());
        assert!("echo 'unclosed".parse::<NotifyTarget>().is_err());
    }

    #[test]
    fn another_scheme_or_a_comma_list_is_refused_not_taken_for_a_command() {
        let e = "ftp://x".parse::<NotifyTarget>().expect_err("ftp");
        assert!(e.contains("ftp://") && e.contains("bell"), "{e}");
        let e = "bell,http://x".parse::<NotifyTarget>().expect_err("list");
        assert!(e.contains("comma list"), "{e}");
        // A comma inside a command's words is the command's.
        assert!(matches!(
            "notify-send 'done, all'".parse(),
            Ok(NotifyTarget::Command(_))
        ));
    }
}
