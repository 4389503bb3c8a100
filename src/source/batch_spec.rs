//! `BATCH.md`: the definition of a CSV batch (seed `taskmaster-protocol.md`, DESIGN §3).
//!
//! ```text
//! ---
//! input: workers-input.csv        # default: workers-input.csv beside BATCH.md
//! id_column: path                 # default: the row number is the id
//! delimiter: ";"                  # default: tab for a .tsv input, else a comma
//! output: workers-output.csv      # default: workers-output.csv beside BATCH.md
//! output_schema: schema.json      # a path, or an inline JSON Schema object
//! max_workers: 4
//! max_runtime_seconds: 600
//! runner: exec
//! command: [python3, agent.py]    # the program for the `exec` runner
//! retries: 1
//! verify: "test -s {path}"        # argv, split like a shell would, never run by one
//! runner_column: runner           # a row's own runner (an empty cell: the batch's)
//! files_column: files             # the files a row will touch: overlaps are warned of
//! model_column: model             # a row's own model
//! raw_columns: [patch]            # output fields written as given (no formula guard)
//! ---
//! Audit {path}: ...               # the instruction template ({column}, {{ and }})
//! ```
//!
//! With `stages:` (a list of `name` + `instruction` or `instruction_file`, and per stage
//! `after`, `runner`, `model`, `command`, `output_schema`, `verify`, `timeout`, `retries`,
//! `best_of`),
//! each row is a chain of teammates ([`StageSpec`]) and the body is a preamble every
//! stage's instruction starts with (it may be empty).
//!
//! Parsing is pure: text in, [`BatchSpec`] out. Relative paths stay relative; the config
//! layer resolves them against the folder of BATCH.md.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::settings::keys::{keys_of, read_noting_unknown};
use crate::settings::{FileSettings, KeyProblem};

/// The keys of BATCH.md's frontmatter that describe the batch itself, as written (each is
/// checked by [`parse`]). The frontmatter is offered to this struct first; the keys it does
/// not have are runner options of [`FileSettings`], or unknown.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BatchKeys {
    /// `input`: the CSV (or JSON Lines) file.
    input: Option<Value>,
    /// `id_column`: the column whose value identifies a row.
    id_column: Option<Value>,
    /// `delimiter`: the input's field delimiter.
    delimiter: Option<Value>,
    /// `output`: where workers-output.csv goes.
    output: Option<Value>,
    /// `output_schema`: a path, or an inline JSON Schema.
    output_schema: Option<Value>,
    /// `file_cap`: the most bytes of a file `{file:…}` inlines.
    file_cap: Option<Value>,
    /// `image_cap`: the most bytes of an `{image:…}`.
    image_cap: Option<Value>,
    /// `file_root`: the folder `{file:…}` and `{image:…}` paths are relative to.
    file_root: Option<Value>,
    /// `stages`: the chain of teammates each row runs as.
    stages: Option<Value>,
    /// `runner_column`: the input column naming a row's own runner.
    runner_column: Option<Value>,
    /// `model_column`: the input column naming a row's own model.
    model_column: Option<Value>,
    /// `files_column`: the input column naming the files a row will touch.
    files_column: Option<Value>,
    /// `raw_columns`: output columns written without the formula guard.
    raw_columns: Option<Value>,
}

/// The keys of one stage of `stages:`, as written ([`StageSpec`] once checked).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StageKeys {
    /// `name`: the stage's word.
    name: Option<Value>,
    /// `instruction`: its template text.
    instruction: Option<Value>,
    /// `instruction_file`: a file holding it.
    instruction_file: Option<Value>,
    /// `after`: a stage, or a list of them, that must complete first.
    after: Option<Value>,
    /// `runner`: another runner definition.
    runner: Option<Value>,
    /// `model`: another model.
    model: Option<Value>,
    /// `command`: the exec runner's program (a list, or a command line).
    command: Option<Value>,
    /// `output_schema`: the JSON Schema of its report's `output`.
    output_schema: Option<Value>,
    /// `verify`: another verify command.
    verify: Option<Value>,
    /// `timeout`: another time limit per attempt.
    timeout: Option<Value>,
    /// `retries`: another number of retries.
    retries: Option<Value>,
    /// `best_of`: this stage's own fan-out (a number, or runners as `--best-of` takes them).
    best_of: Option<Value>,
}

/// `output_schema` as written: inline or a path to a JSON file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SchemaSource {
    /// An inline JSON Schema object.
    Inline(Value),
    /// A path to a JSON Schema file, relative to BATCH.md's folder unless absolute.
    Path(PathBuf),
}

