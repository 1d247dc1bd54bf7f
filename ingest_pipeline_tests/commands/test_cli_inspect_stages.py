"""``inspect`` over several stages in one call, and an empty stage that says why (SPEC
E24/E25), through the real command line."""

import subprocess
import sys
from pathlib import Path

from ingest_pipeline.commands.inspection import records_from_jsonl
from ingest_pipeline_tests.conftest import write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def cli(data: Path, *args: str) -> str:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stdout


def test_inspect_shows_several_stages_in_one_call_and_says_why_one_is_empty(data_dir):
    write(data_dir / "sources" / "notes.md", "# Notes\n\nThe orchard needs water in July.\n")
    write(data_dir / "sources" / "blank.txt", "   \n\n")
    cli(data_dir, "ingest", "--json")
    stages = ["--stage", "pages", "--stage", "claims", "--stage", "chunks"]
    records = records_from_jsonl(cli(data_dir, "inspect", "notes.md", *stages, "--format", "jsonl"))
    kinds = [r["record"] for r in records]
    assert kinds[0] == "source" and {"page", "claim", "chunk"} <= set(kinds)
    assert [r["stage"] for r in records if r["record"] == "summary"] == ["pages", "claims", "chunks"]

    blank = records_from_jsonl(cli(data_dir, "inspect", "blank.txt", *stages, "--format", "jsonl"))
    (empty,) = [r for r in blank if r["record"] == "empty" and r["stage"] == "chunks"]
    assert (
        empty["reason"].startswith("no chunks in profile 'retrieval': ") and "not an error" in empty["reason"]
    )
    unused = cli(data_dir, "inspect", "notes.md", "--stage", "claims", "--chunker", "pdf@1")
    assert "no claims from pdf@1: it disclaimed every page of this document" in unused
