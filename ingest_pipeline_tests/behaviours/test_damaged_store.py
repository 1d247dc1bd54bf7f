"""A damaged store repairs itself or says so, through the command line: a LanceDB table
deleted by hand, a Parquet file of the lake truncated. ``query`` and ``search`` name the
damage in one line with its fix (never an empty answer, never a traceback), and the next
``ingest`` restores what is missing from what is still true."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline_tests.conftest import write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
NOTES = {
    "vents.txt": "Greenhouse vents open when the air passes twenty-six degrees.\n",
    "pump.txt": "The irrigation pump runs for ten minutes at dawn.\n",
    "aphids.txt": "Aphids are washed off the peppers with soapy water.\n",
}


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)


def _one_clear_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("damaged store: "), done.stderr
    assert "run `ingest-pipeline ingest` to repair it" in lines[0]
    return lines[0]


@pytest.fixture
def ingested(tmp_path):
    data = tmp_path / "data"
    for name, text in NOTES.items():
        write(data / "sources" / name, text)
    first = _cli(data, "ingest")
    assert first.returncode == 0, first.stderr[-3000:]
    return data


def _count(data: Path) -> str:
    done = _cli(data, "query", "select count(*) as n from chunks", "--json")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_lancedb_table_deleted_by_hand_is_named_then_rebuilt(ingested):
    data = ingested
    tables = [p for p in (data / "lancedb").iterdir() if p.name.endswith(".lance")]
    assert tables
    for table in tables:
        shutil.rmtree(table)
    line = _one_clear_line(_cli(data, "search", "soapy water on peppers"))
    assert "LanceDB table 'chunks_retrieval' is missing" in line and "3 indexed documents" in line
    again = _cli(data, "ingest")
    assert again.returncode == 0, again.stderr[-3000:]
    found = _cli(data, "search", "soapy water on peppers")
    assert found.returncode == 0 and "aphids.txt" in found.stdout.splitlines()[0], found.stdout


def test_a_truncated_lake_file_is_named_then_set_aside_and_rebuilt(ingested):
    data = ingested
    before = _count(data)
    damaged = sorted((data / "lake" / "chunks" / "retrieval").glob("pump-*.parquet"))
    assert len(damaged) == 1
    os.truncate(damaged[0], damaged[0].stat().st_size // 2)
    rel = str(damaged[0].relative_to(data / "lake"))
    assert rel in _one_clear_line(_cli(data, "query", "select count(*) from chunks"))
    assert rel in _one_clear_line(_cli(data, "search", "irrigation pump at dawn"))
    again = _cli(data, "ingest")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"repaired {rel}" in again.stdout + again.stderr
    assert list((data / "lake" / "_damaged").rglob("pump-*.damaged"))  # kept for a person to look at
    assert _count(data) == before
    found = _cli(data, "search", "irrigation pump at dawn")
    assert found.returncode == 0 and "pump.txt" in found.stdout.splitlines()[0], found.stdout


def test_a_file_changed_while_its_ingest_runs_is_read_anew_by_the_next_ingest(data_dir, monkeypatch):
    """The file is rewritten between its observation and its reading: that run fails it alone
    (the bytes it observed are gone), and the next ingest reads the new bytes, not a marker that
    calls the document current."""
    from ingest_pipeline import stages
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.stages import sources

    changing = write(data_dir / "sources" / "log.txt", "Tomatoes were planted in March.\n")
    write(data_dir / "sources" / "pump.txt", NOTES["pump.txt"])
    observe = sources.observe_source

    def observe_then_change(settings, store, document, *args, **kwargs):
        outcome = observe(settings, store, document, *args, **kwargs)
        if document.startswith("log-txt"):
            changing.write_text("Cucumbers replaced the tomatoes in June.\n")
        return outcome

    monkeypatch.setattr(sources, "observe_source", observe_then_change)
    monkeypatch.setattr(stages, "observe_source", observe_then_change)
    first = ingest(parts_for(str(data_dir)))
    failed = {first.paths[d]: errs for d, errs in first.failed.items()}
    assert (
        list(failed) == ["log.txt"] and "changed since they were observed" in failed["log.txt"][0]["reason"]
    )
    assert [first.paths[d] for d in first.new] == ["pump.txt"]
    monkeypatch.setattr(sources, "observe_source", observe)
    monkeypatch.setattr(stages, "observe_source", observe)
    second = ingest(parts_for(str(data_dir)))
    assert second.failed == {} and [second.paths[d] for d in second.new] == ["log.txt"]
    found = _cli(data_dir, "search", "cucumbers in June")
    assert found.returncode == 0 and "log.txt" in found.stdout.splitlines()[0], found.stdout
