"""A run SIGKILLed inside each phase — reading, chunk maps, embedding, LanceDB writes —
serves each document at its old or its new version meanwhile, and the next plain
``ingest`` ends with exactly the rows of an uninterrupted run, no process left behind.

The kill comes from ``ingest_pipeline.runtime.faults.crash_point``: the CLI subprocess runs with
``INGEST_CRASH_AT=<phase>:<n>`` and kills itself the n-th time it passes that point (the
hook is inert without the variable).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ingest_pipeline_tests.conftest import pdf_bytes, write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
TOKEN_VAR = "INGEST_TEST_PROCESS_TOKEN"
PHASES = ["reading:2", "chunk_maps:2", "embedding:2", "lancedb:2"]


def _ours(token: str) -> list[int]:
    """Pids of live processes started under this token (children inherit the environment)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if f"{TOKEN_VAR}={token}".encode() in handle.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat") as stat:
                        if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def _left_behind(token: str, grace: float = 10.0) -> list[int]:
    deadline = time.monotonic() + grace
    while (pids := _ours(token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pids


def ingest(data: Path, sources: Path, token: str, crash_at: str | None = None, timeout: int = 1200):
    env = {**os.environ, TOKEN_VAR: token}
    env.pop("INGEST_CRASH_AT", None)
    if crash_at:
        env["INGEST_CRASH_AT"] = crash_at
    try:
        return subprocess.run(
            [CLI, "--data", str(data), "ingest", str(sources), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"ingest did not finish in {timeout} s (crash_at={crash_at}; a run killed before it may "
            f"hold the lancedb slot): {(exc.stderr or b'')[-2000:]!r}"
        )


def lancedb_rows(data: Path) -> dict[str, list[dict]]:
    import lancedb

    db = lancedb.connect(str(data / "lancedb"))
    listing = db.list_tables()
    out = {}
    for name in sorted(getattr(listing, "tables", listing)):
        table = db.open_table(name).to_arrow().drop_columns(["run_id"])
        rows = table.to_pylist()
        for row in rows:
            row["vector"] = None if row["vector"] is None else [round(v, 5) for v in row["vector"]]
        out[name] = sorted(rows, key=lambda r: r["chunk_id"])
    return out


def lake_state(data: Path) -> tuple[set[str], set[str], list[tuple]]:
    """Lake Parquet files (the embedding cache by content: its shards are named per run),
    cached text hashes, and every chunk id per profile."""
    import duckdb
    import pyarrow.parquet as pq

    lake = data / "lake"
    files, cached = set(), set()
    for path in lake.rglob("*.parquet"):
        rel = str(path.relative_to(lake))
        if rel.startswith("embedding_cache/"):
            cached |= set(pq.read_table(path, columns=["text_sha256"]).column(0).to_pylist())
        else:
            files.add(rel)
    con = duckdb.connect()
    ids = con.sql(
        f"select profile, document_id, chunk_id from read_parquet('{lake}/chunks/**/*.parquet') order by all"
    ).fetchall()
    return files, cached, ids


def served_by_document(rows: dict[str, list[dict]]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for table, table_rows in rows.items():
        for row in table_rows:
            out.setdefault((table, row["document_id"]), set()).add(row["chunk_id"])
    return out


def _versions(sources: Path, version: int) -> None:
    """v1, then v2: one file edited in part, one rewritten, one added, two untouched."""
    sections = [
        f"## Section {i}\n\nParagraph {i} on irrigation, soil and greenhouse climate, item {i}.\n"
        for i in range(6)
    ]
    if version == 2:
        sections[2] = "## Section 2\n\nRewritten: drip lines replace the sprinklers in bed two.\n"
    write(sources / "guide.md", "# Growing guide\n\n" + "\n".join(sections))
    write(
        sources / "notes.txt",
        "Pump serviced in March.\n\nFilters changed.\n"
        if version == 1
        else "Pump replaced in October after the seal failed.\n\nValve 3 leaks; order a spare.\n",
    )
    write(sources / "prices.csv", "item,price\nseed tray,2.50\ncompost,7.80\n")
    write(
        sources / "report.pdf",
        pdf_bytes(
            [
                ["Quarterly report", "Yield rose by eight percent."],
                ["Outlook", "Tomatoes and basil next season."],
            ]
        ),
    )
    if version == 2:
        write(sources / "new_bed.md", "# New bed\n\nRaised bed with lettuce and radish.\n")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A root ingested at v1 and, from a copy of it, the uninterrupted v2 run."""
    base = tmp_path_factory.mktemp("crash")
    sources = base / "sources"
    _versions(sources, 1)
    token = uuid.uuid4().hex
    first = ingest(base / "v1", sources, token)
    assert first.returncode == 0, first.stderr[-3000:]
    _versions(sources, 2)
    shutil.copytree(base / "v1", base / "reference")
    second = ingest(base / "reference", sources, token)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not _left_behind(token)
    return base, sources


@pytest.mark.parametrize("crash_at", PHASES)
def test_a_run_killed_in_a_phase_recovers_to_the_uninterrupted_rows(prepared, crash_at):
    base, sources = prepared
    data = base / crash_at.replace(":", "_")
    shutil.copytree(base / "v1", data)
    old = served_by_document(lancedb_rows(base / "v1"))
    new = served_by_document(lancedb_rows(base / "reference"))
    token = uuid.uuid4().hex
    try:
        killed = ingest(data, sources, token, crash_at=crash_at)
        assert killed.returncode == -signal.SIGKILL, (
            f"the crash point was not reached: {killed.stderr[-2000:]}"
        )
        assert not _left_behind(token), "a process of the killed run outlived it"

        # Meanwhile each document is served at its old version or its new one, never a mix.
        for key, ids in served_by_document(lancedb_rows(data)).items():
            assert ids in (old.get(key), new.get(key)), f"{key} serves a mix after a kill at {crash_at}"

        rerun = ingest(data, sources, token)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert not _left_behind(token), "a process of the re-run outlived it"
    finally:
        for pid in _ours(token):
            os.kill(pid, signal.SIGKILL)

    assert lancedb_rows(data) == lancedb_rows(base / "reference")
    files, cached, ids = lake_state(data)
    ref_files, ref_cached, ref_ids = lake_state(base / "reference")
    assert ids == ref_ids
    assert files == ref_files
    assert cached == ref_cached
