//! Runs `scripts/bench.sh --smoke` (tiny sizes, no timing targets) so the benchmark script
//! cannot rot. The real numbers live in BENCHMARKS.md; nothing here asserts a time.

use std::process::Command;

#[test]
fn the_benchmark_script_runs_end_to_end_at_smoke_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench.sh"))
        .arg("--smoke")
        .env("RUNNER_BIN", env!("CARGO_BIN_EXE_runner"))
        .env("BENCH_DIR", dir.path())
        .output()
        .expect("run bench.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench.sh --smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in ["overhead", "makespan", "memory", "start-up", "smoke run ok"] {
        assert!(stdout.contains(section), "no {section} line in:\n{stdout}");
    }
}
