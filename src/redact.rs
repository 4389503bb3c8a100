//! Keeping secrets out of what the runner writes: request headers in the HTTP backend's
//! logs, `--var` values in the command line `team.json` records (for the resume command),
//! and URLs' passwords and secret-looking query values wherever they are shown.

/// Whether a header or variable named `name` holds a secret: its name contains `key`,
/// `auth`, `token`, `secret`, `password` or `cookie` (any case) — `Authorization`,
/// `X-Api-Key`, `header.api-key`, `github_token`.
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["key", "auth", "token", "secret", "password", "cookie"]
        .iter()
        .any(|w| n.contains(w))
}

/// A secret as logs show it: its first four characters when it is long enough (16 or more)
/// to spare them, then `…(redacted)`.
pub fn redacted(secret: &str) -> String {
    match secret.char_indices().nth(4) {
        Some((i, _)) if secret.chars().count() >= 16 => format!("{}…(redacted)", &secret[..i]),
        _ => "(redacted)".to_owned(),
    }
}

/// Every URL in `text` (an `http://` or `https://` run up to whitespace) with its secrets
/// hidden: the password of its user info (`user:REDACTED@host`) and the value of every query
/// parameter whose name is a [`secret_name`] (`?key=REDACTED`). Other text is unchanged.
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest
        .find("http://")
        .into_iter()
        .chain(rest.find("https://"))
        .min()
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`')
            .unwrap_or(tail.len());
        out.push_str(&url(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// One URL with its secrets hidden ([`urls`]); text that does not parse as one is returned
/// as it is.
fn url(text: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(text) else {
        return text.to_owned();
    };
    if u.password().is_some() {
        let _ = u.set_password(Some("REDACTED"));
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret_name(&k) {
                    "REDACTED".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    if u.as_str() == text.trim_end_matches('/') || u.as_str() == text {
        return text.to_owned();
    }
    u.to_string()
}

/// `args` with the value of every `--var NAME=VALUE` (also `--var=NAME=VALUE`) whose NAME is
/// a [`secret_name`] replaced by `REDACTED`, and every URL's secrets hidden ([`urls`]);
/// otherwise everything after `--` (the agent's own command) is left as it is.
pub fn command_line(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut var_next = false;
    let mut after_dashes = false;
    for a in args {
        if after_dashes {
            out.push(urls(&a));
            continue;
        }
        let hidden = |v: &str| match v.split_once('=') {
            Some((name, _)) if secret_name(name) => format!("{name}=REDACTED"),
            _ => v.to_owned(),
        };
        let shown = if var_next {
            hidden(&a)
        } else if let Some(v) = a.strip_prefix("--var=") {
            format!("--var={}", hidden(v))
        } else {
            a.clone()
        };
        // A base URL may carry a password or a key in its query.
        let shown = urls(&shown);
        var_next = a == "--var";
        after_dashes = a == "--";
        out.push(shown);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_keeps_its_password_and_secret_query_values_to_itself() {
        assert_eq!(
            urls(
                "POST http://bob:hunter2@127.0.0.1:8080/v1/chat/completions?api_key=sk-1&model=x then"
            ),
            "POST http://bob:REDACTED@127.0.0.1:8080/v1/chat/completions?api_key=REDACTED&model=x then"
        );
        assert_eq!(urls("no url here"), "no url here");
        assert_eq!(
            urls("see https://example.com/v1 ok"),
            "see https://example.com/v1 ok"
        );
        let argv = vec![
            "--var".to_string(),
            "base_url=http://u:p@h/v1?token=t".to_string(),
        ];
        assert_eq!(
            command_line(argv)[1],
            "base_url=http://u:REDACTED@h/v1?token=REDACTED"
        );
    }

    #[test]
    fn keys_never_reach_a_log_or_team_json_whole() {
        assert_eq!(redacted("sk-proj-abcdefghijklmnop"), "sk-p…(redacted)");
        assert_eq!(redacted("short"), "(redacted)");
        assert!(secret_name("X-Api-Key") && secret_name("Authorization"));
        assert!(!secret_name("OpenAI-Organization"));
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_line(argv(&[
                "runner",
                "batch",
                "--var",
                "header.X-Api-Key=abc",
                "--var=body.temperature=0",
                "--var=header.Authorization=Bearer x",
                "--",
                "agent",
                "--var",
                "token=kept"
            ])),
            argv(&[
                "runner",
                "batch",
                "--var",
                "header.X-Api-Key=REDACTED",
                "--var=body.temperature=0",
                "--var=header.Authorization=REDACTED",
                "--",
                "agent",
                "--var",
                "token=kept"
            ])
        );
    }
}
