//! [`FileSettings`]: the runner options a file sets — BATCH.md's frontmatter and
//! `<store>/runner.toml` — each parsed into its type when the file is read (a duration, a
//! `max_fail`, a sandbox mode, …), with the same rules and messages in both files. Unknown
//! keys come from the struct itself ([`super::keys`]): BATCH.md warns about them, runner.toml
//! refuses them.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::keys::{keys_of, read_noting_unknown};
use crate::error::{Error, Result};
use crate::options::duration;
use crate::options::isolation::Isolation;
use crate::options::limits::{self, MaxFail};
use crate::options::notify::NotifyTarget;
use crate::sandbox::Mode;

/// The runner options a file may set, below the flags: BATCH.md's frontmatter (seed
/// `taskmaster-protocol.md`) and `<store>/runner.toml` share these keys and their rules.
/// Each value is held in its type, parsed once when the file is read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct FileSettings {
    /// `runner`: a runner definition name.
    #[serde(default, deserialize_with = "text")]
    pub runner: Option<String>,
    /// `command`: the program of the `exec` runner and its arguments (a list, or one
    /// command line split as a shell would).
    #[serde(default, deserialize_with = "argv")]
    pub command: Option<Vec<String>>,
    /// `max_workers`: teammates at once (≥ 1).
    #[serde(default, deserialize_with = "workers")]
    pub max_workers: Option<usize>,
    /// `max_runtime_seconds`: time limit of one attempt, written in seconds (≥ 1); checked
    /// against [`duration::MAX_DURATION`] when the settings resolve.
    #[serde(default, deserialize_with = "seconds")]
    pub max_runtime_seconds: Option<Duration>,
    /// `retries`: extra attempts after a failed or timed-out one.
    #[serde(default, deserialize_with = "retries")]
    pub retries: Option<u32>,
    /// `verify`: a command line that must exit 0 for an item to complete.
    #[serde(default, deserialize_with = "text")]
    pub verify: Option<String>,
    /// `best_of`: candidates per item (1 ..= 8; [`crate::options::best_of::BestOf`]).
    #[serde(default, deserialize_with = "best_of")]
    pub best_of: Option<crate::options::best_of::BestOf>,
    /// `judge`: how the winner among passing candidates is chosen (`passing`, `first`,
    /// `score CMD`, `person`, `stage NAME`; [`crate::options::best_of::Judge`]).
    #[serde(default, deserialize_with = "judge")]
    pub judge: Option<crate::options::best_of::Judge>,
    /// `model`: passed to the agent CLI.
    #[serde(default, deserialize_with = "text")]
    pub model: Option<String>,
    /// `verify_merged`: with `--merge`, a command line each merged tree must pass before the
    /// target branch moves to it.
    #[serde(default, deserialize_with = "text")]
    pub verify_merged: Option<String>,
    /// `serialize_overlaps`: with `--merge`, rows that will touch the same files run one
    /// after another, each from the previous one's merged result (issue 57).
    #[serde(default)]
    pub serialize_overlaps: Option<bool>,
    /// `on_conflict`: with `--merge`, who resolves a conflicting item (`fail`, `agent`,
    /// `RUNNER[:MODEL]`; [`crate::options::on_conflict::OnConflict`]).
    #[serde(default, deserialize_with = "on_conflict")]
    pub on_conflict: Option<crate::options::on_conflict::OnConflict>,
    /// `conflict_attempts`: resolution attempts per conflicting item (1 ..= 5).
    #[serde(default, deserialize_with = "conflict_attempts")]
    pub conflict_attempts: Option<u32>,
    /// `isolate`: `none` or `worktree`.
    #[serde(default, deserialize_with = "isolation")]
    pub isolate: Option<Isolation>,
    /// `worktree`: `copy` (ignored files copied into each worktree) and `setup` (a command
    /// line run once in each new worktree).
    #[serde(default)]
    pub worktree: Option<WorktreeSettings>,
    /// `keep_formulas`: write agents' values into output CSVs as they are, even those a
    /// spreadsheet would run as formulas.
    #[serde(default)]
    pub keep_formulas: Option<bool>,
    /// `keep_logs`: completed items keep their teammate folders (see `--keep-logs`).
    #[serde(default)]
    pub keep_logs: Option<bool>,
    /// `sandbox`: `auto`, `none` or `landlock` (see `--sandbox`).
    #[serde(default, deserialize_with = "sandbox")]
    pub sandbox: Option<Mode>,
    /// `rate_limit_wait`: longest an item waits in total for rate limits (`90s`, `1h`, or
    /// seconds).
    #[serde(default, deserialize_with = "wait")]
    pub rate_limit_wait: Option<Duration>,
    /// `max_cost_usd`: the batch's budget in US dollars (> 0).
    #[serde(default, deserialize_with = "usd")]
    pub max_cost_usd: Option<f64>,
    /// `max_fail`: `N` or `N:immediate` (see `--max-fail`).
    #[serde(default, deserialize_with = "max_fail")]
    pub max_fail: Option<MaxFail>,
    /// `workspace`: the folder the team workspace goes in (see `--workspace`); an absolute
    /// path, or one that starts with `~/`.
    #[serde(default, deserialize_with = "workspace")]
    pub workspace: Option<std::path::PathBuf>,
    /// `notify`: one target or a list of them (see `--notify`): webhook URLs, `bell`,
    /// command lines.
    #[serde(default, deserialize_with = "notify")]
    pub notify: Option<Vec<NotifyTarget>>,
    /// Where `notify` was set (`BATCH.md:6`, `…/runner.toml:3`), for the message about a
    /// notify command whose program is missing; filled in by the file's reader.
    #[serde(skip)]
    pub notify_at: Option<String>,
    /// Where `judge` was set (`BATCH.md:7`), for the message about a score judge whose
    /// program is missing; filled in by the file's reader.
    #[serde(skip)]
    pub judge_at: Option<String>,
    /// `order`: `input` or `longest-first` (see `--order`).
    #[serde(default, deserialize_with = "order")]
    pub order: Option<crate::options::order::Order>,
    /// `weight_column`: the column holding each row's expected duration (see
    /// `--weight-column`).
    #[serde(default, deserialize_with = "text")]
    pub weight_column: Option<String>,
    /// `best_of_column`: the column giving each row's own fan-out (see `--best-of-column`).
    #[serde(default, deserialize_with = "text")]
    pub best_of_column: Option<String>,
    /// `queue`: the Redis server of a shared work queue (see `--queue`).
    #[serde(default, deserialize_with = "queue")]
    pub queue: Option<crate::options::queue::QueueUrl>,
}

