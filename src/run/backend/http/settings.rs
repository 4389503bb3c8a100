//! Building the HTTP backend of a run from its settings: the base URL (`--var base_url`,
//! the definition's variable, `[http] base_url`), the key, the model, prices, the wire
//! format with its options, extra headers and body fields, and the one client. Every check
//! is made here, before anything is written.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::Http;
use super::wire::{self, Usage, WireFormat};
use crate::agent::definition::HttpSpec;
use crate::error::{Error, Result};
use crate::settings::Settings;

impl Http {
    /// The backend for `settings`, whose runner definition is of kind `http` with `spec`:
    /// base URL, key, model, headers, body fields and prices from `[http]`, the environment
    /// and `--var`, the wire format of `[http] api`, and the one client of the run.
    ///
    /// Errors (nothing is written before them): no model (`--model` missing) or a `--var`
    /// this backend does not take or cannot use (exit 2); the default, hosted base URL with
    /// no key in the environment (unless a dry run, which sends nothing), or a client that
    /// cannot be built (exit 3).
    pub(crate) fn for_settings(settings: &Settings, spec: &HttpSpec) -> Result<Http> {
        let def = &settings.runner;
        let usage = |m: String| Error::Usage(format!("runner `{}`: {m}", def.name));
        let vars = &settings.vars;
        let wire = wire::for_api(spec.api, vars, &usage)?;
        check_vars(vars, wire.vars(), &usage)?;
        let (base, parsed) = base_url(spec, vars, &usage)?;
        let key = (!spec.key_env.is_empty())
            .then(|| std::env::var(&spec.key_env).ok())
            .flatten()
            .filter(|k| !k.trim().is_empty());
        let needs_key = key.is_none()
            && !spec.key_env.is_empty()
            && base == spec.base_url.trim_end_matches('/');
        // A dry run sends nothing, so it needs no key: it says a real run does (issue 56).
        let missing_key = (needs_key && settings.dry_run).then(|| spec.key_env.clone());
        if needs_key && !settings.dry_run {
            return Err(Error::Environment(format!(
                "runner `{}`: {} is not set; export your API key as {}, or point {} (or --var \
                 base_url=URL) at a server that needs none",
                def.name,
                spec.key_env,
                spec.key_env,
                if spec.base_url_env.is_empty() {
                    "the base URL"
                } else {
                    &spec.base_url_env
                }
            )));
        }
        let model = settings
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| (!spec.model.is_empty()).then(|| spec.model.clone()))
            .ok_or_else(|| {
                usage(format!(
                    "needs a model: give --model NAME (the model id your API serves, e.g. {})",
                    model_example(wire.name())
                ))
            })?;
        let price = |name: &str, default: f64| -> Result<f64> {
            match vars.get(name) {
                None => Ok(default),
                Some(v) => match v.trim().parse::<f64>() {
                    Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
                    _ => Err(usage(format!(
                        "--var {name}={v}: give USD per million tokens, a number ≥ 0 (e.g. 0.15)"
                    ))),
                },
            }
        };
        let prices = (
            price("input_usd_per_mtok", spec.input_usd_per_mtok)?,
            price("output_usd_per_mtok", spec.output_usd_per_mtok)?,
        );
        let mut headers = headers(spec, vars, &usage)?;
        for (name, value) in wire.fixed_headers() {
            if !headers.contains_key(*name) {
                headers.insert(*name, HeaderValue::from_static(value));
            }
        }
        let body = body(spec, vars, wire.as_ref(), &usage)?;
        Ok(Http {
            client: client(&parsed)?,
            url: wire.url(&parsed, &model),
            wire,
            base: parsed,
            key,
            model,
            headers,
            body,
            prices,
            missing_key,
        })
    }
}

/// Every `--var` is one the wire format takes (`known`), `header.NAME` or `body.NAME`.
///
/// Errors: another name, with the closest known one, or for a request field written bare
/// (`temperature=0`) the `body.` form (exit 2).
fn check_vars(vars: &BTreeMap<String, String>, known: &[&str], usage: &Usage<'_>) -> Result<()> {
    for name in vars.keys() {
        if known.contains(&name.as_str())
            || name.starts_with("header.")
            || name.starts_with("body.")
        {
            continue;
        }
        // A request field written bare (`temperature=0`) is meant for the body.
        let suggestion = match crate::suggest::did_you_mean(name, known.iter().copied()) {
            s if s.is_empty() => {
                format!("; to send `{name}` in the request body, write `--var body.{name}=…`")
            }
            s => s,
        };
        return Err(usage(format!(
            "--var `{name}` is not one this runner takes{suggestion} (it takes {}, \
             header.NAME and body.NAME)",
            known.join(", ")
        )));
    }
    Ok(())
}