/// One stage of a row's chain, as BATCH.md's `stages:` writes it (issue 33). Checked here:
/// the name, one instruction, known keys and stages in `after`, no cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StageSpec {
    /// `name`: `[A-Za-z0-9_-]`, at most 40 characters, unique in the batch.
    pub name: String,
    /// `instruction`: the stage's template text.
    pub instruction: Option<String>,
    /// `instruction_file`: a file holding it, relative to BATCH.md's folder.
    pub instruction_file: Option<PathBuf>,
    /// The stages that must complete first, by index into the list; by default the one
    /// before (none for the first).
    pub after: Vec<usize>,
    /// What it changes of the batch's settings (runner, model, command, verify, timeout,
    /// retries, best_of).
    pub overrides: crate::settings::Overrides,
    /// `output_schema`: the JSON Schema of its report's `output` (else the batch's).
    pub output_schema: Option<SchemaSource>,
    /// The line of BATCH.md where the stage starts.
    pub line: Option<u64>,
}

/// A parsed BATCH.md. Every field is optional; flags override them and the config layer fills
/// in defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BatchSpec {
    /// `input`: the CSV file.
    pub input: Option<PathBuf>,
    /// `id_column`: the column whose value identifies a row.
    pub id_column: Option<String>,
    /// `delimiter`: the input's field delimiter, checked (one ASCII character; `\t` or
    /// `tab` for a tab).
    pub delimiter: Option<u8>,
    /// `output`: where workers-output.csv goes.
    pub output: Option<PathBuf>,
    /// `output_schema`: JSON Schema the report's `output` must satisfy.
    pub output_schema: Option<SchemaSource>,
    /// `file_root`: the folder the paths of `{file:…}` and `{image:…}` are relative to
    /// (relative to BATCH.md's folder), when not BATCH.md's folder itself.
    pub file_root: Option<PathBuf>,
    /// `file_cap`: the most bytes of a file `{file:…}` inlines.
    pub file_cap: Option<u64>,
    /// `image_cap`: the most bytes of an `{image:…}`.
    pub image_cap: Option<u64>,
    /// `stages:`: each row runs as this chain of teammates; empty for one teammate a row.
    pub stages: Vec<StageSpec>,
    /// `runner_column`: the input column naming a row's own runner.
    pub runner_column: Option<String>,
    /// `model_column`: the input column naming a row's own model.
    pub model_column: Option<String>,
    /// `files_column`: the input column naming the files a row will touch (rows naming the
    /// same files are warned of as they would conflict when merged).
    pub files_column: Option<String>,
    /// `raw_columns`: the output fields written as the agent gave them, without the
    /// formula guard's leading `'` (a patch's `@@`, a diff's `-`): schema property names,
    /// `STAGE.FIELD` with stages. Checked against the output's columns by the plan.
    pub raw_columns: Vec<String>,
    /// The line of `raw_columns:`, for the plan's message about a name it does not know.
    pub raw_columns_line: Option<u64>,
    /// The runner options the frontmatter sets (the keys runner.toml shares).
    pub settings: FileSettings,
    /// The markdown body: the instruction template.
    pub instruction: String,
    /// 1-based line of the file where the body starts.
    pub instruction_line: u64,
    /// Human-readable warnings (unknown keys, each naming its line).
    pub warnings: Vec<String>,
}

/// Split `---` YAML frontmatter from the body. Returns `(yaml, body, body_line)` where
/// `body_line` is the 1-based line the body starts on; `None` when the text has no
/// frontmatter. Errors when a frontmatter is opened but never closed.
pub(crate) fn split_frontmatter<'a>(
    path: &Path,
    text: &'a str,
) -> Result<Option<(&'a str, &'a str, u64)>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').map_or(text.len(), |i| i + 1);
    if text[..first_end].trim_end() != "---" {
        return Ok(None);
    }
    let mut offset = first_end;
    let mut line = 2u64;
    while offset < text.len() {
        let end = text[offset..]
            .find('\n')
            .map_or(text.len(), |i| offset + i + 1);
        if text[offset..end].trim_end() == "---" {
            return Ok(Some((&text[first_end..offset], &text[end..], line + 1)));
        }
        offset = end;
        line += 1;
    }
    Err(Error::input_at(
        path,
        Some(1),
        "the frontmatter opened with `---` is never closed; add a `---` line after it",
    ))
}

