//! Keeping secrets out of what the runner writes: request headers in the HTTP backend's
//! logs, `--var` values in the command line `team.json` records (for the resume command),
//! and URLs' passwords and secret-looking query values wherever they are shown.

/// Whether a header or variable named `name` holds a secret: its name contains `key`,
/// `auth`, `token`, `secret`, `password` or `cookie` (any case) — `Authorization`,
/// `X-Api-Key`, `header.api-key`, `github_token`.
pub(crate) fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["key", "auth", "token", "secret", "password", "cookie"]
        .iter()
        .any(|w| n.contains(w))
}

/// A secret as logs show it: its first four characters when it is long enough (16 or more)
/// to spare them, then `…(redacted)`.
pub(crate) fn redacted(secret: &str) -> String {
    match secret.char_indices().nth(4) {
        Some((i, _)) if secret.chars().count() >= 16 => format!("{}…(redacted)", &secret[..i]),
        _ => "(redacted)".to_owned(),
    }
}

/// Every URL in `text` (an `http://`, `https://`, `redis://` or `rediss://` run up to
/// whitespace) with its secrets
/// hidden: the password of its user info (`user:REDACTED@host`) and the value of every query
/// parameter whose name is a [`secret_name`] (`?key=REDACTED`). Other text is unchanged.
pub(crate) fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://", "redis://", "rediss://"]
        .iter()
        .filter_map(|s| rest.find(s))
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

