//! `runner serve` and `--serve`: the live page, driven in Debian's headless Chromium through
//! its WebDriver (chromium-driver, installed by `.ci/run`), and its guard checked over plain
//! HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Sandbox, Served, wait_for};

pub(crate) use crate::harness::{Killed, parts, url_from};

/// One raw HTTP/1.1 GET of `path` with `Host: host` and `extra` header lines: the status
/// code and the body read until `until` is in it or the answer ends.
pub(crate) fn get(port: u16, path: &str, host: &str, extra: &str, until: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if !until.is_empty() && String::from_utf8_lossy(&got).contains(until) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, body.to_owned())
}

/// A free port on 127.0.0.1 (for chromedriver).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub(crate) fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A batch of two `chatty` items that run until `release` exists, and `more` rows.
fn chatty_batch(sb: &Sandbox, more: &[(&str, &str)], extra: &[&str]) -> Killed {
    let mut rows = vec![("a", "chatty"), ("b", "chatty")];
    rows.extend_from_slice(more);
    sb.write_rows(&rows);
    let mut flags = vec!["--jobs", "3"];
    flags.extend_from_slice(extra);
    let mut cmd = sb.fake_batch_cmd(&flags);
    cmd.env("RELEASE_FILE", sb.join("release"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    Killed(cmd.spawn().expect("spawn runner batch"))
}

#[test]
fn a_served_run_prints_its_page_and_status_names_it_while_it_runs() {
    let sb = Sandbox::new();
    let mut batch = chatty_batch(&sb, &[], &["--serve"]);
    let url = url_from(&mut batch.0);
    let (port, token) = parts(&url);
    let (code, body) = get(
        port,
        &format!("/api/summary?token={token}"),
        &format!("127.0.0.1:{port}"),
        "",
        "",
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"team\":\"workers-output\""), "{body}");
    wait_for("status to name the page", 20, || {
        sb.run(&["status", "workers-output.csv"])
            .stdout
            .contains(&format!("Live page: {url}"))
    });
    // A browser's event stream open as the run ends does not keep the run from ending.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "GET /api/events?token={token}&from=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .expect("send");
    let mut first = [0u8; 64];
    let n = stream.read(&mut first).expect("the stream answers");
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    sb.write("release", "");
    let status = batch.0.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    // The page went with the run: status no longer names it.
    let after = sb.run(&["status", "workers-output.csv"]);
    assert!(!after.stdout.contains("Live page"), "{after:?}");
}

#[test]
fn the_live_page_follows_a_run_in_chromium_and_resumes_after_a_reconnect() {
    let sb = Sandbox::new();
    let _batch = chatty_batch(&sb, &[("c", "failed")], &[]);
    wait_for("the run to start", 30, || {
        sb.run(&["status", "workers-output.csv"])
            .stdout
            .contains("running")
    });
    let Served {
        url,
        port,
        token,
        host,
        child: _serve,
    } = sb.serve(&["workers-output.csv"]);

    // The guard: no token, a wrong token, a foreign Host or Origin, a write: all 403.
    for (path, h, extra) in [
        ("/".to_owned(), host.clone(), ""),
        ("/api/rows".to_owned(), host.clone(), ""),
        ("/api/rows?token=0000".to_owned(), host.clone(), ""),
        (
            format!("/?token={token}"),
            format!("evil.example:{port}"),
            "",
        ),
        (
            format!("/api/rows?token={token}"),
            host.clone(),
            "Origin: http://evil.example\r\n",
        ),
    ] {
        let (code, body) = get(port, &path, &h, extra, "");
        assert_eq!(code, 403, "{path} as {h} {extra}: {body}");
    }
    let (code, _) = get(
        port,
        &format!("/?token={token}"),
        &format!("localhost:{port}"),
        "",
        "",
    );
    assert_eq!(code, 200);

    let Some(driver) = which("chromedriver") else {
        crate::skip::skip(
            "chromedriver is not installed (apt-get install chromium-driver); the live page was checked over HTTP only",
        );
        return;
    };
    let browser = which("chromium").expect("chromium beside chromedriver");
    let dport = free_port();
    let _driver = Killed(
        Command::new(driver)
            .arg(format!("--port={dport}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver"),
    );
    wait_for("chromedriver to listen", 20, || {
        TcpStream::connect(("127.0.0.1", dport)).is_ok()
    });
    let profile = tempfile::tempdir().expect("profile");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let shot = rt.block_on(drive(
        &sb,
        &url,
        dport,
        &browser,
        profile.path(),
        port,
        &token,
    ));
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-page.png");
    std::fs::write(&path, shot).expect("write the screenshot");
    eprintln!("screenshot: {}", path.display());
}

/// Evaluate `script` (a function body that returns a value) in the page.
pub(crate) async fn js(c: &fantoccini::Client, script: &str) -> serde_json::Value {
    c.execute(script, Vec::new()).await.expect("script runs")
}

/// Wait (up to 30 s) until `script` returns true in the page.
pub(crate) async fn until(c: &fantoccini::Client, what: &str, script: &str) {
    let start = Instant::now();
    loop {
        if js(c, script).await == serde_json::Value::Bool(true) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}: {}",
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Click the row of item `id`. The live page replaces a row when its item changes, so a row
/// found just before an update is stale by the click: find it again (up to 30 s).
pub(crate) async fn click_row(c: &fantoccini::Client, id: &str) {
    let start = Instant::now();
    loop {
        let row = c
            .find(fantoccini::Locator::Css(&format!("tr[data-id=\"{id}\"]")))
            .await
            .expect("the row");
        match row.click().await {
            Ok(()) => return,
            Err(e) => assert!(
                start.elapsed() < Duration::from_secs(30),
                "clicking row {id}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A headless Chromium session through the chromedriver on `dport`.
pub(crate) async fn session(
    dport: u16,
    browser: &std::path::Path,
    profile: &std::path::Path,
) -> fantoccini::Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": browser,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                format!("--user-data-dir={}", profile.display()), "--window-size=1400,900"],
        }),
    );
    fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{dport}"))
        .await
        .expect("a WebDriver session")
}

/// The browser part: the page opens, follows the run, shows a log as it grows, resumes its
/// stream after a reconnect. Returns a screenshot (PNG).
async fn drive(
    sb: &Sandbox,
    url: &str,
    dport: u16,
    browser: &std::path::Path,
    profile: &std::path::Path,
    port: u16,
    token: &str,
) -> Vec<u8> {
    let client = session(dport, browser, profile).await;
    let c = &client;
    c.goto(url).await.expect("open the page");
    until(
        c,
        "the page to load",
        "return document.body.dataset.ready === '1';",
    )
    .await;
    // Set once: a reload would lose it.
    js(c, "window.__sameLoad = 42; return true;").await;
    until(
        c,
        "both items to show as running",
        "return ['a','b'].every(function(id){var r=document.querySelector('tr[data-id=\"'+id+'\"]');return r && r.dataset.status==='running';});",
    )
    .await;

    // Clicking an item shows its log, and the log follows while it runs.
    click_row(c, "a").await;
    until(
        c,
        "a's log",
        "var l=document.getElementById('log');return !!l && /tick \\d+/.test(l.textContent);",
    )
    .await;
    let ticks = "var m=document.getElementById('log').textContent.match(/tick (\\d+)/g);var n=m?Number(m[m.length-1].slice(5)):0;";
    let first = js(c, &format!("{ticks} return n;"))
        .await
        .as_u64()
        .unwrap_or(0);
    until(
        c,
        "the log to follow the running attempt",
        &format!("{ticks} return n > {};", first + 3),
    )
    .await;
    let shot = c.screenshot().await.expect("screenshot");
    after_a_reconnect(c, sb, port, token).await;
    client.close().await.expect("close the session");
    shot
}

/// The stream dropped and opened again from the last id seen while the run ends: every
/// event once, the end shown without a reload; the table filtered; a completed item's
/// compacted log; and `Last-Event-ID` resuming a stream.
async fn after_a_reconnect(c: &fantoccini::Client, sb: &Sandbox, port: u16, token: &str) {
    until(
        c,
        "progress events before the reconnect",
        "return window.__live.ids.length >= 2;",
    )
    .await;
    let last_before = js(c, "return window.__live.last;")
        .await
        .as_u64()
        .expect("an id");
    js(c, "window.__live.drop(); return true;").await;
    sb.write("release", "");
    until(
        c,
        "both items to complete without a reload",
        "return window.__sameLoad === 42 && ['a','b'].every(function(id){var r=document.querySelector('tr[data-id=\"'+id+'\"]');return r && r.dataset.status==='completed';});",
    )
    .await;
    until(
        c,
        "the run's end to arrive",
        "return document.getElementById('counts').textContent.indexOf('not running')>=0;",
    )
    .await;
    // Filtered by failure kind: the failed item alone; then by status: the two completed.
    let filter = |select: &str, value: &str| {
        format!(
            "var s=document.getElementById('{select}');s.value='{value}';s.dispatchEvent(new Event('change'));return true;"
        )
    };
    let shown = "return Array.prototype.map.call(document.querySelectorAll('#items tbody tr'),function(r){return r.getAttribute('data-id');}).sort().join(',');";
    js(c, &filter("f-kind", "agent_error")).await;
    until(
        c,
        "only c",
        &format!("{} ", shown.replace("join(',');", "join(',')==='c';")),
    )
    .await;
    js(c, &filter("f-kind", "")).await;
    js(c, &filter("f-status", "completed")).await;
    until(
        c,
        "only a and b",
        &shown.replace("join(',');", "join(',')==='a,b';"),
    )
    .await;
    js(c, &filter("f-status", "")).await;

    // A completed item's folder was compacted: its panel shows the kept end of its log.
    click_row(c, "b").await;
    until(
        c,
        "b's compacted log",
        "var h=document.querySelector('#panel h2'),l=document.getElementById('log');return !!h && h.textContent==='b' && !!l && /tick \\d+/.test(l.textContent);",
    )
    .await;
    let ids: Vec<u64> =
        serde_json::from_value(js(c, "return window.__live.ids;").await).expect("ids");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "every event once, in journal order: {ids:?}"
    );
    assert!(
        ids.iter().filter(|i| **i > last_before).count() >= 3,
        "events after the reconnect arrived: {ids:?} (last before: {last_before})"
    );
    // The browser's own reconnect sends Last-Event-ID: the stream goes on from the event
    // after it, not from the start and not twice.
    let (code, body) = get(
        port,
        &format!("/api/events?token={token}&from=0"),
        &format!("127.0.0.1:{port}"),
        &format!("Last-Event-ID: {}\r\n", ids[0]),
        "\n\n",
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(&format!("id: {}\n", ids[1])),
        "resumed after {}: {body}",
        ids[0]
    );
    assert!(!body.contains(&format!("id: {}\n", ids[0])), "{body}");
}

#[test]
fn serve_refuses_a_taken_port_and_a_folder_with_no_team() {
    let sb = Sandbox::new();
    let none = sb.run(&["serve", "nothing-here.csv"]);
    assert_eq!(none.code, 2, "{none:?}");
    sb.write_rows(&[("a", "success")]);
    assert_eq!(sb.fake_batch(&[]).code, 0);
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let r = sb.run(&["serve", "workers-output.csv", "--port", &port]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("choose another --port"),
        "the message says what to do: {r:?}"
    );
}

#[test]
fn serve_shows_several_teams_each_by_its_number() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed")]);
    assert_eq!(sb.fake_batch(&["--output", "one.csv"]).code, 1);
    assert_eq!(
        sb.fake_batch(&["--output", "two.csv", "--only", "a"]).code,
        0
    );
    let Served {
        port,
        token,
        host,
        child: _serve,
        ..
    } = sb.serve(&["one.csv", "two.csv"]);
    let (code, teams) = get(port, &format!("/api/teams?token={token}"), &host, "", "");
    assert_eq!(code, 200, "{teams}");
    assert!(
        teams.contains("\"team\":\"one\"") && teams.contains("\"team\":\"two\""),
        "{teams}"
    );
    let (_, one) = get(
        port,
        &format!("/api/summary?token={token}&team=0"),
        &host,
        "",
        "",
    );
    assert!(one.contains("\"failed\":1"), "{one}");
    let (_, two) = get(
        port,
        &format!("/api/summary?token={token}&team=1"),
        &host,
        "",
        "",
    );
    assert!(
        two.contains("\"seen\":1") && !two.contains("\"failed\""),
        "{two}"
    );
    let (code, _) = get(
        port,
        &format!("/api/summary?token={token}&team=2"),
        &host,
        "",
        "",
    );
    assert_eq!(code, 404);
}

/// The live page's item panel shows an item's diff as text: markup in it (a script, an
/// image's error handler) is shown, never run.
#[test]
fn the_live_pages_item_panel_shows_the_diff_escaped_in_chromium() {
    let sb = crate::worktree::repo();
    let markup = crate::merge_review::review_run_with_markup(&sb);
    let mut serve = Killed(
        sb.cmd(&["serve", "workers-output.csv"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn runner serve"),
    );
    let url = url_from(&mut serve.0);
    let Some(driver) = which("chromedriver") else {
        crate::skip::skip(
            "chromedriver is not installed (apt-get install chromium-driver); the diff in the live page was not checked",
        );
        return;
    };
    let browser = which("chromium").expect("chromium beside chromedriver");
    let dport = free_port();
    let _driver = Killed(
        Command::new(driver)
            .arg(format!("--port={dport}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver"),
    );
    wait_for("chromedriver to listen", 20, || {
        TcpStream::connect(("127.0.0.1", dport)).is_ok()
    });
    let profile = tempfile::tempdir().expect("profile");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = session(dport, &browser, profile.path()).await;
        let c = &client;
        c.goto(&url).await.expect("open the page");
        until(c, "the page to load", "return document.body.dataset.ready === '1';").await;
        for id in ["a", "b"] {
            click_row(c, id).await;
            until(
                c,
                "the item's diff",
                &format!(
                    "var h=document.querySelector('#panel h2'),d=document.getElementById('diff');return !!h && h.textContent==='{id}' && !!d;"
                ),
            )
            .await;
            if id == "a" {
                let text = js(c, "return document.getElementById('diff').textContent;").await;
                let text = text.as_str().unwrap_or_default().to_owned();
                assert!(text.contains(&format!("+{markup}")), "shown as text: {text}");
            } else {
                let cut = js(c, "var p=document.querySelector('#panel p.cut');return p?p.textContent:'';").await;
                assert!(cut.as_str().unwrap_or_default().contains("cut here"), "{cut}");
            }
        }
        // No element of the diff's markup exists, so none of it can run.
        let ran = js(
            c,
            "return [typeof window.__pwned, document.querySelectorAll('#panel script, #panel img').length];",
        )
        .await;
        assert_eq!(ran, serde_json::json!(["undefined", 0]), "the diff's markup never ran");
        client.close().await.expect("close the session");
    });
}
