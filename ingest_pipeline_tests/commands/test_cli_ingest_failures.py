"""When ``ingest`` dies the tree and totals of what finished are printed before the error,
and a failed catalog refresh is a failure in the summary (SPEC E22/E23/E27), through the
real command line in a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

from ingest_pipeline_tests.conftest import write

# The command line's own main, with the end of each run's batch made to break after the
# first batch finished: the process dies mid-ingest as it would on a lost disk.
DIES_AFTER_FIRST_BATCH = """
import sys
from ingest_pipeline.commands import ingest as ingest_module
from ingest_pipeline.commands.cli import main

calls = []
stop = ingest_module.EmbeddingPrefetch.stop_run


def breaking(run_id):
    calls.append(run_id)
    stop(run_id)
    if len(calls) == 1:
        raise RuntimeError("the disk went away")


ingest_module.EmbeddingPrefetch.stop_run = breaking
sys.exit(main(sys.argv[1:]))
"""


def _two_notes(data: Path) -> None:
    write(data / "sources" / "a.txt", "a note about the greenhouse\n")
    write(data / "sources" / "b.txt", "b note about the orchard\n")
    write(data / "ingest_pipeline.toml", "[dagster]\nrun_batch = 1\n")


def test_a_dying_ingest_prints_what_finished_then_the_error(data_dir):
    _two_notes(data_dir)
    out = subprocess.run(
        [sys.executable, "-c", DIES_AFTER_FIRST_BATCH, "--data", str(data_dir), "ingest", "--no-color"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 1
    assert "error: RuntimeError: the disk went away" in out.stderr
    assert "2 documents:  1 new  0 changed  0 cached  1 failed" in out.stdout, out.stdout
    assert "stopped  RuntimeError: the disk went away" in out.stdout
    as_json = subprocess.run(
        [sys.executable, "-c", DIES_AFTER_FIRST_BATCH, "--data", str(data_dir), "ingest", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["interrupted"] == "RuntimeError: the disk went away"


def test_a_failed_catalog_refresh_is_a_failure_in_the_summary(data_dir):
    _two_notes(data_dir)
    (data_dir / "catalog.duckdb").mkdir()  # the catalog file cannot be written
    cli = str(Path(sys.executable).parent / "ingest-pipeline")
    out = subprocess.run(
        [cli, "--data", str(data_dir), "ingest", "--no-color"], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    assert "failed   step refresh_catalog: run " in out.stdout
    assert "`query` may read stale views" in out.stdout
    assert "2 documents:  2 new" in out.stdout


def test_the_progress_columns_follow_column_order_listed_first(data_dir):  # E19
    write(data_dir / "sources" / "a.txt", "a note about the greenhouse\n")
    write(data_dir / "ingest_pipeline.toml", '[progress]\ncolumn_order = ["Indexing", "Chunking"]\n')
    cli = str(Path(sys.executable).parent / "ingest-pipeline")
    out = subprocess.run([cli, "--data", str(data_dir), "ingest", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    stages = [s["stage"] for s in json.loads(out.stdout)["stages"]]
    assert stages == ["Indexing", "Chunking", "Reading", "Embedding"]