/// The base URL: `--var base_url`, else the definition's variable when set, else `[http]
/// base_url`; without a trailing `/`, as text and parsed.
///
/// Errors: not an http(s) URL (exit 2).
fn base_url(
    spec: &HttpSpec,
    vars: &BTreeMap<String, String>,
    usage: &Usage<'_>,
) -> Result<(String, reqwest::Url)> {
    let env_base = (!spec.base_url_env.is_empty())
        .then(|| std::env::var(&spec.base_url_env).ok())
        .flatten()
        .filter(|v| !v.trim().is_empty());
    let base = vars
        .get("base_url")
        .cloned()
        .or(env_base)
        .unwrap_or_else(|| spec.base_url.clone());
    let base = base.trim().trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&base).map_err(|e| {
        usage(format!(
            "the base URL `{base}` is not a URL ({e}); give it like http://127.0.0.1:8080/v1"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(usage(format!(
            "the base URL `{base}` must start with http:// or https://"
        )));
    }
    Ok((base, parsed))
}

/// The request headers: the definition's `[http] headers`, then `--var header.NAME=VALUE`.
///
/// Errors: a name or value HTTP does not allow (exit 2, through `usage`).
fn headers(
    spec: &HttpSpec,
    vars: &BTreeMap<String, String>,
    usage: &Usage<'_>,
) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    let extra_headers = spec.headers.iter().map(|(k, v)| (k.as_str(), v)).chain(
        vars.iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("header.")?, v))),
    );
    for (name, value) in extra_headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| usage(format!("`{name}` is not an HTTP header name")))?;
        let v = HeaderValue::from_str(value).map_err(|_| {
            usage(format!(
                "the value of header `{name}` is not a header value"
            ))
        })?;
        headers.insert(n, v);
    }
    Ok(headers)
}

/// The extra body fields: the definition's `[http] body`, then `--var body.NAME=VALUE` (a
/// value that parses as JSON is sent as that JSON, else as a string).
///
/// Errors: a field the wire format sets itself (OpenAI's `model`, `messages`, `stream`,
/// `response_format`; [`WireFormat::owned_fields`]) or one without a name (exit 2, through
/// `usage`).
fn body(
    spec: &HttpSpec,
    vars: &BTreeMap<String, String>,
    wire: &dyn WireFormat,
    usage: &Usage<'_>,
) -> Result<Map<String, Value>> {
    let mut body = Map::new();
    for (k, v) in &spec.body {
        let v = serde_json::to_value(v)
            .map_err(|e| usage(format!("[http] body `{k}` is not JSON: {e}")))?;
        body.insert(k.clone(), v);
    }
    for field in spec
        .body
        .keys()
        .map(String::as_str)
        .chain(vars.keys().filter_map(|k| k.strip_prefix("body.")))
    {
        let owned = match field {
            "" => Some("a body field needs a name (body.NAME=VALUE)"),
            f => wire
                .owned_fields()
                .iter()
                .find(|(name, _)| *name == f)
                .map(|(_, why)| *why),
        };
        if let Some(why) = owned {
            return Err(usage(format!("body field `{field}` cannot be set: {why}")));
        }
    }
    for (k, v) in vars {
        if let Some(field) = k.strip_prefix("body.") {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            body.insert(field.to_owned(), value);
        }
    }
    Ok(body)
}

/// Whether `url` names a server on this machine (`localhost`, a loopback address), which a
/// proxy cannot reach: its requests go direct.
pub(crate) fn on_this_machine(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The one client of the run: rustls, a 30 s connect timeout, and the proxy variables
/// honoured except for a server on this machine.
///
/// Errors: the client cannot be built (exit 3).
fn client(base: &reqwest::Url) -> Result<reqwest::Client> {
    // reqwest is built without a crypto provider of its own; ring is ours (installing
    // it twice is harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder();
    // HTTP(S)_PROXY and NO_PROXY are honoured, except for a server on this machine (as
    // Go's net/http does): a proxy cannot reach our loopback.
    if on_this_machine(base) {
        builder = builder.no_proxy();
    }
    builder
        .connect_timeout(Duration::from_secs(30))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("teammate-runner/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Environment(format!("cannot set up the HTTP client: {e}")))
}

/// A model id of the API whose `[http] api` word is `api`, for the message that asks for one
/// (an Anthropic user told to give `gpt-4.1-mini` would be misled).
fn model_example(api: &str) -> &'static str {
    match api {
        "anthropic-messages" => "claude-sonnet-4-5",
        "gemini-generate-content" => "gemini-2.5-flash",
        _ => "gpt-4.1-mini",
    }
}
