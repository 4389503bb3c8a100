//! The table of cases: one row per agent CLI, naming the shared cases of `cases.rs` it runs
//! (with its numbers) and the API errors it must fail on as its definition says. Each entry
//! is one test, `table::<cli>::<case>`. A case a CLI cannot show is left out of its row with
//! a comment why; what only one CLI has is a test in its own module.
//!
//! Adding a CLI: its wiring (`cases::Agent`) in a module of its own, and a row here.

use std::time::Duration;

use crate::cases::{Calls, Failure, Key, Script};
use crate::chat_api::Reply;

/// `table! { cli: Agent { cases { case(args...), ... } fails { test: failure, ... } } ... }`:
/// per row a module `cli` with one `#[tokio::test]` per case (`crate::cases::case::<Agent>`)
/// and per failure (`crate::cases::fails::<Agent>`).
macro_rules! table {
    ($(
        $cli:ident: $agent:ty {
            cases { $( $case:ident ( $($arg:expr),* ) ),* $(,)? }
            fails { $( $test:ident: $failure:expr ),* $(,)? }
        }
    )*) => {$(
        mod $cli {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let test = concat!(stringify!($cli), "::", stringify!($case));
                    crate::cases::$case::<$agent>(test $(, $arg)*).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let test = concat!(stringify!($cli), "::", stringify!($test));
                    let failure: Failure<$agent> = $failure;
                    crate::cases::fails::<$agent>(test, failure).await;
                }
            )*
        }
    )*};
}

const SECS_30: Duration = Duration::from_secs(30);
const SECS_60: Duration = Duration::from_secs(60);

