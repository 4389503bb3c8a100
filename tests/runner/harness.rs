//! Test harness: a temp folder, a way to run `runner` in it, and helpers to inspect what it
//! left on disk and in the process table.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A temp folder to run `runner` in.
pub(crate) struct Sandbox {
    dir: tempfile::TempDir,
}

/// What a `runner` invocation did.
pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Absolute path of a fake agent under tests/agents/.
pub(crate) fn agent(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents")
        .join(name)
        .display()
        .to_string()
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::Builder::new()
                .prefix("runner-test-")
                .tempdir()
                .expect("tempdir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, contents).expect("write");
        p
    }

    pub(crate) fn read_opt(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.join(rel)).ok()
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// A `runner` command in the sandbox, with a clean RUNNER_* environment.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
        c.args(args).current_dir(self.path()).stdin(Stdio::null());
        for (k, _) in std::env::vars() {
            if k.starts_with("RUNNER_") {
                c.env_remove(k);
            }
        }
        c.env("NO_COLOR", "1");
        // The terminal the tests run in is not the runner's: no OSC 9;4 progress unless a
        // test names a terminal that reads it.
        for k in ["TERM_PROGRAM", "WT_SESSION", "ConEmuANSI"] {
            c.env_remove(k);
        }
        // Never touch the real ~/.agent-tasks.
        c.env("HOME", self.path().join("home"));
        c.env("GIT_CEILING_DIRECTORIES", self.ceiling());
        c
    }

    /// The folder above this sandbox (`/tmp`), which the runner and git must not look into
    /// for a repository (`GIT_CEILING_DIRECTORIES`): a `.git` another process left in `/tmp`
    /// or `/` for a moment would make every sandbox look like a repository.
    pub(crate) fn ceiling(&self) -> PathBuf {
        let parent = self.path().parent().unwrap_or(self.path());
        parent.canonicalize().unwrap_or_else(|_| parent.to_owned())
    }

    /// The team workspace that stands for `origin` (`<output stem>.runner`, `<store>/teams/T`):
    /// `origin` itself when a run left one there, else the one in the state folder under
    /// this sandbox's HOME whose `origin` file names it (the runner keeps a workspace there
    /// when teammates could write beside the output, issue 49); `origin` when there is none.
    pub(crate) fn workspace_of(&self, origin: &Path) -> PathBuf {
        if origin.join("journal.jsonl").is_file() || origin.join("team.json").is_file() {
            return origin.to_owned();
        }
        let real = origin
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .zip(origin.file_name())
            .map(|(p, n)| p.join(n))
            .unwrap_or_else(|| origin.to_owned());
        let teams = self.join("home/.local/state/teammate-runner/teams");
        std::fs::read_dir(&teams)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|ws| {
                std::fs::read(ws.join("origin")).is_ok_and(|t| {
                    t.strip_suffix(b"\n") == Some(real.as_os_str().as_encoded_bytes())
                })
            })
            .unwrap_or_else(|| origin.to_owned())
    }

    /// Run `runner ARGS` to completion.
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        self.cmd(args).output().expect("spawn runner").into()
    }

    /// The last attempt's prompt of item `id` of workspace `ws` (relative to the sandbox), as
    /// `runner show ID WS --prompt` prints it: from the teammate folder, or from the record a
    /// completed item was compacted into.
    pub(crate) fn prompt(&self, ws: &str, id: &str) -> String {
        let r = self.run(&["show", id, &self.join(ws).display().to_string(), "--prompt"]);
        assert_eq!(r.code, 0, "runner show {id} --prompt: {r:?}");
        r.stdout
    }

    /// Every file under the sandbox with its length and a hash of its bytes (to assert
    /// nothing changed, with a readable difference when something did).
    pub(crate) fn tree(&self) -> BTreeMap<PathBuf, String> {
        fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
                let p = e.path();
                let rel = p.strip_prefix(root).expect("prefix").to_owned();
                if p.is_dir() {
                    out.insert(rel, "<dir>".into());
                    walk(&p, root, out);
                } else {
                    let bytes = std::fs::read(&p).expect("read");
                    let mut h = teammate_runner::hash::Fnv::default();
                    h.update(&bytes);
                    out.insert(rel, format!("{} bytes, {}", bytes.len(), h.hex()));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.path(), self.path(), &mut out);
        out
    }

    /// Processes whose environment mentions this sandbox (children of our runs).
    pub(crate) fn live_processes(&self) -> Vec<(u32, String)> {
        let needle = self.path().display().to_string();
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if String::from_utf8_lossy(&env).contains(&needle) {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                // Zombies are already dead; they only wait to be reaped by their parent.
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'))
                {
                    continue;
                }
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
            }
        }
        found
    }

    /// Wait up to `secs` for no process of this sandbox to be alive; return the survivors.
    pub(crate) fn survivors_after(&self, secs: f64) -> Vec<(u32, String)> {
        let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        loop {
            let live = self.live_processes();
            if live.is_empty() || std::time::Instant::now() > until {
                return live;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never leave a stray agent behind, even when a test fails.
        for (pid, _) in self.live_processes() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// The instruction of the fake batches: the fake agent acts on `MODE=`.
pub(crate) const FAKE_INSTRUCTION: &str = "Handle {id}. MODE={mode}\n";

impl Sandbox {
    /// Write `in.csv` (this text) and `instr.md` ([`FAKE_INSTRUCTION`]).
    pub(crate) fn write_csv(&self, csv: &str) {
        self.write("in.csv", csv);
        self.write("instr.md", FAKE_INSTRUCTION);
    }

    /// Write `in.csv` with columns `id,mode` and these rows, and `instr.md`.
    pub(crate) fn write_rows(&self, rows: &[(&str, &str)]) {
        let mut csv = String::from("id,mode\n");
        for (id, mode) in rows {
            csv.push_str(&format!("{id},{mode}\n"));
        }
        self.write_csv(&csv);
    }

    /// `runner batch --input in.csv --instruction instr.md FLAGS -- AGENT...`.
    pub(crate) fn batch_cmd(&self, flags: &[&str], agent: &[&str]) -> Command {
        let mut args = vec!["batch", "--input", "in.csv", "--instruction", "instr.md"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(agent);
        self.cmd(&args)
    }

    /// Run [`Sandbox::batch_cmd`] to completion.
    pub(crate) fn batch(&self, flags: &[&str], agent: &[&str]) -> Run {
        self.batch_cmd(flags, agent)
            .output()
            .expect("spawn runner")
            .into()
    }

    /// `runner batch` over in.csv and instr.md with the fake agent; `extra` goes before `--`.
    pub(crate) fn fake_batch_cmd(&self, extra: &[&str]) -> Command {
        let fake = agent("fake_agent.py");
        let mut flags = vec!["--id-column", "id", "--format", "plain"];
        flags.extend_from_slice(extra);
        self.batch_cmd(&flags, &["python3", &fake])
    }

    /// `runner batch --input INPUT --instruction instr.md --id-column id --format plain
    /// EXTRA -- <fake agent>` (INPUT may be `-` for stdin).
    pub(crate) fn fake_batch_of_cmd(&self, input: &str, extra: &[&str]) -> Command {
        let fake = agent("fake_agent.py");
        let mut args = vec![
            "batch",
            "--input",
            input,
            "--instruction",
            "instr.md",
            "--id-column",
            "id",
            "--format",
            "plain",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "python3", &fake]);
        self.cmd(&args)
    }

    /// Run [`Sandbox::fake_batch_of_cmd`] to completion.
    pub(crate) fn fake_batch_of(&self, input: &str, extra: &[&str]) -> Run {
        self.fake_batch_of_cmd(input, extra)
            .output()
            .expect("spawn runner")
            .into()
    }

    /// Run [`Sandbox::fake_batch_cmd`] to completion.
    pub(crate) fn fake_batch(&self, extra: &[&str]) -> Run {
        self.fake_batch_cmd(extra)
            .output()
            .expect("spawn runner")
            .into()
    }
}

/// Wait up to `secs` for `cond` to hold (checked every 20 ms); fail the test naming `what`
/// when it does not.
pub(crate) fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Parse a CSV file into rows of name → value.
pub(crate) fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let mut rdr =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let headers = rdr.headers().expect("headers").clone();
    rdr.records()
        .map(|r| {
            let r = r.expect("record");
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The rows of `path` keyed by `key`.
pub(crate) fn by_id(path: &Path, key: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    csv_rows(path)
        .into_iter()
        .map(|r| (r[key].clone(), r))
        .collect()
}

/// Run `git ARGS` in `dir` (with a committer identity) and return its stdout; a failing git
/// fails the test with git's message.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether this kernel runs `--sandbox landlock` (`runner runners` says so); when not, the
/// calling test `test` skips ([`crate::skip`]) and leaves out what needs it.
pub(crate) fn landlock_or_skip(test: &str) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("runners")
        .output()
        .expect("runner runners");
    let text = String::from_utf8_lossy(&out.stdout);
    let ok = text.contains("--sandbox landlock is available");
    if !ok {
        crate::skip::skip(format!(
            "{test}: this kernel cannot run --sandbox landlock ({text})"
        ));
    }
    ok
}

/// A child process killed (and reaped) when the test ends, however it ends.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first line of `child`'s stdout that holds `http://127.0.0.1:`, as the URL in it.
pub(crate) fn url_from(child: &mut Child) -> String {
    let out = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(out).lines();
    loop {
        let line = lines
            .next()
            .expect("the runner printed the page's URL before its stdout ended")
            .expect("read stdout");
        if let Some(at) = line.find("http://127.0.0.1:") {
            let url = line[at..].split_whitespace().next().unwrap_or_default();
            // Keep reading the rest in the background, so the runner never blocks on a pipe.
            std::thread::spawn(move || for _ in lines {});
            return url.to_owned();
        }
    }
}

/// `(port, token)` of a page URL.
pub(crate) fn parts(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://127.0.0.1:").expect("a local URL");
    let (port, query) = rest.split_once('/').expect("a path");
    let token = query.split("token=").nth(1).expect("a token");
    (port.parse().expect("a port"), token.to_owned())
}

/// `runner serve` started by [`Sandbox::serve`]: the page's address it printed, and the
/// process (killed when this is dropped — bind `child` to a name, not `_`, to keep it).
pub(crate) struct Served {
    /// The page's URL, its token in it.
    pub url: String,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// The page's token.
    pub token: String,
    /// `127.0.0.1:PORT`: the Host header it accepts.
    pub host: String,
    /// The `runner serve` process.
    pub child: Killed,
}

impl Sandbox {
    /// Start `runner serve OUTPUTS…` in the sandbox and read the page's address it prints.
    pub(crate) fn serve(&self, outputs: &[&str]) -> Served {
        let args: Vec<&str> = std::iter::once("serve")
            .chain(outputs.iter().copied())
            .collect();
        let mut child = Killed(
            self.cmd(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn runner serve"),
        );
        let url = url_from(&mut child.0);
        let (port, token) = parts(&url);
        Served {
            host: format!("127.0.0.1:{port}"),
            url,
            port,
            token,
            child,
        }
    }
}
