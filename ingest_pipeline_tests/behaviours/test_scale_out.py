"""Past one machine, as far as this one allows: PostgreSQL and an S3 server on loopback,
the production dagster.yaml, two ingest runs at once onto the object store, and the same
chunk ids as a local single-process ingest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline_tests.conftest import CORPUS, requires_corpus
from ingest_pipeline_tests.servers import start_postgres, start_s3

ROOT = Path(__file__).resolve().parents[2]
# The corpus's PDFs but three: the encrypted and broken ones must fail the same way on
# both sides, the scanned one is read by OCR on both. Left out, because they would only
# make every side longer and prove nothing about storage that the others do not
# (test_cli_corpus ingests all three): the 117-page GeoTopo atlas, the 18-page Redbook
# sample and the 4-page Nemotron scan, read by OCR like the one-page scan kept here.
LEFT_OUT = {
    "pypdf-samples__GeoTopo-komprimiert.pdf",
    "docling__redp5110_sampled.pdf",
    "docling__nemotron_multipage.pdf",
}
PDFS = sorted(path.name for path in (CORPUS / "files" / "pdf").glob("*.pdf") if path.name not in LEFT_OUT)
S3_SECRET = "Scale-0ut-S3-secret-9f2c"
PG_PASSWORD = "Scale-0ut-pg-password-41d7"


@pytest.fixture
def servers(tmp_path):
    pg = start_postgres(PG_PASSWORD)
    try:
        s3 = start_s3(tmp_path)
    except BaseException:
        pg.stop()
        raise
    try:
        yield pg, s3
    finally:
        s3.stop()
        pg.stop()


def _chunk_ids(data: str) -> list[str]:
    from ingest_pipeline.settings import load_settings
    from ingest_pipeline.storage.catalog import query
    from ingest_pipeline.storage.lake import Lake

    lake = Lake(load_settings(data).lake_root)
    return sorted(query(lake, "SELECT chunk_id FROM chunks").column("chunk_id").to_pylist())


def _cli_query(cwd: Path, root: str, sql: str) -> subprocess.CompletedProcess:
    """``ingest-pipeline --data ROOT query --json SQL``: the installed command, in its own process."""
    command = Path(sys.executable).with_name("ingest-pipeline")
    return subprocess.run(
        [str(command), "--data", root, "query", "--json", sql],
        cwd=cwd,
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _query_cli_counts_as_the_local_run(tmp_path: Path, remote: str, local: str) -> None:
    """The catalog on the s3 root: httpfs cannot load here, so the views of the same names are
    pyarrow datasets over the bucket's Parquet; the real CLI counts what the local run counts."""
    import json

    from ingest_pipeline.storage.catalog import VIEWS

    views = (*VIEWS, "chunk_lineage")
    counts = " UNION ALL ".join(f"SELECT '{v}' AS view, count(*) AS n FROM {v}" for v in views)
    counts += " UNION ALL SELECT 'profile ' || profile, count(*) FROM chunks GROUP BY profile ORDER BY view"
    answers = {}
    for root in (remote, local):
        out = _cli_query(tmp_path, root, counts)
        assert out.returncode == 0, out.stderr[-2000:]
        answers[root] = json.loads(out.stdout)
    assert not (tmp_path / "s3:").exists()  # the URI was not taken for a local folder
    assert answers[remote] == answers[local]
    by_view = {row["view"]: row["n"] for row in answers[remote]}
    assert all(by_view[v] > 0 for v in ("sources", "pages", "claims", "chunks", "embeddings", "errors"))
    from ingest_pipeline.storage.catalog import _httpfs_available

    assert not _httpfs_available()  # so those views were the pyarrow datasets, and DuckDB ...
    out = _cli_query(tmp_path, remote, "SELECT current_setting('enable_external_access') AS external_access")
    assert out.returncode == 0 and json.loads(out.stdout) == [{"external_access": False}], out.stderr[-2000:]
    # ... needs no file access of its own on the bucket: a local file stays unread.
    secret = tmp_path / "not_in_the_lake.txt"
    secret.write_text("local-file-marker-5d1e\n")
    out = _cli_query(tmp_path, remote, f"SELECT * FROM read_text('{secret}')")
    assert out.returncode == 1 and "local-file-marker" not in out.stdout + out.stderr
    assert "Permission" in out.stderr