/// The line of the stage named `name` (its `name:` line, with or without the list's `- `);
/// `skip`: how many earlier stages have that name.
fn stage_line(yaml: &str, name: &str, skip: usize) -> Option<u64> {
    yaml.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start().trim_start_matches('-').trim_start();
            l.strip_prefix("name")
                .and_then(|r| r.trim_start().strip_prefix(':'))
                .is_some_and(|v| v.trim().trim_matches(['"', '\'']) == name)
        })
        .nth(skip)
        .map(|(i, _)| i as u64 + 2)
}

/// A circle of stages waiting for each other (indices, in order), if there is one.
fn stage_cycle(stages: &[StageSpec]) -> Option<Vec<usize>> {
    // 0 unseen, 1 on the path, 2 done.
    fn visit(
        i: usize,
        stages: &[StageSpec],
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        match mark[i] {
            2 => return None,
            1 => {
                let from = path.iter().position(|p| *p == i).unwrap_or(0);
                return Some(path[from..].to_vec());
            }
            _ => {}
        }
        mark[i] = 1;
        path.push(i);
        for &j in &stages[i].after {
            if let Some(c) = visit(j, stages, mark, path) {
                return Some(c);
            }
        }
        path.pop();
        mark[i] = 2;
        None
    }
    let mut mark = vec![0u8; stages.len()];
    (0..stages.len()).find_map(|i| visit(i, stages, &mut mark, &mut Vec::new()))
}

fn key_line(yaml: &str, key: &str) -> Option<u64> {
    yaml.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|i| i as u64 + 2)
}

struct Fields<'a> {
    path: &'a Path,
    yaml: &'a str,
    keys: BatchKeys,
}

/// The `at` of one stage: its error, at its line (else the line of `stages:`), prefixed by
/// the stage (`stage 2: …`, `stage `review`: …`).
type At<'a> = dyn Fn(String) -> Error + 'a;

