"""Scaling out on one machine: documents per minute of one run against two concurrent
runs, the object store (moto's S3 server on loopback) against local disk, and where the
time goes (step durations from the instance, S3 requests from the server's log).

All three ingests run in this one invocation on the same born-digital corpus PDFs, each
as fresh run processes (model load included), on a Postgres-backed instance for the
object-store runs; ratios are against the local single run.

    .venv/bin/python bench/scale_bench.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PDFS = [
    "docling__2305.03393v1-pg9.pdf",
    "docling__amt_handbook_sample.pdf",
    "docling__code_and_formula.pdf",
    "docling__multi_page.pdf",
    "docling__right_to_left_01.pdf",
    "pypdf-samples__multicolumn.pdf",
]


def launch(data: str, first: str, last: str, env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ingest_pipeline_tests.run_range", data, first, last],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def step_seconds(instance, run_ids) -> dict[str, float]:
    from dagster import DagsterEventType

    totals: dict[str, float] = defaultdict(float)
    for run_id in run_ids:
        starts = {}
        for record in instance.all_logs(run_id):
            event = record.dagster_event
            if event is None:
                continue
            if event.event_type == DagsterEventType.STEP_START:
                starts[event.step_key] = record.timestamp
            elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                key = event.step_key.split("[")[0].split("__")[0]
                totals[key] += record.timestamp - starts.get(event.step_key, record.timestamp)
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def ingest_case(name, data, env, home, halves, tmp) -> dict:
    from dagster import DagsterInstance

    os.environ.update({k: v for k, v in env.items()})
    os.environ["DAGSTER_HOME"] = str(home)
    instance = DagsterInstance.get()
    from ingest_pipeline.documents import collect
    from ingest_pipeline.partitions import DOCUMENTS
    from ingest_pipeline.resources import parts_for

    p = parts_for(data)
    entries = collect(p.settings, [str(tmp / "pdfs")])
    p.store.save_inventory(entries)
    instance.add_dynamic_partitions(DOCUMENTS, [e.document_id for e in entries])
    ordered = instance.get_dynamic_partitions(DOCUMENTS)
    batches = [ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]] if halves else [ordered]
    started = time.perf_counter()
    procs = [
        launch(data, b[0], b[-1], {**os.environ}, tmp / f"{name}-{i}.log") for i, b in enumerate(batches)
    ]
    codes = [p.wait() for p in procs]
    seconds = time.perf_counter() - started
    assert codes == [0] * len(procs), [
        (tmp / f"{name}-{i}.log").read_text()[-2000:] for i in range(len(procs))
    ]
    runs = [
        r.dagster_run.run_id
        for r in instance.get_run_records()
        if r.dagster_run.job_name == "ingest_documents"
    ]
    return {
        "case": name,
        "documents": len(ordered),
        "runs": len(batches),
        "seconds": round(seconds, 1),
        "documents_per_minute": round(len(ordered) / seconds * 60, 2),
        "step_seconds": {k: round(v, 1) for k, v in step_seconds(instance, runs).items()},
    }


def main() -> None:
    import boto3

    from ingest_pipeline_tests.conftest import CORPUS
    from ingest_pipeline_tests.servers import start_postgres, start_s3

    tmp = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    (tmp / "pdfs").mkdir()
    for name in PDFS:
        shutil.copy(CORPUS / "files" / "pdf" / name, tmp / "pdfs" / name)
    pg = start_postgres("bench-pg-password")
    s3 = start_s3(tmp)
    results = []
    try:
        s3_env = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": s3.endpoint,
            "INGEST_LOCAL": str(tmp / "local_cache"),
        }
        boto3.client(
            "s3",
            endpoint_url=s3.endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="x",
            region_name="us-east-1",
        ).create_bucket(Bucket="bench")
        # Local disk, one run: the anchor (SQLite instance of the storage root).
        local = tmp / "local" / "data"
        (local / "sources").mkdir(parents=True)
        from ingest_pipeline.instance.home import ensure_dagster_home

        results.append(
            ingest_case(
                "local disk, 1 run",
                str(local),
                {},
                ensure_dagster_home(str(local / "dagster_home")),
                False,
                tmp,
            )
        )
        for i, halves in enumerate((False, True)):
            home = tmp / f"home{i}"
            home.mkdir()
            shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
            db = f"bench{i}"
            subprocess.run(
                [
                    shutil.which("psql") or "psql",
                    "-h",
                    pg.host,
                    "-p",
                    str(pg.port),
                    "-U",
                    pg.user,
                    "-d",
                    "postgres",
                    "-c",
                    f"CREATE DATABASE {db}",
                ],
                env={**os.environ, "PGPASSWORD": pg.password},
                check=True,
                capture_output=True,
            )
            before = s3.log.read_text().count('HTTP/1.1"')
            env = {**s3_env, **pg.env(), "DAGSTER_PG_DB": db}
            case = ingest_case(
                f"S3 + Postgres, {2 if halves else 1} run{'s' if halves else ''}",
                f"s3://bench/run{i}",
                env,
                home,
                halves,
                tmp,
            )
            case["s3_requests"] = s3.log.read_text().count('HTTP/1.1"') - before
            results.append(case)
    finally:
        s3.stop()
        pg.stop()
    anchor = results[0]["documents_per_minute"]
    for r in results:
        r["vs_local_single_run"] = round(r["documents_per_minute"] / anchor, 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
