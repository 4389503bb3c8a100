//! Reading an agent CLI's stdout through its definition's `[result]` pointers.

use serde_json::Value;

use super::definition::{EndedSpec, ErrorFlag, OutputFormat, Pointer, RunnerDef};

/// What the runner learned from an agent's stdout. Every field is optional: a CLI that
/// crashed prints nothing useful.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AgentResult {
    /// The agent's final answer text (searched for a report when no report file exists).
    pub final_text: Option<String>,
    /// The CLI's own error flag (e.g. Claude's `is_error`); `Some(true)` fails the item.
    pub is_error: Option<bool>,
    /// The CLI's own error message (`[result] error_text`), when it printed one.
    pub error_text: Option<String>,
    /// Why the output could not be read as the definition says (e.g. no JSON at all).
    pub parse_problem: Option<String>,
    /// Session id.
    pub session_id: Option<String>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
    /// Input tokens (every one: those read from the provider's prompt cache too).
    pub input_tokens: Option<u64>,
    /// Of the input tokens, those read from the provider's prompt cache (OpenAI's
    /// `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`).
    pub cached_input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Turns taken.
    pub turns: Option<u64>,
    /// The model that answered, as the CLI or the API says (not as asked).
    pub model: Option<String>,
    /// How the CLI says its run ended, in the words of a reason (`[result] ended`: "stopped
    /// at its turn limit"); `None` when it said nothing its definition explains.
    pub ended: Option<String>,
}

fn lookup<'v>(lines: &'v [Value], p: &Pointer) -> Option<&'v Value> {
    let (pointer, when) = match p {
        Pointer::Plain(s) => (s.as_str(), None),
        Pointer::When { pointer, when } => (pointer.as_str(), Some(when)),
    };
    lines.iter().rev().find_map(|line| {
        if let Some(when) = when {
            for (wp, want) in when {
                let got = line.pointer(wp)?;
                let want = serde_json::to_value(want).ok()?;
                let matches = match &want {
                    Value::Array(any) => any.contains(got),
                    one => one == got,
                };
                if !matches {
                    return None;
                }
            }
        }
        line.pointer(pointer).filter(|v| !v.is_null())
    })
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// A flag's value: a boolean, `"true"`/`"false"`, or a number (an exit status: non-zero is
/// `true`).
fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_f64() != Some(0.0)),
        Value::String(s) => match s.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Parse `stdout` as the definition says (JSON repaired first: [`crate::json_text`]).