impl Fields<'_> {
    fn bad(&self, key: &str, what: &str) -> Error {
        Error::input_at(
            self.path,
            key_line(self.yaml, key),
            format!("`{key}` must be {what}"),
        )
    }

    /// An `output_schema` value: a path, or an inline schema (checked here so that a bad
    /// one is named by its line).
    fn schema(&self, v: Option<&Value>) -> Result<Option<SchemaSource>> {
        let inline = |v: Value| match jsonschema::validator_for(&v) {
            Ok(_) => Ok(SchemaSource::Inline(v)),
            Err(e) => Err(self.bad("output_schema", &format!("a valid JSON Schema ({e})"))),
        };
        Ok(match v {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim_start().starts_with('{') => {
                let v: Value = serde_json::from_str(s)
                    .map_err(|e| self.bad("output_schema", &format!("a JSON Schema ({e})")))?;
                Some(inline(v)?)
            }
            Some(Value::String(s)) if !s.trim().is_empty() => {
                Some(SchemaSource::Path(PathBuf::from(s)))
            }
            Some(v @ Value::Object(_)) => Some(inline(v.clone())?),
            Some(_) => {
                return Err(self.bad("output_schema", "a path or an inline JSON Schema object"));
            }
        })
    }

    /// `stages:`, checked ([`StageSpec`]): each stage on its own, then what each waits for,
    /// then no circle.
    fn stages(&self) -> Result<Vec<StageSpec>> {
        let list = match &self.keys.stages {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(list)) if !list.is_empty() => list,
            Some(Value::Array(_)) => {
                return Err(self.bad(
                    "stages",
                    "a list of at least one stage (`- name: …` with an `instruction`), or left out",
                ));
            }
            Some(_) => {
                return Err(self.bad(
                    "stages",
                    "a list of stages, each with a `name` and an `instruction` or `instruction_file`",
                ));
            }
        };
        let mut stages: Vec<StageSpec> = Vec::new();
        let mut afters: Vec<Option<Vec<String>>> = Vec::new();
        for (n, entry) in list.iter().enumerate() {
            let (stage, after) = self.stage(n, entry, &stages)?;
            stages.push(stage);
            afters.push(after);
        }
        for (i, after) in afters.into_iter().enumerate() {
            stages[i].after = self.after(&stages, i, after)?;
        }
        if let Some(cycle) = stage_cycle(&stages) {
            return Err(Error::input_at(
                self.path,
                stages[cycle[0]].line,
                format!(
                    "the stages wait for each other in a circle: {}; one of them must come first",
                    cycle
                        .iter()
                        .chain(cycle.first())
                        .map(|i| stages[*i].name.as_str())
                        .collect::<Vec<_>>()
                        .join(" → ")
                ),
            ));
        }
        Ok(stages)
    }

    /// Stage `n` of the list (`before`: the stages above it), checked on its own, and the
    /// names its `after` gives (`None`: the stage before it).
    fn stage(
        &self,
        n: usize,
        entry: &Value,
        before: &[StageSpec],
    ) -> Result<(StageSpec, Option<Vec<String>>)> {
        let (name, keys, unknown) = self.stage_keys(n, entry)?;
        // The line of this stage, not of an earlier one by the same name.
        let same_before = before.iter().filter(|s| s.name == name).count();
        let line = stage_line(self.yaml, &name, same_before);
        let at = |what: String| {
            Error::input_at(
                self.path,
                line.or(key_line(self.yaml, "stages")),
                format!("stage `{name}`: {what}"),
            )
        };
        if name.is_empty()
            || name.len() > 40
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(at(
                "a stage's name is a word of at most 40 letters, digits, `_` or `-`".into(),
            ));
        }
        if before.iter().any(|s| s.name == name) {
            return Err(at("two stages have this name; give each its own".into()));
        }
        if let Some(key) = unknown.first() {
            let known = keys_of::<StageKeys>();
            return Err(at(format!(
                "unknown key `{key}`{} (a stage has: {})",
                crate::suggest::did_you_mean(key, known.iter().copied()),
                known.join(", ")
            )));
        }
        let text = |key: &str, v: &Option<Value>| stage_text(&at, key, v);
        let instruction = text("instruction", &keys.instruction)?;
        let instruction_file = text("instruction_file", &keys.instruction_file)?.map(PathBuf::from);
        if instruction.is_some() == instruction_file.is_some() {
            return Err(at(
                "give it either `instruction` (the text) or `instruction_file` (a file)".into(),
            ));
        }
        let after = stage_after(&at, &keys.after)?;
        let overrides = crate::settings::Overrides {
            runner: text("runner", &keys.runner)?,
            model: text("model", &keys.model)?,
            command: stage_command(&at, &keys.command)?,
            verify: text("verify", &keys.verify)?,
            timeout: text("timeout", &keys.timeout)?
                .map(|t| crate::settings::parse_duration("timeout", &t))
                .transpose()
                .map_err(|e| at(e.to_string()))?,
            retries: stage_retries(&at, &keys.retries)?,
            best_of: stage_best_of(&at, &keys.best_of)?,
        };
        let output_schema = self
            .schema(keys.output_schema.as_ref())
            .map_err(|e| match e {
                // Named at the stage's line, once.
                Error::Input { message, .. } => at(message),
                other => at(other.to_string()),
            })?;
        let stage = StageSpec {
            name: name.clone(),
            instruction,
            instruction_file,
            after: Vec::new(),
            overrides,
            output_schema,
            line,
        };
        Ok((stage, after))
    }

    /// Stage `n`'s name, its keys, and the keys it has that a stage has not.
    ///
    /// Errors: not a mapping; no name, or one that is not text.
    fn stage_keys(&self, n: usize, entry: &Value) -> Result<(String, StageKeys, Vec<String>)> {
        let at = |what: &str| {
            Error::input_at(
                self.path,
                key_line(self.yaml, "stages"),
                format!("stage {}: {what}", n + 1),
            )
        };
        if !entry.is_object() {
            return Err(at("must be a mapping with `name:` and `instruction:`"));
        }
        let (keys, unknown) = read_noting_unknown::<StageKeys, _>(entry.clone());
        let keys = keys.map_err(|e| at(&e.to_string()))?;
        let name = match &keys.name {
            Some(Value::String(s)) => s.trim().to_owned(),
            None | Some(Value::Null) => {
                return Err(at("has no `name` (a word: letters, digits, `_`, `-`)"));
            }
            Some(_) => {
                return Err(at(
                    "its `name` must be a word of letters, digits, `_` or `-`, in quotes if it is a number",
                ));
            }
        };
        Ok((name, keys, unknown))
    }

    /// The stages stage `i` waits for, by index: those its `after` names, else the one
    /// before it (none for the first).
    ///
    /// Errors: a name no stage has (with the closest), the stage itself.
    fn after(
        &self,
        stages: &[StageSpec],
        i: usize,
        after: Option<Vec<String>>,
    ) -> Result<Vec<usize>> {
        let Some(names) = after else {
            return Ok(i.checked_sub(1).into_iter().collect());
        };
        let mut ids = Vec::new();
        for name in names {
            let Some(j) = stages.iter().position(|s| s.name == name) else {
                return Err(Error::input_at(
                    self.path,
                    stages[i].line,
                    format!(
                        "stage `{}`: `after` names no stage `{name}`{}",
                        stages[i].name,
                        crate::suggest::did_you_mean(&name, stages.iter().map(|s| s.name.as_str()))
                    ),
                ));
            };
            if j == i {
                return Err(Error::input_at(
                    self.path,
                    stages[i].line,
                    format!("stage `{name}` cannot come after itself"),
                ));
            }
            ids.push(j);
        }
        Ok(ids)
    }

    /// The input's field delimiter. Not [`Fields::string`]: a tab or a space is a
    /// delimiter, not an empty value.
    fn delimiter(&self) -> Result<Option<u8>> {
        match &self.keys.delimiter {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(d)) => {
                crate::source::csv_input::delimiter_for("`delimiter`", Some(d), None)
                    .map(Some)
                    .map_err(|e| {
                        Error::input_at(self.path, key_line(self.yaml, "delimiter"), e.to_string())
                    })
            }
            Some(_) => Err(self.bad("delimiter", "one character, e.g. \";\" or \"\\t\"")),
        }
    }

    /// A size (`256KiB`, `1MiB`, `300000`), for `file_cap` and `image_cap`.
    fn size(&self, key: &str, v: &Option<Value>) -> Result<Option<u64>> {
        match self.string(key, v)? {
            None => Ok(None),
            Some(s) => crate::inline::parse_cap(&s)
                .map(Some)
                .map_err(|why| self.bad(key, &why)),
        }
    }

    /// A list of names (or one name), for `raw_columns`; a name given twice is refused.
    fn names(&self, key: &str, v: &Option<Value>) -> Result<Vec<String>> {
        let rule = "a column name or a list of them (`[patch]`)";
        let names = self.name_list(key, v, rule)?;
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(Error::input_at(
                    self.path,
                    key_line(self.yaml, key),
                    format!("`{key}` names `{name}` twice; list each column once"),
                ));
            }
        }
        Ok(names)
    }

    /// [`Self::names`] before the check for duplicates.
    fn name_list(&self, key: &str, v: &Option<Value>, rule: &str) -> Result<Vec<String>> {
        match v {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(vec![s.trim().to_owned()]),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.bad(key, rule)),
            Some(_) => Err(self.bad(key, rule)),
        }
    }

    fn string(&self, key: &str, v: &Option<Value>) -> Result<Option<String>> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(self.bad(key, "a non-empty string")),
        }
    }
}