@requires_corpus
def test_two_concurrent_runs_on_postgres_and_s3_cut_the_chunks_of_a_local_run(tmp_path, servers, monkeypatch):
    pg, s3 = servers
    sources = tmp_path / "pdfs"
    sources.mkdir()
    for name in PDFS:
        shutil.copy(CORPUS / "files" / "pdf" / name, sources / name)

    # The anchor: one process, local disk, the SQLite instance.
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

    local = tmp_path / "local"
    (local / "sources").mkdir(parents=True)
    anchor = fresh_pipeline(local)
    report = ingest(anchor, [str(sources)])
    assert len(report.new) + len(report.failed) == len(PDFS) and len(report.new) > len(PDFS) // 2
    from ingest_pipeline.storage.catalog import query as local_query

    errors_locally = sorted(
        {
            os.path.basename(p)
            for p in local_query(anchor.lake, "SELECT path FROM errors").column("path").to_pylist()
        }
    )
    expected = _chunk_ids(str(local))
    assert expected

    # The object store and the production instance, through the environment only.
    env = {
        "AWS_ACCESS_KEY_ID": "scale-test",
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3.endpoint,
        **pg.env(),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("INGEST_LOCAL", str(tmp_path / "local_cache"))
    import boto3

    boto3.client("s3", endpoint_url=s3.endpoint).create_bucket(Bucket="lake")
    data = "s3://lake/scale"

    from dagster import DagsterInstance

    from ingest_pipeline.commands.ingest import QUIET
    from ingest_pipeline.definitions import CATALOG_JOB, build_definitions
    from ingest_pipeline.documents import collect
    from ingest_pipeline.partitions import DOCUMENTS
    from ingest_pipeline.resources import parts_for

    instance = DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    pipeline = parts_for(data)
    assert pipeline.settings.lake_root == "s3://lake/scale/lake"
    entries = collect(pipeline.settings, [str(sources)])
    pipeline.store.save_inventory(entries)
    instance.add_dynamic_partitions(DOCUMENTS, [e.document_id for e in entries])
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    half = len(keys) // 2
    batches = [keys[:half], keys[half:]]

    logs = []
    procs = []
    # Two runs, each in a process of its own with the job's executor (in process: a step
    # process per step would only add Dagster's start-up to every step; test_daemon runs
    # the multiprocess executor under the daemon). Each has its own PDFium and model, and
    # their LanceDB steps wait for the pool's one slot, kept in PostgreSQL.
    for i, batch in enumerate(batches):
        log = tmp_path / f"run{i}.log"
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "ingest_pipeline_tests.run_range", data, batch[0], batch[-1]],
                cwd=ROOT,
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
                env={**os.environ},
            )
        )
    codes = [p.wait(timeout=900) for p in procs]
    assert codes == [0, 0], [_failure_lines(log.read_text()) for log in logs]

    runs = instance.get_run_records()
    ingest_runs = [r for r in runs if r.dagster_run.job_name == "ingest_documents"]
    assert len(ingest_runs) == 2
    (a, b) = sorted(ingest_runs, key=lambda r: r.start_time)
    assert b.start_time < a.end_time, "the two runs did not overlap in time"
    assert {r.dagster_run.tags["ingest_pipeline/work"] for r in ingest_runs} == {"ingest"}
    step_pids = [
        {
            rec.dagster_event.pid
            for rec in instance.all_logs(r.dagster_run.run_id)
            if rec.dagster_event and rec.dagster_event.event_type_value == "STEP_START"
        }
        for r in ingest_runs
    ]
    assert [len(p) for p in step_pids] == [1, 1] and step_pids[0] != step_pids[1]  # a process per run
    # The lancedb pool's slots live in PostgreSQL: one slot, taken by both runs in turn.
    assert instance.event_log_storage.get_concurrency_info("lancedb").slot_count == 1

    build_definitions(pipeline.settings).resolve_job_def(CATALOG_JOB).execute_in_process(
        instance=instance, resources=pipeline.resources, run_config=QUIET
    )

    got = _chunk_ids(data)
    assert got == expected  # the same chunks, none lost, none twice
    _query_cli_counts_as_the_local_run(tmp_path, data, str(local))
    # LanceDB on the bucket holds exactly the served profile's chunks, once each.
    served = pipeline.settings.default_profile
    from ingest_pipeline.storage.catalog import query

    rows = pipeline.index.open(served).to_arrow().column("chunk_id").to_pylist()
    in_lake = (
        query(pipeline.lake, f"SELECT chunk_id FROM chunks WHERE profile = '{served}'")
        .column("chunk_id")
        .to_pylist()
    )
    assert sorted(rows) == sorted(in_lake) and len(set(rows)) == len(rows)
    errors = query(pipeline.lake, "SELECT path FROM errors").column("path").to_pylist()
    assert sorted({os.path.basename(p) for p in errors}) == errors_locally  # the same documents fail

    # Credentials nowhere: not in any object of the bucket, the instance database or a log.
    s3c = boto3.client("s3", endpoint_url=s3.endpoint)
    objects = [
        o["Key"]
        for page in s3c.get_paginator("list_objects_v2").paginate(Bucket="lake")
        for o in page.get("Contents", [])
    ]
    assert any(k.startswith("scale/lancedb/") for k in objects) and any(
        k.startswith("scale/lake/") for k in objects
    )
    for key in objects:
        body = s3c.get_object(Bucket="lake", Key=key)["Body"].read()
        assert S3_SECRET.encode() not in body and PG_PASSWORD.encode() not in body, key
    dump = pg.dump()
    assert b"ingest_documents" in dump  # the dump really holds the runs
    assert S3_SECRET.encode() not in dump and PG_PASSWORD.encode() not in dump
    texts = [log.read_bytes() for log in logs] + [s3.log.read_bytes(), pg.log.read_bytes()]
    texts += [p.read_bytes() for p in home.rglob("*") if p.is_file() and p.name != "dagster.yaml"]
    for text in texts:
        assert S3_SECRET.encode() not in text and PG_PASSWORD.encode() not in text