/// A webhook URL as messages and logs show it: its scheme, host and port, then `/…(redacted)`
/// when anything follows (`https://hooks.slack.com/…(redacted)`). Slack's, Discord's and
/// ntfy's webhooks carry their secret in the path, so none of it is shown; text that does
/// not parse as a URL is hidden whole.
pub(crate) fn webhook(text: &str) -> String {
    let Ok(u) = reqwest::Url::parse(text) else {
        return "(a webhook URL, redacted)".to_owned();
    };
    let host = u.host_str().unwrap_or_default();
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let bare = u.path() == "/" && u.query().is_none() && u.fragment().is_none();
    let more = if bare { "" } else { "/…(redacted)" };
    format!("{}://{host}{port}{more}", u.scheme())
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

/// A JSON request body as the request log shows it: the string value of every object
/// field, at any depth, whose name is a [`secret_name`] (`"api_key"`, `"password"`) is
/// [`redacted`]; numbers and other values stay (`"max_tokens": 1000`), and so does the text
/// of the messages. A body that is not JSON, or holds no such field, is returned as it is.
pub(crate) fn json_body(text: &str) -> String {
    fn walk(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(map) => {
                let mut changed = false;
                for (name, value) in map.iter_mut() {
                    match value {
                        serde_json::Value::String(s) if secret_name(name) => {
                            *s = redacted(s);
                            changed = true;
                        }
                        other => changed |= walk(other),
                    }
                }
                changed
            }
            serde_json::Value::Array(items) => items.iter_mut().fold(false, |c, i| walk(i) | c),
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_owned();
    };
    if walk(&mut value) {
        serde_json::to_string(&value).unwrap_or_else(|_| text.to_owned())
    } else {
        text.to_owned()
    }
}

/// `NAME=VALUE` (also `--NAME=VALUE`) with VALUE hidden when NAME is a [`secret_name`];
/// any other text [`scrub`]bed.
fn hidden(v: &str) -> String {
    match v.split_once('=') {
        Some((name, _)) if secret_name(name.trim_start_matches('-')) => {
            format!("{name}=REDACTED")
        }
        _ => scrub(v),
    }
}

/// `text` with the secrets that show by their shape hidden, wherever they stand: a header
/// line that names one (`Authorization: Bearer …`, `X-Api-Key: …` → `Authorization:
/// REDACTED`), a bearer token (`Bearer REDACTED`), a value shaped like a provider's key
/// (`sk-…`, `sk-ant-…`, `ghp_…`, `github_pat_…`, `glpat-…`, `xoxb-…`, `AIza…` → `REDACTED`),
/// and URLs' secrets ([`urls`]).
pub(crate) fn scrub(text: &str) -> String {
    static RES: std::sync::OnceLock<Option<[regex::Regex; 3]>> = std::sync::OnceLock::new();
    let Some([header, bearer, key]) = RES
        .get_or_init(|| {
            Some([
                regex::Regex::new(r"^(\s*)([A-Za-z0-9_-]+)(\s*:\s*)\S.*$").ok()?,
                regex::Regex::new(r"(?i)\b(bearer\s+)[^\s'\x22]+").ok()?,
                regex::Regex::new(
                    r"\b(?:sk-[A-Za-z0-9_-]{12,}|ghp_[A-Za-z0-9]{20,}|gho_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})",
                )
                .ok()?,
            ])
        })
        .as_ref()
    else {
        return urls(text);
    };
    let mut out = match header.captures(text) {
        Some(c) if secret_name(&c[2]) => format!("{}{}{}REDACTED", &c[1], &c[2], &c[3]),
        _ => text.to_owned(),
    };
    out = bearer.replace_all(&out, "${1}REDACTED").into_owned();
    out = key.replace_all(&out, "REDACTED").into_owned();
    urls(&out)
}

/// One word of an agent's own command line as shown; `secret_next` carries over from the
/// word before it (`--api-key`, then its value).
fn agent_word(word: &str, secret_next: &mut bool) -> String {
    let shown = if *secret_next && !word.starts_with('-') {
        "REDACTED".to_owned()
    } else {
        hidden(word)
    };
    *secret_next =
        word.starts_with('-') && !word.contains('=') && secret_name(word.trim_start_matches('-'));
    shown
}

/// A `--notify` value that is a webhook URL, as a recorded command line shows it
/// ([`webhook`]: its secret is its path); `None` for a command line or `bell`.
fn notify_webhook(value: &str) -> Option<String> {
    let lower = value.trim_start().to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")).then(|| webhook(value.trim()))
}

/// An agent's command line (program first) as the runner shows it (`--dry-run`): the words
/// that name a secret give nothing away, as in [`command_line`].
pub(crate) fn agent_argv(words: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut secret_next = false;
    words
        .into_iter()
        .map(|w| agent_word(&w, &mut secret_next))
        .collect()
}

/// `args` with the value of every `--var NAME=VALUE` (also `--var=NAME=VALUE`) whose NAME is
/// a [`secret_name`] replaced by `REDACTED`, and every URL's secrets hidden ([`urls`]). In
/// the agent's own command (after `--`) and in `--agent-arg` values, an argument that names
/// a secret gives its value away too: `--api-key=VALUE`, `API_KEY=VALUE`, and the argument
/// after `--api-key` or `--token` become `REDACTED` (issue 25: a key passed to an exec agent
/// showed in `status --brief`'s `resume:` line). A `--notify` webhook URL shows only its
/// scheme and host ([`webhook`]).
pub(crate) fn command_line(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let (mut var_next, mut agent_arg_next, mut after_dashes) = (false, false, false);
    let (mut secret_next, mut notify_next) = (false, false);
    for a in args {
        let hook = match a.strip_prefix("--notify=") {
            _ if after_dashes || agent_arg_next => None,
            Some(w) => notify_webhook(w).map(|h| format!("--notify={h}")),
            None if notify_next => notify_webhook(&a),
            None => None,
        };
        let shown = if let Some(hook) = &hook {
            hook.clone()
        } else if after_dashes || agent_arg_next {
            agent_word(&a, &mut secret_next)
        } else if let Some(w) = a.strip_prefix("--agent-arg=") {
            format!("--agent-arg={}", agent_word(w, &mut secret_next))
        } else if var_next {
            hidden(&a)
        } else if let Some(v) = a.strip_prefix("--var=") {
            format!("--var={}", hidden(v))
        } else if a.contains(' ') {
            // A command given as one string (`--verify "test -n --token=X"`,
            // `--worktree-setup`): each of its words as an agent's.
            agent_argv(a.split(' ').map(str::to_owned)).join(" ")
        } else {
            a.clone()
        };
        // A base URL may carry a password or a key in its query; a key may show by its shape.
        // (A webhook shows only its scheme and host already.)
        out.push(match hook {
            Some(_) => shown,
            None => scrub(&shown),
        });
        if !after_dashes {
            var_next = !agent_arg_next && a == "--var";
            after_dashes = !agent_arg_next && a == "--";
            agent_arg_next = !agent_arg_next && a == "--agent-arg";
            notify_next = !notify_next && a == "--notify";
        }
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
    fn a_webhook_shows_its_host_and_never_its_path() {
        let hook = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX";
        assert_eq!(webhook(hook), "https://hooks.slack.com/…(redacted)");
        assert_eq!(webhook("http://127.0.0.1:8080/"), "http://127.0.0.1:8080");
        assert_eq!(webhook("not a url secret"), "(a webhook URL, redacted)");
        let argv = [
            "batch",
            "--notify",
            hook,
            "--notify=https://ntfy.sh/topic-s3cr3t",
            "--notify",
            "bell",
        ];
        let shown = command_line(argv.map(str::to_owned)).join(" ");
        assert_eq!(
            shown,
            "batch --notify https://hooks.slack.com/…(redacted) --notify=https://ntfy.sh/…(redacted) --notify bell"
        );
    }

    #[test]
    fn secret_fields_of_a_request_body_are_hidden_and_the_rest_kept() {
        let body = r#"{"model":"m","max_tokens":1000,"api_key":"sk-proj-abcdefghijklmnop","messages":[{"role":"user","content":"my password is in here"}],"extra":{"password":"hunter2"}}"#;
        let shown = json_body(body);
        assert!(
            !shown.contains("abcdefghijklmnop") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(shown.contains(r#""api_key":"sk-p…(redacted)""#), "{shown}");
        assert!(shown.contains(r#""password":"(redacted)""#), "{shown}");
        assert!(shown.contains(r#""max_tokens":1000"#), "{shown}");
        assert!(shown.contains("my password is in here"), "{shown}");
        let plain = "{\n  \"model\": \"m\"\n}";
        assert_eq!(json_body(plain), plain, "untouched byte for byte");
        assert_eq!(json_body("not json"), "not json");
    }

    #[test]
    fn secrets_that_show_by_their_shape_are_hidden_anywhere() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_line(argv(&[
                "runner",
                "batch",
                "--verify",
                "test -n --token=SECRETV1",
                "--",
                "agent",
                "-H",
                "Authorization: Bearer sk-SECRETH8",
                "-k",
                "sk-proj-abcdefghijklmnop",
                "--header",
                "x-api-key: abc",
                "--model",
                "gpt-4o",
                "notes.md"
            ])),
            argv(&[
                "runner",
                "batch",
                "--verify",
                "test -n --token=REDACTED",
                "--",
                "agent",
                "-H",
                "Authorization: REDACTED",
                "-k",
                "REDACTED",
                "--header",
                "x-api-key: REDACTED",
                "--model",
                "gpt-4o",
                "notes.md"
            ])
        );
        assert_eq!(
            scrub("curl -H 'Bearer abc.def'"),
            "curl -H 'Bearer REDACTED'"
        );
        assert_eq!(scrub("ghp_0123456789abcdefghijKLMN"), "REDACTED");
        assert_eq!(scrub("Model: gpt-4o"), "Model: gpt-4o");
        assert_eq!(scrub("task-1234567890abcdef"), "task-1234567890abcdef");
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
                "--agent-arg",
                "--api-key=sk-1",
                "--agent-arg=--token",
                "--agent-arg=tok-2",
                "--",
                "agent",
                "--api-key",
                "sk-3",
                "--password=pw-4",
                "GITHUB_TOKEN=gh-5",
                "--max-turns",
                "3",
                "--token",
                "--verbose",
                "file.md"
            ])),
            argv(&[
                "runner",
                "batch",
                "--var",
                "header.X-Api-Key=REDACTED",
                "--var=body.temperature=0",
                "--var=header.Authorization=REDACTED",
                "--agent-arg",
                "--api-key=REDACTED",
                "--agent-arg=--token",
                "--agent-arg=REDACTED",
                "--",
                "agent",
                "--api-key",
                "REDACTED",
                "--password=REDACTED",
                "GITHUB_TOKEN=REDACTED",
                "--max-turns",
                "3",
                "--token",
                "--verbose",
                "file.md"
            ])
        );
    }
}