/// A stage's text value (`instruction`, `runner`, …).
fn stage_text(at: &At<'_>, key: &str, v: &Option<Value>) -> Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(at(format!("`{key}` must be a non-empty string"))),
    }
}

/// A stage's `after`: one stage's name, or a list of them.
fn stage_after(at: &At<'_>, v: &Option<Value>) -> Result<Option<Vec<String>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(vec![s.trim().to_owned()])),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(|s| s.trim().to_owned()))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| at("`after` must name stages".into())),
        Some(_) => Err(at("`after` must name a stage or a list of them".into())),
    }
}

/// A stage's `command`: a list of words, or one command line split as a shell would.
fn stage_command(at: &At<'_>, v: &Option<Value>) -> Result<Option<Vec<String>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| at("`command` must be a list of words".into())),
        Some(Value::String(s)) if !s.trim().is_empty() => shlex::split(s)
            .map(Some)
            .ok_or_else(|| at("`command` has an unclosed quote".into())),
        Some(_) => Err(at("`command` must be a list of words, program first".into())),
    }
}

/// A stage's `retries`: a whole number, 0 or more.
fn stage_retries(at: &At<'_>, v: &Option<Value>) -> Result<Option<u32>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| at("`retries` must be a whole number, 0 or more".into())),
    }
}

/// A stage's `best_of`: a number, or runners as `--best-of` takes them (comma text or a
/// list, [`crate::options::best_of::BestOf::from_value`]), each of which exists.
fn stage_best_of(
    at: &At<'_>,
    v: &Option<Value>,
) -> Result<Option<crate::options::best_of::BestOf>> {
    let Some(v) = v else { return Ok(None) };
    let Some(b) = crate::options::best_of::BestOf::from_value(v)
        .map_err(|rule| at(format!("`best_of` {rule}")))?
    else {
        return Ok(None);
    };
    for (r, _) in &b.runners {
        crate::agent::definition::load(r, None, None)
            .map_err(|e| at(format!("`best_of` candidate {r}: {e}")))?;
    }
    Ok(Some(b))
}

