//! Reading an agent CLI's stdout through its definition's `[result]` pointers.

use serde_json::Value;

use super::definition::{OutputFormat, Pointer, RunnerDef};

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
                if *got != want {
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

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Parse `stdout` as the definition says.
pub(crate) fn parse(def: &RunnerDef, stdout: &str) -> AgentResult {
    let lines: Vec<Value> = match def.output {
        OutputFormat::Text => {
            return AgentResult {
                final_text: Some(stdout.to_owned()),
                ..Default::default()
            };
        }
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
    let get = |p: &Option<Pointer>| p.as_ref().and_then(|p| lookup(&lines, p));
    AgentResult {
        final_text: get(&r.final_text).and_then(as_text),
        is_error: get(&r.is_error).and_then(as_bool),
        error_text: get(&r.error_text).and_then(as_text),
        parse_problem: None,
        session_id: get(&r.session_id).and_then(as_text),
        cost_usd: get(&r.cost_usd).and_then(Value::as_f64),
        input_tokens: get(&r.input_tokens).and_then(Value::as_u64),
        cached_input_tokens: None,
        output_tokens: get(&r.output_tokens).and_then(Value::as_u64),
        turns: get(&r.turns).and_then(Value::as_u64),
        model: get(&r.model).and_then(as_text),
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
}
