//! The sidecar of a shard's output, `<output>.shard.json`: which batch it belongs to (a
//! fingerprint of input, instruction and schema), which shard it is, and the input row
//! numbers of its rows, so `runner merge` can refuse mixed batches and missing shards and
//! restore the input order.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::options::selection::Shard;
use crate::run::events::Reporter;
use crate::source::input::InputTable;

/// `<output>.shard.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ShardMeta {
    /// Format version.
    pub v: u32,
    /// FNV-1a over the input bytes, the instruction, the schema and the id column.
    pub fingerprint: String,
    /// This shard, 1-based.
    pub k: u32,
    /// Number of shards.
    pub n: u32,
    /// Input row numbers (1-based) of the output's rows, in order.
    pub rows: Vec<u64>,
}

/// The sidecar path of an output file.
pub(crate) fn path_for(output: &Path) -> PathBuf {
    let mut name = output
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".shard.json");
    output.with_file_name(name)
}

impl ShardMeta {
    /// Write the sidecar of `output` atomically.
    ///
    /// Errors: the file cannot be written.
    pub(crate) fn write(&self, output: &Path) -> Result<()> {
        let text = serde_json::to_vec(self)
            .map_err(|e| Error::Environment(format!("cannot encode the shard sidecar: {e}")))?;
        crate::fsutil::write_atomic(&path_for(output), &text)
    }

    /// Read the sidecar of `output`.
    ///
    /// Errors: missing or invalid sidecar (exit 2), naming the file.
    pub(crate) fn read(output: &Path) -> Result<ShardMeta> {
        let p = path_for(output);
        let text = std::fs::read_to_string(&p).map_err(|e| {
            Error::input_at(output, None, format!(
                "cannot read {} ({e}); merge takes the outputs of `runner batch --shard K/N`, each with its sidecar",
                p.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| {
            Error::input_at(
                &p,
                Some(e.line() as u64),
                format!("not a shard sidecar: {e}"),
            )
        })
    }
}

/// The sink that writes a shard's sidecar beside its output.
pub(crate) struct ShardSidecar {
    /// The shard's output file.
    pub output: PathBuf,
    /// The batch fingerprint ([`ShardMeta::fingerprint`]).
    pub fingerprint: String,
    /// This shard.
    pub shard: Shard,
    /// The scanned input, streamed again for the row numbers of the shard.
    pub table: InputTable,
}

impl Reporter for ShardSidecar {
    /// Written as the run starts too: the output is kept current while the run goes on, and
    /// an output a `kill -9` left must say which shard it holds, or the resume of that shard
    /// would be refused as replacing another slice.
    fn event(&mut self, event: &crate::run::events::Event) {
        if let crate::run::events::Event::RunStarted { .. } = event
            && let Err(e) = self.write()
        {
            tracing::warn!("{e}; it is written when the run ends");
        }
    }
}

impl Sink for ShardSidecar {
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new(
            "shard sidecar",
            path_for(&self.output),
            "--output",
        )]
    }

    fn finish(&mut self, _run: &mut RunEnd<'_>) -> Result<()> {
        self.write()
    }
}

impl ShardSidecar {
    /// Write the sidecar of the output: the fingerprint, the shard and its rows.
    ///
    /// Errors: the input's snapshot cannot be read, or the sidecar written.
    fn write(&self) -> Result<()> {
        let mut rows = Vec::new();
        for row in self.table.rows()? {
            let row = row?;
            if self.shard.contains(&row.id) {
                rows.push(row.number);
            }
        }
        ShardMeta {
            v: 1,
            fingerprint: self.fingerprint.clone(),
            k: self.shard.k,
            n: self.shard.n,
            rows,
        }
        .write(&self.output)
    }
}