pub(crate) fn parse(def: &RunnerDef, stdout: &str) -> AgentResult {
    if def.output == OutputFormat::Text {
        return AgentResult {
            final_text: Some(stdout.to_owned()),
            ..Default::default()
        };
    }
    let stdout = crate::json_text::repaired(stdout);
    let stdout = stdout.as_ref();
    let lines: Vec<Value> = match def.output {
        OutputFormat::Text => Vec::new(),
        OutputFormat::Json => match serde_json::from_str::<Value>(stdout.trim()) {
            Ok(v) => vec![v],
            Err(_) => stdout
                .lines()
                .rev()
                .find_map(|l| {
                    serde_json::from_str::<Value>(l.trim())
                        .ok()
                        .filter(Value::is_object)
                })
                .into_iter()
                .collect(),
        },
        OutputFormat::Jsonl => stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
            .filter(Value::is_object)
            .collect(),
    };
    if lines.is_empty() {
        return AgentResult {
            parse_problem: Some(format!(
                "the `{}` runner expected JSON on stdout and found none",
                def.name
            )),
            ..Default::default()
        };
    }
    let r = &def.result;
    let flag = |f: &ErrorFlag| {
        let v = lookup(&lines, &f.pointer)?;
        match f.equals.is_empty() {
            true => as_bool(v),
            false => Some(f.equals.contains(v)),
        }
    };
    let ended = |e: &EndedSpec| {
        let word = lookup(&lines, &e.pointer)?.as_str()?;
        e.says.get(word).cloned()
    };
    let get = |p: &Option<Pointer>| p.as_ref().and_then(|p| lookup(&lines, p));
    AgentResult {
        final_text: get(&r.final_text).and_then(as_text),
        is_error: r.is_error.as_ref().and_then(flag),
        error_text: get(&r.error_text).and_then(as_text),
        parse_problem: None,
        session_id: get(&r.session_id).and_then(as_text),
        cost_usd: get(&r.cost_usd).and_then(Value::as_f64),
        input_tokens: get(&r.input_tokens).and_then(Value::as_u64),
        cached_input_tokens: None,
        output_tokens: get(&r.output_tokens).and_then(Value::as_u64),
        turns: get(&r.turns).and_then(Value::as_u64),
        model: get(&r.model).and_then(as_text),
        ended: r.ended.as_ref().and_then(ended),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn def(output: &str, result: &str) -> RunnerDef {
        RunnerDef::parse(
            Path::new("t.toml"),
            &format!("name='t'\nprogram='t'\nargs=[]\nprompt='stdin'\noutput='{output}'\n[result]\n{result}"),
        )
        .expect("valid")
    }

    #[test]
    fn json_object_fields() {
        let d = def(
            "json",
            "final_text='/result'\nis_error='/is_error'\ncost_usd='/total_cost_usd'\ninput_tokens='/usage/input_tokens'\n",
        );
        let r = parse(
            &d,
            r#"{"result":"done","is_error":true,"total_cost_usd":0.25,"usage":{"input_tokens":12}}"#,
        );
        assert_eq!(r.final_text.as_deref(), Some("done"));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.cost_usd, Some(0.25));
        assert_eq!(r.input_tokens, Some(12));
    }

    #[test]
    fn json_last_line_after_noise() {
        let d = def("json", "final_text='/result'\n");
        let r = parse(&d, "warning: something\n{\"result\":\"ok\"}\n");
        assert_eq!(r.final_text.as_deref(), Some("ok"));
    }

    #[test]
    fn jsonl_last_matching_line_wins() {
        let d = def(
            "jsonl",
            "final_text={pointer='/item/text', when={'/type'='item.completed','/item/type'='agent_message'}}\nsession_id='/thread_id'\n",
        );
        let out = "{\"type\":\"thread.started\",\"thread_id\":\"T1\"}\n\
                   {\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"first\"}}\n\
                   {\"type\":\"item.completed\",\"item\":{\"type\":\"reasoning\",\"text\":\"think\"}}\n\
                   {\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"last\"}}\n";
        let r = parse(&d, out);
        assert_eq!(r.final_text.as_deref(), Some("last"));
        assert_eq!(r.session_id.as_deref(), Some("T1"));
    }

    #[test]
    fn no_json_is_a_parse_problem() {
        let d = def("json", "final_text='/result'\n");
        let r = parse(&d, "Segmentation fault\n");
        assert!(r.final_text.is_none());
        assert!(r.parse_problem.is_some());
    }

    fn builtin(name: &str) -> RunnerDef {
        let (_, text) = crate::agent::definition::BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .expect("a built-in");
        RunnerDef::parse(Path::new(name), text).expect("valid")
    }

    #[test]
    fn each_builtin_error_event_or_flag_says_error_only_when_the_run_ended_so() {
        let cases = [
            // codex: the last turn event.
            (
                "codex",
                "{\"type\":\"turn.started\"}\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"{}\"}}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n",
                Some(true),
            ),
            (
                "codex",
                "{\"type\":\"turn.failed\",\"error\":{\"message\":\"x\"}}\n{\"type\":\"turn.completed\",\"usage\":{}}\n",
                Some(false),
            ),
            // copilot: the result line's exitCode.
            (
                "copilot",
                "{\"type\":\"session.error\",\"data\":{\"message\":\"429\"}}\n{\"type\":\"result\",\"exitCode\":1}\n",
                Some(true),
            ),
            (
                "copilot",
                "{\"type\":\"result\",\"exitCode\":0}\n",
                Some(false),
            ),
            // pi: the last assistant message's stopReason.
            (
                "pi",
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"error\",\"errorMessage\":\"401\"}}\n",
                Some(true),
            ),
            (
                "pi",
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"stop\"}}\n",
                Some(false),
            ),
            // cline: the run_result's finishReason.
            (
                "cline",
                "{\"type\":\"agent_event\",\"event\":{\"type\":\"error\",\"error\":{\"message\":\"401\"}}}\n{\"type\":\"run_result\",\"finishReason\":\"error\",\"text\":\"401\"}\n",
                Some(true),
            ),
            (
                "cline",
                "{\"type\":\"run_result\",\"finishReason\":\"completed\",\"text\":\"done\"}\n",
                Some(false),
            ),
            // opencode: an error line after the last finished step.
            (
                "opencode",
                "{\"type\":\"step_finish\",\"part\":{}}\n{\"type\":\"error\",\"error\":{\"data\":{\"message\":\"x\"}}}\n",
                Some(true),
            ),
            (
                "opencode",
                "{\"type\":\"error\",\"error\":{}}\n{\"type\":\"step_finish\",\"part\":{}}\n",
                Some(false),
            ),
            // No terminal event at all: nothing is said.
            ("codex", "{\"type\":\"turn.started\"}\n", None),
        ];
        for (cli, out, want) in cases {
            assert_eq!(parse(&builtin(cli), out).is_error, want, "{cli}: {out}");
        }
    }

    #[test]
    fn a_when_list_matches_any_of_its_values_and_equals_needs_is_error() {
        let d = def(
            "jsonl",
            "final_text={pointer='/t', when={'/type'=['a','b']}}\n",
        );
        let r = parse(
            &d,
            "{\"type\":\"a\",\"t\":\"1\"}\n{\"type\":\"c\",\"t\":\"2\"}\n",
        );
        assert_eq!(r.final_text.as_deref(), Some("1"));
        assert!(
            RunnerDef::parse(
                Path::new("t.toml"),
                "name='t'\nprogram='t'\noutput='jsonl'\n[result]\nfinal_text={pointer='/t', equals='x'}\n",
            )
            .is_err(),
            "`equals` is refused outside is_error"
        );
    }
}