table! {
    claude: crate::claude::Claude {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            stalled_api_times_out_and_leaves_no_process("6s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // Its own retries off: the runner's gate does the waiting. The 429, then the two
            // turns of the second attempt.
            rate_limit_pauses_the_team_and_the_next_attempt_completes(
                &["--var", "max_retries=0"], 3
            ),
            // With the definition's own retries (2): the 429, its retry, turn 2.
            one_429_is_retried_by_the_cli_within_the_attempt(3),
        }
        // No missing-key case: the stand-in is reached through ANTHROPIC_API_KEY, which
        // every run sets (a missing key is Claude Code's login flow, not an API error).
        fails {
            // After the definition's 2 retries: 3 requests.
            overloaded_529_fails_the_item: Failure::fault(
                crate::claude::Fault { status: 529, error_type: "overloaded_error", message: "Overloaded" },
                "api_error",
            )
            .reason(&["529", "overloaded"])
            .calls(Calls::Exactly(3))
            .within(30),
            rate_limit_429_fails_the_item: Failure::fault(
                crate::claude::Fault {
                    status: 429,
                    error_type: "rate_limit_error",
                    message: "Number of request tokens has exceeded your per-minute rate limit",
                },
                "rate_limited",
            )
            .reason(&["429", "rate limit"])
            .calls(Calls::Exactly(3))
            .within(30),
            // Claude Code announces its first retry of the 401 as an `api_retry` event: the
            // runner ends the attempt there, with that event's words.
            bad_key_401_fails_the_item_as_auth: Failure::fault(crate::claude::BAD_KEY, "auth")
                .reason(&["stopped at once", "api error 401 (authentication_failed)"])
                .calls(Calls::Exactly(1))
                .within(30),
            // At Claude Code's own default retries (10, about 3 minutes of back-off): ended
            // at its first `api_retry` event, as `auth`, within seconds (issue 29).
            bad_key_at_its_default_retries_is_ended_at_once_as_auth: Failure::fault(
                crate::claude::BAD_KEY,
                "auth",
            )
            .reason(&["api error 401 (authentication_failed)", "would retry it 10 times"])
            .calls(Calls::Exactly(1))
            .within(30)
            .args(&["--var", "max_retries=10"]),
            // Anthropic's "credit balance is too low" (HTTP 400, `billing_error`): `quota`,
            // which stops the team, not `agent_error` (issue 29).
            credit_balance_too_low_fails_the_item_as_quota: Failure::fault(
                crate::claude::Fault {
                    status: 400,
                    error_type: "billing_error",
                    message: "Your credit balance is too low to access the Anthropic API. \
                              Please go to Plans & Billing to upgrade or purchase credits.",
                },
                "quota",
            )
            .reason(&["credit balance is too low"])
            .calls(Calls::Exactly(1))
            .within(30),
        }
    }

    codex: crate::codex::Codex {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            stalled_api_times_out_and_leaves_no_process("8s", SECS_30),
            completes_under_the_landlock_sandbox(),
            // The 429, then the second codex process's one turn (the report in its text).
            rate_limit_pauses_the_team_and_the_next_attempt_completes(&[], 2),
            // No one_429_is_retried_by_the_cli_within_the_attempt: 0.169.0 sends a 429 once
            // whatever its retry settings say.
        }
        // Each quotes codex's own message (its `turn.failed` event) and exits 1; the
        // config's `request_max_retries = 0`: one request, none without a key.
        fails {
            // codex drops the API message and prints "exceeded retry limit, last status:
            // 429 Too Many Requests, request id: <x-request-id>".
            rate_limit_429_fails_the_item: Failure::fault(
                crate::codex::Fault {
                    status: 429,
                    error_type: "tokens",
                    code: "rate_limit_exceeded",
                    message: crate::codex::RATE_LIMIT_MESSAGE,
                },
                "rate_limited",
            )
            .reason(&["exceeded retry limit", "429 too many requests"])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
            // codex prints its own "Quota exceeded" text: a quota, not a rate limit.
            insufficient_quota_429_fails_the_item_as_quota: Failure::fault(
                crate::codex::Fault {
                    status: 429,
                    error_type: "insufficient_quota",
                    code: "insufficient_quota",
                    message: "You exceeded your current quota, please check your plan and \
                              billing details. For more information on this error, read the \
                              docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                },
                "quota",
            )
            .reason(&["quota exceeded. check your plan and billing details."])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
            // The ChatGPT-plan form: "You’ve hit your usage limit."
            usage_limit_429_fails_the_item_as_quota: Failure::fault(
                crate::codex::Fault {
                    status: 429,
                    error_type: "usage_limit_reached",
                    code: "usage_limit_reached",
                    message: "The usage limit has been reached",
                },
                "quota",
            )
            .reason(&["hit your usage limit"])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
            // codex quotes the API's message with the status.
            bad_key_401_fails_the_item_as_auth: Failure::fault(
                crate::codex::Fault {
                    status: 401,
                    error_type: "invalid_request_error",
                    code: "invalid_api_key",
                    message: "Incorrect API key provided: sk-test. You can find your API key \
                              at https://platform.openai.com/account/api-keys.",
                },
                "auth",
            )
            .reason(&["401 unauthorized", "incorrect api key provided"])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
            // The provider's key variable is not set: codex sends nothing.
            missing_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Missing)
                .reason(&["missing environment variable: `mock_api_key`"])
                .exit_code("1")
                .calls(Calls::Exactly(0))
                .within(30),
            // codex prints its own "high demand" text (no status in it).
            server_error_500_fails_the_item_as_api_error: Failure::fault(
                crate::codex::Fault {
                    status: 500,
                    error_type: "server_error",
                    code: "server_error",
                    message: "The server had an error while processing your request. Sorry \
                              about that!",
                },
                "api_error",
            )
            .reason(&["experiencing high demand"])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
        }
    }

    gemini: crate::gemini::Gemini {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            // Its launcher ignores SIGTERM and waits for the relaunched child. 20 s: on a
            // loaded machine it took more than 8 s to send its first request.
            stalled_api_times_out_and_leaves_no_process("20s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // No rate-limit-then-success cases: with the definition's `maxAttempts = 1` a
            // 429 fails the attempt at once (the failures below), and its model router
            // retries its own call for about a minute.
        }
        // The CLI's own message from the JSON object ending its stderr, its exit code the
        // HTTP status less 256; the definition's maxAttempts 1: no retry of the main turn.
        fails {
            // A `TerminalQuotaError`, not retried; exit 173 (429 − 256). Its error dumps land
            // in the teammate's private TMPDIR.
            daily_quota_429_fails_the_item_as_quota: Failure::fault(
                crate::gemini::daily_quota_429(),
                "quota",
            )
            .reason(&["exited with code 173: You have exhausted your daily quota on this model."])
            .exit_code("173")
            .calls(Calls::Exactly(1))
            .within(30)
            .then(crate::gemini::error_dumps_in_the_teammates_tmp),
            // A `RetryableQuotaError`, given up on at once with `maxAttempts = 1`; the reason
            // is the start of that message (the runner shortens it).
            rate_limit_429_fails_the_item_as_rate_limited: Failure::fault(
                crate::gemini::per_minute_429(),
                "rate_limited",
            )
            .reason(&["exited with code 173: You exceeded your current quota"])
            .exit_code("173")
            .calls(Calls::AtMost(1))
            .within(30),
            // The Gemini API answers a bad key 400 INVALID_ARGUMENT: exit 144 (400 − 256).
            bad_key_fails_the_item_as_auth: Failure::fault(crate::gemini::bad_key_400(), "auth")
                .key(Key::Wrong("sk-bad"))
                .reason(&["API key not valid"])
                .exit_code("144")
                .calls(Calls::AtMost(1))
                .within(30),
            // A proxy's HTML 500 page: Gemini CLI quotes the page inside two JSON objects;
            // the reason is the page's title (issue 56), one request (maxAttempts 1), exit
            // 244 (500 − 256).
            html_500_page_fails_the_item_with_its_title: Failure::fault(
                crate::gemini::nginx_500_page(),
                "api_error",
            )
            .reason(&["exited with code 244: 500 Internal Server Error"])
            .exit_code("244")
            .calls(Calls::Exactly(1))
            .within(45)
            .then(crate::gemini::no_html_in_the_reason),
            // No `GEMINI_API_KEY`: Gemini CLI stops before any request, exit 41.
            missing_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Missing)
                .reason(&["you must specify the GEMINI_API_KEY environment variable"])
                .exit_code("41")
                .calls(Calls::Exactly(0))
                .within(30)
                .then(crate::gemini::no_router_call),
        }
    }

    qwen: crate::qwen::Qwen {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            // 20 s, not less: under load (2 cores, tests in parallel) Qwen Code takes up to
            // ~15 s to send its first request, and the case must see it reach the API.
            stalled_api_times_out_and_leaves_no_process("20s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // No rate-limit-then-success cases: its main turn retries a 429 up to 7 times
            // by itself (the failures below show the count).
        }
        // The result line's `/error/message`, exit 1; the main turn's fixed 7 attempts for a
        // 429 (each after the server's `retry-after-ms`), none for a 401.
        fails {
            rate_limit_429_fails_the_item_as_rate_limited: Failure::fault(
                crate::qwen::fault(
                    429,
                    "Rate limit reached for qwen3-coder-plus in organization org-e2e on \
                     requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again \
                     in 1s.",
                    "requests",
                    Some("rate_limit_exceeded"),
                    Some(100),
                ),
                "rate_limited",
            )
            .reason(&["[API Error: 429 Rate limit reached for qwen3-coder-plus"])
            .exit_code("1")
            .calls(Calls::Exactly(7))
            .within(30),
            // OpenAI's used-up quota: retried like a rate limit (its text names no reset
            // time), then `quota`.
            insufficient_quota_429_fails_the_item_as_quota: Failure::fault(
                crate::qwen::fault(
                    429,
                    "You exceeded your current quota, please check your plan and billing \
                     details. For more information on this error, read the docs: \
                     https://platform.openai.com/docs/guides/error-codes/api-errors.",
                    "insufficient_quota",
                    Some("insufficient_quota"),
                    Some(100),
                ),
                "quota",
            )
            .reason(&["[API Error: 429 You exceeded your current quota"])
            .exit_code("1")
            .calls(Calls::Exactly(7))
            .within(30),
            // A key the API rejects (401 `invalid_api_key`): not retried.
            bad_key_401_fails_the_item_as_auth: Failure::fault(
                crate::qwen::fault(
                    401,
                    "Incorrect API key provided: sk-bad. You can find your API key at \
                     https://platform.openai.com/account/api-keys.",
                    "invalid_request_error",
                    Some("invalid_api_key"),
                    None,
                ),
                "auth",
            )
            .key(Key::Wrong("sk-bad"))
            .reason(&["[API Error: 401 Incorrect API key provided"])
            .exit_code("1")
            .calls(Calls::Exactly(1))
            .within(30),
            // No `OPENAI_API_KEY` (and no auth type in the settings): no request at all.
            missing_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Missing)
                .reason(&["No auth type is selected"])
                .exit_code("1")
                .calls(Calls::Exactly(0))
                .within(30),
        }
    }

    opencode: crate::opencode::Opencode {
        cases {
            // From `work/`: the team workspace outside its working directory.
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            stalled_api_times_out_and_leaves_no_process("20s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // No rate-limit-then-success cases: OpenCode retries a 429 five times by itself
            // and no option or variable turns that off (the failure below counts them).
        }
        // The reason quotes OpenCode's error event; it exits 1. No missing-key case: the
        // key is in its config file, not a variable.
        fails {
            // OpenCode retries a 429 five times (here 20 ms apart, from retry-after-ms).
            rate_limit_429_fails_the_item: Failure::fault(Reply::rate_limited(), "rate_limited")
                .reason_exact(&["exited with code 1", "Rate limit reached for gpt-4o"])
                .exit_code("1")
                .calls(Calls::Exactly(6)),
            bad_key_401_fails_the_item: Failure::new(Script::WriteReport, "auth")
                .key(Key::Wrong("sk-wrong"))
                .reason_exact(&["Incorrect API key provided: sk-wrong"])
                .exit_code("1")
                .calls(Calls::Exactly(1)),
        }
    }

    copilot: crate::copilot::Copilot {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            stalled_api_times_out_and_leaves_no_process("8s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // After the Retry-After second: the 429, its retry (the create turn), the final
            // turn. (No team-pause case: Copilot always retries a 429 itself.)
            one_429_is_retried_by_the_cli_within_the_attempt(3),
        }
        // Copilot's own message quoting the API's, exit 1.
        fails {
            // Copilot retries 5 times (honouring `retry-after: 0`): one call and 5 retries.
            rate_limit_429_fails_the_item: Failure::fault(crate::copilot::RATE_LIMITED, "rate_limited")
                .reason(&[
                    "failed to get response from the ai model; retried 5 times",
                    "last error: 429 rate limit reached for gpt-4.1",
                ])
                .exit_code("1")
                .calls(Calls::Exactly(6)),
            // Copilot retries it like a rate limit and calls it one (errorType
            // `rate_limit`), but its message keeps the API's words; `quota`.
            insufficient_quota_fails_the_item_as_quota: Failure::fault(
                crate::copilot::INSUFFICIENT_QUOTA,
                "quota",
            )
            .reason(&["last error: 429 you exceeded your current quota"])
            .exit_code("1"),
            // OpenAI's 401 (Copilot tries 3 times, about 2 s), then its own message naming
            // the provider (the reason is its first line; the second names the variables).
            bad_key_401_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Wrong("sk-wrong"))
                .reason(&["authentication failed with provider at", "(http 401)"])
                .exit_code("1")
                .then(crate::copilot::sent_the_wrong_key),
            // No key at all: no Authorization header (a key is optional for BYOK); the API
            // answers 401.
            missing_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Missing)
                .reason(&["authentication failed with provider at", "(http 401)"])
                .exit_code("1")
                .calls(Calls::AtLeast(1))
                .then(crate::copilot::sent_no_key),
            // Retried 5 times like a 429, then `api_error`.
            server_error_500_fails_the_item_as_api_error: Failure::fault(
                crate::copilot::SERVER_ERROR,
                "api_error",
            )
            .reason(&[
                "failed to get response from the ai model; retried 5 times",
                "last error: 500 the server had an error",
            ])
            .exit_code("1")
            .calls(Calls::Exactly(6)),
        }
    }

    pi: crate::pi::Pi {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            // 15 s: pi must reach the stalled API before the limit, also on a loaded machine.
            stalled_api_times_out_and_leaves_no_process("15s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // No rate-limit-then-success cases: pi retries a 429 itself (`retry.maxRetries`,
            // announced as `auto_retry_start`), and its first announcement ends the attempt
            // (the quota failure below).
        }
        // pi exits 0 on an API error, with the error in its last message (`errorMessage`):
        // the item is `failed` all the same, not `no_report`.
        fails {
            // A 401 is not retried.
            bad_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Wrong("sk-bad"))
                .reason_exact(&["401 Incorrect API key provided: sk-bad"])
                .exit_code("0")
                .calls(Calls::Exactly(1)),
            // At pi's own retry settings its first `auto_retry_start` event ends the attempt
            // at once as `quota`, with its words, instead of after its retries (13 requests,
            // about 20 s) — issue 29.
            used_up_quota_is_ended_at_its_first_retry: Failure::fault(crate::pi::used_up_quota(), "quota")
                .reason_exact(&[
                    "stopped at once",
                    "429 You exceeded your current quota",
                    "pi would retry it 3 times",
                ])
                .within(15)
                .timeout("2m"),
        }
    }

    cline: crate::cline::Cline {
        cases {
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            stalled_api_times_out_and_leaves_no_process("15s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // The 429, its own retry (the editor turn), the final turn.
            one_429_is_retried_by_the_cli_within_the_attempt(3),
        }
        // Cline's `error` event quotes the API's message; it exits 1.
        fails {
            // A 401 is not retried.
            bad_key_401_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Wrong("sk-bad"))
                .reason(&["incorrect api key provided: sk-bad"])
                .exit_code("1")
                .calls(Calls::Exactly(1)),
            // Cline retries a 429 itself (the stand-in asks for 20 ms); the runner's one more
            // attempt after the team's pause fails the same way: 6 calls in all.
            rate_limit_429_fails_the_item_as_rate_limited: Failure::fault(
                Reply::rate_limited(),
                "rate_limited",
            )
            .reason(&["rate limit reached for gpt-4o"])
            .exit_code("1")
            .calls(Calls::Exactly(6)),
            // No key in its provider settings: Cline still calls the API, with no key, and
            // the API's 401 is the reason.
            missing_key_fails_the_item_as_auth: Failure::new(Script::WriteReport, "auth")
                .key(Key::Missing)
                .reason(&["incorrect api key provided"])
                .exit_code("1")
                .calls(Calls::Exactly(1)),
            // A proxy's HTML 500 page (issue 56): the reason is the page's title, not its
            // first line `<html>`.
            html_500_page_fails_the_item_with_its_title: Failure::fault(
                Reply::nginx_500_page(),
                "api_error",
            )
            .reason(&["500 Internal Server Error"])
            .exit_code("1")
            // Cline retries a 5xx itself with growing pauses (about a minute in all here).
            .calls(Calls::AtLeast(1))
            .within(170)
            .timeout("3m")
            .then(crate::cline::no_html_in_the_reason),
        }
    }

    aider: crate::aider::Aider {
        cases {
            // Its work is an edit of `notes.txt` (it has no tools), its report in its reply.
            writes_the_report_and_the_item_completes(),
            report_in_the_final_text_completes(),
            // 25 s: on a loaded machine its start (litellm's import) took more than 15 s.
            stalled_api_times_out_and_leaves_no_process("25s", SECS_60),
            completes_under_the_landlock_sandbox(),
            // No rate-limit-then-success cases: aider retries a 429 for about 64 s by itself
            // and nothing shortens that (the failure below).
        }
        // aider exits 0 after an API error (#3918): the item fails with the litellm error it
        // printed. No missing-key case: litellm fails a missing key as it does a wrong one.
        fails {
            // aider's own retry loop cannot be shortened: 9 tries over ~64 s, each with
            // litellm's 2 retries (20 ms apart, from retry-after-ms): 27 calls.
            rate_limit_429_fails_the_item: Failure::fault(Reply::rate_limited(), "rate_limited")
                .reason_exact(&[
                    "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit \
                     reached for gpt-4o",
                    "(and no report)",
                ])
                .exit_code("0")
                .calls(Calls::Exactly(27))
                .within(95)
                .timeout("100s"),
            bad_key_401_fails_the_item: Failure::new(Script::WriteReport, "auth")
                .key(Key::Wrong("sk-wrong"))
                .reason_exact(&[
                    "litellm.AuthenticationError: AuthenticationError: OpenAIException - \
                     Incorrect API key provided: sk-wrong",
                ])
                .exit_code("0")
                .calls(Calls::Exactly(1))
                .within(40)
                .timeout("100s"),
        }
    }
}
