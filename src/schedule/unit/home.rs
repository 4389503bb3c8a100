//! `[env.home]`: a home folder of the CLI's own for one attempt, in the teammate folder. Its
//! CLI folder (`.gemini/`) links every entry of the user's own but the settings file, which
//! is the user's settings merged over the definition's defaults — the one way to hand Gemini
//! CLI a setting that it honours for a normal user (it skips a system defaults file unless
//! root owns it and every folder above it).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent::definition::HomeSpec;

/// Make the attempt's home for `spec` at `at` (removed first: a new one each attempt), from
/// the user's home `user_home` (the variable's own value when the user set it, else HOME).
/// Returns what to tell the user once (the user's settings could not be read as JSON, so
/// the defaults are not applied), if anything.
///
/// Errors: the folder, a link or the settings file cannot be made (with the path).
pub(crate) fn make(spec: &HomeSpec, at: &Path, user_home: &Path) -> Result<Option<String>, String> {
    fn fail(p: &Path, e: impl std::fmt::Display) -> String {
        format!("cannot make {} (`[env.home]`): {e}", p.display())
    }
    match std::fs::symlink_metadata(at) {
        // remove_dir_all never follows a link: a link an earlier attempt left is removed itself.
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(at).map_err(|e| fail(at, e))?,
        Ok(_) => std::fs::remove_file(at).map_err(|e| fail(at, e))?,
        Err(_) => {}
    }
    let folder = at.join(&spec.folder);
    crate::fsutil::create_private_dir(at).map_err(|e| fail(at, e))?;
    crate::fsutil::create_private_dir(&folder).map_err(|e| fail(&folder, e))?;
    let theirs = user_home.join(&spec.folder);
    for entry in std::fs::read_dir(&theirs).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if name.as_os_str() == spec.settings.as_str() {
            continue;
        }
        let link = folder.join(&name);
        std::os::unix::fs::symlink(entry.path(), &link).map_err(|e| fail(&link, e))?;
    }
    for name in &spec.also {
        let target = user_home.join(name);
        if target.exists() {
            let link = at.join(name);
            std::os::unix::fs::symlink(&target, &link).map_err(|e| fail(&link, e))?;
        }
    }
    let their_settings = theirs.join(&spec.settings);
    let settings = folder.join(&spec.settings);
    let (text, said) = settings_text(&spec.defaults, &their_settings);
    crate::fsutil::write_private_file(&settings, text.as_bytes())
        .map_err(|e| fail(&settings, e))?;
    Ok(said)
}

/// The settings file's text: the user's settings (`theirs`, when there) merged over
/// `defaults`. When the user's file is not a JSON object (a comment in it), it is kept as it
/// is — the user's settings matter more than the defaults — and the second value says so.
fn settings_text(defaults: &str, theirs: &Path) -> (String, Option<String>) {
    let mut merged: Value =
        serde_json::from_str(defaults).unwrap_or(Value::Object(Default::default()));
    let Ok(text) = std::fs::read_to_string(theirs) else {
        return (merged.to_string(), None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => {
            merge(&mut merged, v);
            (merged.to_string(), None)
        }
        _ => (
            text,
            Some(format!(
                "{} is not plain JSON (a comment?): the runner definition's settings {defaults} are not added to it; add them yourself",
                theirs.display()
            )),
        ),
    }
}

/// `over` merged into `base`: objects key by key, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Where the attempt's home goes in the teammate's own folder `work` (which a sandboxed
/// teammate may write: the CLI writes its home).
pub(crate) fn path_in(dir: &Path, spec: &HomeSpec) -> PathBuf {
    dir.join(format!("{}.home", spec.var.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> HomeSpec {
        HomeSpec {
            var: "GEMINI_CLI_HOME".into(),
            folder: ".gemini".into(),
            settings: "settings.json".into(),
            defaults: r#"{"general":{"maxAttempts":1,"vimMode":false}}"#.into(),
            also: vec![".env".into()],
        }
    }

    #[test]
    fn the_users_settings_win_over_the_defaults_and_the_rest_is_linked() {
        let dir = tempfile::tempdir().expect("tmp");
        let user = dir.path().join("user");
        std::fs::create_dir_all(user.join(".gemini/tmp")).expect("mkdir");
        std::fs::write(
            user.join(".gemini/settings.json"),
            r#"{"general":{"vimMode":true},"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .expect("settings");
        std::fs::write(user.join(".gemini/oauth_creds.json"), "{}").expect("creds");
        std::fs::write(user.join(".env"), "GEMINI_API_KEY=x\n").expect(".env");
        let at = dir.path().join("t/gemini_cli_home.home");
        std::fs::create_dir_all(at.join("stale")).expect("an earlier attempt's");
        assert_eq!(make(&spec(), &at, &user), Ok(None));
        let written: Value = serde_json::from_str(
            &std::fs::read_to_string(at.join(".gemini/settings.json")).expect("settings"),
        )
        .expect("json");
        assert_eq!(written["general"]["maxAttempts"], 1);
        assert_eq!(written["general"]["vimMode"], true, "the user's value wins");
        assert_eq!(
            written["security"]["auth"]["selectedType"],
            "gemini-api-key"
        );
        for linked in [".gemini/oauth_creds.json", ".gemini/tmp", ".env"] {
            let m = std::fs::symlink_metadata(at.join(linked)).expect(linked);
            assert!(m.file_type().is_symlink(), "{linked}");
        }
        assert!(!at.join("stale").exists());
    }

    #[test]
    fn settings_with_a_comment_are_kept_and_said() {
        let dir = tempfile::tempdir().expect("tmp");
        let user = dir.path().join("user");
        std::fs::create_dir_all(user.join(".gemini")).expect("mkdir");
        std::fs::write(user.join(".gemini/settings.json"), "// mine\n{}\n").expect("settings");
        let at = dir.path().join("h");
        let said = make(&spec(), &at, &user).expect("made");
        assert!(said.is_some_and(|s| s.contains("not plain JSON")));
        assert_eq!(
            std::fs::read_to_string(at.join(".gemini/settings.json")).expect("kept"),
            "// mine\n{}\n"
        );
        // No folder of the user's at all: the defaults alone.
        let at = dir.path().join("h2");
        assert_eq!(make(&spec(), &at, &dir.path().join("nobody")), Ok(None));
        assert!(
            std::fs::read_to_string(at.join(".gemini/settings.json"))
                .expect("written")
                .contains("maxAttempts")
        );
    }
}