/// `worktree:` in BATCH.md, `[worktree]` in runner.toml.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct WorktreeSettings {
    /// Ignored files or folders copied into each worktree, relative to the repository root.
    #[serde(default, deserialize_with = "paths")]
    pub copy: Option<Vec<String>>,
    /// A command line run once in each new worktree, before the agent.
    #[serde(default, deserialize_with = "text")]
    pub setup: Option<String>,
}

type De<T, E> = std::result::Result<Option<T>, E>;

/// A text value parsed by `parse`; else the error says `rule` (the file and line are added
/// by the caller, as for every key).
fn parsed<'de, D: Deserializer<'de>, T, E>(
    d: D,
    parse: impl Fn(&str) -> std::result::Result<T, E>,
    rule: &str,
) -> De<T, D::Error> {
    // A value of the wrong type (`isolate: yes` is a YAML boolean) gets the same rule.
    let v = text(d).map_err(|_: D::Error| serde::de::Error::custom(rule))?;
    v.map(|t| parse(&t).map_err(|_| serde::de::Error::custom(rule)))
        .transpose()
}

fn sandbox<'de, D: Deserializer<'de>>(d: D) -> De<Mode, D::Error> {
    parsed(d, Mode::parse, "must be auto, none or landlock")
}

fn workspace<'de, D: Deserializer<'de>>(d: D) -> De<std::path::PathBuf, D::Error> {
    parsed(
        d,
        |t: &str| {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let path = match (t.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => std::path::PathBuf::from(t),
            };
            match path.is_absolute() {
                true => Ok(path),
                false => Err(()),
            }
        },
        "must be an absolute path (or start with ~/): a relative one would depend on where the runner starts",
    )
}

