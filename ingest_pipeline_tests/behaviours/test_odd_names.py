"""Names are data: a folder whose file names are not UTF-8, hold a newline, a tab, a leading
``-`` or terminal escape sequences ingests every document through the command line, keeps
each name so the next run finds the same file, and prints no raw control character."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline_tests.conftest import write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
ESCAPE_NAME = "\x1b[31mred\x1b]0;title\x07.txt"
NAMES = {
    os.fsdecode(b"bad\xff\xfename.txt"): "Greenhouse vents open at noon.\n",
    os.fsdecode(b"dir\xe9") + "/inner.txt": "The irrigation pump runs at dawn.\n",
    "new\nline.txt": "Whitefly traps are checked every Monday.\n",
    "tab\tname.txt": "Shade screens close in strong sun.\n",
    "-dash.txt": "Seed trays sit on the heated bench.\n",
    ESCAPE_NAME: "Aphids are washed off with soapy water.\n",
    "plain.txt": "Tomatoes are tied to their canes weekly.\n",  # the control file
}


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, "--data", str(data), *args],
        capture_output=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )


def _raw_controls(output: bytes) -> list[str]:
    """Control characters other than the line ends of the output itself."""
    text = output.decode("utf-8")  # the output is valid UTF-8 (no byte of a name leaks)
    return sorted({repr(c) for c in text if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0})


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    data = tmp_path_factory.mktemp("names") / "data"
    for name, text in NAMES.items():
        write(data / "sources" / name, text)
    first = _cli(data, "ingest", "--depth", "3")
    return data, first


def test_every_odd_name_is_ingested_and_printed_escaped(ingested):
    data, first = ingested
    assert first.returncode == 0, first.stderr.decode("utf-8", "replace")[-3000:]
    output = first.stdout + first.stderr
    assert b"7 documents:  7 new  0 changed  0 cached  0 failed" in output
    assert _raw_controls(output) == []
    text = output.decode("utf-8")
    assert "bad\\xff\\xfename.txt" in text and "\\x1b[31mred\\x1b]0;title\\x07.txt" in text
    assert "new\\nline.txt" in text and "tab\\tname.txt" in text and "-dash.txt" in text
    assert "dir\\xe9/" in text  # the tree's folder line


def test_a_name_round_trips_so_the_next_run_finds_the_same_file(ingested):
    data, _ = ingested
    again = _cli(data, "ingest")
    assert again.returncode == 0, again.stderr.decode("utf-8", "replace")[-3000:]
    assert b"7 documents:  0 new  0 changed  7 cached  0 failed" in again.stdout + again.stderr
    current = _cli(data, "ingest", "--json")  # every document's current marker holds: no run at all
    assert current.returncode == 0 and json.loads(current.stdout)["run_ids"] == [], current.stdout[-2000:]
    write(data / "sources" / os.fsdecode(b"bad\xff\xfename.txt"), "Greenhouse vents open at one.\n")
    changed = _cli(data, "ingest")
    assert b"7 documents:  0 new  1 changed  6 cached  0 failed" in changed.stdout + changed.stderr
    rows = _cli(data, "query", "select path, uri from sources order by path", "--json")
    assert rows.returncode == 0, rows.stderr
    stored = rows.stdout.decode("utf-8")
    assert "fs-bytes:" in stored and "%FF%FEname.txt" in stored and "%E9/inner.txt" in stored


def test_search_and_inspect_print_names_escaped(ingested):
    data, _ = ingested
    found = _cli(data, "search", "aphids soapy water")
    assert found.returncode == 0, found.stderr
    assert b"\\x1b[31mred" in found.stdout and _raw_controls(found.stdout + found.stderr) == []
    for stage in ("sources", "chunks"):
        shown = _cli(data, "inspect", ESCAPE_NAME, "--stage", stage, "--no-color")
        assert shown.returncode == 0, shown.stderr
        assert b"\\x1b[31mred" in shown.stdout and _raw_controls(shown.stdout + shown.stderr) == []


def test_a_name_that_cannot_be_handled_is_one_errors_row_and_the_rest_goes_on(data_dir, monkeypatch):
    """No name a Linux file system allows fails to be named today, so the failure is made
    here, in the one function that names files: the folder's other file is ingested, the
    refused one is one failed document with one errors row (stage ``sources``) that says why,
    under its escaped name."""
    from ingest_pipeline import documents
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for

    write(data_dir / "sources" / "plain.txt", NAMES["plain.txt"])
    write(data_dir / "sources" / "odd\x1bname.txt", NAMES["plain.txt"])
    naming = documents.entry_for

    def refusing(settings, path, base=None):
        if "odd" in path:
            raise OSError("File name too long")
        return naming(settings, path, base=base)

    monkeypatch.setattr(documents, "entry_for", refusing)
    parts = parts_for(str(data_dir))
    report = ingest(parts)
    assert [report.paths[d] for d in report.new] == ["plain.txt"]
    failed = {report.paths[d]: errs for d, errs in report.failed.items()}
    assert list(failed) == ["odd\x1bname.txt"], failed
    (error,) = failed["odd\x1bname.txt"]
    assert error["stage"] == "sources" and "OSError: File name too long" in error["reason"]
    import duckdb

    rows = duckdb.sql(
        f"select stage, path, reason from read_parquet('{data_dir}/lake/errors/**/*.parquet')"
    ).fetchall()
    assert len(rows) == 1 and rows[0][:2] == ("sources", "odd\x1bname.txt"), rows
    assert "cannot be handled" in rows[0][2], rows