def test_duckdb_reads_s3_through_httpfs_only_if_installed_with_a_temporary_secret_from_the_environment():
    import duckdb

    from ingest_pipeline.storage.catalog import load_httpfs, s3_secret_sql

    sql = s3_secret_sql(
        {
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s'x",
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/",
        }
    )
    assert sql.startswith("CREATE OR REPLACE TEMPORARY SECRET")  # never persisted to disk
    for part in (
        "KEY_ID 'k'",
        "SECRET 's''x'",
        "REGION 'eu-west-1'",
        "ENDPOINT '127.0.0.1:9000'",
        "USE_SSL false",
        "URL_STYLE 'path'",
    ):
        assert part in sql
    assert "KEY_ID" not in s3_secret_sql({"AWS_REGION": "us-east-1"})  # no keys: the provider's chain
    con = duckdb.connect(":memory:")
    loaded = load_httpfs(con)
    autoinstall = con.execute("SELECT current_setting('autoinstall_known_extensions')").fetchall()[0][0]
    assert autoinstall is False  # whatever happens, nothing is downloaded at run time
    if not loaded:
        assert "httpfs" not in {
            r[0]
            for r in con.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()
        }


def _failure_lines(log: str) -> str:
    """What a failed run process said went wrong: its error and exception lines (a
    traceback's last lines are often the database driver's, not the cause), then its tail."""
    said = [ln for ln in log.splitlines() if "Error" in ln or "Exception" in ln or "error:" in ln]
    return "\n".join(said[:40]) + "\n...\n" + log[-1500:]
