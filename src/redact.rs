//! Keeping secrets out of what the runner writes: request headers in the HTTP backend's
//! logs and `--var` values in the command line `team.json` records (for the resume command).

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

/// `args` with the value of every `--var NAME=VALUE` (also `--var=NAME=VALUE`) whose NAME is
/// a [`secret_name`] replaced by `REDACTED`; everything after `--` is left as it is (the
/// agent's own command).
pub fn command_line(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut var_next = false;
    let mut after_dashes = false;
    for a in args {
        if after_dashes {
            out.push(a);
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
