//! Error bodies made readable for a one-line reason: an HTML page (an nginx or proxy 500)
//! as its `<title>`, else its text without tags; a JSON error as its message with its
//! `code` and `status` (`You exceeded your current quota (429 RESOURCE_EXHAUSTED)`).

use serde_json::Value;

/// The message of a JSON error object `v`: `/error/message`, else `/message`, else a string
/// `/error`, followed by the object's `code` and `status` (`/error/code`, `/error/status`,
/// else top-level `/code`, `/status`) in parentheses when the message does not already say
/// them. `None` when `v` holds no message.
pub(crate) fn json_error_message(v: &Value) -> Option<String> {
    let message = [
        v.pointer("/error/message"),
        v.pointer("/message"),
        v.pointer("/error").filter(|e| e.is_string()),
    ]
    .into_iter()
    .flatten()
    .find_map(|m| m.as_str().map(str::trim).filter(|m| !m.is_empty()))?;
    let word = |pointers: [&str; 2]| {
        pointers
            .iter()
            .filter_map(|p| v.pointer(p))
            .find_map(|c| match c {
                Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
    };
    let said: Vec<String> = [
        word(["/error/code", "/code"]),
        word(["/error/status", "/status"]),
    ]
    .into_iter()
    .flatten()
    .filter(|w| !message.contains(w.as_str()))
    .collect();
    Some(match said.is_empty() {
        true => message.to_owned(),
        false => format!("{message} ({})", said.join(" ")),
    })
}

/// `text` with the HTML page in it (from the first `<!doctype`, `<html`, `<head`, `<body`
/// or `<title`) replaced by the page's `<title>`, else by its text without tags, scripts
/// and styles; whitespace collapsed, the common entities decoded, what comes before the page
/// (`API Error: 500`) kept. `None` when `text` holds no such page.
pub(crate) fn html_page_text(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = ["<!doctype", "<html", "<head", "<body", "<title"]
        .iter()
        .filter_map(|m| lower.find(m))
        .min()?;
    let page = &text[start..];
    let page_lower = &lower[start..];
    let title = page_lower.find("<title").and_then(|open| {
        let body = open + page_lower[open..].find('>')? + 1;
        let close = body + page_lower[body..].find("</title")?;
        Some(squeeze(&decode(&strip_tags(&page[body..close]))))
    });
    let shown = title
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| squeeze(&decode(&strip_tags(page))));
    let before = text[..start].trim();
    Some(match (before.is_empty(), shown.is_empty()) {
        (true, _) => shown,
        (false, true) => before.to_owned(),
        (false, false) => format!("{before} {shown}"),
    })
}

/// `html` without its tags, and without what `<script>` and `<style>` hold.
fn strip_tags(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len());
    let mut i = 0;
    while i < html.len() {
        let Some(open) = html[i..].find('<').map(|o| i + o) else {
            out.push_str(&html[i..]);
            break;
        };
        out.push_str(&html[i..open]);
        let skip_to = ["script", "style"]
            .iter()
            .find(|t| lower[open + 1..].starts_with(**t))
            .and_then(|t| lower[open..].find(&format!("</{t}")).map(|c| open + c));
        let from = skip_to.unwrap_or(open);
        match html[from..].find('>') {
            Some(close) => {
                out.push(' ');
                i = from + close + 1;
            }
            None => break,
        }
    }
    out
}

/// The entities an error page uses: `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`, `&nbsp;`.
fn decode(text: &str) -> String {
    text.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Runs of whitespace as one space, trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NGINX_500: &str = "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n";

    #[test]
    fn an_html_page_gives_its_title_and_keeps_what_came_before() {
        assert_eq!(
            html_page_text(NGINX_500).as_deref(),
            Some("500 Internal Server Error")
        );
        assert_eq!(
            html_page_text(&format!("API Error: 502 {NGINX_500}")).as_deref(),
            Some("API Error: 502 500 Internal Server Error")
        );
        // No title: the text without tags, scripts or styles.
        let page = "<!DOCTYPE html><html><head><style>p{color:red}</style><script>var x = '<b>';</script></head><body><p>Upstream   timed out &amp; gave up</p></body></html>";
        assert_eq!(
            html_page_text(page).as_deref(),
            Some("Upstream timed out & gave up")
        );
        assert_eq!(html_page_text("a < b and c > d"), None);
        assert_eq!(html_page_text("plain words"), None);
    }

    #[test]
    fn a_json_error_keeps_its_code_and_status() {
        let v = json!({"error": {"code": 429, "message": "You exceeded your current quota", "status": "RESOURCE_EXHAUSTED"}});
        assert_eq!(
            json_error_message(&v).as_deref(),
            Some("You exceeded your current quota (429 RESOURCE_EXHAUSTED)")
        );
        let v = json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}});
        assert_eq!(
            json_error_message(&v).as_deref(),
            Some("Rate limit reached (rate_limit_exceeded)")
        );
        // What the message already says is not repeated.
        let v = json!({"error": {"message": "HTTP 503 UNAVAILABLE", "code": 503, "status": "UNAVAILABLE"}});
        assert_eq!(
            json_error_message(&v).as_deref(),
            Some("HTTP 503 UNAVAILABLE")
        );
        assert_eq!(
            json_error_message(&json!({"error": "slow down"})).as_deref(),
            Some("slow down")
        );
        assert_eq!(json_error_message(&json!({"code": 1})), None);
    }
}
