//! Every request's checks, before any route: only `GET`, the page's token in the query
//! (`?token=`, compared in constant time), a `Host` that is this server
//! (`127.0.0.1:PORT` or `localhost:PORT`: a DNS-rebinding page names its own host), and no
//! foreign `Origin` (another site's script). Anything else is 403 with a one-line reason.
//! Every answer then carries the headers that keep the page to itself: a
//! Content-Security-Policy that loads nothing from elsewhere (the page sets its own, with its
//! script's nonce), no referrer (the URL holds the token), no caching, no sniffing, no
//! framing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Shared;

/// The policy of every answer but the page (which adds its script's nonce).
pub(crate) const CSP: &str =
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Why `req` is refused, if it is.
fn refusal(
    shared: &Shared,
    method: &Method,
    headers: &HeaderMap,
    query: &str,
) -> Option<&'static str> {
    if method != Method::GET && method != Method::HEAD {
        return Some("the live page is read-only: GET only");
    }
    let port = shared.port;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let ours = |h: &str| h == format!("127.0.0.1:{port}") || h == format!("localhost:{port}");
    if !host.is_some_and(ours) {
        return Some("wrong Host: this page answers only as 127.0.0.1 or localhost");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or_default();
        let same = o.strip_prefix("http://").is_some_and(ours);
        if !same {
            return Some("a request from another origin");
        }
    }
    // The token is hex: no decoding needed.
    let given = query.split('&').find_map(|kv| kv.strip_prefix("token="));
    match given {
        Some(t) if same_token(t.as_bytes(), shared.token.as_bytes()) => None,
        _ => Some("no token, or a wrong one: open the URL `runner serve` printed"),
    }
}

/// `a == b`, in a time that does not depend on where they differ.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The middleware: refuse, or answer with the common headers.
pub(crate) async fn check(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let query = req.uri().query().unwrap_or_default().to_owned();
    if let Some(why) = refusal(&shared, req.method(), req.headers(), &query) {
        let mut r = (StatusCode::FORBIDDEN, format!("403 Forbidden: {why}\n")).into_response();
        common_headers(r.headers_mut());
        return r;
    }
    let mut r = next.run(req).await;
    common_headers(r.headers_mut());
    r
}

/// The headers every answer carries (a policy already set is kept).
fn common_headers(h: &mut HeaderMap) {
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            token: "abc123".into(),
            port: 4000,
            teams: Vec::new(),
            grew: tokio::sync::watch::channel(0).0,
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    #[test]
    fn only_a_get_with_the_token_to_our_host_from_our_origin_passes() {
        let s = shared();
        let ok = headers(&[(header::HOST, "127.0.0.1:4000")]);
        assert_eq!(refusal(&s, &Method::GET, &ok, "token=abc123&team=0"), None);
        let local = headers(&[
            (header::HOST, "localhost:4000"),
            (header::ORIGIN, "http://localhost:4000"),
        ]);
        assert_eq!(refusal(&s, &Method::GET, &local, "token=abc123"), None);
        assert!(refusal(&s, &Method::GET, &ok, "team=0").is_some());
        assert!(refusal(&s, &Method::GET, &ok, "token=abc124").is_some());
        assert!(refusal(&s, &Method::POST, &ok, "token=abc123").is_some());
        let rebound = headers(&[(header::HOST, "evil.example:4000")]);
        assert!(refusal(&s, &Method::GET, &rebound, "token=abc123").is_some());
        let foreign = headers(&[
            (header::HOST, "127.0.0.1:4000"),
            (header::ORIGIN, "http://evil.example"),
        ]);
        assert!(refusal(&s, &Method::GET, &foreign, "token=abc123").is_some());
    }
}