fn notify<'de, D: Deserializer<'de>>(d: D) -> De<Vec<NotifyTarget>, D::Error> {
    let one = |v: Value| match v {
        Value::String(t) => t.parse::<NotifyTarget>().map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom(NotifyTarget::RULE)),
    };
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) if items.is_empty() => Err(serde::de::Error::custom(
            "is an empty list, which notifies nowhere; give a target or remove the key",
        )),
        Value::Array(items) => items
            .into_iter()
            .map(one)
            .collect::<std::result::Result<_, _>>()
            .map(Some),
        v => one(v).map(|t| Some(vec![t])),
    }
}

fn order<'de, D: Deserializer<'de>>(d: D) -> De<crate::options::order::Order, D::Error> {
    parsed(
        d,
        str::parse::<crate::options::order::Order>,
        crate::options::order::Order::RULE,
    )
}

fn queue<'de, D: Deserializer<'de>>(d: D) -> De<crate::options::queue::QueueUrl, D::Error> {
    parsed(
        d,
        str::parse::<crate::options::queue::QueueUrl>,
        &format!("must be {}", crate::options::queue::QueueUrl::RULE),
    )
}

fn isolation<'de, D: Deserializer<'de>>(d: D) -> De<Isolation, D::Error> {
    parsed(d, str::parse::<Isolation>, Isolation::RULE)
}

fn wait<'de, D: Deserializer<'de>>(d: D) -> De<Duration, D::Error> {
    parsed(
        d,
        duration::parse,
        "must be a duration such as 90s, 10m or 1h (at most 365d)",
    )
}

fn max_fail<'de, D: Deserializer<'de>>(d: D) -> De<MaxFail, D::Error> {
    parsed(d, str::parse::<MaxFail>, MaxFail::RULE)
}

fn usd<'de, D: Deserializer<'de>>(d: D) -> De<f64, D::Error> {
    let amount = match Value::deserialize(d)? {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_f64(),
        // `max_cost_usd: "5"` or `"$5"`: the amount a person wrote, quoted.
        Value::String(t) => t.trim().trim_start_matches('$').trim().parse::<f64>().ok(),
        _ => None,
    };
    match amount {
        Some(v) if limits::is_budget(v) => Ok(Some(v)),
        _ => Err(serde::de::Error::custom(limits::USD_RULE)),
    }
}

fn text<'de, D: Deserializer<'de>>(d: D) -> De<String, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) if !s.trim().is_empty() => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        _ => Err(serde::de::Error::custom("must be a non-empty string")),
    }
}

fn count<'de, D: Deserializer<'de>>(d: D, min: u64) -> De<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(n) if n.as_u64().is_some_and(|v| v >= min) => Ok(n.as_u64()),
        _ => Err(serde::de::Error::custom(format!(
            "must be a whole number ≥ {min}"
        ))),
    }
}

