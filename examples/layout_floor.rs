//! The floor of DESIGN §6b's workspace layout on tokio, for `scripts/bench.sh` section 9:
//! `scripts/layout-floor.c`'s work per item done with `tokio::process`, the async API the
//! runner is built on, and nothing else. It is not the runner and not a way to run a batch.
//!
//! Per item: `mkdir teammates/t<N>/` and its `work/`, the working-context skeleton, a journal
//! line, the agent spawned in its own process group with a 2,600-byte prompt (about the
//! runner's own) on stdin, stdout and stderr on pipes read to their end and `RUNNER_REPORT`
//! naming `work/report.json`; then the report read back, a journal line and a record line
//! appended, the report and skeleton unlinked and both folders removed. 8 at once.
//!
//! Usage: `layout_floor ROWS DIR AGENT [multi|current]` (the runtime's flavour; multi, as the
//! runner's, by default). Exits 0 when every row was recorded.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SLOTS: usize = 8;
const PROMPT_BYTES: usize = 2600;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, rows, dir, agent, rest @ ..] = args.as_slice() else {
        return Err("usage: layout_floor ROWS DIR AGENT [multi|current]".into());
    };
    let rows: usize = rows.parse()?;
    let mut builder = match rest.first().map(String::as_str) {
        None | Some("multi") => tokio::runtime::Builder::new_multi_thread(),
        Some("current") => tokio::runtime::Builder::new_current_thread(),
        Some(other) => return Err(format!("unknown flavour {other}: multi or current").into()),
    };
    let runtime = builder.enable_all().build()?;
    runtime.block_on(run(rows, PathBuf::from(dir), PathBuf::from(agent)))
}

async fn run(rows: usize, dir: PathBuf, agent: PathBuf) -> Result<()> {
    std::fs::create_dir_all(dir.join("teammates"))?;
    let append = |name: &str| -> Result<Arc<Mutex<std::fs::File>>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(name))?;
        Ok(Arc::new(Mutex::new(file)))
    };
    let (journal, record) = (append("journal.jsonl")?, append("completed.jsonl")?);
    let slots = Arc::new(tokio::sync::Semaphore::new(SLOTS));
    let mut items = Vec::with_capacity(rows);
    for item in 0..rows {
        let permit = slots.clone().acquire_owned().await?;
        let folder = dir.join("teammates").join(format!("t{item}"));
        let (journal, record, agent) = (journal.clone(), record.clone(), agent.clone());
        items.push(tokio::spawn(async move {
            let done = one(item, &folder, &agent, &journal, &record).await;
            drop(permit);
            done
        }));
    }
    for item in items {
        item.await??;
    }
    Ok(())
}

async fn one(
    item: usize,
    folder: &Path,
    agent: &Path,
    journal: &Mutex<std::fs::File>,
    record: &Mutex<std::fs::File>,
) -> Result<()> {
    let work = folder.join("work");
    std::fs::create_dir(folder)?;
    std::fs::create_dir(&work)?;
    let skeleton = work.join("working-context.md");
    std::fs::write(
        &skeleton,
        "# Working context\n\n## Goal\n\n## Done so far\n\n## Next\n",
    )?;
    let line = format!("{{\"event\":\"attempt_started\",\"id\":\"{item}\"}}\n");
    lock(journal)?.write_all(line.as_bytes())?;

    let report = work.join("report.json");
    let mut child = tokio::process::Command::new(agent)
        .env("RUNNER_REPORT", &report)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let mut prompt = vec![b'x'; PROMPT_BYTES];
    prompt.extend_from_slice(format!("Item {item}.\n").as_bytes());
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(&prompt).await?;
    drop(stdin);
    let (mut stdout, mut stderr) = (
        child.stdout.take().ok_or("no stdout")?,
        child.stderr.take().ok_or("no stderr")?,
    );
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (read_out, read_err, status) = tokio::join!(
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err),
        child.wait()
    );
    read_out?;
    read_err?;
    status?;

    let text = read_no_follow(&report)?;
    let line = format!("{{\"event\":\"item_finished\",\"id\":\"{item}\",\"report\":{text}}}\n");
    lock(journal)?.write_all(line.as_bytes())?;
    let line = format!("{{\"id\":\"{item}\",\"prompt\":\"Item {item}.\",\"report\":{text}}}\n");
    lock(record)?.write_all(line.as_bytes())?;
    std::fs::remove_file(&report)?;
    std::fs::remove_file(&skeleton)?;
    std::fs::remove_dir(&work)?;
    std::fs::remove_dir(folder)?;
    Ok(())
}

fn lock(file: &Mutex<std::fs::File>) -> Result<std::sync::MutexGuard<'_, std::fs::File>> {
    file.lock().map_err(|_| "a writer panicked".into())
}

/// The report, opened as the runner opens what a teammate wrote: without following links.
fn read_no_follow(path: &Path) -> Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}