/// The frontmatter's YAML as a mapping (an empty one for an empty frontmatter).
///
/// Errors: YAML that does not parse (naming the file's line, a tab used for indenting, a key
/// set twice), or that is not `key: value` lines.
fn frontmatter(path: &Path, yaml: &str) -> Result<Map<String, Value>> {
    if yaml.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: Value = serde_saphyr::from_str(yaml).map_err(|e| {
        // The frontmatter starts on the file's line 2: the message, its snippet and the
        // line named count the file's lines.
        let name = path.display().to_string();
        let text = e.render_with_options(serde_saphyr::render_options! {
            line_offset: 1,
            source_name: Some(name.as_str()),
        });
        // The parser blames a tab at the end of the line before it: name the line that
        // is indented with one.
        if let Some(i) = yaml
            .lines()
            .position(|l| l.trim_start_matches(' ').starts_with('\t'))
            .filter(|_| text.contains("tab"))
        {
            return Error::input_at(
                path,
                Some(i as u64 + 2),
                "the frontmatter is indented with a tab, which YAML does not allow; \
                 indent with spaces",
            );
        }
        let line = e.location().map(|l| l.line() + 1).filter(|l| *l > 1);
        // The library's wording names its own option; say what to do instead.
        let plain = e.without_snippet().to_string();
        if let Some(rest) = plain.split("duplicate mapping key: ").nth(1) {
            let key = rest.split(',').next().unwrap_or_default().trim();
            return Error::input_at(
                path,
                line,
                format!("`{key}` is set twice in the frontmatter; keep one of them"),
            );
        }
        Error::input_at(
            path,
            line,
            format!("the frontmatter is not valid YAML: {text}"),
        )
    })?;
    match value {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        _ => Err(Error::input_at(
            path,
            Some(2),
            "the frontmatter must be `key: value` lines",
        )),
    }
}

/// The warning for a key of the frontmatter that is neither the batch's nor a runner
/// option (or not one of its table's, `worktree.setpu`), with its line and the closest key.
fn unknown_key_warning(path: &Path, yaml: &str, key: &str, known: &[String]) -> String {
    let top = key.split('.').next().unwrap_or_default();
    let line = key_line(yaml, top)
        .map(|l| format!(":{l}"))
        .unwrap_or_default();
    let known: Vec<&str> = if key.contains('.') {
        known.iter().map(String::as_str).collect()
    } else {
        keys_of::<BatchKeys>()
            .iter()
            .copied()
            .chain(known.iter().map(String::as_str))
            .collect()
    };
    let leaf = key.rsplit('.').next().unwrap_or_default();
    format!(
        "{}{line}: unknown key `{key}` ignored{} (known: {})",
        path.display(),
        crate::suggest::did_you_mean(leaf, known.iter().copied()),
        known.join(", ")
    )
}