fn workers<'de, D: Deserializer<'de>>(d: D) -> De<usize, D::Error> {
    Ok(count(d, 1)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
}

fn seconds<'de, D: Deserializer<'de>>(d: D) -> De<Duration, D::Error> {
    Ok(count(d, 1)?.map(Duration::from_secs))
}

/// `best_of`: a number, or a list of runners each of which must exist (said here, at the
/// key's line, rather than when the candidates' profiles are made).
fn best_of<'de, D: Deserializer<'de>>(d: D) -> De<crate::options::best_of::BestOf, D::Error> {
    let Some(best_of) = crate::options::best_of::BestOf::from_value(&Value::deserialize(d)?)
        .map_err(serde::de::Error::custom)?
    else {
        return Ok(None);
    };
    for (runner, _) in &best_of.runners {
        crate::agent::definition::load(runner, None, None)
            .map_err(|e| serde::de::Error::custom(format!("candidate {runner}: {e}")))?;
    }
    Ok(Some(best_of))
}

fn on_conflict<'de, D: Deserializer<'de>>(
    d: D,
) -> De<crate::options::on_conflict::OnConflict, D::Error> {
    match text(d)? {
        None => Ok(None),
        Some(t) => t.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

fn conflict_attempts<'de, D: Deserializer<'de>>(d: D) -> De<u32, D::Error> {
    let max = crate::options::on_conflict::MAX_CONFLICT_ATTEMPTS;
    match count(d, 1)? {
        Some(n) if n <= u64::from(max) => Ok(Some(n as u32)),
        None => Ok(None),
        Some(_) => Err(serde::de::Error::custom(format!(
            "must be a whole number from 1 to {max}"
        ))),
    }
}

fn judge<'de, D: Deserializer<'de>>(d: D) -> De<crate::options::best_of::Judge, D::Error> {
    match text(d)? {
        None => Ok(None),
        Some(t) => t.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

fn retries<'de, D: Deserializer<'de>>(d: D) -> De<u32, D::Error> {
    Ok(count(d, 0)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
}

fn argv<'de, D: Deserializer<'de>>(d: D) -> De<Vec<String>, D::Error> {
    let bad = || serde::de::Error::custom("must be a list of strings (program, then arguments)");
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(bad()),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Some),
        Value::String(s) => match shlex::split(&s) {
            Some(v) if !v.is_empty() => Ok(Some(v)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

fn paths<'de, D: Deserializer<'de>>(d: D) -> De<Vec<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(serde::de::Error::custom("must be a list of paths")),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Some),
        _ => Err(serde::de::Error::custom("must be a list of paths")),
    }
}

/// Why a settings map did not deserialize. Keys are dotted for nested ones
/// (`worktree.copy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyProblem {
    /// The key is not a setting; `known` lists the keys allowed where it stands.
    Unknown {
        /// The key as written.
        key: String,
        /// The settings keys allowed beside it, in declaration order.
        known: Vec<String>,
    },
    /// The key's value breaks its rule.
    Invalid {
        /// The key (empty when the problem is the whole map).
        key: String,
        /// What it must be: `must be a whole number ≥ 1`.
        rule: String,
    },
}

impl KeyProblem {
    /// An unknown `key` (dotted), with the keys of the table it stands in.
    fn unknown(key: String) -> KeyProblem {
        let known = match key.split_once('.') {
            Some(("worktree", _)) => keys_of::<WorktreeSettings>(),
            _ => keys_of::<FileSettings>(),
        };
        KeyProblem::Unknown {
            key,
            known: known.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    /// The problem of a deserialization error at `path` whose own message (without any
    /// source snippet) is `message`.
    fn invalid(path: &serde_path_to_error::Path, message: &str) -> KeyProblem {
        let key = path.to_string();
        KeyProblem::Invalid {
            key: if key == "." { String::new() } else { key },
            rule: message.to_owned(),
        }
    }
}

impl FileSettings {
    /// Deserialize the settings keys of a frontmatter mapping (BATCH.md). Unknown keys are
    /// left out and returned ([`KeyProblem::Unknown`], in the map's order), so the caller
    /// can warn about them.
    ///
    /// Errors: the first key whose value breaks its rule ([`KeyProblem::Invalid`]).
    pub(crate) fn from_map(
        map: serde_json::Map<String, Value>,
    ) -> std::result::Result<(FileSettings, Vec<KeyProblem>), KeyProblem> {
        let (read, unknown) = read_noting_unknown::<FileSettings, _>(Value::Object(map));
        let settings = read.map_err(|e| KeyProblem::invalid(e.path(), &e.inner().to_string()))?;
        Ok((
            settings,
            unknown.into_iter().map(KeyProblem::unknown).collect(),
        ))
    }

    /// Parse `<store>/runner.toml` text. `path` is used in messages only.
    ///
    /// Errors: exit 2 naming the file, the line and the key (unknown keys included; the
    /// first problem in the file's order).
    pub(crate) fn from_toml(path: &Path, text: &str) -> Result<FileSettings> {
        let line_of = |span| Error::line_of(text, span);
        let doc = toml::de::DeTable::parse(text)
            .map_err(|e| Error::input_at(path, line_of(e.span()), e.message()))?;
        let keys = crate::agent::key_lines::KeyLines::new(text, doc.get_ref().clone());
        let (read, unknown) = read_noting_unknown::<FileSettings, _>(toml::Deserializer::from(doc));
        // An unknown key met before a bad value is the first problem.
        if let Some(KeyProblem::Unknown { key, known }) =
            unknown.into_iter().next().map(KeyProblem::unknown)
        {
            let leaf = key.rsplit('.').next().unwrap_or_default();
            let message = format!(
                "unknown key `{key}`{} (known: {})",
                crate::suggest::did_you_mean(leaf, known.iter().map(String::as_str)),
                known.join(", ")
            );
            return Err(Error::input_at(path, keys.line(&key), message));
        }
        let mut read = read.map_err(|e| {
            let line = line_of(e.inner().span());
            let message = match KeyProblem::invalid(e.path(), e.inner().message()) {
                KeyProblem::Invalid { key, .. } if !key.is_empty() => {
                    format!("`{key}` {}", e.inner().message())
                }
                _ => e.inner().message().to_owned(),
            };
            Error::input_at(path, line, message)
        })?;
        if read.notify.is_some() {
            read.notify_at = Some(set_at(path, keys.line("notify")));
        }
        if read.judge.is_some() {
            read.judge_at = Some(set_at(path, keys.line("judge")));
        }
        Ok(read)
    }
}

/// `path:line` (or `path` without a line), as messages name where a key was set.
pub(crate) fn set_at(path: &Path, line: Option<u64>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(yaml: &str) -> serde_json::Map<String, Value> {
        serde_saphyr::from_str(yaml).expect("yaml")
    }

    #[test]
    fn batch_frontmatter_and_runner_toml_give_the_same_settings() {
        let from_yaml = FileSettings::from_map(map(
            "runner: exec\ncommand: python3 a.py\nmax_workers: 3\nmax_runtime_seconds: 60\n\
             retries: 2\nverify: test -s x\nmodel: 4\nisolate: worktree\n\
             worktree: {copy: [.env], setup: npm ci}\n",
        ))
        .expect("valid")
        .0;
        let from_toml = FileSettings::from_toml(
            Path::new("runner.toml"),
            "runner = 'exec'\ncommand = ['python3', 'a.py']\nmax_workers = 3\n\
             max_runtime_seconds = 60\nretries = 2\nverify = 'test -s x'\nmodel = 4\n\
             isolate = 'worktree'\n[worktree]\ncopy = ['.env']\nsetup = 'npm ci'\n",
        )
        .expect("valid");
        assert_eq!(from_yaml, from_toml);
        assert_eq!(
            from_toml.command,
            Some(vec!["python3".to_string(), "a.py".to_string()])
        );
        assert_eq!(from_toml.model.as_deref(), Some("4"));
    }

    #[test]
    fn notify_is_one_target_or_a_list_in_either_file() {
        let from_yaml = FileSettings::from_map(map("notify: [https://h.example/x, bell]\n"))
            .expect("valid")
            .0;
        let from_toml = FileSettings::from_toml(
            Path::new("runner.toml"),
            "notify = ['https://h.example/x', 'bell']\n",
        )
        .expect("valid");
        assert_eq!(from_yaml.notify, from_toml.notify);
        // For the message about a notify command whose program is missing.
        assert_eq!(from_toml.notify_at.as_deref(), Some("runner.toml:1"));
        let one = FileSettings::from_map(map("notify: bell\n"))
            .expect("valid")
            .0;
        assert_eq!(one.notify, Some(vec![NotifyTarget::Bell]));
        assert!(FileSettings::from_toml(Path::new("runner.toml"), "notify = 3\n").is_err());
        // An empty notify list notifies nowhere and is refused; an empty list of worktree
        // files to copy is a plain "none".
        let empty = FileSettings::from_map(map("notify: []\n")).expect_err("refused");
        assert!(
            format!("{empty:?}").contains("notifies nowhere"),
            "{empty:?}"
        );
        let copy = FileSettings::from_map(map("worktree:\n  copy: []\n"))
            .expect("valid")
            .0;
        assert_eq!(copy.worktree.and_then(|w| w.copy), Some(Vec::new()));
    }

    #[test]
    fn a_workspace_key_must_be_absolute_in_both_files() {
        let toml = FileSettings::from_toml(Path::new("runner.toml"), "workspace = '/srv/ws'\n")
            .expect("valid");
        assert_eq!(toml.workspace, Some(std::path::PathBuf::from("/srv/ws")));
        let bad = FileSettings::from_toml(Path::new("runner.toml"), "workspace = 'ws'\n")
            .expect_err("relative");
        assert!(
            bad.to_string().contains("runner.toml:1")
                && bad.to_string().contains("must be an absolute path"),
            "{bad}"
        );
        assert!(FileSettings::from_map(map("workspace: rel/ws\n")).is_err());
    }

    #[test]
    fn values_are_held_in_their_types_once_read() {
        let s = FileSettings::from_map(map(
            "isolate: worktree\nsandbox: none\nrate_limit_wait: 90s\nmax_fail: 3:immediate\n\
             max_runtime_seconds: 60\nretries: 99999999999\n",
        ))
        .expect("valid")
        .0;
        assert_eq!(s.isolate, Some(Isolation::Worktree));
        assert_eq!(s.sandbox, Some(Mode::None));
        assert_eq!(s.rate_limit_wait, Some(Duration::from_secs(90)));
        assert_eq!(
            s.max_fail,
            Some(MaxFail {
                count: 3,
                immediate: true
            })
        );
        assert_eq!(s.max_runtime_seconds, Some(Duration::from_secs(60)));
        assert_eq!(s.retries, Some(u32::MAX));
        let e = FileSettings::from_map(map("rate_limit_wait: 400d\n")).expect_err("too long");
        assert!(
            matches!(&e, KeyProblem::Invalid { key, rule } if key == "rate_limit_wait" && rule.contains("at most 365d")),
            "{e:?}"
        );
        let e = FileSettings::from_map(map("max_fail: 0\n")).expect_err("zero");
        assert!(matches!(&e, KeyProblem::Invalid { rule, .. } if rule == MaxFail::RULE));
    }

    #[test]
    fn a_budget_may_be_written_quoted_or_with_a_dollar_sign() {
        for text in [
            "max_cost_usd: 5\n",
            "max_cost_usd: \"5\"\n",
            "max_cost_usd: \"$5\"\n",
        ] {
            let got = FileSettings::from_map(map(text)).expect(text).0;
            assert_eq!(got.max_cost_usd, Some(5.0), "{text}");
        }
        assert!(FileSettings::from_map(map("max_cost_usd: \"five\"\n")).is_err());
        assert!(FileSettings::from_map(map("max_cost_usd: \"-1\"\n")).is_err());
    }

    #[test]
    fn a_bad_value_names_its_key_and_rule_in_both_files() {
        let e = FileSettings::from_map(map("max_workers: many\n")).expect_err("bad");
        assert_eq!(
            e,
            KeyProblem::Invalid {
                key: "max_workers".into(),
                rule: "must be a whole number ≥ 1".into()
            }
        );
        let e = FileSettings::from_map(map("worktree: {copy: 3}\n")).expect_err("bad");
        assert!(matches!(e, KeyProblem::Invalid { key, .. } if key == "worktree.copy"));
        let e = FileSettings::from_toml(Path::new("r.toml"), "runner = 'x'\nmax_workers = 0\n")
            .expect_err("bad");
        assert_eq!(
            e.to_string(),
            "r.toml:2: `max_workers` must be a whole number ≥ 1"
        );
    }

    #[test]
    fn unknown_keys_are_dropped_for_a_warning_from_frontmatter_and_refused_from_toml() {
        let (s, unknown) = FileSettings::from_map(map(
            "max_wrokers: 2\nretries: 1\nworktree: {copy: [a], setpu: x}\n",
        ))
        .expect("valid");
        assert_eq!(s.retries, Some(1));
        let keys: Vec<&str> = unknown
            .iter()
            .filter_map(|p| match p {
                KeyProblem::Unknown { key, .. } => Some(key.as_str()),
                KeyProblem::Invalid { .. } => None,
            })
            .collect();
        assert_eq!(keys, ["max_wrokers", "worktree.setpu"]);
        assert!(
            matches!(&unknown[0], KeyProblem::Unknown { known, .. } if known.contains(&"max_workers".to_string())),
            "{unknown:?}"
        );
        assert!(
            matches!(&unknown[1], KeyProblem::Unknown { known, .. } if *known == ["copy", "setup"]),
            "{unknown:?}"
        );
        let e = FileSettings::from_toml(Path::new("r.toml"), "runner = 'x'\nmax_wrokers = 3\n")
            .expect_err("unknown");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "r.toml:2: unknown key `max_wrokers`; did you mean `max_workers`? (known: runner, command"
            ),
            "{text}"
        );
        let e = FileSettings::from_toml(
            Path::new("r.toml"),
            "runner = 'x'\n[worktree]\ncopy = ['a']\nsetpu = 'x'\n",
        )
        .expect_err("unknown in a table");
        assert_eq!(
            e.to_string(),
            "r.toml:4: unknown key `worktree.setpu`; did you mean `setup`? (known: copy, setup)"
        );
    }
}