/// Parse BATCH.md text. `path` is used in messages only.
///
/// Errors ([`Error::Input`] naming the file and line): no frontmatter, YAML that does not
/// parse or is not a mapping, a key of the wrong type, an empty instruction body.
pub(crate) fn parse(path: &Path, text: &str) -> Result<BatchSpec> {
    let Some((yaml, body, body_line)) = split_frontmatter(path, text)? else {
        return Err(Error::input_at(
            path,
            Some(1),
            "BATCH.md must start with a `---` YAML frontmatter (input, id_column, ...) followed \
             by the instruction",
        ));
    };
    let mut map = frontmatter(path, yaml)?;
    // The batch's own keys first; what they leave are runner options, or unknown.
    let (keys, others) = read_noting_unknown::<BatchKeys, _>(Value::Object(map.clone()));
    let keys = keys.map_err(|e| Error::input_at(path, Some(2), e.to_string()))?;
    map.retain(|k, _| others.contains(k));
    let (mut settings, unknown) = FileSettings::from_map(map).map_err(|p| match p {
        KeyProblem::Invalid { key, rule } => {
            let top = key.split('.').next().unwrap_or_default();
            Error::input_at(path, key_line(yaml, top), format!("`{key}` {rule}"))
        }
        KeyProblem::Unknown { key, .. } => {
            Error::input_at(path, None, format!("unknown key `{key}`"))
        }
    })?;
    if settings.notify.is_some() {
        settings.notify_at = Some(crate::settings::set_at(path, key_line(yaml, "notify")));
    }
    if settings.judge.is_some() {
        settings.judge_at = Some(crate::settings::set_at(path, key_line(yaml, "judge")));
    }
    let warnings = unknown
        .into_iter()
        .filter_map(|p| match p {
            KeyProblem::Unknown { key, known } => {
                Some(unknown_key_warning(path, yaml, &key, &known))
            }
            KeyProblem::Invalid { .. } => None,
        })
        .collect();
    let fields = Fields { path, yaml, keys };
    let output_schema = fields.schema(fields.keys.output_schema.as_ref())?;
    let stages = fields.stages()?;
    // With stages, the body is a preamble, and may be empty.
    if body.trim().is_empty() && stages.is_empty() {
        return Err(Error::input_at(
            path,
            Some(body_line),
            "the instruction (the text after the frontmatter) is empty; write what each teammate \
             must do, using {column} for the row's values",
        ));
    }
    let k = &fields.keys;
    Ok(BatchSpec {
        delimiter: fields.delimiter()?,
        input: fields.string("input", &k.input)?.map(PathBuf::from),
        id_column: fields.string("id_column", &k.id_column)?,
        output: fields.string("output", &k.output)?.map(PathBuf::from),
        output_schema,
        file_root: fields.string("file_root", &k.file_root)?.map(PathBuf::from),
        file_cap: fields.size("file_cap", &k.file_cap)?,
        image_cap: fields.size("image_cap", &k.image_cap)?,
        stages,
        runner_column: fields.string("runner_column", &k.runner_column)?,
        model_column: fields.string("model_column", &k.model_column)?,
        files_column: fields.string("files_column", &k.files_column)?,
        raw_columns: fields.names("raw_columns", &k.raw_columns)?,
        raw_columns_line: key_line(yaml, "raw_columns"),
        settings,
        instruction: body.to_owned(),
        instruction_line: body_line,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<BatchSpec> {
        parse(Path::new("BATCH.md"), text)
    }

    #[test]
    fn raw_columns_is_one_name_or_a_list_of_names_with_its_line() {
        let spec = p("---\nid_column: id\nraw_columns: [patch, fix.diff]\n---\nDo {id}.\n")
            .expect("valid");
        assert_eq!(spec.raw_columns, ["patch", "fix.diff"]);
        assert_eq!(spec.raw_columns_line, Some(3));
        let spec = p("---\nraw_columns: patch\n---\nDo it.\n").expect("valid");
        assert_eq!(spec.raw_columns, ["patch"]);
        for bad in [
            "raw_columns: [patch, 3]",
            "raw_columns: {a: 1}",
            "raw_columns: ['']",
        ] {
            let e = p(&format!("---\n{bad}\n---\nDo it.\n")).expect_err(bad);
            let e = e.to_string();
            assert!(
                e.contains("BATCH.md:2") && e.contains("`raw_columns` must be"),
                "{e}"
            );
        }
    }

    #[test]
    fn full_frontmatter_parses() {
        let spec = p(
            "---\ninput: in.csv\nid_column: path\nmax_workers: 3\nmax_runtime_seconds: 60\n\
                      output_schema:\n  type: object\n  properties:\n    ok: {type: boolean}\n\
                      command: [python3, a.py]\nretries: 2\n---\nCheck {path}.\n",
        )
        .expect("valid");
        assert_eq!(spec.input.as_deref(), Some(Path::new("in.csv")));
        assert_eq!(spec.id_column.as_deref(), Some("path"));
        assert_eq!(spec.settings.max_workers, Some(3));
        assert_eq!(
            spec.settings.command,
            Some(vec!["python3".into(), "a.py".into()])
        );
        assert_eq!(spec.instruction, "Check {path}.\n");
        assert_eq!(spec.instruction_line, 13);
        assert!(matches!(spec.output_schema, Some(SchemaSource::Inline(_))));
        assert!(spec.warnings.is_empty());
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let e = p("---\ninput: a.csv\nmax_workers: many\n---\nx\n").expect_err("bad");
        assert_eq!(
            e.to_string(),
            "BATCH.md:3: `max_workers` must be a whole number ≥ 1"
        );
    }

    #[test]
    fn yaml_errors_count_the_files_lines() {
        let e = p("---\ninput: a.csv\njobs: 2\n  bad: [\n---\nx\n").expect_err("bad");
        let text = e.to_string();
        assert!(
            text.starts_with("BATCH.md:4: the frontmatter is not valid YAML"),
            "{text}"
        );
        assert!(text.contains("BATCH.md:4:6"), "{text}");
        let e = p("---\ninput: a.csv\njobs: 2\ninput: b.csv\n---\nx\n").expect_err("twice");
        assert_eq!(
            e.to_string(),
            "BATCH.md:4: `input` is set twice in the frontmatter; keep one of them"
        );
        let e = p("---\nisolate: yes\n---\nx\n").expect_err("a boolean");
        assert_eq!(
            e.to_string(),
            "BATCH.md:2: `isolate` must be none or worktree"
        );
        let e = p("---\ninput: a.csv\n\tjobs: 2\n---\nx\n").expect_err("tab");
        assert_eq!(
            e.to_string(),
            "BATCH.md:3: the frontmatter is indented with a tab, which YAML does not allow; \
             indent with spaces"
        );
    }

    #[test]
    fn an_inline_output_schema_that_is_no_schema_is_named_by_its_line() {
        for text in [
            "---\ninput: a.csv\noutput_schema: {\"type\": \"objekt\"}\n---\nx\n",
            "---\ninput: a.csv\noutput_schema:\n  type: objekt\n---\nx\n",
        ] {
            let e = p(text).expect_err("bad schema").to_string();
            assert!(
                e.starts_with("BATCH.md:3: `output_schema` must be a valid JSON Schema"),
                "{e}"
            );
        }
    }

    #[test]
    fn unknown_keys_warn() {
        let spec = p("---\nmax_wrokers: 2\n---\nx\n").expect("valid");
        assert_eq!(spec.warnings.len(), 1);
        assert!(spec.warnings[0].starts_with("BATCH.md:2: unknown key `max_wrokers`"));
        assert!(
            spec.warnings[0].contains("did you mean `max_workers`?"),
            "{}",
            spec.warnings[0]
        );
    }

    #[test]
    fn the_known_keys_come_from_the_batchs_structs() {
        let spec =
            p("---\ninput: a.csv\nworktree: {copy: [a], setpu: x}\n---\nx\n").expect("valid");
        assert_eq!(
            spec.warnings,
            [
                "BATCH.md:3: unknown key `worktree.setpu` ignored; did you mean `setup`? (known: copy, setup)"
            ]
        );
        let spec = p("---\ninptu: a.csv\n---\nx\n").expect("valid");
        assert!(
            spec.warnings[0].contains("did you mean `input`? (known: input, id_column, delimiter,"),
            "{}",
            spec.warnings[0]
        );
        let e = p("---\nstages:\n  - name: a\n    instruction: x\n    runer: codex\n---\n")
            .expect_err("unknown stage key")
            .to_string();
        assert_eq!(
            e,
            "BATCH.md:3: stage `a`: unknown key `runer`; did you mean `runner`? (a stage has: \
             name, instruction, instruction_file, after, runner, model, command, output_schema, \
             verify, timeout, retries, best_of)"
        );
    }

    #[test]
    fn missing_or_unclosed_frontmatter_is_an_error() {
        assert!(p("just text\n").is_err());
        assert!(
            p("---\ninput: a\n")
                .expect_err("unclosed")
                .to_string()
                .contains("never closed")
        );
        assert!(
            p("---\ninput: a\n---\n\n")
                .expect_err("empty")
                .to_string()
                .contains("empty")
        );
    }

    #[test]
    fn delimiter_key_takes_one_character_or_a_tab() {
        let d = |v: &str| p(&format!("---\ndelimiter: {v}\n---\nx\n")).map(|s| s.delimiter);
        assert_eq!(d("\";\"").expect("ok"), Some(b';'));
        assert_eq!(d("\"\\t\"").expect("ok"), Some(b'\t'));
        assert_eq!(d("'\\t'").expect("ok"), Some(b'\t'));
        assert_eq!(d("tab").expect("ok"), Some(b'\t'));
        let e = d("\";;\"").expect_err("two").to_string();
        assert!(
            e.starts_with("BATCH.md:2: `delimiter` `;;` must be one character"),
            "{e}"
        );
        let e = d("[1]").expect_err("list").to_string();
        assert!(
            e.starts_with("BATCH.md:2: `delimiter` must be one character"),
            "{e}"
        );
    }

    #[test]
    fn crlf_and_bom_are_accepted() {
        let spec = p("\u{feff}---\r\nid_column: id\r\n---\r\nDo {id}\r\n").expect("valid");
        assert_eq!(spec.id_column.as_deref(), Some("id"));
        assert_eq!(spec.instruction, "Do {id}\r\n");
    }
}
